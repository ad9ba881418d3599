// The transport-independent serving core of one model: its runtime Runner, admission control
// (max_inflight), deadlines, dynamic batching and the model's Prometheus series. The HTTP
// (server.cpp) and gRPC (grpc_frontend.cpp) front ends decode a request (checking it against
// model()), call infer() and encode whatever the completion gets. A request is a runtime request
// (Runner::start) whose callback, on a runtime worker, completes it: no thread of its own, no
// mailbox (docs/serving.md "Thread hand-offs").
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "batcher.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/server/model_repository.h"
#include "serve_error.h"

namespace furiosa::server {

/// The metric families every model adds its series to, registered once per server in `registry`
/// (which must outlive them). Names and help texts: docs/serving.md "Metrics".
struct ServiceMetrics {
  /// Registers the families. Throws what prometheus-cpp throws for a duplicate name.
  explicit ServiceMetrics(prometheus::Registry& registry);
  prometheus::Family<prometheus::Counter>& requests;        ///< {model, outcome}
  prometheus::Family<prometheus::Counter>& failures;        ///< {model, reason}
  prometheus::Family<prometheus::Histogram>& latency;       ///< {model} seconds, admission -> completion
  prometheus::Family<prometheus::Histogram>& queue_time;    ///< {model} seconds, admission -> submit
  prometheus::Family<prometheus::Histogram>& batch_size;    ///< {model} requests per execution
  prometheus::Family<prometheus::Gauge>& inflight;          ///< {model}
  prometheus::Family<prometheus::Counter>& npu_executions;  ///< {device} completed executions
  prometheus::Family<prometheus::Counter>& npu_busy;        ///< {device} seconds of device time
  prometheus::Family<prometheus::Counter>& host_operators;  ///< {model} seconds in host operators

  /// Executions and busy ns already counted into npu_executions / npu_busy, by device: one
  /// table for all models, since models share devices and each reports the device's totals.
  std::mutex device_mutex;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> device_seen;
};

/// One served model. Thread-safe: infer() from any thread; completions run on a runtime worker
/// (or the batcher's thread, for requests that expire there).
/// Cumulative figures of one model since it was loaded (Triton's statistics extension, served
/// as GET /v2/models/NAME/stats): counts and nanoseconds.
struct ModelStats {
  std::uint64_t success_count = 0, success_ns = 0;  ///< answered requests: admission to answer
  std::uint64_t fail_count = 0, fail_ns = 0;        ///< requests answered with an error
  std::uint64_t queue_count = 0, queue_ns = 0;  ///< admission to the start of the runtime request
  /// Runtime requests (one per request, or per batched group) and their time from start to
  /// completion: host pre/post stages and the device, which Triton splits into compute_input,
  /// compute_infer and compute_output.
  std::uint64_t execution_count = 0, compute_ns = 0;
  std::uint64_t inference_count =
      0;  ///< requests carried by those executions (rows, padding not counted)
  std::int64_t last_inference_ms =
      0;  ///< wall clock (ms since the Unix epoch) of the last answer; 0 = none
  /// The runtime requests of one batch size (requests in the group; 1 without batching): how
  /// many, and their time from start to completion, as execution_count and compute_ns.
  struct BatchSize {
    std::uint64_t batch_size = 0;  ///< requests carried by each execution (padding not counted)
    std::uint64_t count = 0;       ///< executions of that size
    std::uint64_t ns = 0;          ///< their total time, ns
  };
  /// Per batch size executed, ascending (Triton's batch_stats); sizes never executed are
  /// absent. Their counts sum to execution_count and their ns to compute_ns.
  std::vector<BatchSize> batch_stats;
};

class ModelService {
 public:
  /// Compiles the model and opens its device (runtime::create_runner); with dynamic batching it is
  /// compiled with batch max_batch_size after checking that every input and output has batch
  /// dim 1 at batch 1 and max_batch_size at the batched compile. Throws the runtime's errors and
  /// Error(IncompatibleModel) for a model that cannot be batched, each naming the model.
  ModelService(ModelEntry entry, ServiceMetrics& metrics);
  /// close().
  ~ModelService();
  ModelService(const ModelService&) = delete;
  ModelService& operator=(const ModelService&) = delete;

  /// The repository entry.
  const ModelEntry& entry() const noexcept { return entry_; }
  /// Inputs and outputs of one request (batch dim 1 for a batched model).
  const runtime::Model& model() const noexcept { return request_model_; }

