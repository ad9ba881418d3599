// TFLite's element-wise operators (importer.h):
//  - ADD: left_shift 20, input multipliers scale_i / (2 max(scale_a, scale_b)) and output
//    multiplier 2 max(scale_a, scale_b) / (2^20 output_scale) (tensorflow/lite/kernels/add.cc);
//  - LOGISTIC on uint8/int8: the lookup table of kernels/activations.cc (float32 sigmoid of the
//    dequantized value, rounded half away from zero to the output's 1/256 steps);
//  - QUANTIZE: from float32 QuantizeLinear rounding half away from zero (AffineQuantize); between
//    8-bit types reference_ops::Requantize with QuantizeMultiplier(input_scale / output_scale), as
//    a 256-entry table;
//  - SOFTMAX in float32 between DequantizeLinear and QuantizeLinear; DEQUANTIZE; CAST of the
//    stored values;
//  - RELU6 / RELU_N1_TO_1: TFLite's requantize-and-clamp as a table (8-bit), Clip (float32).
#include <fmt/format.h>

#include <cmath>

#include "furiosa/device/isa.h"
#include "graph_utils.h"
#include "importer.h"

namespace furiosa::compiler::detail::tflite {

void Importer::add(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 2, out);
  const int a = in[0], b = in[1], y = out[0];
  if (dtype(a) == DType::Float32) return float_binary(op, "add");
  if (dtype(a) == DType::Int32) return int_binary(op, "add");
  require_quantized({a, b, y});
  const auto* o = op.builtin_options_as_AddOptions();
  const auto act = o ? o->fused_activation_function() : fb::ActivationFunctionType::NONE;
  const Quant aq = quant(a), bq = quant(b), yq = quant(y);
  const bool nchw = info(a).shape.size() == 4 && info(a).shape == info(b).shape && info(a).shape == info(y).shape;
  const int av = nchw ? nchw_view(a) : model_view(a);
  const int bv = nchw ? nchw_view(b) : model_view(b);
  // tensorflow/lite/kernels/add.cc (8-bit): left_shift 20, operands brought to twice the larger
  // input scale, the sum back to the output scale.
  constexpr int kLeftShift = 20;
  const double twice_max = 2.0 * static_cast<double>(std::max(aq.scale, bq.scale));
  const auto ma = isa::quantize_multiplier(static_cast<double>(aq.scale) / twice_max);
  const auto mb = isa::quantize_multiplier(static_cast<double>(bq.scale) / twice_max);
  const auto my = isa::quantize_multiplier(twice_max / (static_cast<double>(1 << kLeftShift) * static_cast<double>(yq.scale)));
  const auto range = activation_range(act, y);
  const std::string base = info(y).name;
  add_node("QLinearAdd", "com.microsoft",
           {av, scale_constant(base + "/a_scale", {aq.scale}), zero_point_constant(base + "/a_zero_point", dtype(a), {aq.zero_point}),
            bv, scale_constant(base + "/b_scale", {bq.scale}), zero_point_constant(base + "/b_zero_point", dtype(b), {bq.zero_point}),
            scale_constant(base + "/y_scale", {yq.scale}), zero_point_constant(base + "/y_zero_point", dtype(y), {yq.zero_point})},
           {nchw ? output_nchw(y) : output_model(y)},
           {{"fixed_point_left_shift", std::int64_t{kLeftShift}},
            {"fixed_point_multiplier", std::vector<std::int64_t>{ma.multiplier, mb.multiplier, my.multiplier}},
            {"fixed_point_shift", std::vector<std::int64_t>{ma.shift, mb.shift, my.shift}},
            {"output_min", std::int64_t{range[0]}},
            {"output_max", std::int64_t{range[1]}}});
}

