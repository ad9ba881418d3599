// Program files (.enf) in the runtime: a runner made from a saved program computes exactly what a
// runner made from the model computes; targets and batches are checked; the compile cache hits,
// misses and recovers from a corrupt entry, and the Compile span says which.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>

#include "furiosa/compiler/compile_cache.h"
#include "furiosa/compiler/onnx_import.h"
#include "furiosa/compiler/program_file.h"
#include "furiosa/compiler/tflite_import.h"
#include "furiosa/runtime/queue.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/from_graph.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

runtime::RunnerOptions on(const char* device) {
  runtime::RunnerOptions o;
  o.device = device;
  o.worker_num = 1;
  return o;
}

/// The inputs of reference set `set` next to the model.
std::vector<Tensor> reference_inputs(const fs::path& model, const runtime::Model& desc, int set = 0) {
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < desc.inputs.size(); ++i) {
    inputs.push_back(compiler::load_tensor_pb(model.parent_path() / fmt::format("test_data_set_{}/input_{}.pb", set, i)));
  }
  return inputs;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::equal(a.bytes().begin(), a.bytes().end(), b.bytes().begin(), b.bytes().end());
}

/// The `cache` attribute of the Compile span the profiler recorded ("" when none).
std::string compile_cache_attribute(const profiler::Profiler& prof) {
  std::string found;
  for (const auto& s : prof.records()) {
    if (s.name != "Compile") continue;
    for (const auto& [k, v] : s.attributes) {
      if (k == "cache") found = v;
    }
  }
  return found;
}

std::size_t count_files(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

}  // namespace

TEST_CASE("a runner from a program file gives the outputs of a runner from the model, bit for bit", "[program_file][models]") {
  const test::ScopedEnv no_cache("FURIOSA_COMPILE_CACHE_DIR", "off");  // compare against a real compile
  const test::TempDir dir("enf-runtime");
  const char* models[] = {"onnx-zoo/mnist-12-int8/mnist-12-int8.onnx",
                          "onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx",
                          "furiosa-sdk/MNISTnet_uint8_quant/MNISTnet_uint8_quant.tflite"};
  for (const char* rel : models) {
    INFO(rel);
    const fs::path model = test::shared_model(rel);
    auto from_model = runtime::create_runner(model, on("npu0pe0"));
    const fs::path enf = dir / (model.stem().string() + ".enf");
    compiler::CompilerOptions o;
    o.pe_count = 1;
    compiler::save_program(compiler::compile(compiler::import_model(model), o), o, enf);
    fmt::print("{}: {} bytes\n", enf.filename().string(), fs::file_size(enf));
    auto from_file = runtime::create_runner(enf, on("npu0pe1"));
    REQUIRE(from_file->model().inputs.size() == from_model->model().inputs.size());
    CHECK(from_file->model().inputs[0].to_string() == from_model->model().inputs[0].to_string());
    CHECK(from_file->model().outputs[0].to_string() == from_model->model().outputs[0].to_string());
    CHECK(from_file->partition_report().to_string() == from_model->partition_report().to_string());
    // Set 0 always; set 1 where the model has it (MobileNetV2 has one set).
    for (int set = 0; set == 0 || (set < 2 && fs::is_directory(model.parent_path() / fmt::format("test_data_set_{}", set)));
         ++set) {
      const auto inputs = reference_inputs(model, from_model->model(), set);
      const auto expected = from_model->run(inputs);
      const auto actual = from_file->run(inputs);
      REQUIRE(actual.size() == expected.size());
      for (std::size_t i = 0; i < expected.size(); ++i) CHECK(same_bytes(actual[i], expected[i]));
    }
    CHECK(runtime::describe_model(enf).outputs[0].to_string() == from_model->model().outputs[0].to_string());
  }
}

