// The modelled section of furiosa-run --bench (tools/src/bench.h): deterministic device figures
// from the timing model, ResNet-50 v1.5's calibration against MLPerf Inference v2.0 read from
// that section, and the bottleneck classification on constructed runs. Only modelled figures
// are asserted; measured (wall-clock) figures never are.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <fstream>

#include "furiosa/device/sim.h"
#include "src/bench.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

/// A short benchmark of `model` in timing mode (nothing computed) on a fresh simulator.
tools::BenchResult timed_bench(const fs::path& model, const std::string& devices, int workers, std::int64_t batch,
                               bool pacing = false, std::uint64_t queries = 6) {
  return tools::run_timing_bench(model, devices, workers, batch, pacing,
                                 [&](tools::BenchOptions& o) { o.queries = queries; });
}

fs::path mobilenet() { return test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx"); }

fs::path resnet50() {
  const fs::path p = FURIOSA_RESNET50_FLOAT;
  if (!fs::exists(p)) FAIL("missing " << p.string() << ": build the resnet50-model target");
  return p;
}

/// Spans of a constructed run: `queries` queries of one program execution each (Load, Execution,
/// Store of the given us), host operators (name, us) per query, round-robin over `devices` PEs.
std::vector<profiler::SpanRecord> constructed_run(int queries, int devices, double load_us, double exec_us,
                                                  double store_us,
                                                  const std::vector<std::pair<std::string, double>>& host_ops) {
  std::vector<profiler::SpanRecord> spans;
  std::uint64_t id = 1;
  std::int64_t t = 1'000'000;
  const auto ns = [](double us) { return static_cast<std::int64_t>(us * 1e3); };
  for (int q = 0; q < queries; ++q) {
    const profiler::TraceId trace{0, static_cast<std::uint64_t>(q + 1)};
    profiler::SpanRecord inf;
    inf.trace_id = trace;
    inf.span_id = id++;
    inf.name = "Inference";
    inf.start_ns = t;
    std::int64_t c = t;
    std::int32_t op = 0;
    for (const auto& [name, us] : host_ops) {
      profiler::SpanRecord h;
      h.trace_id = trace;
      h.span_id = id++;
      h.parent_span_id = inf.span_id;
      h.name = name;
      h.operator_index = op++;
      h.start_ns = c;
      h.end_ns = c += ns(us);
      h.thread_id = 7;
      spans.push_back(h);
    }
    profiler::SpanRecord enqueue;  // the worker's submission to the device
    enqueue.trace_id = trace;
    enqueue.span_id = id++;
    enqueue.name = "Enqueue";
    enqueue.cat = profiler::Category::NPU;
    enqueue.start_ns = c;
    enqueue.end_ns = c + ns(2);
    enqueue.thread_id = 7;
    spans.push_back(enqueue);
    for (const auto& [name, us] : std::vector<std::pair<std::string, double>>{
             {"Load", load_us}, {"Execution", exec_us}, {"Store", store_us}}) {
      profiler::SpanRecord d;
      d.trace_id = trace;
      d.span_id = id++;
      d.name = name;
      d.cat = profiler::Category::NPU;
      d.card = 0;
      d.pe_index = q % devices;
      d.execution_index = q / devices;
      d.start_ns = c;
      d.end_ns = c += ns(us);
      spans.push_back(d);
    }
    inf.end_ns = c;
    spans.push_back(inf);
    t = c + 1000;
  }
  return spans;
}

/// A run on 2 host cores whose mean query latency was `mean_us` (no measured rate given).
tools::RunFacts facts(double mean_us, bool async = false) {
  tools::RunFacts f;
  f.measured_mean_us = mean_us;
  f.host_cores = 2;
  f.async = async;
  return f;
}

}  // namespace

