// The simulator's timing model: deterministic functions of the program's shapes and the
// SimConfig constants (docs/timing.md gives the sources and the calibration).
//
// Per kernel on a device of P PEs (P = 2 for a fused PE):
//   MAC kernels (the kinds whose kernel_kinds.h unit is MacArray: Conv2d, DepthwiseConv2d, MatMul):
//     aligned MACs = the work with input channels, output channels and output row width padded
//                    up to multiples of array_align (a depthwise conv's kH*kW taps take the
//                    place of the input channels); MatMul pads its rows, K and N the same way
//     compute      = aligned MACs / (macs_per_cycle_per_pe * P)
//   vector kernels (MaxPool, Add, Reshape, Requantize, Concat, Transpose, Split,
//   GlobalAveragePool): compute = 0; they are bound by SRAM traffic.
//   sram     = bytes of all inputs and outputs / (sram_bytes_per_cycle_per_pe * P): activations
//              stream through the MAC slices while they compute
//   weights  = MAC kernels: weight bytes / (sram_bytes_per_cycle_per_pe * P): the weights move
//              from SRAM into the slices' register files before the MACs apply them, and the
//              MACs wait for them (assumption: the register files are not double-buffered;
//              docs/timing.md, "Weight loads")
//   dram     = weight bytes streamed from DRAM / the device's share of the card's DRAM
//              bandwidth (P / pes_per_card of dram_bytes_per_ns, per cycle)
//   spill    = activation bytes spilled to and read back from DRAM / the same share: not
//              overlapped with the rest (an eviction makes the room the kernel's output needs,
//              a read-back brings a value its reader needs and there was no room for)
//   exchange = fused PE, the kinds marked fused_exchange in kernel_kinds.h (Conv2d and MatMul):
//              output bytes / fused_exchange_bytes_per_cycle
//              (the PEs split the output channels; the next kernel reduces over all of them, so
//              each PE needs the other's half; depthwise and vector kernels stay channel-local)
//   cycles   = kernel_overhead_cycles + exchange + weights + max(compute, sram, dram) + spill
// SRAM residency (sram_plan.h): activations first, held by every PE of the device; weights kept
// resident in program order in what the peak of live activations leaves (split between the PEs),
// the weights of later kernels streamed from DRAM at every execution; activations that do not
// fit are evicted to DRAM or written there by a tiled kernel, and read back by their readers.
// DMA: dma_latency_ns + bytes / pcie_bytes_per_ns per transfer (one per program input/output),
// on DMA engines that run beside the PE (furiosa/device/engine_timeline.h).
#include "timing.h"

#include <algorithm>
#include <cmath>
#include <variant>

#include "furiosa/device/kernel_kinds.h"

