// Lowering's host steps (lowering_impl.h): QuantizeLinear / DequantizeLinear, the NHWC
// transpose done by the host Lower, and external (CPU fallback) operators.
#include <fmt/format.h>

#include <memory>

#include "furiosa/core/error.h"
#include "graph_utils.h"
#include "lowering_impl.h"

namespace furiosa::compiler::detail {

// A Transpose [0, 3, 1, 2] of an "NHWC" value held on the host (not produced by the open NPU
// segment) whose result only NPU nodes read: done by the host Lower step reading NHWC.
bool Lowering::is_nhwc_lower(const Node& n) const {
  if (n.op_type != "Transpose" || !n.domain.empty() || n.inputs.size() != 1 ||
      n.outputs.size() != 1)
    return false;
  const int in = n.inputs[0], out = n.outputs[0];
  const Value& xv = value(in);
  if (xv.format != "NHWC" || xv.shape.size() != 4 ||
      n.attr_ints("perm", {}) != std::vector<std::int64_t>{0, 3, 1, 2}) {
    return false;
  }
  if (!host_.count(in) || seg_values_.count(in) || host_lowered(in) || is_graph_output(out))
    return false;
  auto it = consumers_.find(out);
  if (it == consumers_.end() || it->second.empty()) return false;
  for (int c : it->second) {
    if (place(g_, g_.nodes[static_cast<std::size_t>(c)], nullptr).where != Where::Npu) return false;
  }
  return true;
}

void Lowering::emit_nhwc_lower(const Node& n) {
  const Value& yv = value(n.outputs[0]);
  const int lowered = add_slot(yv.name + ".lowered", yv.dtype, yv.shape, isa::Layout::LoweredNCHW);
  CpuOp op;
  op.kind = CpuOpKind::Lower;
  op.node_name = n.name;
  op.operator_index = n.index;
  op.inputs = {host_.at(n.inputs[0])};
  op.outputs = {lowered};
  op.channels_last = true;
  add_cpu_step(std::move(op));
  host_[n.outputs[0]] = lowered;
  note_entry(n, "cpu", "Lower",
             "NHWC -> NCHW transpose done by the host Lower step (NHWC -> lowered NCHW)");
  out_.report.notes.push_back(
      fmt::format("Lower of '{}' on the host: NHWC input '{}' is transposed while "
                  "lowering",
                  yv.name, value(n.inputs[0]).name));
}

CpuOp Lowering::qdq_op(const Node& n, CpuOpKind kind) {
  CpuOp op;
  op.kind = kind;
  op.node_name = n.name;
  op.operator_index = n.index;
  op.scales = float_values(constant_input(g_, n, 1, "scale"));
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    op.zero_points = int_values(constant_input(g_, n, 2, "zero point"));
  } else {
    op.zero_points.assign(op.scales.size(), 0);
  }
  const Shape& xs = value(n.inputs[0]).shape;
  op.axis = n.attr_int("axis", 1);
  if (op.axis < 0) op.axis += static_cast<std::int64_t>(xs.size());
  const std::string rounding = n.attr_string("rounding", "half_to_even");
  if (rounding != "half_to_even" && rounding != "half_away_from_zero") {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("node '{}' ({}): unknown rounding '{}'", n.name, n.op_type, rounding));
  }
  op.round_half_away_from_zero = kind == CpuOpKind::Quantize && rounding == "half_away_from_zero";
  if (op.scales.size() != op.zero_points.size() ||
      (op.scales.size() > 1 &&
       (op.axis < 0 || op.axis >= static_cast<std::int64_t>(xs.size()) ||
        xs[static_cast<std::size_t>(op.axis)] != static_cast<std::int64_t>(op.scales.size())))) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("node '{}' ({}): scale/zero point sizes do not fit axis {} of {}",
                            n.name, n.op_type, op.axis, shape_to_string(xs)));
  }
  return op;
}

void Lowering::emit_qdq(const Node& n) {
  const bool quantize = n.op_type == "QuantizeLinear";
  CpuOp op = qdq_op(n, quantize ? CpuOpKind::Quantize : CpuOpKind::Dequantize);
  op.inputs = {host_value(n.inputs[0])};
  const Value& y = value(n.outputs[0]);
  op.outputs = {add_slot(y.name, y.dtype, y.shape, isa::Layout::Linear)};
  host_[n.outputs[0]] = op.outputs[0];
  add_cpu_step(std::move(op));
  note_entry(n, "cpu", quantize ? "Quantize" : "Dequantize",
             quantize ? "QuantizeLinear runs on the host" : "DequantizeLinear runs on the host");
}

void Lowering::emit_external(const Node& n) {
  CpuOp op;
  op.kind = CpuOpKind::External;
  op.node_name = n.name;
  op.operator_index = n.index;
  for (int i : n.inputs) op.inputs.push_back(i >= 0 ? host_value(i) : -1);
  for (int o : n.outputs) {
    if (o < 0) {
      op.outputs.push_back(-1);
      continue;
    }
    const Value& v = value(o);
    int s = add_slot(v.name, v.dtype, v.shape, isa::Layout::Linear);
    host_[o] = s;
    op.outputs.push_back(s);
  }
  op.node = std::make_shared<const Node>(n);
  add_cpu_step(std::move(op));
  note_entry(n, "fallback", n.op_type, "no NPU kernel: runs on the host as an external operator");
}

}  // namespace furiosa::compiler::detail
