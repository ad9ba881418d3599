// The host (CPU fallback) operator library: see cpu_ops.h for the contract and the semantics.
//
// Layout of this file: generic helpers (dtype dispatch, strided iteration, errors), then one
// section per operator family with its dtype check, shape inference and kernel, and at the end
// the op table that ties names to the three functions and the public entry points.
#include "furiosa/compiler/cpu_ops.h"
#include "furiosa/host/quantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <type_traits>

#include "furiosa/core/error.h"

namespace furiosa::compiler {
namespace {

// ---------------------------------------------------------------------------------------------
// Generic helpers
// ---------------------------------------------------------------------------------------------

using OutInfo = std::pair<DType, Shape>;
using OutInfos = std::vector<OutInfo>;
using DtypeList = std::vector<std::optional<DType>>;

[[noreturn]] void fail(const Node& n, ErrorCode code, const std::string& msg) {
  throw Error(code, fmt::format("node '{}' ({}): {}", n.name, n.qualified_op(), msg));
}

// Calls f(T{}) with T the C++ type of `d`.
template <class F>
decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::Float32: return f(float{});
    case DType::UInt8: return f(std::uint8_t{});
    case DType::Int8: return f(std::int8_t{});
    case DType::Int32: return f(std::int32_t{});
    case DType::Int64: return f(std::int64_t{});
  }
  throw Error(ErrorCode::Internal, "cpu_ops: unknown dtype");
}

// Calls f(std::integral_constant<size_t, S>) with S the element size of `d` (1, 4 or 8).
template <class F>
void visit_size(DType d, F&& f) {
  switch (dtype_size(d)) {
    case 1: f(std::integral_constant<std::size_t, 1>{}); return;
    case 4: f(std::integral_constant<std::size_t, 4>{}); return;
    case 8: f(std::integral_constant<std::size_t, 8>{}); return;
    default: throw Error(ErrorCode::Internal, "cpu_ops: unexpected element size");
  }
}

constexpr unsigned bit(DType d) { return 1u << static_cast<unsigned>(d); }
constexpr unsigned kF32 = bit(DType::Float32);
constexpr unsigned kQ8 = bit(DType::UInt8) | bit(DType::Int8);
constexpr unsigned kIdx = bit(DType::Int32) | bit(DType::Int64);
constexpr unsigned kAll = kF32 | kQ8 | kIdx;

std::string mask_names(unsigned mask) {
  std::string s;
  for (DType d : {DType::Float32, DType::UInt8, DType::Int8, DType::Int32, DType::Int64}) {
    if (mask & bit(d)) {
      if (!s.empty()) s += "/";
      s += dtype_name(d);
    }
  }
  return s;
}

// Right-aligned strides of a tensor of shape `in` when iterating a shape of rank `rank` it
// broadcasts to: 0 for missing dims and dims of size 1.
std::vector<std::int64_t> broadcast_strides(const Shape& in, std::size_t rank) {
  std::vector<std::int64_t> s(rank, 0);
  std::int64_t stride = 1;
  for (std::size_t k = 0; k < in.size(); ++k) {
    const std::size_t d = in.size() - 1 - k;
    s[rank - 1 - k] = in[d] == 1 ? 0 : stride;
    stride *= in[d];
  }
  return s;
}

// Iterates `shape` row by row (innermost dim). For each row calls
// fn(flat_index_of_row_start, offsets, row_length, inner_strides) where offsets[k] is the element
// offset of operand k (base[k] + sum idx[d] * strides[k][d]) and inner_strides[k] its stride
// along the innermost dim. strides[k] must have shape.size() entries.
template <std::size_t K, class Fn>
void strided_rows(const Shape& shape, const std::array<std::vector<std::int64_t>, K>& strides,
                  std::array<std::int64_t, K> base, Fn&& fn) {
  const std::int64_t total = element_count(shape);
  if (total == 0) return;
  const std::size_t r = shape.size();
  std::array<std::int64_t, K> inner{};
  if (r == 0) {
    fn(std::int64_t{0}, base, std::int64_t{1}, inner);
    return;
  }
  for (std::size_t k = 0; k < K; ++k) inner[k] = strides[k][r - 1];
  const std::int64_t len = shape[r - 1];
  std::vector<std::int64_t> idx(r, 0);
  std::array<std::int64_t, K> off = base;
  for (std::int64_t o = 0; o < total; o += len) {
    fn(o, off, len, inner);
    for (std::size_t d = r - 1; d-- > 0;) {
      for (std::size_t k = 0; k < K; ++k) off[k] += strides[k][d];
      if (++idx[d] < shape[d]) break;
      for (std::size_t k = 0; k < K; ++k) off[k] -= strides[k][d] * shape[d];
      idx[d] = 0;
    }
  }
}

// Copies elements of size S: dst[i] = src[offset(i)] for i over `shape`, offsets given by
// `strides` from `base` (data movement for Transpose, Slice and broadcasts).
template <std::size_t S>
void gather_strided(const std::byte* src, std::byte* dst, const Shape& shape,
                    const std::vector<std::int64_t>& strides, std::int64_t base) {
  strided_rows<1>(shape, {strides}, {base},
                  [&](std::int64_t o, std::array<std::int64_t, 1> off, std::int64_t len,
                      std::array<std::int64_t, 1> inner) {
                    std::byte* d = dst + o * static_cast<std::int64_t>(S);
                    const std::byte* s = src + off[0] * static_cast<std::int64_t>(S);
                    if (inner[0] == 1) {
                      std::memcpy(d, s, static_cast<std::size_t>(len) * S);
                      return;
                    }
                    const std::int64_t step = inner[0] * static_cast<std::int64_t>(S);
                    for (std::int64_t j = 0; j < len; ++j) std::memcpy(d + j * S, s + j * step, S);
                  });
}

void gather_strided_any(DType dtype, const std::byte* src, std::byte* dst, const Shape& shape,
                        const std::vector<std::int64_t>& strides, std::int64_t base) {
  visit_size(dtype, [&](auto size) { gather_strided<decltype(size)::value>(src, dst, shape, strides, base); });
}

// Integer values of an index-like tensor (int32/int64; uint8/int8 accepted too).
std::vector<std::int64_t> int_values(const Tensor& t) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.elements()));
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto s = t.as<T>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int64_t>(s[i]);
  });
  return v;
}

// Wrap-around integer arithmetic (like numpy) without signed-overflow UB.
template <class T>
T wrap_add(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a + b;
  } else {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
}
template <class T>
T wrap_sub(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a - b;
  } else {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  }
}
template <class T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a * b;
  } else {
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  }
}

// Conversion with the Cast rules of cpu_ops.h.
template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(v)) return To{0};
    const double t = std::trunc(static_cast<double>(v));
    const double lo = static_cast<double>(std::numeric_limits<To>::lowest());
    const double hi = static_cast<double>(std::numeric_limits<To>::max()) + 1.0;  // exclusive
    if (t < lo) return std::numeric_limits<To>::lowest();
    if (t >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(t);
  } else {
    return static_cast<To>(v);  // int->float nearest, int->int modulo 2^bits (C++20)
  }
}

// ---------------------------------------------------------------------------------------------
// Inputs as the op implementations see them, and the per-call context
// ---------------------------------------------------------------------------------------------

struct In {
  bool present = false;
  DType dtype = DType::Float32;
  const Shape* shape = nullptr;
  const Tensor* value = nullptr;  // the constant (inference) or the tensor (run)
};

struct Ctx {
  const Node& node;
  const std::vector<In>& in;
  std::size_t n_out;

  [[noreturn]] void bad(const std::string& msg) const { fail(node, ErrorCode::IncompatibleModel, msg); }
  bool has(std::size_t i) const { return i < in.size() && in[i].present; }
  const In& get(std::size_t i, const char* what) const {
    if (!has(i)) bad(fmt::format("required input {} ({}) is missing", i, what));
    return in[i];
  }
  const Shape& shape(std::size_t i, const char* what) const { return *get(i, what).shape; }
  DType dtype(std::size_t i, const char* what) const { return get(i, what).dtype; }
  // The value of input i; at inference time it must be a constant.
  const Tensor& constant(std::size_t i, const char* what) const {
    const In& x = get(i, what);
    if (!x.value) {
      bad(fmt::format("input {} ({}) must be a constant to infer the output shape", i, what));
    }
    return *x.value;
  }
  // The tensor of input i at run time (always set by run_cpu_op).
  const Tensor& t(std::size_t i) const { return *in[i].value; }
  const Tensor* opt(std::size_t i) const { return has(i) ? in[i].value : nullptr; }

  std::int64_t axis(std::int64_t a, std::int64_t rank, const char* what) const {
    if (a < -rank || a >= rank) {
      bad(fmt::format("{} {} is out of range for rank {}", what, a, rank));
    }
    return a < 0 ? a + rank : a;
  }
};

// Builds the reason string of cpu_op_supported: the first failed condition wins.
struct Checker {
  const Node& n;
  const DtypeList& d;
  std::string reason;

  bool present(std::size_t i) const { return i < d.size() && d[i].has_value(); }
  Checker& in(std::size_t i, const char* what, unsigned mask, bool required = true) {
    if (!reason.empty()) return *this;
    if (!present(i)) {
      if (required) reason = fmt::format("required input {} ({}) is missing", i, what);
      return *this;
    }
    if (!(mask & bit(*d[i]))) {
      reason = fmt::format("input {} ({}) is {}, the host kernel takes {}", i, what,
                           dtype_name(*d[i]), mask_names(mask));
    }
    return *this;
  }
  // Inputs i and j (when present) must have the same dtype.
  Checker& same(std::size_t i, std::size_t j) {
    if (reason.empty() && present(i) && present(j) && *d[i] != *d[j]) {
      reason = fmt::format("inputs {} and {} must have the same dtype, got {} and {}", i, j,
                           dtype_name(*d[i]), dtype_name(*d[j]));
    }
    return *this;
  }
  Checker& require(bool ok, const std::string& msg) {
    if (reason.empty() && !ok) reason = msg;
    return *this;
  }
};

// ---------------------------------------------------------------------------------------------
// Elementwise: Relu, Sigmoid, Clip, Add/Sub/Mul/Div
// ---------------------------------------------------------------------------------------------

OutInfos infer_same_as_input0(const Ctx& c) { return {{c.dtype(0, "X"), c.shape(0, "X")}}; }

std::string check_relu(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "X", kF32 | bit(DType::Int8) | kIdx).reason;
}
std::vector<Tensor> run_relu(const Ctx& c, const OutInfos& o) {
  Tensor y(o[0].first, o[0].second);
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto x = c.t(0).as<T>();
    auto out = y.as<T>();
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] > T{0} ? x[i] : T{0};
  });
  return {std::move(y)};
}

std::string check_float_unary(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "X", kF32).reason;
}
std::vector<Tensor> run_sigmoid(const Ctx& c, const OutInfos& o) {
  Tensor y(o[0].first, o[0].second);
  auto x = c.t(0).as<float>();
  auto out = y.as<float>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    if (v >= 0) {
      out[i] = 1.0f / (1.0f + std::exp(-v));
    } else {
      const float e = std::exp(v);
      out[i] = e / (1.0f + e);
    }
  }
  return {std::move(y)};
}

std::string check_clip(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "input", kAll).in(1, "min", kAll, false).in(2, "max", kAll, false).same(0, 1).same(0, 2);
  const bool attrs = n.attributes.count("min") || n.attributes.count("max");
  ch.require(!attrs || (ch.present(0) && *d[0] == DType::Float32),
             "min/max attributes (opset < 11) need a float32 input");
  return ch.reason;
}

