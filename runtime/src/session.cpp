// Session: compile, open the devices, and run inferences through staged executors.
//
// One inference (DESIGN.md "One inference, end to end"; docs/design.md "Runtime"):
//   submitting thread:   span Inference starts (a new trace; its parent is the open record scope)
//   host stage (worker): host operators up to an NPU call (Quantize, Lower, external
//                        operators), then Enqueue on the least loaded device; the worker is free
//   fence-wait executor: the fence's callback wakes it; device spans Load/Execution/kernels/Store
//                        from the fence's timestamps; the request goes back to the host stage
//   host stage (worker): the next host operators (Unlower, Dequantize, ...), further NPU calls
//                        the same way, then the Inference span ends and the completion is called
//                        exactly once
//
// Recovery (docs/devices.md "Recovery"): each device keeps its running executions in submission
// order; a watchdog thread fails the oldest with DeviceTimeout when the device made no progress
// for its limit, resets the device and resubmits the executions the reset aborted (at most
// kMaxResetRetries times each). A lost device (DeviceNotFound) takes no more requests.
#include "session.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <algorithm>
#include <chrono>
#include <optional>

#include "cpu_ops.h"
#include "furiosa/host/cpu_ops.h"
#include "furiosa/device/backends.h"
#include "furiosa/device/device_spec.h"
#include "furiosa/profiler/device_execution.h"

namespace furiosa::runtime::detail {

namespace {

std::string format_of(const Shape& s) {
  switch (s.size()) {
    case 4: return "NCHW";
    case 2: return "NC";
    case 1: return "C";
    default: return "";
  }
}

}  // namespace

profiler::DeviceExecution device_execution_of(const device::ExecutionTiming& t, const device::DeviceFile& file) {
  profiler::DeviceExecution e;
  e.card = file.card;
  e.pe_index = file.first_pe;
  e.execution_index = static_cast<std::int64_t>(t.execution_index);
  e.load_start_ns = t.load_start_ns;
  e.load_end_ns = t.load_end_ns;
  e.exec_start_ns = t.exec_start_ns;
  e.exec_end_ns = t.exec_end_ns;
  e.store_start_ns = t.store_start_ns;
  e.store_end_ns = t.store_end_ns;
  e.cycles = static_cast<std::int64_t>(t.kernel_cycles);
  e.kernels.reserve(t.kernels.size());
  for (const auto& k : t.kernels) {
    e.kernels.push_back({isa::kernel_name(k.kind), k.start_ns, k.end_ns, k.operator_index, k.instruction_index,
                         static_cast<std::int64_t>(k.cycles)});
  }
  for (const auto& b : t.backend_spans) e.backend_intervals.push_back({b.name, b.start_ns, b.end_ns});
  return e;
}

Model model_of(const compiler::CompiledModel& compiled) {
  // Formats: the axis naming the compiler recorded for the slot (e.g. "NHWC" for TFLite
  // images), else the rank-based default.
  const auto desc = [](const compiler::HostSlot& slot) {
    return TensorDesc{slot.name, slot.dtype, slot.shape,
                      slot.format.empty() ? format_of(slot.shape) : slot.format};
  };
  Model model;
  for (int s : compiled.input_slots) model.inputs.push_back(desc(compiled.slots[static_cast<std::size_t>(s)]));
  for (int s : compiled.output_slots) model.outputs.push_back(desc(compiled.slots[static_cast<std::size_t>(s)]));
  return model;
}

/// How many times one request is resubmitted after resets aborted its execution before it
/// fails with the abort error (a bound, so a device that keeps hanging cannot loop a request).
constexpr int kMaxResetRetries = 3;

/// One opened device with the model's programs loaded on it.
struct Session::DeviceSlot {
  std::unique_ptr<device::Device> device;
  std::vector<std::shared_ptr<device::LoadedProgram>> programs;  // per NpuCall
  std::atomic<int> in_flight{0};
  std::int64_t timeout_ns = 0;  ///< watchdog limit of one execution
  std::atomic<bool> lost{false};
  /// Guards the fields below; held while submitting, so `running` is in device order.
  mutable std::mutex mu;
  std::condition_variable cv;  ///< signalled when a reset ends
  std::deque<std::shared_ptr<Request>> running;  ///< submitted, fence not yet seen, oldest first
  std::int64_t last_progress_ns = 0;  ///< last fence signal, or submit to an idle device
  bool resetting = false;
  DeviceHealth health;  ///< counters (device_file, counters filled on read)
};

/// Host buffers of one inference: dense slots hold Tensors (user inputs and constants are
/// referenced in place), lowered slots raw bytes. Reused across inferences (Session's pool): a
/// slot keeps its storage unless its Tensor was handed to the caller as an output.
struct Session::Buffers {
  explicit Buffers(std::size_t n) : tensors(n), raw(n), ref(n, nullptr) {}
  std::vector<std::optional<Tensor>> tensors;
  std::vector<std::vector<std::byte>> raw;
  std::vector<const Tensor*> ref;

