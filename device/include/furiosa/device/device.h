// A Device: exclusive use of one PE or a fused range of PEs of one card. Memory, DMA, program
// loading, and an in-order execution queue with completion fences.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/device/isa.h"

namespace furiosa::device {

/// A device file: a card and a PE range on it, named as FuriosaAI's driver names them:
/// "npu0pe0", "npu0pe1" (single PE) or "npu0pe0-1" (fused PE).
struct DeviceFile {
  int card = 0;
  int first_pe = 0;
  int last_pe = 0;  ///< inclusive; == first_pe for a single PE

  /// "npu{card}pe{first}" or "npu{card}pe{first}-{last}".
  std::string name() const;
  /// Number of PEs used together.
  int pe_count() const noexcept { return last_pe - first_pe + 1; }
  /// True when both name the same card and their PE ranges intersect.
  bool overlaps(const DeviceFile& other) const noexcept;
  /// Parses "npu0pe0" / "npu0pe0-1" (an optional "/dev/" prefix is accepted). Throws
  /// Error(InvalidArgument) naming the text when it is not a device file name.
  static DeviceFile parse(std::string_view text);

  bool operator==(const DeviceFile&) const = default;
};

/// Device-side timestamps of one execution, in ns on the host's steady clock (the simulator's
/// device clock is calibrated to it). Produced by the backend, read after the fence signals.
struct KernelTiming {
  isa::KernelKind kind = isa::KernelKind::Reshape;
  std::int32_t operator_index = -1;
  std::int32_t instruction_index = -1;  ///< position of the kernel in the program
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint64_t cycles = 0;  ///< modelled NPU cycles
  /// What bounds the kernel in the timing model: "compute" (the MAC array), "sram" (on-chip
  /// traffic) or "dram" (streamed weights, spilled activations); empty when the backend does not
  /// model it. Points to a string literal.
  std::string_view bound{};
  std::uint64_t dram_bytes = 0;  ///< modelled DRAM traffic: streamed weights + spill_bytes
  /// Activations written to or read back from DRAM (the SRAM was too small).
  std::uint64_t spill_bytes = 0;
  std::uint64_t macs = 0;   ///< useful multiply-accumulates (isa::kernel_macs; 0: data movement)
  std::uint64_t bytes = 0;  ///< bytes of its inputs, outputs and weights (device layouts)
  /// Of `cycles`, the weights moving into the MAC slices before the MACs apply them (MAC
  /// kernels; not overlapped with the compute: docs/timing.md, "Weight loads"); 0 otherwise.
  std::uint64_t weight_load_cycles = 0;
};

/// A backend-specific interval of one execution (e.g. the simulator's "SimOverrun": the host
/// finished computing after the modelled end), in ns on the host's steady clock. The runtime
/// draws it on the PE's track beside Load/Execution/Store without knowing what it means.
struct BackendSpan {
  std::string name;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

/// Timing of one execution: Load (DMA in), Execution (kernels), Store (DMA out), with the
/// card's perf-register style figures. NPU Total = store_end_ns - load_start_ns, NPU Run =
/// exec_end_ns - exec_start_ns (the kernels), NPU IoWait = Total - Run (signed: see iowait_ns()).
struct ExecutionTiming {
  std::int64_t load_start_ns = 0, load_end_ns = 0;
  std::int64_t exec_start_ns = 0, exec_end_ns = 0;
  std::int64_t store_start_ns = 0, store_end_ns = 0;
  std::vector<KernelTiming> kernels;
  std::uint64_t execution_index = 0;  ///< sequence number of the execution on this device
  std::uint64_t task_cycles = 0;      ///< NPU cycles from Load start to Store end (task execution)
  std::uint64_t kernel_cycles = 0;    ///< NPU cycles in kernels (tensor execution)
  std::uint64_t macs = 0;             ///< useful multiply-accumulates of the kernels
  std::uint64_t peak_macs_per_cycle = 0;  ///< of the device's MAC arrays (all its PEs)
  std::uint64_t dma_bytes_to_device = 0;
  std::uint64_t dma_bytes_to_host = 0;
  /// The start of the part of [load_start_ns, store_end_ns] that no earlier execution of this
  /// device covers: load_start_ns, or the previous execution's Store end when this Load
  /// overlapped it (a device's DMA engines run beside its PE: docs/timing.md, "An execution").
  /// Summing store_end_ns - busy_start_ns over a device's executions gives the time it had work
  /// in progress, which never exceeds the wall time.
  std::int64_t busy_start_ns = 0;
  /// Backend-specific spans of this execution (see BackendSpan), in start order.
  std::vector<BackendSpan> backend_spans;
  /// Backend-specific figures of this execution, named "<backend>.<figure>" (e.g.
  /// "sim.host_compute_ns"); documented by each backend.
  std::map<std::string, std::int64_t> backend_counters;

