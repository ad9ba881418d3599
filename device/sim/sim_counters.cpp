// Counters of one open simulated device (sim_counters.h).
#include "sim_counters.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "furiosa/device/kernel_kinds.h"

namespace furiosa::device::sim {

namespace {

// ns since the steady clock's epoch.
std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void SimCounters::add_dma_to_device(std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  counters_.dma_bytes_to_device += bytes;
}

void SimCounters::add_dma_to_host(std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  counters_.dma_bytes_to_host += bytes;
}

void SimCounters::count_reset() {
  std::lock_guard lock(mu_);
  ++counters_.resets;
  publish_locked();
}

void SimCounters::count_fault(SimFaultKind kind) {
  std::lock_guard lock(mu_);
  counters_.backend_counters[fmt::format("sim.faults.{}", sim_fault_name(kind))] += 1;
  ++faults_;
  publish_locked();
}

void SimCounters::add_execution(const ExecutionTiming& timing, bool succeeded,
                                std::int64_t overrun_ns) {
  std::lock_guard lock(mu_);
  if (succeeded) ++counters_.executions;
  busy_ns_ += static_cast<std::uint64_t>(timing.busy_ns());
  if (const std::int64_t now = steady_now_ns(); now - last_publish_ns_ >= kPublishPeriodNs) {
    last_publish_ns_ = now;
    publish_locked();
  }
  counters_.cycles += timing.kernel_cycles;
  counters_.task_cycles += timing.task_cycles;
  counters_.macs += timing.macs;
  counters_.dma_bytes_to_device += timing.dma_bytes_to_device;
  counters_.dma_bytes_to_host += timing.dma_bytes_to_host;
  if (overrun_ns > 0) {
    counters_.backend_counters["sim.overruns"] += 1;
    counters_.backend_counters["sim.overrun_ns"] += overrun_ns;
  }
}

void SimCounters::add_kernel_stats(const std::array<KernelKindStats, kKernelKindCount>& stats) {
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < stats.size(); ++i) {
    if (stats[i].calls == 0) continue;
    const std::string_view name = isa::all_kernel_kinds()[i].name;
    const auto add = [&](std::string_view what, std::uint64_t value) {
      counters_.backend_counters[fmt::format("sim.kernels.{}.{}", name, what)] +=
          static_cast<std::int64_t>(value);
    };
    add("calls", stats[i].calls);
    add("host_ns", stats[i].ns);
    add("macs", stats[i].macs);
  }
}

DeviceCounters SimCounters::snapshot() const {
  std::lock_guard lock(mu_);
  return counters_;
}

void SimCounters::publish_locked() const noexcept {
  locks_.publish({0, {}, faults_, counters_.resets, counters_.executions, busy_ns_});
}

}  // namespace furiosa::device::sim
