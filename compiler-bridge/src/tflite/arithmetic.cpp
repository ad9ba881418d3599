// TFLite's two-operand arithmetic and the activations with a parameter (importer.h), with the
// fixed-point rules of TFLite's Prepare functions and reference kernels:
//  - SUB (kernels/sub.cc, 8-bit): ADD's rule (left_shift 20, input multipliers
//    scale_i / (2 max(scale_a, scale_b)), output multiplier 2 max / (2^20 out_scale)) with the
//    second multiplier negated -> furiosa::TFLiteBinary kind "sub" (host);
//  - MUL (kernels/mul.cc): QuantizeMultiplier(double(a_scale) * b_scale / y_scale) applied to the
//    product of the operands minus their zero points -> furiosa::TFLiteBinary kind "mul" (host);
//  - PRELU (kernels/activations.cc CalculatePreluParams): x >= 0 scaled by in_scale / out_scale,
//    else x * (alpha - alpha_zp) scaled by in_scale * alpha_scale / out_scale -> TFLiteBinary
//    kind "prelu" (host);
//  - DIV (kernels/div.cc, uint8 only): QuantizeMultiplier(float32(a_scale / (b_scale * y_scale)))
//  and
//    reference_ops::DivElementwise's reciprocal -> TFLiteBinary kind "div" (host);
//  - SQUARED_DIFFERENCE (kernels/squared_difference.cc, int8 only): left_shift 7, ADD's input
//    multipliers, output multiplier (2 max)^2 / (2^14 out_scale), the difference squared ->
//    TFLiteBinary kind "squared_difference" (host);
//  - MINIMUM / MAXIMUM: the stored values compared (TFLite's kernels ignore the parameters) ->
//    Min / Max (host);
//  - LEAKY_RELU (kernels/activations.cc LeakyReluPrepare, reference_ops::QuantizeLeakyRelu):
//    multipliers float32(in_scale * alpha / out_scale) and float32(in_scale / out_scale), as a
//    256-entry table -> furiosa::Requantize (NPU);
//  - HARD_SWISH (kernels/activations.cc HardSwishPrepare, reference_ops::HardSwish): the 16-bit
//    fixed-point evaluation of x * relu6(x + 3) / 6, as a 256-entry table -> furiosa::Requantize
//    (NPU);
//  - RSQRT (kernels/elementwise.cc RsqrtEvalQuantized, int8 only): 1 / sqrt(q - zp_in) by
//    GetInvSqrtQuantizedMultiplierExp, scaled by QuantizeMultiplier(1 / (sqrt(in_scale) *
//    out_scale)) with TFLite's shift of 20, + zp_out, as a table (NPU); q == zp_in gives 127, and
//    so does q < zp_in, on which TFLite's kernel fails the invocation instead;
//  - float32 ADD, SUB, MUL, DIV, SQUARED_DIFFERENCE, PRELU, LEAKY_RELU, HARD_SWISH: the reference
//    kernels' float expressions (reference/{add,sub,mul,div,prelu,leaky_relu,hard_swish}.h) ->
//    furiosa::TFLiteFloat (host), whose LeakyRelu and HardSwish keep TFLite's signed zeros where
//    ONNX's LeakyRelu and HardSwish differ; int32 ADD, SUB, MUL, DIV (shape arithmetic: SHAPE ->
//    STRIDED_SLICE -> MUL / DIV -> TILE multiples) -> Add / Sub / Mul / Div (+ Clip for a fused
//    activation, CalculateActivationRange<int32_t>), which fold_constants evaluates at compile
//    time when the operands are constants; SQRT (float32 only, as TFLite) -> Sqrt (host);
//  - int32 DIV (kernels/div.cc, reference_ops::Div / BroadcastDivSlow): C++ integer division,
//    truncated toward zero, then the fused activation's clamp. TFLite fails the invocation on a
//    zero divisor (TF_LITE_CHECK_DIV_NON_ZERO): a constant zero divisor is refused at import, one
//    met at run time fails the run naming the node (the host Div kernel). INT32_MIN / -1, undefined
//    in C++ (it traps with SIGFPE in TFLite on x86-64), gives INT32_MIN here (two's-complement
//    wraparound, as numpy and the host Div kernel define it);
//  - EXP (kernels/exp.cc, LUTPopulate; int8 and float32 only, as TFLite): exp of the dequantized
//  value in float32, times
//    1 / out_scale, rounded half away from zero, + out_zp, as a 256-entry table (NPU).
// The NPU's LowLevelMul and LowLevelSub compute ONNX Runtime's float formulas and LowLevelAdd's
// fixed-point rule takes no negative multiplier, so SUB, MUL, PRELU and SQUARED_DIFFERENCE run
// on the host.
#include <fmt/format.h>

