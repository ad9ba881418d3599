// One execution of a simulated device (execution.h): timeline placement, host computation,
// counters, pacing and the fence.
#include "execution.h"
#include "fork_join.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <string_view>
#include <thread>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "kernels.h"
#include "loaded_program.h"
#include "sim_faults.h"
#include "timing.h"

namespace furiosa::device::sim {

namespace {

/// Checks that `ref` (a program input or output) is well formed and inside the region;
/// `execution` is the 1-based count used in messages.
void check_dma(const std::string& name, const isa::TensorRef& ref, std::span<std::byte> region,
               std::string_view what, std::size_t index, std::uint64_t execution) {
  const std::uint64_t size = ref.size_bytes();
  const bool bad_layout = ref.layout == isa::Layout::LoweredNCHW && ref.shape.size() != 4;
  if (bad_layout || ref.address > region.size() || size > region.size() - ref.address) {
    throw Error(ErrorCode::DeviceFault,
                fmt::format("{}: execution {}: DMA of {} {} ({} bytes at 0x{:x}) is outside the "
                            "program region of {} bytes",
                            name, execution, what, index, size, ref.address, region.size()),
                ErrorSubject::of_device(name));
  }
}

/// Runs kernel `index` functionally; any failure becomes Error(DeviceFault) naming the device
/// file, the execution (1-based), the instruction index, the kernel name and its node.
void run_kernel_of(const std::string& name, const isa::Kernel& kernel, std::size_t index,
                   std::span<std::byte> region, std::uint64_t execution,
                   const PreparedProgram* prepared) {
  auto fault = [&](std::string_view detail) {
    return Error(
        ErrorCode::DeviceFault,
        fmt::format("{}: execution {}: instruction {} ({}, node '{}') failed: {}", name, execution,
                    index, isa::kernel_name(kernel.kind), escape_text(kernel.node_name), detail),
        ErrorSubject{name, kernel.node_name, {}, {}});
  };
  try {
    run_kernel(kernel, region, prepared, index);
  } catch (const Error& e) {
    throw fault(e.message());
  } catch (const std::exception& e) {
    throw fault(e.what());
  }
}

/// The steady-clock time point `ns` after the clock's epoch.
std::chrono::steady_clock::time_point steady_time_point(std::int64_t ns) {
  return std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::nanoseconds(ns)));
}

}  // namespace

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ExecutionTiming place_on_timeline(const SimConfig& config, const DeviceFile& file, const Task& task,
                                  EngineTimeline& timeline) {
  const ProgramCost& cost = task.program->cost();
  const isa::Program& prog = task.program->program();
  std::int64_t load_ns = 0, exec_ns = 0, store_ns = 0;
  for (std::int64_t ns : cost.load_ns) load_ns += ns;
  for (const auto& k : cost.kernels) exec_ns += cycles_to_ns(config, k.cycles);
  for (std::int64_t ns : cost.store_ns) store_ns += ns;
  const EnginePlacement at = timeline.place(steady_now_ns(), load_ns, exec_ns, store_ns);
  ExecutionTiming t;
  t.execution_index = task.index;
  t.load_start_ns = at.load_start_ns;
  t.load_end_ns = at.load_end_ns;
  t.exec_start_ns = at.exec_start_ns;
  t.exec_end_ns = at.exec_end_ns;
  t.store_start_ns = at.store_start_ns;
  t.store_end_ns = at.store_end_ns;
  t.busy_start_ns = at.busy_start_ns;
  std::int64_t clock = at.exec_start_ns;  // the kernels back to back
  t.kernels.reserve(cost.kernels.size());
  for (std::size_t k = 0; k < cost.kernels.size(); ++k) {
    KernelTiming kt;
    kt.kind = prog.kernels[k].kind;
    kt.operator_index = prog.kernels[k].operator_index;
    kt.instruction_index = static_cast<std::int32_t>(k);
    kt.cycles = cost.kernels[k].cycles;
    kt.bound = bound_name(cost.kernels[k].bound);
    kt.spill_bytes = cost.kernels[k].spill_read_bytes + cost.kernels[k].spill_write_bytes;
    kt.dram_bytes = cost.kernels[k].dram_bytes + kt.spill_bytes;
    kt.macs = cost.kernels[k].macs;  // made at load: isa::kernel_macs of the MAC kernels, 0 otherwise
    kt.bytes = cost.kernels[k].io_bytes;
    kt.weight_load_cycles = cost.kernels[k].weight_load_cycles;
    kt.start_ns = clock;
    clock += cycles_to_ns(config, kt.cycles);
    kt.end_ns = clock;
    t.kernels.push_back(kt);
  }
  t.kernel_cycles = cost.kernel_cycles;
  t.task_cycles = static_cast<std::uint64_t>(
      std::ceil(static_cast<double>(t.store_end_ns - t.load_start_ns) * config.clock_ghz));
  t.macs = cost.macs;
  t.peak_macs_per_cycle = static_cast<std::uint64_t>(config.macs_per_cycle_per_pe) *
                          static_cast<std::uint64_t>(file.pe_count());
  t.dma_bytes_to_device = cost.dma_bytes_to_device;
  t.dma_bytes_to_host = cost.dma_bytes_to_host;
  return t;
}