  /// Admits one request and starts it on the runtime (or queues it in the batcher). `inputs`
  /// must already have been checked against model() (count, dtypes, shapes): the front ends'
  /// protocol decoders do that, and neither this nor the runtime checks again
  /// (runtime::StartOptions::inputs_checked). When it returns, `done` will run exactly once.
  /// Throws, without ever running `done` (the caller answers): ServeError(ResourceExhausted)
  /// when max_inflight requests are admitted, ServeError(DeadlineExceeded) when `deadline` has
  /// passed, ServeError(Unavailable) after stop_batching() (batched models) or close().
  void infer(std::vector<Tensor> inputs, Deadline deadline, Completion done);
  /// Counts a request answered with an error before it reached infer() (e.g. a decode error).
  void count_failure(ServeStatus status);
  /// The model's cumulative figures (GET /v2/models/NAME/stats). Thread-safe; each field is
  /// read on its own, so a request finishing meanwhile may show in one field and not another.
  ModelStats stats() const;
  /// Refreshes furiosa_npu_executions_total, furiosa_npu_busy_seconds_total and
  /// furiosa_host_operator_seconds_total from the runtime's counters (Runner::device_health,
  /// host_operator_ns). Thread-safe.
  void update_device_metrics();
  /// Stops batching: what the batcher holds is submitted at once instead of after its queue
  /// delay, and later infer() calls of a batched model throw ServeError(Unavailable). The first
  /// step of a graceful shutdown, so that in-flight requests do not wait out the delay.
  /// Idempotent; thread-safe.
  void stop_batching();
  /// Refuses further requests (ServeError(Unavailable)), stops the batcher (queued requests are
  /// still started) and waits until every admitted request is being answered (its completion
  /// called). Idempotent; thread-safe. The destructor then waits for the completions still
  /// running and releases the device.
  void close();
  /// Unloads: close(), then waits until no front end holds use_mutex() shared (a
  /// ModelRegistry lease: a thread inside infer()) and releases the runners and so the device;
  /// completions still running are waited for (the Runner's destructor). entry(), model() and
  /// stats() stay valid. Idempotent; thread-safe; not from a completion.
  void release();
  /// Held shared by whoever calls infer() or update_device_metrics() (ModelRegistry's leases),
  /// exclusively by release().
  std::shared_mutex& use_mutex() const noexcept { return use_mutex_; }

 private:
  /// Starts one runtime request for `group` (its rows stacked into the smallest batch of the
  /// ladder that holds them, the rest zero padding) whose callback splits the outputs back. On
  /// the batcher's thread.
  void submit_now(std::vector<BatchItem>& group);
  /// One admitted request is over: counts it down and wakes close().
  void release_admission();
  prometheus::Counter& failure_counter(ServeStatus status);

  ModelEntry entry_;
  ServiceMetrics& metrics_;
  runtime::Model request_model_;
  std::int64_t batch_ = 1;  ///< the compiled batch (dynamic batching's max_batch_size, else 1)
  std::unique_ptr<runtime::Runner> runner_;  ///< compiled for batch_
  /// Dynamic batching: the runners of the smaller batch sizes of the ladder (batch_ladder),
  /// sharing runner_'s devices, by batch size.
  std::map<std::int64_t, std::unique_ptr<runtime::Runner>> ladder_;
  /// Dynamic batching: groups started and not yet completed, and how many may be at once (the
  /// batcher holds the next group while they are all busy).
  std::atomic<int> groups_in_flight_{0};
  /// ModelStats' fields (atomics: updated from the runtime's workers and the front ends).
  std::atomic<std::uint64_t> success_count_{0}, success_ns_{0}, fail_count_{0}, fail_ns_{0};
  std::atomic<std::uint64_t> queue_count_{0}, queue_ns_{0}, execution_count_{0}, compute_ns_{0};
  std::atomic<std::uint64_t> inference_count_{0};
  /// Guards batch_stats_ and makes each count_execution() one step for stats() (the execution
  /// counters above change under it too, so the batch counts always sum to execution_count).
  mutable std::mutex execution_mutex_;
  /// ModelStats::batch_stats: batch size -> {executions, ns}.
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> batch_stats_;
  std::atomic<std::int64_t> last_inference_ms_{0};
  /// Counts one runtime request of `rows` requests started at `started`, now complete.
  void count_execution(Clock::time_point started, std::size_t rows);
  /// Counts a request's wait from admission until its runtime request started.
  void count_queue(Clock::time_point admitted);
  int group_slots_ = 1;
  std::unique_ptr<Batcher> batcher_;
  /// Admitted and not yet answered (the max_inflight limit; close() waits for 0).
  std::atomic<std::size_t> inflight_{0};
  std::atomic<bool> closed_{false};
  std::once_flag close_once_;
  mutable std::shared_mutex use_mutex_;  ///< see use_mutex(); guards runner_ and ladder_'s reset

  prometheus::Counter* succeeded_ = nullptr;
  prometheus::Counter* failed_ = nullptr;
  prometheus::Counter* rejected_ = nullptr;
  prometheus::Histogram* latency_ = nullptr;
  prometheus::Histogram* queue_time_ = nullptr;
  prometheus::Histogram* batch_size_ = nullptr;
  prometheus::Gauge* inflight_gauge_ = nullptr;
  std::mutex device_mutex_;                  ///< guards host_operator_seen_ns_
  std::uint64_t host_operator_seen_ns_ = 0;  ///< host operator ns already counted
};

}  // namespace furiosa::server