OutInfos infer_clip(const Ctx& c) {
  for (std::size_t i = 1; i <= 2; ++i) {
    if (c.has(i) && element_count(*c.in[i].shape) != 1) {
      c.bad(fmt::format("input {} ({}) must be a scalar, has shape {}", i, i == 1 ? "min" : "max",
                        shape_to_string(*c.in[i].shape)));
    }
  }
  return infer_same_as_input0(c);
}

float float_attr(const Node& n, const std::string& key, float fallback) {
  auto it = n.attributes.find(key);
  if (it == n.attributes.end()) return fallback;
  if (const float* f = std::get_if<float>(&it->second)) return *f;
  fail(n, ErrorCode::IncompatibleModel, fmt::format("attribute '{}' must be a float", key));
}

std::vector<Tensor> run_clip(const Ctx& c, const OutInfos& o) {
  Tensor y(o[0].first, o[0].second);
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T lo = std::numeric_limits<T>::lowest();
    T hi = std::numeric_limits<T>::max();
    if constexpr (std::is_same_v<T, float>) {
      lo = float_attr(c.node, "min", lo);
      hi = float_attr(c.node, "max", hi);
    }
    if (c.has(1)) lo = c.t(1).as<T>()[0];
    if (c.has(2)) hi = c.t(2).as<T>()[0];
    auto x = c.t(0).as<T>();
    auto out = y.as<T>();
    // min(max(x, lo), hi): all values become `hi` when lo > hi (ONNX); NaN stays NaN.
    for (std::size_t i = 0; i < x.size(); ++i) {
      T v = x[i] < lo ? lo : x[i];
      out[i] = hi < v ? hi : v;
    }
  });
  return {std::move(y)};
}

Shape broadcast_shape(const Ctx& c, const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (std::size_t k = 0; k < out.size(); ++k) {
    const std::int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    const std::int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1) {
      c.bad(fmt::format("shapes {} and {} do not broadcast", shape_to_string(a),
                        shape_to_string(b)));
    }
    out[out.size() - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

std::string check_binary(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "A", kAll).in(1, "B", kAll).same(0, 1).reason;
}
OutInfos infer_binary(const Ctx& c) {
  const DType ta = c.dtype(0, "A"), tb = c.dtype(1, "B");
  if (ta != tb) c.bad(fmt::format("inputs have different dtypes {} and {}", dtype_name(ta), dtype_name(tb)));
  return {{ta, broadcast_shape(c, c.shape(0, "A"), c.shape(1, "B"))}};
}

template <class T, class F>
void binary_loop(const Tensor& ta, const Tensor& tb, Tensor& ty, F f) {
  const T* a = ta.as<T>().data();
  const T* b = tb.as<T>().data();
  T* y = ty.as<T>().data();
  const Shape& out = ty.shape();
  std::array<std::vector<std::int64_t>, 2> st{broadcast_strides(ta.shape(), out.size()),
                                              broadcast_strides(tb.shape(), out.size())};
  strided_rows<2>(out, st, {0, 0},
                  [&](std::int64_t o, std::array<std::int64_t, 2> off, std::int64_t len,
                      std::array<std::int64_t, 2> inner) {
                    const T* pa = a + off[0];
                    const T* pb = b + off[1];
                    T* py = y + o;
                    if (inner[0] == 1 && inner[1] == 1) {
                      for (std::int64_t j = 0; j < len; ++j) py[j] = f(pa[j], pb[j]);
                    } else if (inner[0] == 1 && inner[1] == 0) {
                      const T bv = *pb;
                      for (std::int64_t j = 0; j < len; ++j) py[j] = f(pa[j], bv);
                    } else if (inner[0] == 0 && inner[1] == 1) {
                      const T av = *pa;
                      for (std::int64_t j = 0; j < len; ++j) py[j] = f(av, pb[j]);
                    } else {
                      for (std::int64_t j = 0; j < len; ++j) py[j] = f(pa[j * inner[0]], pb[j * inner[1]]);
                    }
                  });
}

enum class BinOp { Add, Sub, Mul, Div };

template <BinOp op>
std::vector<Tensor> run_binary(const Ctx& c, const OutInfos& o) {
  Tensor y(o[0].first, o[0].second);
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (op == BinOp::Add) {
      binary_loop<T>(c.t(0), c.t(1), y, [](T a, T b) { return wrap_add(a, b); });
    } else if constexpr (op == BinOp::Sub) {
      binary_loop<T>(c.t(0), c.t(1), y, [](T a, T b) { return wrap_sub(a, b); });
    } else if constexpr (op == BinOp::Mul) {
      binary_loop<T>(c.t(0), c.t(1), y, [](T a, T b) { return wrap_mul(a, b); });
    } else if constexpr (std::is_floating_point_v<T>) {
      binary_loop<T>(c.t(0), c.t(1), y, [](T a, T b) { return a / b; });
    } else {
      binary_loop<T>(c.t(0), c.t(1), y, [&](T a, T b) -> T {
        if (b == T{0}) fail(c.node, ErrorCode::InvalidInput, "integer division by zero");
        if constexpr (std::is_signed_v<T>) {
          if (b == T{-1}) return wrap_sub(T{0}, a);  // lowest / -1 wraps like numpy
        }
        return static_cast<T>(a / b);
      });
    }
  });
  return {std::move(y)};
}

// ---------------------------------------------------------------------------------------------
// Softmax, LogSoftmax
// ---------------------------------------------------------------------------------------------

OutInfos infer_softmax(const Ctx& c) {
  const Shape& x = c.shape(0, "input");
  c.axis(c.node.attr_int("axis", -1), static_cast<std::int64_t>(x.size()), "axis");
  return {{DType::Float32, x}};
}

template <bool log>
std::vector<Tensor> run_softmax(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  Tensor ty(o[0].first, o[0].second);
  const Shape& s = tx.shape();
  const std::int64_t rank = static_cast<std::int64_t>(s.size());
  if (rank == 0) {  // a scalar: softmax 1, log-softmax 0
    ty.as<float>()[0] = std::isnan(tx.as<float>()[0]) ? tx.as<float>()[0] : (log ? 0.0f : 1.0f);
    return {std::move(ty)};
  }
  const std::int64_t axis = c.axis(c.node.attr_int("axis", -1), rank, "axis");
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= s[d];
  for (std::int64_t d = axis + 1; d < rank; ++d) inner *= s[d];
  const std::int64_t n = s[axis];
  const float* x = tx.as<float>().data();
  float* y = ty.as<float>().data();
  for (std::int64_t a = 0; a < outer; ++a) {
    for (std::int64_t i = 0; i < inner; ++i) {
      const std::int64_t base = a * n * inner + i;
      float mx = -std::numeric_limits<float>::infinity();
      for (std::int64_t k = 0; k < n; ++k) mx = std::max(mx, x[base + k * inner]);
      double sum = 0;
      for (std::int64_t k = 0; k < n; ++k) {
        const float e = std::exp(x[base + k * inner] - mx);
        if constexpr (!log) y[base + k * inner] = e;
        sum += e;
      }
      if constexpr (log) {
        const float ls = static_cast<float>(std::log(sum));
        for (std::int64_t k = 0; k < n; ++k) y[base + k * inner] = x[base + k * inner] - mx - ls;
      } else {
        const float inv = static_cast<float>(1.0 / sum);
        for (std::int64_t k = 0; k < n; ++k) y[base + k * inner] *= inv;
      }
    }
  }
  return {std::move(ty)};
}

// ---------------------------------------------------------------------------------------------
// MatMul, Gemm, MatMulInteger
// ---------------------------------------------------------------------------------------------

// C[M,N] += A[M,K] * B[K,N] (row-major).
template <class T>
void matmul_acc(const T* a, const T* b, T* c, std::int64_t m, std::int64_t k, std::int64_t n) {
  for (std::int64_t i = 0; i < m; ++i) {
    T* crow = c + i * n;
    for (std::int64_t p = 0; p < k; ++p) {
      const T av = a[i * k + p];
      const T* brow = b + p * n;
      for (std::int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
    }
  }
}

// numpy matmul shape logic.
struct MatMulGeom {
  Shape a, b;      // operands with 1-D promoted to 2-D
  Shape batch;     // broadcast batch dims
  std::int64_t m = 0, k = 0, n = 0;
  Shape out;
};

MatMulGeom matmul_geom(const Ctx& c, const Shape& sa, const Shape& sb) {
  if (sa.empty() || sb.empty()) c.bad("MatMul operands must have rank >= 1");
  MatMulGeom g;
  g.a = sa.size() == 1 ? Shape{1, sa[0]} : sa;
  g.b = sb.size() == 1 ? Shape{sb[0], 1} : sb;
  g.m = g.a[g.a.size() - 2];
  g.k = g.a[g.a.size() - 1];
  g.n = g.b[g.b.size() - 1];
  if (g.b[g.b.size() - 2] != g.k) {
    c.bad(fmt::format("inner dims do not match: {} x {}", shape_to_string(sa), shape_to_string(sb)));
  }
  g.batch = broadcast_shape(c, Shape(g.a.begin(), g.a.end() - 2), Shape(g.b.begin(), g.b.end() - 2));
  g.out = g.batch;
  if (sa.size() > 1) g.out.push_back(g.m);
  if (sb.size() > 1) g.out.push_back(g.n);
  return g;
}

// Batched matmul of dense T arrays shaped g.a and g.b into y (zeroed, shape g.out).
template <class T>
void batched_matmul(const MatMulGeom& g, const T* a, const T* b, T* y) {
  const Shape ba(g.a.begin(), g.a.end() - 2), bb(g.b.begin(), g.b.end() - 2);
  std::array<std::vector<std::int64_t>, 2> st{broadcast_strides(ba, g.batch.size()),
                                              broadcast_strides(bb, g.batch.size())};
  const std::int64_t sa = g.m * g.k, sb = g.k * g.n, sy = g.m * g.n;
  strided_rows<2>(g.batch, st, {0, 0},
                  [&](std::int64_t o, std::array<std::int64_t, 2> off, std::int64_t len,
                      std::array<std::int64_t, 2> inner) {
                    for (std::int64_t j = 0; j < len; ++j) {
                      matmul_acc(a + (off[0] + j * inner[0]) * sa, b + (off[1] + j * inner[1]) * sb,
                                 y + (o + j) * sy, g.m, g.k, g.n);
                    }
                  });
}

std::string check_matmul(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "A", kF32).in(1, "B", kF32).reason;
}
OutInfos infer_matmul(const Ctx& c) {
  return {{DType::Float32, matmul_geom(c, c.shape(0, "A"), c.shape(1, "B")).out}};
}
std::vector<Tensor> run_matmul(const Ctx& c, const OutInfos& o) {
  Tensor y(o[0].first, o[0].second);
  const auto g = matmul_geom(c, c.t(0).shape(), c.t(1).shape());
  batched_matmul<float>(g, c.t(0).as<float>().data(), c.t(1).as<float>().data(), y.as<float>().data());
  return {std::move(y)};
}

std::string check_gemm(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "A", kF32).in(1, "B", kF32).in(2, "C", kF32, false).reason;
}

