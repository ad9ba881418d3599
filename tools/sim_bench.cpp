// sim-bench: how fast the simulator executes real models functionally (issue 8).
//
// For each model (default: mobilenetv2-12-int8 and shufflenet-v2-12-int8 from the shared model
// folder) it loads the model through the runtime on a simulator driver with pacing off, then
// prints, in one run:
//   - the median (and p10/p90) latency of a batch-1 inference with one runner worker (npu0pe0);
//   - QPS with 1 worker (one caller thread) and with 2 workers (two caller threads, each with its
//     own runner, on npu0pe0 and npu0pe1), and the 2-worker scaling;
//   - per kernel kind: calls and ms per inference and achieved GOPS (2 ops per MAC), from the
//     simulator's kernel statistics hook;
//   - with --per-kernel, the slowest individual kernels (run directly on a copy of the program's
//     DRAM region, outside the runtime);
//   - the median latency at each ISA level of the simulator's kernels this CPU has (portable,
//     avx2, avx-vnni, avx512; --isa picks them), side by side, measured in alternating rounds so
//     that the neighbours' load affects every level alike.
// Everything but the side-by-side table runs at the level FURIOSA_SIM_ISA picks (default: the
// highest), printed first.
// and a machine-peak microbenchmark (tight vpdpbusd / vpmaddubsw loops on one thread) to compare
// the convolution GOPS against.
//
// Timings on a shared machine are noisy: every figure is a median over repetitions.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/device/kernel_kinds.h"
#include "furiosa/device/sim.h"
#include "furiosa/profiler/statistics.h"
#include "furiosa/runtime/runner.h"
#include "kernels.h"
#include "src/bench.h"

namespace fs = std::filesystem;
using namespace furiosa;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Percentile by linear interpolation (the project's one rule, profiler/statistics.h) of unsorted `v`.
double percentile(std::vector<double> v, std::uint64_t permille) {
  std::sort(v.begin(), v.end());
  return profiler::percentile<double>(v, permille);
}
double median(const std::vector<double>& v) { return percentile(v, 500); }

// ---------------------------------------------------------------------------------------------
// Machine peak: independent accumulator chains so the loop is throughput bound.

constexpr int kPeakIters = 1 << 20;

// Twelve independent accumulators in registers (explicit variables: an array would be kept in
// memory by the empty asm statement). The asm also "modifies" the operands so that nothing is
// hoisted out of the loop.
#define FURIOSA_PEAK_LOOP(OP, REG)                                                       \
  for (int i = 0; i < kPeakIters; ++i) {                                                \
    x0 = OP(x0, a, b); x1 = OP(x1, a, b); x2 = OP(x2, a, b); x3 = OP(x3, a, b);         \
    x4 = OP(x4, a, b); x5 = OP(x5, a, b); x6 = OP(x6, a, b); x7 = OP(x7, a, b);         \
    x8 = OP(x8, a, b); x9 = OP(x9, a, b); x10 = OP(x10, a, b); x11 = OP(x11, a, b);     \
    asm volatile("" : "+" REG(x0), "+" REG(x1), "+" REG(x2), "+" REG(x3), "+" REG(x4),  \
                 "+" REG(x5), "+" REG(x6), "+" REG(x7), "+" REG(x8), "+" REG(x9),       \
                 "+" REG(x10), "+" REG(x11), "+" REG(a), "+" REG(b));                   \
  }

__attribute__((target("avx512f,avx512bw,avx512vnni"))) double peak_vnni512() {
  __m512i x0 = _mm512_setzero_si512(), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0,
          x7 = x0, x8 = x0, x9 = x0, x10 = x0, x11 = x0;
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
  asm volatile("" : "+v"(a), "+v"(b));
  const auto start = Clock::now();
  FURIOSA_PEAK_LOOP(_mm512_dpbusd_epi32, "v")
  const double s = seconds_since(start);
  const __m512i sum = _mm512_add_epi32(
      _mm512_add_epi32(_mm512_add_epi32(x0, x1), _mm512_add_epi32(x2, x3)),
      _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(x4, x5), _mm512_add_epi32(x6, x7)),
                       _mm512_add_epi32(_mm512_add_epi32(x8, x9), _mm512_add_epi32(x10, x11))));
  alignas(64) int lanes[16];
  _mm512_store_si512(lanes, sum);
  volatile int sink = lanes[0];
  (void)sink;
  return 12.0 * 64.0 * kPeakIters / s;  // MACs per second
}

