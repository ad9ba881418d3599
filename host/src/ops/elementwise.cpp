// The host operator library (host/cpu_ops.h): Elementwise operators: Relu, Sigmoid, Clip, Add, Sub, Mul,
// Div, Pow, Min, Max; the float32 functions Exp, Log, Sqrt, Tanh, Floor, Ceil, LeakyRelu,
// HardSigmoid, HardSwish; Neg and Abs.
#include "../float_math.h"
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
  Tensor y = c.output_for_overwrite(o, 0);
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto x = c.t(0).as<T>();
    auto out = y.as<T>();
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] > T{0} ? x[i] : T{0};
  });
  return single_output(std::move(y));
}

std::vector<Tensor> run_sigmoid(const Ctx& c, const OutInfos& o) {
  Tensor y = c.output_for_overwrite(o, 0);
  auto x = c.t(0).as<float>();
  sigmoid_f32(x.data(), y.as<float>().data(), static_cast<std::int64_t>(x.size()));
  return single_output(std::move(y));
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
  Tensor y = c.output(o, 0);
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
  return single_output(std::move(y));
}


std::string check_binary(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "A", kAll).in(1, "B", kAll).same(0, 1).reason;
}
OutInfos infer_binary(const Ctx& c) {
  const DType ta = c.dtype(0, "A"), tb = c.dtype(1, "B");
  if (ta != tb) c.bad(fmt::format("inputs have different dtypes {} and {}", dtype_name(ta), dtype_name(tb)));
  return {{ta, broadcast_shape(c, c.shape(0, "A"), c.shape(1, "B"))}};
}

// y = f(a, b) with numpy broadcasting of a and b to y's shape (operand types may differ).
template <class TA, class TB, class TY, class F>
void binary_loop(const Tensor& ta, const Tensor& tb, Tensor& ty, F f) {
  const TA* a = ta.as<TA>().data();
  const TB* b = tb.as<TB>().data();
  TY* y = ty.as<TY>().data();
  const Shape& out = ty.shape();
  std::array<std::vector<std::int64_t>, 2> st{broadcast_strides(ta.shape(), out.size()),
                                              broadcast_strides(tb.shape(), out.size())};
  strided_rows<2>(out, st, {0, 0},
                  [&](std::int64_t o, std::array<std::int64_t, 2> off, std::int64_t len,
                      std::array<std::int64_t, 2> inner) {
                    const TA* pa = a + off[0];
                    const TB* pb = b + off[1];
                    TY* py = y + o;
                    if (inner[0] == 1 && inner[1] == 1) {
                      for (std::int64_t j = 0; j < len; ++j) py[j] = f(pa[j], pb[j]);
                    } else if (inner[0] == 1 && inner[1] == 0) {
                      const TB bv = *pb;
                      for (std::int64_t j = 0; j < len; ++j) py[j] = f(pa[j], bv);
                    } else if (inner[0] == 0 && inner[1] == 1) {
                      const TA av = *pa;
                      for (std::int64_t j = 0; j < len; ++j) py[j] = f(av, pb[j]);
                    } else {
                      for (std::int64_t j = 0; j < len; ++j) py[j] = f(pa[j * inner[0]], pb[j * inner[1]]);
                    }
                  });
}
template <class T, class F>
void binary_loop(const Tensor& ta, const Tensor& tb, Tensor& ty, F f) {
  binary_loop<T, T, T>(ta, tb, ty, f);
}

enum class BinOp { Add, Sub, Mul, Div };

template <BinOp op>
std::vector<Tensor> run_binary(const Ctx& c, const OutInfos& o) {
  Tensor y = c.output_for_overwrite(o, 0);
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
  return single_output(std::move(y));
}

// ---------------------------------------------------------------------------------------------
// Unary functions: Exp, Log, Sqrt, Tanh, Floor, Ceil, LeakyRelu, HardSigmoid, HardSwish (float32);
// Neg, Abs (float32 and the integer dtypes)
// ---------------------------------------------------------------------------------------------

enum class Unary { Exp, Log, Sqrt, Tanh, Floor, Ceil, LeakyRelu, HardSigmoid, HardSwish, Neg, Abs };

template <Unary op>
std::vector<Tensor> run_unary(const Ctx& c, const OutInfos& o) {
  Tensor y = c.output_for_overwrite(o, 0);
  const float alpha = float_attr(c.node, "alpha", op == Unary::LeakyRelu ? 0.01f : 0.2f);
  const float beta = float_attr(c.node, "beta", 0.5f);
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto x = c.t(0).as<T>();
    auto out = y.as<T>();
    for (std::size_t i = 0; i < x.size(); ++i) {
      const T v = x[i];
      if constexpr (op == Unary::Neg) {
        out[i] = wrap_sub(T{0}, v);  // the lowest integer wraps to itself (numpy)
      } else if constexpr (op == Unary::Abs) {
        if constexpr (std::is_unsigned_v<T>) {
          out[i] = v;
        } else {
          out[i] = v < T{0} ? wrap_sub(T{0}, v) : v;
        }
      } else if constexpr (std::is_same_v<T, float>) {
        // Exp stays glibc's expf (correctly rounded in practice), which TFLite's EXP computes too
        // (tests/tflite_peer: byte-equal); Sigmoid and Softmax use float_math.h.
        if constexpr (op == Unary::Exp) out[i] = std::exp(v);
        if constexpr (op == Unary::Log) out[i] = std::log(v);
        if constexpr (op == Unary::Sqrt) out[i] = std::sqrt(v);
        if constexpr (op == Unary::Tanh) out[i] = std::tanh(v);
        if constexpr (op == Unary::Floor) out[i] = std::floor(v);
        if constexpr (op == Unary::Ceil) out[i] = std::ceil(v);
        if constexpr (op == Unary::LeakyRelu) out[i] = v < 0.0f ? alpha * v : v;
        if constexpr (op == Unary::HardSigmoid) out[i] = std::max(0.0f, std::min(1.0f, alpha * v + beta));
        // HardSwish: x * HardSigmoid(x) with alpha 1/6, beta 0.5 (the spec's definition).
        if constexpr (op == Unary::HardSwish) out[i] = v * std::max(0.0f, std::min(1.0f, v / 6.0f + 0.5f));
      }
    }
  });
  return single_output(std::move(y));
}

