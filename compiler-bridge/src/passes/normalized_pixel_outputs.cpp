// normalized_pixel_outputs (CompilerOptions::normalized_pixel_outputs): the output's
// DequantizeLinear gives way to a requantization to uint8 with scale 1/255 and zero point 0 (none
// when the quantized value already has those parameters), computed on the NPU; the output keeps
// its name.
#include <fmt/format.h>

#include <algorithm>

#include "furiosa/core/error.h"
#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

void run(PassContext& ctx) {
  Graph& g = ctx.graph;
  const float pixel_scale = 1.0f / 255.0f;
  for (const std::string& name : ctx.options.normalized_pixel_outputs) {
    auto it = std::find_if(g.outputs.begin(), g.outputs.end(), [&](int id) { return ctx.value(id).name == name; });
    if (it == g.outputs.end()) {
      std::string names;
      for (int id : g.outputs) names += (names.empty() ? "" : ", ") + ctx.value(id).name;
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("normalized_pixel_outputs: the model has no output named '{}' (outputs: {})", name,
                              names),
                  ErrorSubject::of_tensor(name));
    }
    const int y = *it;
    const int p = g.producer(y);
    const Node* dq = p >= 0 ? &g.nodes[static_cast<std::size_t>(p)] : nullptr;
    const auto params =
        dq && dq->op_type == "DequantizeLinear" && dq->domain.empty() ? ctx.qdq_params(*dq) : std::nullopt;
    if (!params || ctx.value(dq->inputs[0]).constant) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("normalized_pixel_outputs: output '{}' is not produced by a per-tensor "
                              "DequantizeLinear of a computed tensor", name),
                  ErrorSubject::of_tensor(name));
    }
    const int q = dq->inputs[0];
    ctx.value(y).name = name + "/float";
    int pixels = q;
    if (params->scale == pixel_scale && params->zero_point == 0 && params->dtype == DType::UInt8) {
      ctx.value(q).name = name;  // already pixels: the quantized tensor is the output
    } else {
      Value v = ctx.value(q);
      v.name = name;
      v.dtype = DType::UInt8;
      v.constant.reset();
      pixels = ctx.add_value(std::move(v));
      Node rq;
      rq.name = "normalized_pixel_outputs/" + name;
      rq.op_type = "Requantize";
      rq.domain = "furiosa";
      rq.index = dq->index;
      rq.inputs = {q};
      rq.outputs = {pixels};
      rq.attributes["x_scale"] = params->scale;
      rq.attributes["x_zero_point"] = std::int64_t{params->zero_point};
      rq.attributes["y_scale"] = pixel_scale;
      rq.attributes["y_zero_point"] = std::int64_t{0};
      rq.attributes["y_dtype"] = std::int64_t{static_cast<int>(DType::UInt8)};
      g.nodes.push_back(std::move(rq));
    }
    *it = pixels;
    ctx.report.notes.push_back(fmt::format(
        "normalized_pixel_outputs: output '{}' is returned as uint8 pixels (scale 1/255, zero point 0){}", name,
        pixels == q ? ""
                    : fmt::format(", requantized on the NPU from scale {} zero point {}", params->scale,
                                  params->zero_point)));
  }
}

}  // namespace

const Pass kNormalizedPixelOutputs{"normalized_pixel_outputs", run};

}  // namespace furiosa::compiler::detail
