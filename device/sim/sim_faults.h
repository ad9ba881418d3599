// Private to the simulator: deciding which executions of a device fault (SimConfig::faults,
// docs/devices.md "Fault injection"). The spec's parser and formatter are public (sim.h) and live
// in sim_faults.cpp with this.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string_view>

#include "furiosa/core/error.h"
#include "furiosa/device/sim.h"

namespace furiosa::device::sim {

/// The fault plan of one open device, applied to its executions in the order the device takes
/// them. Thread-compatible: the device's queue calls it with its lock held.
class FaultInjector {
 public:
  /// `plan` for the device file named `device_name` (mixed into the seed of the `p` draws, so the
  /// devices of one driver draw different but repeatable sequences).
  FaultInjector(const SimFaultPlan& plan, std::string_view device_name);

  /// The fault of the next execution taken, if any (1-based count of executions taken). Every
  /// `p` rule draws once per execution, so the sequence repeats whatever else fires; when several
  /// rules fire the first of lost, hang, dma, error applies. A Lost result makes lost() true.
  /// Call only while !lost().
  std::optional<SimFaultKind> next();

  /// True once a Lost fault has fired: the device takes no further work.
  bool lost() const noexcept { return lost_; }

 private:
  SimFaultPlan plan_;
  std::mt19937_64 rng_;      // draws of `p` rules
  std::uint64_t taken_ = 0;  // executions taken so far (1-based count of the last)
  bool lost_ = false;
};

/// Error(DeviceNotFound) of a device lost to an injected fault, naming `device_name`.
Error device_lost_error(std::string_view device_name);

}  // namespace furiosa::device::sim
