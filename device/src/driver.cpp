// The driver registry and the process-wide builtin registry.
#include "furiosa/device/driver.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>

#include "furiosa/core/error.h"

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

BackendChoice select_backend(DriverRegistry& registry, std::string_view requested) {
  const auto chosen = [&](std::string_view name, std::string reason) {
    return BackendChoice{&registry.driver(name), std::string(name), std::move(reason)};
  };
  if (!requested.empty() && requested != "auto") return chosen(requested, "requested");
  if (const char* env = std::getenv("FURIOSA_BACKEND"); env != nullptr && *env != '\0' &&
                                                        std::string_view(env) != "auto") {
    return chosen(env, fmt::format("FURIOSA_BACKEND={}", env));
  }
  std::vector<std::string> without_cards;
  for (const std::string& name : registry.names()) {
    Driver& driver = registry.driver(name);
    if (!driver.is_hardware()) continue;
    if (!driver.enumerate().empty()) return chosen(name, "a Warboy card is present");
    without_cards.push_back(name);
  }
  for (const std::string& name : registry.names()) {
    if (registry.driver(name).is_hardware()) continue;
    return chosen(name, without_cards.empty()
                            ? std::string("no hardware backend is built in")
                            : fmt::format("no Warboy card found by {}", fmt::join(without_cards, ", ")));
  }
  throw Error(ErrorCode::DeviceNotFound, "no device backend is registered");
}

}  // namespace furiosa::device
