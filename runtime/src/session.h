// A session: a compiled model bound to one or more devices, with the parts its requests run
// through (device_pool.h, host_buffers.h, request_pipeline.h). Runner (runner.h: run, run_async,
// start) and the submit/recv queues (queue.h) are front ends of it.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device_pool.h"
#include "furiosa/profiler/device_execution.h"
#include "furiosa/runtime/runner.h"
#include "host_buffers.h"
#include "model_source.h"
#include "request_pipeline.h"

namespace furiosa::runtime::detail {

/// What a session is created from: the public SessionOptions.
using SessionConfig = SessionOptions;

/// The profiler's description of one execution on `file` from the device's timing (the names
/// it holds borrow from `t`, the kernel-name table and `shapes`: use it while they live).
/// `shapes`, when given, are kernel_shapes_of() the executed program (one per kernel of `t`).
profiler::DeviceExecution device_execution_of(const device::ExecutionTiming& t,
                                              const device::DeviceFile& file,
                                              const std::vector<KernelShapes>* shapes = nullptr);

/// The model description (inputs, outputs, formats) of a compiled model.
Model model_of(const program::CompiledModel& compiled);

/// Thread-safe. Destroying it waits for every request already started (including those on a
/// device and those waiting for admission) and releases the devices; it must not be destroyed
/// from one of its own threads (a request's callback).
class Session {
 public:
  /// Compiles `source` (or loads its program file), opens every device of `config.device`,
  /// loads the programs, starts the workers and the watchdog. With no device spec anywhere
  /// (argument, FURIOSA_DEVICES, NPU_DEVNAME) a program file opens one device of its own
  /// target's PE count. Throws like create_runner.
  Session(ModelSource source, const SessionConfig& config);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const noexcept { return model_; }
  const program::CompiledModel& compiled() const noexcept { return compiled_; }
  /// Device files held, comma separated ("npu0pe0,npu0pe1").
  std::string device_names() const;
  /// The backend and why it was chosen ("sim (no Warboy card found by pcie)").
  const std::string& backend() const noexcept { return backend_; }
  /// Per device, what the runtime saw and did (faults, timeouts, resets, lost). Thread-safe.
  std::vector<DeviceHealth> device_health() const;
  /// Host time spent in the model's host (CPU) operators, summed over every request, in ns.
  /// Thread-safe.
  std::uint64_t host_operator_ns() const noexcept;
  /// Throws Error(InvalidInput) naming the tensor when `inputs` do not fit model().inputs.
  void validate(const std::vector<Tensor>& inputs) const;

  /// Starts one inference (inputs must be valid): RequestPipeline::start.
  std::shared_ptr<RequestState> start(std::shared_ptr<const std::vector<Tensor>> inputs, Completion done,
                                      std::function<void()> on_start = {}, bool first_stage_here = false);

 private:
  program::CompiledModel compiled_;
  Model model_;
  std::string backend_;
  /// The profiler given in the options (records every inference); null = the active one per
  /// inference (profiler::active_profiler()).
  std::shared_ptr<profiler::Profiler> profiler_;
  std::unique_ptr<DevicePool> devices_;
  std::unique_ptr<HostBufferPool> buffers_;
  std::unique_ptr<RequestPipeline> pipeline_;
};

}  // namespace furiosa::runtime::detail
