// The simulator's timing model. These are first, uncalibrated formulas built from the Warboy
// figures of DESIGN.md; they are deterministic functions of the kernel shapes only.
//
//   DMA:      dma_latency_ns + bytes / pcie_bytes_per_ns                      (per transfer)
//   MAC kernels (Conv2d, DepthwiseConv2d, MatMul):
//             kernel_overhead_cycles + ceil(macs / (macs_per_cycle_per_pe * pe_count))
//   data movement and vector kernels (MaxPool, Add, Reshape, Requantize, Concat, Transpose,
//   Split, GlobalAveragePool):
//             kernel_overhead_cycles + ceil(bytes_touched / (64 * pe_count))
//             where bytes_touched = bytes of all inputs and outputs in their layouts and 64 is a
//             guessed bytes/cycle/PE of the vector path. GlobalAveragePool is costed here even
//             though kernel_macs() counts its N*C*H*W accumulations: streaming its input (>= one
//             byte per accumulation at 64 B/cycle) dominates the MAC time (16K MAC/cycle).
//   Every KernelKind has an explicit case; an unknown kind (a corrupted program) costs only the
//   overhead, and the functional model rejects it anyway.
//   kernel ns = cycles / clock_ghz
//
// Not modelled yet: alignment losses when channels or width are not multiples of 32, SRAM vs.
// DRAM placement, overlap of DMA with execution.
#include "timing.h"

#include <algorithm>
#include <cmath>

namespace furiosa::device::sim {

namespace {

/// Guessed bytes per cycle and PE that data-movement kernels stream (uncalibrated).
constexpr double kVectorBytesPerCyclePerPe = 64.0;

// Bytes a kernel reads and writes, counted in each tensor's layout.
std::uint64_t bytes_touched(const isa::Kernel& kernel) {
  std::uint64_t bytes = 0;
  for (const auto& ref : kernel.inputs) bytes += ref.size_bytes();
  for (const auto& ref : kernel.outputs) bytes += ref.size_bytes();
  return bytes;
}

// ceil(work / rate) as an integer count, for work >= 0 and rate > 0.
std::uint64_t ceil_div(double work, double rate) {
  return static_cast<std::uint64_t>(std::ceil(work / rate));
}

}  // namespace

std::int64_t dma_duration_ns(const SimConfig& config, std::uint64_t bytes) {
  const double transfer_ns = std::ceil(static_cast<double>(bytes) / config.pcie_bytes_per_ns);
  return config.dma_latency_ns + static_cast<std::int64_t>(transfer_ns);
}

std::uint64_t kernel_cycles(const SimConfig& config, const isa::Kernel& kernel, int pe_count) {
  const double pes = static_cast<double>(std::max(pe_count, 1));
  switch (kernel.kind) {
    case isa::KernelKind::Conv2d:
    case isa::KernelKind::DepthwiseConv2d:
    case isa::KernelKind::MatMul:
      return config.kernel_overhead_cycles + ceil_div(static_cast<double>(isa::kernel_macs(kernel)),
                                                      config.macs_per_cycle_per_pe * pes);
    case isa::KernelKind::MaxPool:
    case isa::KernelKind::Add:
    case isa::KernelKind::Reshape:
    case isa::KernelKind::Requantize:
    case isa::KernelKind::Concat:
    case isa::KernelKind::Transpose:
    case isa::KernelKind::Split:
    case isa::KernelKind::GlobalAveragePool:
      return config.kernel_overhead_cycles +
             ceil_div(static_cast<double>(bytes_touched(kernel)), kVectorBytesPerCyclePerPe * pes);
  }
  return config.kernel_overhead_cycles;
}

std::int64_t cycles_to_ns(const SimConfig& config, std::uint64_t cycles) {
  return static_cast<std::int64_t>(std::ceil(static_cast<double>(cycles) / config.clock_ghz));
}

}  // namespace furiosa::device::sim
