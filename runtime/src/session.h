// A session: a compiled model bound to one or more devices, a worker pool, and the staged
// execution of one inference. Runner (sync) and the submit/recv queues are front ends of it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "furiosa/profiler/device_execution.h"
#include "furiosa/runtime/runner.h"
#include "model_source.h"

namespace furiosa::runtime::detail {

/// What a session is created from: the public SessionOptions.
using SessionConfig = SessionOptions;


/// The profiler's description of one execution on `file` from the device's timing (the names
/// it holds borrow from `t` and the kernel-name table: use it while `t` lives).
profiler::DeviceExecution device_execution_of(const device::ExecutionTiming& t, const device::DeviceFile& file);

/// The model description (inputs, outputs, formats) of a compiled model.
Model model_of(const compiler::CompiledModel& compiled);

/// Called exactly once per request, on a worker thread: outputs on success, else the error.
using Completion = std::function<void(std::vector<Tensor> outputs, std::exception_ptr error)>;

/// Thread-safe. Destroying it waits for every request already started (including those on a
/// device) and releases the devices; it must not be destroyed from one of its own threads.
///
/// One request moves through stages (OpenVINO's async infer request is the model), never
/// holding a thread while a device works:
///   host stage (worker_num workers): host operators up to the next NPU call, then Enqueue
///     (device submit); the worker returns to the pool at once.
///   fence-wait executor (one thread): woken by the fence's on_signal callback, records the
///     device spans and hands the request back to the host stage (or completes it with the
///     device's error).
///   host stage again: the host operators after the NPU call (post-ops), ..., completion.
/// Completions always run on a worker, exactly once per request.
class Session {
 public:
  /// Compiles `source` (or loads its program file), opens every device of `config.device`,
  /// loads the programs. With no device spec anywhere (argument, FURIOSA_DEVICES, NPU_DEVNAME) a
  /// program file opens one device of its own target's PE count. Throws like create_runner.
  Session(ModelSource source, const SessionConfig& config);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const noexcept { return model_; }
  const compiler::CompiledModel& compiled() const noexcept { return compiled_; }
  /// Device files held, comma separated ("npu0pe0,npu0pe1").
  std::string device_names() const;
  /// The backend and why it was chosen ("sim (no Warboy card found by pcie)").
  const std::string& backend() const noexcept { return backend_; }
  /// Per device, what the runtime saw and did (faults, timeouts, resets, lost). Thread-safe.
  std::vector<DeviceHealth> device_health() const;
  /// Host time spent in the model's host (CPU) operators, summed over every request, in ns.
  /// Thread-safe.
  std::uint64_t host_operator_ns() const noexcept { return host_operator_ns_.load(std::memory_order_relaxed); }
  /// Throws Error(InvalidInput) naming the tensor when `inputs` do not fit model().inputs.
  void validate(const std::vector<Tensor>& inputs) const;

  /// Starts one inference (inputs must be valid). `inputs` stays alive until `done` has been
  /// called. The Inference span starts now, on the calling thread's track, under the profiler's
  /// current record scope when there is one. `on_start`, when given, is called on a worker just
  /// before the request's first host step.
  void execute_async(std::shared_ptr<const std::vector<Tensor>> inputs, Completion done,
                     std::function<void()> on_start = {});

  struct DeviceSlot;
  struct Buffers;
  struct Request;

