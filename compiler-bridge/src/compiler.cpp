// compile(): the driver of the compiler (compiler.h), split along ONNX Runtime's
// GetCapability / Compile line:
//   passes.cpp      graph rewrites (batch, constant folding, QDQ fusion and regions, dead nodes)
//   capability.cpp  the NPU op table: placement, the unsupported-operator check, the listing
//   lowering.cpp    steps, host slots and NPU programs per segment
//   memory_plan.cpp DRAM placement of each program's activations by liveness
// Requantization rule per kernel: the ONNX float rule unless the node carries the fixed-point
// attributes of graph.h (TFLite models), which become the kernel's `fixed_point` params.
#include "furiosa/compiler/compiler.h"

#include <fmt/format.h>

#include <algorithm>

#include "capability.h"
#include "furiosa/core/error.h"
#include "lowering.h"
#include "passes.h"

namespace furiosa::compiler {

std::string_view target_npu_name(int pe_count) noexcept { return pe_count == 1 ? "warboy" : "warboy-2pe"; }

int parse_target_npu(std::string_view name) {
  if (name == "warboy") return 1;
  if (name == "warboy-2pe") return 2;
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("--target-npu '{}': expected warboy (single PE) or warboy-2pe (fused PE)", name));
}

std::string_view cpu_op_name(CpuOpKind kind) noexcept {
  switch (kind) {
    case CpuOpKind::Quantize: return "Quantize";
    case CpuOpKind::Dequantize: return "Dequantize";
    case CpuOpKind::Lower: return "Lower";
    case CpuOpKind::Unlower: return "Unlower";
    case CpuOpKind::External: return "External";
  }
  return "?";
}

std::uint64_t HostSlot::size_bytes() const noexcept {
  return isa::TensorRef{.address = 0, .dtype = dtype, .shape = shape, .layout = layout}.size_bytes();
}

std::string PartitionReport::to_string() const {
  std::string out = fmt::format("{:<4} {:<40} {:<34} {:<9} {:<26} {}\n", "idx", "node", "op",
                                "placement", "target", "reason");
  for (const auto& e : entries) {
    out += fmt::format("{:<4} {:<40} {:<34} {:<9} {:<26} {}\n", e.operator_index, e.node_name,
                       e.op, e.placement, e.target, e.reason);
  }
  for (const auto& n : notes) out += "note: " + n + "\n";
  return out;
}

std::size_t PartitionReport::count(std::string_view placement) const {
  return static_cast<std::size_t>(std::count_if(entries.begin(), entries.end(),
                                                [&](const auto& e) { return e.placement == placement; }));
}

CompiledModel compile(Graph graph, const CompilerOptions& options) {
  CompiledModel out;
  detail::run_passes(graph, options, out.report);
  detail::check_supported(graph);
  detail::lower_graph(graph, options, out);
  std::stable_sort(out.report.entries.begin(), out.report.entries.end(),
                   [](const auto& a, const auto& b) { return a.operator_index < b.operator_index; });
  return out;
}

}  // namespace furiosa::compiler