#include "furiosa/core/text.h"
#include "furiosa/device/isa.h"
#include "importer.h"

namespace furiosa::compiler::detail::tflite {

namespace {

/// gemmlowp's 16-bit SaturatingRoundingDoublingHighMul: (a * b * 2) / 2^16 rounded to nearest
/// (ties up), INT16_MAX for INT16_MIN * INT16_MIN.
std::int16_t rounding_high_mul16(std::int16_t a, std::int16_t b) {
  if (a == b && a == INT16_MIN) return INT16_MAX;
  const std::int32_t ab = std::int32_t{a} * std::int32_t{b};
  const std::int32_t nudge = ab >= 0 ? (1 << 14) : (1 - (1 << 14));
  return static_cast<std::int16_t>((ab + nudge) / (1 << 15));
}

/// The same without rounding (TFLite hard_swish.h SaturatingDoublingHighMul: truncated toward 0).
std::int16_t high_mul16(std::int16_t a, std::int16_t b) {
  if (a == b && a == INT16_MIN) return INT16_MAX;
  return static_cast<std::int16_t>((std::int32_t{a} * std::int32_t{b}) / (1 << 15));
}

/// x * 2^amount saturated to int16.
std::int16_t saturating_shift16(std::int16_t x, int amount) {
  return static_cast<std::int16_t>(std::clamp<std::int64_t>(
      std::int64_t{x} * (std::int64_t{1} << amount), INT16_MIN, INT16_MAX));
}

/// A Q31 multiplier rounded to Q15 (TFLite DownScaleInt32ToInt16Multiplier).
std::int16_t to_q15(std::int32_t m) {
  constexpr std::int32_t kHalf = 1 << 15;
  if (m >= INT32_MAX - kHalf) return INT16_MAX;
  return static_cast<std::int16_t>((m + kHalf) >> 16);
}

/// gemmlowp's SaturatingRoundingMultiplyByPOT<e> for e > 0 on an int32 raw value: the value
/// shifted left by e, saturated where |value| exceeds 2^(31 - e) - 1.
std::int32_t saturating_pot(std::int32_t v, int e) {
  const std::int32_t threshold = (std::int32_t{1} << (31 - e)) - 1;
  if (v > threshold) return INT32_MAX;
  if (v < -threshold) return INT32_MIN;
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(v) << e);
}

/// TFLite GetInvSqrtQuantizedMultiplierExp(input, kReverseShift): 1 / sqrt(input) as a
/// multiplier and left shift, by five Newton-Raphson steps in gemmlowp's fixed point with 3
/// integer bits (products are rounding doubling high multiplies; Rescale<3> a saturating shift).
isa::QuantizedMultiplier inv_sqrt_multiplier(std::int32_t input) {
  if (input <= 1) return {INT32_MAX, 0};
  int shift = 11;
  while (input >= (1 << 29)) {
    input /= 4;
    ++shift;
  }
  int clz = 0;
  while (clz < 32 && (static_cast<std::uint32_t>(input) & (0x80000000u >> clz)) == 0) ++clz;
  const int pairs = (clz - 1) / 2 - 1;
  shift -= pairs;
  input <<= 2 * pairs;
  using isa::saturating_rounding_doubling_high_mul;
  const std::int32_t x_in = input >> 1;                               // F3
  const std::int32_t half_in = isa::rounding_divide_by_pot(x_in, 1);  // F3, x / 2
  const std::int32_t half_three = (1 << 28) + (1 << 27);              // F3 1.5
  std::int32_t x = 1 << 28;                                           // F3 1.0
  for (int i = 0; i < 5; ++i) {
    const std::int32_t x2 = saturating_rounding_doubling_high_mul(x, x);  // F6
    const std::int32_t x3 =
        saturating_pot(saturating_rounding_doubling_high_mul(x2, x), 6);          // F9 -> F3
    const std::int32_t a = saturating_rounding_doubling_high_mul(half_three, x);  // F6
    const std::int32_t b = saturating_rounding_doubling_high_mul(half_in, x3);    // F6
    x = saturating_pot(
        static_cast<std::int32_t>(static_cast<std::uint32_t>(a) - static_cast<std::uint32_t>(b)),
        3);
  }
  x = saturating_rounding_doubling_high_mul(x, 1518500250);  // times sqrt(2) / 2 (F0)
  if (shift < 0) {
    x = static_cast<std::int32_t>(static_cast<std::uint32_t>(x) << -shift);
    shift = 0;
  }
  return {x, -shift};
}

/// numpy broadcasting of two TFLite shapes, or nullopt when they do not broadcast.
std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (std::size_t k = 0; k < out.size(); ++k) {
    const std::int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    const std::int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[out.size() - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace

void Importer::binary_operands(const fb::Operator& op, int& a, int& b, int& y) const {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 2, out);
  a = in[0];
  b = in[1];
  y = out[0];
  const auto shape = broadcast(info(a).shape, info(b).shape);
  if (!shape) {
    bad(fmt::format("inputs '{}' {} and '{}' {} do not broadcast", info(a).name,
                    shape_to_string(info(a).shape), info(b).name, shape_to_string(info(b).shape)));
  }
  check_output_shape(y, *shape);
}

void Importer::float_binary(const fb::Operator& op, const std::string& kind) {
  int a = -1, b = -1, y = -1;
  binary_operands(op, a, b, y);
  for (int t : {a, b, y}) {
    if (dtype(t) != DType::Float32) {
      bad(fmt::format("'{}' is {}; the operands of a float32 {} must all be float32", info(t).name,
                      dtype_name(dtype(t)), op_name_));
    }
  }
  fb::ActivationFunctionType act = fb::ActivationFunctionType::NONE;
  if (const auto* o = op.builtin_options_as_AddOptions()) act = o->fused_activation_function();
  if (const auto* o = op.builtin_options_as_SubOptions()) act = o->fused_activation_function();
  if (const auto* o = op.builtin_options_as_MulOptions()) act = o->fused_activation_function();
  if (const auto* o = op.builtin_options_as_DivOptions()) act = o->fused_activation_function();
  const auto [lo, hi] = float_activation_range(act);
  add_node("TFLiteFloat", "furiosa", {model_view(a), model_view(b)}, {output_model(y)},
           {{"kind", kind}, {"activation_min", lo}, {"activation_max", hi}});
}

void Importer::int_binary(const fb::Operator& op, const std::string& kind) {
  int a = -1, b = -1, y = -1;
  binary_operands(op, a, b, y);
  for (int t : {a, b, y}) {
    if (dtype(t) != DType::Int32) {
      bad(fmt::format("'{}' is {}; the operands of an int32 {} must all be int32", info(t).name,
                      dtype_name(dtype(t)), op_name_));
    }
  }
  fb::ActivationFunctionType act = fb::ActivationFunctionType::NONE;
  if (const auto* o = op.builtin_options_as_AddOptions()) act = o->fused_activation_function();
  if (const auto* o = op.builtin_options_as_SubOptions()) act = o->fused_activation_function();
  if (const auto* o = op.builtin_options_as_MulOptions()) act = o->fused_activation_function();
  if (const auto* o = op.builtin_options_as_DivOptions()) act = o->fused_activation_function();
  if (kind == "div" && is_constant(b)) {
    // kernels/div.cc Eval fails the invocation on any zero element of an int32 divisor
    // (TF_LITE_CHECK_DIV_NON_ZERO); a constant one is refused here.
    const Tensor divisor = constant_tensor(b);
    const auto v = divisor.as<std::int32_t>();
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i] == 0) {
        bad(fmt::format(
            "divisor '{}' is a constant with 0 at element {}; TFLite's int32 DIV fails on a "
            "zero divisor",
            escape_text(info(b).name), i));
      }
    }
  }
  // CalculateActivationRange<int32_t> (kernels/kernel_util.h): RELU6 and RELU_N1_TO_1 clamp to
  // whole numbers.
  std::optional<std::array<std::int32_t, 2>> range;
  switch (act) {
    case fb::ActivationFunctionType::NONE: break;
    case fb::ActivationFunctionType::RELU: range = {{0, INT32_MAX}}; break;
    case fb::ActivationFunctionType::RELU6: range = {{0, 6}}; break;
    case fb::ActivationFunctionType::RELU_N1_TO_1: range = {{-1, 1}}; break;
    default: float_activation_range(act);  // refuses it
  }
  const std::string op_type = kind == "add"   ? "Add"
                              : kind == "sub" ? "Sub"
                              : kind == "mul" ? "Mul"
                                              : "Div";
  if (!range) {
    add_node(op_type, "", {model_view(a), model_view(b)}, {output_model(y)}, {});
    return;
  }
  const std::string base = info(y).name;
  const int v = add_value(base + "/unclamped", DType::Int32, info(y).shape);
  add_node(op_type, "", {model_view(a), model_view(b)}, {v}, {}, "/unclamped");
  Tensor lo(DType::Int32, {}), hi(DType::Int32, {});
  lo.as<std::int32_t>()[0] = (*range)[0];
  hi.as<std::int32_t>()[0] = (*range)[1];
  add_node("Clip", "",
           {v, add_constant(base + "/min", std::move(lo)), add_constant(base + "/max", std::move(hi))},
           {output_model(y)}, {});
}