struct GemmGeom {
  std::int64_t m, k, n;
};
GemmGeom gemm_geom(const Ctx& c) {
  const Shape& a = c.shape(0, "A");
  const Shape& b = c.shape(1, "B");
  if (a.size() != 2 || b.size() != 2) {
    c.bad(fmt::format("A and B must be 2-D, got {} and {}", shape_to_string(a), shape_to_string(b)));
  }
  const bool ta = c.node.attr_int("transA", 0) != 0, tb = c.node.attr_int("transB", 0) != 0;
  GemmGeom g{ta ? a[1] : a[0], ta ? a[0] : a[1], tb ? b[0] : b[1]};
  if ((tb ? b[1] : b[0]) != g.k) {
    c.bad(fmt::format("inner dims do not match: A {} (transA={}) and B {} (transB={})",
                      shape_to_string(a), ta, shape_to_string(b), tb));
  }
  if (c.has(2)) {
    const Shape& cs = *c.in[2].shape;
    const Shape mn{g.m, g.n};
    bool ok = cs.size() <= 2;
    for (std::size_t k = 0; ok && k < cs.size(); ++k) {
      const std::int64_t d = cs[cs.size() - 1 - k];
      ok = d == 1 || d == mn[1 - k];
    }
    if (!ok) c.bad(fmt::format("C {} does not broadcast to [{}, {}]", shape_to_string(cs), g.m, g.n));
  }
  return g;
}
OutInfos infer_gemm(const Ctx& c) {
  const auto g = gemm_geom(c);
  return {{DType::Float32, {g.m, g.n}}};
}

// Dense transpose of a 2-D float matrix [r, c] -> [c, r].
std::vector<float> transpose2d(const float* x, std::int64_t rows, std::int64_t cols) {
  std::vector<float> t(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) t[j * rows + i] = x[i * cols + j];
  }
  return t;
}

std::vector<Tensor> run_gemm(const Ctx& c, const OutInfos& o) {
  const auto g = gemm_geom(c);
  Tensor y(o[0].first, o[0].second);
  const float alpha = float_attr(c.node, "alpha", 1.0f);
  const float beta = float_attr(c.node, "beta", 1.0f);
  const float* a = c.t(0).as<float>().data();
  const float* b = c.t(1).as<float>().data();
  std::vector<float> at, bt;
  if (c.node.attr_int("transA", 0) != 0) {
    at = transpose2d(a, g.k, g.m);
    a = at.data();
  }
  if (c.node.attr_int("transB", 0) != 0) {
    bt = transpose2d(b, g.n, g.k);
    b = bt.data();
  }
  float* yp = y.as<float>().data();
  matmul_acc(a, b, yp, g.m, g.k, g.n);
  const std::int64_t total = g.m * g.n;
  if (alpha != 1.0f) {
    for (std::int64_t i = 0; i < total; ++i) yp[i] *= alpha;
  }
  if (c.has(2) && beta != 0.0f) {
    const Tensor& tc = c.t(2);
    const Shape mn{g.m, g.n};
    const auto st = broadcast_strides(tc.shape(), 2);
    const float* cp = tc.as<float>().data();
    for (std::int64_t i = 0; i < g.m; ++i) {
      for (std::int64_t j = 0; j < g.n; ++j) yp[i * g.n + j] += beta * cp[i * st[0] + j * st[1]];
    }
  }
  return {std::move(y)};
}

// Values of an integer tensor minus a zero point broadcast to `target` (as int32). `zp` may be
// null (zero point 0). The zero point must be unidirectionally broadcastable to `target`.
std::vector<std::int32_t> minus_zero_point(const Ctx& c, const Tensor& x, const Tensor* zp,
                                           Shape zp_shape, const char* what) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(x.elements()));
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto s = x.as<T>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(s[i]);
  });
  if (!zp) return v;
  const auto z = int_values(*zp);
  if (z.size() == 1) {
    for (auto& e : v) e -= static_cast<std::int32_t>(z[0]);
    return v;
  }
  const Shape& target = x.shape();
  if (zp_shape.size() > target.size()) {
    c.bad(fmt::format("{} {} does not broadcast to {}", what, shape_to_string(zp_shape),
                      shape_to_string(target)));
  }
  for (std::size_t k = 0; k < zp_shape.size(); ++k) {
    const std::int64_t d = zp_shape[zp_shape.size() - 1 - k];
    if (d != 1 && d != target[target.size() - 1 - k]) {
      c.bad(fmt::format("{} {} does not broadcast to {}", what, shape_to_string(zp_shape),
                        shape_to_string(target)));
    }
  }
  const auto st = broadcast_strides(zp_shape, target.size());
  strided_rows<1>(target, {st}, {0},
                  [&](std::int64_t o, std::array<std::int64_t, 1> off, std::int64_t len,
                      std::array<std::int64_t, 1> inner) {
                    for (std::int64_t j = 0; j < len; ++j) {
                      v[static_cast<std::size_t>(o + j)] -=
                          static_cast<std::int32_t>(z[static_cast<std::size_t>(off[0] + j * inner[0])]);
                    }
                  });
  return v;
}

std::string check_matmul_integer(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}
      .in(0, "A", kQ8)
      .in(1, "B", kQ8)
      .in(2, "a_zero_point", kQ8, false)
      .in(3, "b_zero_point", kQ8, false)
      .same(0, 2)
      .same(1, 3)
      .reason;
}

// Zero-point shape as a broadcast operand: a 1-D per-row zero point of A becomes [M, 1].
Shape integer_zp_shape(const Ctx& c, std::size_t i, bool rows, std::int64_t count) {
  const Shape& z = *c.in[i].shape;
  if (element_count(z) == 1) return Shape{};
  if (z.size() == 1) {
    if (z[0] != count) {
      c.bad(fmt::format("1-D input {} must have {} elements (one per {} ), has {}", i, count,
                        rows ? "row of A" : "column of B", z[0]));
    }
    return rows ? Shape{count, 1} : Shape{count};
  }
  const Shape& x = *c.in[i - 2].shape;
  if (z.size() != x.size() || z[z.size() - (rows ? 1 : 2)] != 1) {
    c.bad(fmt::format("input {} {} must be a scalar, 1-D, or shaped like the operand {} with a {} "
                      "dim of 1", i, shape_to_string(z), shape_to_string(x), rows ? "last" : "second-last"));
  }
  return z;
}

OutInfos infer_matmul_integer(const Ctx& c) {
  const auto g = matmul_geom(c, c.shape(0, "A"), c.shape(1, "B"));
  if (c.has(2)) integer_zp_shape(c, 2, true, g.m);
  if (c.has(3)) integer_zp_shape(c, 3, false, g.n);
  return {{DType::Int32, g.out}};
}

std::vector<Tensor> run_matmul_integer(const Ctx& c, const OutInfos& o) {
  Tensor y(o[0].first, o[0].second);
  const auto g = matmul_geom(c, c.t(0).shape(), c.t(1).shape());
  const auto a = minus_zero_point(c, c.t(0), c.opt(2), c.has(2) ? integer_zp_shape(c, 2, true, g.m) : Shape{},
                                  "a_zero_point");
  const auto b = minus_zero_point(c, c.t(1), c.opt(3), c.has(3) ? integer_zp_shape(c, 3, false, g.n) : Shape{},
                                  "b_zero_point");
  batched_matmul<std::int32_t>(g, a.data(), b.data(), y.as<std::int32_t>().data());
  return {std::move(y)};
}

// ---------------------------------------------------------------------------------------------
// Conv, ConvInteger, MaxPool, AveragePool, GlobalAveragePool
// ---------------------------------------------------------------------------------------------

// Window geometry over 1 or 2 spatial dims, lifted to 2 (1-D: a height of 1).
struct Geom {
  std::int64_t h = 1, w = 1;          // input spatial size
  std::int64_t kh = 1, kw = 1;        // kernel
  std::int64_t sh = 1, sw = 1;        // strides
  std::int64_t dh = 1, dw = 1;        // dilations
  std::int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads: top, left, bottom, right
  std::int64_t oh = 1, ow = 1;        // output spatial size
};

// Attribute sanity for Conv/ConvInteger/MaxPool/AveragePool (cpu_op_supported).
std::string check_window_attrs(const Node& n, bool need_kernel) {
  std::size_t r = 0;
  auto ks = n.attr_ints("kernel_shape", {});
  if (ks.empty()) {
    if (need_kernel) return "attribute 'kernel_shape' is required";
  } else {
    r = ks.size();
  }
  for (const char* key : {"strides", "dilations"}) {
    auto v = n.attr_ints(key, {});
    if (v.empty()) continue;
    if (r == 0) r = v.size();
    if (v.size() != r) return fmt::format("attribute '{}' has {} values for {} spatial dims", key, v.size(), r);
  }
  auto pads = n.attr_ints("pads", {});
  if (!pads.empty()) {
    if (r == 0) r = pads.size() / 2;
    if (pads.size() != 2 * r) return fmt::format("attribute 'pads' has {} values for {} spatial dims", pads.size(), r);
  }
  if (r > 2) {
    return fmt::format("{}-D windows (kernel_shape/strides/pads of rank {}) are not implemented, only "
                       "1-D and 2-D", r, r);
  }
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID") {
    return fmt::format("unknown auto_pad '{}'", ap);
  }
  return "";
}

// Resolves the window of `node` for input shape x ([N, C, spatial...], 1 or 2 spatial dims) and
// kernel `kernel` (one entry per spatial dim), per the ONNX Conv / pooling output-size rules.
Geom resolve_geom(const Ctx& c, const Shape& x, const std::vector<std::int64_t>& kernel, bool ceil_mode) {
  const Node& n = c.node;
  if (x.size() != 3 && x.size() != 4) {
    c.bad(fmt::format("input {} must be [N, C, W] or [N, C, H, W]: only 1-D and 2-D windows are "
                      "implemented", shape_to_string(x)));
  }
  const std::size_t r = x.size() - 2;
  if (kernel.size() != r) c.bad(fmt::format("kernel has {} dims for {} spatial dims", kernel.size(), r));
  auto strides = n.attr_ints("strides", std::vector<std::int64_t>(r, 1));
  auto dil = n.attr_ints("dilations", std::vector<std::int64_t>(r, 1));
  auto pads = n.attr_ints("pads", std::vector<std::int64_t>(2 * r, 0));
  if (strides.size() != r || dil.size() != r || pads.size() != 2 * r) {
    c.bad(fmt::format("strides/dilations/pads must have {}/{}/{} values", r, r, 2 * r));
  }
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  std::array<std::int64_t, 2> in{1, 1}, k{1, 1}, s{1, 1}, d{1, 1}, pbeg{0, 0}, pend{0, 0}, out{1, 1};
  for (std::size_t i = 0; i < r; ++i) {
    const std::size_t j = i + (2 - r);  // 1-D lands in the width slot
    in[j] = x[2 + i];
    k[j] = kernel[i];
    s[j] = strides[i];
    d[j] = dil[i];
    pbeg[j] = pads[i];
    pend[j] = pads[i + r];
    if (k[j] < 1 || s[j] < 1 || d[j] < 1) c.bad("kernel, strides and dilations must be >= 1");
    if (pbeg[j] < 0 || pend[j] < 0) c.bad("pads must be >= 0");
    const std::int64_t eff = (k[j] - 1) * d[j] + 1;
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      out[j] = (in[j] + s[j] - 1) / s[j];
      const std::int64_t total = std::max<std::int64_t>(0, (out[j] - 1) * s[j] + eff - in[j]);
      pbeg[j] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      pend[j] = total - pbeg[j];
      continue;
    }
    if (ap == "VALID") {
      pbeg[j] = pend[j] = 0;
    } else if (ap != "NOTSET") {
      c.bad(fmt::format("unknown auto_pad '{}'", ap));
    }
    const std::int64_t span = in[j] + pbeg[j] + pend[j] - eff;
    if (span < 0) {
      c.bad(fmt::format("window of extent {} does not fit the padded input extent {}", eff,
                        in[j] + pbeg[j] + pend[j]));
    }
    out[j] = (ceil_mode ? (span + s[j] - 1) / s[j] : span / s[j]) + 1;
    // A last window starting in the end padding is dropped (ONNX reference, PyTorch).
    if (ceil_mode && (out[j] - 1) * s[j] >= in[j] + pbeg[j]) --out[j];
  }
  Geom g;
  g.h = in[0], g.w = in[1], g.kh = k[0], g.kw = k[1], g.sh = s[0], g.sw = s[1];
  g.dh = d[0], g.dw = d[1], g.pt = pbeg[0], g.pl = pbeg[1], g.pb = pend[0], g.pr = pend[1];
  g.oh = out[0], g.ow = out[1];
  return g;
}

