// fold_constants: Shape of a statically shaped value, and any node whose inputs are all constants
// and that the host operator library runs, is evaluated once (by the host library) and becomes a
// constant. Folding repeats, with shape inference in between, until nothing more folds: a shape
// subgraph (Shape -> Gather/Slice -> Mul -> Concat -> Resize sizes) can give a value its shape
// only once an earlier subgraph has folded, and that value's Shape folds in the next round.
// DequantizeLinear is never folded (QDQ weights stay visible to fuse_qdq_operators); a
// QuantizeLinear of constant float weights is: the weights are quantized at compile time with the
// ONNX rule (host/quantize.h).
#include <algorithm>

#include "furiosa/host/cpu_ops.h"
#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

// Shape's output for an input of static shape `s` (ONNX Shape-15: start/end, negative from the
// back, clamped to [0, rank]).
Tensor shape_of(const Node& n, const Shape& s) {
  const auto rank = static_cast<std::int64_t>(s.size());
  auto clamp = [&](std::int64_t v) {
    return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank);
  };
  const std::int64_t start = clamp(n.attr_int("start", 0));
  const std::int64_t end = std::max(start, clamp(n.attr_int("end", rank)));
  Tensor t(DType::Int64, {end - start});
  std::copy(s.begin() + start, s.begin() + end, t.as<std::int64_t>().begin());
  return t;
}

// One round over the graph in order; returns how many nodes it folded.
std::size_t fold_once(PassContext& ctx) {
  Graph& g = ctx.graph;
  std::vector<bool> dead(g.nodes.size(), false);
  std::size_t folded = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    // DequantizeLinear stays (QDQ fusion reads the quantized weights behind it); a
    // QuantizeLinear of constant float weights folds: the weights are quantized once here with
    // the ONNX rule (host/quantize.h), then fused like the integer-weight form.
    if (n.domain.empty() && n.op_type == "DequantizeLinear") continue;
    std::vector<Tensor> outs;
    if (n.op_type == "Shape" && n.domain.empty() && n.inputs.size() == 1 &&
        ctx.value(n.inputs[0]).has_shape &&
        std::all_of(ctx.value(n.inputs[0]).shape.begin(), ctx.value(n.inputs[0]).shape.end(),
                    [](auto d) { return d >= 0; })) {
      outs.push_back(shape_of(n, ctx.value(n.inputs[0]).shape));
    } else {
      if (n.inputs.empty()) continue;
      std::vector<const Tensor*> ins;
      std::vector<DType> dtypes;
      bool all_const = true;
      for (int in : n.inputs) {
        if (in < 0) {
          ins.push_back(nullptr);
          dtypes.push_back(DType::Float32);
          continue;
        }
        all_const = all_const && ctx.value(in).constant.has_value();
        ins.push_back(ctx.value(in).constant ? &*ctx.value(in).constant : nullptr);
        dtypes.push_back(ctx.value(in).dtype);
      }
      if (!all_const || !cpu_op_supported(n, dtypes, nullptr)) continue;
      outs = run_cpu_op(n, ins);
    }
    for (std::size_t o = 0; o < n.outputs.size() && o < outs.size(); ++o) {
      if (n.outputs[o] < 0) continue;
      Value& v = ctx.value(n.outputs[o]);
      v.dtype = outs[o].dtype();
      v.shape = outs[o].shape();
      v.dim_params.assign(v.shape.size(), "");
      v.has_shape = true;
      v.constant = std::move(outs[o]);
    }
    dead[i] = true;
    ++folded;
    ctx.note_entry(n, "constant", "-",
                   n.op_type == "QuantizeLinear"
                       ? "constant float weights quantized at compile time (QuantizeLinear rule)"
                       : "all inputs are known at compile time: evaluated once");
  }
  ctx.compact(dead);
  return folded;
}

void run(PassContext& ctx) {
  // Each round folds at least one node, so there are at most as many rounds as nodes.
  while (fold_once(ctx) > 0) infer_shapes_deferring_constants(ctx.graph, ctx.options);
  // Whatever still waits on a value that is not a constant stays dynamic: named here.
  infer_shapes(ctx.graph, ctx.options);
}

}  // namespace

const Pass kFoldConstants{"fold_constants", run};

}  // namespace furiosa::compiler::detail
