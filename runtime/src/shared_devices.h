// Devices shared between the sessions of one process (SessionOptions::share_devices): a table of
// the DeviceSlots such sessions opened, keyed by driver and device file, so that a second session
// naming the same device file uses the opened device instead of failing with DeviceBusy.
#pragma once

#include <memory>
#include <vector>

#include "device_pool.h"
#include "furiosa/device/device_spec.h"
#include "furiosa/device/driver.h"

namespace furiosa::runtime::detail {

/// The slot of `file` opened from `driver` and shared: the one another sharing session of this
/// process holds, else a new one opened now (DeviceBusy / DeviceNotFound from Driver::open as
/// usual) and entered in the table. The device closes when the last holder drops the slot.
/// Thread-safe.
std::shared_ptr<DeviceSlot> acquire_shared_slot(device::Driver& driver,
                                                const device::DeviceFile& file);

/// Marks as free, in `cards` (from driver.enumerate()), the PEs of devices that sharing sessions
/// of this process hold from `driver`, so that resolving a device spec may choose them again.
/// Thread-safe.
void mark_shared_devices_free(device::Driver& driver, std::vector<device::CardInfo>& cards);

}  // namespace furiosa::runtime::detail
