// Operator analysis of the NPU kernels in a trace: the questions MegEngine's profiler guide
// answers from its profiles (the N slowest operators, the operator types that take the most time
// in total, operators ordered by memory above a minimum time), with device self time,
// cumulative share, MACs and FLOP/s, memory and bandwidth, and the timing model's DRAM traffic
// and bound. Reads kernel spans (category NPU, instruction_index >= 0) and their attributes
// "macs", "bytes", "dram_bytes", "spill_bytes" and "bound" (profiler/device_execution.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/profiler/span.h"

namespace furiosa::profiler {

/// One operator (a kernel of a program, or with aggregation one kernel type) over every
/// execution in the trace.
struct OperatorStat {
  std::string name;                     ///< kernel span name, e.g. "LowLevelConv2d"
  std::int32_t operator_index = -1;     ///< model node; -1 when aggregated by type
  std::int32_t instruction_index = -1;  ///< position in its program; -1 when aggregated by type
  std::int64_t calls = 0;               ///< kernel spans counted
  std::int64_t self_ns = 0;             ///< device self time, summed over the calls
  std::int64_t macs = 0;                ///< multiply-accumulates, summed over the calls
  std::int64_t bytes = 0;               ///< input + output + weight bytes, summed over the calls
  std::int64_t dram_bytes = 0;          ///< modelled DRAM traffic, summed over the calls
  std::int64_t spill_bytes = 0;         ///< of which spilled activations, summed over the calls
  std::string bound;  ///< the timing model's bound of the last call ("" unknown or by type)

  /// Mean device time per call, ns.
  double mean_ns() const noexcept {
    return calls > 0 ? static_cast<double>(self_ns) / static_cast<double>(calls) : 0;
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

/// What to rank by: total device self time, memory (bytes per call) or FLOP/s.
enum class OperatorOrder { Time, Memory, Flops };

/// "time", "memory", "flops" -> OperatorOrder; nullopt otherwise.
std::optional<OperatorOrder> parse_operator_order(std::string_view name) noexcept;

/// Options of analyze_operators() (MegEngine's --top, --order-by, --aggregate-by type,
/// --min-time).
struct OperatorAnalysisOptions {
  std::size_t top = 10;  ///< rows kept (0: all)
  OperatorOrder order = OperatorOrder::Time;
  bool by_type = false;    ///< one row per kernel type instead of per kernel
  double min_mean_us = 0;  ///< rows whose mean time per call is below are left out
};

/// The analysis: every operator's statistics, ranked by `options.order` (descending; ties by
/// name then instruction index), filtered by min_mean_us, cut to `options.top`. Pure.
std::vector<OperatorStat> analyze_operators(const std::vector<SpanRecord>& spans,
                                            const OperatorAnalysisOptions& options = {});

/// The rows as a table: rank, operator, calls, self time (total, mean, share of all kernel time
/// `total_kernel_ns`, cumulative share), GMACs per call, GFLOP/s, MB per call, GB/s, DRAM and
/// spilled MB per call, bound. Says so when there is no kernel span.
std::string format_operator_analysis(const std::vector<OperatorStat>& rows,
                                     std::int64_t total_kernel_ns);

/// Sum of the device self time of every kernel span in `spans`, ns.
std::int64_t total_kernel_ns(const std::vector<SpanRecord>& spans);

}  // namespace furiosa::profiler
