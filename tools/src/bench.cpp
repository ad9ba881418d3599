// Benchmark mode of furiosa-run.
#include "bench.h"

#include "latency_histogram.h"

#include "furiosa/core/file_io.h"
#include "furiosa/device/engine_timeline.h"
#include "furiosa/device/sim.h"
#include "furiosa/profiler/statistics.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <queue>
#include <set>
#include <tuple>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>

#include "furiosa/profiler/profiler.h"
#include "furiosa/profiler/report.h"
#include "furiosa/runtime/queue.h"

namespace furiosa::tools {
namespace {

using Clock = std::chrono::steady_clock;

// Decides when to stop and prints progress.
class Budget {
 public:
  Budget(const BenchOptions& o)
      : queries_(o.queries), duration_(o.duration_s), progress_(o.progress),
        min_queries_(static_cast<std::uint64_t>(std::max(1, o.session.worker_num))) {
    if (queries_ == 0 && duration_ <= 0) queries_ = 100;
    start_ = Clock::now();
  }
  /// Claims one more query; false once the budget is spent. A duration budget grants at least
  /// one query per worker whenever they start, so a run on a slow or loaded machine (threads
  /// starting late, an inference longer than the duration) still measures something.
  bool claim() {
    const std::uint64_t n = issued_.fetch_add(1);
    if (queries_ > 0) return n < queries_;
    return n < min_queries_ || elapsed() < duration_;
  }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  void tick(std::uint64_t done) {
    if (!progress_) return;
    const double t = elapsed();
    std::lock_guard lock(mu_);
    if (t >= 1.0 && t - last_ >= 1.0) {
      last_ = t;
      fmt::print(stderr, "\r{} queries in {:.0f} s ({:.1f} QPS)", done, t, static_cast<double>(done) / t);
      printed_ = true;
    }
  }
  void finish() {
    if (printed_) fmt::print(stderr, "\n");
  }

