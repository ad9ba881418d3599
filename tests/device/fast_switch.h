// Shared by the fast-kernel tests (device_fast_kernel_tests): a guard that puts the simulator's
// fast-kernel switch and ISA level back to their defaults at scope exit, so a failing case
// leaves the process as it found it.
#pragma once

#include "kernels.h"

namespace furiosa::device::test {

/// Restores sim::set_fast_kernels_enabled(true) and set_fast_kernels_level(SimIsa::Auto) when
/// it goes out of scope (the test hooks of kernels.h are process-wide).
struct FastSwitch {
  FastSwitch() = default;
  FastSwitch(const FastSwitch&) = delete;
  FastSwitch& operator=(const FastSwitch&) = delete;
  ~FastSwitch() {
    sim::set_fast_kernels_enabled(true);
    sim::set_fast_kernels_level(SimIsa::Auto);
  }
};

}  // namespace furiosa::device::test
