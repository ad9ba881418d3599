// A session: a compiled model bound to one or more devices, a worker pool, and the staged
// execution of one inference. Runner (sync) and the submit/recv queues are front ends of it.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "furiosa/runtime/runner.h"

namespace furiosa::runtime::detail {

/// What a session is created from: the public SessionOptions.
using SessionConfig = SessionOptions;


/// Called exactly once per request, on a worker thread: outputs on success, else the error.
using Completion = std::function<void(std::vector<Tensor> outputs, std::exception_ptr error)>;

/// Thread-safe. Destroying it waits for the requests already started and releases the devices;
/// it must not be destroyed from one of its own worker threads.
class Session {
 public:
  /// Compiles `graph`, opens every device of `config.device`, loads the programs. Throws like
  /// create_runner.
  Session(compiler::Graph graph, const SessionConfig& config);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const noexcept { return model_; }
  const compiler::CompiledModel& compiled() const noexcept { return compiled_; }
  /// Device files held, comma separated ("npu0pe0,npu0pe1").
  std::string device_names() const;
  /// Throws Error(InvalidInput) naming the tensor when `inputs` do not fit model().inputs.
  void validate(const std::vector<Tensor>& inputs) const;

  /// Starts one inference on a worker (inputs must be valid). `inputs` stays alive until `done`
  /// has been called. The Inference span starts now, on the calling thread's track, under
  /// `parent` (or the profiler's current record scope when `parent` is empty).
  /// `on_start`, when given, is called on the worker just before the request starts.
  void execute_async(std::shared_ptr<const std::vector<Tensor>> inputs, Completion done,
                     std::function<void()> on_start = {});

  struct DeviceSlot;
  struct Buffers;

 private:

  std::vector<Tensor> execute(const std::vector<Tensor>& inputs, const profiler::SpanContext& ctx);
  /// A set of host buffers from the pool (a new one when all are in use); give it back with
  /// release_buffers().
  std::unique_ptr<Buffers> acquire_buffers();
  void release_buffers(std::unique_ptr<Buffers> b);
  DeviceSlot& pick_device();
  void run_npu(int index, Buffers& b, const profiler::SpanContext& ctx);
  void run_cpu(const compiler::CpuOp& op, Buffers& b, const profiler::SpanContext& ctx);
  void record_npu_spans(const DeviceSlot& dev, const device::ExecutionTiming& t,
                        const profiler::SpanContext& parent, std::uint64_t flow_id);

  compiler::CompiledModel compiled_;
  Model model_;
  std::shared_ptr<profiler::Profiler> profiler_;
  std::vector<std::unique_ptr<DeviceSlot>> devices_;
  std::unique_ptr<boost::asio::thread_pool> pool_;
  /// Host buffers of finished inferences, reused so the hot path allocates only the outputs it
  /// hands to the caller. worker_num sets are made and sized at load.
  std::mutex buffers_mu_;
  std::vector<std::unique_ptr<Buffers>> free_buffers_;
};

}  // namespace furiosa::runtime::detail
