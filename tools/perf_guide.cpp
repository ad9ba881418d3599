// perf-guide: the questions of FuriosaAI's performance guide answered on the simulator, for
// ResNet-50 v1.5 (models/resnet50_v1_5.py), with the timing model and pacing on so that host-side
// latency and throughput behave like the card's (docs/timing.md).
//
// It prints one table per question and whether the guide's claim holds:
//   1. single-stream latency (batch 1, one worker): fused PE (npu0pe0-1) below single PE (npu0pe0);
//      next to the MLPerf Inference v2.0 figure (p90 0.712 ms, fused PE, batch 1);
//   2. offline throughput (batch 8, 4 workers): two single PEs above one fused PE; next to the
//      MLPerf figure (2758 samples/s, two single PEs, batch 8, 4 workers);
//   3. workers (two single PEs, batch 8): QPS rises with workers until the NPU is saturated;
//   4. uint8 input (no float Quantize on the host) cuts the host's time per inference.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "furiosa/device/sim.h"
#include "furiosa/runtime/runner.h"
#include "src/bench.h"

namespace fs = std::filesystem;
using namespace furiosa;

namespace {

struct Args {
  fs::path float_model = FURIOSA_RESNET50_FLOAT;
  fs::path uint8_model = FURIOSA_RESNET50_UINT8;
  double seconds = 2.0;
};

/// One benchmark run on a fresh simulator (timing mode) with the given pacing.
tools::BenchResult measure(const fs::path& model, const std::string& devices, int workers, std::int64_t batch,
                           const Args& a, bool pacing = true) {
  device::SimConfig config = device::sim_config_from_environment();
  config.mode = device::SimMode::Timing;
  config.pacing = pacing;
  auto driver = device::create_sim_driver(config);
  tools::BenchOptions o;
  o.model = model;
  o.session.device = devices;
  o.session.worker_num = workers;
  o.session.batch_size = batch;
  o.session.driver = driver.get();
  o.duration_s = a.seconds;
  o.progress = false;
  o.print = false;
  // Zero-filled inputs (timing mode computes nothing).
  auto r = tools::run_bench(o, [](const runtime::Model& m) {
    std::vector<Tensor> inputs;
    for (const auto& d : m.inputs) inputs.emplace_back(d.dtype, d.shape);
    return inputs;
  });
  if (r.errors > 0) {
    throw Error(ErrorCode::Internal, fmt::format("{} of {} queries failed on {}", r.errors, r.queries, devices));
  }
  return r;
}

std::string verdict(bool holds) { return holds ? "holds" : "DOES NOT HOLD"; }

// Relative difference of `value` from `reference`, as a signed percentage.
double off_by(double value, double reference) { return 100.0 * (value - reference) / reference; }

int run(const Args& a) {
  for (const auto& m : {a.float_model, a.uint8_model}) {
    if (!fs::exists(m)) {
      throw Error(ErrorCode::IoError,
                  fmt::format("model '{}' not found: build the resnet50-model target "
                              "(cmake --build build --target resnet50-model) or pass the paths",
                              m.string()));
    }
  }
  fmt::print("perf-guide: ResNet-50 v1.5 int8 on the simulator (timing mode, pacing on, {:.1f} s per run)\n\n",
             a.seconds);

  // 1. Single-stream latency.
  const auto single = measure(a.float_model, "npu0pe0", 1, 1, a);
  const auto fused = measure(a.float_model, "npu0pe0-1", 1, 1, a);
  fmt::print("1. single-stream latency, batch 1, 1 worker (MLPerf v2.0: p90 0.712 ms on a fused PE)\n");
  fmt::print("   {:<24} {:>10} {:>10}\n", "device", "p50 ms", "p90 ms");
  fmt::print("   {:<24} {:>10.3f} {:>10.3f}\n", "single PE (npu0pe0)", single.p50_us / 1e3, single.p90_us / 1e3);
  fmt::print("   {:<24} {:>10.3f} {:>10.3f}   ({:+.1f}% from 0.712 ms)\n", "fused PE (npu0pe0-1)",
             fused.p50_us / 1e3, fused.p90_us / 1e3, off_by(fused.p90_us / 1e3, 0.712));
  fmt::print("   claim: fused PE has lower latency than single PE: {}\n\n", verdict(fused.p90_us < single.p90_us));

  // 2. Offline throughput.
  const auto one_fused = measure(a.float_model, "npu0pe0-1", 4, 8, a);
  const auto two_single = measure(a.float_model, "npu0pe0,npu0pe1", 4, 8, a);
  fmt::print("2. offline throughput, batch 8, 4 workers (MLPerf v2.0: 2758 samples/s on two single PEs)\n");
  fmt::print("   {:<24} {:>12}\n", "devices", "samples/s");
  fmt::print("   {:<24} {:>12.1f}\n", "one fused PE", one_fused.qps * 8);
  fmt::print("   {:<24} {:>12.1f}   ({:+.1f}% from 2758)\n", "two single PEs", two_single.qps * 8,
             off_by(two_single.qps * 8, 2758));
  fmt::print("   claim: two single PEs give more throughput than one fused PE: {}\n\n",
             verdict(two_single.qps > one_fused.qps));

  // 3. Workers.
  fmt::print("3. workers, two single PEs, batch 8\n");
  fmt::print("   {:<24} {:>12} {:>10}\n", "workers", "samples/s", "gain");
  double previous = 0, gain_to_4 = 0, gain_after_4 = 0;
  for (int w : {1, 2, 4, 8}) {
    const double sps = measure(a.float_model, "npu0pe0,npu0pe1", w, 8, a).qps * 8;
    const double gain = previous > 0 ? sps / previous : 1.0;
    fmt::print("   {:<24} {:>12.1f} {:>9.2f}x\n", w, sps, gain);
    if (w == 2 || w == 4) gain_to_4 = gain_to_4 == 0 ? gain : gain_to_4 * gain;
    if (w == 8) gain_after_4 = gain;
    previous = sps;
  }
  fmt::print("   claim: more workers raise QPS until the NPU is saturated, then stop helping: {}\n"
             "          (1 -> 4 workers: {:.2f}x, 4 -> 8 workers: {:.2f}x)\n\n",
             verdict(gain_to_4 > 1.2 && gain_after_4 < 1.1), gain_to_4, gain_after_4);

  // 4. uint8 input.
  const auto host_float = measure(a.float_model, "npu0pe0-1", 1, 1, a, false);
  const auto host_uint8 = measure(a.uint8_model, "npu0pe0-1", 1, 1, a, false);
  const auto paced_uint8 = measure(a.uint8_model, "npu0pe0-1", 1, 1, a);
  fmt::print("4. float input (host Quantize) vs uint8 input, fused PE, batch 1, 1 worker\n");
  fmt::print("   {:<24} {:>16} {:>16}\n", "input", "host p50 ms", "paced p50 ms");
  fmt::print("   {:<24} {:>16.3f} {:>16.3f}\n", "float32 (Quantize)", host_float.p50_us / 1e3, fused.p50_us / 1e3);
  fmt::print("   {:<24} {:>16.3f} {:>16.3f}\n", "uint8", host_uint8.p50_us / 1e3, paced_uint8.p50_us / 1e3);
  fmt::print("   (host = the same run with pacing off: the runtime's own time, the device costs ~0)\n");
  fmt::print("   claim: uint8 input cuts host time: {}\n", verdict(host_uint8.p50_us < host_float.p50_us));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The performance guide's questions (single vs fused PE, workers, batch, uint8 input) "
               "answered on the simulator for ResNet-50 v1.5"};
  Args a;
  app.add_option("--float-model", a.float_model, "ResNet-50 with float input (models/resnet50_v1_5.py)");
  app.add_option("--uint8-model", a.uint8_model, "ResNet-50 with uint8 input (--input-dtype uint8)");
  app.add_option("--seconds", a.seconds, "Seconds per measurement")->check(CLI::Range(0.1, 600.0));
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  try {
    return run(a);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