  std::span<std::byte> writable(const compiler::CompiledModel& cm, int s) {
    const auto& slot = cm.slots[static_cast<std::size_t>(s)];
    const auto i = static_cast<std::size_t>(s);
    if (slot.layout == isa::Layout::Linear) {
      // A moved-from Tensor (an output given to the caller) has lost its storage: make a new one.
      if (!tensors[i] || tensors[i]->dtype() != slot.dtype || tensors[i]->shape() != slot.shape ||
          tensors[i]->bytes().size() != slot.size_bytes()) {
        tensors[i].emplace(slot.dtype, slot.shape);
      }
      ref[i] = &*tensors[i];
      return tensors[i]->bytes();
    }
    raw[i].resize(slot.size_bytes());
    return raw[i];
  }

  std::span<const std::byte> readable(int s) const {
    const auto i = static_cast<std::size_t>(s);
    return ref[i] ? ref[i]->bytes() : std::span<const std::byte>(raw[i]);
  }
};

Session::Session(ModelSource source, const SessionConfig& config) {
  if (config.worker_num < 1) {
    throw Error(ErrorCode::InvalidArgument, fmt::format("worker_num must be >= 1, got {}", config.worker_num));
  }
  // A profiler given in the options records everything; otherwise each inference records into
  // the profiler active when it starts (an open profiler::ProfileScope, else
  // FURIOSA_PROFILER_OUTPUT_PATH's), as the SDK's `with profile(...)` attaches to every session.
  profiler_ = config.profiler;
  // Device spec precedence: explicit > FURIOSA_DEVICES > NPU_DEVNAME > warboy(2)*1.
  // Backend: a given driver, else by name / FURIOSA_BACKEND / card presence.
  device::Driver* chosen = config.driver;
  if (chosen != nullptr) {
    backend_ = fmt::format("{} (driver given by the caller)", chosen->name());
  } else {
    const device::BackendChoice choice = device::select_backend(device::builtin_registry(), config.backend);
    chosen = choice.driver;
    backend_ = fmt::format("{} ({})", choice.name, choice.reason);
  }
  device::Driver& driver = *chosen;
  // A program file without any device spec given opens a device of its own target.
  device::DeviceSpecChoice spec_choice = device::choose_device_spec(config.device);
  if (spec_choice.source == "default" && source.program() != nullptr) {
    spec_choice.text = fmt::format("warboy({})*1", source.program()->options.pe_count);
  }
  const auto spec = device::parse_device_spec(spec_choice.text);
  const std::vector<device::CardInfo> cards = driver.enumerate();
  if (cards.empty()) {  // one line saying which backend found nothing, and what runs without a card
    throw Error(ErrorCode::DeviceNotFound,
                fmt::format("{}: no NPU card found (backend {}); the simulator runs without one: "
                            "--backend sim or FURIOSA_BACKEND=sim",
                            driver.name(), backend_));
  }
  const std::vector<device::DeviceFile> files = device::resolve_device_spec(spec, cards);
  {
    const std::shared_ptr<profiler::Profiler> compile_profiler = profiler_ ? profiler_ : profiler::active_profiler();
    profiler::ScopedSpan compile_span(compile_profiler.get(), "Compile", {});
    compiler::CompilerOptions copts = config.compiler_config;
    copts.pe_count = files.front().pe_count();
    copts.batch_size = config.batch_size;
    const bool from_program_file = source.program() != nullptr;
    compiler::CachedCompile result = source.compile(copts, files.front().name());
    compiled_ = std::move(result.model);
    // cache: hit | miss | off; a program file is loaded, not compiled.
    compile_span.record().attributes = {{"cache", std::string(compiler::cache_status_name(result.cache))}};
    if (from_program_file) compile_span.record().attributes.emplace_back("program", "loaded from a program file");
  }
  model_ = model_of(compiled_);
  host_operator_index_.reserve(compiled_.steps.size());
  std::int32_t host_ops = 0;
  for (const compiler::Step& step : compiled_.steps) {
    host_operator_index_.push_back(step.kind == compiler::Step::Kind::Cpu ? host_ops++ : -1);
  }
  for (const auto& file : files) {
    auto slot = std::make_unique<DeviceSlot>();
    slot->device = driver.open(file);  // DeviceBusy / DeviceNotFound name the file
    for (const auto& call : compiled_.npu_calls) slot->programs.push_back(slot->device->load(call.program));
    devices_.push_back(std::move(slot));
  }
  // Watchdog limits: the option, else 1000 x the longest program's modelled time with a floor.
  std::int64_t min_timeout = 0;
  for (auto& slot : devices_) {
    std::int64_t modelled = 0;
    for (const auto& p : slot->programs) modelled = std::max(modelled, p->modelled_ns());
    const std::int64_t floor_ns = std::chrono::nanoseconds(kDefaultDeviceTimeoutFloor).count();
    slot->timeout_ns = config.device_timeout.count() > 0
                           ? std::chrono::nanoseconds(config.device_timeout).count()
                           : std::max(floor_ns, modelled * 1000);
    slot->health.device_file = slot->device->file().name();
    min_timeout = min_timeout == 0 ? slot->timeout_ns : std::min(min_timeout, slot->timeout_ns);
  }
  watch_interval_ = std::chrono::nanoseconds(std::clamp<std::int64_t>(min_timeout / 8, 1'000'000, 250'000'000));
  pool_ = std::make_unique<boost::asio::thread_pool>(static_cast<std::size_t>(config.worker_num));
  fence_waiter_ = std::make_unique<boost::asio::thread_pool>(1);
  max_active_ = static_cast<std::size_t>(config.worker_num) + 2 * devices_.size();
  // One set of host buffers per worker, with every intermediate slot allocated now.
  std::vector<bool> external(compiled_.slots.size(), false);
  for (int s : compiled_.input_slots) external[static_cast<std::size_t>(s)] = true;
  for (int s : compiled_.output_slots) external[static_cast<std::size_t>(s)] = true;
  for (int w = 0; w < config.worker_num; ++w) {
    auto b = std::make_unique<Buffers>(compiled_.slots.size());
    for (std::size_t s = 0; s < compiled_.slots.size(); ++s) {
      if (!external[s] && !compiled_.slots[s].constant) b->writable(compiled_, static_cast<int>(s));
    }
    free_buffers_.push_back(std::move(b));
  }
  watchdog_ = std::thread([this] { watchdog_loop(); });
  spdlog::debug("session ready on {} ({} NPU programs)", device_names(), compiled_.npu_calls.size());
}

Session::~Session() {
  // Started requests finish (including those waiting on a device) before the devices close.
  {
    std::unique_lock lock(active_mu_);
    active_cv_.wait(lock, [this] { return active_ == 0 && handoffs_ == 0; });
  }
  if (watchdog_.joinable()) {
    {
      std::lock_guard lock(watch_mu_);
      watch_stop_ = true;
    }
    watch_cv_.notify_all();
    watchdog_.join();
  }
  if (fence_waiter_) fence_waiter_->join();
  if (pool_) pool_->join();
}

std::string Session::device_names() const {
  std::string out;
  for (const auto& d : devices_) out += (out.empty() ? "" : ",") + d->device->file().name();
  return out;
}

std::vector<DeviceHealth> Session::device_health() const {
  std::vector<DeviceHealth> out;
  for (const auto& d : devices_) {
    DeviceHealth h;
    {
      std::lock_guard lock(d->mu);
      h = d->health;
    }
    h.lost = d->lost.load();
    h.counters = d->device->counters();
    out.push_back(std::move(h));
  }
  return out;
}

void Session::validate(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != model_.inputs.size()) {
    std::string names;
    for (const auto& d : model_.inputs) names += (names.empty() ? "" : ", ") + d.name;
    throw Error(ErrorCode::InvalidInput,
                fmt::format("expected {} input(s) ({}), got {}", model_.inputs.size(), names, inputs.size()));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const TensorDesc& d = model_.inputs[i];
    if (inputs[i].dtype() != d.dtype) {
      throw Error(ErrorCode::InvalidInput,
                  fmt::format("input '{}': expected dtype {}, got {}", d.name, dtype_name(d.dtype),
                              dtype_name(inputs[i].dtype())),
                  ErrorSubject::of_tensor(d.name));
    }
    if (inputs[i].shape() != d.shape) {
      throw Error(ErrorCode::InvalidInput,
                  fmt::format("input '{}': expected shape {}, got {}", d.name, shape_to_string(d.shape),
                              shape_to_string(inputs[i].shape())),
                  ErrorSubject::of_tensor(d.name));
    }
  }
}

