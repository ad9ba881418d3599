// The driver registry and the process-wide builtin registry.
#include "furiosa/device/driver.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "furiosa/core/error.h"
#include "furiosa/device/pcie.h"
#include "furiosa/device/sim.h"

namespace furiosa::device {

void DriverRegistry::register_factory(std::string name, DriverFactory factory) {
  std::lock_guard lock(mu_);
  // A driver already created under this name stays in use (Devices it opened must not outlive
  // it); the new factory only matters for names whose driver has not been created yet.
  for (auto& [known, existing] : factories_) {
    if (known == name) {
      existing = std::move(factory);
      return;
    }
  }
  factories_.emplace_back(std::move(name), std::move(factory));
}

std::vector<std::string> DriverRegistry::names() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> result;
  result.reserve(factories_.size());
  for (const auto& entry : factories_) result.push_back(entry.first);
  std::sort(result.begin(), result.end());
  return result;
}

Driver& DriverRegistry::driver(std::string_view name) {
  std::lock_guard lock(mu_);
  for (auto& [known, driver] : drivers_) {
    if (known == name) return *driver;
  }
  // Created under the lock so that each name gets exactly one driver. A factory must therefore
  // not call back into this registry.
  for (auto& [known, factory] : factories_) {
    if (known != name) continue;
    std::unique_ptr<Driver> created = factory ? factory() : nullptr;
    if (!created) {
      throw Error(ErrorCode::Internal,
                  fmt::format("the factory of driver '{}' returned no driver", name));
    }
    drivers_.emplace_back(std::string(name), std::move(created));
    return *drivers_.back().second;
  }
  std::vector<std::string> known;
  for (const auto& entry : factories_) known.push_back(entry.first);
  std::sort(known.begin(), known.end());
  throw Error(
      ErrorCode::DeviceNotFound,
      fmt::format("no device driver named '{}' (known drivers: {})", name,
                  known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", "))));
}

DriverRegistry& DriverRegistry::builtin() {
  static DriverRegistry registry;
  static std::once_flag registered;
  std::call_once(registered, [] {
    // The environment is read when the "sim" driver is first used, not at registration.
    registry.register_factory("sim",
                              [] { return create_sim_driver(sim_config_from_environment()); });
    // Real cards under /dev and /sys/class/npu_mgmt: listing only (see docs/devices.md).
    registry.register_factory("pcie", [] { return create_pcie_driver(); });
  });
  return registry;
}

}  // namespace furiosa::device
