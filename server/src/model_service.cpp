// ModelService (model_service.h): admission, deadlines, dynamic batching (pad to the compiled
// batch, split the outputs back) and the per-model metrics, in front of one runtime Runner whose
// request callbacks complete the requests.
#include "model_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "furiosa/core/error.h"

namespace furiosa::server {
namespace {

/// Latency buckets in seconds: 100 us .. 10 s.
prometheus::Histogram::BucketBoundaries latency_buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

/// Queue-time buckets in seconds: 10 us .. 1 s.
prometheus::Histogram::BucketBoundaries queue_buckets() {
  return {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1};
}

/// Batch-size buckets: 1, 2, 4, ... 256 requests.
prometheus::Histogram::BucketBoundaries batch_buckets() { return {1, 2, 4, 8, 16, 32, 64, 128, 256}; }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::uint64_t ns_since(Clock::time_point t) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count();
  return ns > 0 ? static_cast<std::uint64_t>(ns) : 0;
}

}  // namespace

ServiceMetrics::ServiceMetrics(prometheus::Registry& registry)
    : requests(prometheus::BuildCounter()
                   .Name("furiosa_serve_requests_total")
                   .Help("Inference requests by model and outcome (success, failure, rejected: 429 / RESOURCE_EXHAUSTED)")
                   .Register(registry)),
      failures(prometheus::BuildCounter()
                   .Name("furiosa_serve_request_failures_total")
                   .Help("Inference requests answered with an error, by model and reason (invalid_argument, "
                         "resource_exhausted, unavailable, deadline_exceeded, internal)")
                   .Register(registry)),
      latency(prometheus::BuildHistogram()
                  .Name("furiosa_serve_request_duration_seconds")
                  .Help("Time from admission to the inference's completion, by model")
                  .Register(registry)),
      queue_time(prometheus::BuildHistogram()
                     .Name("furiosa_serve_queue_duration_seconds")
                     .Help("Time from admission to the start of its runtime request (batching wait included), by model")
                     .Register(registry)),
      batch_size(prometheus::BuildHistogram()
                     .Name("furiosa_serve_batch_size")
                     .Help("Requests per runtime submission (padding rows not counted), by model")
                     .Register(registry)),
      inflight(prometheus::BuildGauge()
                   .Name("furiosa_serve_inflight_requests")
                   .Help("Inference requests admitted and not yet completed, by model")
                   .Register(registry)),
      npu_executions(prometheus::BuildCounter()
                         .Name("furiosa_npu_executions_total")
                         .Help("Executions completed on the device (PE or fused PEs), as the runtime counts them")
                         .Register(registry)),
      npu_busy(prometheus::BuildCounter()
                   .Name("furiosa_npu_busy_seconds_total")
                   .Help("Device time of the completed executions (Load start to Store end); its rate is the "
                         "device's utilisation")
                   .Register(registry)),
      host_operators(prometheus::BuildCounter()
                         .Name("furiosa_host_operator_seconds_total")
                         .Help("Host (CPU) operator time of the model's requests, wall time on the runtime's workers")
                         .Register(registry)) {}

