// The process-wide table of shared devices (shared_devices.h).
#include "shared_devices.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace furiosa::runtime::detail {

namespace {

struct Table {
  std::mutex mu;
  /// (driver, device file name) -> the slot, while some session holds it.
  std::map<std::pair<const device::Driver*, std::string>, std::weak_ptr<DeviceSlot>> slots;
};

Table& table() {
  static Table t;  // never destroyed before the sessions of static objects: leaked on purpose
  return t;
}

}  // namespace

std::shared_ptr<DeviceSlot> acquire_shared_slot(device::Driver& driver,
                                                const device::DeviceFile& file) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  auto& entry = t.slots[{&driver, file.name()}];
  if (auto slot = entry.lock()) return slot;
  auto slot = std::make_shared<DeviceSlot>();
  try {
    slot->device = driver.open(file);  // DeviceBusy / DeviceNotFound name the file
  } catch (...) {
    t.slots.erase({&driver, file.name()});
    throw;
  }
  slot->health.device_file = slot->device->file().name();
  entry = slot;
  return slot;
}

void mark_shared_devices_free(device::Driver& driver, std::vector<device::CardInfo>& cards) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  for (auto it = t.slots.begin(); it != t.slots.end();) {
    const auto slot = it->second.lock();
    if (!slot) {
      it = t.slots.erase(it);  // its last session has gone
      continue;
    }
    if (it->first.first == &driver) {
      const device::DeviceFile& file = slot->device->file();
      for (auto& card : cards) {
        if (card.index != file.card) continue;
        for (int pe = file.first_pe; pe <= file.last_pe; ++pe) {
          if (static_cast<std::size_t>(pe) < card.pe_busy.size())
            card.pe_busy[static_cast<std::size_t>(pe)] = false;
        }
      }
    }
    ++it;
  }
}

}  // namespace furiosa::runtime::detail