TEST_CASE("a program file's target and batch are checked, without a device spec it opens its own target",
          "[program_file][errors]") {
  const test::ScopedEnv no_cache("FURIOSA_COMPILE_CACHE_DIR", "off");
  const test::TempDir dir("enf-target");
  const fs::path model = test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  compiler::CompilerOptions fused;  // pe_count 2 = warboy-2pe
  const fs::path enf = dir / "mnist.enf";
  compiler::save_program(compiler::compile(compiler::import_model(model), fused), fused, enf);
  try {
    (void)runtime::create_runner(enf, on("npu0pe0"));
    FAIL("a fused-PE program ran on a single PE");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::IncompatibleModel);
    CHECK_THAT(e.message(), Catch::Contains(enf.string()) && Catch::Contains("warboy-2pe (2 PEs)") &&
                                Catch::Contains("device npu0pe0 has 1 PE"));
  }
  auto batch = on("npu0pe0-1");
  batch.batch_size = 2;
  try {
    (void)runtime::create_runner(enf, batch);
    FAIL("a batch-1 program accepted batch size 2");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::IncompatibleModel);
    CHECK_THAT(e.message(), Catch::Contains("compiled for batch size 1, but batch size 2 was requested"));
  }
  auto knobs = on("npu0pe0-1");
  knobs.compiler_config.remove_unlower = true;
  CHECK_THROWS_WITH(runtime::create_runner(enf, knobs),
                    Catch::Contains("compiled with compiler options none, but remove_unlower were requested"));
  {
    // No device spec anywhere: the file's own target.
    const char* set = std::getenv("FURIOSA_DEVICES");
    const char* dev = std::getenv("NPU_DEVNAME");
    if (set == nullptr && dev == nullptr) {
      compiler::CompilerOptions single;
      single.pe_count = 1;
      const fs::path enf1 = dir / "mnist-warboy.enf";
      compiler::save_program(compiler::compile(compiler::import_model(model), single), single, enf1);
      runtime::RunnerOptions defaults;
      defaults.worker_num = 1;
      CHECK(runtime::create_runner(enf1, defaults)->device_name() == "npu0pe0");
      CHECK(runtime::create_runner(enf, defaults)->device_name() == "npu0pe0-1");
    }
  }
  // A queue takes the same file.
  runtime::QueueOptions q;
  q.device = "npu0pe0-1";
  auto [submitter, receiver] = runtime::create_queue(enf, q);
  const auto inputs = reference_inputs(model, submitter.model());
  submitter.submit(inputs, 7);
  auto result = receiver.recv(std::chrono::seconds(120));
  CHECK(std::any_cast<int>(result.context) == 7);
  CHECK(result.value().at(0).shape() == Shape{1, 10});
  // A damaged file is refused naming it.
  const fs::path bad = dir / "bad.enf";
  {
    std::ifstream in(enf, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(bad, std::ios::binary);
    out << bytes.substr(0, bytes.size() - 10);
  }
  try {
    (void)runtime::create_runner(bad, on("npu0pe0-1"));
    FAIL("a truncated program file was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::ModelLoadFailed);
    CHECK_THAT(e.message(), Catch::StartsWith(bad.string() + ": truncated"));
  }
}

TEST_CASE("compile cache: miss writes one entry, then hit, a corrupt entry is a miss and is rewritten",
          "[program_file][cache]") {
  const test::TempDir dir("compile-cache");
  const fs::path cache = dir / "cache";
  const test::ScopedEnv env("FURIOSA_COMPILE_CACHE_DIR", cache.string());
  const fs::path model = test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  const auto run_once = [&](std::vector<Tensor>* outputs = nullptr) {
    auto o = on("npu0pe0-1");
    auto prof = std::make_shared<profiler::Profiler>();
    o.profiler = prof;
    {
      auto runner = runtime::create_runner(model, o);
      if (outputs) *outputs = runner->run(reference_inputs(model, runner->model()));
    }
    return compile_cache_attribute(*prof);
  };
  std::vector<Tensor> first, second, third;
  CHECK(run_once(&first) == "miss");
  REQUIRE(fs::is_directory(cache));
  REQUIRE(count_files(cache) == 1);
  const fs::path entry = fs::directory_iterator(cache)->path();
  CHECK(entry.extension() == ".enf");
  const auto entry_bytes = fs::file_size(entry);
  CHECK(run_once(&second) == "hit");
  CHECK(count_files(cache) == 1);
  REQUIRE(second.size() == first.size());
  CHECK(same_bytes(second[0], first[0]));
  {  // flip one byte in the middle of the entry
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(entry_bytes / 2));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(entry_bytes / 2));
    f.put(static_cast<char>(c ^ 0x5a));
  }
  REQUIRE_THROWS(compiler::load_program(entry));
  CHECK(run_once(&third) == "miss");
  CHECK(count_files(cache) == 1);
  CHECK_NOTHROW(compiler::load_program(entry));  // rewritten
  CHECK(fs::file_size(entry) == entry_bytes);
  CHECK(same_bytes(third[0], first[0]));
  CHECK(run_once() == "hit");
  // Other options are another entry.
  auto single = on("npu0pe0");
  auto prof = std::make_shared<profiler::Profiler>();
  single.profiler = prof;
  (void)runtime::create_runner(model, single);
  CHECK(compile_cache_attribute(*prof) == "miss");
  CHECK(count_files(cache) == 2);
  {
    const test::ScopedEnv off("FURIOSA_COMPILE_CACHE_DIR", "off");
    CHECK(run_once() == "off");
    CHECK(count_files(cache) == 2);
  }
}