/// One inference in flight. Owned by the stage currently working on it (shared_ptr handed from
/// stage to stage); only one stage touches it at a time, each handoff going through the
/// executors' queues or the fence's lock.
struct Session::Request {
  std::shared_ptr<const std::vector<Tensor>> inputs;
  Completion done;
  std::function<void()> on_start;
  profiler::Profiler* profiler = nullptr;  ///< where this inference's spans go (when traced)
  std::shared_ptr<profiler::Profiler> profiler_owner;  ///< keeps `profiler` alive until completion
  bool traced = false;
  profiler::SpanRecord span;               ///< the Inference span (recorded at completion)
  std::unique_ptr<Buffers> buffers;        ///< leased from the session's pool while in flight
  std::size_t next_step = 0;               ///< index into CompiledModel::steps
  /// The NPU call in flight (between submit_npu and fence_stage).
  DeviceSlot* device = nullptr;
  std::shared_ptr<device::Fence> fence;
  std::uint64_t flow_id = 0;
  /// Set by the watchdog (under the device's mu) instead of the fence's result: DeviceTimeout
  /// for the hung execution, DeviceNotFound when the device could not be reset.
  std::exception_ptr forced_error;
  bool reset_victim = false;  ///< queued behind a hung execution when the device was reset
  int reset_retries = 0;

