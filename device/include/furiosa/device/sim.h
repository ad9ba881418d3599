// The simulator backend ("sim"): an in-process Warboy that executes LowLevel kernels with ONNX
// quantized-operator semantics and attaches modelled device timings.
#pragma once

#include <memory>

#include "furiosa/device/driver.h"

namespace furiosa::device {

/// Shape of the simulated machine and its timing constants. Defaults follow the Warboy figures
/// of DESIGN.md (one chip = 2 PEs, 2.0 GHz; PCIe Gen4 x8 ~15.75 GB/s per direction).
struct SimConfig {
  int cards = 1;
  int pes_per_card = 2;
  std::uint64_t dram_bytes = 1ull << 30;  ///< simulated DRAM per card (real card: 16 GiB)
  double clock_ghz = 2.0;                 ///< NPU clock
  double macs_per_cycle_per_pe = 8192.0;  ///< 32 INT8 TOPS per PE / 2 ops per MAC / 2 GHz
  double pcie_bytes_per_ns = 15.75;       ///< PCIe Gen4 x8 per direction (15.75 GB/s)
  std::int64_t dma_latency_ns = 1000;     ///< fixed cost per DMA transfer (calibrated guess)
  std::uint64_t kernel_overhead_cycles = 200;  ///< fixed per-kernel launch cost (calibrated guess)
  std::size_t queue_capacity = 64;        ///< bounded per-device execution queue
  /// When true (default), a fence is signalled no earlier than the modelled end of its Store,
  /// so host-side latency is never below the modelled device time.
  bool pacing = true;
};

/// SimConfig defaults, overridden by FURIOSA_SIM_CARDS (0..256) and FURIOSA_SIM_PES_PER_CARD
/// (1..64) when set and non-empty; this is the configuration of the built-in "sim" driver.
/// Throws Error(InvalidArgument) naming the variable for a value that is not an integer in range.
SimConfig sim_config_from_environment();

/// Creates a simulator driver. Each driver instance is an independent set of simulated cards.
std::unique_ptr<Driver> create_sim_driver(const SimConfig& config = {});

}  // namespace furiosa::device