__attribute__((target("avx512f,avx512vl,avx512vnni"))) double peak_vnni256() {
  __m256i x0 = _mm256_setzero_si256(), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0,
          x7 = x0, x8 = x0, x9 = x0, x10 = x0, x11 = x0;
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5);
  asm volatile("" : "+v"(a), "+v"(b));
  const auto start = Clock::now();
  FURIOSA_PEAK_LOOP(_mm256_dpbusd_epi32, "v")
  const double s = seconds_since(start);
  const __m256i sum = _mm256_add_epi32(
      _mm256_add_epi32(_mm256_add_epi32(x0, x1), _mm256_add_epi32(x2, x3)),
      _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(x4, x5), _mm256_add_epi32(x6, x7)),
                       _mm256_add_epi32(_mm256_add_epi32(x8, x9), _mm256_add_epi32(x10, x11))));
  volatile int sink = _mm256_extract_epi32(sum, 0);
  (void)sink;
  return 12.0 * 32.0 * kPeakIters / s;
}

// AVX2 u8 x s8: vpmaddubsw (pairs to int16, saturating) + vpmaddwd + vpaddd = 32 MACs. The
// accumulator is also the unsigned operand, so the twelve products differ (no common
// subexpression) and each step depends on the previous one like a real accumulation.
__attribute__((target("avx2"))) inline __m256i maddubs_step(__m256i acc, __m256i a, __m256i b) {
  (void)a;
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(acc, b), _mm256_set1_epi16(1)));
}

__attribute__((target("avx2"))) double peak_avx2() {
  __m256i x0 = _mm256_setzero_si256(), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0,
          x7 = x0, x8 = x0, x9 = x0, x10 = x0, x11 = x0;
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5);
  asm volatile("" : "+x"(a), "+x"(b));
  const auto start = Clock::now();
  FURIOSA_PEAK_LOOP(maddubs_step, "x")
  const double s = seconds_since(start);
  const __m256i sum = _mm256_add_epi32(
      _mm256_add_epi32(_mm256_add_epi32(x0, x1), _mm256_add_epi32(x2, x3)),
      _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(x4, x5), _mm256_add_epi32(x6, x7)),
                       _mm256_add_epi32(_mm256_add_epi32(x8, x9), _mm256_add_epi32(x10, x11))));
  volatile int sink = _mm256_extract_epi32(sum, 0);
  (void)sink;
  return 12.0 * 32.0 * kPeakIters / s;
}

struct Peak {
  std::string name;
  double gops = 0;  // 2 ops per MAC
};

std::vector<Peak> machine_peak(int reps) {
  std::vector<Peak> out;
  auto measure = [&](const char* name, double (*fn)()) {
    std::vector<double> v;
    for (int r = 0; r < reps; ++r) v.push_back(fn());  // best of `reps`: the machine is shared
    out.push_back({name, 2.0 * *std::max_element(v.begin(), v.end()) / 1e9});
  };
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) {
    measure("AVX-512 VNNI vpdpbusd zmm", peak_vnni512);
    if (__builtin_cpu_supports("avx512vl")) measure("AVX-512 VNNI vpdpbusd ymm", peak_vnni256);
  }
  if (__builtin_cpu_supports("avx2")) measure("AVX2 vpmaddubsw+vpmaddwd", peak_avx2);
  return out;
}

// ---------------------------------------------------------------------------------------------

struct Options {
  std::vector<std::string> models;
  int iterations = 200;
  double qps_seconds = 3.0;
  int repeats = 3;
  int per_kernel = 0;
  bool skip_peak = false;
  std::string isa = "all";  // levels to compare, comma-separated ("all", "none")
  int isa_rounds = 5;
};

