// fold_constants: Shape of a statically shaped value, and any node whose inputs are all constants
// and that the host operator library runs, is evaluated once (by the host library) and becomes a
// constant. DequantizeLinear is never folded (QDQ weights stay visible to fuse_qdq_operators); a
// QuantizeLinear of constant float weights is: the weights are quantized at compile time with the
// ONNX rule (host/quantize.h).
#include <algorithm>

#include "furiosa/host/cpu_ops.h"
#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

void run(PassContext& ctx) {
  Graph& g = ctx.graph;
  std::vector<bool> dead(g.nodes.size(), false);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    // DequantizeLinear stays (QDQ fusion reads the quantized weights behind it); a
    // QuantizeLinear of constant float weights folds: the weights are quantized once here with
    // the ONNX rule (host/quantize.h), then fused like the integer-weight form.
    if (n.domain.empty() && n.op_type == "DequantizeLinear") continue;
    std::vector<Tensor> outs;
    if (n.op_type == "Shape" && n.domain.empty() && n.inputs.size() == 1 && ctx.value(n.inputs[0]).has_shape &&
        std::all_of(ctx.value(n.inputs[0]).shape.begin(), ctx.value(n.inputs[0]).shape.end(),
                    [](auto d) { return d >= 0; }) &&
        n.attributes.empty()) {
      const Shape& s = ctx.value(n.inputs[0]).shape;
      Tensor t(DType::Int64, {static_cast<std::int64_t>(s.size())});
      std::copy(s.begin(), s.end(), t.as<std::int64_t>().begin());
      outs.push_back(std::move(t));
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
    ctx.note_entry(n, "constant", "-",
                   n.op_type == "QuantizeLinear"
                       ? "constant float weights quantized at compile time (QuantizeLinear rule)"
                       : "all inputs are known at compile time: evaluated once");
  }
  ctx.compact(dead);
}

}  // namespace

const Pass kFoldConstants{"fold_constants", run};

}  // namespace furiosa::compiler::detail
