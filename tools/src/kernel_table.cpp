// furiosa-run --verbose's table of device kernels (kernel_table.h).
#include "kernel_table.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <string_view>

namespace furiosa::tools {

namespace {

std::string attribute(const profiler::SpanRecord& span, std::string_view key) {
  for (const auto& [k, v] : span.attributes) {
    if (k == key) return v;
  }
  return {};
}

std::int64_t attribute_int(const profiler::SpanRecord& span, std::string_view key) {
  const std::string v = attribute(span, key);
  try {
    return v.empty() ? 0 : std::stoll(v);
  } catch (const std::exception&) {
    return 0;
  }
}

double mb(std::int64_t bytes) { return static_cast<double>(bytes) / 1e6; }

}  // namespace

std::string format_device_kernels(const std::vector<profiler::SpanRecord>& spans) {
  // The first Execution of each program; a program is told apart by its kernels' operator indices.
  std::map<std::uint64_t, std::vector<const profiler::SpanRecord*>>
      kernels_of;  // Execution id -> kernels
  std::vector<std::uint64_t> executions;
  for (const auto& s : spans) {
    if (s.cat == profiler::Category::NPU && s.name == "Execution") executions.push_back(s.span_id);
  }
  const std::set<std::uint64_t> execution_ids(executions.begin(), executions.end());
  for (const auto& s : spans) {
    if (s.cat == profiler::Category::NPU && execution_ids.count(s.parent_span_id) != 0) {
      kernels_of[s.parent_span_id].push_back(&s);
    }
  }
  std::string out;
  std::set<std::vector<std::int32_t>> seen_programs;
  int program = 0;
  for (std::uint64_t id : executions) {
    const auto it = kernels_of.find(id);
    if (it == kernels_of.end()) continue;
    std::vector<std::int32_t> signature;
    for (const auto* k : it->second) signature.push_back(k->operator_index);
    if (!seen_programs.insert(signature).second) continue;
    std::map<std::string, int> per_bound;
    std::int64_t cycles = 0, dram = 0, spill = 0, weight_load = 0;
    std::string rows;
    for (const auto* k : it->second) {
      const std::string bound = attribute(*k, "bound");
      const std::int64_t d = attribute_int(*k, "dram_bytes"), sp = attribute_int(*k, "spill_bytes");
      const std::int64_t w = attribute_int(*k, "weight_load_cycles");
      ++per_bound[bound.empty() ? "?" : bound];
      cycles += std::max<std::int64_t>(k->cycles, 0);
      dram += d;
      spill += sp;
      weight_load += w;
      rows += fmt::format("  {:>4} {:<28} {:>8} {:>10} {:>11} {:<8} {:>9.2f} {:>9.2f}\n",
                          k->instruction_index, k->name, k->operator_index, k->cycles, w,
                          bound.empty() ? "-" : bound, mb(d), mb(sp));
    }
    out += fmt::format(
        "device kernels of program {} (timing model, one execution): {} kernels, {} cycles ({} of "
        "them weight loads); bound: compute {}, sram {}, dram {}; DRAM traffic {:.2f} MB per "
        "execution, of which {:.2f} MB spilled activations\n",
        program++, it->second.size(), cycles, weight_load, per_bound["compute"], per_bound["sram"],
        per_bound["dram"], mb(dram), mb(spill));
    out += fmt::format("  {:>4} {:<28} {:>8} {:>10} {:>11} {:<8} {:>9} {:>9}\n", "idx", "kernel",
                       "operator", "cycles", "weight load", "bound", "dram MB", "spill MB");
    out += rows;
  }
  if (out.empty()) {
    return "device kernels: none recorded (no NPU kernel spans: the trace categories leave them "
           "out)\n";
  }
  return out;
}

}  // namespace furiosa::tools
