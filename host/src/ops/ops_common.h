// Private to the host operator library: the generic helpers (dtype dispatch, strided iteration,
// errors), the per-call context, the functions several operator families share, and the op
// table's row type. Each family file (elementwise.cpp, softmax.cpp, matmul.cpp, conv_pool.cpp,
// reduce.cpp, data_movement.cpp, quantize_ops.cpp, resize.cpp with resize_tflite.cpp and
// resize_ort.cpp, detection.cpp, tflite_arith.cpp, tflite_transpose_conv.cpp) defines its
// operators and returns its rows;
// cpu_ops.cpp joins them and implements the public entry points (host/cpu_ops.h).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "furiosa/host/cpu_ops.h"
#include "furiosa/host/quantize.h"

namespace furiosa::host::detail {

/// The library works on operator nodes (compiler::Node is the same type).
using Node = OpNode;

// ---------------------------------------------------------------------------------------------
// Generic helpers
// ---------------------------------------------------------------------------------------------

using OutInfo = std::pair<DType, Shape>;
using OutInfos = std::vector<OutInfo>;
using DtypeList = std::vector<std::optional<DType>>;

[[noreturn]] inline void fail(const Node& n, ErrorCode code, const std::string& msg) {
  throw Error(
      code,
      fmt::format("node '{}' ({}): {}", escape_text(n.name), escape_text(n.qualified_op()), msg),
      ErrorSubject::of_node(n.name));
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

inline std::string mask_names(unsigned mask) {
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
inline std::vector<std::int64_t> broadcast_strides(const Shape& in, std::size_t rank) {
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

inline void gather_strided_any(DType dtype, const std::byte* src, std::byte* dst, const Shape& shape,
                        const std::vector<std::int64_t>& strides, std::int64_t base) {
  visit_size(dtype, [&](auto size) { gather_strided<decltype(size)::value>(src, dst, shape, strides, base); });
}

// dst[o] = src[sum_d tables[d][o_d] * src_strides[d]] over the output shape (tables[d] has
// out_shape[d] entries): a gather whose source index along each dim is a per-dim table (Resize
// nearest, Pad). An entry of -1 in any dim writes `fill` (one element's bytes) instead.
inline void gather_indexed(std::size_t elem_size, const std::byte* src, const Shape& src_shape, std::byte* dst,
                           const Shape& out_shape, const std::vector<std::vector<std::int64_t>>& tables,
                           const std::byte* fill) {
  const std::int64_t total = element_count(out_shape);
  if (total == 0) return;
  const std::size_t r = out_shape.size();
  const auto st = contiguous_strides(src_shape);
  const auto es = static_cast<std::int64_t>(elem_size);
  std::vector<std::int64_t> idx(r, 0);
  for (std::int64_t i = 0; i < total; ++i) {
    std::int64_t off = 0;
    bool outside = false;
    for (std::size_t d = 0; d < r; ++d) {
      const std::int64_t s = tables[d][static_cast<std::size_t>(idx[d])];
      outside = outside || s < 0;
      off += s * st[d];
    }
    std::memcpy(dst + i * es, outside ? fill : src + off * es, elem_size);
    for (std::size_t d = r; d-- > 0;) {
      if (++idx[d] < out_shape[d]) break;
      idx[d] = 0;
    }
  }
}

// Integer values of an index-like tensor (int32/int64; uint8/int8 accepted too).
inline std::vector<std::int64_t> int_values(const Tensor& t) {
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
  /// run_cpu_op's `reuse`: tensors whose storage output i may take (null: allocate).
  std::vector<Tensor>* reuse = nullptr;

  /// Output i of `o`, zero-filled like Tensor(dtype, shape): (*reuse)[i] itself when it has
  /// that dtype and shape (its storage kept: no new allocation, no page faults), else new.
  Tensor output(const OutInfos& o, std::size_t i) const {
    if (!reusable(o, i)) return Tensor(o[i].first, o[i].second);
    Tensor y = std::move((*reuse)[i]);
    std::fill(y.bytes().begin(), y.bytes().end(), std::byte{0});
    return y;
  }

  /// Output i of `o` for an operator that writes every element: as output(), but neither
  /// reused nor new storage is zero-filled first (a detector's float head reuses megabytes per
  /// query, the fill was about 4% of a YOLOv8n inference; its model outputs are new each query,
  /// 7.6 MB: Tensor::uninitialized).
  Tensor output_for_overwrite(const OutInfos& o, std::size_t i) const {
    return reusable(o, i) ? std::move((*reuse)[i]) : Tensor::uninitialized(o[i].first, o[i].second);
  }

  /// Whether (*reuse)[i] can hold output i of `o` (same dtype and shape, storage present).
  bool reusable(const OutInfos& o, std::size_t i) const {
    return reuse != nullptr && i < reuse->size() && (*reuse)[i].dtype() == o[i].first &&
           (*reuse)[i].shape() == o[i].second && (*reuse)[i].size_bytes() > 0;
  }

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
      throw InputNotConstant(
          ErrorCode::IncompatibleModel,
          fmt::format("node '{}' ({}): input {} ({}) must be a constant to infer the output shape",
                      escape_text(node.name), escape_text(node.qualified_op()), i, what),
          ErrorSubject::of_node(node.name));
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

// An operator's one output as its result list. (`return {std::move(y)};` would copy y: the
// elements of an initializer list are const.)
inline std::vector<Tensor> single_output(Tensor y) {
  std::vector<Tensor> out;
  out.push_back(std::move(y));
  return out;
}

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
// Functions shared by several families
// ---------------------------------------------------------------------------------------------

inline OutInfos infer_same_as_input0(const Ctx& c) { return {{c.dtype(0, "X"), c.shape(0, "X")}}; }

inline std::string check_float_unary(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "X", kF32).reason;
}

inline float float_attr(const Node& n, const std::string& key, float fallback) {
  auto it = n.attributes.find(key);
  if (it == n.attributes.end()) return fallback;
  if (const float* f = std::get_if<float>(&it->second)) return *f;
  fail(n, ErrorCode::IncompatibleModel, fmt::format("attribute '{}' must be a float", key));
}

inline Shape broadcast_shape(const Ctx& c, const Shape& a, const Shape& b) {
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

// Values of an integer tensor minus a zero point broadcast to `target` (as int32). `zp` may be
// null (zero point 0). The zero point must be unidirectionally broadcastable to `target`.
inline std::vector<std::int32_t> minus_zero_point(const Ctx& c, const Tensor& x, const Tensor* zp,
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

inline std::optional<DType> dtype_from_onnx(std::int64_t t) {
  switch (t) {
    case 1: return DType::Float32;
    case 2: return DType::UInt8;
    case 3: return DType::Int8;
    case 6: return DType::Int32;
    case 7: return DType::Int64;
    default: return std::nullopt;
  }
}

inline std::string check_any(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "data", kAll).reason;
}

inline std::string check_data_and_index(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "data", kAll).in(1, "index input", kIdx, false).reason;
}
// ---------------------------------------------------------------------------------------------
// The op table's rows
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


/// An operator family's rows: ONNX operators (cpu_op_list) and "furiosa" domain operators.
struct OpRows {
  std::vector<OpDef> onnx;
  std::vector<OpDef> furiosa;
};

OpRows elementwise_ops();
OpRows softmax_ops();
OpRows matmul_ops();
OpRows conv_pool_ops();
OpRows reduce_ops();
OpRows data_movement_ops();
OpRows quantize_ops();
OpRows resize_ops();
OpRows detection_ops();
OpRows tflite_arith_ops();
OpRows tflite_transpose_conv_ops();
/// furiosa::TFLiteFloat (tflite_float.cpp): TFLite's float32 reference arithmetic
/// (kernels/internal/reference/{add,sub,mul,div,prelu,leaky_relu,hard_swish}.h).
OpRows tflite_float_ops();

}  // namespace furiosa::host::detail