TEST_CASE("the closed-loop schedule of the modelled latency", "[tools][modelled]") {
  // One query in flight per device: the device time, never more.
  for (auto l : tools::closed_loop_latencies(2, 1, 100, 10)) CHECK(l == 100);
  for (auto l : tools::closed_loop_latencies(2, 2, 100, 10)) CHECK(l == 100);
  // Four queries on two devices: each waits for one other.
  const auto four = tools::closed_loop_latencies(2, 4, 100, 20);
  for (std::size_t i = 4; i < four.size(); ++i) CHECK(four[i] == 200);
  // A per-query host term overlaps the other queries' device time: one query in flight pays it,
  // a device kept busy by enough queries does not lose throughput to it.
  for (auto l : tools::closed_loop_latencies(1, 1, 100, 10, 30)) CHECK(l == 130);
  const auto busy = tools::closed_loop_latencies(1, 2, 100, 20, 30);
  for (std::size_t i = 4; i < busy.size(); ++i) CHECK(busy[i] == 200);
  // Load, kernels and Store on engines of their own: alone, a query takes their sum; two on one
  // device overlap one's Load and Store with the other's kernels, so the device completes one
  // per kernels' time (the busiest engine) and each query waits for the other's kernels.
  const tools::DeviceStages stages{20, 100, 10};
  for (auto l : tools::closed_loop_latencies(1, 1, stages, 10)) CHECK(l == 130);
  const auto piped = tools::closed_loop_latencies(1, 2, stages, 20);
  for (std::size_t i = 4; i < piped.size(); ++i) CHECK(piped[i] == 200);
  // A DMA-bound device: the Load engine sets the pace.
  const auto dma = tools::closed_loop_latencies(1, 3, tools::DeviceStages{100, 40, 10}, 30);
  for (std::size_t i = 6; i < dma.size(); ++i) CHECK(dma[i] == 300);
  CHECK(tools::count_devices("npu0pe0,npu0pe1") == 2);
  CHECK(tools::count_devices("npu0pe0-1") == 1);
}

TEST_CASE("two runs give the same modelled section", "[tools][modelled][determinism]") {
  // Pacing on, as furiosa-run benchmarks by default: the host's timing differs between the runs,
  // the modelled figures must not.
  const auto a = timed_bench(mobilenet(), "npu0pe0-1", 2, 1, true);
  const auto b = timed_bench(mobilenet(), "npu0pe0-1", 2, 1, true);
  REQUIRE(a.modelled.available);
  REQUIRE(b.modelled.available);
  REQUIRE(a.modelled.programs.size() == 1);
  REQUIRE(a.modelled.programs.size() == b.modelled.programs.size());
  for (std::size_t i = 0; i < a.modelled.programs.size(); ++i) {
    CHECK(a.modelled.programs[i].load_us == b.modelled.programs[i].load_us);
    CHECK(a.modelled.programs[i].execution_us == b.modelled.programs[i].execution_us);
    CHECK(a.modelled.programs[i].store_us == b.modelled.programs[i].store_us);
  }
  CHECK(a.modelled.device_us > 0);
  CHECK(a.modelled.device_us == b.modelled.device_us);
  CHECK(a.modelled.p50_us == b.modelled.p50_us);
  CHECK(a.modelled.p90_us == b.modelled.p90_us);
  CHECK(a.modelled.p99_us == b.modelled.p99_us);
  CHECK(a.modelled.samples_per_s == b.modelled.samples_per_s);
  CHECK(a.modelled.device_p90_us == b.modelled.device_p90_us);
  // Two workers on one device (MobileNetV2's device time is below the per-query term): each
  // query's host part overlaps the other's device time, so the loop runs at two queries per
  // device time + per-query term; in the device-only schedule the second query's Load overlaps
  // the first one's kernels, so the PE (the busiest engine) never idles: one query per Execution,
  // each query waiting for the other's.
  const auto& prog = a.modelled.programs[0];
  const double loop_us = a.modelled.device_us + tools::kQueryOverheadUs;
  CHECK(a.modelled.query_overhead_us == tools::kQueryOverheadUs);
  CHECK(prog.execution_us > prog.load_us);
  CHECK(prog.execution_us > prog.store_us);
  CHECK(a.modelled.device_p50_us == Approx(2 * prog.execution_us).epsilon(1e-6));
  CHECK(a.modelled.device_samples_per_s == Approx(1e6 / prog.execution_us).epsilon(1e-6));
  CHECK(a.modelled.samples_per_s ==
        Approx(std::min(1e6 / prog.execution_us, 2e6 / loop_us)).epsilon(1e-6));
  CHECK(a.modelled.p50_us >= loop_us - 1e-3);
  // The host operators of MobileNetV2's float input and output are found (their time is measured).
  CHECK(a.modelled.host_us_by_operator.contains("Quantize"));
  CHECK(a.modelled.host_us_by_operator.contains("Dequantize"));
}

