// Lowering's NPU data-movement kernels (lowering_impl.h): LowLevelConcat (and QLinearConcat's
// Requantize + Concat), LowLevelSplit, LowLevelTranspose, LowLevelResize, LowLevelSlice,
// LowLevelPad and LowLevelReshape.
#include <fmt/format.h>

#include "furiosa/core/error.h"
#include "graph_utils.h"
#include "lowering_impl.h"

namespace furiosa::compiler::detail {

// Output layout of a data-movement op: lowered when 4-D and its first input is lowered.
isa::Layout Lowering::movement_layout(int in, const Shape& out_shape) const {
  return out_shape.size() == 4 && lowered_on_device(in) ? isa::Layout::LoweredNCHW
                                                        : isa::Layout::Linear;
}

void Lowering::emit_concat(const Node& n) {
  const Value& yv = value(n.outputs[0]);
  std::int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<std::int64_t>(yv.shape.size());
  const auto layout = movement_layout(n.inputs[0], yv.shape);
  std::vector<isa::TensorRef> ins;
  for (int i : n.inputs)
    ins.push_back(layout == isa::Layout::LoweredNCHW ? device_value(i, layout, n)
                                                     : device_value(i, isa::Layout::Linear, n));
  auto y = alloc_activation(yv.dtype, yv.shape, layout);
  push_kernel({.kind = isa::KernelKind::Concat,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = std::move(ins),
               .outputs = {y},
               .params = isa::ConcatParams{axis}});
  note_entry(n, "npu", "LowLevelConcat",
             fmt::format("concatenation of {} tensors", dtype_name(yv.dtype)));
  produce(n.outputs[0], y);
}

void Lowering::emit_qconcat(const Node& n) {
  // Inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per tensor.
  const Value& yv = value(n.outputs[0]);
  auto yq = scalar_quant(g_, n, 0, 1);
  std::int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<std::int64_t>(yv.shape.size());
  // Lowered like a plain Concat when the first tensor is (a conv's output): concatenating and
  // requantizing in the lowered layout needs no relayout (LowLevelReshape) of each input to
  // Linear and of the result back for the next conv, two full copies per concatenation.
  const auto layout =
      n.inputs.size() > 2 ? movement_layout(n.inputs[2], yv.shape) : isa::Layout::Linear;
  std::vector<isa::TensorRef> ins;
  for (std::size_t i = 2; i + 2 < n.inputs.size(); i += 3) {
    auto xq = scalar_quant(g_, n, i + 1, i + 2);
    auto x = device_value(n.inputs[i], layout, n);
    if (xq.scale != yq.scale || xq.zero_point != yq.zero_point) {
      auto r = alloc_activation(yv.dtype, x.shape, layout);
      push_kernel({.kind = isa::KernelKind::Requantize,
                   .node_name = n.name,
                   .operator_index = n.index,
                   .inputs = {x},
                   .outputs = {r},
                   .params = isa::RequantizeParams{.x = {xq.scale, xq.zero_point},
                                                   .y = {yq.scale, yq.zero_point}}});
      x = r;
    }
    ins.push_back(x);
  }
  auto y = alloc_activation(yv.dtype, yv.shape, layout);
  push_kernel({.kind = isa::KernelKind::Concat,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = std::move(ins),
               .outputs = {y},
               .params = isa::ConcatParams{axis}});
  note_entry(n, "npu", "LowLevelRequantize+LowLevelConcat", "quantized concatenation");
  produce(n.outputs[0], y);
}

void Lowering::emit_split(const Node& n) {
  const Value& xv = value(n.inputs[0]);
  std::int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<std::int64_t>(xv.shape.size());
  auto x = device_any(n.inputs[0], n);
  const auto layout =
      xv.shape.size() == 4 && x.layout == isa::Layout::LoweredNCHW ? x.layout : isa::Layout::Linear;
  std::vector<isa::TensorRef> outs;
  for (int o : n.outputs) outs.push_back(alloc_activation(value(o).dtype, value(o).shape, layout));
  push_kernel({.kind = isa::KernelKind::Split,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = {x},
               .outputs = outs,
               .params = isa::SplitParams{axis}});
  for (std::size_t i = 0; i < n.outputs.size(); ++i) produce(n.outputs[i], outs[i]);
  note_entry(n, "npu", "LowLevelSplit", fmt::format("split of a {} tensor", dtype_name(xv.dtype)));
}

void Lowering::emit_transpose(const Node& n) {
  const Value& xv = value(n.inputs[0]);
  const Value& yv = value(n.outputs[0]);
  std::vector<std::int64_t> perm = n.attr_ints("perm", {});
  if (perm.empty()) {
    for (std::size_t i = xv.shape.size(); i-- > 0;) perm.push_back(static_cast<std::int64_t>(i));
  }
  auto x = device_any(n.inputs[0], n);
  auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::Linear);
  push_kernel({.kind = isa::KernelKind::Transpose,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = {x},
               .outputs = {y},
               .params = isa::TransposeParams{perm}});
  note_entry(n, "npu", "LowLevelTranspose",
             fmt::format("transpose of a {} tensor", dtype_name(xv.dtype)));
  produce(n.outputs[0], y);
}