  profiler::SpanContext context() const { return {span.trace_id, span.span_id}; }
};

void Session::execute_async(std::shared_ptr<const std::vector<Tensor>> inputs, Completion done,
                            std::function<void()> on_start) {
  auto req = std::make_shared<Request>();
  req->inputs = std::move(inputs);
  req->done = std::move(done);
  req->on_start = std::move(on_start);
  // The Inference span: started here, recorded when the request completes.
  std::shared_ptr<profiler::Profiler> prof_owner = profiler_ ? profiler_ : profiler::active_profiler();
  req->traced = prof_owner && prof_owner->is_recording();
  if (req->traced) {
    req->profiler = prof_owner.get();
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
    std::lock_guard lock(active_mu_);
    if (active_ >= max_active_) {
      pending_.push_back(std::move(req));  // admitted by finish() of an earlier request
      return;
    }
    ++active_;
  }
  boost::asio::post(*pool_, [this, req = std::move(req)]() mutable { host_stage(std::move(req)); });
}

void Session::host_stage(std::shared_ptr<Request> req) {
  try {
    if (!req->buffers) {  // first visit: lease buffers, bind the inputs and constants
      if (req->on_start) req->on_start();
      req->buffers = acquire_buffers();
      Buffers& b = *req->buffers;
      const auto& inputs = *req->inputs;
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        b.ref[static_cast<std::size_t>(compiled_.input_slots[i])] = &inputs[i];
      }
      for (std::size_t s = 0; s < compiled_.slots.size(); ++s) {
        if (compiled_.slots[s].constant) b.ref[s] = compiled_.slots[s].constant.get();
      }
    }
    const profiler::SpanContext ctx = req->traced ? req->context() : profiler::SpanContext{};
    while (req->next_step < compiled_.steps.size()) {
      const compiler::Step& step = compiled_.steps[req->next_step];
      if (step.kind == compiler::Step::Kind::Npu) {
        // From here the fence owns the continuation: `req` must not be touched after this call.
        submit_npu(req, step.npu);
        return;
      }
      run_cpu(req->next_step, step.cpu, *req->buffers, req->traced ? req->profiler : nullptr, ctx);
      ++req->next_step;
    }
  } catch (...) {
    finish(*req, std::current_exception());
    return;
  }
  finish(*req, nullptr);
}