Shape window_out_shape(const Shape& x, std::int64_t channels, const Geom& g) {
  if (x.size() == 3) return {x[0], channels, g.ow};
  return {x[0], channels, g.oh, g.ow};
}

std::string check_conv(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "X", kF32).in(1, "W", kF32).in(2, "B", kF32, false);
  ch.require(n.attr_int("group", 1) >= 1, "attribute 'group' must be >= 1");
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, false);
  return ch.reason;
}
std::string check_conv_integer(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "x", kQ8).in(1, "w", kQ8).in(2, "x_zero_point", kQ8, false).in(3, "w_zero_point", kQ8, false);
  ch.same(0, 2).same(1, 3).require(n.attr_int("group", 1) >= 1, "attribute 'group' must be >= 1");
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, false);
  return ch.reason;
}

Geom conv_geom(const Ctx& c, const Shape& x, const Shape& w) {
  if (w.size() != x.size()) {
    c.bad(fmt::format("weight {} must have the rank of the input {}", shape_to_string(w), shape_to_string(x)));
  }
  const std::int64_t group = c.node.attr_int("group", 1);
  if (x.size() < 3 || group < 1 || x[1] % group != 0 || w[0] % group != 0 || w[1] * group != x[1]) {
    c.bad(fmt::format("input {} does not fit weight {} with group {}", shape_to_string(x),
                      shape_to_string(w), group));
  }
  std::vector<std::int64_t> kernel(w.begin() + 2, w.end());
  auto ks = c.node.attr_ints("kernel_shape", kernel);
  if (ks != kernel) c.bad("attribute kernel_shape does not match the weight's spatial dims");
  return resolve_geom(c, x, kernel, false);
}

OutInfos infer_conv(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  const Shape& w = c.shape(1, "W");
  const Geom g = conv_geom(c, x, w);
  if (c.has(2)) {
    const Shape& b = *c.in[2].shape;
    if (b.size() != 1 || b[0] != w[0]) {
      c.bad(fmt::format("bias {} must be [{}]", shape_to_string(b), w[0]));
    }
  }
  return {{DType::Float32, window_out_shape(x, w[0], g)}};
}

OutInfos infer_conv_integer(const Ctx& c) {
  const Shape& x = c.shape(0, "x");
  const Shape& w = c.shape(1, "w");
  const Geom g = conv_geom(c, x, w);
  if (c.has(2) && element_count(*c.in[2].shape) != 1) {
    c.bad(fmt::format("x_zero_point {} must be a scalar (per-tensor)", shape_to_string(*c.in[2].shape)));
  }
  if (c.has(3)) {
    const Shape& z = *c.in[3].shape;
    if (element_count(z) != 1 && !(z.size() == 1 && z[0] == w[0])) {
      c.bad(fmt::format("w_zero_point {} must be a scalar or have one value per output channel ({})",
                        shape_to_string(z), w[0]));
    }
  }
  return {{DType::Int32, window_out_shape(x, w[0], g)}};
}

// Direct convolution: y[n, m] = bias[m] + sum over the group's channels and the kernel.
// x: [N, C, H, W], w: [M, C/group, KH, KW], y: [N, M, OH, OW] (zeroed), all dense.
template <class T>
void conv_kernel(const T* x, const T* w, const T* bias, T* y, std::int64_t batch, std::int64_t chans,
                 std::int64_t maps, std::int64_t group, const Geom& g) {
  const std::int64_t cg = chans / group, mg = maps / group;
  const std::int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  for (std::int64_t n = 0; n < batch; ++n) {
    for (std::int64_t m = 0; m < maps; ++m) {
      T* out = y + (n * maps + m) * out_plane;
      if (bias) std::fill(out, out + out_plane, bias[m]);
      const std::int64_t grp = m / mg;
      for (std::int64_t ci = 0; ci < cg; ++ci) {
        const T* xp = x + (n * chans + grp * cg + ci) * in_plane;
        const T* wp = w + (m * cg + ci) * g.kh * g.kw;
        for (std::int64_t kh = 0; kh < g.kh; ++kh) {
          for (std::int64_t kw = 0; kw < g.kw; ++kw) {
            const T wv = wp[kh * g.kw + kw];
            // Output columns whose input column ow*sw - pl + kw*dw lies in [0, W).
            const std::int64_t off = kw * g.dw - g.pl;
            const std::int64_t ow0 = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
            const std::int64_t last = g.w - 1 - off;
            const std::int64_t ow1 = last < 0 ? 0 : std::min(g.ow, last / g.sw + 1);
            if (ow0 >= ow1) continue;
            for (std::int64_t oh = 0; oh < g.oh; ++oh) {
              const std::int64_t ih = oh * g.sh - g.pt + kh * g.dh;
              if (ih < 0 || ih >= g.h) continue;
              const T* row = xp + ih * g.w + off;
              T* orow = out + oh * g.ow;
              if (g.sw == 1) {
                for (std::int64_t ow = ow0; ow < ow1; ++ow) orow[ow] += wv * row[ow];
              } else {
                for (std::int64_t ow = ow0; ow < ow1; ++ow) orow[ow] += wv * row[ow * g.sw];
              }
            }
          }
        }
      }
    }
  }
}

std::vector<Tensor> run_conv(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Tensor& w = c.t(1);
  const Geom g = conv_geom(c, x.shape(), w.shape());
  Tensor y(o[0].first, o[0].second);
  conv_kernel<float>(x.as<float>().data(), w.as<float>().data(),
                     c.has(2) ? c.t(2).as<float>().data() : nullptr, y.as<float>().data(),
                     x.shape()[0], x.shape()[1], w.shape()[0], c.node.attr_int("group", 1), g);
  return {std::move(y)};
}

std::vector<Tensor> run_conv_integer(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Tensor& w = c.t(1);
  const Geom g = conv_geom(c, x.shape(), w.shape());
  // Subtracting the zero points first makes padding contribute 0, as ONNX Runtime pads x with
  // x_zero_point.
  const auto xs = minus_zero_point(c, x, c.opt(2), Shape{}, "x_zero_point");
  Shape wz;
  if (c.has(3) && c.t(3).elements() != 1) {
    wz = Shape(w.shape().size(), 1);
    wz[0] = w.shape()[0];  // one per output channel
  }
  const auto ws = minus_zero_point(c, w, c.opt(3), wz, "w_zero_point");
  Tensor y(o[0].first, o[0].second);
  conv_kernel<std::int32_t>(xs.data(), ws.data(), nullptr, y.as<std::int32_t>().data(), x.shape()[0],
                            x.shape()[1], w.shape()[0], c.node.attr_int("group", 1), g);
  return {std::move(y)};
}

std::string check_maxpool(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "X", kF32 | kQ8);
  const auto so = n.attr_int("storage_order", 0);
  ch.require(so == 0 || so == 1, "attribute 'storage_order' must be 0 or 1");
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, true);
  return ch.reason;
}
std::string check_avgpool(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "X", kF32);
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, true);
  return ch.reason;
}

Geom pool_geom(const Ctx& c, const Shape& x) {
  auto ks = c.node.attr_ints("kernel_shape", {});
  if (ks.empty()) c.bad("attribute 'kernel_shape' is required");
  return resolve_geom(c, x, ks, c.node.attr_int("ceil_mode", 0) != 0);
}

OutInfos infer_maxpool(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  const Shape out = window_out_shape(x, x.size() >= 2 ? x[1] : 0, pool_geom(c, x));
  OutInfos r{{c.dtype(0, "X"), out}};
  if (c.n_out >= 2) r.push_back({DType::Int64, out});
  return r;
}
OutInfos infer_avgpool(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  return {{DType::Float32, window_out_shape(x, x.size() >= 2 ? x[1] : 0, pool_geom(c, x))}};
}

template <class T>
void maxpool_kernel(const T* x, T* y, std::int64_t* indices, std::int64_t planes, const Geom& g,
                    bool column_major) {
  const std::int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  for (std::int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * in_plane;
    for (std::int64_t oh = 0; oh < g.oh; ++oh) {
      for (std::int64_t ow = 0; ow < g.ow; ++ow) {
        T best = std::numeric_limits<T>::lowest();
        std::int64_t bi = -1;
        for (std::int64_t kh = 0; kh < g.kh; ++kh) {
          const std::int64_t ih = oh * g.sh - g.pt + kh * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (std::int64_t kw = 0; kw < g.kw; ++kw) {
            const std::int64_t iw = ow * g.sw - g.pl + kw * g.dw;
            if (iw < 0 || iw >= g.w) continue;
            const T v = xp[ih * g.w + iw];
            if (bi < 0 || v > best) {
              best = v;
              bi = column_major ? iw * g.h + ih : ih * g.w + iw;
            }
          }
        }
        const std::int64_t at = p * out_plane + oh * g.ow + ow;
        y[at] = best;
        if (indices) indices[at] = bi < 0 ? -1 : p * in_plane + bi;
      }
    }
  }
}

std::vector<Tensor> run_maxpool(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Geom g = pool_geom(c, x.shape());
  std::vector<Tensor> out;
  for (const auto& [dt, shape] : o) out.emplace_back(dt, shape);
  std::int64_t* idx = out.size() >= 2 ? out[1].as<std::int64_t>().data() : nullptr;
  const bool column_major = c.node.attr_int("storage_order", 0) == 1;
  const std::int64_t planes = x.shape()[0] * x.shape()[1];
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, std::uint8_t> ||
                  std::is_same_v<T, std::int8_t>) {
      maxpool_kernel<T>(x.as<T>().data(), out[0].as<T>().data(), idx, planes, g, column_major);
    } else {
      fail(c.node, ErrorCode::UnsupportedOperator, "MaxPool on this dtype is not implemented");
    }
  });
  return out;
}

// Number of window taps (start + k*d, k < kernel) inside [lo, hi).
std::int64_t taps_inside(std::int64_t start, std::int64_t kernel, std::int64_t dil, std::int64_t lo,
                         std::int64_t hi) {
  std::int64_t n = 0;
  for (std::int64_t k = 0; k < kernel; ++k) {
    const std::int64_t p = start + k * dil;
    n += p >= lo && p < hi;
  }
  return n;
}

