// furiosa-run: run a model on a (simulated) Warboy, print its outputs, write them and a trace.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <random>

#include "furiosa/profiler/report.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"

namespace fs = std::filesystem;
using namespace furiosa;

namespace {

struct Args {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE
  std::string output_dir;
  std::string trace;
  std::string devices;
  std::uint64_t seed = 0;
  bool verbose = false;
};

// Output file name: characters other than letters, digits, '.', '_', '-' become '_'.
std::string sanitize(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  }
  return out;
}

// A random tensor of the description's dtype and shape: floats in [0, 1), integers over the
// type's range.
Tensor generate(const runtime::TensorDesc& d, std::mt19937_64& rng) {
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
                      [&](auto a, auto b) { return value_at(t, n * s[1] + a) > value_at(t, n * s[1] + b); });
    std::string line;
    for (std::size_t j = 0; j < k; ++j) {
      line += fmt::format("{}{} ({:.4g})", j ? ", " : "", idx[j], value_at(t, n * s[1] + idx[j]));
    }
    fmt::print("  {}[{}] top-{}: {}\n", d.name, n, k, line);
  }
}

int run(const Args& a) {
  std::shared_ptr<profiler::Profiler> prof;
  if (!a.trace.empty()) prof = std::make_shared<profiler::Profiler>();
  runtime::RunnerOptions opts;
  opts.device = a.devices;
  opts.profiler = prof;
  auto runner = runtime::create_runner(fs::path(a.model), opts);
  const auto& model = runner->model();

  fmt::print("model: {}\n", a.model);
  fmt::print("device: {} (sim)\n", runner->device_name());
  fmt::print("inputs:\n");
  for (const auto& d : model.inputs) fmt::print("  {}\n", d.to_string());
  fmt::print("outputs:\n");
  for (const auto& d : model.outputs) fmt::print("  {}\n", d.to_string());
  if (a.verbose) fmt::print("partition:\n{}", runner->partition_report().to_string());

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
      inputs.push_back(generate(d, rng));
      fmt::print("input {} generated from seed {}\n", d.name, a.seed);
    }
  }
  auto outputs = runner->run(inputs);

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
  if (prof) {
    runner.reset();  // all spans are in once the runner is closed
    fmt::print("{}", profiler::format_summary(profiler::summarize_inferences(prof->records())));
    try {
      prof->write_chrome_trace(a.trace);
    } catch (const std::exception& e) {
      throw Error(ErrorCode::IoError, e.what());
    }
    fmt::print("wrote trace {}\n", a.trace);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run a quantized ONNX model on a (simulated) FuriosaAI Warboy NPU"};
  Args a;
  app.add_option("model", a.model, "ONNX model file")->required();
  app.add_option("--input", a.inputs, "Input tensor NAME=FILE (.npy or ONNX TensorProto .pb); repeatable");
  app.add_option("--output-dir", a.output_dir, "Write each output to DIR/<output name>.npy");
  app.add_option("--trace", a.trace, "Write a Chrome trace (JSON) and print the inference summary");
  app.add_option("--devices", a.devices, "Device: npu0pe0, npu0pe1, npu0pe0-1, npu:X:Y[-Z] (default npu0pe0-1)");
  app.add_option("--seed", a.seed, "Seed for inputs that are not given");
  app.add_flag("--verbose,-v", a.verbose, "Print the partition report");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  try {
    return run(a);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