void Lowering::emit_resize(const Node& n) {
  const Value& yv = value(n.outputs[0]);
  const auto factors = nearest_repeat(g_, n);
  if (!factors) {
    if (const auto flags = tflite_bilinear_flags(g_, n)) {
      auto x = device_any(n.inputs[0], n);
      auto y = alloc_activation(yv.dtype, yv.shape, x.layout);
      push_kernel({.kind = isa::KernelKind::Resize,
                   .node_name = n.name,
                   .operator_index = n.index,
                   .inputs = {x},
                   .outputs = {y},
                   .params = isa::ResizeParams{.mode = isa::ResizeParams::Mode::TfliteBilinear,
                                               .align_corners = (*flags)[0],
                                               .half_pixel_centers = (*flags)[1]}});
      note_entry(
          n, "npu", "LowLevelResize",
          fmt::format("TFLite bilinear resize {}x{} -> {}x{} of a {} tensor (TFLite's arithmetic)",
                      x.shape[2], x.shape[3], yv.shape[2], yv.shape[3], dtype_name(yv.dtype)));
      produce(n.outputs[0], y);
      return;
    }
    if (auto linear = onnx_linear_resize(g_, n)) {
      auto x = device_any(n.inputs[0], n);
      auto y = alloc_activation(yv.dtype, yv.shape, x.layout);
      note_entry(
          n, "npu", "LowLevelResize",
          fmt::format(
              "linear resize {}x{} -> {}x{} of a {} tensor ({}, ONNX Runtime's 8-bit arithmetic)",
              x.shape[2], x.shape[3], yv.shape[2], yv.shape[3], dtype_name(yv.dtype),
              linear->coordinate_transformation_mode));
      push_kernel({.kind = isa::KernelKind::Resize,
                   .node_name = n.name,
                   .operator_index = n.index,
                   .inputs = {x},
                   .outputs = {y},
                   .params = std::move(*linear)});
      produce(n.outputs[0], y);
      return;
    }
    throw Error(ErrorCode::Internal,
                fmt::format("node '{}' (Resize): placed on the NPU without a whole-factor "
                            "nearest index map",
                            n.name));
  }
  auto x = device_any(n.inputs[0], n);
  auto y = alloc_activation(yv.dtype, yv.shape, x.layout);
  push_kernel({.kind = isa::KernelKind::Resize,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = {x},
               .outputs = {y},
               .params = isa::ResizeParams{.scale_h = (*factors)[0], .scale_w = (*factors)[1]}});
  note_entry(n, "npu", "LowLevelResize",
             fmt::format("nearest upsampling x{} x{} of a {} tensor", (*factors)[0], (*factors)[1],
                         dtype_name(yv.dtype)));
  produce(n.outputs[0], y);
}

void Lowering::emit_slice(const Node& n) {
  const Value& yv = value(n.outputs[0]);
  auto params = slice_params(g_, n);
  if (!params)
    throw Error(
        ErrorCode::Internal,
        fmt::format("node '{}' (Slice): placed on the NPU without constant operands", n.name));
  auto x = device_any(n.inputs[0], n);
  auto y = alloc_activation(yv.dtype, yv.shape, movement_layout(n.inputs[0], yv.shape));
  push_kernel({.kind = isa::KernelKind::Slice,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = {x},
               .outputs = {y},
               .params = std::move(*params)});
  note_entry(n, "npu", "LowLevelSlice", fmt::format("slice of a {} tensor", dtype_name(yv.dtype)));
  produce(n.outputs[0], y);
}

void Lowering::emit_pad(const Node& n) {
  const Value& yv = value(n.outputs[0]);
  auto params = pad_params(g_, n);
  if (!params)
    throw Error(
        ErrorCode::Internal,
        fmt::format("node '{}' (Pad): placed on the NPU without constant operands", n.name));
  auto x = device_any(n.inputs[0], n);
  auto y = alloc_activation(yv.dtype, yv.shape, movement_layout(n.inputs[0], yv.shape));
  note_entry(n, "npu", "LowLevelPad",
             fmt::format("{} padding of a {} tensor", n.attr_string("mode", "constant"),
                         dtype_name(yv.dtype)));
  push_kernel({.kind = isa::KernelKind::Pad,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = {x},
               .outputs = {y},
               .params = std::move(*params)});
  produce(n.outputs[0], y);
}

void Lowering::emit_reshape(const Node& n) {
  const Value& yv = value(n.outputs[0]);
  auto x = device_any(n.inputs[0], n);
  // 4-D results that a lowered consumer will read are produced lowered directly.
  bool lowered_consumer = false;
  for (int c : consumers_[n.outputs[0]]) {
    const Node& cn = g_.nodes[static_cast<std::size_t>(c)];
    lowered_consumer = lowered_consumer || cn.op_type == "QLinearConv" || cn.op_type == "MaxPool";
  }
  const auto layout =
      yv.shape.size() == 4 && lowered_consumer ? isa::Layout::LoweredNCHW : isa::Layout::Linear;
  auto y = alloc_activation(yv.dtype, yv.shape, layout);
  push_kernel({.kind = isa::KernelKind::Reshape,
               .node_name = n.name,
               .operator_index = n.index,
               .inputs = {x},
               .outputs = {y},
               .params = isa::ReshapeParams{}});
  note_entry(
      n, "npu", "LowLevelReshape",
      x.layout == isa::Layout::LoweredNCHW ? "reshape leaving the lowered layout" : "reshape");
  produce(n.outputs[0], y);
}

}  // namespace furiosa::compiler::detail
