// Operator analysis of a trace's NPU kernels (operator_analysis.h).
#include "furiosa/profiler/operator_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "csv_field.h"

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

/// `name` is the kernel type `type` names: equal, or equal once "LowLevel" is put in front.
bool type_matches(std::string_view name, std::string_view type) {
  constexpr std::string_view kPrefix = "LowLevel";
  return name == type ||
         (name.size() == kPrefix.size() + type.size() &&
          name.substr(0, kPrefix.size()) == kPrefix && name.substr(kPrefix.size()) == type);
}

double metric(const OperatorStat& s, const OperatorAnalysisOptions& o) {
  switch (o.order) {
    case OperatorOrder::Time: return s.time(o.aggregate);
    case OperatorOrder::Cumulative: return static_cast<double>(s.self_ns);
    case OperatorOrder::Flops: return s.flops_per_s();
    case OperatorOrder::Memory: return s.bytes_per_call();
    case OperatorOrder::Bandwidth: return s.bytes_per_s();
  }
  return 0;
}

std::string_view aggregate_name(TimeAggregate a) {
  switch (a) {
    case TimeAggregate::Sum: return "sum";
    case TimeAggregate::Mean: return "mean";
    case TimeAggregate::Max: return "max";
    case TimeAggregate::Min: return "min";
    case TimeAggregate::Count: return "count";
  }
  return "";
}

/// The figures of one row that every format prints.
struct RowFigures {
  double time = 0;  // aggregated (ns, or a count)
  double share = 0;
  double cumulative_ns = 0;
  double cumulative_share = 0;
  double per_call(std::int64_t total, std::int64_t calls) const {
    return static_cast<double>(total) / static_cast<double>(std::max<std::int64_t>(calls, 1));
  }
};

std::vector<RowFigures> figures(const std::vector<OperatorStat>& rows, std::int64_t total_ns,
                                TimeAggregate aggregate) {
  std::vector<RowFigures> out(rows.size());
  const double total = static_cast<double>(std::max<std::int64_t>(total_ns, 1));
  double cumulative = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    cumulative += static_cast<double>(rows[i].self_ns);
    out[i].time = rows[i].time(aggregate);
    out[i].share = static_cast<double>(rows[i].self_ns) / total;
    out[i].cumulative_ns = cumulative;
    out[i].cumulative_share = cumulative / total;
  }
  return out;
}

std::string label(const OperatorStat& r) {
  return r.operator_index >= 0 || r.instruction_index >= 0
             ? fmt::format("{} (op {}, #{})", r.name, r.operator_index, r.instruction_index)
             : r.name;
}

std::string format_text(const std::vector<OperatorStat>& rows, std::int64_t total_ns,
                        TimeAggregate aggregate) {
  const auto fig = figures(rows, total_ns, aggregate);
  const bool count = aggregate == TimeAggregate::Count;
  const std::string time_header =
      count ? std::string("count") : fmt::format("{} us", aggregate_name(aggregate));
  std::string out = fmt::format(
      "{:>4}  {:<34} {:>6} {:>11} {:>6} {:>10} {:>6} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:<7} "
      "{} -> {}\n",
      "rank", "operator", "calls", time_header, "%", "cum ms", "cum %", "GFLOP/c", "GFLOP/s",
      "MB/call", "GB/s", "DRAM MB", "spill MB", "bound", "in_shapes", "out_shapes");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const OperatorStat& r = rows[i];
    out += fmt::format(
        "{:>4}  {:<34} {:>6} {:>11.1f} {:>6.1f} {:>10.3f} {:>6.1f} {:>9.3f} {:>9.1f} {:>8.2f} "
        "{:>8.1f} {:>8.2f} {:>8.2f} {:<7} {} -> {}\n",
        i + 1, label(r), r.calls, count ? fig[i].time : fig[i].time / 1e3, 100 * fig[i].share,
        fig[i].cumulative_ns / 1e6, 100 * fig[i].cumulative_share, r.flops_per_call() / 1e9,
        r.flops_per_s() / 1e9, r.bytes_per_call() / 1e6, r.bytes_per_s() / 1e9,
        fig[i].per_call(r.dram_bytes, r.calls) / 1e6, fig[i].per_call(r.spill_bytes, r.calls) / 1e6,
        r.bound.empty() ? "-" : r.bound, r.in_shapes.empty() ? "-" : r.in_shapes,
        r.out_shapes.empty() ? "-" : r.out_shapes);
  }
  return out;
}

nlohmann::ordered_json row_json(const OperatorStat& r, const RowFigures& f, std::size_t rank) {
  nlohmann::ordered_json j;
  j["rank"] = rank;
  j["name"] = r.name;
  j["operator_index"] = r.operator_index;
  j["instruction_index"] = r.instruction_index;
  j["pe_index"] = r.pe_index;
  j["calls"] = r.calls;
  j["time_ns"] = f.time;
  j["total_ns"] = r.self_ns;
  j["mean_ns"] = r.mean_ns();
  j["min_ns"] = r.min_ns;
  j["max_ns"] = r.max_ns;
  j["share"] = f.share;
  j["cumulative_ns"] = f.cumulative_ns;
  j["cumulative_share"] = f.cumulative_share;
  j["flops"] = r.flops_per_call();
  j["flops_per_s"] = r.flops_per_s();
  j["bytes"] = r.bytes_per_call();
  j["bytes_per_s"] = r.bytes_per_s();
  j["dram_bytes"] = f.per_call(r.dram_bytes, r.calls);
  j["spill_bytes"] = f.per_call(r.spill_bytes, r.calls);
  j["bound"] = r.bound;
  j["in_shapes"] = r.in_shapes;
  j["out_shapes"] = r.out_shapes;
  return j;
}

}  // namespace

