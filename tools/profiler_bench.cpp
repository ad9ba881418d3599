// profiler-bench: what tracing costs.
//   1. The cost of one ScopedSpan (a child span under a given context, as the runtime records
//      its stages): no profiler, profiler paused (tracing off: one atomic load), profiler
//      recording on 1 thread and on 2 threads at once; ns per span.
//   2. MobileNetV2 int8 end to end, throughput with tracing off (profiler paused) vs on in
//      alternating rounds, and the ratio on/off (target >= 0.98): sync mode (create_runner,
//      worker_num 2, two caller threads) and async mode (create_queue, worker_num 2, one
//      submitting and one receiving thread).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "furiosa/profiler/profiler.h"
#include "furiosa/runtime/queue.h"
#include "furiosa/runtime/runner.h"
#include "src/bench.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace prof = furiosa::profiler;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Records `n` child spans under `parent` with `profiler` (may be null) on this thread.
void record_spans(prof::Profiler* profiler, const prof::SpanContext& parent, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    prof::ScopedSpan span(profiler, "Quantize", parent);
    span.record().operator_index = 0;
  }
}

enum class Mode { NoProfiler, Paused, Recording };

/// ns per span on each of `threads` threads recording `n` spans each (the best of `reps`).
double span_cost_ns(Mode mode, int threads, std::int64_t n, int reps) {
  double best = 1e300;
  for (int rep = 0; rep < reps; ++rep) {
    prof::ProfilerOptions options;
    // Room for every span (chunks reserve up to 4096 slots of the bound ahead).
    options.max_events = static_cast<std::size_t>(n + 1000 + 8192) * static_cast<std::size_t>(threads);
    prof::Profiler profiler(options);
    if (mode == Mode::Paused) profiler.pause();
    prof::Profiler* p = mode == Mode::NoProfiler ? nullptr : &profiler;
    const prof::SpanContext parent{prof::TraceId{1, 2}, 3};
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<double> elapsed(static_cast<std::size_t>(threads));
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        record_spans(p, parent, 1000);  // warm: registers the thread buffer, faults in memory
        ready.fetch_add(1);
        while (!go.load()) std::this_thread::yield();
        const auto start = Clock::now();
        record_spans(p, parent, n);
        elapsed[static_cast<std::size_t>(t)] = seconds_since(start);
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    go.store(true);
    for (auto& w : workers) w.join();
    const double worst = *std::max_element(elapsed.begin(), elapsed.end());
    best = std::min(best, worst * 1e9 / static_cast<double>(n));
    if (mode == Mode::Recording && profiler.dropped_events() != 0) {
      throw std::runtime_error("spans were dropped during the span-cost benchmark");
    }
  }
  return best;
}