 private:
  std::uint64_t queries_;
  double duration_;
  bool progress_;
  std::uint64_t min_queries_;  ///< a duration budget's floor: one query per worker
  Clock::time_point start_;
  std::atomic<std::uint64_t> issued_{0};
  std::mutex mu_;
  double last_ = 0;
  bool printed_ = false;
};

// The figures of a run, as furiosa-run prints them.
void print_result(const BenchOptions& o, const BenchResult& r) {
  fmt::print("mode: {}, devices: {}, workers: {}, batch size: {}\n", o.mode, r.devices, o.session.worker_num,
             o.session.batch_size);
  fmt::print("queries: {} ({} errors) in {:.3f} s\n", r.queries, r.errors, r.seconds);
  fmt::print("QPS: {:.1f} (samples/s: {:.1f})\n", r.qps, r.qps * static_cast<double>(o.session.batch_size));
  fmt::print("latency (us): min {:.1f}, mean {:.1f}, p50 {:.1f}, p90 {:.1f}, p95 {:.1f}, p99 {:.1f}, p99.9 {:.1f}, max {:.1f}\n",
             r.min_us, r.mean_us, r.p50_us, r.p90_us, r.p95_us, r.p99_us, r.p999_us, r.max_us);
  fmt::print("load: {:.1f} ms; first inference: {:.1f} us (not in the figures above; steady-state p50 {:.1f} us)\n",
             r.load_ms, r.first_us, r.p50_us);
  const ModelledFigures& m = r.modelled;
  if (!m.available) {
    fmt::print("modelled: not available (no NPU execution was traced)\n");
    return;
  }
  fmt::print("modelled (timing model, deterministic): {} device(s), {} worker(s), batch {}\n", m.devices, m.workers,
             m.batch);
  for (std::size_t i = 0; i < m.programs.size(); ++i) {
    const ProgramFigures& p = m.programs[i];
    fmt::print("  program {}: Load {:.1f} + Execution {:.1f} + Store {:.1f} = {:.1f} us\n", i, p.load_us, p.execution_us,
               p.store_us, p.total_us());
  }
  fmt::print("  device time per query: {:.1f} us; device only: latency (us) p50 {:.1f}, p90 {:.1f}, p99 {:.1f}; {:.1f} samples/s\n",
             m.device_us, m.device_p50_us, m.device_p90_us, m.device_p99_us, m.device_samples_per_s);
  fmt::print("  end to end (+ {:.1f} us per query, fitted once to MLPerf v2.0 ResNet-50): latency (us) p50 {:.1f}, p90 {:.1f}, "
             "p99 {:.1f}; {:.1f} samples/s\n",
             m.query_overhead_us, m.p50_us, m.p90_us, m.p99_us, m.samples_per_s);
  std::string ops;
  for (const auto& [name, us] : m.host_us_by_operator) ops += fmt::format("{}{} {:.1f}", ops.empty() ? "" : ", ", name, us);
  fmt::print("host operators (measured, us per query): {:.1f}{}\n", m.host_us, ops.empty() ? " (none)" : " = " + ops);
  const Bottleneck& b = m.bottleneck;
  std::string host_ops;
  for (const auto& [name, share] : b.host_operators) {
    host_ops += fmt::format("{}{} {:.0f}%", host_ops.empty() ? "" : ", ", name, 100.0 * share);
  }
  const auto share = [&](const char* k) { return b.shares.contains(k) ? 100.0 * b.shares.at(k) : 0.0; };
  const std::string device_share =
      b.shares.contains("device") ? fmt::format("device {:.0f}%, ", share("device")) : "";
  const std::string device_bound =
      b.device_bound_samples_per_s > 0
          ? fmt::format("{:.1f}", b.device_bound_samples_per_s)
          : std::string("none (pacing off: the device did not keep the modelled time)");
  fmt::print(
      "bottleneck: {} (of a query's mean latency: {}host {:.0f}%{},{} queue {:.0f}%; bounds: "
      "device {}, host {:.1f}, "
      "workers {:.1f} samples/s; measured {:.1f})\n",
      b.kind, device_share, share("host"), host_ops.empty() ? "" : " [" + host_ops + "]",
      b.shares.contains("simulator")
          ? fmt::format(" simulator lateness {:.0f}%,", share("simulator"))
          : "",
      share("queue"), device_bound, b.host_bound_samples_per_s, b.worker_bound_samples_per_s,
      b.measured_samples_per_s);
}

// The modelled section: only what the timing model gives (the same on every run), and the
// bottleneck's kind.
nlohmann::json modelled_json(const ModelledFigures& m) {
  if (!m.available) return nullptr;
  nlohmann::json programs = nlohmann::json::array();
  for (const auto& p : m.programs) {
    programs.push_back({{"load_us", p.load_us}, {"execution_us", p.execution_us}, {"store_us", p.store_us},
                        {"total_us", p.total_us()}});
  }
  return {{"devices", m.devices},
          {"workers", m.workers},
          {"batch_size", m.batch},
          {"programs", programs},
          {"device_us", m.device_us},
          {"query_overhead_us", m.query_overhead_us},
          {"latency_us", {{"p50", m.p50_us}, {"p90", m.p90_us}, {"p99", m.p99_us}}},
          {"device_latency_us", {{"p50", m.device_p50_us}, {"p90", m.device_p90_us}, {"p99", m.device_p99_us}}},
          {"samples_per_s", m.samples_per_s},
          {"device_samples_per_s", m.device_samples_per_s},
          {"bottleneck", m.bottleneck.kind}};
}

// The measured host figures of a query.
nlohmann::json host_json(const ModelledFigures& m) {
  if (!m.available) return nullptr;
  return {{"operator_us", m.host_us}, {"operator_us_by_name", m.host_us_by_operator}, {"simulator_us", m.simulator_us}};
}

// The bottleneck with its shares and bounds (measured host time).
nlohmann::json bottleneck_json(const ModelledFigures& m) {
  if (!m.available) return nullptr;
  nlohmann::json host_ops = nlohmann::json::array();
  for (const auto& [name, share] : m.bottleneck.host_operators) host_ops.push_back({{"name", name}, {"share", share}});
  return {{"kind", m.bottleneck.kind},
          {"shares", m.bottleneck.shares},
          {"host_operators", host_ops},
          {"device_bound_samples_per_s", m.bottleneck.device_bound_samples_per_s},
          {"host_bound_samples_per_s", m.bottleneck.host_bound_samples_per_s},
          {"worker_bound_samples_per_s", m.bottleneck.worker_bound_samples_per_s},
          {"predicted_samples_per_s", m.bottleneck.predicted_samples_per_s},
          {"measured_samples_per_s", m.bottleneck.measured_samples_per_s}};
}

}  // namespace

Tensor random_tensor(const runtime::TensorDesc& d, std::mt19937_64& rng) {
  Tensor t(d.dtype, d.shape);
  switch (d.dtype) {
    case DType::Float32: {
      std::uniform_real_distribution<float> dist(0.0f, 1.0f);
      for (auto& v : t.as<float>()) v = dist(rng);
      break;
    }
    case DType::UInt8: {
      std::uniform_int_distribution<int> dist(0, 255);
      for (auto& v : t.as<std::uint8_t>()) v = static_cast<std::uint8_t>(dist(rng));
      break;
    }
    case DType::Int8: {
      std::uniform_int_distribution<int> dist(-128, 127);
      for (auto& v : t.as<std::int8_t>()) v = static_cast<std::int8_t>(dist(rng));
      break;
    }
    case DType::Int32: {
      std::uniform_int_distribution<std::int32_t> dist(-1000, 1000);
      for (auto& v : t.as<std::int32_t>()) v = dist(rng);
      break;
    }
    case DType::Int64: {
      std::uniform_int_distribution<std::int64_t> dist(-1000, 1000);
      for (auto& v : t.as<std::int64_t>()) v = dist(rng);
      break;
    }
  }
  return t;
}

std::vector<Tensor> random_inputs(const runtime::Model& model, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> inputs;
  for (const auto& d : model.inputs) inputs.push_back(random_tensor(d, rng));
  return inputs;
}

namespace {
// A trace id as an ordered key.
std::pair<std::uint64_t, std::uint64_t> key_of(const profiler::TraceId& id) { return {id.hi, id.lo}; }
}  // namespace

int count_devices(std::string_view name) noexcept {
  if (name.empty()) return 0;
  return static_cast<int>(std::count(name.begin(), name.end(), ',')) + 1;
}

std::vector<std::int64_t> closed_loop_latencies(int devices, int in_flight,
                                                const DeviceStages& stages, std::size_t completions,
                                                std::int64_t overhead_ns) {
  std::vector<std::int64_t> out;
  if (devices <= 0 || in_flight <= 0 || stages.load_ns < 0 || stages.exec_ns < 0 ||
      stages.store_ns < 0 || overhead_ns < 0) {
    return out;
  }
  // Queries ready to submit, by time then client index (ties broken the same way every run).
  std::priority_queue<std::pair<std::int64_t, int>, std::vector<std::pair<std::int64_t, int>>, std::greater<>> ready;
  for (int c = 0; c < in_flight; ++c) ready.push({0, c});
  // Per device, its Load DMA, PE and Store DMA, as the simulator places executions on them.
  std::vector<device::EngineTimeline> dev(static_cast<std::size_t>(devices));
  out.reserve(completions);
  while (out.size() < completions) {
    const auto [submitted, client] = ready.top();
    ready.pop();
    // The query's host part (overhead_ns) occupies no device, so it overlaps the other queries'
    // device time; it is placed before the device, which gives the same latency and rate as any
    // split between submission and completion in a closed loop.
    auto& d = *std::min_element(dev.begin(), dev.end(), [](const auto& a, const auto& b) {
      return a.pe_free_ns < b.pe_free_ns;
    });
    const std::int64_t end =
        d.place(submitted + overhead_ns, stages.load_ns, stages.exec_ns, stages.store_ns)
            .store_end_ns;
    out.push_back(end - submitted);
    ready.push({end, client});
  }
  return out;
}

std::vector<std::int64_t> closed_loop_latencies(int devices, int in_flight, std::int64_t service_ns,
                                                std::size_t completions, std::int64_t overhead_ns) {
  return closed_loop_latencies(devices, in_flight, DeviceStages{0, service_ns, 0}, completions,
                               overhead_ns);
}

ModelledFigures model_figures(const std::vector<profiler::SpanRecord>& spans, int devices,
                              int workers, std::int64_t batch, const RunFacts& run) {
  const double measured_mean_us = run.measured_mean_us;
  ModelledFigures m;
  m.devices = std::max(devices, 1);
  m.workers = std::max(workers, 1);
  m.batch = std::max<std::int64_t>(batch, 1);
  // Queries in start order; the first one (cold) is left out of the host figures when there are others.
  std::vector<const profiler::SpanRecord*> inferences;
  for (const auto& s : spans) {
    if (s.name == "Inference" && s.cat == profiler::Category::Runtime) inferences.push_back(&s);
  }
  std::sort(inferences.begin(), inferences.end(),
            [](const auto* a, const auto* b) { return a->start_ns < b->start_ns || (a->start_ns == b->start_ns && a->span_id < b->span_id); });
  // The device figures of the first query with NPU executions: every execution of a program has
  // the same modelled figures, so any query gives the same.
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<const profiler::SpanRecord*>> npu_by_trace;
  for (const auto& s : spans) {
    if (s.cat == profiler::Category::NPU && (s.name == "Load" || s.name == "Execution" || s.name == "Store")) {
      npu_by_trace[key_of(s.trace_id)].push_back(&s);
    }
  }
  for (const auto* inf : inferences) {
    const auto it = npu_by_trace.find(key_of(inf->trace_id));
    if (it == npu_by_trace.end()) continue;
    // Group this query's spans by execution (device + execution index), in start order.
    std::map<std::tuple<std::int32_t, std::int32_t, std::int64_t>, ProgramFigures> by_execution;
    std::map<std::tuple<std::int32_t, std::int32_t, std::int64_t>, std::int64_t> started;
    for (const auto* s : it->second) {
      const auto key = std::make_tuple(s->card, s->pe_index, s->execution_index);
      ProgramFigures& p = by_execution[key];
      const double us = static_cast<double>(s->dur_ns()) * 1e-3;
      if (s->name == "Load") p.load_us += us;
      if (s->name == "Execution") p.execution_us += us;
      if (s->name == "Store") p.store_us += us;
      auto [st, fresh] = started.try_emplace(key, s->start_ns);
      if (!fresh) st->second = std::min(st->second, s->start_ns);
    }
    std::vector<std::pair<std::int64_t, ProgramFigures>> ordered;
    for (const auto& [key, p] : by_execution) ordered.emplace_back(started[key], p);
    std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [start, p] : ordered) {
      m.programs.push_back(p);
      m.device_us += p.total_us();
    }
    m.available = true;
    break;
  }
  if (!m.available) return m;
  // Device time in whole ns, so the schedule is exact; the modelled spans are whole ns.
  DeviceStages stages;
  for (const auto& p : m.programs) {
    stages.load_ns += static_cast<std::int64_t>(std::llround(p.load_us * 1e3));
    stages.exec_ns += static_cast<std::int64_t>(std::llround(p.execution_us * 1e3));
    stages.store_ns += static_cast<std::int64_t>(std::llround(p.store_us * 1e3));
  }
  m.query_overhead_us = std::max(0.0, run.query_overhead_us);
  const auto overhead_ns = static_cast<std::int64_t>(std::llround(m.query_overhead_us * 1e3));
  const std::size_t skip = 2 * static_cast<std::size_t>(m.workers);  // the start-up of the schedule
  const auto percentiles = [&](std::int64_t host_ns, double& p50, double& p90, double& p99) {
    std::vector<std::int64_t> lat =
        closed_loop_latencies(m.devices, m.workers, stages, 1000 + skip, host_ns);
    lat.erase(lat.begin(), lat.begin() + static_cast<std::ptrdiff_t>(skip));
    std::sort(lat.begin(), lat.end());
    p50 = static_cast<double>(profiler::percentile<std::int64_t>(lat, 500)) * 1e-3;
    p90 = static_cast<double>(profiler::percentile<std::int64_t>(lat, 900)) * 1e-3;
    p99 = static_cast<double>(profiler::percentile<std::int64_t>(lat, 990)) * 1e-3;
  };
  percentiles(overhead_ns, m.p50_us, m.p90_us, m.p99_us);
  percentiles(0, m.device_p50_us, m.device_p90_us, m.device_p99_us);
  const double b = static_cast<double>(m.batch);
  const double device_s = m.device_us * 1e-6;
  // A device kept busy completes one query per its busiest engine's time (Load, kernels or
  // Store: they overlap between queries); fewer queries in flight than that needs leave it idle.
  const double busiest_s = static_cast<double>(stages.bottleneck_ns()) * 1e-9;
  const double devices_rate = busiest_s > 0 ? static_cast<double>(m.devices) * b / busiest_s : 0;
  // Closed loop: the devices' rate, or the workers' when each carries its query's device time
  // and the per-query term one after the other.
  const double loop_s = device_s + m.query_overhead_us * 1e-6;
  m.device_samples_per_s =
      device_s > 0 ? std::min(devices_rate, static_cast<double>(m.workers) * b / device_s) : 0;
  m.samples_per_s =
      device_s > 0 ? std::min(devices_rate, static_cast<double>(m.workers) * b / loop_s) : 0;