 private:
  /// Host stage: runs the request's steps from its next one until an NPU call is submitted or
  /// the steps end. Runs on a worker.
  void host_stage(std::shared_ptr<Request> req);
  /// Fence-wait stage: the request's NPU call finished (fence signalled). Runs on the
  /// fence-wait executor.
  void fence_stage(std::shared_ptr<Request> req);
  /// Hands the outputs (or `error`) to the request's completion, exactly once. Runs on a worker.
  void finish(Request& req, std::exception_ptr error);
  /// A set of host buffers from the pool (a new one when all are in use); give it back with
  /// release_buffers().
  std::unique_ptr<Buffers> acquire_buffers();
  void release_buffers(std::unique_ptr<Buffers> b);
  /// The least loaded device that is not lost (one being reset only when no other is usable).
  /// Throws Error(DeviceNotFound) when every device is lost.
  DeviceSlot& pick_device();
  /// The watchdog thread: checks every device each poll interval until stopped.
  void watchdog_loop();
  /// Recovers `dev` when its oldest running execution made no progress within the limit: that
  /// request fails with DeviceTimeout, the device is reset, the executions behind it are retried
  /// (their fences fail with a reset abort). A device that cannot be reset is marked lost.
  void check_device(DeviceSlot& dev);
  /// Records a device event (zero-length NPU span on the PE's track) into `prof` when recording.
  void record_device_event(profiler::Profiler* prof, const DeviceSlot& dev, std::string name,
                           std::string detail);
  /// Submits NPU call `index` of `req` (Enqueue span) and arranges for fence_stage.
  void submit_npu(const std::shared_ptr<Request>& req, int index);
  /// Runs host operator `op` (step `step` of compiled_.steps) under a span named after it whose
  /// operator_index is host_operator_index_[step].
  void run_cpu(std::size_t step, const compiler::CpuOp& op, Buffers& b, profiler::Profiler* prof,
               const profiler::SpanContext& ctx);
  /// Records the device spans of one execution (Load, Execution, kernels, Store, backend spans)
  /// into `prof` under `parent`.
  void record_npu_spans(profiler::Profiler& prof, const DeviceSlot& dev, const device::ExecutionTiming& t,
                        const profiler::SpanContext& parent, std::uint64_t flow_id);

  compiler::CompiledModel compiled_;
  /// Per step of compiled_.steps: for a host step, its position among the model's host
  /// operators in execution order (0..N-1: Quantize, Lower, fallback operators, Unlower,
  /// Dequantize, as FuriosaAI's profiler numbers them in operator_index); -1 for an NPU step.
  std::vector<std::int32_t> host_operator_index_;
  std::atomic<std::uint64_t> host_operator_ns_{0};  ///< see host_operator_ns()
  Model model_;
  std::string backend_;
  /// The profiler given in the options (records every inference); null = the active one per
  /// inference (profiler::active_profiler()).
  std::shared_ptr<profiler::Profiler> profiler_;
  std::vector<std::unique_ptr<DeviceSlot>> devices_;
  /// Host stage workers (worker_num threads).
  std::unique_ptr<boost::asio::thread_pool> pool_;
  /// The fence-wait executor (one thread).
  std::unique_ptr<boost::asio::thread_pool> fence_waiter_;
  /// Admission: at most max_active_ requests are between their first host step and their
  /// completion (worker_num + 2 per device: each device keeps one execution running and one
  /// queued while every worker does host work on another); later ones wait in pending_, not yet
  /// taken by a worker. This bounds host buffers and lets a full queue push back on submit().
  /// The destructor waits until both are empty and no hand-off is in progress.
  std::mutex active_mu_;
  std::condition_variable active_cv_;
  std::size_t active_ = 0;
  std::size_t max_active_ = 1;
  /// Fence callbacks (backend threads) currently inside post() to the fence-wait executor.
  std::size_t handoffs_ = 0;
  std::deque<std::shared_ptr<Request>> pending_;
  /// Host buffers of finished inferences, reused so the hot path allocates only the outputs it
  /// hands to the caller. worker_num sets are made and sized at load.
  std::mutex buffers_mu_;
  std::vector<std::unique_ptr<Buffers>> free_buffers_;
  /// The watchdog (docs/devices.md "Recovery"): one thread per session, polling every
  /// watch_interval_ (a fraction of the smallest limit) until the destructor stops it.
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool watch_stop_ = false;
  std::chrono::nanoseconds watch_interval_{0};
  std::thread watchdog_;
};

}  // namespace furiosa::runtime::detail
