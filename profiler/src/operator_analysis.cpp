// Operator analysis of a trace's NPU kernels (operator_analysis.h).
#include "furiosa/profiler/operator_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace furiosa::profiler {

namespace {

bool is_kernel(const SpanRecord& s) { return s.cat == Category::NPU && s.instruction_index >= 0; }

std::int64_t int_attribute(const SpanRecord& s, std::string_view key) {
  for (const auto& [k, v] : s.attributes) {
    if (k != key) continue;
    std::int64_t value = 0;
    for (char c : v) {
      if (c < '0' || c > '9' || value > (std::numeric_limits<std::int64_t>::max() - 9) / 10)
        return 0;  // not a count
      value = value * 10 + (c - '0');
    }
    return value;
  }
  return 0;
}

std::string string_attribute(const SpanRecord& s, std::string_view key) {
  for (const auto& [k, v] : s.attributes) {
    if (k == key) return v;
  }
  return {};
}

double metric(const OperatorStat& s, OperatorOrder order) {
  switch (order) {
    case OperatorOrder::Time: return static_cast<double>(s.self_ns);
    case OperatorOrder::Memory:
      return s.calls > 0 ? static_cast<double>(s.bytes) / static_cast<double>(s.calls) : 0;
    case OperatorOrder::Flops: return s.flops_per_s();
  }
  return 0;
}

}  // namespace

std::optional<OperatorOrder> parse_operator_order(std::string_view name) noexcept {
  if (name == "time") return OperatorOrder::Time;
  if (name == "memory") return OperatorOrder::Memory;
  if (name == "flops") return OperatorOrder::Flops;
  return std::nullopt;
}

std::int64_t total_kernel_ns(const std::vector<SpanRecord>& spans) {
  std::int64_t total = 0;
  for (const auto& s : spans) {
    if (is_kernel(s)) total += std::max<std::int64_t>(s.dur_ns(), 0);
  }
  return total;
}

std::vector<OperatorStat> analyze_operators(const std::vector<SpanRecord>& spans,
                                            const OperatorAnalysisOptions& options) {
  std::map<std::tuple<std::string, std::int32_t, std::int32_t>, OperatorStat> by_key;
  for (const auto& s : spans) {
    if (!is_kernel(s)) continue;
    const std::int32_t op = options.by_type ? -1 : s.operator_index;
    const std::int32_t instr = options.by_type ? -1 : s.instruction_index;
    OperatorStat& st = by_key[{s.name, op, instr}];
    st.name = s.name;
    st.operator_index = op;
    st.instruction_index = instr;
    ++st.calls;
    st.self_ns += std::max<std::int64_t>(s.dur_ns(), 0);
    st.macs += int_attribute(s, "macs");
    st.bytes += int_attribute(s, "bytes");
    st.dram_bytes += int_attribute(s, "dram_bytes");
    st.spill_bytes += int_attribute(s, "spill_bytes");
    if (std::string bound = string_attribute(s, "bound"); !bound.empty() && !options.by_type)
      st.bound = std::move(bound);
  }
  std::vector<OperatorStat> rows;
  for (auto& [key, st] : by_key) {
    if (st.mean_ns() >= options.min_mean_us * 1e3) rows.push_back(std::move(st));
  }
  std::stable_sort(rows.begin(), rows.end(), [&](const OperatorStat& a, const OperatorStat& b) {
    return metric(a, options.order) > metric(b, options.order);
  });
  if (options.top > 0 && rows.size() > options.top) rows.resize(options.top);
  return rows;
}

std::string format_operator_analysis(const std::vector<OperatorStat>& rows,
                                     std::int64_t total_kernel_ns) {
  if (rows.empty())
    return "operator analysis: no NPU kernel spans (record the npu-operators category)\n";
  std::string out = fmt::format(
      "{:>4}  {:<34} {:>6} {:>10} {:>10} {:>6} {:>6} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {}\n",
      "rank", "operator", "calls", "total ms", "mean us", "%", "cum %", "GMAC/call", "GFLOP/s",
      "MB/call", "GB/s", "DRAM MB", "spill MB", "bound");
  const double total = static_cast<double>(std::max<std::int64_t>(total_kernel_ns, 1));
  double cumulative = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const OperatorStat& r = rows[i];
    const double calls = static_cast<double>(std::max<std::int64_t>(r.calls, 1));
    const double share = 100.0 * static_cast<double>(r.self_ns) / total;
    cumulative += share;
    const std::string label =
        r.operator_index >= 0 || r.instruction_index >= 0
            ? fmt::format("{} (op {}, #{})", r.name, r.operator_index, r.instruction_index)
            : r.name;
    out += fmt::format(
        "{:>4}  {:<34} {:>6} {:>10.3f} {:>10.1f} {:>6.1f} {:>6.1f} {:>9.3f} {:>9.1f} {:>8.2f} "
        "{:>8.1f} "
        "{:>8.2f} {:>8.2f} {}\n",
        i + 1, label, r.calls, static_cast<double>(r.self_ns) / 1e6, r.mean_ns() / 1e3, share,
        cumulative, static_cast<double>(r.macs) / calls / 1e9, r.flops_per_s() / 1e9,
        static_cast<double>(r.bytes) / calls / 1e6, r.bytes_per_s() / 1e9,
        static_cast<double>(r.dram_bytes) / calls / 1e6,
        static_cast<double>(r.spill_bytes) / calls / 1e6, r.bound.empty() ? "-" : r.bound);
  }
  return out;
}

}  // namespace furiosa::profiler