void Importer::sqrt_op(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  check_output_shape(y, info(x).shape);
  if (dtype(x) != DType::Float32 || dtype(y) != DType::Float32) {
    unsupported(fmt::format("input '{}' is {} and output '{}' {}; TFLite's SQRT takes float32 only",
                            info(x).name, dtype_name(dtype(x)), info(y).name, dtype_name(dtype(y))));
  }
  add_node("Sqrt", "", {model_view(x)}, {output_model(y)}, {});
}

void Importer::tflite_binary(const fb::Operator& op, const std::string& kind) {
  int a = -1, b = -1, y = -1;
  binary_operands(op, a, b, y);
  if (dtype(a) == DType::Float32) return float_binary(op, kind);
  if (dtype(a) == DType::Int32 && (kind == "sub" || kind == "mul" || kind == "div"))
    return int_binary(op, kind);
  require_quantized({a, b, y});
  const Quant aq = quant(a), bq = quant(b), yq = quant(y);
  fb::ActivationFunctionType act = fb::ActivationFunctionType::NONE;
  std::vector<std::int64_t> mult, shift;
  auto push = [&](double real) {
    const isa::QuantizedMultiplier m = isa::quantize_multiplier(real);
    mult.push_back(m.multiplier);
    shift.push_back(m.shift);
  };
  std::map<std::string, Attribute> attrs{{"kind", kind},
                                         {"a_zero_point", std::int64_t{aq.zero_point}},
                                         {"b_zero_point", std::int64_t{bq.zero_point}},
                                         {"y_zero_point", std::int64_t{yq.zero_point}}};
  if (kind == "sub") {
    if (const auto* o = op.builtin_options_as_SubOptions()) act = o->fused_activation_function();
    constexpr int kLeftShift = 20;
    const double twice_max = 2.0 * static_cast<double>(std::max(aq.scale, bq.scale));
    push(static_cast<double>(aq.scale) / twice_max);
    push(static_cast<double>(bq.scale) / twice_max);
    push(twice_max / (static_cast<double>(1 << kLeftShift) * static_cast<double>(yq.scale)));
    attrs["fixed_point_left_shift"] = std::int64_t{kLeftShift};
  } else if (kind == "mul") {
    if (const auto* o = op.builtin_options_as_MulOptions()) act = o->fused_activation_function();
    push(static_cast<double>(aq.scale) * static_cast<double>(bq.scale) /
         static_cast<double>(yq.scale));
  } else if (kind == "div") {
    if (dtype(y) != DType::UInt8) {
      unsupported(fmt::format("output '{}' is {}; TFLite's quantized DIV takes uint8 only",
                              info(y).name, dtype_name(dtype(y))));
    }
    if (const auto* o = op.builtin_options_as_DivOptions()) act = o->fused_activation_function();
    // kernels/div.cc: the ratio in float32, widened.
    push(static_cast<double>(aq.scale / (bq.scale * yq.scale)));
  } else if (kind == "squared_difference") {
    if (dtype(y) != DType::Int8) {
      unsupported(
          fmt::format("output '{}' is {}; TFLite's quantized SQUARED_DIFFERENCE takes int8 only",
                      info(y).name, dtype_name(dtype(y))));
    }
    // kernels/squared_difference.cc: left_shift 7, the squared difference rescaled by
    // (2 max)^2 / (2^14 out_scale), which QuantizeMultiplierSmallerThanOneExp requires below 1.
    constexpr int kLeftShift = 7;
    const double twice_max = 2.0 * static_cast<double>(std::max(aq.scale, bq.scale));
    const double out_real =
        twice_max * twice_max /
        (static_cast<double>(1 << (2 * kLeftShift)) * static_cast<double>(yq.scale));
    if (!(out_real < 1.0)) {
      unsupported(fmt::format(
          "output scale {} is too small for the input scales (TFLite requires (2 max(scale_a, "
          "scale_b))^2 / (2^14 out_scale) < 1)",
          yq.scale));
    }
    push(static_cast<double>(aq.scale) / twice_max);
    push(static_cast<double>(bq.scale) / twice_max);
    push(out_real);
    attrs["fixed_point_left_shift"] = std::int64_t{kLeftShift};
  } else {  // prelu
    push(static_cast<double>(aq.scale) / static_cast<double>(yq.scale));
    push(static_cast<double>(aq.scale) * static_cast<double>(bq.scale) /
         static_cast<double>(yq.scale));
  }
  const auto range = activation_range(act, y);
  attrs["fixed_point_multiplier"] = mult;
  attrs["fixed_point_shift"] = shift;
  attrs["output_min"] = std::int64_t{range[0]};
  attrs["output_max"] = std::int64_t{range[1]};
  add_node("TFLiteBinary", "furiosa", {model_view(a), model_view(b)}, {output_model(y)},
           std::move(attrs));
}