// The levels named by opt.isa (every level this CPU has for "all"), lowest first. Throws
// Error(InvalidArgument) for an unknown name or a level this CPU lacks.
std::vector<device::SimIsa> compared_levels(const Options& opt) {
  const std::vector<device::SimIsa> have = device::sim_cpu_isa_levels();
  if (opt.isa == "all") return have;
  std::vector<device::SimIsa> out;
  if (opt.isa == "none") return out;
  std::size_t from = 0;
  while (from <= opt.isa.size()) {
    std::size_t to = opt.isa.find(',', from);
    if (to == std::string::npos) to = opt.isa.size();
    const std::string name = opt.isa.substr(from, to - from);
    from = to + 1;
    device::SimIsa isa = device::parse_sim_isa(name);
    if (isa == device::SimIsa::Auto) isa = have.back();
    if (std::find(have.begin(), have.end(), isa) == have.end()) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("--isa {}: this CPU lacks that level", device::sim_isa_name(isa)));
    }
    out.push_back(isa);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Median latency of one inference at each of `levels` (forced in turn in every round; 3
// inferences per level and round), printed as one table.
void compare_levels(runtime::Runner& runner, const std::vector<Tensor>& inputs,
                    const std::vector<device::SimIsa>& levels, int rounds) {
  if (levels.empty()) return;
  std::vector<std::vector<double>> ms(levels.size());
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t i = 0; i < levels.size(); ++i) {
      device::sim::set_fast_kernels_level(levels[i]);
      runner.run(inputs);  // the level's scratch buffers, caches
      for (int k = 0; k < 3; ++k) {
        const auto start = Clock::now();
        runner.run(inputs);
        ms[i].push_back(seconds_since(start) * 1e3);
      }
    }
  }
  device::sim::set_fast_kernels_level(device::SimIsa::Auto);
  fmt::print("ISA levels (median latency, 1 worker, {} rounds x 3 runs):", rounds);
  const double base = median(ms[0]);
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const double m = median(ms[i]);
    fmt::print("  {} {:.3f} ms", device::sim_isa_name(levels[i]), m);
    if (i > 0) fmt::print(" ({:.1f}x)", base / m);
  }
  fmt::print("\n");
}

runtime::RunnerOptions runner_options(device::Driver& driver, const std::string& device) {
  runtime::RunnerOptions o;
  o.device = device;
  o.worker_num = 1;
  o.driver = &driver;
  return o;
}

// Inferences per second of `threads` caller threads, thread i looping on runners[i].
double measure_qps(const std::vector<runtime::Runner*>& runners,
                   const std::vector<std::vector<Tensor>>& inputs, double seconds) {
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::uint64_t> counts(runners.size(), 0);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < runners.size(); ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      while (!stop.load(std::memory_order_relaxed)) {
        runners[i]->run(inputs[i]);
        ++counts[i];
      }
    });
  }
  const auto start = Clock::now();
  go.store(true);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (auto& t : threads) t.join();
  const double s = seconds_since(start);
  std::uint64_t total = 0;
  for (auto c : counts) total += c;
  return static_cast<double>(total) / s;
}

// Runs every kernel of `prog` on a private copy of its DRAM region (constants + random
// activations) and prints the slowest `top` kernels.
void per_kernel_report(const isa::Program& prog, int top, int reps) {
  std::vector<std::byte> region(static_cast<std::size_t>(prog.dram_bytes));
  std::memcpy(region.data(), prog.constants.data(), prog.constants.size());
  std::mt19937 rng(1);
  for (std::size_t i = prog.constants.size(); i < region.size(); ++i)
    region[i] = static_cast<std::byte>(rng());
  auto prepared = device::sim::prepare_program(prog);
  struct Row {
    std::size_t index;
    double us;
  };
  std::vector<std::vector<double>> times(prog.kernels.size());
  for (int r = 0; r < reps; ++r) {
    for (std::size_t k = 0; k < prog.kernels.size(); ++k) {
      const auto start = Clock::now();
      device::sim::run_kernel(prog.kernels[k], region, prepared.get(), k);
      times[k].push_back(seconds_since(start) * 1e6);
    }
  }
  std::vector<Row> rows;
  double total = 0;
  for (std::size_t k = 0; k < prog.kernels.size(); ++k) {
    rows.push_back({k, median(times[k])});
    total += rows.back().us;
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.us > b.us; });
  fmt::print("  kernels run directly: {:.3f} ms total; slowest {}:\n", total / 1e3, top);
  for (int i = 0; i < top && i < static_cast<int>(rows.size()); ++i) {
    const isa::Kernel& k = prog.kernels[rows[static_cast<std::size_t>(i)].index];
    std::string shape;
    for (const auto& in : k.inputs) shape += shape_to_string(in.shape) + " ";
    shape += "-> " + shape_to_string(k.outputs[0].shape);
    std::string extra;
    if (const auto* c = std::get_if<isa::Conv2dParams>(&k.params)) {
      extra = fmt::format(" w{} {} g{} s{} x:{} w:{}", shape_to_string(c->weight.shape),
                          dtype_name(c->weight.dtype), c->group, c->strides[0],
                          dtype_name(k.inputs[0].dtype), c->w_zero_point.size());
    }
    const double us = rows[static_cast<std::size_t>(i)].us;
    const double macs = static_cast<double>(isa::kernel_macs(k));
    fmt::print("    #{:<3} {:<26} {:8.1f} us {:7.1f} GOPS  {}{}\n",
               rows[static_cast<std::size_t>(i)].index, isa::kernel_name(k.kind), us,
               macs > 0 ? 2 * macs / (us * 1e3) : 0.0, shape, extra);
  }
}

