// compile(): the driver of the compiler (compiler.h), split along ONNX Runtime's
// GetCapability / Compile line:
//   passes/         graph rewrites (batch, constant folding, QDQ fusion and regions, dead nodes),
//                   one pass per file, their order in passes/pipeline.cpp
//   capability.cpp  the NPU op table: placement, the unsupported-operator check, the listing
//   lowering.cpp    steps, host slots and NPU programs per segment
//   memory_plan.cpp DRAM placement of each program's activations by liveness
// Requantization rule per kernel: the ONNX float rule unless the node carries the fixed-point
// attributes of graph.h (TFLite models), which become the kernel's `fixed_point` params.
// In a trace, every pass run, the unsupported-operator check and the lowering are spans under the
// caller's open span (the runtime's Compile span).
#include "furiosa/compiler/compiler.h"

#include <fmt/format.h>

#include <algorithm>

#include "capability.h"
#include "furiosa/core/error.h"
#include "furiosa/profiler/profiler.h"
#include "lowering.h"
#include "passes.h"

namespace furiosa::compiler {

CompiledModel compile(Graph graph, const CompilerOptions& options) {
  CompiledModel out;
  detail::run_passes(graph, options, out.report);
  const profiler::OpenSpan parent = profiler::innermost_open_span();
  {
    profiler::ScopedSpan span(parent.profiler, "check_supported", parent.context);
    detail::check_supported(graph);
  }
  {
    profiler::ScopedSpan span(parent.profiler, "lower_graph", parent.context);
    detail::lower_graph(graph, options, out);
  }
  std::stable_sort(out.report.entries.begin(), out.report.entries.end(),
                   [](const auto& a, const auto& b) { return a.operator_index < b.operator_index; });
  return out;
}

}  // namespace furiosa::compiler
