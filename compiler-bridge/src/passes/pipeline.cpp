// The pass pipeline (passes.h): the one place that says which passes run, and in which order.
#include <array>
#include <string>

#include "furiosa/profiler/profiler.h"
#include "pass.h"
#include "passes.h"

namespace furiosa::compiler::detail {

std::span<const Pass* const> pass_pipeline() {
  static constexpr std::array<const Pass*, 17> pipeline = {
      &kPinInputShapes,
      &kBindBatch,
      &kInferShapes,
      &kWithoutQuantize,
      &kPermuteInput,
      &kNormalizedPixelOutputs,
      &kInferShapes,
      &kFoldConstants,
      &kInferShapes,
      &kFuseQdqOperators,
      &kExpandQlinearElementwise,
      &kInferShapes,
      &kRemoveDeadNodes,
      &kFuseLookupTables,
      &kFoldQdqRegions,
      &kRemoveDeadNodes,
      &kInferShapes,
  };
  return pipeline;
}

void run_passes(Graph& g, const CompilerOptions& options, PartitionReport& report) {
  PassContext ctx(g, options, report);
  const profiler::OpenSpan parent = profiler::innermost_open_span();
  for (const Pass* pass : pass_pipeline()) {
    profiler::ScopedSpan span(parent.profiler, pass->name(), parent.context);
    pass->run(ctx);
    if (span.active()) span.record().attributes = {{"nodes", std::to_string(g.nodes.size())}};
  }
}

}  // namespace furiosa::compiler::detail