TEST_CASE("furiosa-run --bench --json writes the first inference and the same modelled section twice",
          "[tools][modelled][determinism]") {
  const test::TempDir scratch("modelled");  // removed even when a check fails
  const fs::path& dir = scratch.path();
  nlohmann::json runs[2];
  for (int i = 0; i < 2; ++i) {
    const fs::path json = dir / fmt::format("run{}.json", i);
    const auto r = test::run_command(fmt::format("'{}' '{}' --bench -n 5 --sim-mode timing --devices npu0pe0,npu0pe1 "
                                                 "--workers 1 --without-quantize input --json '{}' 2>&1",
                                                 FURIOSA_RUN_BINARY, mobilenet().string(), json.string()));
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("first inference:") && Catch::Contains("modelled (timing model, deterministic)") &&
                          Catch::Contains("bottleneck: "));
    std::ifstream f(json);
    runs[i] = nlohmann::json::parse(f);
  }
  for (const auto& j : runs) {
    CHECK(j.at("first_inference_us").get<double>() > 0);
    CHECK(j.at("load_ms").get<double>() > 0);
    REQUIRE(j.at("modelled").is_object());
    for (const char* key : {"p50", "p90", "p99"}) {
      // End to end = the device-only figure + the per-query term (one worker: no queueing).
      CHECK(j["modelled"]["device_latency_us"][key].get<double>() > 0);
      CHECK(j["modelled"]["latency_us"][key].get<double>() ==
            Approx(j["modelled"]["device_latency_us"][key].get<double>() + tools::kQueryOverheadUs).epsilon(1e-6));
    }
    CHECK(j["modelled"]["query_overhead_us"].get<double>() == tools::kQueryOverheadUs);
    CHECK(j["modelled"]["device_samples_per_s"].get<double>() >= j["modelled"]["samples_per_s"].get<double>());
    // One worker for two PEs: a worker carries one query at a time, so the second PE idles.
    CHECK(j["modelled"]["bottleneck"] == "worker-bound");
    CHECK(j.at("bottleneck").at("kind") == "worker-bound");
    CHECK(j.at("bottleneck").at("shares").contains("device"));
    // uint8 input (no host Quantize), so the host's share stays far below the device's.
    CHECK(j.at("host").at("operator_us_by_name").contains("Dequantize"));
    CHECK_FALSE(j.at("host").at("operator_us_by_name").contains("Quantize"));
  }
  // The whole modelled section, not only its numbers.
  CHECK(runs[0]["modelled"] == runs[1]["modelled"]);
  CHECK(runs[0]["modelled"]["devices"] == 2);
}