void Session::submit_npu(const std::shared_ptr<Request>& req, int index) {
  const auto& call = compiled_.npu_calls[static_cast<std::size_t>(index)];
  Buffers& b = *req->buffers;
  std::vector<std::span<const std::byte>> dev_in;
  for (int s : call.input_slots) dev_in.push_back(b.readable(s));
  std::vector<std::span<std::byte>> dev_out;
  for (int s : call.output_slots) dev_out.push_back(b.writable(compiled_, s));
  DeviceSlot& dev = pick_device();
  dev.in_flight.fetch_add(1);
  const profiler::SpanContext ctx = req->traced ? req->context() : profiler::SpanContext{};
  std::shared_ptr<device::Fence> fence;
  try {
    profiler::Profiler* prof = ctx.valid() ? req->profiler : nullptr;
    req->flow_id = prof != nullptr ? prof->next_flow_id() : 0;
    profiler::ScopedSpan enqueue(prof, "Enqueue", ctx);
    enqueue.record().flow_id = req->flow_id;
    // Submitting under the device's lock keeps `running` in the device's order; a reset in
    // progress is waited out.
    std::unique_lock lock(dev.mu);
    dev.cv.wait(lock, [&] { return !dev.resetting; });
    if (dev.lost.load()) {
      throw Error(ErrorCode::DeviceNotFound,
                  fmt::format("{}: device lost; create a new runner or queue to open it again",
                              dev.health.device_file),
                  ErrorSubject::of_device(dev.health.device_file));
    }
    fence = dev.device->submit(*dev.programs[static_cast<std::size_t>(index)], std::move(dev_in),
                               std::move(dev_out));
    if (dev.running.empty()) dev.last_progress_ns = profiler::now_ns();
    dev.running.push_back(req);
    req->device = &dev;
    req->fence = fence;
  } catch (const Error& e) {
    if (e.code() == ErrorCode::DeviceNotFound) dev.lost.store(true);
    dev.in_flight.fetch_sub(1);
    throw;
  } catch (...) {
    dev.in_flight.fetch_sub(1);
    throw;
  }
  // The callback runs on the backend's thread (or here, if the fence already signalled): it
  // only hands the request to the fence-wait executor, unless the watchdog already took it.
  fence->on_signal([this, req, &dev] {
    {
      std::lock_guard lock(dev.mu);
      auto it = std::find(dev.running.begin(), dev.running.end(), req);
      if (it == dev.running.end()) return;  // failed by the watchdog already
      dev.running.erase(it);
      dev.last_progress_ns = profiler::now_ns();
    }
    // The backend's thread is no thread of ours: the destructor must not destroy the executor
    // while this thread is still inside post() (signalling its condition variable), so the
    // hand-off is counted until post() returns.
    {
      std::lock_guard lock(active_mu_);
      ++handoffs_;
    }
    boost::asio::post(*fence_waiter_, [this, req] { fence_stage(req); });
    std::lock_guard lock(active_mu_);
    if (--handoffs_ == 0 && active_ == 0) active_cv_.notify_all();
  });
}

