// pin_input_shapes: options.input_shapes gives named graph inputs their whole shape, pinning
// their symbolic (free) dims the way ONNX Runtime's free-dimension overrides do
// (SessionOptions::AddFreeDimensionOverrideByName, onnxruntime_session_options_config_keys.h);
// here per input rather than per dim name, so two inputs sharing a dim name are pinned apart.
// A fixed dim that differs, a rank that differs or a dim < 1 is refused naming the input: the
// pin never changes what the model declares, it only fills in what it leaves open. Runs first,
// so bind_batch, infer_shapes and fold_constants see the pinned shapes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "furiosa/core/error.h"
#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

void run(PassContext& ctx) {
  for (const auto& entry : ctx.options.input_shapes) {
    // (Not a structured binding: clang 14 cannot capture one in the lambda below.)
    const std::string& name = entry.first;
    const std::vector<std::int64_t>& shape = entry.second;
    Value& v = ctx.value(ctx.graph_input(name, "input_shapes"));
    auto refuse = [&](const std::string& why) {
      return Error(ErrorCode::IncompatibleModel,
                   fmt::format("input_shapes: input '{}' cannot take shape {}: {}", v.name,
                               shape_to_string(shape), why),
                   ErrorSubject::of_tensor(v.name));
    };
    if (!v.has_shape) throw refuse("the model declares no shape for it");
    if (shape.size() != v.shape.size()) {
      throw refuse(fmt::format("the model's input has rank {} ({})", v.shape.size(),
                               shape_to_string(v.shape)));
    }
    std::vector<std::string> pinned;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] < 1) throw refuse(fmt::format("dim {} is {}, dims must be >= 1", d, shape[d]));
      if (v.shape[d] >= 0) {
        if (v.shape[d] != shape[d]) {
          throw refuse(fmt::format("dim {} is fixed to {} by the model", d, v.shape[d]));
        }
        continue;
      }
      const std::string param = d < v.dim_params.size() ? v.dim_params[d] : std::string();
      pinned.push_back(fmt::format(
          "{}={}", param.empty() ? fmt::format("dim {}", d) : "'" + param + "'", shape[d]));
      v.shape[d] = shape[d];
      if (d < v.dim_params.size()) v.dim_params[d].clear();
    }
    if (!pinned.empty()) {
      ctx.report.notes.push_back(fmt::format("input_shapes: input '{}' pinned to {} ({})", v.name,
                                             shape_to_string(v.shape), fmt::join(pinned, ", ")));
    }
  }
}

}  // namespace

const Pass kPinInputShapes{"pin_input_shapes", run};

}  // namespace furiosa::compiler::detail
