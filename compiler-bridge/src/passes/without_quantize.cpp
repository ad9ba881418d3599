// without_quantize (CompilerOptions::without_quantize): the named input becomes the type its
// QuantizeLinear nodes produce and those nodes disappear, so the caller gives the input already
// quantized and the host Quantize step goes away. Each reader must be a per-tensor QuantizeLinear
// with one set of parameters (what the caller quantizes with).
#include <fmt/format.h>

#include "furiosa/core/error.h"
#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

void run(PassContext& ctx) {
  Graph& g = ctx.graph;
  std::vector<bool> dead(g.nodes.size(), false);
  for (const std::string& name : ctx.options.without_quantize) {
    const int x = ctx.graph_input(name, "without_quantize");
    if (ctx.value(x).dtype == DType::UInt8 || ctx.value(x).dtype == DType::Int8) {
      ctx.report.notes.push_back(fmt::format("without_quantize: input '{}' already is {}; nothing to remove", name,
                                             dtype_name(ctx.value(x).dtype)));
      continue;
    }
    const auto readers = g.consumers(x);
    std::optional<ScalarQuant> params;
    for (int r : readers) {
      const Node& q = g.nodes[static_cast<std::size_t>(r)];
      const auto p = q.op_type == "QuantizeLinear" && q.domain.empty() && q.inputs[0] == x &&
                             q.attr_string("rounding", "half_to_even") == "half_to_even"
                         ? ctx.qdq_params(q)
                         : std::nullopt;
      if (!p || (params && !ctx.same(*p, *params))) {
        throw Error(ErrorCode::IncompatibleModel,
                    fmt::format("without_quantize: input '{}' is read by node '{}' ({}), not only by per-tensor "
                                "QuantizeLinear nodes with one scale and zero point, so it cannot be given "
                                "quantized", name, q.name, q.qualified_op()),
                    ErrorSubject::of_tensor(name));
      }
      params = p;
    }
    if (!params) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("without_quantize: input '{}' is not quantized by the model", name),
                  ErrorSubject::of_tensor(name));
    }
    ctx.value(x).dtype = params->dtype;
    for (int r : readers) {
      const Node& q = g.nodes[static_cast<std::size_t>(r)];
      ctx.replace_uses(q.outputs[0], x);
      dead[static_cast<std::size_t>(r)] = true;
      ctx.note_entry(q, "folded", "-", fmt::format("without_quantize: input '{}' is given quantized", name));
    }
    ctx.report.notes.push_back(fmt::format(
        "without_quantize: input '{}' is given as {} quantized with scale {} and zero point {} (no host Quantize)",
        name, dtype_name(params->dtype), params->scale, params->zero_point));
  }
  ctx.compact(dead);
}

}  // namespace

const Pass kWithoutQuantize{"without_quantize", run};

}  // namespace furiosa::compiler::detail