  /// NPU Total in ns.
  std::int64_t total_ns() const noexcept { return store_end_ns - load_start_ns; }
  /// This execution's share of the device's busy time, ns: store_end_ns - busy_start_ns, or
  /// NPU Total when busy_start_ns was not set (0, before the Load).
  std::int64_t busy_ns() const noexcept {
    const std::int64_t from = std::max(busy_start_ns, load_start_ns);
    return store_end_ns > from ? store_end_ns - from : 0;
  }
  /// NPU Run in ns.
  std::int64_t run_ns() const noexcept { return exec_end_ns - exec_start_ns; }
  /// NPU IoWait = Total - Run in ns; signed, never an unsigned wrap-around.
  std::int64_t iowait_ns() const noexcept { return total_ns() - run_ns(); }
  /// Fraction of the MAC arrays' peak used during the kernels: macs / (kernel_cycles * peak);
  /// 0 when there were no kernel cycles.
  double mac_utilization() const noexcept {
    const double denom = static_cast<double>(kernel_cycles) * static_cast<double>(peak_macs_per_cycle);
    return denom > 0 ? static_cast<double>(macs) / denom : 0.0;
  }
};

/// Completion fence of a submitted execution. Signalled exactly once, with success or with the
/// device error. Thread-safe: any number of threads may wait on it.
class Fence {
 public:
  /// Blocks until signalled, and the callbacks registered before the signal have run, or until
  /// `timeout` passes; returns whether that happened. (So a callback must not wait on its own
  /// fence.)
  bool wait_for(std::chrono::nanoseconds timeout) const;
  /// Blocks until signalled and the callbacks registered before the signal have run.
  void wait() const;
  /// True once signalled.
  bool signalled() const;
  /// The error the execution failed with, or null on success. Call after the fence signalled.
  std::exception_ptr error() const;
  /// Timing of the execution. Call after the fence signalled.
  const ExecutionTiming& timing() const;
  /// Registers `callback`, called exactly once when the fence is signalled (success or error):
  /// on the signalling (backend) thread, or at once on the calling thread when the fence already
  /// signalled. Callbacks must be short and must not block (post work to an executor instead);
  /// one that throws is ignored. Any number may be registered.
  void on_signal(std::function<void()> callback);

  /// Backend side: signals success with the execution's timing. Only the first signal counts.
  void signal(ExecutionTiming timing);
  /// Backend side: signals failure. Only the first signal counts.
  void fail(std::exception_ptr error);

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;            ///< signalled: later on_signal() calls run their callback at once
  bool callbacks_run_ = false;   ///< the callbacks registered before the signal have run; waiters wake
  std::exception_ptr error_;
  ExecutionTiming timing_;
  std::vector<std::function<void()>> callbacks_;

