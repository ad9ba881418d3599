// The host operator library (host/cpu_ops.h): Elementwise operators: Relu, Sigmoid, Clip, Add, Sub, Mul, Div.
#include "ops_common.h"

namespace furiosa::host::detail {
namespace {

// ---------------------------------------------------------------------------------------------
// Elementwise: Relu, Sigmoid, Clip, Add/Sub/Mul/Div
// ---------------------------------------------------------------------------------------------


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

}  // namespace

OpRows elementwise_ops() {
  OpRows rows;
  rows.onnx.push_back({"Relu", 1, 1, 1, check_relu, infer_same_as_input0, run_relu});
  rows.onnx.push_back({"Clip", 1, 3, 1, check_clip, infer_clip, run_clip});
  rows.onnx.push_back({"Sigmoid", 1, 1, 1, check_float_unary, infer_same_as_input0, run_sigmoid});
  rows.onnx.push_back({"Add", 2, 2, 1, check_binary, infer_binary, run_binary<BinOp::Add>});
  rows.onnx.push_back({"Sub", 2, 2, 1, check_binary, infer_binary, run_binary<BinOp::Sub>});
  rows.onnx.push_back({"Mul", 2, 2, 1, check_binary, infer_binary, run_binary<BinOp::Mul>});
  rows.onnx.push_back({"Div", 2, 2, 1, check_binary, infer_binary, run_binary<BinOp::Div>});
  return rows;
}

}  // namespace furiosa::host::detail
