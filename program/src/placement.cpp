// The placement summary of a compiled model (placement.h).
#include "furiosa/program/placement.h"

#include <fmt/format.h>

#include <algorithm>

#include "furiosa/core/text.h"

namespace furiosa::program {

namespace {

// MACs of a host external operator with weights, from its slot shapes (0 for other ops): output
// elements x the reduction length (Conv: C/group x kernel elements; MatMul/Gemm: K).
std::uint64_t host_op_macs(const CompiledModel& m, const CpuOp& op) {
  if (op.kind != CpuOpKind::External || !op.node || op.outputs.empty() || op.outputs[0] < 0) return 0;
  const std::string type = op.node->qualified_op();
  auto shape_of = [&](std::size_t i) -> const Shape* {
    return i < op.inputs.size() && op.inputs[i] >= 0 ? &m.slots[static_cast<std::size_t>(op.inputs[i])].shape
                                                     : nullptr;
  };
  const Shape& y = m.slots[static_cast<std::size_t>(op.outputs[0])].shape;
  std::uint64_t out = 1;
  for (auto d : y) out *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 0));
  std::size_t w_index = 0;
  if (type == "Conv" || type == "ConvInteger") w_index = 1;
  else if (type == "QLinearConv") w_index = 3;
  if (w_index) {
    const Shape* w = shape_of(w_index);
    if (!w || w->size() < 2) return 0;
    std::uint64_t k = 1;
    for (std::size_t i = 1; i < w->size(); ++i) k *= static_cast<std::uint64_t>(std::max<std::int64_t>((*w)[i], 0));
    return out * k;
  }
  if (type == "MatMul" || type == "MatMulInteger" || type == "QLinearMatMul" || type == "Gemm") {
    const Shape* a = shape_of(0);
    if (!a || a->empty()) return 0;
    const bool trans_a = type == "Gemm" && op.node->attr_int("transA", 0) != 0;
    const std::int64_t k = trans_a && a->size() >= 2 ? (*a)[a->size() - 2] : a->back();
    return out * static_cast<std::uint64_t>(std::max<std::int64_t>(k, 0));
  }
  return 0;
}

}  // namespace

double PlacementSummary::npu_mac_share_percent() const noexcept {
  const double total = static_cast<double>(npu_macs) + static_cast<double>(host_macs);
  return total > 0 ? 100.0 * static_cast<double>(npu_macs) / total : 100.0;
}

std::string PlacementSummary::to_string() const {
  std::string out = fmt::format("NPU share of MACs: {:.2f}% (NPU {} MACs, host {} MACs)\n", npu_mac_share_percent(),
                                npu_macs, host_macs);
  out += fmt::format("NPU programs: {}\nhost steps: {}\n", npu_programs, host_steps.size());
  for (const auto& s : host_steps) out += "  " + one_line(s) + "\n";  // node names from the model file
  return out;
}

PlacementSummary summarize_placement(const CompiledModel& m) {
  PlacementSummary s;
  s.npu_programs = m.npu_calls.size();
  for (const auto& call : m.npu_calls) {
    for (const auto& k : call.program->kernels) s.npu_macs += isa::kernel_macs(k);
  }
  auto slot_name = [&](const std::vector<int>& slots) {
    return slots.empty() || slots[0] < 0 ? std::string("?") : m.slots[static_cast<std::size_t>(slots[0])].name;
  };
  for (const auto& step : m.steps) {
    if (step.kind != Step::Kind::Cpu) continue;
    const CpuOp& op = step.cpu;
    s.host_macs += host_op_macs(m, op);
    std::string reason;
    switch (op.kind) {
      case CpuOpKind::Quantize: reason = "QuantizeLinear of a float input (the runtime's Quantize step)"; break;
      case CpuOpKind::Dequantize: reason = "DequantizeLinear to a float output (the runtime's Dequantize step)"; break;
      case CpuOpKind::Lower: reason = "NPU input layout (see the notes)"; break;
      case CpuOpKind::Unlower: reason = "NPU output layout (see the notes)"; break;
      case CpuOpKind::External: reason = "no NPU kernel: host operator library"; break;
    }
    const std::string what = op.kind == CpuOpKind::External && op.node ? op.node->qualified_op()
                                                                       : std::string(cpu_op_name(op.kind));
    const std::string subject = op.node_name.empty() ? slot_name(op.inputs) : op.node_name;
    s.host_steps.push_back(fmt::format("{} '{}': {}", what, subject, reason));
  }
  return s;
}

}  // namespace furiosa::program
