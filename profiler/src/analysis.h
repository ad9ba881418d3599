// Private: the device-side analysis shared by the reports and the Chrome trace counters.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "furiosa/profiler/span.h"

namespace furiosa::profiler::detail {

/// Names of the fixed spans of the span model (DESIGN.md, profiler/).
inline constexpr std::string_view kInferenceSpan = "Inference";
inline constexpr std::string_view kEnqueueSpan = "Enqueue";
inline constexpr std::string_view kExecutionSpan = "Execution";
inline constexpr std::string_view kLoadSpan = "Load";
inline constexpr std::string_view kStoreSpan = "Store";
/// The simulator's explicit host overrun after an execution's modelled end (not an operator).
inline constexpr std::string_view kOverrunSpan = "SimOverrun";

/// One device execution: its Execution span and the window it occupies on the device.
struct ExecutionWindow {
  std::size_t execution = 0;   ///< index of the Execution span in the analysed vector
  std::int64_t start_ns = 0;   ///< Load start (the Execution's start when there is no Load)
  std::int64_t end_ns = 0;     ///< Store end (the Execution's end when there is no Store)
  std::int64_t total_ns = 0;   ///< end_ns - start_ns: NPU Total
  std::int64_t run_ns = 0;     ///< sum of the durations of the Execution's kernel spans: NPU Run
  std::int64_t iowait_ns = 0;  ///< total_ns - run_ns (signed): NPU IoWait
};

/// The windows of every NPU span named Execution in `spans`, in the order of `spans`.
/// The Load and Store of an Execution are the NPU spans named so with the same trace_id, card,
/// pe_index and execution_index (when several qualify, the Load starting last at or before the
/// Execution and the Store ending first at or after it). Its kernels are the NPU spans of the
/// same trace whose parent_span_id is the Execution's span_id.
std::vector<ExecutionWindow> execution_windows(const std::vector<SpanRecord>& spans);

}  // namespace furiosa::profiler::detail
