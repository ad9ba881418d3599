// infer_shapes: static shape inference (shape_inference.cpp) as a pass of the pipeline: binds
// symbolic batch dims to options.batch_size and gives every value its dtype and shape. The
// pipeline runs it again after each pass that adds values without shapes. A node whose shape
// waits on a value a shape subgraph computes (Resize sizes, Tile repeats) is left unknown here;
// fold_constants folds that subgraph and ends with the strict inference, which names any node
// still waiting.
#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

void run(PassContext& ctx) { infer_shapes_deferring_constants(ctx.graph, ctx.options); }

}  // namespace

const Pass kInferShapes{"infer_shapes", run};

}  // namespace furiosa::compiler::detail
