// RequestPipeline (request_pipeline.h): admission, the host and device stages, completion and
// cancellation of one request.
//
// Thread hand-offs of one request (docs/serving.md counts them for furiosa-serve):
//   caller -> worker (start posts the host stage; none with first_stage_on_caller) -> device
//   (submit) -> worker (the fence's callback posts the device stage, which runs the next host
//   stage and the completion on the same worker).
// A request that had to wait for admission is posted by the worker that completed the request
// whose place it takes.
#include "request_pipeline.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <cassert>
#include <deque>
#include <utility>

#include "cpu_ops.h"
#include "furiosa/host/cpu_ops.h"
#include "furiosa/profiler/device_execution.h"
#include "session.h"

namespace furiosa::runtime::detail {

/// The admission line, shared by the pipeline and every request (so that cancel() through a
/// handle outliving the pipeline never touches freed memory). Guarded by `mu`.
struct Admission {
  std::mutex mu;
  std::condition_variable cv;  ///< signalled when active or handoffs reach 0
  std::size_t active = 0;      ///< requests admitted into the stages, not yet completed
  std::size_t max_active = 1;
  /// Fence callbacks (backend threads) currently inside post() to the workers: the workers must
  /// not be destroyed while such a thread is still signalling their queue.
  std::size_t handoffs = 0;
  /// Requests cancel() took out of `waiting`, completing outside the admission limit.
  std::size_t withdrawn = 0;
  std::deque<std::shared_ptr<RequestPipeline::Request>> waiting;  ///< accepted, not yet admitted
  RequestPipeline* pipeline = nullptr;  ///< null once the pipeline drained for good
};

/// One request. Owned by the stage currently working on it (shared_ptr handed from stage to
/// stage, through the workers' queue, the admission line or the device's fence) and by its
/// handles; only one stage touches its stage fields at a time.
struct RequestPipeline::Request : PooledExecution, RequestState {
  std::shared_ptr<const std::vector<Tensor>> inputs;
  Completion callback;
  std::function<void()> on_start;
  profiler::Profiler* profiler = nullptr;  ///< where this inference's spans go (when traced)
  std::shared_ptr<profiler::Profiler> profiler_owner;  ///< keeps `profiler` alive until completion
  bool traced = false;
  profiler::SpanRecord span;               ///< the Inference span (recorded at completion)
  std::unique_ptr<HostBuffers> buffers;    ///< leased from the pool while in the stages
  std::size_t next_step = 0;               ///< index into CompiledModel::steps
  std::uint64_t flow_id = 0;               ///< of the NPU call in flight
  /// Holds a place of the admission limit (else: withdrawn from the line by cancel()). Written
  /// under the admission lock before the request is handed to a worker.
  bool admitted = false;

