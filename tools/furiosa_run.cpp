// furiosa-run: run a model on a (simulated) Warboy, print its outputs, write them and a trace.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <random>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "furiosa/compiler/compiler.h"
#include "furiosa/compiler/tflite_import.h"
#include "furiosa/core/text.h"
#include "furiosa/device/backends.h"
#include "furiosa/device/sim.h"
#include "furiosa/profiler/report.h"
#include "furiosa/program/placement.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "furiosa/tools/idx.h"
#include "src/bench.h"
#include "src/compiler_flags.h"
#include "src/kernel_table.h"

namespace fs = std::filesystem;
using namespace furiosa;

namespace {

struct Args {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE
  std::string output_dir;
  std::string trace;
  std::string trace_categories = "all";  ///< --trace-categories (profiler::parse_span_kinds)
  std::string devices;
  std::uint64_t seed = 0;
  bool verbose = false;
  int workers = 2;
  std::int64_t batch_size = 1;
  std::string report;  // one of profiler::kReportNames
  bool bench = false;
  std::string mode = "sync";
  std::uint64_t queries = 0;
  double duration = 0;
  std::string json;
  std::string dataset;        // "fashion-mnist" or "fashion-mnist=DIR"
  std::size_t limit = 0;      // 0 = the whole dataset
  std::string backend = "auto";   // auto | sim | pcie
  std::string sim_pacing = "on";  // on | off
  std::string sim_mode = "functional";  // functional | timing
  std::string sim_warm_up = "fast";     // off | fast | always (device::SimWarmUp)
  tools::CompilerFlags compiler;        // the compiler's knobs (--without-quantize, ...)
};

// The session options every mode shares: device, workers, batch and the compiler's knobs.
// --target-npu picks the device when --devices is not given (warboy: one single PE, warboy-2pe:
// one fused PE); the compiled program always takes the opened device's PE count.
void apply_session_args(const Args& a, runtime::SessionOptions& o) {
  o.device = a.devices;
  if (o.device.empty() && !a.compiler.target_npu.empty()) {
    o.device = a.compiler.target_npu == "warboy" ? "warboy(1)*1" : "warboy(2)*1";
  }
  o.worker_num = a.workers;
  o.batch_size = a.batch_size;
  tools::apply_compiler_flags(a.compiler, o.compiler_config);
}

// The backend furiosa-run executes on (--backend, else FURIOSA_BACKEND, else pcie when a card is
// present, else sim), printed once as "backend: NAME (why)". For the simulator it is a driver of
// its own: the built-in configuration (FURIOSA_SIM_* from the environment) with the command
// line's simulation options; for another backend the session opens the built-in one by name.
struct Backend {
  std::unique_ptr<device::Driver> sim;  ///< set when the simulator was chosen
  std::string name;
};

Backend make_backend(const Args& a) {
  const device::BackendChoice choice = device::select_backend(device::builtin_registry(), a.backend);
  Backend b{nullptr, choice.name};
  if (choice.name == "sim") {
    device::SimConfig config = device::sim_config_from_environment();
    config.pacing = a.sim_pacing == "on";
    config.mode = a.sim_mode == "timing" ? device::SimMode::Timing : device::SimMode::Functional;
    config.warm_up = a.sim_warm_up == "off"      ? device::SimWarmUp::Off
                     : a.sim_warm_up == "always" ? device::SimWarmUp::Always
                                                 : device::SimWarmUp::FastKernels;
    b.sim = device::create_sim_driver(config);
    fmt::print("backend: sim ({}; {} mode, pacing {}, kernels {})\n", choice.reason, a.sim_mode, a.sim_pacing,
               device::sim_active_isa());
  } else {
    fmt::print("backend: {} ({})\n", choice.name, choice.reason);
  }
  return b;
}

/// Points the session options at the chosen backend.
void use_backend(const Backend& b, runtime::SessionOptions& options) {
  options.driver = b.sim.get();
  options.backend = b.name;
}

const fs::path kModelsDir = FURIOSA_MODELS_DIR;

// Index of the first largest element of output row n ([N, C] tensor), as numpy's argmax.
std::int64_t argmax_row(const Tensor& t, std::int64_t n, std::int64_t classes);

// Output file name: characters other than letters, digits, '.', '_', '-' become '_'.
std::string sanitize(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  }
  return out;
}

