// furiosa-run's benchmark mode (like furiosa-bench): sync or async load, QPS and latency
// percentiles; and the random inputs the tools feed models.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string_view>
#include <utility>
#include <random>
#include <string>
#include <vector>

#include "furiosa/core/tensor.h"
#include "furiosa/profiler/span.h"
#include "furiosa/runtime/runner.h"

namespace furiosa::tools {

/// What to run. The session fields (device spec, worker_num, batch size, compiler options,
/// profiler, driver) are the runtime's SessionOptions, shared with create_runner/create_queue.
struct BenchOptions {
  std::filesystem::path model;
  std::string mode = "sync";     ///< "sync": worker_num threads call Runner::run; "async": a queue
  std::uint64_t queries = 0;     ///< stop after this many queries (0: use duration, default 100)
  double duration_s = 0;         ///< stop after this many seconds (0: use queries)
  std::filesystem::path json;    ///< write the figures as JSON here when set
  bool progress = true;          ///< a progress line on stderr for runs longer than a second
  bool print = true;             ///< print the figures to stdout
  /// The device follows its modelled clock (a card; the simulator with pacing on, its default).
  /// With false (pacing off) the modelled device time is not a bound of the measured run.
  bool device_paced = true;
  runtime::SessionOptions session;
};

/// Makes the benchmark's inputs (model input order) once the model is loaded, from its
/// descriptions.
using InputMaker = std::function<std::vector<Tensor>(const runtime::Model& model)>;

/// Modelled device time of one NPU program execution (the simulator's timing model, or the
/// card's own timings on a real backend), in microseconds. Deterministic in the simulator: a
/// function of the program's shapes and the SimConfig constants only.
struct ProgramFigures {
  double load_us = 0;       ///< Load: DMA of the program's inputs, host -> device
  double execution_us = 0;  ///< Execution: the kernels (NPU Run)
  double store_us = 0;      ///< Store: DMA of the program's outputs, device -> host
  /// Load + Execution + Store (NPU Total).
  double total_us() const noexcept { return load_us + execution_us + store_us; }
};

/// What limits a run (see model_figures): the device, host operators, or the workers (too few
/// requests in flight, or the runtime's own path per request). Every bound is an upper bound on
/// the rate the run can reach, built so that the run it describes never exceeds it (issue 34).
struct Bottleneck {
  std::string kind;  ///< "device-bound", "host-bound" or "worker-bound"; empty when unknown
  /// Share of a query's measured mean latency, in [0, 1]: "device" (modelled device time; absent
  /// when the device did not follow its modelled clock), "host" (host operators, measured),
  /// "simulator" (functional mode only, when present: the simulator computing the kernels after
  /// the modelled device time, SimOverrun; a real card has no such share), "queue" (the rest:
  /// waiting for a worker or a device, submission, wake-ups). Sums to 1 (queue clamped at 0).
  std::map<std::string, double> shares;
  /// Host operators by share of the query's mean latency, largest first (name, share).
  std::vector<std::pair<std::string, double>> host_operators;
  /// devices / the busiest engine's time per query x batch; 0 when the device did not follow
  /// its modelled clock (the simulator with pacing off), where it bounds nothing.
  double device_bound_samples_per_s = 0;
  double host_bound_samples_per_s = 0;    ///< min(workers, host cores) / host time x batch (0: no host time)
  /// workers / the time a worker carries one query x batch. Sync: that time is the query's
  /// measured mean latency (at least device + host time), so the bound is the rate the run
  /// measured. Async: the workers run only the host stages (host operators and the submission to
  /// the device, Enqueue), measured from their spans; the latency, which also holds the wait
  /// behind every queued query, is not used.
  double worker_bound_samples_per_s = 0;
  double predicted_samples_per_s = 0;     ///< the smallest of the three bounds
  double measured_samples_per_s = 0;      ///< the rate the run measured (0: not given)
};

/// The modelled section's per-query term, in microseconds: the time a query takes end to end on a
/// Warboy beyond its device time (Load + Execution + Store), i.e. the SDK's submission and
/// completion path, which runs on the host and occupies no device. Fitted once, to ResNet-50 v1.5
/// only and never per model: FuriosaAI's MLPerf Inference v2.0 single-stream run (fused PE,
/// batch 1; results/warboy/resnet50/SingleStream/performance/run_1/mlperf_log_summary.txt in
/// mlcommons/inference_results_v2.0, closed/FuriosaAI) has a minimum latency of 710.880 us, and
/// the timing model gives that program 597.101 us of device time: 710.880 - 597.101 = 113.8 us
/// (161.6 us until 2026-12-06, before weight loads were modelled: docs/timing.md).
/// The same log's p90 (712.196 us) is within 1.4 us of its minimum, so the term is a fixed cost
/// per query, not host noise; that harness does no host operator per ResNet-50 query
/// (quantize and lower at sample load, unlower compiled out, a 1001-byte argmax), so the term
/// is not an operator the runtime models. See docs/timing.md, "Calibration and validation".
inline constexpr double kQueryOverheadUs = 113.8;

/// The modelled section of a benchmark: device figures from the timing model (deterministic:
/// the same on every run of the same model, device spec, batch and workers) and host operator
/// time measured per query. Filled by model_figures.
struct ModelledFigures {
  bool available = false;  ///< false when the run recorded no NPU execution (no profiler spans)
  int devices = 0;         ///< device files the session uses (comma-separated device names)
  int workers = 0;         ///< requests in flight (the session's worker_num)
  std::int64_t batch = 1;  ///< samples per query
  std::vector<ProgramFigures> programs;  ///< one per NPU program execution of a query, in order
  double device_us = 0;    ///< modelled device time of one query: sum of programs' totals
  /// The per-query term added to each query's device time (kQueryOverheadUs unless a caller of
  /// model_figures chose another): host time of the card's SDK path, overlapping other queries'
  /// device time.
  double query_overhead_us = 0;
  /// Modelled end-to-end query latency (what MLPerf measures): a deterministic closed-loop
  /// schedule of `workers` queries in flight, each spending query_overhead_us off the devices and
  /// then its device time on the first free of `devices` FIFO devices; percentiles in us.
  double p50_us = 0, p90_us = 0, p99_us = 0;
  /// The same schedule with no per-query term: the device's part only (device_us when workers <=
  /// devices).
  double device_p50_us = 0, device_p90_us = 0, device_p99_us = 0;
  /// Modelled throughput of that schedule: min(devices / device time, workers / (device time +
  /// query_overhead_us)) x batch. Device-bound runs (workers > devices, offline) are unchanged by
  /// the per-query term; one query in flight gives 1 / end-to-end latency.
  double samples_per_s = 0;
  /// Device-only throughput: min(workers, devices) / device time x batch (no per-query term).
  double device_samples_per_s = 0;
  /// Host operators (Quantize, Lower, Unlower, Dequantize, fallbacks) measured, us per query,
  /// by operator name. Not deterministic: the host's own speed.
  std::map<std::string, double> host_us_by_operator;
  double host_us = 0;  ///< sum of host_us_by_operator
  /// Simulator lateness (SimOverrun spans) measured, us per query; 0 in timing mode.
  double simulator_us = 0;
  Bottleneck bottleneck;
};

/// Figures of a run. Latency of a query = submit to result, in microseconds. The percentiles come
/// from a LatencyHistogram (latency_histogram.h: fixed memory, within 1/128 of the exact
/// percentile); min, mean and max are exact.
struct BenchResult {
  std::uint64_t queries = 0;
  std::uint64_t errors = 0;
  double seconds = 0;
  double qps = 0;
  double min_us = 0, mean_us = 0, p50_us = 0, p90_us = 0, p95_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
  std::string devices;
  double load_ms = 0;    ///< create_runner / create_queue: compile (or cache load) and program load
  double first_us = 0;   ///< latency of the first query after load (not in the steady-state figures)
  ModelledFigures modelled;  ///< see ModelledFigures (available only when spans were recorded)
};

/// A tensor of `desc`'s dtype and shape filled from `rng`: floats uniform in [0, 1), 8-bit
/// integers over the type's range, int32 and int64 uniform in [-1000, 1000].
Tensor random_tensor(const runtime::TensorDesc& desc, std::mt19937_64& rng);

/// random_tensor() for each of the model's inputs in order, from one generator seeded `seed`.
std::vector<Tensor> random_inputs(const runtime::Model& model, std::uint64_t seed);

/// What model_figures needs to know about the run its spans come from.
struct RunFacts {
  double measured_mean_us = 0;                  ///< mean query latency, us (0: unknown)
  double measured_samples_per_s = 0;            ///< the rate the run measured (0: unknown)
  unsigned host_cores = 1;                      ///< cores the host bound assumes
  double query_overhead_us = kQueryOverheadUs;  ///< the modelled per-query term
  /// An async run (a queue): each query's latency counts its wait behind every query submitted
  /// before it, so it says nothing about how long a worker carries one query.
  bool async = false;
  /// The device followed its modelled clock (a card, or the simulator with pacing on), so the
  /// modelled device time is time the run spent; false for the simulator with pacing off.
  bool device_paced = true;
};

/// The modelled section from the spans of a run: per-program Load/Execution/Store of the first
/// traced query with NPU executions, the closed-loop latency and device-bound throughput for
/// `devices`, `workers` and `batch` with `run.query_overhead_us` per query, host operator time
/// per query (mean over the traced queries), and the bottleneck of the run `run` describes
/// (docs/timing.md, "The modelled section of a benchmark"). Pure function; thread-safe.
ModelledFigures model_figures(const std::vector<profiler::SpanRecord>& spans, int devices,
                              int workers, std::int64_t batch, const RunFacts& run);

/// A query's time on a device, ns, by engine (the sums over its programs): Load (host -> device
/// DMA), the kernels, Store (device -> host DMA). The engines run concurrently, as on the card
/// and on the simulator's timeline (furiosa/device/engine_timeline.h, which both use).
struct DeviceStages {
  std::int64_t load_ns = 0;
  std::int64_t exec_ns = 0;
  std::int64_t store_ns = 0;
  std::int64_t total_ns() const noexcept { return load_ns + exec_ns + store_ns; }
  /// The busiest engine: a device with enough queries in flight completes one per this time.
  std::int64_t bottleneck_ns() const noexcept { return std::max({load_ns, exec_ns, store_ns}); }
};

/// Modelled closed-loop latencies (ns) of `completions` queries: `in_flight` queries circulate;
/// each spends `overhead_ns` off the devices (host time, overlapping other queries), then goes
/// to the device whose PE is free first (lowest index on ties), where its Load, kernels and
/// Store each wait for their engine and for the stage before (FIFO per engine, so the Load of
/// one query overlaps the kernels of the query before); each finished query is resubmitted at
/// once. Deterministic.
std::vector<std::int64_t> closed_loop_latencies(int devices, int in_flight,
                                                const DeviceStages& stages, std::size_t completions,
                                                std::int64_t overhead_ns = 0);

/// closed_loop_latencies with the whole `service_ns` on the PE (no DMA stages).
std::vector<std::int64_t> closed_loop_latencies(int devices, int in_flight, std::int64_t service_ns,
                                                std::size_t completions, std::int64_t overhead_ns = 0);

/// The number of device files in a comma-separated device name ("npu0pe0,npu0pe1" -> 2).
int count_devices(std::string_view device_name) noexcept;

/// Loads the model once (a Runner in sync mode, a queue in async mode), asks `make_inputs` for
/// the inputs, runs the benchmark and prints the figures to stdout (unless options.print is
/// false). When options.session.profiler is null a private profiler records the spans the
/// modelled section needs. Throws furiosa::Error on setup failures; per-query failures are counted in `errors`.
BenchResult run_bench(const BenchOptions& options, const InputMaker& make_inputs);

/// One run_bench of `model` on a fresh simulator (the environment's SimConfig,
/// sim_config_from_environment) in timing mode: nothing is computed, inputs are zero-filled, and
/// the figures are the timing model's (pacing on or off). `limit` sets the run's length
/// (duration_s or queries) and any other option; nothing is printed. Used by perf-guide and by
/// the timing model's tests. Throws like run_bench.
BenchResult run_timing_bench(const std::filesystem::path& model, const std::string& devices, int workers,
                             std::int64_t batch, bool pacing, const std::function<void(BenchOptions&)>& limit);

}  // namespace furiosa::tools
