// Names of targets and host operators, slot sizes and the partition report's table
// (compiled_model.h, compiler_options.h).
#include "furiosa/program/compiled_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "furiosa/program/compiler_options.h"

namespace furiosa::program {

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
    // Names and op types come from the model file: escaped, so each entry stays one line.
    out += fmt::format("{:<4} {:<40} {:<34} {:<9} {:<26} {}\n", e.operator_index, escape_text(e.node_name, 128),
                       escape_text(e.op, 128), e.placement, e.target, one_line(e.reason));
  }
  for (const auto& n : notes) out += "note: " + one_line(n) + "\n";
  return out;
}

std::size_t PartitionReport::count(std::string_view placement) const {
  return static_cast<std::size_t>(std::count_if(entries.begin(), entries.end(),
                                                [&](const auto& e) { return e.placement == placement; }));
}

}  // namespace furiosa::program