TEST_CASE(
    "ResNet-50 v1.5: modelled offline and single-stream within 5% of MLPerf v2.0 (the calibration)",
    "[tools][modelled][calibration]") {
  // Offline: two single PEs, batch 8, 4 workers; MLPerf v2.0: 2758 samples/s. Device-bound: the
  // per-query term overlaps the other workers' device time and leaves the rate as it was.
  const auto offline = timed_bench(resnet50(), "npu0pe0,npu0pe1", 4, 8);
  REQUIRE(offline.modelled.available);
  INFO("modelled offline: " << offline.modelled.samples_per_s << " samples/s");
  CHECK(offline.modelled.samples_per_s > 2758 * 0.95);
  CHECK(offline.modelled.samples_per_s < 2758 * 1.05);
  CHECK(offline.modelled.samples_per_s == Approx(offline.modelled.device_samples_per_s).epsilon(1e-9));
  // Single-stream: fused PE, batch 1, one worker; MLPerf v2.0: p90 712.196 us end to end. The
  // per-query term was fitted to this run's minimum latency (710.880 us) minus this device time,
  // so this check holds the fit in place (a change to the device model moves it); the device
  // part stays visible and below the published figure.
  const auto single_stream = timed_bench(resnet50(), "npu0pe0-1", 1, 1);
  const auto single_pe = timed_bench(resnet50(), "npu0pe0", 1, 1);
  REQUIRE(single_stream.modelled.available);
  INFO("modelled single-stream p90: fused " << single_stream.modelled.p90_us << " us (device "
                                            << single_stream.modelled.device_p90_us << " us), single PE "
                                            << single_pe.modelled.p90_us << " us");
  CHECK(single_stream.modelled.p90_us > 712.196 * 0.95);
  CHECK(single_stream.modelled.p90_us < 712.196 * 1.05);
  CHECK(single_stream.modelled.device_p90_us < 712.196);
  CHECK(single_stream.modelled.p90_us ==
        Approx(single_stream.modelled.device_p90_us + tools::kQueryOverheadUs).epsilon(1e-9));
  CHECK(single_stream.modelled.p90_us < single_pe.modelled.p90_us);
  // One query in flight: MLPerf's single-stream QPS (1404.78 w/o loadgen overhead) is 1 / latency.
  CHECK(single_stream.modelled.samples_per_s == Approx(1e6 / single_stream.modelled.p90_us).epsilon(1e-6));
}

TEST_CASE("SSD-MobileNet v1: out-of-sample check against MLPerf v2.0 (nothing refitted)", "[tools][modelled][validation]") {
  // Out of sample: no constant was fitted to SSD-MobileNet. FuriosaAI's MLPerf Inference v2.0
  // submission (mlcommons/inference_results_v2.0, closed/FuriosaAI/results/warboy/ssd-mobilenet):
  // single-stream p90 364.124 us (fused PE, batch 1); offline 8762.15 samples/s (two single PEs,
  // batch 8, 8 workers; code/mlperf/scripts/offline.sh). The model's errors on this network are
  // +6.8% (single stream; +16.5% before weight loads were modelled, a rule added after seeing
  // that error) and -6.9% (offline): both held to the goal of 10% (docs/timing.md, "Validation").
  const fs::path model = FURIOSA_SSD_MOBILENET;
  if (!fs::exists(model)) FAIL("missing " << model.string() << ": build the ssd-mobilenet-model target");
  const auto single_stream = timed_bench(model, "npu0pe0-1", 1, 1);
  const auto offline = timed_bench(model, "npu0pe0,npu0pe1", 8, 8);
  REQUIRE(single_stream.modelled.available);
  REQUIRE(offline.modelled.available);
  INFO("modelled SSD-MobileNet single-stream p90 " << single_stream.modelled.p90_us << " us (device "
                                                   << single_stream.modelled.device_p90_us << " us), offline "
                                                   << offline.modelled.samples_per_s << " samples/s");
  CHECK(single_stream.modelled.p90_us > 364.124 * 0.9);
  CHECK(single_stream.modelled.p90_us < 364.124 * 1.1);
  CHECK(offline.modelled.samples_per_s > 8762.15 * 0.9);
  CHECK(offline.modelled.samples_per_s < 8762.15 * 1.1);
}

