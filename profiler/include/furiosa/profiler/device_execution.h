// The NPU spans of one device execution, made in one place. A device execution is described
// here without any device type (the profiler sits below device/): its phases Load, Execution and
// Store, its kernels and any backend-specific intervals, each with ns times on the host's steady
// clock. The runtime fills a DeviceExecution from the fence's device::ExecutionTiming; tests and
// tools that need device spans fill one by hand. Either way the span tree is the runtime's
// (DESIGN.md "One inference, end to end"):
//
//   parent (the Inference span)
//     Load                       NPU, the PE's track
//     Execution  (flow_id)       NPU; the end of the flow arrow from Enqueue
//       LowLevel<Kernel> ...     NPU, one per kernel, children of Execution
//     Store                      NPU
//     <backend interval> ...     NPU, e.g. the simulator's SimOverrun
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "furiosa/profiler/span.h"

namespace furiosa::profiler {

class Profiler;

/// One kernel (NPU operator) of a device execution.
struct DeviceKernel {
  /// Span name, "LowLevel<Kernel>" (e.g. "LowLevelConv2d"). Borrowed: must stay valid while the
  /// DeviceExecution is used.
  std::string_view name;
  std::int64_t start_ns = 0;           ///< steady-clock ns (now_ns())
  std::int64_t end_ns = 0;             ///< steady-clock ns, >= start_ns
  std::int32_t operator_index = -1;    ///< the model node it came from; -1 when unknown
  std::int32_t instruction_index = -1; ///< position of the kernel in the program; -1 when unknown
  std::int64_t cycles = -1;            ///< modelled NPU cycles; -1 when not modelled
  /// The timing model's bound ("compute", "sram", "dram"); empty when not modelled. Borrowed like
  /// `name`. When set, the kernel's span carries it and the two byte counts as attributes.
  std::string_view bound{};
  std::int64_t dram_bytes = 0;   ///< modelled DRAM traffic (streamed weights + spilled activations)
  std::int64_t spill_bytes = 0;  ///< of which activations spilled to / read back from DRAM
  std::int64_t macs = 0;         ///< useful multiply-accumulates (0: data movement)
  std::int64_t bytes = 0;        ///< bytes of its inputs, outputs and weights
  /// Of `cycles`, loading the weights into the MAC slices (a modelled kernel's attribute
  /// "weight_load_cycles").
  std::int64_t weight_load_cycles = 0;
  /// Shapes of its inputs and outputs, e.g. "[1,32,112,112]" (several joined by ","); empty when
  /// unknown. Borrowed like `name`. When set, the span carries them as the attributes
  /// "in_shapes" and "out_shapes".
  std::string_view in_shapes{};
  std::string_view out_shapes{};
};

/// A backend-specific interval of a device execution, drawn beside the phases without
/// interpretation (e.g. the simulator's "SimOverrun").
struct DeviceInterval {
  std::string_view name;   ///< span name; borrowed like DeviceKernel::name
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

/// One execution on one device (a PE or fused PEs): where it ran and when each phase ran. Times
/// are ns on the host's steady clock (a backend calibrates its device clock to it). A plain value;
/// the names it holds are borrowed (see DeviceKernel::name).
struct DeviceExecution {
  std::int32_t card = -1;              ///< card index
  std::int32_t pe_index = -1;          ///< first PE of the device
  std::int64_t execution_index = -1;   ///< sequence number of the execution on the device
  std::int64_t dram_base = -1;         ///< device DRAM base of the execution's region; -1 unknown
  std::int64_t load_start_ns = 0, load_end_ns = 0;    ///< Load: DMA host -> device
  std::int64_t exec_start_ns = 0, exec_end_ns = 0;    ///< Execution: the kernels
  std::int64_t store_start_ns = 0, store_end_ns = 0;  ///< Store: DMA device -> host
  std::int64_t cycles = -1;            ///< NPU Run in modelled cycles (the Execution span's); -1 unknown
  std::vector<DeviceKernel> kernels;   ///< in program order
  std::vector<DeviceInterval> backend_intervals;  ///< in start order
};

/// The spans of `execution`, in this order: Load, Execution, its kernels, Store, then the backend
/// intervals. Every span has category NPU, trace `parent.trace_id`, the execution's card,
/// pe_index, execution_index and dram_base; Load, Execution, Store and the backend intervals have
/// parent `parent.span_id`, the kernels the Execution span's id. The Execution span carries
/// `flow_id` (0: no flow) and `cycles`; each kernel its operator_index, instruction_index and
/// cycles, and when the backend models it, the attributes "bound", "dram_bytes", "spill_bytes",
/// "macs", "bytes" and "weight_load_cycles"; "in_shapes" and "out_shapes" when known.
/// Span ids come from `next_id`, called once per span in the order above (so a test can predict
/// them). Pure: thread-safe.
std::vector<SpanRecord> device_execution_spans(const DeviceExecution& execution, const SpanContext& parent,
                                               std::uint64_t flow_id, const std::function<std::uint64_t()>& next_id);

/// Records device_execution_spans() into `profiler`, with ids from profiler.next_span_id().
/// Nothing when the profiler is not recording or `parent` is not valid. Thread-safe like
/// Profiler::record().
void record_device_execution(Profiler& profiler, const DeviceExecution& execution, const SpanContext& parent,
                             std::uint64_t flow_id);

}  // namespace furiosa::profiler