void bench_model(const std::string& path, const Options& opt, double peak_gops) {
  fmt::print("\n== {}\n", fs::path(path).filename().string());
  device::SimConfig config;
  config.pacing = false;
  config.kernel_stats = true;  // per-kind host time, read from the device's counters below
  auto driver = device::create_sim_driver(config);
  auto runner0 = runtime::create_runner(path, runner_options(*driver, "npu0pe0"));
  const auto inputs = tools::random_inputs(runner0->model(), 42);
  for (int i = 0; i < 10; ++i) runner0->run(inputs);  // warm-up

  // Latency, 1 worker.
  std::vector<double> lat;
  for (int i = 0; i < opt.iterations; ++i) {
    const auto start = Clock::now();
    runner0->run(inputs);
    lat.push_back(seconds_since(start) * 1e3);
  }
  fmt::print("latency (1 worker, {} runs): median {:.3f} ms  p10 {:.3f}  p90 {:.3f}\n",
             opt.iterations, median(lat), percentile(lat, 100), percentile(lat, 900));
  compare_levels(*runner0, inputs, compared_levels(opt), opt.isa_rounds);

  // Kernel statistics: the device's per-kind counters (SimConfig::kernel_stats) over the runs.
  const auto kind_counters = [&] {
    std::array<device::sim::KernelKindStats, device::sim::kKernelKindCount> out{};
    const auto health = runner0->device_health();
    if (health.empty()) return out;
    const auto& counters = health.front().counters.backend_counters;
    const auto get = [&](std::string_view name, std::string_view what) -> std::uint64_t {
      const auto it = counters.find(fmt::format("sim.kernels.{}.{}", name, what));
      return it == counters.end() ? 0 : static_cast<std::uint64_t>(it->second);
    };
    for (std::size_t k = 0; k < out.size(); ++k) {
      const std::string_view name = isa::all_kernel_kinds()[k].name;
      out[k] = {get(name, "calls"), get(name, "host_ns"), get(name, "macs")};
    }
    return out;
  };
  const auto before = kind_counters();
  const int stat_runs = std::max(opt.iterations / 2, 1);
  const auto stat_start = Clock::now();
  for (int i = 0; i < stat_runs; ++i) runner0->run(inputs);
  const double stat_ms = seconds_since(stat_start) * 1e3 / stat_runs;
  auto stats = kind_counters();
  for (std::size_t k = 0; k < stats.size(); ++k) {
    stats[k].calls -= before[k].calls;
    stats[k].ns -= before[k].ns;
    stats[k].macs -= before[k].macs;
  }
  double kernel_ms = 0;
  for (const auto& s : stats) kernel_ms += static_cast<double>(s.ns) / 1e6 / stat_runs;
  fmt::print("per inference: {:.3f} ms, of which kernels {:.3f} ms, rest (host ops, runtime) "
             "{:.3f} ms\n",
             stat_ms, kernel_ms, stat_ms - kernel_ms);
  fmt::print("  {:<28} {:>6} {:>9} {:>9} {:>8} {:>7}\n", "kernel kind", "calls", "ms/inf",
             "GMAC/inf", "GOPS", "%peak");
  for (std::size_t k = 0; k < stats.size(); ++k) {
    const auto& s = stats[k];
    if (s.calls == 0) continue;
    const double ms = static_cast<double>(s.ns) / 1e6 / stat_runs;
    const double gops = s.ns ? 2.0 * static_cast<double>(s.macs) / static_cast<double>(s.ns) : 0;
    const std::string pct =
        s.macs && peak_gops > 0 ? fmt::format("{:.1f}%", 100.0 * gops / peak_gops) : "-";
    fmt::print("  {:<28} {:>6} {:>9.3f} {:>9.4f} {:>8.1f} {:>7}\n", isa::all_kernel_kinds()[k].name,
               s.calls / stat_runs, ms, static_cast<double>(s.macs) / 1e9 / stat_runs,
               s.macs ? gops : 0.0, pct);
  }

  // QPS with 1 and 2 workers.
  std::vector<double> q1, q2;
  auto runner1 = runtime::create_runner(path, runner_options(*driver, "npu0pe1"));
  const auto inputs1 = tools::random_inputs(runner1->model(), 43);
  for (int i = 0; i < 5; ++i) runner1->run(inputs1);
  for (int r = 0; r < opt.repeats; ++r) {
    q1.push_back(measure_qps({runner0.get()}, {inputs}, opt.qps_seconds));
    q2.push_back(measure_qps({runner0.get(), runner1.get()}, {inputs, inputs1}, opt.qps_seconds));
  }
  const double m1 = median(q1), m2 = median(q2);
  fmt::print("QPS: 1 worker {:.1f}  2 workers {:.1f}  scaling {:.2f}x  (medians of {})\n", m1, m2,
             m1 > 0 ? m2 / m1 : 0.0, opt.repeats);

  if (opt.per_kernel > 0) {
    for (const auto& call : runner0->compiled().npu_calls) {
      per_kernel_report(*call.program, opt.per_kernel, 20);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Benchmark of the simulator's functional kernels on real models (issue 8)"};
  Options opt;
  app.add_option("models", opt.models, "ONNX models (default: mobilenetv2-12-int8, "
                                        "shufflenet-v2-12-int8 from the shared model folder)");
  app.add_option("--iterations", opt.iterations, "latency runs per model")->check(CLI::PositiveNumber);
  app.add_option("--qps-seconds", opt.qps_seconds, "seconds per QPS measurement");
  app.add_option("--repeats", opt.repeats, "QPS measurements (median)")->check(CLI::PositiveNumber);
  app.add_option("--per-kernel", opt.per_kernel, "print the N slowest kernels of each program");
  app.add_flag("--skip-peak", opt.skip_peak, "skip the machine-peak microbenchmark");
  app.add_option("--isa", opt.isa,
                 "ISA levels to compare side by side: comma-separated names (portable, avx2, "
                 "avx-vnni, avx512), 'all' (default: every level this CPU has) or 'none'");
  app.add_option("--isa-rounds", opt.isa_rounds, "rounds of the ISA level comparison")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (opt.models.empty()) {
    const fs::path zoo = fs::path(FURIOSA_SHARED_MODELS_DIR) / "onnx-zoo";
    opt.models = {(zoo / "mobilenetv2-12-int8" / "mobilenetv2-12-int8.onnx").string(),
                  (zoo / "shufflenet-v2-12-int8" / "shufflenet-v2-12-int8.onnx").string()};
  }

  try {
    fmt::print("simulator kernels: {} (FURIOSA_SIM_ISA; this CPU has:", device::sim_active_isa());
    for (device::SimIsa isa : device::sim_cpu_isa_levels()) {
      fmt::print(" {}", device::sim_isa_name(isa));
    }
    fmt::print(")\n");
    (void)compared_levels(opt);  // an unknown or missing level fails before any work
  } catch (const std::exception& e) {
    fmt::print(stderr, "sim-bench: {}\n", e.what());
    return 1;
  }
  double peak_gops = 0;
  if (!opt.skip_peak) {
    fmt::print("machine peak (one thread, best of 10):\n");
    for (const auto& p : machine_peak(10)) {
      fmt::print("  {:<28} {:8.1f} GOPS ({:.1f} GMAC/s)\n", p.name, p.gops, p.gops / 2);
      peak_gops = std::max(peak_gops, p.gops);
    }
  }
  try {
    for (const auto& m : opt.models) bench_model(m, opt, peak_gops);
  } catch (const std::exception& e) {
    fmt::print(stderr, "sim-bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