TEST_CASE("SSD-ResNet34: out-of-sample check against MLPerf v2.0 (nothing refitted)",
          "[tools][modelled][validation]") {
  // Out of sample: nothing is fitted to SSD-ResNet34 (models/ssd_resnet34.py, MLPerf's reference
  // architecture, 216.4 GMACs per image). FuriosaAI's MLPerf Inference v2.0 figures as issue 34
  // quotes them (closed/FuriosaAI/results/warboy/ssd-resnet34): single-stream p90 13.43 ms (fused
  // PE, batch 1); offline 79.9 samples/s (fused PE, 4 workers, batch 1). The model's errors are
  // -9.1% and +6.7% since spills no longer overlap the kernels and DMA overlaps other
  // executions (-16.8% and +13.6% with the SRAM plan before that, -20.1% and +18.4% without it;
  // docs/timing.md; weight loads left both where they were): held to the goal of 10%.
  const fs::path model = FURIOSA_SSD_RESNET34;
  if (!fs::exists(model))
    FAIL("missing " << model.string() << ": build the ssd-resnet34-model target");
  const auto single_stream = timed_bench(model, "npu0pe0-1", 1, 1);
  const auto offline = timed_bench(model, "npu0pe0-1", 4, 1);
  REQUIRE(single_stream.modelled.available);
  REQUIRE(offline.modelled.available);
  INFO("modelled SSD-ResNet34 single-stream p90 "
       << single_stream.modelled.p90_us << " us (device " << single_stream.modelled.device_p90_us
       << " us), offline " << offline.modelled.samples_per_s << " samples/s");
  CHECK(single_stream.modelled.p90_us > 13430 * 0.9);
  CHECK(single_stream.modelled.p90_us < 13430 * 1.1);
  CHECK(offline.modelled.samples_per_s > 79.9 * 0.9);
  CHECK(offline.modelled.samples_per_s < 79.9 * 1.1);
}

