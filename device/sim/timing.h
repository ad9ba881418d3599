// Private: the simulator's timing model (formulas and the source of every constant: timing.cpp
// and docs/timing.md).
#pragma once

#include <cstdint>
#include <vector>

#include "furiosa/device/isa.h"
#include "furiosa/device/sim.h"
#include "sram_plan.h"

namespace furiosa::device::sim {

/// Which term of a kernel's cost is the largest (the kernel's bound): compute (the MAC array),
/// SRAM (on-chip traffic) or DRAM (streamed weights and spilled activations).
enum class KernelBound { Compute, Sram, Dram };

/// "compute", "sram" or "dram".
const char* bound_name(KernelBound bound) noexcept;

/// Modelled cost of one kernel on one device. Cycles at SimConfig::clock_ghz.
struct KernelCost {
  std::uint64_t cycles =
      0;  ///< overhead + exchange + weight load + max(compute, sram, dram) + spill
  std::uint64_t compute_cycles = 0;   ///< aligned MACs / MAC rate (0 for vector kernels)
  std::uint64_t sram_cycles = 0;      ///< activation traffic (inputs, outputs) / SRAM bandwidth
  /// MAC kernels: weight bytes / SRAM bandwidth, moved into the slices' register files before
  /// the MACs use them (not overlapped; docs/timing.md, "Weight loads")
  std::uint64_t weight_load_cycles = 0;
  std::uint64_t dram_cycles = 0;      ///< weights streamed from DRAM / the device's DRAM share
  std::uint64_t spill_cycles = 0;  ///< activations spilled to and read back from DRAM / that share
  std::uint64_t exchange_cycles = 0;  ///< fused PE only: output exchange between the PEs
  std::uint64_t macs = 0;             ///< isa::kernel_macs (useful work)
  std::uint64_t aligned_macs = 0;     ///< MACs the array performs, channels and width padded
  std::uint64_t dram_bytes = 0;       ///< weight bytes streamed from DRAM per execution
  std::uint64_t spill_read_bytes = 0;     ///< activations read from DRAM (SramPlan)
  std::uint64_t spill_write_bytes = 0;    ///< activations written to DRAM (SramPlan)
  std::uint64_t io_bytes = 0;             ///< inputs + outputs + weights, in device layouts
  KernelBound bound =
      KernelBound::Sram;  ///< the largest of compute, SRAM and DRAM (streamed + spill)
};

/// Modelled cost of a program on a device of `pe_count` PEs: made once at load, then used for
/// every execution (the model depends on shapes only, never on tensor values).
struct ProgramCost {
  std::vector<KernelCost> kernels;        ///< one per program kernel, in order
  std::vector<std::int64_t> load_ns;      ///< one DMA per program input (host -> device)
  std::vector<std::int64_t> store_ns;     ///< one DMA per program output (device -> host)
  std::uint64_t weight_bytes = 0;         ///< constants the kernels read (weights, biases)
  std::uint64_t resident_weight_bytes = 0;  ///< of which kept in SRAM across executions
  std::uint64_t activation_bytes = 0;  ///< peak of live activations (SramPlan::peak_live_bytes)
  std::uint64_t spill_bytes = 0;       ///< activation DRAM traffic per execution (reads + writes)
  std::uint64_t kernel_cycles = 0;        ///< sum of kernels[i].cycles (NPU Run)
  std::uint64_t macs = 0;                 ///< sum of kernels[i].macs
  std::uint64_t dma_bytes_to_device = 0;  ///< per execution
  std::uint64_t dma_bytes_to_host = 0;    ///< per execution
};

/// Models `program` on a device file of `pe_count` PEs of a card with `config.pes_per_card`.
ProgramCost model_program(const SimConfig& config, const isa::Program& program, int pe_count);

/// Modelled cost of one kernel; `streamed_weight_bytes` of its weights come from DRAM, and
/// `spill` is its activation traffic to and from DRAM.
KernelCost kernel_cost(const SimConfig& config, const isa::Kernel& kernel, int pe_count,
                       std::uint64_t streamed_weight_bytes, const KernelSpill& spill = {});

/// Modelled duration of one DMA transfer of `bytes` between host and device, in ns.
std::int64_t dma_duration_ns(const SimConfig& config, std::uint64_t bytes);

/// `cycles` at config.clock_ghz, in ns (rounded up).
std::int64_t cycles_to_ns(const SimConfig& config, std::uint64_t cycles);

}  // namespace furiosa::device::sim
