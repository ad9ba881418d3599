// bind_batch: the model-level batch for graphs whose inputs have a fixed dim 0 of 1. Dim 0 of
// every input becomes options.batch_size, and so does a leading 1 of constant Reshape shapes (the
// batch axis kept through reshapes, as in MNIST's [1, 256] and ShuffleNet's [1, 2, 58, 28, 28]).
// Symbolic batch dims are bound by infer_shapes instead.
#include <fmt/format.h>

#include "furiosa/core/error.h"
#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

void run(PassContext& ctx) {
  Graph& g = ctx.graph;
  const std::int64_t n = ctx.options.batch_size;
  if (n == 1) return;
  bool fixed = false;
  for (int id : g.inputs) {
    Value& v = ctx.value(id);
    if (v.shape.empty() || v.shape[0] < 0) continue;
    if (v.shape[0] != 1) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("batch size {}: graph input '{}' has a fixed dim 0 of {}, only 1 or a symbolic dim "
                              "can be batched", n, v.name, v.shape[0]));
    }
    v.shape[0] = n;
    fixed = true;
  }
  if (!fixed) return;
  for (Node& node : g.nodes) {
    if (node.op_type != "Reshape" || !node.domain.empty() || !is_constant_input(g, node, 1)) continue;
    const Tensor& shape = *ctx.value(node.inputs[1]).constant;
    if (shape.dtype() != DType::Int64 || shape.elements() < 1 || shape.as<std::int64_t>()[0] != 1) continue;
    Tensor batched = shape;
    batched.as<std::int64_t>()[0] = n;
    Value bv;
    bv.name = ctx.value(node.inputs[1]).name + fmt::format("/batch{}", n);
    bv.dtype = DType::Int64;
    bv.shape = shape.shape();
    bv.dim_params.assign(bv.shape.size(), "");
    bv.has_shape = true;
    bv.constant = std::move(batched);
    node.inputs[1] = ctx.add_value(std::move(bv));
  }
  ctx.report.notes.push_back(
      fmt::format("batch size {}: dim 0 of the inputs and the leading 1 of constant "
                  "Reshape shapes were multiplied",
                  n));
}

}  // namespace

const Pass kBindBatch{"bind_batch", run};

}  // namespace furiosa::compiler::detail
