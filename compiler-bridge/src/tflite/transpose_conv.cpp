// TFLite TRANSPOSE_CONV (importer.h), as TensorFlow Lite 2.14 computes it: kernels/
// transpose_conv.cc with reference_ops::TransposeConv (float32, uint8; reference/
// transpose_conv.h) and reference_integer_ops::TransposeConv (int8 with per-channel weights;
// reference/integer_ops/transpose_conv.h). Inputs: output_shape (int32 [4]), weights OHWI, input
// NHWC, optional bias [O].
//  - Padding: ComputePaddingHeightWidth run on the *output* size, as if the operator were the
//    forward convolution from its output to its input; only the leading pad P is used.
//  - Every input element scatters x * w into out[in * stride - P + k] (in bounds only); 8-bit sums
//    are int32 sums of (x - x_zp) * (w - w_zp) (int8: w_zp 0), then + bias,
//    MultiplyByQuantizedMultiplier with QuantizeMultiplier(in_scale * w_scale[c] / out_scale)
//    (PopulateConvolutionQuantizationParams), + out_zp, clamp to the fused activation.
// 8-bit runs on the NPU as one QLinearConv with that arithmetic (TFLite's fixed point, as CONV_2D):
// stride - 1 copies of the input's zero point are inserted after every input element (Reshape to
// [N, C, H, 1, W, 1], Pad with the zero point, Reshape), the result is padded by k - 1 - P before
// and cropped or padded to the output's extent after (Pad with the zero point; negative pads
// crop), and the weights are flipped in H and W. Each tap of that convolution is a real input tap
// with the reference's very product, or a zero-point tap whose (x_zp - x_zp) * (w - w_zp) is 0, so
// the int32 sums are the reference's, in another order that integer addition cannot tell.
// float32 runs on the host as furiosa::TFLiteTransposeConv: float sums depend on their order, and
// that operator keeps the reference's scatter order (host/cpu_ops.h).
#include <fmt/format.h>

#include <limits>

#include "graph_utils.h"
#include "importer.h"