ModelService::ModelService(ModelEntry entry, ServiceMetrics& metrics) : entry_(std::move(entry)), metrics_(metrics) {
  const auto& config = entry_.config;
  runtime::RunnerOptions q;
  q.device = config.device;
  // Models of one server share devices (Triton's many models per GPU): several models naming
  // the same device file, or none (the default spec), run side by side on it.
  q.share_devices = true;
  q.worker_num = config.worker_num;
  q.batch_size = config.batch_size;
  q.compiler_config.input_shapes = config.input_shapes;
  try {
    if (config.dynamic_batching) {
      batch_ = config.dynamic_batching->max_batch_size;
      // The request's view: the model at batch 1. Every input and output must carry batch dim 1
      // there and batch_ at the batched compile, or rows could not be stacked and split.
      runtime::SessionOptions one = q;
      one.batch_size = 1;
      request_model_ = runtime::describe_model(entry_.path, one);
      q.batch_size = batch_;
    }
    runner_ = runtime::create_runner(entry_.path, q);
    if (!config.dynamic_batching) request_model_ = runner_->model();
    else {
      const auto& batched = runner_->model();
      auto check = [&](const std::vector<runtime::TensorDesc>& one, const std::vector<runtime::TensorDesc>& many,
                       const char* kind) {
        if (one.size() != many.size()) throw Error(ErrorCode::IncompatibleModel, "the batched compile changed the signature");
        for (std::size_t i = 0; i < one.size(); ++i) {
          Shape rest = many[i].shape;
          if (!rest.empty()) rest[0] = 1;
          if (one[i].shape.empty() || one[i].shape[0] != 1 || many[i].shape[0] != batch_ || rest != one[i].shape) {
            throw Error(ErrorCode::IncompatibleModel,
                        fmt::format("dynamic_batching needs batch dim 1 on every input and output; {} '{}' has shape "
                                    "{} at batch 1 and {} at batch {}",
                                    kind, one[i].name, shape_to_string(one[i].shape), shape_to_string(many[i].shape),
                                    batch_),
                        ErrorSubject::of_tensor(one[i].name));
          }
        }
      };
      check(request_model_.inputs, batched.inputs, "input");
      check(request_model_.outputs, batched.outputs, "output");
      // The smaller batches of the ladder, compiled too and sharing the device (they were
      // checked above through the same rule at batch_).
      for (std::int64_t size : batch_ladder(*config.dynamic_batching)) {
        if (size == batch_) continue;
        runtime::RunnerOptions small = q;
        small.batch_size = size;
        auto runner = runtime::create_runner(entry_.path, small);
        if (runner->model().inputs.at(0).shape.at(0) != size) {
          throw Error(ErrorCode::IncompatibleModel,
                      fmt::format("preferred_batch_size {}: the compiled batch dim is {}", size,
                                  runner->model().inputs.at(0).shape.at(0)));
        }
        ladder_.emplace(size, std::move(runner));
      }
      group_slots_ = std::max(1, config.worker_num);
    }
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("model '{}' ({}): {}", entry_.name, entry_.path.string(), e.message()), e.subject());
  }
  const std::map<std::string, std::string> labels = {{"model", entry_.name}};
  succeeded_ = &metrics_.requests.Add({{"model", entry_.name}, {"outcome", "success"}});
  failed_ = &metrics_.requests.Add({{"model", entry_.name}, {"outcome", "failure"}});
  rejected_ = &metrics_.requests.Add({{"model", entry_.name}, {"outcome", "rejected"}});
  for (auto s : {ServeStatus::InvalidArgument, ServeStatus::ResourceExhausted, ServeStatus::Unavailable,
                 ServeStatus::DeadlineExceeded, ServeStatus::Internal}) {
    failure_counter(s);  // every reason exported from the start, at 0
  }
  latency_ = &metrics_.latency.Add(labels, latency_buckets());
  queue_time_ = &metrics_.queue_time.Add(labels, queue_buckets());
  batch_size_ = &metrics_.batch_size.Add(labels, batch_buckets());
  inflight_gauge_ = &metrics_.inflight.Add(labels);
  if (config.dynamic_batching) {
    batcher_ = std::make_unique<Batcher>(
        static_cast<std::size_t>(batch_), config.dynamic_batching->max_queue_delay,
        [this](std::vector<BatchItem>& group) { submit_now(group); },
        [this] { return groups_in_flight_.load() < group_slots_; });
  }
}

ModelService::~ModelService() {
  close();
  // Every request was answered: this only waits for completions still running and releases
  // the device. The batcher, which the completions wake, goes last.
  ladder_.clear();
  runner_.reset();
}

prometheus::Counter& ModelService::failure_counter(ServeStatus status) {
  return metrics_.failures.Add({{"model", entry_.name}, {"reason", std::string(reason_label(status))}});
}

void ModelService::count_failure(ServeStatus status) {
  if (status == ServeStatus::Ok) return;
  failure_counter(status).Increment();
}

void ModelService::release_admission() {
  if (inflight_.fetch_sub(1) == 1) inflight_.notify_all();  // close() may wait for 0
}