void Importer::min_max(const fb::Operator& op, bool max) {
  int a = -1, b = -1, y = -1;
  binary_operands(op, a, b, y);
  const DType d = dtype(a);
  if (dtype(b) != d || dtype(y) != d) {
    bad(fmt::format("inputs '{}' ({}), '{}' ({}) and output '{}' ({}) must have one type",
                    info(a).name, dtype_name(d), info(b).name, dtype_name(dtype(b)), info(y).name,
                    dtype_name(dtype(y))));
  }
  add_node(max ? "Max" : "Min", "", {model_view(a), model_view(b)}, {output_model(y)}, {});
}

void Importer::leaky_relu(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  check_output_shape(y, info(x).shape);
  const auto* o = op.builtin_options_as_LeakyReluOptions();
  const float alpha = o ? o->alpha() : 0.0f;
  if (dtype(x) == DType::Float32 && dtype(y) == DType::Float32) {
    add_node("TFLiteFloat", "furiosa", {model_view(x)}, {output_model(y)},
             {{"kind", std::string("leaky_relu")}, {"alpha", alpha}});
    return;
  }
  require_quantized({x, y});
  const Quant xq = quant(x), yq = quant(y);
  if (!(alpha >= 0.0f) || !std::isfinite(alpha)) {
    unsupported(fmt::format("alpha {} is not supported on 8-bit tensors (alpha >= 0 only)", alpha));
  }
  // LeakyReluPrepare forms both ratios in float32, then widens them.
  const auto m_alpha = isa::quantize_multiplier(static_cast<double>(xq.scale * alpha / yq.scale));
  const auto m_identity = isa::quantize_multiplier(static_cast<double>(xq.scale / yq.scale));
  const host::LookupTable table = host::build_lookup_table(dtype(x), dtype(y), [&](std::int32_t q) {
    const std::int32_t v = q - xq.zero_point;
    return isa::multiply_by_quantized_multiplier(v, v >= 0 ? m_identity : m_alpha) + yq.zero_point;
  });
  map_by_table(x, y, xq, yq, dtype(y), table);
}