  /// Marks the fence done under the lock, then wakes waiters and runs the callbacks.
  void complete(std::unique_lock<std::mutex>& lock);
};

/// A program resident in device DRAM, returned by Device::load(). Opaque to callers.
class LoadedProgram {
 public:
  virtual ~LoadedProgram() = default;
  /// The program this was loaded from.
  virtual const isa::Program& program() const noexcept = 0;
  /// Expected device time of one execution in ns (Load start to Store end) as the backend models
  /// it, or 0 when the backend cannot tell. The runtime's watchdog derives its default limit
  /// from it.
  virtual std::int64_t modelled_ns() const noexcept { return 0; }
};

/// Counters in the spirit of the card's perf registers. Cumulative since open.
struct DeviceCounters {
  std::uint64_t executions = 0;
  std::uint64_t cycles = 0;             ///< modelled NPU cycles spent in kernels (tensor execution)
  std::uint64_t task_cycles = 0;        ///< modelled NPU cycles from Load start to Store end
  std::uint64_t macs = 0;               ///< useful multiply-accumulates executed
  std::uint64_t dma_bytes_to_device = 0;
  std::uint64_t dma_bytes_to_host = 0;
  std::uint64_t resets = 0;             ///< successful reset() calls
  /// Backend-specific cumulative figures, named "<backend>.<figure>" (e.g. "sim.overruns").
  std::map<std::string, std::int64_t> backend_counters;
};

/// A region of device DRAM.
struct DeviceBuffer {
  std::uint64_t address = 0;  ///< byte address in device DRAM
  std::uint64_t size = 0;     ///< bytes
};

/// Exclusive handle on a device file. Closing (destroying) it releases the cores. All member
/// functions are thread-safe. Executions submitted to one Device run in submission order on
/// the device timeline (a simulator may compute them concurrently on the host, so fences may be
/// signalled out of order when pacing is off).
class Device {
 public:
  virtual ~Device() = default;

  /// The device file this handle holds.
  virtual const DeviceFile& file() const noexcept = 0;

  /// Allocates `bytes` of device DRAM. Throws Error(DeviceFault) when DRAM is exhausted.
  virtual DeviceBuffer allocate(std::uint64_t bytes) = 0;
  /// Frees a buffer returned by allocate().
  virtual void release(const DeviceBuffer& buffer) = 0;
  /// DMA host->device into [address, address + data.size()). Throws Error(DeviceFault) when out
  /// of range.
  virtual void write(std::uint64_t address, std::span<const std::byte> data) = 0;
  /// DMA device->host from [address, address + data.size()).
  virtual void read(std::uint64_t address, std::span<std::byte> data) = 0;

  /// Allocates the program's DRAM region and copies its constants there. Throws
  /// Error(DeviceFault) when the program does not fit.
  virtual std::shared_ptr<LoadedProgram> load(std::shared_ptr<const isa::Program> program) = 0;

  /// Queues one execution of `program`: Load (DMA each inputs[i] to program.inputs[i]), run the
  /// kernels, Store (DMA program.outputs[i] to outputs[i]). The caller keeps the input and output
  /// buffers alive and untouched until the returned fence signals. Sizes must equal the
  /// TensorRefs' size_bytes(), else Error(InvalidInput) is thrown and nothing is queued. A device
  /// failure during the execution fails the fence, never the process. Blocks while the queue is
  /// full (bounded).
  virtual std::shared_ptr<Fence> submit(const LoadedProgram& program,
                                        std::vector<std::span<const std::byte>> inputs,
                                        std::vector<std::span<std::byte>> outputs) = 0;

  /// Snapshot of the counters.
  virtual DeviceCounters counters() const = 0;

  /// Recovers a device that stopped making progress (a hang): every execution submitted and not
  /// yet finished is aborted, its fence failing with Error(DeviceFault) whose message says
  /// "aborted by device reset"; loaded programs and DRAM allocations stay. When reset() returns
  /// the aborted executions no longer touch their host buffers and the device accepts new work.
  /// Thread-safe; may be called while other threads submit. Throws Error(DeviceNotFound) when
  /// the device is lost (only closing and opening it again helps) and Error(DeviceFault) when
  /// the backend cannot reset (the default).
  virtual void reset();
};

/// The error a backend fails the fence of execution `execution` of `file` with when
/// Device::reset() aborts it: Error(DeviceFault) naming the device file.
std::exception_ptr reset_abort_error(const DeviceFile& file, std::uint64_t execution);
/// True when `error` is one made by reset_abort_error().
bool aborted_by_reset(const std::exception_ptr& error) noexcept;

}  // namespace furiosa::device