std::vector<Tensor> run_avgpool(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  const Geom g = pool_geom(c, tx.shape());
  const bool include_pad = c.node.attr_int("count_include_pad", 0) != 0;
  Tensor ty(o[0].first, o[0].second);
  const float* x = tx.as<float>().data();
  float* y = ty.as<float>().data();
  const std::int64_t planes = tx.shape()[0] * tx.shape()[1];
  const std::int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  for (std::int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * in_plane;
    for (std::int64_t oh = 0; oh < g.oh; ++oh) {
      const std::int64_t hs = oh * g.sh - g.pt;
      const std::int64_t nh = include_pad ? taps_inside(hs, g.kh, g.dh, -g.pt, g.h + g.pb)
                                          : taps_inside(hs, g.kh, g.dh, 0, g.h);
      for (std::int64_t ow = 0; ow < g.ow; ++ow) {
        const std::int64_t ws = ow * g.sw - g.pl;
        const std::int64_t nw = include_pad ? taps_inside(ws, g.kw, g.dw, -g.pl, g.w + g.pr)
                                            : taps_inside(ws, g.kw, g.dw, 0, g.w);
        float sum = 0;
        for (std::int64_t kh = 0; kh < g.kh; ++kh) {
          const std::int64_t ih = hs + kh * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (std::int64_t kw = 0; kw < g.kw; ++kw) {
            const std::int64_t iw = ws + kw * g.dw;
            if (iw >= 0 && iw < g.w) sum += xp[ih * g.w + iw];
          }
        }
        const std::int64_t count = nh * nw;
        y[p * out_plane + oh * g.ow + ow] = count > 0 ? sum / static_cast<float>(count) : 0.0f;
      }
    }
  }
  return {std::move(ty)};
}

// furiosa::QuantizedAveragePool: the integer average of 8-bit values over the in-bounds taps of
// each window, divided with rounding half away from zero, clamped to [output_min, output_max]
// (TFLite's quantized AVERAGE_POOL_2D reference kernels: the raw stored values are averaged, the
// input and output share their quantization).
std::string check_qavgpool(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "X", kQ8);
  if (ch.reason.empty()) ch.reason = check_window_attrs(n, true);
  ch.require(n.attr_ints("kernel_shape", {}).size() == 2, "2-D pooling only (kernel_shape has 2 values)");
  ch.require(n.attr_ints("dilations", {1, 1}) == std::vector<std::int64_t>{1, 1}, "dilations must be 1");
  ch.require(n.attr_int("ceil_mode", 0) == 0, "ceil_mode must be 0");
  return ch.reason;
}
OutInfos infer_qavgpool(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  if (x.size() != 4) c.bad(fmt::format("input {} must be [N, C, H, W]", shape_to_string(x)));
  return {{c.dtype(0, "X"), window_out_shape(x, x[1], pool_geom(c, x))}};
}
std::vector<Tensor> run_qavgpool(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  const Geom g = pool_geom(c, tx.shape());
  Tensor ty(o[0].first, o[0].second);
  const auto [qmin, qmax] = tx.dtype() == DType::UInt8 ? std::array<std::int64_t, 2>{0, 255}
                                                       : std::array<std::int64_t, 2>{-128, 127};
  const std::int64_t lo = c.node.attr_int("output_min", qmin), hi = c.node.attr_int("output_max", qmax);
  if (lo < qmin || hi > qmax || lo > hi) {
    c.bad(fmt::format("output range [{}, {}] is not inside the {} range", lo, hi, dtype_name(tx.dtype())));
  }
  const std::int64_t planes = tx.shape()[0] * tx.shape()[1];
  visit_dtype(tx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int8_t>) {
      const T* x = tx.as<T>().data();
      T* y = ty.as<T>().data();
      for (std::int64_t p = 0; p < planes; ++p) {
        const T* xp = x + p * g.h * g.w;
        for (std::int64_t oh = 0; oh < g.oh; ++oh) {
          const std::int64_t h0 = std::max<std::int64_t>(0, oh * g.sh - g.pt);
          const std::int64_t h1 = std::min<std::int64_t>(g.h, oh * g.sh - g.pt + g.kh);
          for (std::int64_t ow = 0; ow < g.ow; ++ow) {
            const std::int64_t w0 = std::max<std::int64_t>(0, ow * g.sw - g.pl);
            const std::int64_t w1 = std::min<std::int64_t>(g.w, ow * g.sw - g.pl + g.kw);
            std::int64_t sum = 0;
            for (std::int64_t ih = h0; ih < h1; ++ih) {
              for (std::int64_t iw = w0; iw < w1; ++iw) sum += xp[ih * g.w + iw];
            }
            const std::int64_t count = std::max<std::int64_t>(0, h1 - h0) * std::max<std::int64_t>(0, w1 - w0);
            std::int64_t avg = 0;
            if (count > 0) avg = sum >= 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
            y[p * g.oh * g.ow + oh * g.ow + ow] = static_cast<T>(std::clamp(avg, lo, hi));
          }
        }
      }
    }
  });
  return {std::move(ty)};
}

OutInfos infer_global_avgpool(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  if (x.size() < 2) c.bad(fmt::format("input {} must be [N, C, ...]", shape_to_string(x)));
  Shape out = x;
  for (std::size_t d = 2; d < out.size(); ++d) out[d] = 1;
  return {{DType::Float32, out}};
}
std::vector<Tensor> run_global_avgpool(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  Tensor ty(o[0].first, o[0].second);
  const std::int64_t planes = tx.shape()[0] * tx.shape()[1];
  const std::int64_t size = planes == 0 ? 0 : tx.elements() / planes;
  const float* x = tx.as<float>().data();
  float* y = ty.as<float>().data();
  for (std::int64_t p = 0; p < planes; ++p) {
    double sum = 0;
    for (std::int64_t i = 0; i < size; ++i) sum += x[p * size + i];
    y[p] = static_cast<float>(sum / static_cast<double>(size));
  }
  return {std::move(ty)};
}

// ---------------------------------------------------------------------------------------------
// ReduceMean
// ---------------------------------------------------------------------------------------------

std::string check_reduce_mean(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "data", kF32).in(1, "axes", kIdx, false).reason;
}

// Reduced dims (flags per input dim) and the output shape; empty flags = identity.
struct Reduction {
  std::vector<bool> reduced;
  Shape out;
};
Reduction reduction(const Ctx& c, const Shape& x) {
  std::vector<std::int64_t> axes;
  if (c.has(1)) {
    axes = int_values(c.constant(1, "axes"));
  } else {
    axes = c.node.attr_ints("axes", {});
  }
  const bool keep = c.node.attr_int("keepdims", 1) != 0;
  const std::int64_t rank = static_cast<std::int64_t>(x.size());
  Reduction r;
  r.reduced.assign(x.size(), axes.empty());
  if (axes.empty() && c.node.attr_int("noop_with_empty_axes", 0) != 0) {
    r.reduced.assign(x.size(), false);
    r.out = x;
    return r;
  }
  for (auto a : axes) {
    const auto ax = static_cast<std::size_t>(c.axis(a, rank, "axis"));
    if (r.reduced[ax]) c.bad(fmt::format("axis {} is listed twice", a));
    r.reduced[ax] = true;
  }
  for (std::size_t d = 0; d < x.size(); ++d) {
    if (!r.reduced[d]) {
      r.out.push_back(x[d]);
    } else if (keep) {
      r.out.push_back(1);
    }
  }
  return r;
}

OutInfos infer_reduce_mean(const Ctx& c) {
  return {{DType::Float32, reduction(c, c.shape(0, "data")).out}};
}
std::vector<Tensor> run_reduce_mean(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  const Shape& xs = tx.shape();
  const Reduction r = reduction(c, xs);
  Tensor ty(o[0].first, o[0].second);
  // Output strides over the input's dims (keepdims layout), 0 along reduced dims.
  Shape kept(xs.size());
  std::int64_t count = 1;
  for (std::size_t d = 0; d < xs.size(); ++d) {
    kept[d] = r.reduced[d] ? 1 : xs[d];
    if (r.reduced[d]) count *= xs[d];
  }
  std::vector<std::int64_t> st = broadcast_strides(kept, xs.size());
  for (std::size_t d = 0; d < xs.size(); ++d) {
    if (r.reduced[d]) st[d] = 0;
  }
  std::vector<double> acc(static_cast<std::size_t>(ty.elements()), 0.0);
  const float* x = tx.as<float>().data();
  // Reduced dims all after the kept ones (global average pooling over H, W): each output is the
  // sum of one contiguous block, added in the same order as the general walk below (so the
  // same double result), without its per-element index arithmetic.
  std::size_t first_reduced = xs.size();
  while (first_reduced > 0 && r.reduced[first_reduced - 1]) --first_reduced;
  bool trailing = true;
  for (std::size_t d = 0; d < first_reduced; ++d) trailing = trailing && !r.reduced[d];
  if (trailing) {
    for (std::size_t i = 0; i < acc.size(); ++i) {
      const float* block = x + static_cast<std::int64_t>(i) * count;
      double sum = 0.0;
      for (std::int64_t j = 0; j < count; ++j) sum += block[j];
      acc[i] = sum;
    }
  } else {
    strided_rows<1>(xs, {st}, {0},
                    [&](std::int64_t o2, std::array<std::int64_t, 1> off, std::int64_t len,
                        std::array<std::int64_t, 1> inner) {
                      for (std::int64_t j = 0; j < len; ++j) {
                        acc[static_cast<std::size_t>(off[0] + j * inner[0])] += x[o2 + j];
                      }
                    });
  }
  auto y = ty.as<float>();
  for (std::size_t i = 0; i < acc.size(); ++i) {
    y[i] = static_cast<float>(acc[i] / static_cast<double>(count));
  }
  return {std::move(ty)};
}

// ---------------------------------------------------------------------------------------------
// Data movement: Flatten, Reshape, Transpose, Concat, Split, Squeeze, Unsqueeze, Identity,
// Shape, Gather, Slice, Cast
// ---------------------------------------------------------------------------------------------

std::string check_any(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "data", kAll).reason;
}
std::string check_data_and_index(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "data", kAll).in(1, "index input", kIdx, false).reason;
}

// Same bytes, new shape (Flatten, Reshape, Squeeze, Unsqueeze, Identity).
std::vector<Tensor> run_copy(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  std::vector<std::byte> bytes(x.bytes().begin(), x.bytes().end());
  return {Tensor(o[0].first, o[0].second, std::move(bytes))};
}

OutInfos infer_flatten(const Ctx& c) {
  const Shape& x = c.shape(0, "input");
  const std::int64_t rank = static_cast<std::int64_t>(x.size());
  std::int64_t axis = c.node.attr_int("axis", 1);
  if (axis < -rank || axis > rank) c.bad(fmt::format("axis {} is out of range for rank {}", axis, rank));
  if (axis < 0) axis += rank;
  std::int64_t a = 1, b = 1;
  for (std::int64_t d = 0; d < rank; ++d) (d < axis ? a : b) *= x[d];
  return {{c.dtype(0, "input"), {a, b}}};
}

std::string check_reshape(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "data", kAll).in(1, "shape", kIdx).reason;
}
OutInfos infer_reshape(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  const auto spec = int_values(c.constant(1, "shape"));
  const bool allowzero = c.node.attr_int("allowzero", 0) != 0;
  Shape out(spec.size());
  std::int64_t known = 1;
  int infer_at = -1;
  for (std::size_t i = 0; i < spec.size(); ++i) {
    std::int64_t v = spec[i];
    if (v == 0 && !allowzero) {
      if (i >= x.size()) c.bad(fmt::format("shape[{}] = 0 copies a dim the input {} does not have", i, shape_to_string(x)));
      v = x[i];
    }
    if (v == -1) {
      if (infer_at >= 0) c.bad("shape has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    if (v < 0) c.bad(fmt::format("shape[{}] = {} is invalid", i, v));
    out[i] = v;
    known *= v;
  }
  const std::int64_t total = element_count(x);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      c.bad(fmt::format("cannot reshape {} to {}", shape_to_string(x), shape_to_string(spec)));
    }
    out[static_cast<std::size_t>(infer_at)] = total / known;
  } else if (known != total) {
    c.bad(fmt::format("cannot reshape {} ({} elements) to {}", shape_to_string(x), total, shape_to_string(out)));
  }
  return {{c.dtype(0, "data"), out}};
}