TEST_CASE("the bottleneck is named on three constructed runs", "[tools][modelled][bottleneck]") {
  SECTION("host-heavy float I/O: Quantize and Dequantize of large float tensors dominate") {
    const auto spans = constructed_run(10, 1, 20, 80, 10, {{"Quantize", 2000}, {"Dequantize", 600}});
    const auto m = tools::model_figures(spans, 1, 1, 1, facts(2800));
    REQUIRE(m.available);
    CHECK(m.device_us == Approx(110));
    CHECK(m.host_us == Approx(2600));
    CHECK(m.bottleneck.kind == "host-bound");
    REQUIRE(m.bottleneck.host_operators.size() == 2);
    CHECK(m.bottleneck.host_operators[0].first == "Quantize");
    CHECK(m.bottleneck.shares.at("host") > 0.9);
  }
  SECTION("device-heavy: two workers keep one PE busy") {
    const auto spans = constructed_run(10, 1, 50, 5000, 5, {{"Quantize", 40}});
    const auto m = tools::model_figures(spans, 1, 2, 8, facts(10'200));
    REQUIRE(m.available);
    CHECK(m.bottleneck.kind == "device-bound");
    // The per-query term overlaps the other query, and so do the Load and Store: the PE
    // completes one query per Execution.
    CHECK(m.samples_per_s == Approx(8 / 5000e-6));
    CHECK(m.p50_us == Approx(2 * 5000.0));          // each query waits for the other's kernels
    CHECK(m.bottleneck.shares.at("device") < 0.5);  // the rest of the latency waits for the device
  }
  SECTION("one worker for two PEs: the second PE idles") {
    const auto spans = constructed_run(10, 2, 50, 5000, 5, {{"Quantize", 40}});
    const auto m = tools::model_figures(spans, 2, 1, 8, facts(5200));
    REQUIRE(m.available);
    CHECK(m.bottleneck.kind == "worker-bound");
    CHECK(m.samples_per_s == Approx(8 / ((5055 + tools::kQueryOverheadUs) * 1e-6)));  // one query in flight
    CHECK(m.device_samples_per_s == Approx(8 / 5055e-6));
    CHECK(m.p50_us == Approx(5055 + tools::kQueryOverheadUs));
    CHECK(m.bottleneck.device_bound_samples_per_s == Approx(2 * 8 / 5000e-6));
  }
  SECTION("async: four workers on one PE, each query's latency holding 100 queued queries") {
    // An offline run: the mean latency (100 x 5055 us) counts the wait behind the queue, not the
    // time a worker carries a query. The worker bound must not fall below the device's rate
    // (before issue 34 it was 4 x 8 / 505.5 ms = 63 samples/s, "worker-bound", against the
    // 1,583 samples/s such a run measures); the workers run the host stages only: Quantize
    // (40 us) and Enqueue (2 us).
    const auto spans = constructed_run(10, 1, 50, 5000, 5, {{"Quantize", 40}});
    const auto m = tools::model_figures(spans, 1, 4, 8, facts(100 * 5055.0, true));
    REQUIRE(m.available);
    CHECK(m.bottleneck.kind == "device-bound");
    CHECK(m.bottleneck.worker_bound_samples_per_s == Approx(4 * 8 / 42e-6));
    CHECK(m.bottleneck.worker_bound_samples_per_s > m.bottleneck.device_bound_samples_per_s);
    // The same figures from a sync run, whose latency is the query's own: worker-bound.
    const auto sync = tools::model_figures(spans, 1, 4, 8, facts(100 * 5055.0));
    CHECK(sync.bottleneck.kind == "worker-bound");
  }
  SECTION("with the measured rate: a bound names the run only when the run reached it") {
    // Two workers, one PE: device bound 8 / 5 ms = 1,600 samples/s, host bound 2 x 8 / 40 us.
    const auto spans = constructed_run(10, 1, 50, 5000, 5, {{"Quantize", 40}});
    auto run = facts(10'200, true);
    run.measured_samples_per_s = 1550;  // 97% of the device bound
    CHECK(tools::model_figures(spans, 1, 2, 8, run).bottleneck.kind == "device-bound");
    run.measured_samples_per_s = 800;  // half of it: something else holds the run back
    const auto slow = tools::model_figures(spans, 1, 2, 8, run);
    CHECK(slow.bottleneck.kind == "worker-bound");
    CHECK(slow.bottleneck.measured_samples_per_s == 800);
    CHECK(slow.bottleneck.predicted_samples_per_s == Approx(1600));
    // Host operators that take half of the workers' time name the run host-bound: 2 workers on
    // 2 cores, 2 ms of Quantize per query, 0.5 ms of kernels: host bound 8,000 samples/s, device
    // bound 16,000.
    const auto host_spans = constructed_run(10, 1, 50, 500, 5, {{"Quantize", 2000}});
    run.measured_samples_per_s = 4500;
    CHECK(tools::model_figures(host_spans, 1, 2, 8, run).bottleneck.kind == "host-bound");
    run.measured_samples_per_s = 3000;
    CHECK(tools::model_figures(host_spans, 1, 2, 8, run).bottleneck.kind == "worker-bound");
  }
  SECTION("pacing off: the modelled device time bounds nothing") {
    const auto spans = constructed_run(10, 1, 50, 5000, 5, {{"Quantize", 40}});
    auto run = facts(300);
    run.device_paced = false;
    run.measured_samples_per_s = 8 / 300e-6;  // far above the modelled 1,600 samples/s
    const auto m = tools::model_figures(spans, 1, 1, 8, run);
    CHECK(m.bottleneck.device_bound_samples_per_s == 0);
    CHECK_FALSE(m.bottleneck.shares.contains("device"));
    CHECK(m.bottleneck.worker_bound_samples_per_s ==
          Approx(8 / 300e-6));  // sync: workers / latency
    CHECK(m.bottleneck.kind == "worker-bound");
    CHECK(m.device_samples_per_s == Approx(8 / 5055e-6));  // the modelled section is unchanged
  }
  double sum = 0;
  for (const auto& [k, v] :
       tools::model_figures(constructed_run(3, 1, 1, 2, 3, {{"Lower", 4}}), 1, 1, 1, facts(20))
           .bottleneck.shares) {
    sum += v;
  }
  CHECK(sum == Approx(1.0));
}

namespace {

/// An async benchmark (a queue, as --mode async) of `model` in timing mode on a fresh simulator.
tools::BenchResult async_bench(const fs::path& model, int workers, std::int64_t batch, bool pacing,
                               std::uint64_t queries) {
  if (!fs::exists(model)) FAIL("missing " << model.string() << ": build its model target");
  return tools::run_timing_bench(model, "npu0pe0-1", workers, batch, pacing,
                                 [&](tools::BenchOptions& o) {
                                   o.mode = "async";
                                   o.queries = queries;
                                 });
}

/// The property issue 34 asks of the bottleneck line: no bound it prints is below the rate the
/// same run measured (10% for the measurement's own noise).
void check_bounds_hold(const tools::BenchResult& r) {
  const tools::Bottleneck& b = r.modelled.bottleneck;
  INFO("kind " << b.kind << "; measured " << b.measured_samples_per_s
               << " samples/s; bounds: device " << b.device_bound_samples_per_s << ", host "
               << b.host_bound_samples_per_s << ", workers " << b.worker_bound_samples_per_s);
  REQUIRE(b.measured_samples_per_s > 0);
  CHECK(b.measured_samples_per_s == Approx(r.qps * static_cast<double>(r.modelled.batch)));
  for (double bound :
       {b.device_bound_samples_per_s, b.host_bound_samples_per_s, b.worker_bound_samples_per_s}) {
    if (bound > 0) CHECK(bound * 1.1 >= b.measured_samples_per_s);
  }
}

}  // namespace

// Real runs, not constructed spans: the three kinds an async run can have, each with a margin
// that holds on fast and slow hosts, idle or loaded (the device's time is modelled, the host's
// is not). The batches make the queries long: a host thread woken milliseconds late (a loaded
// machine) then costs a small part of a query, which at batch 1 it does not (ResNet-50 at batch
// 1 reached 68-80% of its device bound on the 2-vCPU guest with three busy loops beside it).
// (Named after the models so that the ASan tree, which leaves ResNet-50 and YOLOv8n out, skips it;
// the constructed runs above check the same arithmetic there.)
TEST_CASE(
    "async runs of ResNet-50 and YOLOv8n: the bottleneck never names a bound below the measured "
    "rate",
    "[tools][modelled][bottleneck]") {
  SECTION(
      "device-bound: two workers keep ResNet-50's fused PE busy (batch 32: 28 ms of device time "
      "per query; uint8 input: tens of us of host operators)") {
    const fs::path uint8_model = FURIOSA_RESNET50_UINT8;
    const auto r = async_bench(uint8_model, 2, 32, true, 30);
    check_bounds_hold(r);
    const tools::Bottleneck& b = r.modelled.bottleneck;
    CHECK(b.kind == "device-bound");
    CHECK(b.measured_samples_per_s >= 0.8 * b.device_bound_samples_per_s);
    // Before issue 34 the async worker bound was workers / (device + host + per-query term), ~2,800
    // samples/s here; now it is the host stages' time only, far above the device's rate.
    CHECK(b.worker_bound_samples_per_s > 2 * b.device_bound_samples_per_s);
  }
  SECTION(
      "host-bound: YOLOv8n's host head on one worker (batch 4: about 12 ms of host operators "
      "per query, 3 ms of device time)") {
    const fs::path yolo = FURIOSA_YOLOV8N;
    const auto r = async_bench(yolo, 1, 4, true, 12);
    check_bounds_hold(r);
    const tools::Bottleneck& b = r.modelled.bottleneck;
    CHECK(b.kind == "host-bound");
    CHECK(b.device_bound_samples_per_s > 1.1 * b.measured_samples_per_s);
    CHECK(b.measured_samples_per_s >= 0.5 * b.host_bound_samples_per_s);
    REQUIRE_FALSE(b.host_operators.empty());
  }
  SECTION(
      "worker-bound: pacing off, so the device bounds nothing, and a uint8 input (no Quantize)") {
    const fs::path uint8_model = FURIOSA_RESNET50_UINT8;
    const auto r = async_bench(uint8_model, 1, 1, false, 300);
    check_bounds_hold(r);
    const tools::Bottleneck& b = r.modelled.bottleneck;
    CHECK(b.kind == "worker-bound");
    // Before: "device-bound" at the modelled 1,860 samples/s, below what the run measured.
    CHECK(b.device_bound_samples_per_s == 0);
    CHECK_FALSE(b.shares.contains("device"));
    CHECK(b.measured_samples_per_s < 0.5 * b.host_bound_samples_per_s);
    // The modelled section is still there, the same as with pacing on.
    CHECK(r.modelled.device_us > 500);
  }
}
