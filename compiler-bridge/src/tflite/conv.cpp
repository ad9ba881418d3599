// TFLite CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED (importer.h) -> QLinearConv and
// QLinearMatMul with the weights relaid out (OHWI / 1HWO -> OIHW; [units, depth] -> [depth,
// units]) and TFLite's fixed-point requantization: QuantizeMultiplier(input_scale *
// filter_scale[c] / output_scale), per channel for int8 weights, the scale product in float32
// where TFLite's kernel reads GetQuantizedConvolutionMultipler's multiplier (importer.h:
// ScaleProduct), and the fused activation's clamp (operator_common.cpp).
#include <fmt/format.h>

#include "graph_utils.h"
#include "importer.h"

namespace furiosa::compiler::detail::tflite {

Importer::WeightedOperands Importer::weighted_operands(const fb::Operator& op) const {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 3, out);
  const WeightedOperands operands{.x = in[0], .w = in[1], .b = in.size() > 2 ? in[2] : -1, .y = out[0]};
  require_quantized({operands.x, operands.y});
  require_quantized_weight(operands.w);
  return operands;
}

void Importer::conv(const fb::Operator& op, bool depthwise) {
  const WeightedOperands operands = weighted_operands(op);
  const int x = operands.x, w = operands.w, b = operands.b, y = operands.y;
  const DType wd = dtype(w);
  const Shape& xs = info(x).shape;
  const Shape& ws = info(w).shape;
  if (xs.size() != 4 || ws.size() != 4) bad("input and weight must be 4-D (NHWC, OHWI / 1HWO)");
  fb::Padding padding = fb::Padding::SAME;
  std::int64_t sh = 1, sw = 1, dh = 1, dw = 1, multiplier = 0;
  fb::ActivationFunctionType act = fb::ActivationFunctionType::NONE;
  if (depthwise) {
    const auto* o = op.builtin_options_as_DepthwiseConv2DOptions();
    if (!o) bad("has no DepthwiseConv2DOptions");
    padding = o->padding(), sh = o->stride_h(), sw = o->stride_w(), dh = o->dilation_h_factor(),
    dw = o->dilation_w_factor(), multiplier = o->depth_multiplier(), act = o->fused_activation_function();
  } else {
    const auto* o = op.builtin_options_as_Conv2DOptions();
    if (!o) bad("has no Conv2DOptions");
    padding = o->padding(), sh = o->stride_h(), sw = o->stride_w(), dh = o->dilation_h_factor(),
    dw = o->dilation_w_factor(), act = o->fused_activation_function();
  }
  const std::int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3], kh = ws[1], kw = ws[2];
  std::int64_t M = 0, group = 1, cin = 0;
  if (depthwise) {
    M = ws[3];
    if (ws[0] != 1 || C < 1 || M % C != 0) {
      bad(fmt::format("weight {} does not fit {} input channels", shape_to_string(ws), C));
    }
    if (multiplier != 0 && multiplier != M / C) {
      bad(fmt::format("depth_multiplier {} does not match weight {} and {} input channels", multiplier,
                      shape_to_string(ws), C));
    }
    group = C;
    cin = 1;
  } else {
    M = ws[0];
    cin = ws[3];
    if (cin < 1 || C % cin != 0) bad(fmt::format("weight {} does not fit {} input channels", shape_to_string(ws), C));
    group = C / cin;
    if (M % group != 0) bad(fmt::format("{} output channels do not split into {} groups", M, group));
  }
  const Dim dy = window_dim(padding, H, kh, sh, dh), dx = window_dim(padding, W, kw, sw, dw);
  check_output_shape(y, {N, dy.out, dx.out, M});

  // Weights as OIHW ([M, C/group, kH, kW]).
  const Tensor wt = constant_tensor(w);
  Tensor oihw(wd, {M, cin, kh, kw});
  const auto* src = reinterpret_cast<const std::uint8_t*>(wt.bytes().data());
  auto* dst = reinterpret_cast<std::uint8_t*>(oihw.bytes().data());
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t i = 0; i < cin; ++i)
      for (std::int64_t r = 0; r < kh; ++r)
        for (std::int64_t s = 0; s < kw; ++s)
          dst[((m * cin + i) * kh + r) * kw + s] =
              depthwise ? src[(r * kw + s) * M + m] : src[((m * kh + r) * kw + s) * cin + i];

  const Quant xq = quant(x), yq = quant(y);
  ChannelQuant wq = channel_quant(w);
  const int wdim = depthwise ? 3 : 0;
  if (wq.scales.size() != 1) {
    if (static_cast<std::int64_t>(wq.scales.size()) != M || wq.dim != wdim) {
      bad(fmt::format("weight '{}' has {} scales along dim {}; expected 1 or {} along dim {}", info(w).name,
                      wq.scales.size(), wq.dim, M, wdim));
    }
  }
  require_symmetric_int8(w, wq);
  std::vector<int> inputs =
      qlinear_operands(nchw_view(x), x, xq, info(w).name + "/oihw", std::move(oihw), w, wq, y, yq, {"x", "w"});
  if (b >= 0) inputs.push_back(bias_constant(b, M));
  std::map<std::string, Attribute> attrs = {
      {"kernel_shape", std::vector<std::int64_t>{kh, kw}},
      {"strides", std::vector<std::int64_t>{sh, sw}},
      {"dilations", std::vector<std::int64_t>{dh, dw}},
      {"pads", std::vector<std::int64_t>{dy.before, dx.before, dy.after, dx.after}},
      {"group", group}};
  // uint8: the kernels' one multiplier; int8: the per-channel arrays (ScaleProduct).
  add_fixed_point(attrs, xq, wq.scales, yq, activation_range(act, y),
                  dtype(x) == DType::UInt8 ? ScaleProduct::Float32 : ScaleProduct::Double);
  add_node("QLinearConv", "", std::move(inputs), {output_nchw(y)}, std::move(attrs));
}