void Importer::hard_swish(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  check_output_shape(y, info(x).shape);
  if (dtype(x) == DType::Float32 && dtype(y) == DType::Float32) {
    add_node("TFLiteFloat", "furiosa", {model_view(x)}, {output_model(y)},
             {{"kind", std::string("hard_swish")}});
    return;
  }
  require_quantized({x, y});
  const Quant xq = quant(x), yq = quant(y);
  // HardSwishPrepare: the input on a 2^7 finer scale; "reluish" maps 3.0 to 2^15.
  const float hires_scale = (1.0f / 128.0f) * xq.scale;
  const auto out_m = isa::quantize_multiplier(static_cast<double>(hires_scale / yq.scale));
  const auto relu_m =
      isa::quantize_multiplier(static_cast<double>(hires_scale / (3.0f / 32768.0f)));
  if (out_m.shift > 0) {
    unsupported(fmt::format(
        "input scale {} / output scale {} needs a left shift, which TFLite's HARD_SWISH refuses",
        xq.scale, yq.scale));
  }
  const std::int16_t out_q15 = to_q15(out_m.multiplier), relu_q15 = to_q15(relu_m.multiplier);
  const host::LookupTable table = host::build_lookup_table(dtype(x), dtype(y), [&](std::int32_t q) {
    const auto hires = static_cast<std::int16_t>((q - xq.zero_point) * (1 << 7));
    const std::int16_t preshift = rounding_high_mul16(hires, out_q15);
    std::int16_t reluish = hires;
    if (relu_m.shift > 0) reluish = saturating_shift16(reluish, relu_m.shift - 1);
    reluish = rounding_high_mul16(reluish, relu_q15);
    if (relu_m.shift > 0) reluish = saturating_shift16(reluish, 1);
    if (relu_m.shift < 0)
      reluish = static_cast<std::int16_t>(isa::rounding_divide_by_pot(reluish, -relu_m.shift));
    reluish = static_cast<std::int16_t>((reluish + (1 << 15)) >> 1);  // [-1, 1] -> [0, 1]
    const std::int16_t product = high_mul16(reluish, preshift);
    return isa::rounding_divide_by_pot(product, -out_m.shift) + yq.zero_point;
  });
  map_by_table(x, y, xq, yq, dtype(y), table);
}