void Session::fence_stage(std::shared_ptr<Request> req) {
  DeviceSlot& dev = *req->device;
  if (req->forced_error) {
    // The watchdog's request (its fence was failed inside the reset) completes only after the
    // reset's bookkeeping -- the resets counter and the DeviceReset / DeviceLost instant event --
    // so a caller that has its DeviceTimeout also finds them.
    std::unique_lock lock(dev.mu);
    dev.cv.wait(lock, [&] { return !dev.resetting; });
  }
  const std::shared_ptr<device::Fence> fence = std::move(req->fence);
  req->device = nullptr;
  dev.in_flight.fetch_sub(1);
  std::exception_ptr error = req->forced_error ? req->forced_error : fence->error();
  const bool victim = std::exchange(req->reset_victim, false);
  if (!req->forced_error && error) {
    if (victim && device::aborted_by_reset(error) && req->reset_retries < kMaxResetRetries) {
      // Aborted behind a hung execution: not this request's fault, so it runs again (on the
      // least loaded device) from the same NPU call; its buffers are untouched.
      ++req->reset_retries;
      {
        std::lock_guard lock(dev.mu);
        ++dev.health.retried;
      }
      boost::asio::post(*pool_, [this, req = std::move(req)]() mutable { host_stage(std::move(req)); });
      return;
    }
    ErrorCode code = ErrorCode::Internal;
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      code = e.code();
    } catch (...) {
    }
    std::lock_guard lock(dev.mu);
    if (code == ErrorCode::DeviceNotFound && !dev.lost.exchange(true)) {
      spdlog::warn("{}: device lost; requests go to the session's other devices", dev.health.device_file);
    }
    if (code != ErrorCode::DeviceNotFound) ++dev.health.faults;
  }
  req->forced_error = nullptr;
  if (!error) {
    {
      const auto& t = fence->timing();
      std::lock_guard lock(dev.mu);
      ++dev.health.completed;
      if (t.store_end_ns > t.load_start_ns) dev.health.busy_ns += static_cast<std::uint64_t>(t.store_end_ns - t.load_start_ns);
    }
    try {
      if (req->traced) record_npu_spans(*req->profiler, dev, fence->timing(), req->context(), req->flow_id);
    } catch (...) {
      error = std::current_exception();
    }
  }
  ++req->next_step;
  // Post-ops and the completion run on the host stage's workers.
  boost::asio::post(*pool_, [this, req = std::move(req), error]() mutable {
    if (error) finish(*req, error);
    else host_stage(std::move(req));
  });
}

void Session::finish(Request& req, std::exception_ptr error) {
  std::vector<Tensor> outputs;
  if (!error && req.buffers) {
    Buffers& b = *req.buffers;
    for (int s : compiled_.output_slots) {
      const auto i = static_cast<std::size_t>(s);
      if (b.tensors[i]) outputs.push_back(std::move(*b.tensors[i]));
      else outputs.push_back(*b.ref[i]);  // an input or constant returned as an output
    }
  }
  if (req.buffers) release_buffers(std::move(req.buffers));
  if (req.traced) {
    req.span.end_ns = profiler::now_ns();
    req.profiler->record(std::move(req.span));
  }
  Completion done = std::move(req.done);
  req.inputs.reset();
  done(std::move(outputs), error);
  std::lock_guard lock(active_mu_);
  if (!pending_.empty()) {  // the finished request's place goes to the oldest waiting one
    std::shared_ptr<Request> next = std::move(pending_.front());
    pending_.pop_front();
    boost::asio::post(*pool_, [this, next = std::move(next)]() mutable { host_stage(std::move(next)); });
    return;
  }
  if (--active_ == 0) active_cv_.notify_all();
}

