// The timing model seen through the runtime: pacing (host latency never below NPU Total), the
// explicit overrun span when the host is slower than the modelled card, timing-only mode, and
// the calibration of the modelled ResNet-50 v1.5 figures against MLPerf Inference v2.0
// (docs/timing.md). Host speed is never asserted here; perf-guide measures it.
#include <algorithm>
#include <chrono>

#include "furiosa/device/sim.h"
#include "furiosa/profiler/profiler.h"
#include "furiosa/profiler/report.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

struct Traced {
  std::unique_ptr<device::Driver> driver;
  std::shared_ptr<profiler::Profiler> profiler;
  std::unique_ptr<runtime::Runner> runner;
};

Traced traced_runner(const fs::path& model, const device::SimConfig& config, const std::string& devices = "",
                     std::int64_t batch = 1) {
  Traced t;
  t.driver = device::create_sim_driver(config);
  t.profiler = std::make_shared<profiler::Profiler>();
  runtime::RunnerOptions o;
  o.driver = t.driver.get();
  o.profiler = t.profiler;
  o.device = devices;
  o.batch_size = batch;
  o.worker_num = 1;
  t.runner = runtime::create_runner(model, o);
  return t;
}

std::vector<Tensor> zero_inputs(const runtime::Runner& runner) {
  std::vector<Tensor> inputs;
  for (const auto& d : runner.model().inputs) inputs.emplace_back(d.dtype, d.shape);
  return inputs;
}

// NPU executions of the profiler's spans, in execution order.
std::vector<profiler::NpuExecutionRow> executions(const profiler::Profiler& p) {
  auto rows = profiler::npu_execution_report(p.records());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.execution_index < b.execution_index; });
  return rows;
}

fs::path resnet50() {
  const fs::path p = FURIOSA_RESNET50_FLOAT;
  if (!fs::exists(p)) FAIL("missing " << p.string() << ": build the resnet50-model target");
  return p;
}

// Modelled NPU Total (ns) of one execution of `model` on `devices` at `batch` in timing mode.
std::int64_t modelled_total_ns(const std::string& devices, std::int64_t batch) {
  device::SimConfig config;
  config.mode = device::SimMode::Timing;
  config.pacing = false;
  auto t = traced_runner(resnet50(), config, devices, batch);
  t.runner->run(zero_inputs(*t.runner));
  const auto rows = executions(*t.profiler);
  REQUIRE(rows.size() == 1);
  return rows[0].total_ns;
}

}  // namespace