void Importer::exp_op(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  check_output_shape(y, info(x).shape);
  if (dtype(x) == DType::Float32 && dtype(y) == DType::Float32) {
    add_node("Exp", "", {model_view(x)}, {output_model(y)}, {});
    return;
  }
  if (dtype(x) != DType::Int8 || dtype(y) != DType::Int8) {
    unsupported(
        fmt::format("input '{}' is {} and output '{}' {}; float32 and int8 are supported (TFLite's "
                    "EXP takes no "
                    "uint8)",
                    info(x).name, dtype_name(dtype(x)), info(y).name, dtype_name(dtype(y))));
  }
  const Quant xq = quant(x), yq = quant(y);
  const float inverse_scale = 1.0f / yq.scale;
  const host::LookupTable table = host::build_lookup_table(dtype(x), dtype(y), [&](std::int32_t q) {
    const float v = std::exp(xq.scale * static_cast<float>(q - xq.zero_point));
    // (saturated to int32 first: exp overflows to infinity for large inputs)
    return round_to_int(std::round(v * inverse_scale) + static_cast<float>(yq.zero_point));
  });
  map_by_table(x, y, xq, yq, dtype(y), table);
}

void Importer::rsqrt(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  check_output_shape(y, info(x).shape);
  if (dtype(x) == DType::Float32 && dtype(y) == DType::Float32) {
    const int s = add_value(info(y).name + "/sqrt", DType::Float32, info(x).shape);
    add_node("Sqrt", "", {model_view(x)}, {s}, {}, "/sqrt");
    Tensor one(DType::Float32, {});
    one.as<float>()[0] = 1.0f;
    add_node("Div", "", {add_constant(info(y).name + "/one", std::move(one)), s}, {output_model(y)},
             {});
    return;
  }
  if (dtype(x) != DType::Int8 || dtype(y) != DType::Int8) {
    unsupported(fmt::format(
        "input '{}' is {} and output '{}' {}; float32 and int8 are supported (TFLite's RSQRT takes "
        "no uint8)",
        info(x).name, dtype_name(dtype(x)), info(y).name, dtype_name(dtype(y))));
  }
  const Quant xq = quant(x), yq = quant(y);
  // The square root and product in float32, the reciprocal in double.
  const auto m =
      isa::quantize_multiplier(1.0 / static_cast<double>(std::sqrt(xq.scale) * yq.scale));
  constexpr int kShift = 20;
  const host::LookupTable table =
      host::build_lookup_table(DType::Int8, DType::Int8, [&](std::int32_t q) {
        const std::int32_t v = q - xq.zero_point;
        if (v <= 0) return std::int32_t{127};
        const isa::QuantizedMultiplier inv = inv_sqrt_multiplier(v);
        const std::int32_t data =
            isa::multiply_by_quantized_multiplier(1, {inv.multiplier, inv.shift + kShift});
        return isa::multiply_by_quantized_multiplier(data, {m.multiplier, m.shift - kShift}) +
               yq.zero_point;
      });
  map_by_table(x, y, xq, yq, DType::Int8, table);
}

}  // namespace furiosa::compiler::detail::tflite