std::vector<std::int64_t> transpose_perm(const Ctx& c, std::size_t rank) {
  std::vector<std::int64_t> dflt(rank);
  for (std::size_t i = 0; i < rank; ++i) dflt[i] = static_cast<std::int64_t>(rank - 1 - i);
  auto perm = c.node.attr_ints("perm", dflt);
  std::vector<bool> seen(rank, false);
  bool ok = perm.size() == rank;
  for (std::size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < static_cast<std::int64_t>(rank) && !seen[static_cast<std::size_t>(perm[i])];
    if (ok) seen[static_cast<std::size_t>(perm[i])] = true;
  }
  if (!ok) c.bad(fmt::format("perm {} is not a permutation of {} dims", shape_to_string(perm), rank));
  return perm;
}
OutInfos infer_transpose(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  const auto perm = transpose_perm(c, x.size());
  Shape out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[static_cast<std::size_t>(perm[i])];
  return {{c.dtype(0, "data"), out}};
}
std::vector<Tensor> run_transpose(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const auto perm = transpose_perm(c, x.shape().size());
  const auto in_st = contiguous_strides(x.shape());
  std::vector<std::int64_t> st(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) st[i] = in_st[static_cast<std::size_t>(perm[i])];
  Tensor y(o[0].first, o[0].second);
  gather_strided_any(x.dtype(), x.bytes().data(), y.bytes().data(), y.shape(), st, 0);
  return {std::move(y)};
}

std::string check_concat(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.require(!d.empty(), "Concat needs at least one input");
  for (std::size_t i = 0; i < d.size(); ++i) ch.in(i, "input", kAll).same(0, i);
  return ch.reason;
}
OutInfos infer_concat(const Ctx& c) {
  if (c.in.empty()) c.bad("Concat needs at least one input");
  const Shape& first = c.shape(0, "input 0");
  const DType dt = c.dtype(0, "input 0");
  if (first.empty()) c.bad("Concat inputs must have rank >= 1");
  const std::int64_t rank = static_cast<std::int64_t>(first.size());
  if (!c.node.attributes.count("axis")) c.bad("attribute 'axis' is required");
  const auto axis = static_cast<std::size_t>(c.axis(c.node.attr_int("axis", 0), rank, "axis"));
  Shape out = first;
  out[axis] = 0;
  for (std::size_t i = 0; i < c.in.size(); ++i) {
    const Shape& s = c.shape(i, "input");
    if (c.dtype(i, "input") != dt) c.bad("inputs have different dtypes");
    bool ok = s.size() == first.size();
    for (std::size_t d = 0; ok && d < s.size(); ++d) ok = d == axis || s[d] == first[d];
    if (!ok) {
      c.bad(fmt::format("input {} has shape {}, which does not fit {} along axis {}", i,
                        shape_to_string(s), shape_to_string(first), axis));
    }
    out[axis] += s[axis];
  }
  return {{dt, out}};
}
std::vector<Tensor> run_concat(const Ctx& c, const OutInfos& o) {
  Tensor y(o[0].first, o[0].second);
  const Shape& ys = y.shape();
  const auto axis = static_cast<std::size_t>(
      c.axis(c.node.attr_int("axis", 0), static_cast<std::int64_t>(ys.size()), "axis"));
  std::int64_t outer = 1, inner = static_cast<std::int64_t>(dtype_size(y.dtype()));
  for (std::size_t d = 0; d < axis; ++d) outer *= ys[d];
  for (std::size_t d = axis + 1; d < ys.size(); ++d) inner *= ys[d];
  std::byte* dst = y.bytes().data();
  const std::int64_t row = ys[axis] * inner;
  std::int64_t at = 0;
  for (std::size_t i = 0; i < c.in.size(); ++i) {
    const Tensor& x = c.t(i);
    const std::int64_t chunk = x.shape()[axis] * inner;
    const std::byte* src = x.bytes().data();
    for (std::int64_t a = 0; a < outer && chunk > 0; ++a) {
      std::memcpy(dst + a * row + at, src + a * chunk, static_cast<std::size_t>(chunk));
    }
    at += chunk;
  }
  return {std::move(y)};
}

// Split sizes along the axis: input 1 (opset >= 13), attribute 'split' (< 13), 'num_outputs'
// (>= 18, last part smaller), else equal parts.
std::vector<std::int64_t> split_sizes(const Ctx& c, std::int64_t dim) {
  std::vector<std::int64_t> sizes;
  const auto parts = static_cast<std::int64_t>(c.n_out);
  if (c.has(1)) {
    sizes = int_values(c.constant(1, "split"));
  } else if (c.node.attributes.count("split")) {
    sizes = c.node.attr_ints("split", {});
  } else if (c.node.attributes.count("num_outputs")) {
    const std::int64_t num = c.node.attr_int("num_outputs", parts);
    if (num != parts || num < 1) c.bad(fmt::format("num_outputs {} but the node has {} outputs", num, parts));
    const std::int64_t each = (dim + num - 1) / num;
    for (std::int64_t i = 0; i < num; ++i) sizes.push_back(std::max<std::int64_t>(0, std::min(each, dim - i * each)));
  } else {
    if (dim % parts != 0) c.bad(fmt::format("dim {} does not split into {} equal parts", dim, parts));
    sizes.assign(static_cast<std::size_t>(parts), dim / parts);
  }
  if (static_cast<std::int64_t>(sizes.size()) != parts) {
    c.bad(fmt::format("{} split sizes for {} outputs", sizes.size(), parts));
  }
  std::int64_t sum = 0;
  for (auto s : sizes) {
    if (s < 0) c.bad("split sizes must be >= 0");
    sum += s;
  }
  if (sum != dim) c.bad(fmt::format("split sizes sum to {}, the axis has {}", sum, dim));
  return sizes;
}
OutInfos infer_split(const Ctx& c) {
  const Shape& x = c.shape(0, "input");
  const auto axis = static_cast<std::size_t>(
      c.axis(c.node.attr_int("axis", 0), static_cast<std::int64_t>(x.size()), "axis"));
  OutInfos out;
  for (auto s : split_sizes(c, x[axis])) {
    Shape o = x;
    o[axis] = s;
    out.push_back({c.dtype(0, "input"), o});
  }
  return out;
}
std::vector<Tensor> run_split(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Shape& xs = x.shape();
  const auto axis = static_cast<std::size_t>(
      c.axis(c.node.attr_int("axis", 0), static_cast<std::int64_t>(xs.size()), "axis"));
  std::int64_t outer = 1, inner = static_cast<std::int64_t>(dtype_size(x.dtype()));
  for (std::size_t d = 0; d < axis; ++d) outer *= xs[d];
  for (std::size_t d = axis + 1; d < xs.size(); ++d) inner *= xs[d];
  const std::int64_t row = xs[axis] * inner;
  std::vector<Tensor> out;
  std::int64_t at = 0;
  for (const auto& [dt, shape] : o) {
    Tensor y(dt, shape);
    const std::int64_t chunk = shape[axis] * inner;
    for (std::int64_t a = 0; a < outer && chunk > 0; ++a) {
      std::memcpy(y.bytes().data() + a * chunk, x.bytes().data() + a * row + at, static_cast<std::size_t>(chunk));
    }
    at += chunk;
    out.push_back(std::move(y));
  }
  return out;
}

// Axes from input 1 (opset >= 13) or attribute 'axes'; nullopt when neither is given.
std::optional<std::vector<std::int64_t>> axes_operand(const Ctx& c) {
  if (c.has(1)) return int_values(c.constant(1, "axes"));
  if (c.node.attributes.count("axes")) return c.node.attr_ints("axes", {});
  return std::nullopt;
}

OutInfos infer_squeeze(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  const std::int64_t rank = static_cast<std::int64_t>(x.size());
  std::vector<bool> drop(x.size(), false);
  if (auto axes = axes_operand(c)) {
    for (auto a : *axes) {
      const auto ax = static_cast<std::size_t>(c.axis(a, rank, "axis"));
      if (x[ax] != 1) c.bad(fmt::format("cannot squeeze axis {} of shape {}: not 1", a, shape_to_string(x)));
      drop[ax] = true;
    }
  } else {
    for (std::size_t d = 0; d < x.size(); ++d) drop[d] = x[d] == 1;
  }
  Shape out;
  for (std::size_t d = 0; d < x.size(); ++d) {
    if (!drop[d]) out.push_back(x[d]);
  }
  return {{c.dtype(0, "data"), out}};
}

OutInfos infer_unsqueeze(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  auto axes = axes_operand(c);
  if (!axes) c.bad("axes are required (input 1 since opset 13, attribute before)");
  const std::int64_t rank = static_cast<std::int64_t>(x.size() + axes->size());
  std::vector<bool> added(static_cast<std::size_t>(rank), false);
  for (auto a : *axes) {
    const auto ax = static_cast<std::size_t>(c.axis(a, rank, "axis"));
    if (added[ax]) c.bad(fmt::format("axis {} is listed twice", a));
    added[ax] = true;
  }
  Shape out;
  std::size_t next = 0;
  for (std::size_t d = 0; d < added.size(); ++d) out.push_back(added[d] ? 1 : x[next++]);
  return {{c.dtype(0, "data"), out}};
}

OutInfos infer_shape(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  const auto rank = static_cast<std::int64_t>(x.size());
  auto clampi = [&](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank); };
  const std::int64_t start = clampi(c.node.attr_int("start", 0));
  const std::int64_t end = clampi(c.node.attr_int("end", rank));
  return {{DType::Int64, {std::max<std::int64_t>(0, end - start)}}};
}
std::vector<Tensor> run_shape(const Ctx& c, const OutInfos& o) {
  const Shape& x = c.t(0).shape();
  const auto rank = static_cast<std::int64_t>(x.size());
  std::int64_t start = c.node.attr_int("start", 0);
  start = std::clamp(start < 0 ? start + rank : start, std::int64_t{0}, rank);
  Tensor y(o[0].first, o[0].second);
  auto v = y.as<std::int64_t>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = x[static_cast<std::size_t>(start) + i];
  return {std::move(y)};
}

