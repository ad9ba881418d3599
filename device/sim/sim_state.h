// Private to the simulator: the state a SimDriver shares with its open devices and their loaded
// programs (through shared_ptr, so a Device still releases its cores correctly when it outlives
// the driver): the configuration, which cores are held, and each card's DRAM.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "dram_allocator.h"
#include "furiosa/device/driver.h"
#include "furiosa/device/sim.h"

namespace furiosa::device::sim {

/// The simulated cards of one driver. Thread-safe: core ownership under one mutex, the DRAM
/// under its own (DramAllocator).
class SimState {
 public:
  /// Cards as `config` describes them (already validated), every core free, DRAM empty.
  explicit SimState(const SimConfig& config);

  const SimConfig config;  ///< the driver's configuration, fixed for its lifetime
  DramAllocator dram;      ///< every card's DRAM

  /// Reserves the cores of `file` within this driver; throws DeviceNotFound / DeviceBusy.
  /// Returns an owner id for the DRAM the open device allocates.
  std::uint64_t acquire(const DeviceFile& file);

  /// Releases the cores reserved by acquire(file).
  void release_cores(const DeviceFile& file);

  /// The cards with their per-PE availability (and, with a lock_dir, the holders in any process
  /// and their published counters).
  std::vector<CardInfo> enumerate() const;

 private:
  mutable std::mutex mu_;
  std::vector<DeviceFile> held_;  // open device files (mu_)
  std::uint64_t next_owner_ = 1;  // (mu_)
};

}  // namespace furiosa::device::sim
