// ONNX Runtime reference runs for the model tests (ort_reference.h).
#include "ort_reference.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "test_support.h"

namespace furiosa::test {
namespace fs = std::filesystem;

namespace {

void write_raw(const fs::path& p, const Tensor& t) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(t.bytes().data()), static_cast<std::streamsize>(t.size_bytes()));
  REQUIRE(f.good());
}

std::vector<float> read_raw(const fs::path& p, std::size_t count) {
  std::ifstream f(p, std::ios::binary);
  INFO("ORT output file " << p.string());
  REQUIRE(f.good());
  std::vector<float> v(count);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(float)));
  REQUIRE(static_cast<std::size_t>(f.gcount()) == count * sizeof(float));
  CHECK(f.peek() == std::char_traits<char>::eof());
  return v;
}

}  // namespace

std::vector<OrtOutputs> run_ort(const fs::path& model, const std::string& input_name,
                                const std::vector<Tensor>& inputs, const fs::path& work,
                                OrtOptimization level) {
  const fs::path node = FURIOSA_NODE_EXECUTABLE;
  const fs::path modules = fs::path(FURIOSA_ORT_NODE_DIR) / "node_modules" / "onnxruntime-node";
  if (node.empty() || !fs::exists(node)) {
    FAIL("node (Node.js) not found (" << node.string() << "): install Debian's nodejs and npm (.ci/install-deps)");
  }
  if (!fs::is_directory(modules)) {
    FAIL("onnxruntime-node is not installed in "
         << modules.string()
         << ": run ctest (fixture ort_node_install) or tests/install_npm_package.sh "
            "tests/reference/package.json DIR");
  }
  fs::create_directories(work);
  nlohmann::json job;
  job["graph_optimization_level"] = level == OrtOptimization::All ? "all" : "disabled";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const fs::path in = work / fmt::format("input_{}.bin", i);
    write_raw(in, inputs[i]);
    job["runs"].push_back({{"inputs", {{input_name, {{"file", in.string()}, {"dims", inputs[i].shape()}}}}},
                           {"output_dir", (work / fmt::format("ort_{}", i)).string()}});
  }
  const fs::path job_file = work / "job.json";
  std::ofstream(job_file) << job.dump();
  const std::string cmd =
      fmt::format("NODE_PATH='{}' '{}' '{}' '{}' '{}' 2>&1", (fs::path(FURIOSA_ORT_NODE_DIR) / "node_modules").string(),
                  node.string(), FURIOSA_ORT_RUN_JS, model.string(), job_file.string());
  const auto r = run_command(cmd);
  INFO(cmd << "\n" << r.out);
  REQUIRE(r.exit_code == 0);
  std::vector<OrtOutputs> out;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto meta = nlohmann::json::parse(std::ifstream(work / fmt::format("ort_{}", i) / "outputs.json"));
    CHECK(meta.at("ort").get<std::string>() == "1.30.0");
    OrtOutputs outs;
    for (const auto& [name, spec] : meta.at("outputs").items()) {
      std::size_t count = 1;
      for (auto d : spec.at("dims")) count *= d.get<std::size_t>();
      outs[name] = read_raw(spec.at("file").get<std::string>(), count);
    }
    out.push_back(std::move(outs));
  }
  return out;
}

float output_step(const compiler::CompiledModel& m, const std::string& name) {
  for (const auto& s : m.steps) {
    if (s.kind == compiler::Step::Kind::Cpu && s.cpu.kind == compiler::CpuOpKind::Dequantize &&
        m.slots[static_cast<std::size_t>(s.cpu.outputs.at(0))].name == name && s.cpu.scales.size() == 1) {
      return s.cpu.scales[0];
    }
  }
  FAIL("no per-tensor Dequantize step writes output '" << name << "'");
  return 0;
}

Tensor seeded_uniform(const Shape& shape, float lo, float hi, unsigned seed) {
  Tensor t(DType::Float32, shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.as<float>()) v = dist(gen);
  return t;
}

std::unique_ptr<runtime::Runner> generated_model_runner(const std::string& file, const char* device) {
  const fs::path model = fs::path(FURIOSA_GENERATED_MODELS_DIR) / file;
  INFO("model " << model.string());
  REQUIRE(fs::exists(model));
  runtime::RunnerOptions opts;
  opts.device = device;
  return runtime::create_runner(model, opts);
}

std::size_t match_detections(const std::vector<postprocess::Detection>& ours,
                             const std::vector<postprocess::Detection>& ref) {
  std::size_t matched_count = 0;
  std::vector<bool> used(ref.size(), false);
  for (const auto& d : ours) {
    bool matched = false;
    for (std::size_t k = 0; k < ref.size() && !matched; ++k) {
      if (!used[k] && ref[k].class_id == d.class_id && postprocess::iou(d.box, ref[k].box) >= 0.99f) {
        used[k] = matched = true;
      }
    }
    INFO("detection class " << d.class_id << " anchor " << d.anchor << " score " << d.score);
    CHECK(matched);
    matched_count += matched ? 1 : 0;
  }
  return matched_count;
}

std::map<compiler::CpuOpKind, int> host_step_kinds(const compiler::CompiledModel& m) {
  std::map<compiler::CpuOpKind, int> kinds;
  for (const auto& s : m.steps) {
    if (s.kind == compiler::Step::Kind::Cpu) ++kinds[s.cpu.kind];
  }
  return kinds;
}

}  // namespace furiosa::test