  profiler::SpanContext context() const { return {span.trace_id, span.span_id}; }
};

namespace {

std::exception_ptr cancelled_error() {
  return std::make_exception_ptr(
      Error(ErrorCode::Cancelled, "the request was cancelled (InferRequest::cancel) before it completed"));
}

}  // namespace

bool RequestState::cancel() {
  const unsigned old = flags.fetch_or(kCancelRequested, std::memory_order_acq_rel);
  if ((old & kCompleting) != 0) return (old & kCancelledOutcome) != 0;  // the outcome was fixed
  if ((old & kCancelRequested) != 0) return true;                       // an earlier cancel() did it
  // Still waiting for admission? Then no stage will ever look at the flag: complete it now.
  std::shared_ptr<RequestPipeline::Request> withdrawn;
  std::lock_guard lock(admission->mu);
  for (auto it = admission->waiting.begin(); it != admission->waiting.end(); ++it) {
    if (static_cast<RequestState*>(it->get()) == this) {
      withdrawn = std::move(*it);
      admission->waiting.erase(it);
      break;
    }
  }
  // Waiting means the pipeline is alive (its drain waits for the line to empty), and it stays so
  // while the request counts as withdrawn: its finish() takes no place of the admission limit
  // and hands none on.
  if (withdrawn) {
    ++admission->withdrawn;
    admission->pipeline->post_host_stage(std::move(withdrawn));  // sees the flag and completes
  }
  return true;
}

RequestPipeline::RequestPipeline(const program::CompiledModel& model, DevicePool& devices, std::size_t device_count,
                                 HostBufferPool& buffers, int worker_num, std::shared_ptr<profiler::Profiler> profiler)
    : model_(model),
      devices_(devices),
      buffers_(buffers),
      profiler_(std::move(profiler)),
      admission_(std::make_shared<Admission>()),
      workers_(static_cast<std::size_t>(worker_num)) {
  host_operator_index_.reserve(model_.steps.size());
  std::int32_t host_ops = 0;
  for (const program::Step& step : model_.steps) {
    host_operator_index_.push_back(step.kind == program::Step::Kind::Cpu ? host_ops++ : -1);
  }
  kernel_shapes_.reserve(model_.npu_calls.size());
  for (const program::NpuCall& call : model_.npu_calls)
    kernel_shapes_.push_back(kernel_shapes_of(*call.program));
  admission_->max_active = static_cast<std::size_t>(worker_num) + 2 * device_count;
  admission_->pipeline = this;
}

RequestPipeline::~RequestPipeline() {
  drain();
  {
    std::lock_guard lock(admission_->mu);
    admission_->pipeline = nullptr;
  }
  workers_.join();
}

void RequestPipeline::drain() {
  std::unique_lock lock(admission_->mu);
  admission_->cv.wait(lock, [this] {
    return admission_->active == 0 && admission_->withdrawn == 0 && admission_->handoffs == 0 &&
           admission_->waiting.empty();
  });
}

void RequestPipeline::post_host_stage(std::shared_ptr<Request> req) {
  boost::asio::post(workers_, [this, req = std::move(req)]() mutable { host_stage(std::move(req)); });
}

std::shared_ptr<RequestState> RequestPipeline::start(std::shared_ptr<const std::vector<Tensor>> inputs,
                                                     Completion done, std::function<void()> on_start,
                                                     bool first_stage_here) {
  auto req = std::make_shared<Request>();
  req->inputs = std::move(inputs);
  req->callback = std::move(done);
  req->on_start = std::move(on_start);
  req->admission = admission_;
#ifndef NDEBUG
  // StartOptions::inputs_checked: the caller's promise; hold it to it where asserts are on.
  assert(req->inputs->size() == model_.input_slots.size());
  for (std::size_t i = 0; i < req->inputs->size(); ++i) {
    const auto& slot = model_.slots[static_cast<std::size_t>(model_.input_slots[i])];
    assert((*req->inputs)[i].dtype() == slot.dtype && (*req->inputs)[i].shape() == slot.shape);
  }
#endif
  // The Inference span: started here, recorded when the request completes.
  std::shared_ptr<profiler::Profiler> prof_owner = profiler_ ? profiler_ : profiler::active_profiler();
  req->traced = prof_owner && prof_owner->is_recording();
  if (req->traced) {
    req->profiler = prof_owner.get();
    req->events_profiler = req->profiler;
    req->profiler_owner = std::move(prof_owner);
    profiler::Profiler* prof = req->profiler;
    // Every inference is a trace of its own (as in FuriosaAI's profiler); inside the thread's
    // open record("label") scope its parent_span_id is the scope's span (which stays in the
    // scope's own trace), else it is a root.
    const profiler::SpanContext scope = prof->current_context();
    req->span.trace_id = prof->new_trace().trace_id;
    req->span.parent_span_id = scope.valid() ? scope.span_id : 0;
    req->span.span_id = prof->next_span_id();
    req->span.name = "Inference";
    req->span.thread_id = profiler::current_thread_id();
    req->span.start_ns = profiler::now_ns();
  }
  {
    std::lock_guard lock(admission_->mu);
    if (admission_->active >= admission_->max_active) {
      admission_->waiting.push_back(req);  // admitted by finish() of an earlier request
      return req;
    }
    ++admission_->active;
    req->admitted = true;
  }
  if (first_stage_here) host_stage(req, /*on_caller=*/true);
  else post_host_stage(req);
  return req;
}

void RequestPipeline::host_stage(std::shared_ptr<Request> req, bool on_caller) {
  std::exception_ptr error;
  try {
    if (req->on_start) std::exchange(req->on_start, {})();
    // A stage boundary: a cancelled request runs no (further) host operator.
    if (!req->cancel_requested()) {
      if (!req->buffers) {  // first visit: lease buffers, bind the inputs and constants
        req->buffers = buffers_.acquire();
        HostBuffers& b = *req->buffers;
        const auto& inputs = *req->inputs;
        for (std::size_t i = 0; i < inputs.size(); ++i) {
          b.ref[static_cast<std::size_t>(model_.input_slots[i])] = &inputs[i];
        }
        for (std::size_t s = 0; s < model_.slots.size(); ++s) {
          if (model_.slots[s].constant) b.ref[s] = model_.slots[s].constant.get();
        }
      }
      const profiler::SpanContext ctx = req->traced ? req->context() : profiler::SpanContext{};
      while (req->next_step < model_.steps.size()) {
        const program::Step& step = model_.steps[req->next_step];
        if (step.kind == program::Step::Kind::Npu) {
          // From here the fence owns the continuation: `req` must not be touched after this call.
          submit_npu(req, step.npu);
          return;
        }
        run_cpu(req->next_step, step.cpu, *req->buffers, req->traced ? req->profiler : nullptr, ctx);
        ++req->next_step;
        if (req->cancel_requested()) break;  // finish() turns it into Cancelled
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  // Completions run on a worker, also for a first stage the caller ran.
  if (on_caller) {
    boost::asio::post(workers_, [this, req = std::move(req), error]() mutable { finish(*req, error); });
    return;
  }
  finish(*req, error);
}

void RequestPipeline::submit_npu(const std::shared_ptr<Request>& req, int index) {
  const auto& call = model_.npu_calls[static_cast<std::size_t>(index)];
  HostBuffers& b = *req->buffers;
  std::vector<std::span<const std::byte>> dev_in;
  for (int s : call.input_slots) dev_in.push_back(b.readable(s));
  std::vector<std::span<std::byte>> dev_out;
  for (int s : call.output_slots) dev_out.push_back(b.writable(model_, s));
  const profiler::SpanContext ctx = req->traced ? req->context() : profiler::SpanContext{};
  profiler::Profiler* prof = ctx.valid() ? req->profiler : nullptr;
  req->flow_id = prof != nullptr ? prof->next_flow_id() : 0;
  profiler::ScopedSpan enqueue(prof, "Enqueue", ctx);
  enqueue.record().flow_id = req->flow_id;
  devices_.submit(req, static_cast<std::size_t>(index), std::move(dev_in), std::move(dev_out),
                  [&enqueue] { enqueue.end(); });
}

void RequestPipeline::on_signalled(std::shared_ptr<PooledExecution> execution) {
  auto req = std::static_pointer_cast<Request>(std::move(execution));
  // The backend's thread is no thread of ours: the destructor must not destroy the workers while
  // this thread is still inside post() (signalling their queue), so the hand-off is counted
  // until post() returns.
  Admission& adm = *admission_;
  {
    std::lock_guard lock(adm.mu);
    ++adm.handoffs;
  }
  boost::asio::post(workers_, [this, req = std::move(req)]() mutable { device_stage(std::move(req)); });
  std::lock_guard lock(adm.mu);
  if (--adm.handoffs == 0) adm.cv.notify_all();
}

void RequestPipeline::device_stage(std::shared_ptr<Request> req) {
  DevicePool::Outcome out = devices_.complete(*req);
  if (out.kind == DevicePool::Outcome::Kind::Retry) {
    host_stage(std::move(req));  // the same NPU call again (or Cancelled, if cancel() came)
    return;
  }
  std::exception_ptr error = out.error;
  if (!error && req->traced) {
    try {
      const int npu = model_.steps[req->next_step].npu;
      const auto* shapes = npu >= 0 && static_cast<std::size_t>(npu) < kernel_shapes_.size()
                               ? &kernel_shapes_[static_cast<std::size_t>(npu)]
                               : nullptr;
      profiler::record_device_execution(*req->profiler,
                                        device_execution_of(out.fence->timing(), *out.file, shapes),
                                        req->context(), req->flow_id);
    } catch (...) {
      error = std::current_exception();
    }
  }
  out.fence.reset();
  ++req->next_step;
  if (error) finish(*req, error);
  else host_stage(std::move(req));  // checks for a cancel first
}

void RequestPipeline::finish(Request& req, std::exception_ptr error) {
  // Fix the outcome in one step, so that cancel() knows which one the callback gets.
  unsigned old = req.flags.load(std::memory_order_acquire);
  unsigned next = 0;
  do {
    next = old | RequestState::kCompleting |
           ((old & RequestState::kCancelRequested) != 0 ? RequestState::kCancelledOutcome : 0u);
  } while (!req.flags.compare_exchange_weak(old, next, std::memory_order_acq_rel));
  if ((old & RequestState::kCancelRequested) != 0) error = cancelled_error();
  if (req.on_start) std::exchange(req.on_start, {})();
  std::vector<Tensor> outputs;
  if (!error && req.buffers) {
    HostBuffers& b = *req.buffers;
    for (int s : model_.output_slots) {
      const auto i = static_cast<std::size_t>(s);
      if (b.tensors[i]) outputs.push_back(std::move(*b.tensors[i]));
      else outputs.push_back(*b.ref[i]);  // an input or constant returned as an output
    }
  }
  if (req.buffers) buffers_.release(std::move(req.buffers));
  if (req.traced) {
    req.span.end_ns = profiler::now_ns();
    req.profiler->record(std::move(req.span));
  }
  Completion callback = std::move(req.callback);
  req.inputs.reset();
  {
    std::lock_guard lock(req.mu);
    req.callback_thread = std::this_thread::get_id();
  }
  try {
    callback(std::move(outputs), error);
  } catch (const std::exception& e) {
    spdlog::error("an inference callback threw (ignored): {}", e.what());
  } catch (...) {
    spdlog::error("an inference callback threw a non-standard exception (ignored)");
  }
  {
    std::lock_guard lock(req.mu);
    req.callback_thread = {};
    req.done = true;
  }
  req.cv.notify_all();
  Admission& adm = *admission_;
  std::shared_ptr<Request> next_request;
  {
    std::lock_guard lock(adm.mu);
    if (!req.admitted) {
      if (--adm.withdrawn == 0) adm.cv.notify_all();
    } else if (!adm.waiting.empty()) {  // the finished request's place goes to the oldest waiting one
      next_request = std::move(adm.waiting.front());
      adm.waiting.pop_front();
      next_request->admitted = true;
    } else if (--adm.active == 0) {
      adm.cv.notify_all();
    }
  }
  if (next_request) post_host_stage(std::move(next_request));
}

void RequestPipeline::run_cpu(std::size_t step, const program::CpuOp& op, HostBuffers& b, profiler::Profiler* prof,
                              const profiler::SpanContext& ctx) {
  profiler::ScopedSpan span(ctx.valid() ? prof : nullptr,
                            op.kind == program::CpuOpKind::External ? std::string_view(op.node->op_type)
                                                                     : program::cpu_op_name(op.kind),
                            ctx);
  span.record().operator_index = host_operator_index_[step];
  // Host operator time for serving metrics (host_operator_ns), traced or not.
  struct Timer {
    std::atomic<std::uint64_t>& total;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~Timer() {
      total.fetch_add(static_cast<std::uint64_t>(
                          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count()),
                      std::memory_order_relaxed);
    }
  } timer{host_operator_ns_};
  if (op.kind != program::CpuOpKind::External) {
    const int in = op.inputs.at(0), out = op.outputs.at(0);
    run_host_step(op, model_.slots[static_cast<std::size_t>(in)], b.readable(in),
                  model_.slots[static_cast<std::size_t>(out)], b.writable(model_, out));
    return;
  }
  std::vector<const Tensor*> ins;
  for (int s : op.inputs) ins.push_back(s >= 0 ? b.ref[static_cast<std::size_t>(s)] : nullptr);
  // The previous inference's outputs of this node (still in their slots unless handed to the
  // caller) lend their storage: no fresh allocation per inference (host::run_cpu_op's reuse).
  std::vector<Tensor> reuse(op.outputs.size());
  for (std::size_t o = 0; o < op.outputs.size(); ++o) {
    const int s = op.outputs[o];
    if (s < 0 || !b.tensors[static_cast<std::size_t>(s)]) continue;
    reuse[o] = std::move(*b.tensors[static_cast<std::size_t>(s)]);
    b.tensors[static_cast<std::size_t>(s)].reset();
    b.ref[static_cast<std::size_t>(s)] = nullptr;
  }
  auto outs = host::run_cpu_op(*op.node, ins, &reuse);
  for (std::size_t o = 0; o < op.outputs.size() && o < outs.size(); ++o) {
    const int s = op.outputs[o];
    if (s < 0) continue;
    const auto& slot = model_.slots[static_cast<std::size_t>(s)];
    if (outs[o].dtype() != slot.dtype || outs[o].shape() != slot.shape) {
      throw Error(ErrorCode::Internal,
                  fmt::format("external operator '{}' ({}) produced {} {} for '{}', compiled as {} {}", op.node_name,
                              op.node->op_type, dtype_name(outs[o].dtype()), shape_to_string(outs[o].shape()),
                              slot.name, dtype_name(slot.dtype), shape_to_string(slot.shape)));
    }
    b.tensors[static_cast<std::size_t>(s)] = std::move(outs[o]);
    b.ref[static_cast<std::size_t>(s)] = &*b.tensors[static_cast<std::size_t>(s)];
  }
}

}  // namespace furiosa::runtime::detail
