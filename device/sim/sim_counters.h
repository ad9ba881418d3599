// Private to the simulator: the counters of one open simulated device and their publication.
//
// Every figure here belongs to one open device (one SimDevice, so one instance per device file
// opened from one driver); nothing is process-wide, so two drivers in one process, or two opens
// of the same file one after the other, count separately. The names are the public ones
// (DeviceCounters, docs/devices.md): `sim.faults.<kind>`, `sim.overruns`, `sim.overrun_ns` and,
// with SimConfig::kernel_stats, `sim.kernels.<kernel name>.{calls,host_ns,macs}` in
// DeviceCounters::backend_counters; `sim.host_compute_ns` and `sim.overrun_ns` per execution in
// ExecutionTiming::backend_counters.
//
// Publication: faults, resets, executions and busy time go into the device's PE lock files
// (pe_locks.h), where `furiosactl list` / `top` in other processes read them: at once on a fault
// or reset, and at most every kPublishPeriodNs as executions complete.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

#include "furiosa/device/device.h"
#include "furiosa/device/sim.h"
#include "kernels.h"
#include "pe_locks.h"

namespace furiosa::device::sim {

/// Counters of one open simulated device. Thread-safe (one mutex, never held while calling out
/// except into PeLocks::publish).
class SimCounters {
 public:
  /// Executions republish the counters at most this often (furiosactl top reads them).
  static constexpr std::int64_t kPublishPeriodNs = 100'000'000;

  /// Counters starting at zero, published into `locks` (which must outlive this object; a
  /// default PeLocks publishes nowhere).
  explicit SimCounters(const PeLocks& locks) : locks_(locks) {}
  SimCounters(const SimCounters&) = delete;
  SimCounters& operator=(const SimCounters&) = delete;

  /// `bytes` copied host -> device outside executions (write, program constants at load).
  void add_dma_to_device(std::uint64_t bytes);
  /// `bytes` copied device -> host outside executions (read).
  void add_dma_to_host(std::uint64_t bytes);
  /// A reset of the device; published at once.
  void count_reset();
  /// An injected fault of `kind` (`sim.faults.<kind>`); published at once.
  void count_fault(SimFaultKind kind);
  /// A finished execution (`succeeded` or failed) with its modelled `timing` and the host's
  /// `overrun_ns` past the modelled Store end (0 when none); published when the last
  /// publication is kPublishPeriodNs old.
  void add_execution(const ExecutionTiming& timing, bool succeeded, std::int64_t overrun_ns);

  /// Per-kind kernel figures of one execution (SimConfig::kernel_stats), added to
  /// `sim.kernels.<kernel name>.calls`, `.host_ns` and `.macs`; kinds with no call are skipped.
  void add_kernel_stats(const std::array<KernelKindStats, kKernelKindCount>& stats);

  /// A copy of the counters now.
  DeviceCounters snapshot() const;

 private:
  /// Writes the counters into the PEs' lock files (mu_ held).
  void publish_locked() const noexcept;

  const PeLocks& locks_;
  mutable std::mutex mu_;
  DeviceCounters counters_;           // (mu_)
  std::uint64_t faults_ = 0;          // injected faults (mu_), published in the lock files
  std::uint64_t busy_ns_ = 0;         // sum of ExecutionTiming::busy_ns (mu_), published too
  std::int64_t last_publish_ns_ = 0;  // steady clock of the last periodic publish (mu_)
};

}  // namespace furiosa::device::sim