/// Inferences per second of `callers` threads each running `per_caller` inferences.
double throughput(furiosa::runtime::Runner& runner, const std::vector<furiosa::Tensor>& inputs,
                  int callers, int per_caller) {
  std::vector<std::thread> threads;
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  const auto start = Clock::now();
  for (int c = 0; c < callers; ++c) {
    threads.emplace_back([&] {
      try {
        for (int i = 0; i < per_caller; ++i) (void)runner.run(inputs);
      } catch (...) {
        if (!failed.exchange(true)) error = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return static_cast<double>(callers) * per_caller / seconds_since(start);
}

/// Inferences per second of `n` requests submitted from this thread through the queue while
/// another thread receives them.
double async_throughput(furiosa::runtime::Submitter& submitter,
                        furiosa::runtime::Receiver& receiver,
                        const std::vector<furiosa::Tensor>& inputs, int n) {
  std::exception_ptr error;
  const auto start = Clock::now();
  std::thread receiving([&] {
    try {
      for (int i = 0; i < n; ++i) (void)receiver.recv().value();
    } catch (...) {
      error = std::current_exception();
    }
  });
  try {
    for (int i = 0; i < n; ++i) submitter.submit(inputs, i);
  } catch (...) {
    receiver.close();  // the receiving thread stops (SessionClosed) instead of waiting
    receiving.join();
    throw;
  }
  receiving.join();
  if (error) std::rethrow_exception(error);
  return n / seconds_since(start);
}

/// Runs `block` (returns inferences/s over `inferences_per_block` inferences) `rounds` times
/// with tracing off and on, alternating which goes first (off-on, on-off, ...) so a drift of the
/// machine's speed (other processes on these 2 cores) weighs on both sides alike, and prints
/// both throughputs (totals over the rounds) and the ratio on/off.
void compare_on_off(prof::Profiler& profiler, int rounds, double inferences_per_block,
                    double span_cost_ns, const std::function<double()>& block) {
  double off_inferences = 0, off_seconds = 0, on_inferences = 0, on_seconds = 0;
  std::vector<double> paired;  // on/off of each round
  for (int r = 0; r < rounds; ++r) {
    double off = 0, on = 0;
    for (int half = 0; half < 2; ++half) {
      const bool tracing = (half == 0) == (r % 2 == 1);
      if (tracing) {
        profiler.resume();
      } else {
        profiler.pause();
      }
      const double qps = block();
      (tracing ? on : off) = qps;
      (tracing ? on_inferences : off_inferences) += inferences_per_block;
      (tracing ? on_seconds : off_seconds) += inferences_per_block / qps;
    }
    paired.push_back(on / off);
    fmt::print("  round {} ({}): off {:7.2f} inf/s, on {:7.2f} inf/s\n", r + 1,
               r % 2 == 1 ? "on first" : "off first", off, on);
  }
  profiler.pause();
  const double off_qps = off_inferences / off_seconds;
  const double on_qps = on_inferences / on_seconds;
  const std::size_t recorded = profiler.records().size();
  const double spans_per_inference = static_cast<double>(recorded) / on_inferences;
  fmt::print("  tracing off: {:.3f} inferences/s\n", off_qps);
  fmt::print("  tracing on : {:.3f} inferences/s, {} spans recorded ({:.1f} per inference), {} "
             "dropped\n",
             on_qps, recorded, spans_per_inference, profiler.dropped_events());
  std::sort(paired.begin(), paired.end());
  const std::size_t n = paired.size();
  const double paired_median = n % 2 == 1 ? paired[n / 2] : (paired[n / 2 - 1] + paired[n / 2]) / 2;
  fmt::print("  ratio on/off: {:.4f} over all rounds, {:.4f} median of the rounds' ratios "
             "(target >= 0.98)\n",
             on_qps / off_qps, paired_median);
  // What recording costs by construction: spans per inference x cost per span (an upper bound:
  // device spans are recorded without reading the clock), against the host time per inference
  // (2 cores), a figure that does not move with the machine's noise.
  const double cost_s = spans_per_inference * span_cost_ns * 1e-9;
  fmt::print("  estimated recording cost: at most {:.1f} us of host time per inference = {:.4f}% "
             "of the {:.1f} ms of host time per inference\n",
             cost_s * 1e6, 100.0 * cost_s * off_qps / 2.0, 2e3 / off_qps);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Cost of tracing: ns per recorded span, MobileNetV2 throughput on vs off",
               "profiler-bench"};
  std::int64_t spans = 1'000'000;
  int reps = 3;
  std::string model = std::string(FURIOSA_SHARED_MODELS_DIR) +
                      "/onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx";
  int per_caller = 50;
  int rounds = 8;
  bool skip_model = false;
  app.add_option("--spans", spans, "Spans recorded per thread per measurement")
      ->check(CLI::Range(std::int64_t{1000}, std::int64_t{100'000'000}));
  app.add_option("--reps", reps, "Repetitions of each span measurement (best kept)")
      ->check(CLI::Range(1, 100));
  app.add_option("--model", model, "ONNX model for the throughput part");
  app.add_option("--inferences", per_caller, "Inferences per caller thread per round")
      ->check(CLI::Range(1, 100000));
  app.add_option("--rounds", rounds, "Rounds of off and on, alternating which goes first")
      ->check(CLI::Range(1, 100));
  app.add_flag("--skip-model", skip_model, "Only measure the span cost");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);

  try {
    fmt::print("Span cost (ScopedSpan child span, {} spans per thread, best of {}):\n", spans,
               reps);
    const double none = span_cost_ns(Mode::NoProfiler, 1, spans, reps);
    const double off = span_cost_ns(Mode::Paused, 1, spans, reps);
    const double on1 = span_cost_ns(Mode::Recording, 1, spans, reps);
    const double on2 = span_cost_ns(Mode::Recording, 2, spans, reps);
    const auto clock_start = Clock::now();
    std::int64_t sink = 0;
    for (int i = 0; i < 1'000'000; ++i) sink += prof::now_ns();
    const double clock_ns = seconds_since(clock_start) * 1e9 / 1e6;
    fmt::print("  no profiler (null)             : {:7.1f} ns/span\n", none);
    fmt::print("  tracing off (paused), 1 thread : {:7.1f} ns/span\n", off);
    fmt::print("  tracing on, 1 thread           : {:7.1f} ns/span\n", on1);
    fmt::print("  tracing on, 2 threads          : {:7.1f} ns/span (per thread, concurrently)\n",
               on2);
    fmt::print("  (one clock read, now_ns(): {:.1f} ns; a span reads the clock twice){}\n",
               clock_ns, sink == 42 ? " " : "");
    if (skip_model) return 0;
    if (!std::filesystem::exists(model)) {
      fmt::print(stderr, "profiler-bench: error: model '{}' not found\n", model);
      return 1;
    }
    const double inferences_per_block = 2.0 * per_caller;
    {
      fmt::print("\nMobileNetV2 int8, sync mode (create_runner, worker_num 2, 2 caller threads x {} "
                 "inferences per block):\n",
                 per_caller);
      auto profiler = std::make_shared<prof::Profiler>();
      furiosa::runtime::RunnerOptions options;
      options.worker_num = 2;
      options.profiler = profiler;
      auto runner = furiosa::runtime::create_runner(model, options);
      const auto inputs = furiosa::tools::random_inputs(runner->model(), 1);
      profiler->pause();
      (void)throughput(*runner, inputs, 2, per_caller);  // warm-up
      compare_on_off(*profiler, rounds, inferences_per_block, on2,
                     [&] { return throughput(*runner, inputs, 2, per_caller); });
    }
    {
      fmt::print("\nMobileNetV2 int8, async mode (create_queue, worker_num 2, one submitting and "
                 "one receiving thread, {} inferences per block):\n",
                 2 * per_caller);
      auto profiler = std::make_shared<prof::Profiler>();
      furiosa::runtime::QueueOptions options;
      options.worker_num = 2;
      options.profiler = profiler;
      auto [submitter, receiver] = furiosa::runtime::create_queue(model, options);
      const auto inputs = furiosa::tools::random_inputs(submitter.model(), 1);
      profiler->pause();
      (void)async_throughput(submitter, receiver, inputs, 2 * per_caller);  // warm-up
      compare_on_off(*profiler, rounds, inferences_per_block, on2, [&, &submitter = submitter, &receiver = receiver] {
        return async_throughput(submitter, receiver, inputs, 2 * per_caller);
      });
      submitter.close();
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "profiler-bench: error: {}\n", e.what());
    return 1;
  }
}
