// The staged execution of one request (OpenVINO's async infer request is the model): admission,
// host operators on the workers, NPU calls through the DevicePool, completion exactly once, and
// cancellation at stage boundaries. Never holds a thread while a device works:
//
//   start() (caller):   span Inference starts; the request is admitted (or waits in line) and
//                       handed to a worker (or its first host stage runs right here:
//                       StartOptions::first_stage_on_caller)
//   host stage (worker): host operators up to the next NPU call (Quantize, Lower, external
//                       operators), then Enqueue on the least loaded device; the worker is free
//   device (backend):   the fence's callback hands the request straight back to a worker
//   device stage (worker): accounting and the device spans, then the host stage again (Unlower,
//                       Dequantize, further NPU calls the same way)
//   completion (worker): the Inference span ends, the callback runs, the next waiting request is
//                       admitted
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "device_pool.h"
#include "furiosa/runtime/infer_request.h"
#include "host_buffers.h"

namespace furiosa::runtime::detail {

struct Admission;

/// The input and output shapes of one kernel as its span shows them ("[1,32,112,112]", several
/// joined by ",").
struct KernelShapes {
  std::string inputs;
  std::string outputs;
};

/// KernelShapes of every kernel of `program`, in program order (made once per program, at
/// session creation). Defined in session.cpp, beside device_execution_of().
std::vector<KernelShapes> kernel_shapes_of(const isa::Program& program);

/// What an InferRequest handle shares with the pipeline: the cancel flag, the outcome and the
/// "done" signal. Thread-safe.
struct RequestState {
  virtual ~RequestState() = default;

  /// Bits of `flags`.
  static constexpr unsigned kCancelRequested = 1;  ///< cancel() was called
  static constexpr unsigned kCompleting = 2;       ///< the outcome is fixed, the callback runs
  static constexpr unsigned kCancelledOutcome = 4; ///< ... and it is Error(Cancelled)
  std::atomic<unsigned> flags{0};

  std::mutex mu;               ///< guards the two fields below
  std::condition_variable cv;  ///< signalled when `done` is set
  bool done = false;           ///< the callback has returned
  std::thread::id callback_thread;  ///< the thread running the callback, while it runs

  /// The admission line the request may wait in (so cancel() can withdraw it), shared with the
  /// pipeline so that a handle outliving it stays safe.
  std::shared_ptr<Admission> admission;

  /// InferRequest::cancel(): see infer_request.h.
  bool cancel();
  /// True when cancel() was called (a stage boundary then completes the request).
  bool cancel_requested() const noexcept { return (flags.load(std::memory_order_acquire) & kCancelRequested) != 0; }
};

/// Called exactly once per request, on a worker: outputs on success, else the error.
using Completion = InferCallback;

/// The stages of a session's requests. Thread-safe. The destructor drains: it waits for every
/// request accepted by start() (waiting ones run), then joins the workers.
class RequestPipeline {
 public:
  /// `model`, `devices` and `buffers` are borrowed and must outlive the pipeline; the pipeline
  /// must be told of every signalled execution of `devices` (on_signalled()). `worker_num` >= 1
  /// workers; at most worker_num + 2 x `device_count` requests are admitted into the stages at
  /// once (one execution running and one queued per device, one request in host work per
  /// worker), which bounds the host buffers in use. `profiler`: where every request records,
  /// null for the profiler active when each request starts.
  RequestPipeline(const program::CompiledModel& model, DevicePool& devices, std::size_t device_count,
                  HostBufferPool& buffers, int worker_num, std::shared_ptr<profiler::Profiler> profiler);
  ~RequestPipeline();
  RequestPipeline(const RequestPipeline&) = delete;
  RequestPipeline& operator=(const RequestPipeline&) = delete;

  /// Starts one request on `inputs` (checked by the caller; kept alive until `done` was called).
  /// The Inference span starts now, on the calling thread's track, under the profiler's current
  /// record scope when there is one. `on_start`, when given, is called exactly once: just before
  /// the request's first host step, or before its completion if it never got one (cancelled
  /// while waiting). With `first_stage_here` (StartOptions::first_stage_on_caller) a request
  /// admitted at once runs its first host stage on the calling thread before start() returns;
  /// otherwise a worker runs it. Never blocks on other requests.
  std::shared_ptr<RequestState> start(std::shared_ptr<const std::vector<Tensor>> inputs, Completion done,
                                      std::function<void()> on_start = {}, bool first_stage_here = false);

  /// The DevicePool's Signalled handler: hands the request to a worker (backend or watchdog
  /// thread; short, never blocks on a request).
  void on_signalled(std::shared_ptr<PooledExecution> execution);

  /// Waits until every request accepted so far is done and no hand-off is in progress. Requests
  /// must not be started concurrently with or after it.
  void drain();

  /// Host time spent in the model's host operators, summed over every request, in ns.
  std::uint64_t host_operator_ns() const noexcept { return host_operator_ns_.load(std::memory_order_relaxed); }

  struct Request;

 private:
  friend struct RequestState;  // cancel() hands a withdrawn request to post_host_stage()

  /// Runs the request's steps from its next one until an NPU call is submitted, the steps end or
  /// a cancel stops it. On a worker, or `on_caller` on the thread that started the request (a
  /// completion is then handed to a worker).
  void host_stage(std::shared_ptr<Request> req, bool on_caller = false);
  /// The request's NPU call is over: accounting, device spans, then the host stage. On a worker.
  void device_stage(std::shared_ptr<Request> req);
  /// Fixes the outcome (Cancelled when cancel() came first), hands it to the callback exactly
  /// once, and admits the next waiting request. On a worker.
  void finish(Request& req, std::exception_ptr error);
  /// Submits NPU call `index` of `req` (Enqueue span); the fence owns the continuation after.
  void submit_npu(const std::shared_ptr<Request>& req, int index);
  /// Runs host operator `op` (step `step` of the model) under a span named after it.
  void run_cpu(std::size_t step, const program::CpuOp& op, HostBuffers& b, profiler::Profiler* prof,
               const profiler::SpanContext& ctx);
  /// Queues `req`'s host stage on the workers.
  void post_host_stage(std::shared_ptr<Request> req);

  const program::CompiledModel& model_;
  DevicePool& devices_;
  HostBufferPool& buffers_;
  std::shared_ptr<profiler::Profiler> profiler_;
  /// Per step of model_.steps: for a host step, its position among the model's host operators in
  /// execution order (0..N-1: Quantize, Lower, fallback operators, Unlower, Dequantize, as
  /// FuriosaAI's profiler numbers them in operator_index); -1 for an NPU step.
  std::vector<std::int32_t> host_operator_index_;
  /// Per NPU call of model_.npu_calls: the kernels' shapes for their spans.
  std::vector<std::vector<KernelShapes>> kernel_shapes_;
  std::atomic<std::uint64_t> host_operator_ns_{0};
  std::shared_ptr<Admission> admission_;
  /// The workers (worker_num threads).
  boost::asio::thread_pool workers_;
};

}  // namespace furiosa::runtime::detail