void Importer::softmax(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  const auto* o = op.builtin_options_as_SoftmaxOptions();
  const float beta = o ? o->beta() : 1.0f;
  const DType xd = dtype(x);
  if (xd != dtype(y)) bad("input and output types differ");
  const std::string base = info(y).name;
  const Shape& s = info(x).shape;
  int v = model_view(x);
  if (is_quantized(xd)) {
    const Quant xq = quant(x);
    const int f = add_value(base + "/dequantized", DType::Float32, s);
    add_node("DequantizeLinear", "", {v, scale_constant(base + "/x_scale", {xq.scale}),
                                      zero_point_constant(base + "/x_zero_point", xd, {xq.zero_point})}, {f}, {}, "/dequantize");
    v = f;
  } else if (xd != DType::Float32) {
    unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported", info(x).name, dtype_name(xd)));
  }
  if (beta != 1.0f) {
    Tensor bt(DType::Float32, {});
    bt.as<float>()[0] = beta;
    const int scaled = add_value(base + "/scaled", DType::Float32, s);
    add_node("Mul", "", {v, add_constant(base + "/beta", std::move(bt))}, {scaled}, {}, "/beta");
    v = scaled;
  }
  if (!is_quantized(xd)) {
    add_node("Softmax", "", {v}, {output_model(y)}, {{"axis", std::int64_t{-1}}});
    return;
  }
  const int p = add_value(base + "/float", DType::Float32, s);
  add_node("Softmax", "", {v}, {p}, {{"axis", std::int64_t{-1}}});
  const Quant yq = quant(y);
  add_node("QuantizeLinear", "", {p, scale_constant(base + "/y_scale", {yq.scale}),
                                  zero_point_constant(base + "/y_zero_point", xd, {yq.zero_point})},
           {output_model(y)}, {{"rounding", std::string("half_away_from_zero")}}, "/quantize");
}

// LOGISTIC. uint8/int8: furiosa::Requantize with the 256-entry table TFLite's default kernel
// builds (kernels/activations.cc, SigmoidPrepare -> PopulateLookupTable / LUTPopulate): x =
// in_scale * (q - in_zp) and 1 / (1 + exp(-x)) in float32, then round(y * 256) (half away from
// zero) + out_zp, clamped; TFLite requires the output scale 1/256 and zero point 0 (uint8) or
// -128 (int8). float32: Sigmoid (host).
void Importer::logistic(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  const DType xd = dtype(x);
  if (xd != dtype(y)) bad("input and output types differ");
  if (xd == DType::Float32) {
    add_node("Sigmoid", "", {model_view(x)}, {output_model(y)}, {});
    return;
  }
  if (!is_quantized(xd)) unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported", info(x).name, dtype_name(xd)));
  const Quant xq = quant(x), yq = quant(y);
  const std::int32_t want_zp = xd == DType::UInt8 ? 0 : -128;
  if (yq.scale != 1.0f / 256 || yq.zero_point != want_zp) {
    bad(fmt::format("output '{}' has scale {} and zero point {}; TFLite's LOGISTIC requires 1/256 and {}",
                    info(y).name, yq.scale, yq.zero_point, want_zp));
  }
  const host::LookupTable table = host::build_lookup_table(xd, xd, [&](std::int32_t q) {
    const float real = xq.scale * static_cast<float>(q - xq.zero_point);
    const float sig = 1.0f / (1.0f + std::exp(-real));
    const float rescaled = std::round(sig * (1.0f / yq.scale));
    return static_cast<std::int32_t>(rescaled + static_cast<float>(yq.zero_point));
  });
  map_by_table(x, y, xq, yq, xd, table);
}

void Importer::quantize(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  const DType xd = dtype(x), yd = dtype(y);
  if (!is_quantized(yd)) unsupported(fmt::format("output '{}' is {}; only uint8/int8 outputs are supported", info(y).name, dtype_name(yd)));
  const Quant yq = quant(y);
  const std::string base = info(y).name;
  if (xd == DType::Float32) {
    // TFLite's AffineQuantize rounds half away from zero.
    add_node("QuantizeLinear", "", {model_view(x), scale_constant(base + "/y_scale", {yq.scale}),
                                    zero_point_constant(base + "/y_zero_point", yd, {yq.zero_point})},
             {output_model(y)}, {{"rounding", std::string("half_away_from_zero")}});
    return;
  }
  if (!is_quantized(xd)) unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported", info(x).name, dtype_name(xd)));
  // Between 8-bit types: reference_ops::Requantize with QuantizeMultiplier(in_scale / out_scale).
  const Quant xq = quant(x);
  const auto m = isa::quantize_multiplier(static_cast<double>(xq.scale) / static_cast<double>(yq.scale));
  const host::LookupTable table = host::build_lookup_table(xd, yd, [&](std::int32_t q) {
    return isa::multiply_by_quantized_multiplier(q - xq.zero_point, m) + yq.zero_point;
  });
  map_by_table(x, y, xq, yq, yd, table);
}

