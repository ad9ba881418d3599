// The five reports computed from recorded spans (or a record table's rows), as in FuriosaAI's
// profiler: summary, inferences, NPU executions, NPU operators, external operators. Each is a
// vector of rows plus a text rendering; print_report() selects them by name for the CLIs.
//
// The functions take spans in any order and on any time base (durations are differences); rows
// come in span order (start time) unless said otherwise.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/profiler/record_table.h"
#include "furiosa/profiler/span.h"

namespace furiosa::profiler {

// ---- summary -------------------------------------------------------------------------------

/// Latency distribution of the Inference spans, in ns. Percentiles (median = 50th) by linear
/// interpolation between the closest ranks, rounded down to whole ns: percentile() in
/// statistics.h, the method of FuriosaAI's profiler (numpy/pandas default quantile).
struct InferenceSummary {
  std::uint64_t count = 0;
  std::int64_t min_ns = 0, max_ns = 0;
  double mean_ns = 0;
  std::int64_t median_ns = 0, p90_ns = 0, p95_ns = 0, p97_ns = 0, p99_ns = 0, p999_ns = 0;
};

/// Summary of the spans named "Inference" among `spans`.
InferenceSummary summarize_inferences(const std::vector<SpanRecord>& spans);

/// The summary as FuriosaAI's `print_summary()` lays it out: a 48-'=' rule, the title
/// "  Inference Results Summary", a rule, then one "<label padded to 32> : <value>" line each:
/// `Inference counts`, `Min latency (ns)`, `Max latency (ns)`, `Mean latency (ns)`,
/// `Median latency (ns)`, `90.0 percentile latency (ns)`, 95.0, 97.0, 99.0 and
/// `99.9 percentile latency (ns)`. Values are whole ns; the mean is rounded down like the
/// percentiles (the SDK prints 386095 for a mean of 386095.5). Without inferences only the
/// count line follows the title.
std::string format_summary(const InferenceSummary& summary);

// ---- inferences ----------------------------------------------------------------------------

/// One Inference span.
struct InferenceRow {
  TraceId trace_id;
  std::uint64_t span_id = 0;
  std::uint64_t thread_id = 0;
  std::int64_t dur_ns = 0;
};

/// One row per span named "Inference".
std::vector<InferenceRow> inference_report(const std::vector<SpanRecord>& spans);
std::string format_inferences(const std::vector<InferenceRow>& rows);

// ---- NPU executions ------------------------------------------------------------------------

/// One device execution (an NPU span named "Execution").
///   NPU Total  = Store end - Load start of the execution: its window on the device, from the
///                Load and Store spans with the same trace_id, card, pe_index and
///                execution_index (the Execution's own start/end when one is missing);
///   NPU Run    = sum of the durations of its kernel spans (NPU spans whose parent is it);
///   NPU IoWait = Total - Run, signed (negative if kernels were to add up to more than Total).
struct NpuExecutionRow {
  TraceId trace_id;
  std::uint64_t span_id = 0;
  std::int32_t pe_index = -1;
  std::int64_t execution_index = -1;
  std::int64_t total_ns = 0;
  std::int64_t run_ns = 0;
  std::int64_t iowait_ns = 0;
};

std::vector<NpuExecutionRow> npu_execution_report(const std::vector<SpanRecord>& spans);
std::string format_npu_executions(const std::vector<NpuExecutionRow>& rows);

// ---- NPU operators -------------------------------------------------------------------------

/// The kernels of one name: NPU spans other than Execution, Load and Store (LowLevelConv2d,
/// ...), grouped by name.
struct NpuOperatorRow {
  std::string name;
  double average_ns = 0;
  std::uint64_t count = 0;
};

/// One row per kernel name, by decreasing average elapsed time (then by name).
std::vector<NpuOperatorRow> npu_operator_report(const std::vector<SpanRecord>& spans);
std::string format_npu_operators(const std::vector<NpuOperatorRow>& rows);

// ---- external operators --------------------------------------------------------------------

/// One execution of a host (CPU) operator of the model, as FuriosaAI's
/// `print_external_operators()` lists them: every Runtime span with operator_index >= 0, i.e.
/// the runtime's Quantize, Lower, Unlower, Dequantize and every fallback (external) operator,
/// named by its ONNX op type. operator_index numbers the model's host operators 0..N-1 in
/// execution order (set by the runtime, see docs/profiler.md).
struct ExternalOperatorRow {
  TraceId trace_id;
  std::uint64_t span_id = 0;
  std::uint64_t thread_id = 0;
  std::string name;
  std::int32_t operator_index = -1;
  std::int64_t dur_ns = 0;
};

/// One row per host operator execution among `spans`, in span order (start time).
std::vector<ExternalOperatorRow> external_operator_report(const std::vector<SpanRecord>& spans);
/// Table with the columns trace_id, span_id, thread.id, name, operator_index, dur (ns);
/// "(no external operators)" when there are none.
std::string format_external_operators(const std::vector<ExternalOperatorRow>& rows);

// ---- selection by name ---------------------------------------------------------------------

enum class ReportKind { All, Summary, Inferences, NpuExecutions, NpuOperators, ExternalOperators };

/// The accepted names, for help texts: "all|summary|inferences|npu-executions|npu-operators|
/// external-operators".
inline constexpr std::string_view kReportNames =
    "all|summary|inferences|npu-executions|npu-operators|external-operators";

/// The report named `name` (one of kReportNames), or nullopt.
std::optional<ReportKind> parse_report_kind(std::string_view name) noexcept;
/// The name of `kind` as in kReportNames.
std::string_view report_kind_name(ReportKind kind) noexcept;

/// The text of report `kind` of `spans`; All is every report, each under a "== <name> =="
/// heading.
std::string format_report(ReportKind kind, const std::vector<SpanRecord>& spans);
/// Writes format_report(kind, spans) to `out`.
void print_report(std::ostream& out, ReportKind kind, const std::vector<SpanRecord>& spans);
/// Same, selected by name; throws Error(InvalidArgument) listing kReportNames for an unknown one.
void print_report(std::ostream& out, std::string_view name, const std::vector<SpanRecord>& spans);
/// Same, for a record table's rows.
void print_report(std::ostream& out, std::string_view name, const RecordTable& table);

}  // namespace furiosa::profiler
