// TFLite's pooling, resizing and reduction operators (importer.h):
//  - MAX_POOL_2D: the maximum of the stored values, then the fused activation's clamp;
//  - AVERAGE_POOL_2D: reference_ops::AveragePool's integer average (furiosa::QuantizedAveragePool);
//  - RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR: Resize with tflite_arithmetic = 1, the float32
//    coordinates and uint8 round-half-up of reference_ops::ResizeBilinear<T>, the 10-bit fixed point
//    of ResizeBilinearInteger for int8, reference_ops::GetNearestNeighbor (host/cpu_ops.h);
//  - MEAN on uint8/int8: reference_ops::QuantizedMeanOrSum (kernels/reduce.cc, EvalQuantizedMean):
//    QuantizeMultiplier(in_scale / out_scale) with 1/count folded into the multiplier
//    (furiosa::QuantizedMean); float32: ReduceMean;
//  - ARG_MAX / ARG_MIN: ArgMax / ArgMin on the stored values, first index on ties
//    (reference_ops::ArgMinMax keeps the first extreme).
#include <fmt/format.h>

#include <bit>

#include "furiosa/device/isa.h"
#include "graph_utils.h"
#include "importer.h"

namespace furiosa::compiler::detail::tflite {

void Importer::pool(const fb::Operator& op, bool max) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 1, 1, out);
  const int x = in[0], y = out[0];
  require_quantized({x, y});
  const auto* o = op.builtin_options_as_Pool2DOptions();
  if (!o) bad("has no Pool2DOptions");
  const Shape& xs = info(x).shape;
  if (xs.size() != 4) bad(fmt::format("input must be 4-D (NHWC), is {}", shape_to_string(xs)));
  const std::int64_t fh = o->filter_height(), fw = o->filter_width();
  const Dim dy = window_dim(o->padding(), xs[1], fh, o->stride_h(), 1);
  const Dim dx = window_dim(o->padding(), xs[2], fw, o->stride_w(), 1);
  check_output_shape(y, {xs[0], dy.out, dx.out, xs[3]});
  const auto range = activation_range(o->fused_activation_function(), y);
  std::map<std::string, Attribute> attrs = {
      {"kernel_shape", std::vector<std::int64_t>{fh, fw}},
      {"strides", std::vector<std::int64_t>{o->stride_h(), o->stride_w()}},
      {"pads", std::vector<std::int64_t>{dy.before, dx.before, dy.after, dx.after}}};
  const int xv = nchw_view(x);
  if (max) {
    // The maximum of the stored values, then the activation's clamp (reference MaxPool).
    const int v = add_value(info(y).name + "/max", dtype(x), nchw_shape(y));
    add_node("MaxPool", "", {xv}, {v}, std::move(attrs));
    bind_clamped(v, y, true, range);
    return;
  }
  attrs["output_min"] = std::int64_t{range[0]};
  attrs["output_max"] = std::int64_t{range[1]};
  add_node("QuantizedAveragePool", "furiosa", {xv}, {output_nchw(y)}, std::move(attrs));
}

// RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR -> Resize on the NCHW view with axes [2, 3],
// sizes from the operator's size input, the ONNX coordinate mode of TFLite's flags
// (align_corners -> align_corners, half_pixel_centers -> half_pixel (bilinear) /
// tf_half_pixel_for_nn (nearest), neither -> asymmetric; nearest_mode round_prefer_ceil with
// align_corners, else floor) and tflite_arithmetic = 1 for TFLite's own float32 / integer
// arithmetic (host/cpu_ops.h). Quantized tensors are resized as stored values, as TFLite's
// kernels do (they never rescale; converters give input and output the same parameters).
void Importer::resize(const fb::Operator& op, bool bilinear) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 2, out);
  const int x = in[0], size = in[1], y = out[0];
  require_constant(size, "size");
  const DType d = dtype(x);
  if (d != DType::Float32 && !is_quantized(d)) {
    unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported", info(x).name, dtype_name(d)));
  }
  if (dtype(y) != d) bad(fmt::format("input '{}' is {}, output '{}' {}", info(x).name, dtype_name(d), info(y).name, dtype_name(dtype(y))));
  const Shape& xs = info(x).shape;
  if (xs.size() != 4) bad(fmt::format("input '{}' must be 4-D (NHWC), has shape {}", info(x).name, shape_to_string(xs)));
  const Tensor st = constant_tensor(size);
  if (st.dtype() != DType::Int32 || st.elements() != 2) {
    bad(fmt::format("size '{}' must be int32 [2] (height, width), is {} {}", info(size).name, dtype_name(st.dtype()),
                    shape_to_string(st.shape())));
  }
  const std::int64_t oh = st.as<std::int32_t>()[0], ow = st.as<std::int32_t>()[1];
  if (oh < 1 || ow < 1) bad(fmt::format("size '{}' = [{}, {}] must be positive", info(size).name, oh, ow));
  check_output_shape(y, {xs[0], oh, ow, xs[3]});
  bool align_corners = false, half_pixel = false;
  if (bilinear) {
    if (const auto* o = op.builtin_options_as_ResizeBilinearOptions()) {
      align_corners = o->align_corners();
      half_pixel = o->half_pixel_centers();
    }
    // TFLite's Prepare/kernels require it (reference_ops::ResizeBilinear checks the same).
    if (align_corners && half_pixel) bad("align_corners and half_pixel_centers are both set; TFLite allows one at most");
  } else {
    if (const auto* o = op.builtin_options_as_ResizeNearestNeighborOptions()) {
      align_corners = o->align_corners();
      half_pixel = o->half_pixel_centers();
    }
    if (align_corners && half_pixel) {
      unsupported("align_corners together with half_pixel_centers has no ONNX coordinate mode and is not supported");
    }
  }
  const std::string coord = align_corners ? "align_corners"
                            : half_pixel  ? (bilinear ? "half_pixel" : "tf_half_pixel_for_nn")
                                          : "asymmetric";
  std::map<std::string, Attribute> attrs = {{"mode", std::string(bilinear ? "linear" : "nearest")},
                                            {"coordinate_transformation_mode", coord},
                                            {"axes", std::vector<std::int64_t>{2, 3}},
                                            {"tflite_arithmetic", std::int64_t{1}}};
  if (!bilinear) attrs["nearest_mode"] = std::string(align_corners ? "round_prefer_ceil" : "floor");
  Tensor sizes(DType::Int64, {2});
  sizes.as<std::int64_t>()[0] = oh;
  sizes.as<std::int64_t>()[1] = ow;
  const int sv = add_constant(info(y).name + "/sizes", std::move(sizes));
  add_node("Resize", "", {nchw_view(x), -1, -1, sv}, {output_nchw(y)}, std::move(attrs));
}

// MEAN over constant axes. uint8/int8: furiosa::QuantizedMean with TFLite's
// reference_ops::QuantizedMeanOrSum arithmetic: multiplier QuantizeMultiplier(in_scale /
// out_scale), then shift s = min(floor(log2(count)), 32, 31 + shift), multiplier
// (multiplier << s) / count, shift - s; float32: ReduceMean. A rank-4 input held only in NCHW
// is reduced there when the result's element order is the model's.
void Importer::mean(const fb::Operator& op) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 2, out);
  const int x = in[0], y = out[0];
  const auto* o = op.builtin_options_as_ReducerOptions();
  const bool keep = o && o->keep_dims();
  const Shape& xs = info(x).shape;
  const auto rank = static_cast<std::int64_t>(xs.size());
  std::vector<bool> reduced(xs.size(), false);
  for (auto a : int_constant(in[1], "axis")) {
    const std::int64_t ax = a < 0 ? a + rank : a;
    if (ax < 0 || ax >= rank) bad(fmt::format("axis {} is out of range for input '{}' {}", a, info(x).name, shape_to_string(xs)));
    reduced[static_cast<std::size_t>(ax)] = true;  // duplicates count once (TFLite's ResolveAxis)
  }
  Shape expected;
  std::vector<std::int64_t> axes;
  std::int64_t count = 1;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (!reduced[i]) {
      expected.push_back(xs[i]);
      continue;
    }
    axes.push_back(static_cast<std::int64_t>(i));
    count *= xs[i];
    if (keep) expected.push_back(1);
  }
  check_output_shape(y, expected);
  const DType d = dtype(x);
  if (d != dtype(y)) bad(fmt::format("input '{}' is {}, output '{}' {}", info(x).name, dtype_name(d), info(y).name, dtype_name(dtype(y))));
  if (d != DType::Float32 && !is_quantized(d)) unsupported(fmt::format("input '{}' is {}; float32, uint8 and int8 are supported", info(x).name, dtype_name(d)));
  if (count == 0) bad(fmt::format("input '{}' {} has no elements to average", info(x).name, shape_to_string(xs)));
  if (axes.empty()) {  // TFLite copies the input (ReduceIsCopy), even between quantizations
    add_node("Reshape", "", {ordered_view(x), shape_constant(info(y).name + "/shape", expected)}, {output_model(y)}, {});
    return;
  }
  // The NCHW view when only it exists and the result's order agrees with the model's.
  bool nchw = rank == 4 && info(x).model < 0 && info(x).nchw >= 0;
  std::vector<std::int64_t> nchw_axes;
  if (nchw) {
    for (auto a : axes) nchw_axes.push_back(nchw_axis(a));
    std::sort(nchw_axes.begin(), nchw_axes.end());
    if (!keep) {
      std::int64_t prev = -1;  // the kept dims must appear in the same order in both layouts
      for (std::int64_t i = 0; i < 4; ++i) {
        if (reduced[static_cast<std::size_t>(i)]) continue;
        nchw = nchw && nchw_axis(i) > prev;
        prev = nchw_axis(i);
      }
    }
  }
  const int xv = nchw ? nchw_view(x) : model_view(x);
  const int yv = nchw && keep ? output_nchw(y) : output_model(y);
  std::map<std::string, Attribute> attrs = {{"axes", nchw ? nchw_axes : axes}, {"keepdims", std::int64_t{keep ? 1 : 0}}};
  if (d == DType::Float32) {
    add_node("ReduceMean", "", {xv}, {yv}, std::move(attrs));
    return;
  }
  const Quant xq = quant(x), yq = quant(y);
  isa::QuantizedMultiplier m = isa::quantize_multiplier(static_cast<double>(xq.scale) / static_cast<double>(yq.scale));
  int s = std::bit_width(static_cast<std::uint64_t>(count)) - 1;  // 63 - CountLeadingZeros(count)
  s = std::min(s, 32);
  s = std::min(s, 31 + m.shift);
  m.multiplier = static_cast<std::int32_t>((static_cast<std::int64_t>(m.multiplier) << s) / count);
  m.shift -= s;
  attrs["x_zero_point"] = std::int64_t{xq.zero_point};
  attrs["y_zero_point"] = std::int64_t{yq.zero_point};
  attrs["fixed_point_multiplier"] = std::int64_t{m.multiplier};
  attrs["fixed_point_shift"] = std::int64_t{m.shift};
  add_node("QuantizedMean", "furiosa", {xv}, {yv}, std::move(attrs));
}

