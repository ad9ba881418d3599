// The span model: OpenTelemetry-like trace and span ids with the attributes of FuriosaAI's
// profiler records (thread.id, pe_index, execution_index, instruction_index, operator_index).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace furiosa::profiler {

/// Span category: host-side runtime work or device-side NPU work.
enum class Category : std::uint8_t { Runtime, NPU };

/// "Runtime" / "NPU".
std::string_view category_name(Category cat) noexcept;

/// The groups of spans a profiler can be told to keep (ProfilerOptions::kinds), the three views
/// of FuriosaAI's profiler guide: host runtime steps (Runtime spans: Compile, Enqueue, Quantize,
/// Lower, Unlower, Dequantize, fallback operators, record labels), NPU executions (the NPU spans
/// of an execution as a whole: Execution, Load, Store, and backend records such as the
/// simulator's SimOverrun) and NPU operators (the kernels: NPU spans named LowLevel*). Bit
/// flags; combine with |.
enum class SpanKinds : std::uint8_t {
  None = 0,
  RuntimeSteps = 1,
  NpuExecutions = 2,
  NpuOperators = 4,
  All = 7,
};
constexpr SpanKinds operator|(SpanKinds a, SpanKinds b) noexcept {
  return static_cast<SpanKinds>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}
constexpr bool includes(SpanKinds set, SpanKinds kind) noexcept {
  return (static_cast<std::uint8_t>(set) & static_cast<std::uint8_t>(kind)) != 0;
}
/// The group of a span of category `cat` named `name` (one of the three single flags).
SpanKinds span_kind(Category cat, std::string_view name) noexcept;
/// Parses a comma-separated list of "runtime", "npu-executions", "npu-operators" or "all" (no
/// spaces). Throws std::invalid_argument naming the unknown entry and the accepted names.
SpanKinds parse_span_kinds(std::string_view list);

/// 128-bit trace id; one per inference.
struct TraceId {
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;
  bool valid() const noexcept { return hi != 0 || lo != 0; }
  /// 32 lowercase hex digits.
  std::string to_hex() const;
  bool operator==(const TraceId&) const = default;
};

/// The context a child span is created under: its trace and its parent span.
struct SpanContext {
  TraceId trace_id;
  std::uint64_t span_id = 0;  ///< the parent-to-be; 0 = no parent (root)
  bool valid() const noexcept { return trace_id.valid(); }
};

/// One finished span. Times are ns on the steady (monotonic) clock, see now_ns().
struct SpanRecord {
  TraceId trace_id;
  std::uint64_t span_id = 0;
  std::uint64_t parent_span_id = 0;  ///< 0 for a root span
  std::string name;                  ///< Inference, Quantize, Lower, Enqueue, Load, ...
  Category cat = Category::Runtime;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint64_t thread_id = 0;       ///< host thread that recorded it (0 for device spans)
  std::int32_t card = -1;            ///< card index for NPU spans
  std::int32_t pe_index = -1;        ///< first PE of the device for NPU spans
  std::int64_t execution_index = -1;
  std::int32_t instruction_index = -1;
  std::int32_t operator_index = -1;
  /// Non-zero on the two ends of a host->device flow (Enqueue and its Execution share it).
  std::uint64_t flow_id = 0;
  /// Device DRAM base address of the execution's region for NPU spans; -1 when unknown.
  std::int64_t dram_base = -1;
  /// Modelled NPU cycles for NPU spans (a kernel: its cycles; an Execution: NPU Run in cycles);
  /// -1 when not modelled.
  std::int64_t cycles = -1;
  /// Free-form string attributes (OpenTelemetry's span attributes) for facts the fields above do
  /// not cover, e.g. {"cache", "hit"} on Compile. Written into the Chrome trace's args; empty on
  /// hot-path spans (no allocation there).
  std::vector<std::pair<std::string, std::string>> attributes;

  std::int64_t dur_ns() const noexcept { return end_ns - start_ns; }
};

/// ns since an arbitrary fixed point of std::chrono::steady_clock (monotonic).
std::int64_t now_ns() noexcept;

/// Small stable id of the calling thread (1, 2, ... in order of first use in the process).
std::uint64_t current_thread_id() noexcept;

/// Names the calling thread's track in exported traces ("<name> (thread <id>)"); the latest name
/// wins. Process-wide, thread-safe; not on any hot path (a mutex).
void set_current_thread_name(std::string_view name);

/// The name given to thread `thread_id` with set_current_thread_name(), or "" when none.
std::string thread_name(std::uint64_t thread_id);

}  // namespace furiosa::profiler