// Value i of a tensor as double (for printing scores).
double value_at(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::Float32: return t.as<float>()[static_cast<std::size_t>(i)];
    case DType::UInt8: return t.as<std::uint8_t>()[static_cast<std::size_t>(i)];
    case DType::Int8: return t.as<std::int8_t>()[static_cast<std::size_t>(i)];
    case DType::Int32: return t.as<std::int32_t>()[static_cast<std::size_t>(i)];
    case DType::Int64: return static_cast<double>(t.as<std::int64_t>()[static_cast<std::size_t>(i)]);
  }
  return 0;
}

// Prints the top-5 classes of a classification output ([N, C] or [N, C, 1, 1], C > 1).
void print_topk(const runtime::TensorDesc& d, const Tensor& t) {
  const auto& s = d.shape;
  if (s.size() < 2 || s[1] < 2 || element_count(s) != s[0] * s[1]) return;
  for (std::int64_t n = 0; n < s[0]; ++n) {
    std::vector<std::int64_t> idx(static_cast<std::size_t>(s[1]));
    std::iota(idx.begin(), idx.end(), 0);
    const auto k = std::min<std::size_t>(5, idx.size());
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                      [&](auto a, auto b) {
                        const double va = value_at(t, n * s[1] + a), vb = value_at(t, n * s[1] + b);
                        return va > vb || (va == vb && a < b);  // ties: lower class first
                      });
    std::string line;
    for (std::size_t j = 0; j < k; ++j) {
      line += fmt::format("{}{} ({:.4g})", j ? ", " : "", idx[j], value_at(t, n * s[1] + idx[j]));
    }
    fmt::print("  {}[{}] top-{}: {}\n", d.name, n, k, line);
  }
}

std::int64_t argmax_row(const Tensor& t, std::int64_t n, std::int64_t classes) {
  std::int64_t best = 0;
  for (std::int64_t c = 1; c < classes; ++c) {
    if (value_at(t, n * classes + c) > value_at(t, n * classes + best)) best = c;
  }
  return best;
}

// The profiler of --trace / --report. With FURIOSA_PROFILER_OUTPUT_PATH also set, it is the
// process profiler, so both files are written from the same spans: --trace's Chrome trace now,
// the variable's file (CSV when it ends in .csv) at exit. Null when neither option is given (the
// runtime then still uses the variable's profiler by itself).
std::shared_ptr<profiler::Profiler> make_profiler(const Args& a) {
  const profiler::SpanKinds kinds = profiler::parse_span_kinds(a.trace_categories);
  if (a.trace.empty() && a.report.empty()) {
    if (auto env = profiler::process_profiler()) env->select(kinds);
    return nullptr;
  }
  if (auto env = profiler::process_profiler()) {
    fmt::print("profiler: recording for --trace/--report and FURIOSA_PROFILER_OUTPUT_PATH ({}); both are written\n",
               env->options().output_path.string());
    env->select(kinds);
    return env;
  }
  profiler::ProfilerOptions options;
  options.kinds = kinds;
  return std::make_shared<profiler::Profiler>(options);
}

// After the runner is closed: prints the inference summary and writes the trace (--trace), and
// prints the selected report (--report).
void finish_trace(const std::shared_ptr<profiler::Profiler>& prof, const Args& a) {
  if (!prof) return;
  const auto spans = prof->records();
  if (!a.trace.empty()) {
    fmt::print("{}", profiler::format_summary(profiler::summarize_inferences(spans)));
    try {
      prof->write_chrome_trace(a.trace);
    } catch (const std::exception& e) {
      throw Error(ErrorCode::IoError, e.what());
    }
    fmt::print("wrote trace {}\n", a.trace);
  }
  if (!a.report.empty()) {
    std::fflush(stdout);
    profiler::print_report(std::cout, a.report, spans);
    std::cout.flush();
  }
}