void ModelService::infer(std::vector<Tensor> inputs, Deadline deadline, Completion done) {
  const auto admitted = Clock::now();
  if (deadline && *deadline <= admitted) {
    failed_->Increment();
    count_failure(ServeStatus::DeadlineExceeded);
    throw ServeError(ServeStatus::DeadlineExceeded,
                     fmt::format("model '{}': the request's deadline passed before it was submitted", entry_.name));
  }
  // Admission: at most max_inflight requests of this model at once; the rest are answered now.
  if (inflight_.fetch_add(1) >= entry_.config.max_inflight) {
    release_admission();
    rejected_->Increment();
    count_failure(ServeStatus::ResourceExhausted);
    throw ServeError(ServeStatus::ResourceExhausted,
                     fmt::format("model '{}' has {} requests in flight (max_inflight)", entry_.name,
                                 entry_.config.max_inflight));
  }
  // After the count: close() either sees this request or it sees closed_ here.
  if (closed_.load()) {
    release_admission();
    failed_->Increment();
    count_failure(ServeStatus::Unavailable);
    throw ServeError(ServeStatus::Unavailable,
                     fmt::format("model '{}' is shutting down or unloading", entry_.name));
  }
  inflight_gauge_->Increment();
  // Every admitted request ends here, exactly once: metrics, then the front end's completion.
  // The place is given back before the answer goes out, so a client sending its next request
  // on receiving this answer finds it free. close() may then return while `done` still runs;
  // the Runner's destructor waits for that.
  Completion finish = [this, admitted, done = std::move(done)](std::vector<Tensor> outputs, std::exception_ptr error) {
    inflight_gauge_->Decrement();
    latency_->Observe(seconds_since(admitted));
    const std::uint64_t took = ns_since(admitted);
    if (error) {
      failed_->Increment();
      count_failure(status_of(error));
      fail_ns_.fetch_add(took);
      fail_count_.fetch_add(1);
    } else {
      succeeded_->Increment();
      success_ns_.fetch_add(took);
      success_count_.fetch_add(1);
    }
    last_inference_ms_.store(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
    release_admission();
    done(std::move(outputs), error);
  };
  if (batcher_) {
    try {
      batcher_->add(BatchItem{std::move(inputs), deadline, admitted, std::move(finish)});
    } catch (...) {
      inflight_gauge_->Decrement();
      release_admission();
      failed_->Increment();
      count_failure(ServeStatus::Unavailable);
      throw;
    }
    return;
  }
  queue_time_->Observe(seconds_since(admitted));
  count_queue(admitted);
  batch_size_->Observe(1);
  runtime::StartOptions checked;
  checked.inputs_checked = true;         // by the front end's decoder, against model()
  checked.first_stage_on_caller = true;  // this front-end thread would only hand it on
  const auto started = Clock::now();
  try {
    runner_->start(
        std::move(inputs),
        [this, started, finish = std::move(finish)](std::vector<Tensor> outputs,
                                                    std::exception_ptr error) {
          count_execution(started, 1);
          finish(std::move(outputs), error);
        },
        checked);
  } catch (...) {
    // Not started: the completion will never run, so the caller answers.
    inflight_gauge_->Decrement();
    release_admission();
    failed_->Increment();
    count_failure(status_of(std::current_exception()));
    throw;
  }
}

void ModelService::submit_now(std::vector<BatchItem>& group) {
  // The smallest compiled batch that holds the group; its rows past group.size() stay zero
  // (padding).
  std::int64_t batch = batch_;
  runtime::Runner* runner = runner_.get();
  for (const auto& [size, r] : ladder_) {
    if (static_cast<std::size_t>(size) >= group.size()) {
      batch = size;
      runner = r.get();
      break;
    }
  }
  const auto& descs = runner->model().inputs;
  std::vector<Tensor> inputs;
  inputs.reserve(descs.size());
  for (std::size_t k = 0; k < descs.size(); ++k) {
    Tensor t(descs[k].dtype, descs[k].shape);
    const std::size_t row = t.size_bytes() / static_cast<std::size_t>(batch);
    for (std::size_t i = 0; i < group.size(); ++i) {
      std::memcpy(t.bytes().data() + i * row, group[i].inputs[k].bytes().data(), row);
    }
    inputs.push_back(std::move(t));
  }
  batch_size_->Observe(static_cast<double>(group.size()));
  for (const auto& item : group) {
    queue_time_->Observe(seconds_since(item.admitted));
    count_queue(item.admitted);
  }
  // The group's completions move into the callback, which splits each output's rows back to the
  // requests (padding rows dropped); a failed execution fails every request of the group. The
  // group's slot is given back first, so the batcher may start the next group.
  auto items = std::make_shared<std::vector<BatchItem>>(std::move(group));
  const auto started = Clock::now();
  auto split = [this, items, batch, started](std::vector<Tensor> outputs,
                                             std::exception_ptr error) {
    count_execution(started, items->size());
    groups_in_flight_.fetch_sub(1);
    batcher_->slot_freed();
    std::vector<std::vector<Tensor>> per_request(items->size());
    if (!error) {
      try {
        for (std::size_t k = 0; k < outputs.size(); ++k) {
          const Tensor& out = outputs[k];
          const std::size_t row = out.size_bytes() / static_cast<std::size_t>(batch);
          for (std::size_t i = 0; i < items->size(); ++i) {
            const auto* begin = out.bytes().data() + i * row;
            per_request[i].emplace_back(out.dtype(), request_model_.outputs.at(k).shape,
                                        std::vector<std::byte>(begin, begin + row));
          }
        }
      } catch (...) {
        error = std::current_exception();
      }
    }
    for (std::size_t i = 0; i < items->size(); ++i) {
      (*items)[i].done(error ? std::vector<Tensor>{} : std::move(per_request[i]), error);
    }
  };
  runtime::StartOptions checked;
  checked.inputs_checked = true;         // stacked from checked rows into the runner's own descriptions
  checked.first_stage_on_caller = true;  // the batcher's thread would only hand it on
  groups_in_flight_.fetch_add(1);
  try {
    runner->start(std::move(inputs), std::move(split), checked);
  } catch (...) {
    groups_in_flight_.fetch_sub(1);  // the callback will never run
    const auto error = std::current_exception();
    for (auto& item : *items) item.done({}, error);
  }
}

void ModelService::count_execution(Clock::time_point started, std::size_t rows) {
  const std::uint64_t ns = ns_since(started);
  std::lock_guard lock(execution_mutex_);
  compute_ns_.fetch_add(ns);
  execution_count_.fetch_add(1);
  inference_count_.fetch_add(rows);
  auto& [count, total_ns] = batch_stats_[rows];
  ++count;
  total_ns += ns;
}

void ModelService::count_queue(Clock::time_point admitted) {
  queue_ns_.fetch_add(ns_since(admitted));
  queue_count_.fetch_add(1);
}

ModelStats ModelService::stats() const {
  ModelStats s;
  s.success_count = success_count_.load();
  s.success_ns = success_ns_.load();
  s.fail_count = fail_count_.load();
  s.fail_ns = fail_ns_.load();
  s.queue_count = queue_count_.load();
  s.queue_ns = queue_ns_.load();
  std::lock_guard lock(execution_mutex_);
  s.execution_count = execution_count_.load();
  s.compute_ns = compute_ns_.load();
  s.inference_count = inference_count_.load();
  s.batch_stats.reserve(batch_stats_.size());
  for (const auto& [size, figures] : batch_stats_)
    s.batch_stats.push_back({size, figures.first, figures.second});
  s.last_inference_ms = last_inference_ms_.load();
  return s;
}

void ModelService::update_device_metrics() {
  std::shared_lock use(use_mutex_);  // release() cannot reset the runners meanwhile
  if (!runner_) return;
  std::vector<runtime::DeviceHealth> health;
  std::uint64_t host_ns = 0;
  try {
    health = runner_->device_health();  // the ladder shares these devices: one set of counters
    host_ns = runner_->host_operator_ns();
    for (const auto& [size, r] : ladder_) host_ns += r->host_operator_ns();
  } catch (...) {
    return;
  }
  std::lock_guard lock(device_mutex_);
  auto& host = metrics_.host_operators.Add({{"model", entry_.name}});
  if (host_ns > host_operator_seen_ns_) host.Increment(static_cast<double>(host_ns - host_operator_seen_ns_) * 1e-9);
  host_operator_seen_ns_ = std::max(host_operator_seen_ns_, host_ns);
  std::lock_guard devices_lock(metrics_.device_mutex);
  for (const auto& d : health) {
    auto& [executions, busy_ns] = metrics_.device_seen[d.device_file];
    auto& e = metrics_.npu_executions.Add({{"device", d.device_file}});
    auto& b = metrics_.npu_busy.Add({{"device", d.device_file}});
    if (d.completed > executions) e.Increment(static_cast<double>(d.completed - executions));
    if (d.busy_ns > busy_ns) b.Increment(static_cast<double>(d.busy_ns - busy_ns) * 1e-9);
    executions = std::max(executions, d.completed);
    busy_ns = std::max(busy_ns, d.busy_ns);
  }
}

void ModelService::stop_batching() {
  if (batcher_) batcher_->close();  // hands on what is queued, then stops its thread
}

void ModelService::close() {
  std::call_once(close_once_, [this] {
    closed_.store(true);
    if (batcher_) batcher_->close();  // hands on what is queued
    // Every admitted request is answered by its runtime callback (or the batcher).
    for (std::size_t n = inflight_.load(); n != 0; n = inflight_.load()) inflight_.wait(n);
  });
}

void ModelService::release() {
  close();
  std::unique_lock use(use_mutex_);
  ladder_.clear();
  runner_.reset();
}

}  // namespace furiosa::server