  // Host operators per query, measured (the queries after the first).
  double enqueue_us = 0;  // submissions to the device (Enqueue spans), us per query
  std::set<std::pair<std::uint64_t, std::uint64_t>> counted;
  for (std::size_t i = inferences.size() > 1 ? 1 : 0; i < inferences.size(); ++i) counted.insert(key_of(inferences[i]->trace_id));
  if (!counted.empty()) {
    for (const auto& row : profiler::external_operator_report(spans)) {
      if (counted.contains(key_of(row.trace_id))) m.host_us_by_operator[row.name] += static_cast<double>(row.dur_ns) * 1e-3;
    }
    for (auto& [name, us] : m.host_us_by_operator) {
      us /= static_cast<double>(counted.size());
      m.host_us += us;
    }
    for (const auto& s : spans) {
      if (!counted.contains(key_of(s.trace_id))) continue;
      if (s.name == "SimOverrun") m.simulator_us += static_cast<double>(s.dur_ns()) * 1e-3;
      if (s.name == "Enqueue") enqueue_us += static_cast<double>(s.dur_ns()) * 1e-3;
    }
    m.simulator_us /= static_cast<double>(counted.size());
    enqueue_us /= static_cast<double>(counted.size());
  }

  // Bottleneck (docs/timing.md): three throughput bounds, each one the run cannot exceed.
  Bottleneck& bn = m.bottleneck;
  const double host_s = m.host_us * 1e-6;
  // Device time the run spent: the modelled time when the device followed its clock, else none
  // (the simulator with pacing off signals executions when the host is done with them).
  const double spent_device_s = run.device_paced ? device_s : 0;
  const double cores = static_cast<double>(
      std::min<unsigned>(static_cast<unsigned>(m.workers), std::max(run.host_cores, 1u)));
  bn.device_bound_samples_per_s = run.device_paced ? devices_rate : 0;
  bn.host_bound_samples_per_s = host_s > 0 ? cores * b / host_s : 0;
  // A worker carries one query at a time. Sync: from submission to result, its measured latency.
  // Async: only the host stages (host operators, Enqueue); the latency also holds the wait behind
  // every query queued before it, which no worker spends (before issue 34 that latency, or the
  // modelled per-query term, put this bound below the rate the same run measured).
  const double query_s = run.async ? host_s + enqueue_us * 1e-6
                                   : std::max(measured_mean_us * 1e-6, spent_device_s + host_s);
  bn.worker_bound_samples_per_s = query_s > 0 ? static_cast<double>(m.workers) * b / query_s : 0;
  double predicted = 0;  // the smallest known (non-zero) bound
  for (const double bound : {bn.worker_bound_samples_per_s, bn.device_bound_samples_per_s,
                             bn.host_bound_samples_per_s}) {
    if (bound > 0) predicted = predicted > 0 ? std::min(predicted, bound) : bound;
  }
  bn.predicted_samples_per_s = predicted;
  bn.measured_samples_per_s = std::max(0.0, run.measured_samples_per_s);
  // The kind. With the measured rate R: the device when the run reached 80% of its bound (the
  // rest is the host's scheduling: a two-vCPU guest with both cores busy reaches 88-97% in
  // device-bound runs); else the host operators when they take at least half of the time the
  // workers have (R reached half of the host bound); else the workers (too few queries in
  // flight, or the runtime's own path per query). Without R: the bound within 10% of the
  // smallest, device first, then host.
  constexpr double kNear = 1.10;
  constexpr double kDeviceReached = 0.8;
  const double r = bn.measured_samples_per_s;
  const auto reached = [&](double bound, double fraction) {
    return bound > 0 && r >= fraction * bound;
  };
  if (r > 0 ? reached(bn.device_bound_samples_per_s, kDeviceReached)
            : bn.device_bound_samples_per_s > 0 &&
                  bn.device_bound_samples_per_s <= kNear * predicted) {
    bn.kind = "device-bound";
  } else if (r > 0 ? reached(bn.host_bound_samples_per_s, 0.5)
                   : bn.host_bound_samples_per_s > 0 &&
                         bn.host_bound_samples_per_s <= kNear * predicted) {
    bn.kind = "host-bound";
  } else {
    bn.kind = "worker-bound";
  }
  const double spent_device_us = spent_device_s * 1e6;
  const double total_us = std::max(measured_mean_us, spent_device_us + m.host_us);
  if (total_us > 0) {
    if (run.device_paced) bn.shares["device"] = spent_device_us / total_us;
    bn.shares["host"] = m.host_us / total_us;
    const double rest = std::max(0.0, 1.0 - spent_device_us / total_us - bn.shares["host"]);
    const double simulator = std::min(m.simulator_us / total_us, rest);
    if (simulator > 0) bn.shares["simulator"] = simulator;
    bn.shares["queue"] = rest - simulator;
    for (const auto& [name, us] : m.host_us_by_operator) bn.host_operators.emplace_back(name, us / total_us);
    std::stable_sort(bn.host_operators.begin(), bn.host_operators.end(),
                     [](const auto& x, const auto& y) { return x.second > y.second; });
  }
  return m;
}

