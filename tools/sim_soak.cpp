// sim-soak: minutes of async load on the simulator with faults injected (issue 19's soak; not a
// CI test). Prints progress every --report seconds and a summary: requests, completions by
// outcome (errors by kind), the devices' injected faults, timeouts, resets and retries, and the
// process's resident memory at start and end.
//
//   sim-soak [MODEL] [--minutes M] [--faults SPEC] [--devices SPEC] [--timeout-ms T]
//            [--window N] [--workers W] [--report S]
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <string>

#include "furiosa/device/sim.h"
#include "furiosa/runtime/runner.h"

using namespace furiosa;

namespace {

// Resident set size of this process in KiB (/proc/self/status VmRSS), 0 when unknown.
long rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      long kib = 0;
      status >> kib;
      return kib;
    }
    status.ignore(4096, '\n');
  }
  return 0;
}

// Inputs of the model's descriptions with deterministic random values.
std::vector<Tensor> make_inputs(const runtime::Model& model, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  for (const auto& d : model.inputs) {
    Tensor t(d.dtype, d.shape);
    for (std::byte& b : t.bytes()) b = static_cast<std::byte>(rng() & 0xff);
    if (d.dtype == DType::Float32) {  // keep floats finite: values in [0, 1)
      auto* f = reinterpret_cast<float*>(t.bytes().data());
      for (std::size_t i = 0; i < t.bytes().size() / sizeof(float); ++i) f[i] = static_cast<float>(rng() % 1000) / 1000.0f;
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Async load on the simulator with injected faults; prints errors, resets and RSS"};
  std::string model = FURIOSA_DEFAULT_MODEL;
  double minutes = 1.0;
  std::string faults = "error:every=100,hang:every=1000,dma:every=500";
  std::string devices = "warboy(1)*2";
  int timeout_ms = 200, window = 64, workers = 2, report_s = 10;
  app.add_option("model", model, "ONNX/TFLite model or .enf (default: the project's default model)");
  app.add_option("--minutes", minutes, "how long to run")->check(CLI::PositiveNumber);
  app.add_option("--faults", faults,
                 "fault spec (docs/devices.md), e.g. error:every=100,hang:p=0.001; default FURIOSA_SIM_FAULTS, else "
                 "error:every=100,hang:every=1000,dma:every=500");
  app.add_option("--devices", devices, "device spec");
  app.add_option("--timeout-ms", timeout_ms, "watchdog limit per execution")->check(CLI::PositiveNumber);
  app.add_option("--window", window, "requests in flight")->check(CLI::PositiveNumber);
  app.add_option("--workers", workers, "host workers")->check(CLI::PositiveNumber);
  app.add_option("--report", report_s, "seconds between progress lines")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::err);  // one warning per hang would drown the report

  try {
    const long rss_start = rss_kib();
    // The built-in driver's configuration (FURIOSA_SIM_CARDS, FURIOSA_SIM_PES_PER_CARD, lock
    // directory, ...), as furiosa-run's simulator has; --faults replaces FURIOSA_SIM_FAULTS when
    // given, and the default soak spec applies when neither is.
    device::SimConfig config = device::sim_config_from_environment();
    if (app.count("--faults") > 0 || config.faults.empty()) config.faults = device::parse_sim_faults(faults);
    auto driver = device::create_sim_driver(config);
    runtime::RunnerOptions options;
    options.driver = driver.get();
    options.device = devices;
    options.worker_num = workers;
    options.device_timeout = std::chrono::milliseconds(timeout_ms);
    auto runner = runtime::create_runner(model, options);
    const std::vector<Tensor> inputs = make_inputs(runner->model(), 1);
    const long rss_loaded = rss_kib();
    fmt::print("sim-soak: {} on {} for {} min, faults '{}', watchdog {} ms, window {}\n", model,
               runner->device_name(), minutes, device::format_sim_faults(config.faults), timeout_ms, window);
    fmt::print("RSS at start {} KiB, after load {} KiB\n", rss_start, rss_loaded);

    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(minutes * 60));
    auto next_report = start + std::chrono::seconds(report_s);
    std::uint64_t submitted = 0, ok = 0;
    std::map<std::string, std::uint64_t> errors;
    std::deque<std::future<std::vector<Tensor>>> in_flight;
    auto settle = [&](std::future<std::vector<Tensor>>& f) {
      try {
        f.get();
        ++ok;
      } catch (const Error& e) {
        ++errors[std::string(to_string(e.code()))];
      } catch (const std::exception&) {
        ++errors["other"];
      }
    };
    auto failed_count = [&] {
      std::uint64_t n = 0;
      for (const auto& [kind, count] : errors) n += count;
      return n;
    };
    auto progress = [&](const char* label) {
      const std::uint64_t failed = failed_count();
      std::uint64_t resets = 0, timeouts = 0;
      for (const auto& h : runner->device_health()) {
        resets += h.resets;
        timeouts += h.timeouts;
      }
      fmt::print("{} {:7.1f} s: submitted {}, ok {}, failed {}, timeouts {}, resets {}, RSS {} KiB\n", label,
                 std::chrono::duration<double>(Clock::now() - start).count(), submitted, ok, failed, timeouts,
                 resets, rss_kib());
      std::fflush(stdout);
    };
    while (Clock::now() < end) {
      while (in_flight.size() >= static_cast<std::size_t>(window)) {
        settle(in_flight.front());
        in_flight.pop_front();
      }
      in_flight.push_back(runner->run_async(inputs));
      ++submitted;
      if (Clock::now() >= next_report) {
        progress("progress");
        next_report += std::chrono::seconds(report_s);
      }
    }
    while (!in_flight.empty()) {
      settle(in_flight.front());
      in_flight.pop_front();
    }
    progress("done    ");
    const std::uint64_t completed = ok + failed_count();
    fmt::print("requests {}, completed {} (ok {}, failed {})\n", submitted, completed, ok, failed_count());
    for (const auto& [kind, n] : errors) fmt::print("  errors {}: {}\n", kind, n);
    for (const auto& h : runner->device_health()) {
      std::string injected;
      for (const auto& [name, v] : h.counters.backend_counters) {
        if (name.starts_with("sim.faults.")) injected += fmt::format(" {}={}", name.substr(11), v);
      }
      fmt::print("  {}: completed {}, faults {}, timeouts {}, resets {}, retried {}, lost {}; injected:{}\n",
                 h.device_file, h.completed, h.faults, h.timeouts, h.resets, h.retried, h.lost ? "yes" : "no",
                 injected.empty() ? " none" : injected);
    }
    fmt::print("RSS start {} KiB, after load {} KiB, end {} KiB\n", rss_start, rss_loaded, rss_kib());
    return completed == submitted ? 0 : 1;  // every request completed exactly once
  } catch (const std::exception& e) {
    fmt::print(stderr, "sim-soak: {}\n", e.what());
    return 1;
  }
}
