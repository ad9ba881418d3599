// The five reports: summary, inferences, NPU executions, NPU operators, external operators.
#include "furiosa/profiler/report.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <numeric>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "furiosa/core/error.h"
#include "furiosa/profiler/statistics.h"

#include "analysis.h"
#include "span_order.h"

namespace furiosa::profiler {
namespace {

/// Indices of `spans` in span order (start time, parents first).
std::vector<std::size_t> in_span_order(const std::vector<SpanRecord>& spans) {
  std::vector<std::size_t> order(spans.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&spans](std::size_t a, std::size_t b) {
    return detail::span_order_less(spans[a], spans[b]);
  });
  return order;
}

std::string hex16(std::uint64_t v) { return fmt::format("{:016x}", v); }

/// A text table: a header row, then rows; numeric columns right-aligned.
class TextTable {
 public:
  TextTable(std::vector<std::string> header, std::vector<bool> numeric)
      : header_(std::move(header)), numeric_(std::move(numeric)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  std::string render() const {
    std::vector<std::size_t> width(header_.size());
    for (std::size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
    for (const auto& row : rows_) {
      for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    std::string out;
    auto line = [&](const std::vector<std::string>& cells) {
      std::string text;
      for (std::size_t c = 0; c < cells.size(); ++c) {
        if (c > 0) text += "  ";
        if (numeric_[c]) {
          fmt::format_to(std::back_inserter(text), "{:>{}}", cells[c], width[c]);
        } else if (c + 1 < cells.size()) {
          fmt::format_to(std::back_inserter(text), "{:<{}}", cells[c], width[c]);
        } else {
          text += cells[c];  // no trailing blanks
        }
      }
      out += text;
      out += '\n';
    };
    line(header_);
    for (const auto& row : rows_) line(row);
    return out;
  }

 private:
  std::vector<std::string> header_;
  std::vector<bool> numeric_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace

// ---- summary -------------------------------------------------------------------------------

InferenceSummary summarize_inferences(const std::vector<SpanRecord>& spans) {
  std::vector<std::int64_t> durations;
  for (const SpanRecord& span : spans) {
    if (span.name == detail::kInferenceSpan) durations.push_back(span.dur_ns());
  }
  InferenceSummary summary;
  if (durations.empty()) return summary;
  std::sort(durations.begin(), durations.end());

  summary.count = durations.size();
  summary.min_ns = durations.front();
  summary.max_ns = durations.back();
  long double sum = 0;  // exact for any realistic count of ns durations
  for (const std::int64_t d : durations) sum += static_cast<long double>(d);
  summary.mean_ns = static_cast<double>(sum / static_cast<long double>(durations.size()));
  summary.median_ns = percentile<std::int64_t>(durations, 500);
  summary.p90_ns = percentile<std::int64_t>(durations, 900);
  summary.p95_ns = percentile<std::int64_t>(durations, 950);
  summary.p97_ns = percentile<std::int64_t>(durations, 970);
  summary.p99_ns = percentile<std::int64_t>(durations, 990);
  summary.p999_ns = percentile<std::int64_t>(durations, 999);
  return summary;
}

std::string format_summary(const InferenceSummary& summary) {
  constexpr std::string_view kRule = "================================================\n";
  std::string out;
  out += kRule;
  out += "  Inference Results Summary\n";
  out += kRule;
  const auto line = [&out](std::string_view label, auto value) {
    fmt::format_to(std::back_inserter(out), "{:<32}: {}\n", label, value);
  };
  line("Inference counts", summary.count);
  if (summary.count == 0) return out;  // no latencies to show
  line("Min latency (ns)", summary.min_ns);
  line("Max latency (ns)", summary.max_ns);
  // Rounded down to whole ns like the percentiles (durations are >= 0 in practice; a negative
  // mean is truncated toward zero).
  line("Mean latency (ns)", static_cast<std::int64_t>(summary.mean_ns));
  line("Median latency (ns)", summary.median_ns);
  line("90.0 percentile latency (ns)", summary.p90_ns);
  line("95.0 percentile latency (ns)", summary.p95_ns);
  line("97.0 percentile latency (ns)", summary.p97_ns);
  line("99.0 percentile latency (ns)", summary.p99_ns);
  line("99.9 percentile latency (ns)", summary.p999_ns);
  return out;
}

// ---- inferences ----------------------------------------------------------------------------

std::vector<InferenceRow> inference_report(const std::vector<SpanRecord>& spans) {
  std::vector<InferenceRow> rows;
  for (const std::size_t i : in_span_order(spans)) {
    const SpanRecord& s = spans[i];
    if (s.name != detail::kInferenceSpan) continue;
    rows.push_back(InferenceRow{s.trace_id, s.span_id, s.thread_id, s.dur_ns()});
  }
  return rows;
}

std::string format_inferences(const std::vector<InferenceRow>& rows) {
  if (rows.empty()) return "(no inferences)\n";
  TextTable table({"trace_id", "span_id", "thread.id", "dur"}, {false, false, true, true});
  for (const InferenceRow& r : rows) {
    table.add({r.trace_id.to_hex(), hex16(r.span_id), fmt::format("{}", r.thread_id),
               fmt::format("{}", r.dur_ns)});
  }
  return table.render();
}

// ---- NPU executions ------------------------------------------------------------------------

std::vector<NpuExecutionRow> npu_execution_report(const std::vector<SpanRecord>& spans) {
  std::vector<std::size_t> order = in_span_order(spans);
  std::vector<SpanRecord> sorted;
  sorted.reserve(spans.size());
  for (const std::size_t i : order) sorted.push_back(spans[i]);
  std::vector<NpuExecutionRow> rows;
  for (const detail::ExecutionWindow& w : detail::execution_windows(sorted)) {
    const SpanRecord& e = sorted[w.execution];
    rows.push_back(NpuExecutionRow{e.trace_id, e.span_id, e.pe_index, e.execution_index,
                                   w.total_ns, w.run_ns, w.iowait_ns});
  }
  return rows;
}

std::string format_npu_executions(const std::vector<NpuExecutionRow>& rows) {
  if (rows.empty()) return "(no NPU executions)\n";
  TextTable table({"trace_id", "span_id", "pe_index", "execution_index", "NPU Total", "NPU Run",
                   "NPU IoWait"},
                  {false, false, true, true, true, true, true});
  for (const NpuExecutionRow& r : rows) {
    table.add({r.trace_id.to_hex(), hex16(r.span_id),
               r.pe_index >= 0 ? fmt::format("{}", r.pe_index) : std::string(),
               r.execution_index >= 0 ? fmt::format("{}", r.execution_index) : std::string(),
               fmt::format("{}", r.total_ns), fmt::format("{}", r.run_ns),
               fmt::format("{}", r.iowait_ns)});
  }
  return table.render();
}

// ---- NPU operators -------------------------------------------------------------------------

std::vector<NpuOperatorRow> npu_operator_report(const std::vector<SpanRecord>& spans) {
  struct Sum {
    long double total = 0;
    std::uint64_t count = 0;
  };
  std::map<std::string, Sum, std::less<>> by_name;
  for (const SpanRecord& s : spans) {
    if (s.cat != Category::NPU || s.name == detail::kExecutionSpan ||
        s.name == detail::kLoadSpan || s.name == detail::kStoreSpan || s.name == detail::kOverrunSpan) {
      continue;
    }
    Sum& sum = by_name[s.name];
    sum.total += static_cast<long double>(s.dur_ns());
    ++sum.count;
  }
  std::vector<NpuOperatorRow> rows;
  for (const auto& [name, sum] : by_name) {
    rows.push_back(NpuOperatorRow{
        name, static_cast<double>(sum.total / static_cast<long double>(sum.count)), sum.count});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const NpuOperatorRow& a, const NpuOperatorRow& b) {
    return a.average_ns > b.average_ns;  // ties keep name order
  });
  return rows;
}

std::string format_npu_operators(const std::vector<NpuOperatorRow>& rows) {
  if (rows.empty()) return "(no NPU operators)\n";
  TextTable table({"name", "average elapsed (ns)", "count"}, {false, true, true});
  for (const NpuOperatorRow& r : rows) {
    table.add({r.name, fmt::format("{:.1f}", r.average_ns), fmt::format("{}", r.count)});
  }
  return table.render();
}

// ---- external operators --------------------------------------------------------------------

std::vector<ExternalOperatorRow> external_operator_report(const std::vector<SpanRecord>& spans) {
  std::vector<ExternalOperatorRow> rows;
  for (const std::size_t i : in_span_order(spans)) {
    const SpanRecord& s = spans[i];
    if (s.cat != Category::Runtime || s.operator_index < 0) continue;
    rows.push_back(
        ExternalOperatorRow{s.trace_id, s.span_id, s.thread_id, s.name, s.operator_index,
                            s.dur_ns()});
  }
  return rows;
}

std::string format_external_operators(const std::vector<ExternalOperatorRow>& rows) {
  if (rows.empty()) return "(no external operators)\n";
  TextTable table({"trace_id", "span_id", "thread.id", "name", "operator_index", "dur"},
                  {false, false, true, false, true, true});
  for (const ExternalOperatorRow& r : rows) {
    table.add({r.trace_id.to_hex(), hex16(r.span_id), fmt::format("{}", r.thread_id), r.name,
               fmt::format("{}", r.operator_index), fmt::format("{}", r.dur_ns)});
  }
  return table.render();
}

// ---- selection by name ---------------------------------------------------------------------

namespace {

constexpr std::array<std::pair<ReportKind, std::string_view>, 6> kKinds = {{
    {ReportKind::All, "all"},
    {ReportKind::Summary, "summary"},
    {ReportKind::Inferences, "inferences"},
    {ReportKind::NpuExecutions, "npu-executions"},
    {ReportKind::NpuOperators, "npu-operators"},
    {ReportKind::ExternalOperators, "external-operators"},
}};

}  // namespace

std::optional<ReportKind> parse_report_kind(std::string_view name) noexcept {
  for (const auto& [kind, kind_name] : kKinds) {
    if (kind_name == name) return kind;
  }
  return std::nullopt;
}

std::string_view report_kind_name(ReportKind kind) noexcept {
  for (const auto& [k, name] : kKinds) {
    if (k == kind) return name;
  }
  return "?";
}

std::string format_report(ReportKind kind, const std::vector<SpanRecord>& spans) {
  switch (kind) {
    case ReportKind::Summary:
      return format_summary(summarize_inferences(spans));
    case ReportKind::Inferences:
      return format_inferences(inference_report(spans));
    case ReportKind::NpuExecutions:
      return format_npu_executions(npu_execution_report(spans));
    case ReportKind::NpuOperators:
      return format_npu_operators(npu_operator_report(spans));
    case ReportKind::ExternalOperators:
      return format_external_operators(external_operator_report(spans));
    case ReportKind::All:
      break;
  }
  std::string out;
  for (const auto& [k, name] : kKinds) {
    if (k == ReportKind::All) continue;
    if (!out.empty()) out += '\n';
    out += fmt::format("== {} ==\n", name);
    out += format_report(k, spans);
  }
  return out;
}

void print_report(std::ostream& out, ReportKind kind, const std::vector<SpanRecord>& spans) {
  out << format_report(kind, spans);
}

void print_report(std::ostream& out, std::string_view name, const std::vector<SpanRecord>& spans) {
  const std::optional<ReportKind> kind = parse_report_kind(name);
  if (!kind) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("unknown report '{}' (expected one of {})", name, kReportNames));
  }
  print_report(out, *kind, spans);
}

void print_report(std::ostream& out, std::string_view name, const RecordTable& table) {
  print_report(out, name, table.rows());
}

}  // namespace furiosa::profiler