double OperatorStat::time(TimeAggregate aggregate) const noexcept {
  switch (aggregate) {
    case TimeAggregate::Sum: return static_cast<double>(self_ns);
    case TimeAggregate::Mean: return mean_ns();
    case TimeAggregate::Max: return static_cast<double>(max_ns);
    case TimeAggregate::Min: return static_cast<double>(min_ns);
    case TimeAggregate::Count: return static_cast<double>(calls);
  }
  return 0;
}

std::optional<OperatorOrder> parse_operator_order(std::string_view name) noexcept {
  if (name == "time") return OperatorOrder::Time;
  if (name == "cumulative") return OperatorOrder::Cumulative;
  if (name == "flops") return OperatorOrder::Flops;
  if (name == "memory") return OperatorOrder::Memory;
  if (name == "bandwidth") return OperatorOrder::Bandwidth;
  return std::nullopt;
}

std::optional<OperatorGrouping> parse_operator_grouping(std::string_view name) noexcept {
  if (name == "none") return OperatorGrouping::None;
  if (name == "name") return OperatorGrouping::Name;
  if (name == "type") return OperatorGrouping::Type;
  return std::nullopt;
}

std::optional<TimeAggregate> parse_time_aggregate(std::string_view name) noexcept {
  for (TimeAggregate a : {TimeAggregate::Sum, TimeAggregate::Mean, TimeAggregate::Max,
                          TimeAggregate::Min, TimeAggregate::Count}) {
    if (name == aggregate_name(a)) return a;
  }
  return std::nullopt;
}

std::optional<AnalysisFormat> parse_analysis_format(std::string_view name) noexcept {
  if (name == "text") return AnalysisFormat::Text;
  if (name == "csv") return AnalysisFormat::Csv;
  if (name == "json") return AnalysisFormat::Json;
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
  // Key: name, operator, instruction, and for one row per call the span's position.
  using Key = std::tuple<std::string, std::int32_t, std::int32_t, std::size_t>;
  std::map<Key, OperatorStat> by_key;
  const bool by_type = options.grouping == OperatorGrouping::Type;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const SpanRecord& s = spans[i];
    if (!is_kernel(s)) continue;
    if (!options.type.empty() && !type_matches(s.name, options.type)) continue;
    if (options.pe >= 0 && s.pe_index != options.pe) continue;
    const std::int32_t op = by_type ? -1 : s.operator_index;
    const std::int32_t instr = by_type ? -1 : s.instruction_index;
    const std::size_t call = options.grouping == OperatorGrouping::None ? i : 0;
    OperatorStat& st = by_key[{s.name, op, instr, call}];
    const std::int64_t dur = std::max<std::int64_t>(s.dur_ns(), 0);
    if (st.calls == 0) {
      st.name = s.name;
      st.operator_index = op;
      st.instruction_index = instr;
      st.pe_index = s.pe_index;
      st.min_ns = st.max_ns = dur;
    } else if (st.pe_index != s.pe_index) {
      st.pe_index = -1;
    }
    ++st.calls;
    st.self_ns += dur;
    st.min_ns = std::min(st.min_ns, dur);
    st.max_ns = std::max(st.max_ns, dur);
    st.macs += int_attribute(s, "macs");
    st.bytes += int_attribute(s, "bytes");
    st.dram_bytes += int_attribute(s, "dram_bytes");
    st.spill_bytes += int_attribute(s, "spill_bytes");
    if (by_type) continue;
    if (std::string bound = string_attribute(s, "bound"); !bound.empty())
      st.bound = std::move(bound);
    if (std::string in = string_attribute(s, "in_shapes"); !in.empty())
      st.in_shapes = std::move(in);
    if (std::string out = string_attribute(s, "out_shapes"); !out.empty())
      st.out_shapes = std::move(out);
  }
  std::vector<OperatorStat> rows;
  for (auto& entry : by_key) {
    if (entry.second.mean_ns() >= options.min_time_s * 1e9) rows.push_back(std::move(entry.second));
  }
  std::stable_sort(rows.begin(), rows.end(), [&](const OperatorStat& a, const OperatorStat& b) {
    return metric(a, options) > metric(b, options);
  });
  if (options.top > 0 && rows.size() > options.top) rows.resize(options.top);
  return rows;
}

std::string format_operator_analysis(const std::vector<OperatorStat>& rows,
                                     std::int64_t total_kernel_ns, AnalysisFormat format,
                                     TimeAggregate aggregate) {
  if (format == AnalysisFormat::Text) {
    if (rows.empty())
      return "operator analysis: no NPU kernel spans (record the npu-operators category)\n";
    return format_text(rows, total_kernel_ns, aggregate);
  }
  const auto fig = figures(rows, total_kernel_ns, aggregate);
  if (format == AnalysisFormat::Json) {
    nlohmann::ordered_json array = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < rows.size(); ++i) array.push_back(row_json(rows[i], fig[i], i + 1));
    return array.dump(1) + "\n";
  }
  // CSV: the keys of a row are the header line.
  std::string out;
  const nlohmann::ordered_json header = row_json(OperatorStat{}, RowFigures{}, 0);
  for (const auto& item : header.items()) {
    if (!out.empty()) out += ',';
    out += item.key();
  }
  out += '\n';
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string line;
    const nlohmann::ordered_json row = row_json(rows[i], fig[i], i + 1);
    for (const auto& item : row.items()) {
      if (item.key() != "rank") line += ',';
      const auto& v = item.value();
      detail::append_csv_field(line, v.is_string() ? v.get<std::string>() : v.dump());
    }
    out += line + '\n';
  }
  return out;
}

}  // namespace furiosa::profiler