namespace furiosa::compiler::detail::tflite {

namespace {

/// An int64 1-D constant's tensor.
Tensor int64_tensor(const std::vector<std::int64_t>& v) {
  Tensor t(DType::Int64, {static_cast<std::int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.as<std::int64_t>().begin());
  return t;
}

}  // namespace

Importer::TransposeConvOperands Importer::transpose_conv_operands(const fb::Operator& op) const {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 3, 4, out);
  TransposeConvOperands t;
  t.shape = in[0], t.w = in[1], t.x = in[2], t.b = in.size() > 3 ? in[3] : -1, t.y = out[0];
  const auto* o = op.builtin_options_as_TransposeConvOptions();
  if (!o) bad("has no TransposeConvOptions");
  t.padding = o->padding();
  t.act = o->fused_activation_function();
  t.strides = {o->stride_h(), o->stride_w()};
  if (t.padding != fb::Padding::SAME && t.padding != fb::Padding::VALID) {
    bad(fmt::format("unknown padding {}", static_cast<int>(t.padding)));
  }
  if (t.strides[0] < 1 || t.strides[1] < 1) {
    bad(fmt::format("strides {} x {} must be >= 1", t.strides[0], t.strides[1]));
  }
  // output_shape: a constant int32 [4] (TFLite resizes the output from it; a computed one would
  // give the output a shape known only when the model runs).
  if (!is_constant(t.shape)) {
    unsupported(fmt::format("output_shape '{}' must be a constant{}", info(t.shape).name,
                            dynamic_origin(t.shape)));
  }
  if (dtype(t.shape) != DType::Int32 || info(t.shape).shape != Shape{4}) {
    bad(fmt::format("output_shape '{}' must be int32 [4], is {} {}", info(t.shape).name,
                    dtype_name(dtype(t.shape)), shape_to_string(info(t.shape).shape)));
  }
  const auto os = int_constant(t.shape, "output_shape");
  t.out.assign(os.begin(), os.end());
  const Shape& xs = info(t.x).shape;
  const Shape& ws = info(t.w).shape;
  if (xs.size() != 4 || ws.size() != 4) {
    bad(fmt::format("input '{}' {} and weights '{}' {} must be 4-D (NHWC, OHWI)", info(t.x).name,
                    shape_to_string(xs), info(t.w).name, shape_to_string(ws)));
  }
  if (ws[3] != xs[3] || ws[0] != t.out[3] || t.out[0] != xs[0] || ws[1] < 1 || ws[2] < 1 ||
      std::any_of(xs.begin(), xs.end(), [](std::int64_t v) { return v < 1; }) || ws[0] < 1) {
    bad(fmt::format(
        "input '{}' {}, weights '{}' {} and output_shape '{}' [{}, {}, {}, {}] do not "
        "fit together (input channels = weights dim 3, output channels = weights dim 0, "
        "one batch, no empty dim)",
        info(t.x).name, shape_to_string(xs), info(t.w).name, shape_to_string(ws),
        info(t.shape).name, t.out[0], t.out[1], t.out[2], t.out[3]));
  }
  // The input must be what the forward convolution of the output gives (TFLite's converter
  // writes such shapes; the kernel itself would silently drop or leave out taps otherwise).
  for (int d = 0; d < 2; ++d) {
    const std::int64_t o_size = t.out[static_cast<std::size_t>(1 + d)],
                       k = ws[static_cast<std::size_t>(1 + d)];
    const std::int64_t in = xs[static_cast<std::size_t>(1 + d)],
                       s = t.strides[static_cast<std::size_t>(d)];
    // ComputeOutSize (kernels/padding.h) on the output extent.
    const std::int64_t forward =
        t.padding == fb::Padding::SAME ? (o_size + s - 1) / s : (o_size + s - k) / s;
    if (o_size < 1 || forward != in) {
      bad(fmt::format(
          "output_shape '{}' [{}, {}, {}, {}] does not fit input '{}' {} with stride {} and "
          "a {} kernel of {} ({} padding): a forward convolution of an output {} of {} gives {}, "
          "not {}",
          info(t.shape).name, t.out[0], t.out[1], t.out[2], t.out[3], info(t.x).name,
          shape_to_string(xs), s, d == 0 ? "height" : "width", k,
          t.padding == fb::Padding::SAME ? "SAME" : "VALID", d == 0 ? "height" : "width", o_size,
          forward, in));
    }
    // ComputePaddingWithOffset: the leading half of the forward convolution's total padding.
    t.pads[static_cast<std::size_t>(d)] = std::max<std::int64_t>(0, (in - 1) * s + k - o_size) / 2;
  }
  check_output_shape(t.y, Shape(t.out.begin(), t.out.end()));
  const DType xd = dtype(t.x);
  if (dtype(t.y) != xd || dtype(t.w) != xd) {
    bad(fmt::format("input '{}' is {}, weights '{}' {} and output '{}' {}; TFLite needs one type",
                    info(t.x).name, dtype_name(xd), info(t.w).name, dtype_name(dtype(t.w)),
                    info(t.y).name, dtype_name(dtype(t.y))));
  }
  if (t.b >= 0) {
    const DType bd = xd == DType::Float32 ? DType::Float32 : DType::Int32;
    if (dtype(t.b) != bd || info(t.b).shape != Shape{ws[0]}) {
      bad(fmt::format("bias '{}' must be {} [{}], is {} {}", info(t.b).name, dtype_name(bd), ws[0],
                      dtype_name(dtype(t.b)), shape_to_string(info(t.b).shape)));
    }
    // kernels/transpose_conv.cc Prepare: TF_LITE_ENSURE_EQ(bias->params.zero_point, 0) for int8,
    // the legacy zero point being the first one stored (interpreter_builder.cc
    // GetLegacyQuantization, read only when scales and zero points are both present).
    const fb::QuantizationParameters* bq = info(t.b).q;
    if (xd == DType::Int8 && bq && bq->scale() && bq->scale()->size() > 0 && bq->zero_point() &&
        bq->zero_point()->size() > 0 && bq->zero_point()->Get(0) != 0) {
      unsupported(fmt::format("int8 bias '{}' has zero point {}; TFLite's TRANSPOSE_CONV requires 0",
                              info(t.b).name, bq->zero_point()->Get(0)));
    }
  }
  return t;
}

void Importer::transpose_conv(const fb::Operator& op) {
  const TransposeConvOperands t = transpose_conv_operands(op);
  const DType xd = dtype(t.x);
  if (xd == DType::Float32) return transpose_conv_float(t);
  if (!is_quantized(xd)) {
    unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported",
                            info(t.x).name, dtype_name(xd)));
  }
  require_quantized_weight(t.w);
  const Shape& xs = info(t.x).shape;
  const Shape& ws = info(t.w).shape;
  const std::int64_t N = xs[0], C = xs[3], M = ws[0], kh = ws[1], kw = ws[2];
  const Quant xq = quant(t.x), yq = quant(t.y);
  const ChannelQuant wq = channel_quant(t.w);
  if (xd == DType::UInt8 && wq.scales.size() != 1) {
    // reference_ops::TransposeConv (uint8) applies one multiplier and one weight zero point.
    bad(fmt::format("uint8 weights '{}' have {} scales; TFLite's uint8 kernel takes one",
                    info(t.w).name, wq.scales.size()));
  }
  if (xd == DType::Int8 &&
      (static_cast<std::int64_t>(wq.scales.size()) != M || (M > 1 && wq.dim != 0))) {
    // PopulateConvolutionQuantizationParams fills one multiplier per scale, and
    // reference_integer_ops::TransposeConv reads one per output channel.
    bad(fmt::format(
        "int8 weights '{}' have {} scales along dim {}; TFLite's int8 kernel needs one per "
        "output channel ({} along dim 0)",
        info(t.w).name, wq.scales.size(), wq.dim, M));
  }
  require_symmetric_int8(t.w, wq);

  // Weights OHWI -> OIHW, flipped in H and W.
  const Tensor wt = constant_tensor(t.w);
  Tensor oihw(xd, {M, C, kh, kw});
  const auto* src = reinterpret_cast<const std::uint8_t*>(wt.bytes().data());
  auto* dst = reinterpret_cast<std::uint8_t*>(oihw.bytes().data());
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t i = 0; i < C; ++i)
      for (std::int64_t r = 0; r < kh; ++r)
        for (std::int64_t s = 0; s < kw; ++s)
          dst[((m * C + i) * kh + r) * kw + s] =
              src[((m * kh + (kh - 1 - r)) * kw + (kw - 1 - s)) * C + i];

  // The conv's input: zero points inserted (strides > 1), then padded to out + k - 1 per dim.
  const std::string base = info(t.y).name;
  int v = nchw_view(t.x);
  std::array<std::int64_t, 2> extent = {xs[1], xs[2]};  // of v, per spatial dim
  std::array<std::int64_t, 2> before{}, after{};
  const std::array<std::int64_t, 2> k = {kh, kw};
  const std::array<std::int64_t, 2> steps = {xs[1] > 1 ? t.strides[0] : 1,
                                             xs[2] > 1 ? t.strides[1] : 1};
  if (steps[0] > 1 || steps[1] > 1) {
    const std::int64_t H = xs[1], W = xs[2];
    const Shape split{N, C, H, 1, W, 1}, spread{N, C, H, steps[0], W, steps[1]};
    const int split_v = add_value(base + "/split", xd, split);
    add_node("Reshape", "", {v, shape_constant(base + "/split_shape", split)}, {split_v}, {},
             "/split");
    const int spread_v = add_value(base + "/spread", xd, spread);
    add_node("Pad", "",
             {split_v,
              add_constant(base + "/spread_pads", int64_tensor({0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                                steps[0] - 1, 0, steps[1] - 1})),
              zero_point_constant(base + "/spread_value", xd, {xq.zero_point})},
             {spread_v}, {}, "/spread");
    extent = {H * steps[0], W * steps[1]};
    const Shape dilated{N, C, extent[0], extent[1]};
    v = add_value(base + "/dilated", xd, dilated);
    add_node("Reshape", "", {spread_v, shape_constant(base + "/dilated_shape", dilated)}, {v}, {},
             "/dilated");
  }
  for (std::size_t d = 0; d < 2; ++d) {
    before[d] = k[d] - 1 - t.pads[d];
    after[d] = t.out[1 + d] + k[d] - 1 - before[d] - extent[d];
    if (before[d] < 0)
      bad(fmt::format("internal: padding {} exceeds kernel {} - 1", t.pads[d], k[d]));
  }
  std::array<std::int64_t, 4> conv_pads = {before[0], before[1], after[0], after[1]};
  if (steps[0] > 1 || steps[1] > 1 || after[0] < 0 || after[1] < 0) {
    const Shape padded{N, C, t.out[1] + kh - 1, t.out[2] + kw - 1};
    const int padded_v = add_value(base + "/padded", xd, padded);
    add_node("Pad", "",
             {v,
              add_constant(base + "/pads",
                           int64_tensor({0, 0, before[0], before[1], 0, 0, after[0], after[1]})),
              zero_point_constant(base + "/pad_value", xd, {xq.zero_point})},
             {padded_v}, {}, "/pad");
    v = padded_v;
    conv_pads = {0, 0, 0, 0};
  }
  std::vector<int> inputs = qlinear_operands(v, t.x, xq, info(t.w).name + "/oihw_flipped",
                                             std::move(oihw), t.w, wq, t.y, yq, {"x", "w"});
  if (t.b >= 0) inputs.push_back(bias_constant(t.b, M));
  std::map<std::string, Attribute> attrs = {
      {"kernel_shape", std::vector<std::int64_t>{kh, kw}},
      {"strides", std::vector<std::int64_t>{1, 1}},
      {"dilations", std::vector<std::int64_t>{1, 1}},
      {"pads", std::vector<std::int64_t>(conv_pads.begin(), conv_pads.end())},
      {"group", std::int64_t{1}}};
  // uint8: the kernel's one multiplier; int8: the per-channel arrays (ScaleProduct).
  add_fixed_point(attrs, xq, wq.scales, yq, activation_range(t.act, t.y),
                  xd == DType::UInt8 ? ScaleProduct::Float32 : ScaleProduct::Double);
  add_node("QLinearConv", "", std::move(inputs), {output_nchw(t.y)}, std::move(attrs));
}

void Importer::transpose_conv_float(const TransposeConvOperands& t) {
  const auto [lo, hi] = float_activation_range(t.act);
  std::vector<int> inputs = {model_view(t.x), model_view(t.w)};
  if (t.b >= 0) inputs.push_back(model_view(t.b));
  add_node("TFLiteTransposeConv", "furiosa", std::move(inputs), {output_model(t.y)},
           {{"strides", std::vector<std::int64_t>{t.strides[0], t.strides[1]}},
            {"pads", std::vector<std::int64_t>{t.pads[0], t.pads[1]}},
            {"output_shape", t.out},
            {"activation_min", lo},
            {"activation_max", hi}});
}

}  // namespace furiosa::compiler::detail::tflite