TEST_CASE("with pacing on, each measured latency is at least the modelled NPU Total", "[timing][model]") {
  device::SimConfig config;  // pacing on by default
  REQUIRE(config.pacing);
  auto t = traced_runner(test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx"), config);
  const auto inputs = zero_inputs(*t.runner);
  std::vector<std::int64_t> latency_ns;
  for (int i = 0; i < 4; ++i) {
    const auto start = std::chrono::steady_clock::now();
    t.runner->run(inputs);
    latency_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  }
  const auto rows = executions(*t.profiler);
  REQUIRE(rows.size() == latency_ns.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    INFO("inference " << i << ": latency " << latency_ns[i] << " ns, NPU Total " << rows[i].total_ns << " ns");
    CHECK(rows[i].total_ns > 0);
    CHECK(rows[i].iowait_ns == rows[i].total_ns - rows[i].run_ns);
    CHECK(latency_ns[i] >= rows[i].total_ns);
  }
}

TEST_CASE("a host slower than the modelled card shows as SimOverrun spans, NPU spans keep the model",
          "[timing][trace][model]") {
  device::SimConfig config;
  config.clock_ghz = 1e6;           // kernels take ~0 modelled time ...
  config.dma_latency_ns = 0;
  config.pcie_bytes_per_ns = 1e9;   // ... and so do the DMAs
  auto t = traced_runner(test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx"), config);
  t.runner->run(zero_inputs(*t.runner));  // the functional kernels take milliseconds on the host
  const auto spans = t.profiler->records();
  const auto overrun = std::find_if(spans.begin(), spans.end(), [](const auto& s) { return s.name == "SimOverrun"; });
  REQUIRE(overrun != spans.end());
  CHECK(overrun->cat == profiler::Category::NPU);
  // The host needed longer than the ~0 modelled time: how much longer depends on the machine, so
  // only that there is an overrun is checked.
  CHECK(overrun->dur_ns() > 0);
  for (const auto& s : spans) {
    if (s.cat == profiler::Category::NPU && s.name == "Execution") CHECK(s.dur_ns() < 10'000);  // not stretched
    if (s.name == "Store") CHECK(overrun->start_ns == s.end_ns);
  }
  // Not an operator: the operator report leaves it out.
  for (const auto& row : profiler::npu_operator_report(spans)) CHECK(row.name != "SimOverrun");
}

TEST_CASE("timing mode runs the model without computing it and models the same time", "[timing][model]") {
  const fs::path model = test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx");
  device::SimConfig config;
  config.pacing = false;
  auto functional = traced_runner(model, config);
  functional.runner->run(zero_inputs(*functional.runner));
  config.mode = device::SimMode::Timing;
  auto timed = traced_runner(model, config);
  const auto outputs = timed.runner->run(zero_inputs(*timed.runner));
  CHECK(outputs.size() == 1);
  const auto f = executions(*functional.profiler), m = executions(*timed.profiler);
  REQUIRE(f.size() == 1);
  REQUIRE(m.size() == 1);
  CHECK(f[0].total_ns == m[0].total_ns);
  CHECK(f[0].run_ns == m[0].run_ns);
}

TEST_CASE("modelled ResNet-50 v1.5 figures stay calibrated to MLPerf Inference v2.0", "[timing][calibration]") {
  // Single-stream: fused PE, batch 1, p90 0.712 ms measured on the host. The device part must
  // leave room for the host's own time, but not most of it.
  const std::int64_t fused = modelled_total_ns("npu0pe0-1", 1);
  const std::int64_t single = modelled_total_ns("npu0pe0", 1);
  INFO("modelled NPU Total, batch 1: fused " << fused << " ns, single " << single << " ns");
  CHECK(fused < 712'000);
  CHECK(fused > 712'000 * 7 / 10);
  CHECK(fused < single);
  // Offline: two single PEs, batch 8, 4 workers: 2758 samples/s. With enough workers the host
  // work overlaps the device, so two PEs' device-bound rate must be within 10% of it.
  const std::int64_t batch8 = modelled_total_ns("npu0pe0", 8);
  const double samples_per_s = 2.0 * 8.0 / (static_cast<double>(batch8) * 1e-9);
  INFO("modelled NPU Total, single PE, batch 8: " << batch8 << " ns -> " << samples_per_s << " samples/s on two PEs");
  CHECK(samples_per_s > 2758 * 0.9);
  CHECK(samples_per_s < 2758 * 1.1);
}

TEST_CASE("the load-time warm-up runs off the record and leaves the results unchanged", "[timing][cold_start]") {
  // SimWarmUp::Always also warms with the portable kernels, so this runs on any host.
  const fs::path model = test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  std::vector<Tensor> results[2];
  int i = 0;
  for (const auto warm_up : {device::SimWarmUp::Off, device::SimWarmUp::Always}) {
    device::SimConfig config;
    config.pacing = false;
    config.warm_up = warm_up;
    auto t = traced_runner(model, config);
    std::vector<Tensor> inputs = zero_inputs(*t.runner);
    for (auto& v : inputs[0].as<float>()) v = 0.5f;
    results[i] = t.runner->run(inputs);
    // The warm-up is not an execution: no spans, and the first real one is still execution 0.
    const auto rows = executions(*t.profiler);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].execution_index == 0);
    ++i;
  }
  REQUIRE(results[0].size() == results[1].size());
  for (std::size_t k = 0; k < results[0].size(); ++k) CHECK(test::max_abs_diff(results[0][k], results[1][k]) == 0.0);
}