// ARG_MAX / ARG_MIN -> ArgMax / ArgMin (keepdims 0, first index on ties, as TFLite's
// reference_ops::ArgMinMax), then Cast to int32 when the output is INT32. The channel axis of
// a tensor that only exists in NCHW is reduced there (same result layout: [N, H, W]).
void Importer::arg_min_max(const fb::Operator& op, bool max) {
  const auto in = op_inputs(op);
  const auto out = op_outputs(op);
  require_arity(in, 2, 2, out);
  const int x = in[0], a = in[1], y = out[0];
  require_constant(a, "axis");
  dtype(x);
  const Tensor at = constant_tensor(a);
  if ((at.dtype() != DType::Int32 && at.dtype() != DType::Int64) || at.elements() != 1) {
    bad(fmt::format("axis '{}' must be one int32/int64 value, is {} {}", info(a).name, dtype_name(at.dtype()),
                    shape_to_string(at.shape())));
  }
  const Shape& xs = info(x).shape;
  const auto rank = static_cast<std::int64_t>(xs.size());
  std::int64_t axis = at.dtype() == DType::Int32 ? at.as<std::int32_t>()[0] : at.as<std::int64_t>()[0];
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) bad(fmt::format("axis {} is out of range for input '{}' {}", axis, info(x).name, shape_to_string(xs)));
  const DType yd = dtype(y);
  if (yd != DType::Int32 && yd != DType::Int64) bad(fmt::format("output '{}' is {}; ARG_MAX/ARG_MIN give int32 or int64", info(y).name, dtype_name(yd)));
  const auto* opt_max = op.builtin_options_as_ArgMaxOptions();
  const auto* opt_min = op.builtin_options_as_ArgMinOptions();
  const std::optional<fb::TensorType> wanted = max ? (opt_max ? std::optional(opt_max->output_type()) : std::nullopt)
                                                   : (opt_min ? std::optional(opt_min->output_type()) : std::nullopt);
  if (wanted && info(y).type != *wanted) {
    bad(fmt::format("output_type {} disagrees with the output tensor '{}' ({})", type_name(*wanted), info(y).name, type_name(info(y).type)));
  }
  Shape expected = xs;
  expected.erase(expected.begin() + axis);
  check_output_shape(y, expected);
  const bool nchw = rank == 4 && axis == 3 && info(x).model < 0 && info(x).nchw >= 0;
  const int xv = nchw ? nchw_view(x) : model_view(x);
  const std::map<std::string, Attribute> attrs = {{"axis", nchw ? std::int64_t{1} : axis},
                                                  {"keepdims", std::int64_t{0}},
                                                  {"select_last_index", std::int64_t{0}}};
  const char* onnx_op = max ? "ArgMax" : "ArgMin";
  if (yd == DType::Int64) {
    add_node(onnx_op, "", {xv}, {output_model(y)}, attrs);
    return;
  }
  const int idx = add_value(info(y).name + "/int64", DType::Int64, expected);
  add_node(onnx_op, "", {xv}, {idx}, attrs);
  add_node("Cast", "", {idx}, {output_model(y)}, {{"to", std::int64_t{6}}}, "/int32");  // TensorProto INT32
}

}  // namespace furiosa::compiler::detail::tflite
