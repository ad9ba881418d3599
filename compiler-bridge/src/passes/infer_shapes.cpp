// infer_shapes: static shape inference (shape_inference.cpp) as a pass of the pipeline: binds
// symbolic batch dims to options.batch_size and gives every value its dtype and shape. The
// pipeline runs it again after each pass that adds values without shapes.
#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

void run(PassContext& ctx) { infer_shapes(ctx.graph, ctx.options); }

}  // namespace

const Pass kInferShapes{"infer_shapes", run};

}  // namespace furiosa::compiler::detail