Session::DeviceSlot& Session::pick_device() {
  DeviceSlot* best = nullptr;
  bool best_resetting = false;
  for (const auto& d : devices_) {
    if (d->lost.load()) continue;
    bool resetting;
    {
      std::lock_guard lock(d->mu);
      resetting = d->resetting;
    }
    if (best == nullptr || (best_resetting && !resetting) ||
        (resetting == best_resetting &&
         d->in_flight.load(std::memory_order_relaxed) < best->in_flight.load(std::memory_order_relaxed))) {
      best = d.get();
      best_resetting = resetting;
    }
  }
  if (best == nullptr) {
    throw Error(ErrorCode::DeviceNotFound,
                fmt::format("every device of the session is lost ({}); create a new runner or queue to "
                            "open them again",
                            device_names()),
                ErrorSubject::of_device(device_names()));
  }
  return *best;
}

void Session::watchdog_loop() {
  std::unique_lock lock(watch_mu_);
  while (!watch_stop_) {
    watch_cv_.wait_for(lock, watch_interval_, [this] { return watch_stop_; });
    if (watch_stop_) break;
    lock.unlock();
    for (auto& d : devices_) {
      try {
        check_device(*d);
      } catch (const std::exception& e) {  // never let the watchdog thread die
        spdlog::error("{}: watchdog: {}", d->health.device_file, e.what());
      }
    }
    lock.lock();
  }
}

void Session::check_device(DeviceSlot& dev) {
  std::shared_ptr<Request> hung;
  const std::string& file = dev.health.device_file;
  const std::int64_t now = profiler::now_ns();
  {
    std::lock_guard lock(dev.mu);
    if (dev.running.empty() || dev.resetting || now - dev.last_progress_ns < dev.timeout_ns) return;
    // The oldest execution stays in `running` until its fence signals: only then has the device
    // finished with the request's buffers (the reset fails a hung fence; one still computing,
    // merely slow, finishes). Its request then completes with the timeout error.
    hung = dev.running.front();
    if (hung->forced_error) return;  // timed out already, waiting for its fence
    hung->forced_error = std::make_exception_ptr(
        Error(ErrorCode::DeviceTimeout,
              fmt::format("{}: the execution did not finish within {} ms (watchdog); the device was reset",
                          file, dev.timeout_ns / 1'000'000),
              ErrorSubject::of_device(file)));
    for (std::size_t i = 1; i < dev.running.size(); ++i) dev.running[i]->reset_victim = true;
    dev.resetting = true;
    ++dev.health.timeouts;
  }
  spdlog::warn("{}: execution hung for {} ms; resetting the device", file, dev.timeout_ns / 1'000'000);
  profiler::Profiler* prof = hung->traced ? hung->profiler : profiler_.get();
  record_device_event(prof, dev, "DeviceTimeout", "watchdog fired");
  std::exception_ptr reset_error;
  try {
    dev.device->reset();
  } catch (...) {
    reset_error = std::current_exception();
  }
  record_device_event(prof, dev, reset_error ? "DeviceLost" : "DeviceReset", "");
  std::deque<std::shared_ptr<Request>> stranded;
  {
    std::lock_guard lock(dev.mu);
    dev.resetting = false;
    dev.last_progress_ns = profiler::now_ns();
    if (!reset_error) {
      ++dev.health.resets;
    } else {
      // A device that cannot be reset is lost; what still runs on it fails now.
      dev.lost.store(true);
      stranded.swap(dev.running);
      std::string why = "reset failed";
      try {
        std::rethrow_exception(reset_error);
      } catch (const std::exception& e) {
        why = e.what();
      }
      const auto lost = std::make_exception_ptr(
          Error(ErrorCode::DeviceNotFound, fmt::format("{}: device lost: {}", file, why), ErrorSubject::of_device(file)));
      for (auto& r : stranded) {
        if (!r->forced_error) r->forced_error = lost;  // the hung one keeps its DeviceTimeout
      }
    }
  }
  dev.cv.notify_all();
  // A device that could not be reset will not signal its fences: its requests complete now.
  for (auto& r : stranded) boost::asio::post(*fence_waiter_, [this, r] { fence_stage(r); });
}

