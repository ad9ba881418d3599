// The simulated cards of one driver (sim_state.h): core ownership within the driver and the
// cards' descriptions for enumerate().
#include "sim_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "furiosa/core/error.h"
#include "pe_locks.h"

// The project version reported as firmware "sim-<version>". The build may pass the real one;
// otherwise this must be kept in step with project(VERSION) in the top-level CMakeLists.txt.
#ifndef FURIOSA_VERSION
#define FURIOSA_VERSION "0.1.0"
#endif

namespace furiosa::device::sim {

SimState::SimState(const SimConfig& config)
    : config(config), dram(config.cards, config.dram_bytes) {}

std::uint64_t SimState::acquire(const DeviceFile& file) {
  const int cards = config.cards, pes = config.pes_per_card;
  if (file.card < 0 || file.card >= cards || file.first_pe < 0 || file.last_pe < file.first_pe ||
      file.last_pe >= pes) {
    const std::string what =
        cards == 0 ? std::string("the sim driver has no cards")
                   : fmt::format("the sim driver has card(s) npu0..npu{} with PEs pe0..pe{} each",
                                 cards - 1, pes - 1);
    throw Error(ErrorCode::DeviceNotFound, fmt::format("{}: no such device; {}", file.name(), what),
                ErrorSubject::of_device(file.name()));
  }
  std::lock_guard lock(mu_);
  for (const DeviceFile& held : held_) {
    if (held.overlaps(file)) {
      throw Error(
          ErrorCode::DeviceBusy,
          fmt::format("{}: device busy: its cores are held by {}", file.name(), held.name()),
          ErrorSubject::of_device(file.name()));
    }
  }
  held_.push_back(file);
  return next_owner_++;
}

void SimState::release_cores(const DeviceFile& file) {
  std::lock_guard lock(mu_);
  auto it = std::find(held_.begin(), held_.end(), file);
  if (it != held_.end()) held_.erase(it);
}

std::vector<CardInfo> SimState::enumerate() const {
  std::lock_guard lock(mu_);
  std::vector<CardInfo> cards;
  for (int c = 0; c < config.cards; ++c) {
    CardInfo info;
    info.index = c;
    info.arch = "warboy";
    info.busname = fmt::format("0000:{:02x}:00.0", c + 1);  // bus 00 is the host bridge
    info.serial = fmt::format("SIM{:04d}", c);
    info.firmware_version = "sim-" FURIOSA_VERSION;
    info.driver_version = "sim";
    info.numa_node = 0;
    info.pe_count = config.pes_per_card;
    info.pe_busy.assign(static_cast<std::size_t>(config.pes_per_card), false);
    for (const DeviceFile& held : held_) {
      if (held.card != c) continue;
      for (int pe = held.first_pe; pe <= held.last_pe; ++pe) {
        info.pe_busy[static_cast<std::size_t>(pe)] = true;
      }
    }
    if (!config.lock_dir.empty()) {  // holders in any process, from the lock files
      const auto n = static_cast<std::size_t>(config.pes_per_card);
      info.pe_holder_pid.assign(n, 0);
      info.pe_faults.assign(n, 0);
      info.pe_resets.assign(n, 0);
      info.pe_executions.assign(n, 0);
      info.pe_busy_ns.assign(n, 0);
      for (int pe = 0; pe < config.pes_per_card; ++pe) {
        const PeHolder h = probe_pe(config.lock_dir, c, pe);
        const auto i = static_cast<std::size_t>(pe);
        info.pe_holder_pid[i] = h.pid;
        info.pe_faults[i] = h.faults;
        info.pe_resets[i] = h.resets;
        info.pe_executions[i] = h.executions;
        info.pe_busy_ns[i] = h.busy_ns;
        if (h.pid != 0) info.pe_busy[i] = true;
      }
    }
    for (int pe = 0; pe < config.pes_per_card; ++pe) info.device_files.push_back({c, pe, pe});
    if (config.pes_per_card >= 2) info.device_files.push_back({c, 0, config.pes_per_card - 1});
    cards.push_back(std::move(info));
  }
  return cards;
}

}  // namespace furiosa::device::sim
