// Operator analysis of the NPU kernels in a trace: the questions MegEngine's profiler guide
// answers with its profile_analyze tool (the N slowest operators, the operator types that take
// the most time in total, operators ordered by memory above a minimum time), with device self
// time, cumulative time, operator info, computation (FLOPs = 2 x MACs) and FLOP/s, memory and
// bandwidth, input and output shapes, and the timing model's DRAM traffic and bound. Reads
// kernel spans (category NPU, instruction_index >= 0) and their attributes "macs", "bytes",
// "dram_bytes", "spill_bytes", "bound", "in_shapes" and "out_shapes"
// (profiler/device_execution.h), so a trace read from disk is analysed like a live one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/profiler/span.h"

namespace furiosa::profiler {

/// How the time of a row's calls is reduced to the one figure rows are ranked by
/// (MegEngine's --aggregate): the total, the mean, the longest or shortest call, or the number
/// of calls.
enum class TimeAggregate { Sum, Mean, Max, Min, Count };

/// One row of the analysis: one kernel call, one kernel of a program over every execution, or
/// one kernel type (OperatorGrouping).
struct OperatorStat {
  std::string name;                     ///< kernel span name = its type, e.g. "LowLevelConv2d"
  std::int32_t operator_index = -1;     ///< model node; -1 when grouped by type
  std::int32_t instruction_index = -1;  ///< position in its program; -1 when grouped by type
  std::int32_t pe_index = -1;           ///< first PE of the device; -1 when the rows mix PEs
  std::int64_t calls = 0;               ///< kernel spans counted
  std::int64_t self_ns = 0;             ///< device self time, summed over the calls
  std::int64_t min_ns = 0;              ///< shortest call
  std::int64_t max_ns = 0;              ///< longest call
  std::int64_t macs = 0;                ///< multiply-accumulates, summed over the calls
  std::int64_t bytes = 0;               ///< input + output + weight bytes, summed over the calls
  std::int64_t dram_bytes = 0;          ///< modelled DRAM traffic, summed over the calls
  std::int64_t spill_bytes = 0;         ///< of which spilled activations, summed over the calls
  std::string bound;       ///< the timing model's bound of the last call ("" unknown or by type)
  std::string in_shapes;   ///< e.g. "[1,32,112,112]"; "" unknown or by type
  std::string out_shapes;  ///< likewise for the outputs

  /// Mean device time per call, ns.
  double mean_ns() const noexcept {
    return calls > 0 ? static_cast<double>(self_ns) / static_cast<double>(calls) : 0;
  }
  /// The row's time reduced by `aggregate` (ns; a count for Count).
  double time(TimeAggregate aggregate) const noexcept;
  /// FLOPs per call (2 per MAC).
  double flops_per_call() const noexcept {
    return calls > 0 ? 2.0 * static_cast<double>(macs) / static_cast<double>(calls) : 0;
  }
  /// Bytes per call.
  double bytes_per_call() const noexcept {
    return calls > 0 ? static_cast<double>(bytes) / static_cast<double>(calls) : 0;
  }
  /// FLOP/s over the self time (2 FLOPs per MAC); 0 without time.
  double flops_per_s() const noexcept {
    return self_ns > 0 ? 2.0 * static_cast<double>(macs) / (static_cast<double>(self_ns) * 1e-9)
                       : 0;
  }
  /// Bytes per second over the self time; 0 without time.
  double bytes_per_s() const noexcept {
    return self_ns > 0 ? static_cast<double>(bytes) / (static_cast<double>(self_ns) * 1e-9) : 0;
  }
};

/// What to rank by, descending: the aggregated time (TimeAggregate), the total time of all
/// calls whatever the aggregate (a kernel has no child spans, so its cumulative time is its
/// self time summed), FLOP/s, memory (bytes per call) or bandwidth (bytes per second).
enum class OperatorOrder { Time, Cumulative, Flops, Memory, Bandwidth };

/// One row per kernel call (None), per kernel of a program over every execution (Name: the
/// kernel's name, model node and position), or per kernel type (Type).
enum class OperatorGrouping { None, Name, Type };

/// Output format of format_operator_analysis().
enum class AnalysisFormat { Text, Csv, Json };

/// "time", "cumulative", "flops", "memory", "bandwidth" -> OperatorOrder; nullopt otherwise.
std::optional<OperatorOrder> parse_operator_order(std::string_view name) noexcept;
/// "none", "name", "type" -> OperatorGrouping; nullopt otherwise.
std::optional<OperatorGrouping> parse_operator_grouping(std::string_view name) noexcept;
/// "sum", "mean", "max", "min", "count" -> TimeAggregate; nullopt otherwise.
std::optional<TimeAggregate> parse_time_aggregate(std::string_view name) noexcept;
/// "text", "csv", "json" -> AnalysisFormat; nullopt otherwise.
std::optional<AnalysisFormat> parse_analysis_format(std::string_view name) noexcept;

/// Options of analyze_operators(), after MegEngine's profile_analyze: -t/--top, --order-by,
/// --aggregate-by, --aggregate, --min-time, --type; and --pe.
struct OperatorAnalysisOptions {
  std::size_t top = 10;  ///< rows kept (0: all)
  OperatorOrder order = OperatorOrder::Time;
  OperatorGrouping grouping = OperatorGrouping::Name;
  TimeAggregate aggregate = TimeAggregate::Sum;
  /// Rows whose mean time per call is below this many seconds are left out.
  double min_time_s = 0;
  /// Only kernels of this type: the span name ("LowLevelConv2d") or it without "LowLevel"
  /// ("Conv2d"); empty: every type.
  std::string type;
  std::int32_t pe = -1;  ///< only kernels on the device whose first PE is this; -1: every PE
};

/// The analysis: every row's statistics, ranked by `options.order` (descending; ties keep
/// name, operator and instruction order), filtered by type, PE and minimum time, cut to
/// `options.top`. Pure; thread-safe.
std::vector<OperatorStat> analyze_operators(const std::vector<SpanRecord>& spans,
                                            const OperatorAnalysisOptions& options = {});

/// The rows in `format`. Text: a table with rank, operator info, calls, device self time
/// (aggregated by `aggregate`, its share of `total_kernel_ns` and the cumulative time and share
/// down the ranking), GFLOPs per call, GFLOP/s, MB per call, GB/s, DRAM and spilled MB per call,
/// bound, input and output shapes; says so when there is no kernel span. CSV (RFC 4180, one
/// header line) and JSON (an array of objects) carry the same columns unrounded, times in ns:
/// rank, name, operator_index, instruction_index, pe_index, calls, time_ns, total_ns, mean_ns,
/// min_ns, max_ns, share, cumulative_ns, cumulative_share, flops, flops_per_s, bytes,
/// bytes_per_s, dram_bytes, spill_bytes, bound, in_shapes, out_shapes (per call: flops, bytes,
/// dram_bytes, spill_bytes).
std::string format_operator_analysis(const std::vector<OperatorStat>& rows,
                                     std::int64_t total_kernel_ns,
                                     AnalysisFormat format = AnalysisFormat::Text,
                                     TimeAggregate aggregate = TimeAggregate::Sum);

/// Sum of the device self time of every kernel span in `spans`, ns.
std::int64_t total_kernel_ns(const std::vector<SpanRecord>& spans);

}  // namespace furiosa::profiler