void Importer::require_symmetric_int8(int w, const ChannelQuant& wq) const {
  if (dtype(w) != DType::Int8) return;
  for (auto z : wq.zero_points) {
    if (z != 0) bad(fmt::format("int8 weight '{}' has the zero point {}; int8 weights must be symmetric (0)", info(w).name, z));
  }
}

std::vector<int> Importer::qlinear_operands(int xv, int x, const Quant& xq, const std::string& w_name, Tensor w_data,
                                            int w, const ChannelQuant& wq, int y, const Quant& yq,
                                            std::array<const char*, 2> names) {
  const std::string base = info(y).name;
  return {xv,
          scale_constant(fmt::format("{}/{}_scale", base, names[0]), {xq.scale}),
          zero_point_constant(fmt::format("{}/{}_zero_point", base, names[0]), dtype(x), {xq.zero_point}),
          add_constant(w_name, std::move(w_data)),
          scale_constant(fmt::format("{}/{}_scale", base, names[1]), wq.scales),
          zero_point_constant(fmt::format("{}/{}_zero_point", base, names[1]), dtype(w), wq.zero_points),
          scale_constant(base + "/y_scale", {yq.scale}),
          zero_point_constant(base + "/y_zero_point", dtype(y), {yq.zero_point})};
}

int Importer::bias_constant(int b, std::int64_t channels) {
  require_constant(b, "bias");
  if (dtype(b) != DType::Int32 || info(b).shape != Shape{channels}) {
    bad(fmt::format("bias '{}' must be int32 [{}], is {} {}", info(b).name, channels, dtype_name(dtype(b)),
                    shape_to_string(info(b).shape)));
  }
  return add_constant(info(b).name, constant_tensor(b));
}

void Importer::fully_connected(const fb::Operator& op) {
  const WeightedOperands operands = weighted_operands(op);
  const int x = operands.x, w = operands.w, b = operands.b, y = operands.y;
  const DType wd = dtype(w);
  const auto* o = op.builtin_options_as_FullyConnectedOptions();
  const auto act = o ? o->fused_activation_function() : fb::ActivationFunctionType::NONE;
  if (o && o->weights_format() != fb::FullyConnectedOptionsWeightsFormat::DEFAULT) {
    bad("only the DEFAULT weights format is supported (not SHUFFLED4x16INT8)");
  }
  const Shape& ws = info(w).shape;
  if (ws.size() != 2) bad(fmt::format("weight must be 2-D [units, depth], is {}", shape_to_string(ws)));
  const std::int64_t units = ws[0], depth = ws[1];
  const std::int64_t total = element_count(info(x).shape);
  if (depth < 1 || total % depth != 0) bad(fmt::format("input {} does not split into rows of {}", shape_to_string(info(x).shape), depth));
  const std::int64_t batch = total / depth;

  int a = ordered_view(x);
  const Shape rows{batch, depth};
  if (g_.values[static_cast<std::size_t>(a)].shape != rows) {
    const int flat = add_value(info(x).name + "/rows", dtype(x), rows);
    add_node("Reshape", "", {a, shape_constant(info(x).name + "/rows_shape", rows)}, {flat}, {}, "/rows");
    a = flat;
  }
  // B = W^T: [depth, units].
  const Tensor wt = constant_tensor(w);
  Tensor bt(wd, {depth, units});
  const auto* src = reinterpret_cast<const std::uint8_t*>(wt.bytes().data());
  auto* dst = reinterpret_cast<std::uint8_t*>(bt.bytes().data());
  for (std::int64_t u = 0; u < units; ++u)
    for (std::int64_t k = 0; k < depth; ++k) dst[k * units + u] = src[u * depth + k];

  const Quant xq = quant(x), yq = quant(y);
  const ChannelQuant wq = channel_quant(w);
  if (wq.scales.size() != 1 && (static_cast<std::int64_t>(wq.scales.size()) != units || wq.dim != 0)) {
    bad(fmt::format("weight '{}' has {} scales along dim {}; expected 1 or {} along dim 0", info(w).name,
                    wq.scales.size(), wq.dim, units));
  }
  require_symmetric_int8(w, wq);
  const std::string base = info(y).name;
  std::vector<int> inputs =
      qlinear_operands(a, x, xq, info(w).name + "/transposed", std::move(bt), w, wq, y, yq, {"a", "b"});
  if (b >= 0) inputs.push_back(bias_constant(b, units));
  std::map<std::string, Attribute> attrs;
  // Per-tensor weights: GetQuantizedConvolutionMultipler; per-channel: the arrays (ScaleProduct).
  add_fixed_point(attrs, xq, wq.scales, yq, activation_range(act, y),
                  wq.scales.size() == 1 ? ScaleProduct::Float32 : ScaleProduct::Double);
  const Shape result{batch, units};
  if (info(y).shape == result) {
    add_node("QLinearMatMul", "", std::move(inputs), {output_model(y)}, std::move(attrs));
    return;
  }
  if (element_count(info(y).shape) != batch * units) {
    bad(fmt::format("output '{}' {} does not hold {} x {} values", info(y).name, shape_to_string(info(y).shape), batch, units));
  }
  const int mm = add_value(base + "/rows", dtype(y), result);
  add_node("QLinearMatMul", "", std::move(inputs), {mm}, std::move(attrs));
  add_node("Reshape", "", {mm, shape_constant(base + "/shape", info(y).shape)}, {output_model(y)}, {}, "/reshape");
}

}  // namespace furiosa::compiler::detail::tflite