std::string check_signed_unary(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "X", kF32 | bit(DType::Int8) | kIdx).reason;
}
std::string check_abs(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "X", kAll).reason;
}

// ---------------------------------------------------------------------------------------------
// Pow: float32, int32 or int64 base; float32 or integer exponent; numpy broadcasting
// ---------------------------------------------------------------------------------------------

std::string check_pow(const Node& n, const DtypeList& d) {
  return Checker{n, d, {}}.in(0, "X", kF32 | kIdx).in(1, "Y", kAll).reason;
}
OutInfos infer_pow(const Ctx& c) {
  return {{c.dtype(0, "X"), broadcast_shape(c, c.shape(0, "X"), c.shape(1, "Y"))}};
}
// Computed in double and converted to the base's dtype (integers truncated toward zero, as ONNX
// Runtime's static_cast).
std::vector<Tensor> run_pow(const Ctx& c, const OutInfos& o) {
  Tensor y = c.output(o, 0);
  visit_dtype(c.t(0).dtype(), [&](auto base_tag) {
    using TA = decltype(base_tag);
    visit_dtype(c.t(1).dtype(), [&](auto exp_tag) {
      using TB = decltype(exp_tag);
      binary_loop<TA, TB, TA>(c.t(0), c.t(1), y, [](TA a, TB b) {
        return convert<TA>(std::pow(static_cast<double>(a), static_cast<double>(b)));
      });
    });
  });
  return single_output(std::move(y));
}

// ---------------------------------------------------------------------------------------------
// Min, Max: variadic, numpy broadcasting, all five dtypes; NaN propagates (numpy's minimum/maximum)
// ---------------------------------------------------------------------------------------------

std::string check_variadic(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.require(!d.empty() && ch.present(0), "needs at least one input");
  for (std::size_t i = 0; i < d.size(); ++i) ch.in(i, "data", kAll).same(0, i);
  return ch.reason;
}
OutInfos infer_variadic(const Ctx& c) {
  if (c.in.empty()) c.bad("needs at least one input");
  Shape out = c.shape(0, "data_0");
  const DType dt = c.dtype(0, "data_0");
  for (std::size_t i = 1; i < c.in.size(); ++i) {
    if (c.dtype(i, "data") != dt) c.bad("inputs have different dtypes");
    out = broadcast_shape(c, out, c.shape(i, "data"));
  }
  return {{dt, out}};
}
template <bool max>
std::vector<Tensor> run_variadic(const Ctx& c, const OutInfos& o) {
  Tensor y = c.output(o, 0);
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto pick = [](T a, T b) -> T {
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a)) return a;
        if (std::isnan(b)) return b;
      }
      return max ? (a < b ? b : a) : (b < a ? b : a);
    };
    // y = input 0 broadcast, then y = pick(y, input i) for each further input.
    gather_strided_any(y.dtype(), c.t(0).bytes().data(), y.bytes().data(), y.shape(),
                       broadcast_strides(c.t(0).shape(), y.shape().size()), 0);
    for (std::size_t i = 1; i < c.in.size(); ++i) binary_loop<T>(y, c.t(i), y, pick);
  });
  return single_output(std::move(y));
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
  rows.onnx.push_back({"Pow", 2, 2, 1, check_pow, infer_pow, run_pow});
  rows.onnx.push_back({"Min", 1, kMany, 1, check_variadic, infer_variadic, run_variadic<false>});
  rows.onnx.push_back({"Max", 1, kMany, 1, check_variadic, infer_variadic, run_variadic<true>});
  rows.onnx.push_back({"Exp", 1, 1, 1, check_float_unary, infer_same_as_input0, run_unary<Unary::Exp>});
  rows.onnx.push_back({"Log", 1, 1, 1, check_float_unary, infer_same_as_input0, run_unary<Unary::Log>});
  rows.onnx.push_back({"Sqrt", 1, 1, 1, check_float_unary, infer_same_as_input0, run_unary<Unary::Sqrt>});
  rows.onnx.push_back({"Tanh", 1, 1, 1, check_float_unary, infer_same_as_input0, run_unary<Unary::Tanh>});
  rows.onnx.push_back({"Floor", 1, 1, 1, check_float_unary, infer_same_as_input0, run_unary<Unary::Floor>});
  rows.onnx.push_back({"Ceil", 1, 1, 1, check_float_unary, infer_same_as_input0, run_unary<Unary::Ceil>});
  rows.onnx.push_back({"LeakyRelu", 1, 1, 1, check_float_unary, infer_same_as_input0, run_unary<Unary::LeakyRelu>});
  rows.onnx.push_back({"HardSigmoid", 1, 1, 1, check_float_unary, infer_same_as_input0, run_unary<Unary::HardSigmoid>});
  rows.onnx.push_back({"HardSwish", 1, 1, 1, check_float_unary, infer_same_as_input0, run_unary<Unary::HardSwish>});
  rows.onnx.push_back({"Neg", 1, 1, 1, check_signed_unary, infer_same_as_input0, run_unary<Unary::Neg>});
  rows.onnx.push_back({"Abs", 1, 1, 1, check_abs, infer_same_as_input0, run_unary<Unary::Abs>});
  return rows;
}

}  // namespace furiosa::host::detail