void execute(const SimConfig& config, const std::string& name, SimCounters& counters, Task& task,
             ExecutionTiming timing) {
  const isa::Program& prog = task.program->program();
  const std::span<std::byte> primary = task.program->region();
  // Messages count executions from 1 ("execution 50" is the 50th), as FURIOSA_SIM_FAULTS's
  // every=N does; task.index (ExecutionTiming::execution_index) counts from 0.
  const std::uint64_t nth = task.index + 1;
  std::exception_ptr error;
  std::byte* region_data = nullptr;
  std::int64_t host_start_ns = steady_now_ns(), host_end_ns = 0;
  try {
    if (task.fault == SimFaultKind::Lost) throw device_lost_error(name);
    if (task.fault == SimFaultKind::Dma) {
      throw Error(
          ErrorCode::DeviceFault,
          fmt::format("{}: execution {}: DMA error during Load (injected fault)", name, nth),
          ErrorSubject::of_device(name));
    }
    if (task.fault == SimFaultKind::Error) {
      throw Error(ErrorCode::DeviceFault,
                  fmt::format("{}: execution {}: execution error (injected fault)", name, nth),
                  ErrorSubject::of_device(name));
    }
    for (std::size_t i = 0; i < prog.inputs.size(); ++i)
      check_dma(name, prog.inputs[i], primary, "input", i, nth);
    for (std::size_t i = 0; i < prog.outputs.size(); ++i)
      check_dma(name, prog.outputs[i], primary, "output", i, nth);
    if (config.mode == SimMode::Functional) {
      region_data = task.program->acquire_region();
      const std::span<std::byte> region(region_data, primary.size());
      // Idle compute threads of this device stand by for the kernels' intra-op jobs.
      const ForkJoin::Section section;
      for (std::size_t i = 0; i < prog.inputs.size(); ++i) {  // Load
        const std::span<const std::byte> src = task.inputs[i];
        if (!src.empty())
          std::memcpy(region.data() + prog.inputs[i].address, src.data(), src.size());
      }
      if (config.kernel_stats) {  // SimConfig::kernel_stats: host time per kernel kind
        std::array<KernelKindStats, kKernelKindCount> stats{};
        const ProgramCost& cost = task.program->cost();
        for (std::size_t k = 0; k < prog.kernels.size(); ++k) {  // Execution
          const std::int64_t start = steady_now_ns();
          run_kernel_of(name, prog.kernels[k], k, region, nth, task.program->prepared());
          const auto kind = static_cast<std::size_t>(prog.kernels[k].kind);
          if (kind >= stats.size()) continue;
          stats[kind].calls += 1;
          stats[kind].ns += static_cast<std::uint64_t>(steady_now_ns() - start);
          stats[kind].macs += k < cost.kernels.size() ? cost.kernels[k].macs : 0;
        }
        counters.add_kernel_stats(stats);
      } else {
        for (std::size_t k = 0; k < prog.kernels.size(); ++k) {  // Execution
          run_kernel_of(name, prog.kernels[k], k, region, nth, task.program->prepared());
        }
      }
      for (std::size_t i = 0; i < prog.outputs.size(); ++i) {  // Store
        const std::span<std::byte> dst = task.outputs[i];
        if (!dst.empty())
          std::memcpy(dst.data(), region.data() + prog.outputs[i].address, dst.size());
      }
      host_end_ns = steady_now_ns();
    }
  } catch (const Error&) {
    error = std::current_exception();
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(Error(ErrorCode::DeviceFault,
                                          fmt::format("{}: execution {}: {}", name, nth, e.what()),
                                          ErrorSubject::of_device(name)));
  }
  if (region_data != nullptr) task.program->release_region(region_data);
  // The simulator's own figures (docs/devices.md): host time spent computing the execution
  // functionally (0 in timing mode) and, when the host finished after the modelled Store end,
  // the overrun, also drawn as a "SimOverrun" span (the fence was signalled then).
  timing.backend_counters["sim.host_compute_ns"] =
      host_end_ns > 0 ? host_end_ns - host_start_ns : 0;
  const std::int64_t overrun =
      host_end_ns > timing.store_end_ns ? host_end_ns - timing.store_end_ns : 0;
  timing.backend_counters["sim.overrun_ns"] = overrun;
  if (overrun > 0) timing.backend_spans.push_back({"SimOverrun", timing.store_end_ns, host_end_ns});
  counters.add_execution(timing, !error, overrun);
  if (config.min_execution_time.count() > 0) {  // SimConfig::min_execution_time
    std::this_thread::sleep_until(steady_time_point(host_start_ns) + config.min_execution_time);
  }
  if (config.pacing) std::this_thread::sleep_until(steady_time_point(timing.store_end_ns));
  if (error) {
    task.fence->fail(error);
  } else {
    task.fence->signal(std::move(timing));
  }
}

}  // namespace furiosa::device::sim
