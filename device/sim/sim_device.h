// Private to the simulator: opening a device file of a simulated card.
#pragma once

#include <cstdint>
#include <memory>

#include "furiosa/device/device.h"
#include "pe_locks.h"
#include "sim_state.h"

namespace furiosa::device::sim {

/// The Device of `file`, whose cores the caller has reserved in `state` as `owner`
/// (SimState::acquire) and, with a lock_dir, locked system-wide (`locks`). Closing the Device
/// drains its queue, frees its DRAM, releases the cores and unlocks the lock files.
std::unique_ptr<Device> open_sim_device(std::shared_ptr<SimState> state, const DeviceFile& file,
                                        std::uint64_t owner, PeLocks locks);

}  // namespace furiosa::device::sim