// Classifies the test split of Fashion-MNIST with `worker_num` caller threads and prints top-1
// accuracy and throughput. Inputs: float32 pixel/255, or raw uint8 pixels for a uint8 input.
void run_dataset(runtime::Runner& runner, const Args& a) {
  const auto eq = a.dataset.find('=');
  const std::string name = a.dataset.substr(0, eq);
  if (name != "fashion-mnist") {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("--dataset '{}': only fashion-mnist[=DIR] is supported", a.dataset));
  }
  const fs::path dir = eq == std::string::npos ? fs::path(tools::kFashionMnistDir) : fs::path(a.dataset.substr(eq + 1));
  const auto ds = tools::load_fashion_mnist_test(dir);
  const auto& in = runner.model().inputs;
  const auto& out = runner.model().outputs;
  if (in.size() != 1 || in[0].shape != Shape{1, 1, 28, 28} ||
      (in[0].dtype != DType::Float32 && in[0].dtype != DType::UInt8) || out.empty() ||
      out[0].shape.size() != 2 || out[0].shape[1] != 10) {
    throw Error(ErrorCode::InvalidInput,
                "--dataset fashion-mnist needs a model with one [1, 1, 28, 28] float32 or uint8 "
                "input and a [1, 10] first output");
  }
  const std::size_t n = a.limit ? std::min(a.limit, ds.size()) : ds.size();
  std::atomic<std::size_t> next{0}, correct{0};
  std::vector<std::int64_t> predicted(n, -1);
  std::exception_ptr failure;
  std::mutex failure_mu;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < a.workers; ++w) {
    threads.emplace_back([&] {
      try {
        for (std::size_t i; (i = next++) < n;) {
          auto o = runner.run({ds.image(i, in[0].dtype)});
          predicted[i] = argmax_row(o[0], 0, 10);
          if (predicted[i] == ds.labels.data[i]) ++correct;
        }
      } catch (...) {
        std::lock_guard lock(failure_mu);
        if (!failure) failure = std::current_exception();
        next = n;
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("dataset: fashion-mnist test split ({}), {} of {} images\n", dir.string(), n, ds.size());
  fmt::print("top-1 accuracy: {:.2f}% ({}/{})\n", 100.0 * static_cast<double>(correct) / static_cast<double>(n),
             correct.load(), n);
  fmt::print("throughput: {:.1f} images/s ({:.2f} s, {} caller threads, {} workers)\n",
             static_cast<double>(n) / secs, secs, a.workers, a.workers);
}

// No MODEL: the default model on the bundled test images, each prediction next to its label.
void run_default_images(runtime::Runner& runner) {
  std::ifstream labels(kModelsDir / "images/labels.txt");
  if (!labels) {
    throw Error(ErrorCode::InvalidInput, fmt::format("missing '{}'", (kModelsDir / "images/labels.txt").string()));
  }
  const auto& classes = tools::fashion_mnist_classes();
  std::string file;
  int label;
  std::size_t total = 0, correct = 0;
  fmt::print("{:<16} {:<14} {:<14}\n", "image", "predicted", "label");
  while (labels >> file >> label) {
    std::string rest;
    std::getline(labels, rest);
    auto o = runner.run({runtime::read_npy(kModelsDir / "images" / file)});
    const auto p = argmax_row(o[0], 0, 10);
    ++total;
    correct += p == label;
    fmt::print("{:<16} {:<14} {:<14} {}\n", file, classes[static_cast<std::size_t>(p)],
               classes[static_cast<std::size_t>(label)], p == label ? "ok" : "WRONG");
  }
  fmt::print("{}/{} correct\n", correct, total);
}

// Inputs for the benchmark: given files, else generated from the seed (from the loaded model's
// descriptions).
std::vector<Tensor> bench_inputs(const Args& a, const runtime::Model& model) {
  std::map<std::string, Tensor> given;
  for (const auto& spec : a.inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error(ErrorCode::InvalidArgument, fmt::format("--input '{}': expected NAME=FILE", spec));
    }
    given[spec.substr(0, eq)] = runtime::load_tensor_file(spec.substr(eq + 1));
  }
  std::mt19937_64 rng(a.seed);
  std::vector<Tensor> inputs;
  for (const auto& d : model.inputs) {
    auto it = given.find(d.name);
    inputs.push_back(it != given.end() ? std::move(it->second) : tools::random_tensor(d, rng));
  }
  return inputs;
}

int run_benchmark(const Args& a, const std::shared_ptr<profiler::Profiler>& prof) {
  tools::BenchOptions o;
  o.model = a.model;
  o.mode = a.mode;
  apply_session_args(a, o.session);
  o.queries = a.queries;
  o.duration_s = a.duration;
  o.json = a.json;
  o.session.profiler = prof;
  fmt::print("model: {}\n", a.model);
  const Backend backend = make_backend(a);
  use_backend(backend, o.session);
  // A card keeps its own time; the simulator keeps the modelled time only with pacing on.
  o.device_paced = !backend.sim || a.sim_pacing == "on";
  tools::run_bench(o, [&a](const runtime::Model& model) { return bench_inputs(a, model); });
  finish_trace(prof, a);
  return 0;
}

int run(Args a) {
  if (a.sim_mode == "timing" && !a.dataset.empty()) {
    throw Error(ErrorCode::InvalidArgument,
                "--dataset needs outputs, but --sim-mode timing computes none: use --sim-mode functional");
  }
  const bool default_model = a.model.empty();
  if (default_model) a.model = (kModelsDir / "fashion_mnist_int8.onnx").string();
  const std::shared_ptr<profiler::Profiler> prof = make_profiler(a);
  if (a.bench) return run_benchmark(a, prof);
  const Backend backend = make_backend(a);
  runtime::RunnerOptions opts;
  use_backend(backend, opts);
  apply_session_args(a, opts);
  // --verbose prints the device kernels' modelled figures from the kernel spans: recorded by the
  // trace's profiler, the process profiler, or else a private one.
  std::shared_ptr<profiler::Profiler> kernel_spans = prof ? prof : profiler::process_profiler();
  if (a.verbose && !kernel_spans) {
    profiler::ProfilerOptions kernel_options;
    kernel_options.max_events = 100'000;
    kernel_spans = std::make_shared<profiler::Profiler>(kernel_options);
  }
  opts.profiler = a.verbose ? kernel_spans : prof;
  const auto print_kernels = [&] {
    if (a.verbose && kernel_spans)
      fmt::print("{}", tools::format_device_kernels(kernel_spans->records()));
  };
  auto runner = runtime::create_runner(fs::path(a.model), opts);
  const auto& model = runner->model();

  fmt::print("model: {}{}\n", a.model, default_model ? " (default model)" : "");
  fmt::print("device: {}\n", runner->device_name());
  fmt::print("inputs:\n");
  for (const auto& d : model.inputs) fmt::print("  {}\n", d.to_string());
  fmt::print("outputs:\n");
  for (const auto& d : model.outputs) fmt::print("  {}\n", d.to_string());
  if (a.verbose) {
    fmt::print("partition:\n{}", runner->partition_report().to_string());
    fmt::print("{}", program::summarize_placement(runner->compiled()).to_string());
  }
  const bool timing_only = a.sim_mode == "timing";
  if (!a.dataset.empty() || (default_model && a.inputs.empty() && !timing_only)) {
    if (!a.dataset.empty()) run_dataset(*runner, a);
    else run_default_images(*runner);
    runner.reset();
    print_kernels();
    finish_trace(prof, a);
    return 0;
  }

  std::map<std::string, Tensor> given;
  for (const auto& spec : a.inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error(ErrorCode::InvalidArgument, fmt::format("--input '{}': expected NAME=FILE", spec));
    }
    const std::string name = spec.substr(0, eq);
    if (std::none_of(model.inputs.begin(), model.inputs.end(), [&](const auto& d) { return d.name == name; })) {
      throw Error(ErrorCode::InvalidInput, fmt::format("--input '{}': the model has no input named '{}'", spec, name));
    }
    given[name] = runtime::load_tensor_file(spec.substr(eq + 1));
  }
  std::mt19937_64 rng(a.seed);
  std::vector<Tensor> inputs;
  for (const auto& d : model.inputs) {
    if (auto it = given.find(d.name); it != given.end()) {
      inputs.push_back(std::move(it->second));
    } else {
      inputs.push_back(tools::random_tensor(d, rng));
      fmt::print("input {} generated from seed {}\n", escape_text(d.name), a.seed);
    }
  }
  auto outputs = runner->run(inputs);
  if (timing_only) {
    fmt::print("results: none: --sim-mode timing models the device's time without computing the "
               "kernels, so the outputs are not valid{}\n",
               a.output_dir.empty() ? "" : " and nothing is written to --output-dir");
    runner.reset();
    print_kernels();
    finish_trace(prof, a);
    return 0;
  }

  fmt::print("results:\n");
  for (std::size_t i = 0; i < outputs.size(); ++i) print_topk(model.outputs[i], outputs[i]);
  if (!a.output_dir.empty()) {
    fs::create_directories(a.output_dir);
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const fs::path p = fs::path(a.output_dir) / (sanitize(model.outputs[i].name) + ".npy");
      runtime::write_npy(p, outputs[i]);
      fmt::print("wrote {}\n", p.string());
    }
  }
  runner.reset();  // all spans are in once the runner is closed
  print_kernels();
  finish_trace(prof, a);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run a quantized ONNX model on a (simulated) FuriosaAI Warboy NPU"};
  Args a;
  app.add_option("model", a.model,
                 "ONNX or TFLite model, or a program file (.enf) from furiosa-compile (default: the project's "
                 "Fashion-MNIST int8 model on its bundled images)");
  app.add_option("--input", a.inputs, "Input tensor NAME=FILE (.npy or ONNX TensorProto .pb); repeatable");
  app.add_option("--output-dir", a.output_dir, "Write each output to DIR/<output name>.npy");
  app.add_option("--trace", a.trace, "Write a Chrome trace (JSON) and print the inference summary");
  app.add_option("--trace-categories", a.trace_categories,
                 "Spans to record (--trace, --report, FURIOSA_PROFILER_OUTPUT_PATH): comma-separated runtime, "
                 "npu-executions, npu-operators, or all (default); Inference spans are always kept")
      ->check([](const std::string& v) {
        try {
          (void)profiler::parse_span_kinds(v);
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  app.add_option("--backend", a.backend, "Device backend: auto (FURIOSA_BACKEND, else pcie when a Warboy card is present, else sim), sim or pcie")
      ->check(CLI::IsMember({"auto", "sim", "pcie"}));
  app.add_option("--devices", a.devices, "Device: npu0pe0, npu0pe1, npu0pe0-1, npu:X:Y[-Z] (default npu0pe0-1)");
  app.add_option("--seed", a.seed, "Seed for inputs that are not given");
  app.add_flag("--verbose,-v", a.verbose,
               "Print the partition report, the NPU share of MACs, the host steps and, after the "
               "run, each device "
               "kernel's modelled cycles, bound and DRAM traffic");
  app.add_option("--report", a.report, "Print a profiler report: " + std::string(profiler::kReportNames))
      ->check([](const std::string& v) {
        return profiler::parse_report_kind(v) ? std::string() : "expected one of " + std::string(profiler::kReportNames);
      });
  app.add_option("--workers", a.workers, "Host workers (worker_num) and, with --dataset, caller threads")
      ->check(CLI::Range(1, 256));
  app.add_option("--dataset", a.dataset,
                 "Evaluate top-1 accuracy on a dataset: fashion-mnist[=DIR] (default DIR " +
                     std::string(tools::kFashionMnistDir) + ")");
  app.add_option("--limit", a.limit, "With --dataset: only the first N images");
  app.add_flag("--bench", a.bench, "Benchmark mode: print QPS and latency percentiles (like furiosa-bench)");
  app.add_option("--mode", a.mode, "Benchmark mode: sync (threads call run) or async (submit/recv queue)")
      ->check(CLI::IsMember({"sync", "async"}));
  app.add_option("-n,--queries", a.queries, "Benchmark: number of queries (default 100 unless --duration)");
  app.add_option("--duration", a.duration, "Benchmark: run for this many seconds");
  app.add_option("--json", a.json, "Benchmark: write the figures as JSON to FILE");
  app.add_option("--batch-size", a.batch_size, "Batch bound to a symbolic dim 0 of the inputs")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{4096}));
  app.add_option("--sim-pacing", a.sim_pacing,
                 "Simulator: on = a result reaches the host no earlier than its modelled device time "
                 "(latency and QPS like the card's); off = as fast as the host computes it")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--sim-mode", a.sim_mode,
                 "Simulator: functional = compute the kernels (valid outputs) and model their time; "
                 "timing = only model the time (fast for large models; outputs are not valid)")
      ->check(CLI::IsMember({"functional", "timing"}));
  app.add_option("--sim-warm-up", a.sim_warm_up,
                 "Simulator, functional mode: run each loaded program once per compute thread at load, so the "
                 "first inferences are not cold: fast = when the fast kernels are active (default), always, off")
      ->check(CLI::IsMember({"off", "fast", "always"}));
  tools::add_compiler_flags(app, a.compiler);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  try {
    return run(a);
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    // The error is one line; with --verbose the table of what is supported follows it.
    if (a.verbose && e.code() == ErrorCode::UnsupportedOperator) {
      std::cerr << "supported operators:\n";
      for (const auto& op : compiler::supported_operators()) std::cerr << "  " << op << "\n";
      std::cerr << "supported TFLite operators:";
      for (const auto& op : compiler::tflite_supported_operators()) std::cerr << " " << op;
      std::cerr << "\n";
    }
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