namespace furiosa::device::sim {

namespace {

std::uint64_t udim(std::int64_t d) { return d > 0 ? static_cast<std::uint64_t>(d) : 0; }

// d rounded up to a multiple of a (a >= 1).
std::uint64_t align_up(std::int64_t d, std::int64_t a) {
  const std::uint64_t ua = udim(std::max<std::int64_t>(a, 1));
  return (udim(d) + ua - 1) / ua * ua;
}

// ceil(work / rate) cycles, for work >= 0 and rate > 0.
std::uint64_t cycles_for(double work, double rate) {
  return static_cast<std::uint64_t>(std::ceil(work / rate));
}

// MACs the array performs for a MAC kernel, with its dimensions padded to the array's sizes.
std::uint64_t aligned_macs(const isa::Kernel& kernel, std::int64_t a) {
  if (kernel.inputs.empty() || kernel.outputs.empty()) return 0;
  if (const auto* p = std::get_if<isa::Conv2dParams>(&kernel.params)) {
    const Shape& x = kernel.inputs[0].shape;
    const Shape& y = kernel.outputs[0].shape;
    const Shape& w = p->weight.shape;
    if (x.size() != 4 || y.size() != 4 || w.size() != 4 || p->group <= 0) return 0;
    const std::uint64_t taps = udim(w[2]) * udim(w[3]);
    const std::uint64_t pixels = udim(y[0]) * udim(y[2]) * align_up(y[3], a);
    if (kernel.kind == isa::KernelKind::DepthwiseConv2d) {
      return pixels * align_up(y[1], a) * align_up(static_cast<std::int64_t>(taps), a);
    }
    const std::int64_t c_per_group = x[1] / p->group, m_per_group = y[1] / p->group;
    return pixels * udim(p->group) * align_up(m_per_group, a) * align_up(c_per_group, a) * taps;
  }
  if (const auto* p = std::get_if<isa::MatMulParams>(&kernel.params)) {
    const Shape& x = kernel.inputs[0].shape;
    const Shape& b = p->b.shape;
    if (x.size() < 2 || b.size() != 2) return 0;
    std::uint64_t batch = 1;
    for (std::size_t i = 0; i + 2 < x.size(); ++i) batch *= udim(x[i]);
    return batch * align_up(x[x.size() - 2], a) * align_up(x[x.size() - 1], a) * align_up(b[1], a);
  }
  return 0;
}

// Kinds the MAC array runs (kernel_kinds.h), costed by their aligned MACs.
bool is_mac_kernel(isa::KernelKind kind) {
  return isa::kernel_kind_info(kind).unit == isa::KernelUnit::MacArray;
}

// Bytes of all the kernel's inputs and outputs (constant operands included).
std::uint64_t io_bytes(const isa::Kernel& kernel) {
  std::uint64_t bytes = 0;
  for (const auto& ref : kernel.inputs) bytes += ref.size_bytes();
  for (const auto& ref : kernel.outputs) bytes += ref.size_bytes();
  return bytes;
}

std::uint64_t output_bytes(const isa::Kernel& kernel) {
  std::uint64_t bytes = 0;
  for (const auto& ref : kernel.outputs) bytes += ref.size_bytes();
  return bytes;
}

KernelCost cost(const SimConfig& config, const isa::Kernel& kernel, int pe_count,
                std::uint64_t streamed, const KernelSpill& spill) {
  const double pes = static_cast<double>(std::max(pe_count, 1));
  KernelCost c;
  c.macs = is_mac_kernel(kernel.kind) ? isa::kernel_macs(kernel) : 0;
  if (is_mac_kernel(kernel.kind)) {
    c.aligned_macs = aligned_macs(kernel, config.array_align);
    c.compute_cycles = cycles_for(static_cast<double>(c.aligned_macs), config.macs_per_cycle_per_pe * pes);
  }
  const std::uint64_t activation_bytes = io_bytes(kernel),
                      weight_bytes = kernel_weight_bytes(kernel);
  c.io_bytes = activation_bytes + weight_bytes;
  c.sram_cycles =
      cycles_for(static_cast<double>(activation_bytes), config.sram_bytes_per_cycle_per_pe * pes);
  if (is_mac_kernel(kernel.kind)) {
    c.weight_load_cycles =
        cycles_for(static_cast<double>(weight_bytes), config.sram_bytes_per_cycle_per_pe * pes);
  }
  c.dram_bytes = streamed;
  c.spill_read_bytes = spill.read_bytes;
  c.spill_write_bytes = spill.write_bytes;
  const std::uint64_t spill_traffic = spill.read_bytes + spill.write_bytes;
  if (streamed + spill_traffic > 0) {
    const double share = static_cast<double>(std::max(pe_count, 1)) /
                         static_cast<double>(std::max(config.pes_per_card, 1));
    const double dram_bytes_per_cycle = config.dram_bytes_per_ns / config.clock_ghz * std::min(share, 1.0);
    c.dram_cycles = cycles_for(static_cast<double>(streamed), dram_bytes_per_cycle);
    c.spill_cycles = cycles_for(static_cast<double>(spill_traffic), dram_bytes_per_cycle);
  }
  if (pe_count > 1 && isa::kernel_kind_info(kernel.kind).fused_exchange) {
    c.exchange_cycles = cycles_for(static_cast<double>(output_bytes(kernel)), config.fused_exchange_bytes_per_cycle);
  }
  // Streamed weights overlap the compute (they are read in small pieces ahead of use); spills
  // do not: an eviction must leave SRAM before the kernel's output can take its place, and a
  // value read back must be on chip before its reader uses it, because there was no room to
  // hold it there earlier (docs/timing.md, "Spills").
  // Weight loads do not overlap the MACs either: a slice applies the weights its register file
  // holds, and a kernel's weights are loaded before its MACs use them.
  c.cycles = config.kernel_overhead_cycles + c.exchange_cycles + c.weight_load_cycles +
             std::max({c.compute_cycles, c.sram_cycles, c.dram_cycles}) + c.spill_cycles;
  const std::uint64_t dram_total = c.dram_cycles + c.spill_cycles;
  const std::uint64_t sram_total = c.sram_cycles + c.weight_load_cycles;  // all SRAM traffic
  c.bound = c.compute_cycles >= sram_total && c.compute_cycles >= dram_total ? KernelBound::Compute
            : dram_total > sram_total                                        ? KernelBound::Dram
                                                                             : KernelBound::Sram;
  return c;
}

}  // namespace

const char* bound_name(KernelBound bound) noexcept {
  switch (bound) {
    case KernelBound::Compute: return "compute";
    case KernelBound::Sram: return "sram";
    case KernelBound::Dram: return "dram";
  }
  return "sram";
}

KernelCost kernel_cost(const SimConfig& config, const isa::Kernel& kernel, int pe_count,
                       std::uint64_t streamed_weight_bytes, const KernelSpill& spill) {
  return cost(config, kernel, pe_count, streamed_weight_bytes, spill);
}

ProgramCost model_program(const SimConfig& config, const isa::Program& program, int pe_count) {
  // The compiler's choice between resident weights and room for activations: the cheapest of
  // kWeightBudgetSteps + 1 evenly spaced weight budgets (0, 1/16, ..., all of a PE's SRAM).
  constexpr std::uint64_t kWeightBudgetSteps = 16;
  ProgramCost best;
  for (std::uint64_t step = 0; step <= kWeightBudgetSteps; ++step) {
    const std::uint64_t budget = config.sram_bytes_per_pe / kWeightBudgetSteps * step;
    const SramPlan plan = plan_sram(program, pe_count, config.sram_bytes_per_pe, budget);
    ProgramCost pc;
    pc.activation_bytes = plan.peak_live_bytes;
    pc.resident_weight_bytes = plan.resident_weight_bytes;
    pc.spill_bytes = plan.spill_bytes;
    pc.kernels.reserve(program.kernels.size());
    for (std::size_t i = 0; i < program.kernels.size(); ++i) {
      const isa::Kernel& k = program.kernels[i];
      const std::uint64_t w = kernel_weight_bytes(k);
      pc.weight_bytes += w;
      pc.kernels.push_back(
          cost(config, k, pe_count, w - plan.resident_weights[i], plan.kernels[i]));
      pc.kernel_cycles += pc.kernels.back().cycles;
      pc.macs += pc.kernels.back().macs;
    }
    // Ties keep the plan with more resident weights (later steps), fewer DRAM bytes per execution.
    if (step == 0 || pc.kernel_cycles <= best.kernel_cycles) best = std::move(pc);
  }
  ProgramCost pc = std::move(best);
  for (const auto& ref : program.inputs) {
    pc.load_ns.push_back(dma_duration_ns(config, ref.size_bytes()));
    pc.dma_bytes_to_device += ref.size_bytes();
  }
  for (const auto& ref : program.outputs) {
    pc.store_ns.push_back(dma_duration_ns(config, ref.size_bytes()));
    pc.dma_bytes_to_host += ref.size_bytes();
  }
  return pc;
}

std::int64_t dma_duration_ns(const SimConfig& config, std::uint64_t bytes) {
  const double transfer_ns = std::ceil(static_cast<double>(bytes) / config.pcie_bytes_per_ns);
  return config.dma_latency_ns + static_cast<std::int64_t>(transfer_ns);
}

std::int64_t cycles_to_ns(const SimConfig& config, std::uint64_t cycles) {
  return static_cast<std::int64_t>(std::ceil(static_cast<double>(cycles) / config.clock_ghz));
}

}  // namespace furiosa::device::sim