std::string check_gather(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "data", kAll).in(1, "indices", kIdx).reason;
}
OutInfos infer_gather(const Ctx& c) {
  const Shape& x = c.shape(0, "data");
  const Shape& idx = c.shape(1, "indices");
  if (x.empty()) c.bad("data must have rank >= 1");
  const auto axis = static_cast<std::size_t>(
      c.axis(c.node.attr_int("axis", 0), static_cast<std::int64_t>(x.size()), "axis"));
  Shape out(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(axis));
  out.insert(out.end(), idx.begin(), idx.end());
  out.insert(out.end(), x.begin() + static_cast<std::ptrdiff_t>(axis) + 1, x.end());
  return {{c.dtype(0, "data"), out}};
}
std::vector<Tensor> run_gather(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Shape& xs = x.shape();
  const auto axis = static_cast<std::size_t>(
      c.axis(c.node.attr_int("axis", 0), static_cast<std::int64_t>(xs.size()), "axis"));
  auto idx = int_values(c.t(1));
  const std::int64_t n = xs[axis];
  for (auto& i : idx) {
    if (i < -n || i >= n) {
      fail(c.node, ErrorCode::InvalidInput, fmt::format("index {} is out of range for axis {} of size {}", i, axis, n));
    }
    if (i < 0) i += n;
  }
  std::int64_t outer = 1, inner = static_cast<std::int64_t>(dtype_size(x.dtype()));
  for (std::size_t d = 0; d < axis; ++d) outer *= xs[d];
  for (std::size_t d = axis + 1; d < xs.size(); ++d) inner *= xs[d];
  Tensor y(o[0].first, o[0].second);
  std::byte* dst = y.bytes().data();
  const std::byte* src = x.bytes().data();
  if (inner == 0) return {std::move(y)};
  for (std::int64_t a = 0; a < outer; ++a) {
    for (auto i : idx) {
      std::memcpy(dst, src + (a * n + i) * inner, static_cast<std::size_t>(inner));
      dst += inner;
    }
  }
  return {std::move(y)};
}

std::string check_slice(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}
      .in(0, "data", kAll)
      .in(1, "starts", kIdx, false)
      .in(2, "ends", kIdx, false)
      .in(3, "axes", kIdx, false)
      .in(4, "steps", kIdx, false)
      .reason;
}

struct SliceGeom {
  Shape out;
  std::vector<std::int64_t> strides;  // source strides per output dim (steps applied)
  std::int64_t base = 0;              // source offset of the first element
};
SliceGeom slice_geom(const Ctx& c, const Shape& x) {
  std::vector<std::int64_t> starts, ends, axes, steps;
  if (c.has(1)) {
    starts = int_values(c.constant(1, "starts"));
    ends = int_values(c.constant(2, "ends"));
    if (c.has(3)) axes = int_values(c.constant(3, "axes"));
    if (c.has(4)) steps = int_values(c.constant(4, "steps"));
  } else {  // opset < 10
    starts = c.node.attr_ints("starts", {});
    ends = c.node.attr_ints("ends", {});
    axes = c.node.attr_ints("axes", {});
  }
  if (axes.empty()) {
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    c.bad("starts, ends, axes and steps must have the same length");
  }
  const std::int64_t rank = static_cast<std::int64_t>(x.size());
  SliceGeom g;
  g.out = x;
  const auto in_st = contiguous_strides(x);
  g.strides = in_st;
  std::vector<bool> seen(x.size(), false);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const auto ax = static_cast<std::size_t>(c.axis(axes[i], rank, "axis"));
    if (seen[ax]) c.bad(fmt::format("axis {} is sliced twice", axes[i]));
    seen[ax] = true;
    const std::int64_t dim = x[ax], step = steps[i];
    if (step == 0) c.bad("slice step must not be 0");
    std::int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    std::int64_t len = 0;
    if (step > 0) {
      start = std::clamp<std::int64_t>(start, 0, dim);
      end = std::clamp<std::int64_t>(end, 0, dim);
      len = end > start ? (end - start + step - 1) / step : 0;
    } else if (dim > 0) {
      start = std::clamp<std::int64_t>(start, 0, dim - 1);
      end = std::clamp<std::int64_t>(end, -1, dim - 1);
      len = start > end ? (start - end - step - 1) / -step : 0;
    }
    g.out[ax] = len;
    g.strides[ax] = in_st[ax] * step;
    if (len > 0) g.base += start * in_st[ax];
  }
  return g;
}
OutInfos infer_slice(const Ctx& c) {
  return {{c.dtype(0, "data"), slice_geom(c, c.shape(0, "data")).out}};
}
std::vector<Tensor> run_slice(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const SliceGeom g = slice_geom(c, x.shape());
  Tensor y(o[0].first, o[0].second);
  gather_strided_any(x.dtype(), x.bytes().data(), y.bytes().data(), g.out, g.strides, g.base);
  return {std::move(y)};
}

std::optional<DType> dtype_from_onnx(std::int64_t t) {
  switch (t) {
    case 1: return DType::Float32;
    case 2: return DType::UInt8;
    case 3: return DType::Int8;
    case 6: return DType::Int32;
    case 7: return DType::Int64;
    default: return std::nullopt;
  }
}

std::string check_cast(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "input", kAll);
  const std::int64_t to = n.attr_int("to", -1);
  ch.require(n.attributes.count("to") > 0, "attribute 'to' is required");
  ch.require(dtype_from_onnx(to).has_value(),
             fmt::format("cast to ONNX type {} is not implemented (only float32, uint8, int8, int32, "
                         "int64: 1, 2, 3, 6, 7)", to));
  return ch.reason;
}
OutInfos infer_cast(const Ctx& c) {
  const auto to = dtype_from_onnx(c.node.attr_int("to", -1));
  if (!to) c.bad("attribute 'to' is missing or names a type the host cannot hold");
  return {{*to, c.shape(0, "input")}};
}
std::vector<Tensor> run_cast(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  Tensor y(o[0].first, o[0].second);
  visit_dtype(x.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    visit_dtype(y.dtype(), [&](auto to_tag) {
      using To = decltype(to_tag);
      auto s = x.as<From>();
      auto d = y.as<To>();
      for (std::size_t i = 0; i < s.size(); ++i) d[i] = convert<To>(s[i]);
    });
  });
  return {std::move(y)};
}

// ---------------------------------------------------------------------------------------------
// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
// ---------------------------------------------------------------------------------------------

std::string check_quantize(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "x", kF32 | bit(DType::Int32)).in(1, "y_scale", kF32).in(2, "y_zero_point", kQ8, false);
  if (n.attributes.count("output_dtype")) {
    const auto od = dtype_from_onnx(n.attr_int("output_dtype", 0));
    ch.require(od && (bit(*od) & kQ8), "output_dtype must be uint8 or int8");
    ch.require(!ch.present(2) || !od || *d[2] == *od, "output_dtype differs from y_zero_point's dtype");
  }
  return ch.reason;
}
std::string check_dequantize(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}
      .in(0, "x", kQ8 | bit(DType::Int32))
      .in(1, "x_scale", kF32)
      .in(2, "x_zero_point", kQ8 | bit(DType::Int32), false)
      .same(0, 2)
      .reason;
}

// Per-tensor (1 element) or per-axis (1-D, dim[axis] elements) quantization parameters.
// Returns the normalized axis, or -1 for per-tensor.
std::int64_t quant_axis(const Ctx& c, const Shape& x, std::size_t scale_i, std::size_t zp_i) {
  const Shape& s = c.shape(scale_i, "scale");
  if (c.has(zp_i) && *c.in[zp_i].shape != s) {
    c.bad(fmt::format("zero point {} and scale {} differ in shape", shape_to_string(*c.in[zp_i].shape),
                      shape_to_string(s)));
  }
  if (element_count(s) == 1) return -1;  // per tensor (a scalar or a one-element tensor)
  if (s.size() != 1) c.bad(fmt::format("scale {} must be a scalar or 1-D", shape_to_string(s)));
  const auto axis = c.axis(c.node.attr_int("axis", 1), static_cast<std::int64_t>(x.size()), "axis");
  if (s[0] != x[static_cast<std::size_t>(axis)]) {
    c.bad(fmt::format("per-axis scale has {} elements, axis {} of {} has {}", s[0], axis,
                      shape_to_string(x), x[static_cast<std::size_t>(axis)]));
  }
  return axis;
}

DType quantize_out_dtype(const Ctx& c) {
  if (c.has(2)) return c.in[2].dtype;
  if (c.node.attributes.count("output_dtype")) {
    if (auto od = dtype_from_onnx(c.node.attr_int("output_dtype", 0))) return *od;
  }
  return DType::UInt8;
}

OutInfos infer_quantize(const Ctx& c) {
  const Shape& x = c.shape(0, "x");
  quant_axis(c, x, 1, 2);
  return {{quantize_out_dtype(c), x}};
}
OutInfos infer_dequantize(const Ctx& c) {
  const Shape& x = c.shape(0, "x");
  quant_axis(c, x, 1, 2);
  return {{DType::Float32, x}};
}

// Loops over x as [outer, n, inner] with n along `axis` (axis -1: per tensor, n = 1).
template <class Fn>
void per_axis(const Shape& x, std::int64_t axis, Fn&& fn) {
  std::int64_t outer = 1, n = 1, inner = 1;
  for (std::size_t d = 0; d < x.size(); ++d) {
    const auto di = static_cast<std::int64_t>(d);
    if (axis < 0 || di > axis) {
      inner *= x[d];
    } else if (di < axis) {
      outer *= x[d];
    } else {
      n = x[d];
    }
  }
  for (std::int64_t a = 0; a < outer; ++a) {
    for (std::int64_t k = 0; k < n; ++k) fn((a * n + k) * inner, inner, k);
  }
}

// One element by the project's one quantization rule (host/quantize.h).
template <class Q>
Q quantize_value(float v, float scale, std::int32_t zp) {
  constexpr auto lo = static_cast<std::int32_t>(std::numeric_limits<Q>::lowest());
  constexpr auto hi = static_cast<std::int32_t>(std::numeric_limits<Q>::max());
  return static_cast<Q>(host::quantize_value(v / scale, zp, lo, hi));
}

std::vector<Tensor> run_quantize(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const std::int64_t axis = quant_axis(c, x.shape(), 1, 2);
  const auto scales = c.t(1).as<float>();
  const std::vector<std::int64_t> zps = c.has(2) ? int_values(c.t(2)) : std::vector<std::int64_t>{};
  for (float s : scales) {
    if (!(s > 0.0f) && !(s < 0.0f)) fail(c.node, ErrorCode::InvalidInput, "y_scale must not be 0");
  }
  std::vector<float> xf(static_cast<std::size_t>(x.elements()));
  if (x.dtype() == DType::Float32) {
    std::copy(x.as<float>().begin(), x.as<float>().end(), xf.begin());
  } else {
    auto xi = x.as<std::int32_t>();
    for (std::size_t i = 0; i < xf.size(); ++i) xf[i] = static_cast<float>(xi[i]);
  }
  Tensor y(o[0].first, o[0].second);
  visit_dtype(y.dtype(), [&](auto tag) {
    using Q = decltype(tag);
    if constexpr (std::is_same_v<Q, std::uint8_t> || std::is_same_v<Q, std::int8_t>) {
      Q* out = y.as<Q>().data();
      per_axis(x.shape(), axis, [&](std::int64_t at, std::int64_t len, std::int64_t k) {
        const float s = scales[static_cast<std::size_t>(k)];
        const auto z = static_cast<std::int32_t>(zps.empty() ? 0 : zps[static_cast<std::size_t>(k)]);
        for (std::int64_t j = 0; j < len; ++j) out[at + j] = quantize_value<Q>(xf[static_cast<std::size_t>(at + j)], s, z);
      });
    } else {
      fail(c.node, ErrorCode::UnsupportedOperator, "QuantizeLinear output must be uint8 or int8");
    }
  });
  return {std::move(y)};
}

