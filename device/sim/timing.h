// Private: the simulator's timing model (first, uncalibrated constants; see timing.cpp).
#pragma once

#include <cstdint>

#include "furiosa/device/isa.h"
#include "furiosa/device/sim.h"

namespace furiosa::device::sim {

/// Modelled duration of one DMA transfer of `bytes` between host and device, in ns.
std::int64_t dma_duration_ns(const SimConfig& config, std::uint64_t bytes);

/// Modelled NPU cycles of one kernel on `pe_count` PEs used together.
std::uint64_t kernel_cycles(const SimConfig& config, const isa::Kernel& kernel, int pe_count);

/// `cycles` at config.clock_ghz, in ns (rounded up).
std::int64_t cycles_to_ns(const SimConfig& config, std::uint64_t cycles);

}  // namespace furiosa::device::sim
