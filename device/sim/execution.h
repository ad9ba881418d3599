// Private to the simulator: what one execution does once its device's queue has taken it.
//
// The queue (execution_queue.h) places the execution on the device's modelled timeline
// (place_on_timeline, with the queue lock held, in the order executions are taken), then a
// compute thread runs it (execute): functional mode copies the inputs in (Load), computes the
// kernels with ONNX quantized-operator semantics (kernels/) and copies the outputs out
// (Store); timing mode computes nothing. Pacing then sleeps until the modelled Store end, and the
// fence is signalled with the timing or failed with a typed error.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "furiosa/device/device.h"
#include "furiosa/device/engine_timeline.h"
#include "furiosa/device/sim.h"
#include "sim_counters.h"

namespace furiosa::device::sim {

class SimLoadedProgram;

/// One submitted execution.
struct Task {
  std::shared_ptr<const SimLoadedProgram> program;  ///< what to run (kept loaded until done)
  std::vector<std::span<const std::byte>> inputs;   ///< the caller's input bytes, one per input
  std::vector<std::span<std::byte>> outputs;        ///< where the outputs go, one per output
  std::shared_ptr<Fence> fence;                     ///< signalled or failed exactly once
  std::uint64_t index = 0;                          ///< execution_index
  std::optional<SimFaultKind> fault;  ///< injected into this execution (decided when taken)
};

/// ns since the steady clock's epoch: the clock of every timestamp in ExecutionTiming.
std::int64_t steady_now_ns();

/// Modelled timing of `task` on device `file`, placed on the device's engines by
/// `timeline.place` (engine_timeline.h: Load, kernels back to back, Store; a queued execution's
/// Load overlaps the kernels before it). Call in the order executions are taken.
ExecutionTiming place_on_timeline(const SimConfig& config, const DeviceFile& file, const Task& task,
                                  EngineTimeline& timeline);

/// Runs `task` on the calling thread: its injected fault, if any, else the DMA checks and (in
/// functional mode) Load, kernels and Store; adds it to `counters`, paces it
/// (SimConfig::min_execution_time, SimConfig::pacing) and signals or fails its fence. Errors go to
/// the fence as Error(DeviceFault) (or DeviceNotFound for a lost device) naming `device_name`,
/// the execution and, for a kernel, the instruction and its node.
void execute(const SimConfig& config, const std::string& device_name, SimCounters& counters,
             Task& task, ExecutionTiming timing);

}  // namespace furiosa::device::sim