BenchResult run_bench(const BenchOptions& options, const InputMaker& make_inputs) {
  BenchOptions o = options;
  // The modelled section reads the run's spans: record them when nobody else does.
  // Host operator and NPU execution spans only (no kernel spans), and a bounded number of them:
  // a long run keeps the figures of its first queries.
  if (!o.session.profiler) {
    profiler::ProfilerOptions po;
    po.kinds = profiler::SpanKinds::RuntimeSteps | profiler::SpanKinds::NpuExecutions;
    po.max_events = 200'000;
    o.session.profiler = std::make_shared<profiler::Profiler>(po);
  }
  if (o.mode != "sync" && o.mode != "async") {
    throw Error(ErrorCode::InvalidArgument, fmt::format("--mode '{}': expected sync or async", o.mode));
  }
  LatencyHistogram lat;  // fixed memory however long the run (latency_histogram.h)
  std::mutex lat_mu;
  std::atomic<std::uint64_t> errors{0}, done{0};
  BenchResult r;
  double seconds = 0;
  if (o.mode == "sync") {
    runtime::RunnerOptions ro;
    static_cast<runtime::SessionOptions&>(ro) = o.session;
    const auto load_start = Clock::now();
    auto runner = runtime::create_runner(o.model, ro);
    r.load_ms = std::chrono::duration<double, std::milli>(Clock::now() - load_start).count();
    r.devices = runner->device_name();
    const std::vector<Tensor> inputs = make_inputs(runner->model());
    const auto first_start = Clock::now();
    runner->run(inputs);  // the first query: reported on its own, not in the steady-state figures
    r.first_us = std::chrono::duration<double, std::micro>(Clock::now() - first_start).count();
    const auto t0 = Clock::now();
    Budget b(o);
    std::vector<std::thread> threads;
    for (int w = 0; w < o.session.worker_num; ++w) {
      threads.emplace_back([&] {
        while (b.claim()) {
          const auto s = Clock::now();
          try {
            runner->run(inputs);
          } catch (const std::exception&) {
            ++errors;
          }
          const double us = std::chrono::duration<double, std::micro>(Clock::now() - s).count();
          {
            std::lock_guard lock(lat_mu);
            lat.record(us);
          }
          b.tick(++done);
        }
      });
    }
    for (auto& t : threads) t.join();
    b.finish();
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  } else {
    runtime::QueueOptions qo;
    static_cast<runtime::SessionOptions&>(qo) = o.session;
    qo.input_queue_size = static_cast<std::size_t>(std::max(2, o.session.worker_num * 2));
    const auto load_start = Clock::now();
    auto [submitter, receiver] = runtime::create_queue(o.model, qo);
    r.load_ms = std::chrono::duration<double, std::milli>(Clock::now() - load_start).count();
    const std::vector<Tensor> inputs = make_inputs(submitter.model());
    {  // the first query: reported on its own, not in the steady-state figures
      submitter.submit(inputs, Clock::now());
      auto res = receiver.recv(std::chrono::seconds(600));
      r.first_us = std::chrono::duration<double, std::micro>(Clock::now() - std::any_cast<Clock::time_point>(res.context)).count();
    }
    Budget b(o);
    const auto t0 = Clock::now();
    std::thread producer([&, &s = submitter] {
      while (b.claim()) s.submit(inputs, Clock::now());
      s.close();
    });
    try {
      for (;;) {
        auto res = receiver.recv(std::chrono::seconds(600));
        const auto submitted = std::any_cast<Clock::time_point>(res.context);
        if (res.error) ++errors;
        lat.record(std::chrono::duration<double, std::micro>(Clock::now() - submitted).count());
        b.tick(++done);
      }
    } catch (const Error& e) {
      if (e.code() != ErrorCode::SessionTerminated) {
        producer.join();
        throw;
      }
    }
    producer.join();
    b.finish();
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.devices = o.session.device.empty() ? "default" : o.session.device;
  }
  r.queries = lat.count();
  r.errors = errors;
  r.seconds = seconds;
  r.qps = seconds > 0 ? static_cast<double>(r.queries) / seconds : 0;
  if (lat.count() > 0) {
    r.min_us = lat.min_us();
    r.max_us = lat.max_us();
    r.mean_us = lat.mean_us();
    r.p50_us = lat.percentile_us(500);
    r.p90_us = lat.percentile_us(900);
    r.p95_us = lat.percentile_us(950);
    r.p99_us = lat.percentile_us(990);
    r.p999_us = lat.percentile_us(999);
  }
  RunFacts facts;
  facts.measured_mean_us = r.mean_us;
  facts.measured_samples_per_s =
      r.qps * static_cast<double>(std::max<std::int64_t>(o.session.batch_size, 1));
  facts.host_cores = std::thread::hardware_concurrency();
  facts.async = o.mode == "async";
  facts.device_paced = o.device_paced;
  r.modelled = model_figures(o.session.profiler->records(), count_devices(r.devices),
                             o.session.worker_num, o.session.batch_size, facts);
  if (o.print) print_result(o, r);
  if (!o.json.empty()) {
    nlohmann::json j = {{"model", o.model.string()}, {"mode", o.mode}, {"devices", r.devices},
                        {"workers", o.session.worker_num}, {"batch_size", o.session.batch_size}, {"queries", r.queries},
                        {"errors", r.errors}, {"qps", r.qps},
                        {"latency_us", {{"min", r.min_us}, {"mean", r.mean_us}, {"p50", r.p50_us}, {"p90", r.p90_us},
                                        {"p95", r.p95_us}, {"p99", r.p99_us}, {"p999", r.p999_us}, {"max", r.max_us}}},
                        {"load_ms", r.load_ms},
                        {"first_inference_us", r.first_us},
                        {"modelled", modelled_json(r.modelled)},
                        {"host", host_json(r.modelled)},
                        {"bottleneck", bottleneck_json(r.modelled)}};
    write_file_atomically(o.json, j.dump(2) + "\n", ErrorCode::IoError, "JSON report");
    fmt::print("wrote {}\n", o.json.string());
  }
  return r;
}

BenchResult run_timing_bench(const std::filesystem::path& model, const std::string& devices, int workers,
                             std::int64_t batch, bool pacing, const std::function<void(BenchOptions&)>& limit) {
  device::SimConfig config = device::sim_config_from_environment();
  config.mode = device::SimMode::Timing;
  config.pacing = pacing;
  auto driver = device::create_sim_driver(config);
  BenchOptions o;
  o.device_paced = pacing;
  o.model = model;
  o.session.device = devices;
  o.session.worker_num = workers;
  o.session.batch_size = batch;
  o.session.driver = driver.get();
  o.progress = false;
  o.print = false;
  limit(o);
  return run_bench(o, [](const runtime::Model& m) {
    std::vector<Tensor> inputs;
    for (const auto& d : m.inputs) inputs.emplace_back(d.dtype, d.shape);
    return inputs;
  });
}

}  // namespace furiosa::tools
