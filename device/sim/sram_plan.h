// Private: where a program's activations live on a device's on-chip SRAM, and what does not fit
// costs in DRAM traffic (the timing model's SRAM capacity term; docs/timing.md "On-chip memory").
#pragma once

#include <cstdint>
#include <vector>

#include "furiosa/device/isa.h"

namespace furiosa::device::sim {

/// DRAM traffic of one kernel's activations that do not stay in SRAM, in bytes per execution.
struct KernelSpill {
  std::uint64_t read_bytes = 0;   ///< inputs read back from DRAM (spilled earlier or never on chip)
  std::uint64_t write_bytes = 0;  ///< values this kernel's execution writes to DRAM: outputs that
                                  ///< do not fit, and live values evicted to make room for it
};

/// The SRAM plan of one program on a device of `pe_count` PEs.
struct SramPlan {
  std::vector<KernelSpill> kernels;             ///< one per program kernel, in order
  std::vector<std::uint64_t> resident_weights;  ///< weight bytes of each kernel kept in SRAM
                                                ///< across executions (0: streamed each time)
  std::uint64_t peak_live_bytes = 0;            ///< most activation bytes live at one kernel
  std::uint64_t activation_capacity = 0;        ///< SRAM per PE left to activations
  std::uint64_t resident_weight_bytes = 0;      ///< sum of resident_weights
  std::uint64_t spill_bytes = 0;                ///< sum of every kernel's read + write bytes
};

/// Plans `program`'s SRAM use on `pe_count` PEs of `sram_bytes_per_pe` each. The rules (all
/// assumptions: Warboy's compiler does not publish its memory planner; docs/timing.md):
///  - an activation is a value a kernel (or Load, for program inputs) writes; it is live from
///    then until its last reader (Store, for program outputs). On a fused PE every activation is
///    held by both PEs (each PE computes half the output channels and receives the other half,
///    the exchange term), while weights are split between them;
///  - weights stay resident, in program order, while they fit in `weight_budget_per_pe` (a PE
///    holds its share); the rest of the SRAM holds activations. The timing model tries several
///    budgets and keeps the cheapest plan, as a compiler would (timing.cpp);
///  - at each kernel, values it does not touch are evicted to DRAM, farthest next use first, until
///    its on-chip inputs and its outputs fit; outputs that still do not fit are written to DRAM
///    as they are produced (the kernel is tiled), and a later reader reads them from DRAM. A value
///    read from DRAM stays on chip afterwards when it fits. A value already written to DRAM once is
///    evicted again for free.
/// Deterministic: depends on shapes and addresses only.
SramPlan plan_sram(const isa::Program& program, int pe_count, std::uint64_t sram_bytes_per_pe,
                   std::uint64_t weight_budget_per_pe);

/// Weight bytes (constants) a kernel reads: conv weight + bias, matmul B + bias; 0 for other kinds.
std::uint64_t kernel_weight_bytes(const isa::Kernel& kernel);

}  // namespace furiosa::device::sim