void Importer::dequantize(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  const DType xd = dtype(x);
  if (!is_quantized(xd)) unsupported(fmt::format("input '{}' is {}; only uint8/int8 inputs are supported", info(x).name, dtype_name(xd)));
  if (dtype(y) != DType::Float32) bad("the output must be float32");
  const Quant xq = quant(x);
  const std::string base = info(y).name;
  // Keep the NCHW layout when only that exists and the result is not a model output.
  bool is_output = false;
  if (sg_->outputs()) {
    for (int t : *sg_->outputs()) is_output = is_output || t == y;
  }
  const bool nchw = !is_output && info(x).shape.size() == 4 && info(x).model < 0 && info(x).nchw >= 0;
  add_node("DequantizeLinear", "", {nchw ? nchw_view(x) : model_view(x), scale_constant(base + "/x_scale", {xq.scale}),
                                    zero_point_constant(base + "/x_zero_point", xd, {xq.zero_point})},
           {nchw ? output_nchw(y) : output_model(y)}, {});
}

void Importer::cast(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  dtype(x);
  check_output_shape(y, info(x).shape);
  add_node("Cast", "", {model_view(x)}, {output_model(y)}, {{"to", onnx_type(dtype(y))}});
}

}  // namespace furiosa::compiler::detail::tflite

namespace furiosa::compiler::detail::tflite {

// RELU6 / RELU_N1_TO_1 as standalone operators (kernels/activations.cc, QuantizedReluX and
// reference_ops::ReluX): 8-bit: out_zp + mbqm(q - in_zp, QuantizeMultiplier(float32(in_scale /
// out_scale))), clamped to [max(type min, out_zp + roundf(lo / out_scale)), min(type max, out_zp +
// roundf(hi / out_scale))] (the ratios in float32), as a table; float32: Clip(x, lo, hi).
void Importer::relu_clamp(const fb::Operator& op, float lo, float hi) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  const DType xd = dtype(x);
  if (xd != dtype(y)) bad("input and output types differ");
  check_output_shape(y, info(x).shape);
  if (xd == DType::Float32) {
    const std::string base = info(y).name;
    Tensor tlo(DType::Float32, {}), thi(DType::Float32, {});
    tlo.as<float>()[0] = lo;
    thi.as<float>()[0] = hi;
    add_node("Clip", "",
             {model_view(x), add_constant(base + "/min", std::move(tlo)),
              add_constant(base + "/max", std::move(thi))},
             {output_model(y)}, {});
    return;
  }
  require_quantized({x, y});
  const Quant xq = quant(x), yq = quant(y);
  const std::int32_t type_lo = xd == DType::UInt8 ? 0 : -128,
                     type_hi = xd == DType::UInt8 ? 255 : 127;
  const std::int32_t q_lo = std::max(
      type_lo, yq.zero_point + round_to_int(static_cast<double>(std::round(lo / yq.scale))));
  const std::int32_t q_hi = std::min(
      type_hi, yq.zero_point + round_to_int(static_cast<double>(std::round(hi / yq.scale))));
  const auto m = isa::quantize_multiplier(static_cast<double>(xq.scale / yq.scale));
  const host::LookupTable table = host::build_lookup_table(xd, xd, [&](std::int32_t q) {
    const std::int32_t v =
        yq.zero_point + isa::multiply_by_quantized_multiplier(q - xq.zero_point, m);
    return std::clamp(v, q_lo, q_hi);
  });
  map_by_table(x, y, xq, yq, xd, table);
}

}  // namespace furiosa::compiler::detail::tflite