void Session::record_device_event(profiler::Profiler* prof, const DeviceSlot& dev, std::string name,
                                  std::string detail) {
  if (prof == nullptr || !prof->is_recording()) return;
  const auto& file = dev.device->file();
  profiler::SpanRecord r;
  r.trace_id = prof->new_trace().trace_id;
  r.span_id = prof->next_span_id();
  r.name = std::move(name);
  r.cat = profiler::Category::NPU;
  r.start_ns = r.end_ns = profiler::now_ns();
  r.card = file.card;
  r.pe_index = file.first_pe;
  r.attributes = {{"event", "instant"}, {"device", file.name()}};
  if (!detail.empty()) r.attributes.emplace_back("detail", std::move(detail));
  prof->record(std::move(r));
}

void Session::record_npu_spans(profiler::Profiler& prof, const DeviceSlot& dev, const device::ExecutionTiming& t,
                               const profiler::SpanContext& parent, std::uint64_t flow_id) {
  if (!prof.is_recording() || !parent.valid()) return;
  profiler::record_device_execution(prof, device_execution_of(t, dev.device->file()), parent, flow_id);
}

void Session::run_cpu(std::size_t step, const compiler::CpuOp& op, Buffers& b, profiler::Profiler* prof,
                      const profiler::SpanContext& ctx) {
  profiler::ScopedSpan span(ctx.valid() ? prof : nullptr,
                            op.kind == compiler::CpuOpKind::External ? std::string_view(op.node->op_type)
                                                                     : compiler::cpu_op_name(op.kind),
                            ctx);
  span.record().operator_index = host_operator_index_[step];
  // Host operator time for serving metrics (Submitter::host_operator_ns), traced or not.
  struct Timer {
    std::atomic<std::uint64_t>& total;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~Timer() {
      total.fetch_add(static_cast<std::uint64_t>(
                          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count()),
                      std::memory_order_relaxed);
    }
  } timer{host_operator_ns_};
  if (op.kind != compiler::CpuOpKind::External) {
    const int in = op.inputs.at(0), out = op.outputs.at(0);
    run_host_step(op, compiled_.slots[static_cast<std::size_t>(in)], b.readable(in),
               compiled_.slots[static_cast<std::size_t>(out)], b.writable(compiled_, out));
    return;
  }
  std::vector<const Tensor*> ins;
  for (int s : op.inputs) ins.push_back(s >= 0 ? b.ref[static_cast<std::size_t>(s)] : nullptr);
  auto outs = host::run_cpu_op(*op.node, ins);
  for (std::size_t o = 0; o < op.outputs.size() && o < outs.size(); ++o) {
    const int s = op.outputs[o];
    if (s < 0) continue;
    const auto& slot = compiled_.slots[static_cast<std::size_t>(s)];
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

std::unique_ptr<Session::Buffers> Session::acquire_buffers() {
  {
    std::lock_guard lock(buffers_mu_);
    if (!free_buffers_.empty()) {
      auto b = std::move(free_buffers_.back());
      free_buffers_.pop_back();
      return b;
    }
  }
  return std::make_unique<Buffers>(compiled_.slots.size());
}

void Session::release_buffers(std::unique_ptr<Buffers> b) {
  std::fill(b->ref.begin(), b->ref.end(), nullptr);  // no pointers to the caller's inputs remain
  std::lock_guard lock(buffers_mu_);
  free_buffers_.push_back(std::move(b));
}

}  // namespace furiosa::runtime::detail