std::vector<Tensor> run_dequantize(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const std::int64_t axis = quant_axis(c, x.shape(), 1, 2);
  const auto scales = c.t(1).as<float>();
  const std::vector<std::int64_t> zps = c.has(2) ? int_values(c.t(2)) : std::vector<std::int64_t>{};
  const auto xv = int_values(x);
  Tensor y(o[0].first, o[0].second);
  float* out = y.as<float>().data();
  per_axis(x.shape(), axis, [&](std::int64_t at, std::int64_t len, std::int64_t k) {
    const float s = scales[static_cast<std::size_t>(k)];
    const std::int64_t z = zps.empty() ? 0 : zps[static_cast<std::size_t>(k)];
    for (std::int64_t j = 0; j < len; ++j) {
      out[at + j] = static_cast<float>(xv[static_cast<std::size_t>(at + j)] - z) * s;
    }
  });
  return {std::move(y)};
}

OutInfos infer_dynamic_quantize(const Ctx& c) {
  return {{DType::UInt8, c.shape(0, "x")}, {DType::Float32, {}}, {DType::UInt8, {}}};
}
std::vector<Tensor> run_dynamic_quantize(const Ctx& c, const OutInfos& o) {
  const Tensor& tx = c.t(0);
  auto x = tx.as<float>();
  float mn = 0.0f, mx = 0.0f;  // the range always includes 0
  for (float v : x) {
    if (v < mn) mn = v;
    if (v > mx) mx = v;
  }
  float scale = (mx - mn) / 255.0f;
  if (scale == 0.0f) scale = 1.0f;  // x all zeros: the spec divides by 0; ONNX Runtime uses 1
  // saturate(round(0 - min / scale)) to [0, 255]: the one quantization rule with a zero point of 0.
  const std::int32_t zp = host::quantize_value((0.0f - mn) / scale, 0, 0, 255);
  std::vector<Tensor> out;
  for (const auto& [dt, shape] : o) out.emplace_back(dt, shape);
  auto y = out[0].as<std::uint8_t>();
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = quantize_value<std::uint8_t>(x[i], scale, zp);
  out[1].as<float>()[0] = scale;
  out[2].as<std::uint8_t>()[0] = static_cast<std::uint8_t>(zp);
  return out;
}

// ---------------------------------------------------------------------------------------------
// The op table
// ---------------------------------------------------------------------------------------------

using CheckFn = std::string (*)(const Node&, const DtypeList&);
using InferFn = OutInfos (*)(const Ctx&);
using RunFn = std::vector<Tensor> (*)(const Ctx&, const OutInfos&);

struct OpDef {
  std::string_view name;
  std::size_t min_inputs;
  std::size_t max_inputs;   // kMany: unbounded (Concat)
  std::size_t max_outputs;  // kMany: as many as the node has (Split)
  CheckFn check;
  InferFn infer;
  RunFn run;
};
constexpr std::size_t kMany = static_cast<std::size_t>(-1);

const std::vector<OpDef>& op_table() {
  static const std::vector<OpDef> table = {
      {"Softmax", 1, 1, 1, check_float_unary, infer_softmax, run_softmax<false>},
      {"LogSoftmax", 1, 1, 1, check_float_unary, infer_softmax, run_softmax<true>},
      {"Relu", 1, 1, 1, check_relu, infer_same_as_input0, run_relu},
      {"Clip", 1, 3, 1, check_clip, infer_clip, run_clip},
      {"Sigmoid", 1, 1, 1, check_float_unary, infer_same_as_input0, run_sigmoid},
      {"Add", 2, 2, 1, check_binary, infer_binary, run_binary<BinOp::Add>},
      {"Sub", 2, 2, 1, check_binary, infer_binary, run_binary<BinOp::Sub>},
      {"Mul", 2, 2, 1, check_binary, infer_binary, run_binary<BinOp::Mul>},
      {"Div", 2, 2, 1, check_binary, infer_binary, run_binary<BinOp::Div>},
      {"MatMul", 2, 2, 1, check_matmul, infer_matmul, run_matmul},
      {"Gemm", 2, 3, 1, check_gemm, infer_gemm, run_gemm},
      {"Conv", 2, 3, 1, check_conv, infer_conv, run_conv},
      {"MaxPool", 1, 1, 2, check_maxpool, infer_maxpool, run_maxpool},
      {"AveragePool", 1, 1, 1, check_avgpool, infer_avgpool, run_avgpool},
      {"GlobalAveragePool", 1, 1, 1, check_float_unary, infer_global_avgpool, run_global_avgpool},
      {"ReduceMean", 1, 2, 1, check_reduce_mean, infer_reduce_mean, run_reduce_mean},
      {"Flatten", 1, 1, 1, check_any, infer_flatten, run_copy},
      {"Reshape", 2, 2, 1, check_reshape, infer_reshape, run_copy},
      {"Transpose", 1, 1, 1, check_any, infer_transpose, run_transpose},
      {"Concat", 1, kMany, 1, check_concat, infer_concat, run_concat},
      {"Split", 1, 2, kMany, check_data_and_index, infer_split, run_split},
      {"Squeeze", 1, 2, 1, check_data_and_index, infer_squeeze, run_copy},
      {"Unsqueeze", 1, 2, 1, check_data_and_index, infer_unsqueeze, run_copy},
      {"Identity", 1, 1, 1, check_any, infer_same_as_input0, run_copy},
      {"Cast", 1, 1, 1, check_cast, infer_cast, run_cast},
      {"Shape", 1, 1, 1, check_any, infer_shape, run_shape},
      {"Gather", 2, 2, 1, check_gather, infer_gather, run_gather},
      {"Slice", 1, 5, 1, check_slice, infer_slice, run_slice},
      {"QuantizeLinear", 2, 3, 1, check_quantize, infer_quantize, run_quantize},
      {"DequantizeLinear", 2, 3, 1, check_dequantize, infer_dequantize, run_dequantize},
      {"DynamicQuantizeLinear", 1, 1, 3, check_float_unary, infer_dynamic_quantize, run_dynamic_quantize},
      {"ConvInteger", 2, 4, 1, check_conv_integer, infer_conv_integer, run_conv_integer},
      {"MatMulInteger", 2, 4, 1, check_matmul_integer, infer_matmul_integer, run_matmul_integer},
  };
  return table;
}

// Operators of the "furiosa" domain that importers emit (not ONNX operators, so not part of
// cpu_op_list(), which the ONNX conformance tests enumerate).
const std::vector<OpDef>& furiosa_op_table() {
  static const std::vector<OpDef> table = {
      {"QuantizedAveragePool", 1, 1, 1, check_qavgpool, infer_qavgpool, run_qavgpool},
  };
  return table;
}

const OpDef* find_op(const Node& node) {
  if (node.domain == "furiosa") {
    for (const auto& op : furiosa_op_table()) {
      if (op.name == node.op_type) return &op;
    }
    return nullptr;
  }
  if (!node.domain.empty() && node.domain != "ai.onnx") return nullptr;
  for (const auto& op : op_table()) {
    if (op.name == node.op_type) return &op;
  }
  return nullptr;
}

// Dtypes of the present inputs, per the rules of cpu_op_supported.
DtypeList dtype_list(const Node& node, const std::vector<DType>& dtypes) {
  DtypeList d(dtypes.size());
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    if (i >= node.inputs.size() || node.inputs[i] >= 0) d[i] = dtypes[i];
  }
  return d;
}

// "" when supported, else why not. Never throws.
std::string unsupported_reason(const Node& node, const OpDef* op, const DtypeList& d) {
  if (!op) {
    return fmt::format("{} is not implemented by the host operator library", node.qualified_op());
  }
  std::size_t count = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d[i]) count = i + 1;
  }
  if (count > op->max_inputs) {
    return fmt::format("{} takes at most {} inputs, the node has {}", op->name, op->max_inputs, count);
  }
  try {
    return op->check(node, d);
  } catch (const Error& e) {
    return e.message();
  }
}

// Resolves the op and checks support; throws UnsupportedOperator naming the node otherwise, or
// IncompatibleModel when a required input is missing.
const OpDef& require_op(const Node& node, const DtypeList& d) {
  const OpDef* op = find_op(node);
  if (op) {
    for (std::size_t i = 0; i < op->min_inputs; ++i) {
      if (i >= d.size() || !d[i]) {
        fail(node, ErrorCode::IncompatibleModel,
             fmt::format("required input {} is missing ({} needs at least {} inputs)", i, op->name,
                         op->min_inputs));
      }
    }
  }
  std::string why = unsupported_reason(node, op, d);
  if (!why.empty()) fail(node, ErrorCode::UnsupportedOperator, "the host library cannot run it: " + why);
  return *op;
}

std::size_t output_count(const Node& node, const OpDef& op) {
  std::size_t n = std::max<std::size_t>(1, node.outputs.size());
  if (op.max_outputs != kMany && n > op.max_outputs) {
    fail(node, ErrorCode::IncompatibleModel,
         fmt::format("has {} outputs, {} produces at most {}", n, op.name, op.max_outputs));
  }
  return n;
}

OutInfos infer_checked(const OpDef& op, const Ctx& c) {
  for (std::size_t i = 0; i < c.in.size(); ++i) {
    if (!c.in[i].present) continue;
    for (auto dim : *c.in[i].shape) {
      if (dim < 0) {
        c.bad(fmt::format("input {} has an unknown dim in shape {}", i, shape_to_string(*c.in[i].shape)));
      }
    }
  }
  OutInfos out = op.infer(c);
  if (out.size() > c.n_out) out.resize(c.n_out);
  if (out.size() < c.n_out) {
    c.bad(fmt::format("has {} outputs, {} produces {}", c.n_out, op.name, out.size()));
  }
  return out;
}

}  // namespace

bool cpu_op_supported(const Node& node, const std::vector<DType>& input_dtypes, std::string* reason) {
  std::string why = unsupported_reason(node, find_op(node), dtype_list(node, input_dtypes));
  if (reason) *reason = why;
  return why.empty();
}

std::vector<std::pair<DType, Shape>> cpu_op_infer(const Node& node,
                                                  const std::vector<const CpuValueInfo*>& inputs) {
  DtypeList d(inputs.size());
  std::vector<In> in(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) continue;
    d[i] = inputs[i]->dtype;
    in[i] = In{true, inputs[i]->dtype, &inputs[i]->shape, inputs[i]->constant};
    if (in[i].value && (in[i].value->dtype() != in[i].dtype || in[i].value->shape() != inputs[i]->shape)) {
      fail(node, ErrorCode::Internal,
           fmt::format("input {}: constant is {} {}, the value info says {} {}", i,
                       dtype_name(in[i].value->dtype()), shape_to_string(in[i].value->shape()),
                       dtype_name(in[i].dtype), shape_to_string(inputs[i]->shape)));
    }
  }
  const OpDef& op = require_op(node, d);
  const Ctx c{node, in, output_count(node, op)};
  return infer_checked(op, c);
}

std::vector<Tensor> run_cpu_op(const Node& node, const std::vector<const Tensor*>& inputs) {
  DtypeList d(inputs.size());
  std::vector<In> in(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) continue;
    d[i] = inputs[i]->dtype();
    in[i] = In{true, inputs[i]->dtype(), &inputs[i]->shape(), inputs[i]};
  }
  const OpDef& op = require_op(node, d);
  const Ctx c{node, in, output_count(node, op)};
  const OutInfos infos = infer_checked(op, c);
  std::vector<Tensor> out = op.run(c, infos);
  out.resize(infos.size());
  return out;
}

std::vector<std::string> cpu_op_list() {
  std::vector<std::string> names;
  for (const auto& op : op_table()) names.emplace_back(op.name);
  return names;
}

}  // namespace furiosa::compiler
