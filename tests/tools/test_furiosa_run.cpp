// furiosa-run end to end: the command line on mnist-12-int8, a uint8 TFLite model, and
// bad input giving one clear line on stderr with a non-zero exit code.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/device/sim.h"
#include "furiosa/runtime/tensor_file.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

struct Result {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs furiosa-run with `args` (shell-quoted by the caller), capturing stdout and stderr;
// `env` prefixes the command ("NAME=value ").
Result furiosa_run(const std::string& args, const fs::path& dir, const std::string& env = "") {
  const fs::path err = dir / "stderr.txt";
  const std::string cmd =
      fmt::format("{}'{}' {} 2>'{}'", env, FURIOSA_RUN_BINARY, args, err.string());
  Result r;
  const test::CommandResult c = test::run_command(cmd);
  r.exit_code = c.exit_code;
  r.out = c.out;
  std::ifstream e(err);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  return r;
}

std::size_t line_count(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST_CASE("furiosa-run runs mnist-12-int8 and writes outputs and a trace", "[tools][model]") {
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  const test::TempDir scratch("run-test");  // removed even when a check fails
  const fs::path& tmp = scratch.path();
  const auto r = furiosa_run(fmt::format("'{}' --input 'Input3={}' --output-dir '{}' --trace '{}'",
                                         (dir / "mnist-12-int8.onnx").string(),
                                         (dir / "test_data_set_0/input_0.pb").string(),
                                         (tmp / "out").string(), (tmp / "trace.json").string()),
                             tmp);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("Input3: float32 [1, 1, 28, 28] NCHW"));
  CHECK_THAT(r.out, Catch::Contains("Plus214_Output_0: float32 [1, 10] NC"));
  CHECK_THAT(r.out, Catch::Contains("device: npu0pe0-1"));
  CHECK_THAT(r.out, Catch::Contains("top-5: 1 ("));  // the first digit of the sample image is a 1
  CHECK_THAT(r.out, Catch::Contains("Inference counts                : 1"));
  const Tensor out = runtime::read_npy(tmp / "out/Plus214_Output_0.npy");
  CHECK(out.shape() == Shape{1, 10});
  CHECK(test::argmax(out) == 1);
  std::ifstream f(tmp / "trace.json");
  const auto j = nlohmann::json::parse(f);
  CHECK(j["traceEvents"].size() > 10);
}

TEST_CASE("furiosa-run gives the same output bytes at every kernel ISA level this CPU has",
          "[tools][model][isa]") {
  // The project's default model and two zoo models with random inputs (same seed), run with
  // FURIOSA_SIM_ISA forcing each level (portable, avx2, avx-vnni, avx512 where present): the
  // outputs must be the portable kernels' bytes.
  const test::TempDir scratch("run-isa-test");
  const fs::path& tmp = scratch.path();
  const std::vector<fs::path> models = {
      fs::path(FURIOSA_MODELS_DIR) / "fashion_mnist_int8.onnx",
      test::shared_model("onnx-zoo/mobilenetv2-12-int8") / "mobilenetv2-12-int8.onnx",
      test::shared_model("onnx-zoo/shufflenet-v2-12-int8") / "shufflenet-v2-12-int8.onnx"};
  const std::vector<device::SimIsa> levels = device::sim_cpu_isa_levels();
  REQUIRE(levels.front() == device::SimIsa::Portable);
  for (std::size_t m = 0; m < models.size(); ++m) {
    std::vector<std::string> reference;  // the portable run's output files' bytes
    for (device::SimIsa level : levels) {
      const std::string name(device::sim_isa_name(level));
      const fs::path out = tmp / fmt::format("{}-{}", m, name);
      const auto r = furiosa_run(fmt::format("'{}' --seed 11 --sim-pacing off --output-dir '{}'",
                                             models[m].string(), out.string()),
                                 tmp, fmt::format("FURIOSA_SIM_ISA={} ", name));
      INFO(models[m].filename().string() << " at " << name << ": " << r.out << r.err);
      REQUIRE(r.exit_code == 0);
      CHECK_THAT(r.out, Catch::Contains(fmt::format("kernels {})", name)));
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(out)) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      REQUIRE(!files.empty());
      std::vector<std::string> bytes;
      for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        bytes.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
      if (level == device::SimIsa::Portable) {
        reference = bytes;
      } else {
        CHECK(bytes == reference);
      }
    }
  }
}

TEST_CASE("furiosa-run takes the compiler's knobs: a uint8 NHWC input, uint8 pixel outputs", "[tools][model][knobs]") {
  // mnist-12-int8 quantizes Input3 with scale 1 and zero point 0, so the uint8 input is the
  // float image's values; NHWC [1, 28, 28, 1] has the same bytes as NCHW [1, 1, 28, 28].
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  const test::TempDir scratch("run-test");  // removed even when a check fails
  const fs::path& tmp = scratch.path();
  const Tensor x = compiler::load_tensor_pb(dir / "test_data_set_0/input_0.pb");
  Tensor q(DType::UInt8, {1, 28, 28, 1});
  for (std::size_t i = 0; i < 784; ++i) q.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(x.as<float>()[i]);
  runtime::write_npy(tmp / "x.npy", q);
  const auto r =
      furiosa_run(fmt::format("'{}' --input 'Input3={}' --without-quantize Input3 --permute-input "
                              "Input3=0,2,3,1 --normalized-pixel-outputs Plus214_Output_0 "
                              "--target-npu warboy --verbose",
                              (dir / "mnist-12-int8.onnx").string(), (tmp / "x.npy").string()),
                  tmp);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("Input3: uint8 [1, 28, 28, 1] NHWC"));
  CHECK_THAT(r.out, Catch::Contains("Plus214_Output_0: uint8 [1, 10] NC"));
  CHECK_THAT(r.out, Catch::Contains("device: npu0pe0\n") || Catch::Contains("device: npu0pe0\r"));
  CHECK_THAT(r.out, Catch::Contains("top-5: 1 ("));
  CHECK_THAT(r.out, Catch::Contains("note: without_quantize: input 'Input3'"));
  const auto bad = furiosa_run(fmt::format("'{}' --permute-input Input3=0,3,x", (dir / "mnist-12-int8.onnx").string()), tmp);
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.err, Catch::Contains("--permute-input 'Input3=0,3,x': 'x' is not an axis"));
  // --input-shape: the model's own fixed shape is accepted, a contradicting one refused naming
  // the input and the dim, a malformed one naming the flag.
  const std::string model = (dir / "mnist-12-int8.onnx").string();
  const auto same = furiosa_run(fmt::format("'{}' --input-shape Input3=1,1,28,28", model), tmp);
  CHECK(same.exit_code == 0);
  const auto other = furiosa_run(fmt::format("'{}' --input-shape Input3=1,1,28,29", model), tmp);
  CHECK(other.exit_code == 1);
  CHECK_THAT(
      other.err,
      Catch::Contains("input_shapes: input 'Input3' cannot take shape [1, 1, 28, 29]: dim 3 is "
                      "fixed to 28 by the model"));
  const auto malformed = furiosa_run(fmt::format("'{}' --input-shape Input3=1,1,a", model), tmp);
  CHECK(malformed.exit_code == 1);
  CHECK_THAT(malformed.err, Catch::Contains("--input-shape 'Input3=1,1,a': 'a' is not a dim"));
}

TEST_CASE("furiosa-run runs a uint8 TFLite model with its NHWC input", "[tools][model][tflite]") {
  const auto dir = test::shared_model("furiosa-sdk/MNISTnet_uint8_quant");
  const test::TempDir scratch("run-test");  // removed even when a check fails
  const fs::path& tmp = scratch.path();
  const auto r = furiosa_run(fmt::format("'{}' --input 'input={}' --output-dir '{}'",
                                         (dir / "MNISTnet_uint8_quant.tflite").string(),
                                         (dir / "test_data_set_0/input_0.pb").string(), (tmp / "out").string()),
                             tmp);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("input: uint8 [1, 28, 28, 1] NHWC"));
  CHECK_THAT(r.out, Catch::Contains("MNISTnet/Predictions/Reshape_1: uint8 [1, 10] NC"));
  CHECK_THAT(r.out, Catch::Contains("top-5: 1 ("));  // set 0 is the digit 1
  const Tensor out = runtime::read_npy(tmp / "out/MNISTnet_Predictions_Reshape_1.npy");
  CHECK(test::argmax(out) == 1);
}

TEST_CASE("furiosa-run reports bad input on one line with a non-zero exit code", "[tools][errors]") {
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  const test::TempDir scratch("run-test");  // removed even when a check fails
  const fs::path& tmp = scratch.path();
  const std::string model = (dir / "mnist-12-int8.onnx").string();
  {
    std::ifstream in(model, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(tmp / "truncated.onnx", std::ios::binary) << bytes.substr(0, 3000);
    // The Reshape node's op_type (protobuf field 4, length 7) swapped for 7 hostile bytes of the
    // same length: a newline, an ESC sequence and a NUL, which must come out escaped on one line.
    const std::string reshape("\x22\x07Reshape", 9);
    const std::size_t at = bytes.find(reshape);
    REQUIRE(at != std::string::npos);
    bytes.replace(at + 2, 7, std::string("F\n\x1b[2J\0", 7));
    std::ofstream(tmp / "hostile.onnx", std::ios::binary) << bytes;
  }
  runtime::write_npy(tmp / "small.npy", Tensor(DType::Float32, {1, 1, 14, 14}));
  runtime::write_npy(tmp / "bytes.npy", Tensor(DType::UInt8, {1, 1, 28, 28}));
  struct Case {
    const char* what;
    std::string args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"truncated model", fmt::format("'{}'", (tmp / "truncated.onnx").string()), "truncated.onnx"},
      {"missing model", "'/nonexistent/model.onnx'", "/nonexistent/model.onnx"},
      {"missing input file", fmt::format("'{}' --input Input3=/nonexistent/x.npy", model), "/nonexistent/x.npy"},
      {"wrong shape", fmt::format("'{}' --input 'Input3={}'", model, (tmp / "small.npy").string()),
       "expected shape [1, 1, 28, 28], got [1, 1, 14, 14]"},
      {"wrong dtype", fmt::format("'{}' --input 'Input3={}'", model, (tmp / "bytes.npy").string()),
       "expected dtype float32, got uint8"},
      {"unknown input name", fmt::format("'{}' --input 'image={}'", model, (tmp / "small.npy").string()),
       "no input named 'image'"},
      {"bad device", fmt::format("'{}' --devices npu7pe0", model), "npu7pe0"},
      // Special files: refused at once by name, never opened blocking (a FIFO with no writer
      // would hang) nor read forever (/dev/zero).
      {"FIFO model", fmt::format("'{}'", (tmp / "fifo.onnx").string()),
       fmt::format("model file '{}' is not a regular file (a FIFO)", (tmp / "fifo.onnx").string())},
      {"FIFO program", fmt::format("'{}'", (tmp / "fifo.enf").string()), "fifo.enf' is not a regular file"},
      {"FIFO input", fmt::format("'{}' --input 'Input3={}'", model, (tmp / "fifo.npy").string()),
       fmt::format("input file '{}' is not a regular file (a FIFO)", (tmp / "fifo.npy").string())},
      {"/dev/zero input", fmt::format("'{}' --input 'Input3={}'", model, (tmp / "zero.npy").string()),
       "zero.npy' is not a regular file (a character device)"},
      // Names from the model reach the terminal escaped, in one line that names the file.
      {"hostile op_type", fmt::format("'{}'", (tmp / "hostile.onnx").string()),
       fmt::format("UnsupportedOperator: {}: 1 node(s) cannot run: node 'Times212_reshape0' (op F\\x0a\\x1b[2J\\x00,",
                   (tmp / "hostile.onnx").string())},
  };
  for (const char* fifo : {"fifo.onnx", "fifo.enf", "fifo.npy"}) REQUIRE(::mkfifo((tmp / fifo).c_str(), 0600) == 0);
  fs::create_symlink("/dev/zero", tmp / "zero.npy");
  for (const auto& c : cases) {
    const auto r = furiosa_run(c.args, tmp);
    INFO(c.what << "\nstderr: " << r.err);
    CHECK(r.exit_code != 0);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find_first_of(std::string("\x1b\0", 2)) == std::string::npos);  // no raw ESC or NUL
    CHECK_THAT(r.err, Catch::StartsWith("error: ") && Catch::Contains(c.expect));
  }
}

TEST_CASE("furiosa-run with no model runs the default model on the bundled images", "[tools][default]") {
  const test::TempDir scratch("run-test");  // removed even when a check fails
  const fs::path& tmp = scratch.path();
  const auto r = furiosa_run("", tmp);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("(default model)"));
  CHECK_THAT(r.out, Catch::Contains("fashion_0.npy    Ankle boot     Ankle boot     ok"));
  CHECK_THAT(r.out, Catch::Contains("8/8 correct"));
}

TEST_CASE("furiosa-run --dataset prints the accuracy of the first 1,000 test images", "[tools][default]") {
  const test::TempDir scratch("run-test");  // removed even when a check fails
  const fs::path& tmp = scratch.path();
  const auto r = furiosa_run("--dataset fashion-mnist --limit 1000", tmp);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("top-1 accuracy: 91.60% (916/1000)"));
  CHECK_THAT(r.out, Catch::Contains("images/s"));
  const auto bad = furiosa_run("--dataset imagenet", tmp);
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.err, Catch::Contains("only fashion-mnist"));
}

TEST_CASE("FURIOSA_PROFILER_OUTPUT_PATH traces a run with no tracing option", "[tools][trace]") {
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  const test::TempDir scratch("run-test");  // removed even when a check fails
  const fs::path& tmp = scratch.path();
  const fs::path trace = tmp / "env-trace.json";
  const std::string cmd = fmt::format("FURIOSA_PROFILER_OUTPUT_PATH='{}' '{}' '{}' >/dev/null 2>&1", trace.string(),
                                      FURIOSA_RUN_BINARY, (dir / "mnist-12-int8.onnx").string());
  REQUIRE(std::system(cmd.c_str()) == 0);
  REQUIRE(fs::exists(trace));
  std::ifstream f(trace);
  const auto j = nlohmann::json::parse(f);
  std::set<std::string> names;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") names.insert(e["name"].get<std::string>());
  }
  CHECK(names.count("Inference") == 1);
  CHECK(names.count("Execution") == 1);
  CHECK(names.count("LowLevelConv2d") == 1);
}

TEST_CASE("furiosa-run with FURIOSA_PROFILER_OUTPUT_PATH and --trace/--report writes both files",
          "[tools][model][trace]") {
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  const test::TempDir scratch("run-test");  // removed even when a check fails
  const fs::path& tmp = scratch.path();
  const std::string env = fmt::format("FURIOSA_PROFILER_OUTPUT_PATH='{}' ", (tmp / "env.csv").string());
  const std::string cmd =
      fmt::format("{}'{}' '{}' --input 'Input3={}' --trace '{}' --report external-operators 2>'{}'", env,
                  FURIOSA_RUN_BINARY, (dir / "mnist-12-int8.onnx").string(),
                  (dir / "test_data_set_0/input_0.pb").string(), (tmp / "trace.json").string(),
                  (tmp / "stderr.txt").string());
  const test::CommandResult c = test::run_command(cmd);
  INFO(c.out);
  REQUIRE(c.exit_code == 0);
  // One line says that both are written, then both files hold the one inference.
  CHECK_THAT(c.out, Catch::Contains("FURIOSA_PROFILER_OUTPUT_PATH"));
  CHECK_THAT(c.out, Catch::Contains("both are written"));
  CHECK_THAT(c.out, Catch::Contains("Inference counts                : 1"));
  CHECK_THAT(c.out, Catch::Contains("Quantize"));  // the external-operators report
  std::ifstream f(tmp / "trace.json");
  const auto j = nlohmann::json::parse(f);
  std::size_t inferences = 0;
  for (const auto& e : j["traceEvents"]) inferences += e.value("name", "") == "Inference" && e["ph"] == "X";
  CHECK(inferences == 1);
  std::ifstream csv(tmp / "env.csv");
  REQUIRE(csv.good());
  const std::string text((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
  std::size_t spans = 0;  // X events; metadata, flow and counter events are not spans
  for (const auto& e : j["traceEvents"]) spans += e["ph"] == "X";
  CHECK(static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) == spans + 1);  // + header
  CHECK_THAT(text, Catch::Contains(",Inference,"));
}

TEST_CASE("furiosa-run --bench prints QPS and latency percentiles and writes JSON", "[tools][bench]") {
  const auto model = test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  const test::TempDir scratch("run-test");  // removed even when a check fails
  const fs::path& tmp = scratch.path();
  for (const char* mode : {"sync", "async"}) {
    const fs::path json = tmp / fmt::format("{}.json", mode);
    const auto r = furiosa_run(fmt::format("'{}' --bench --mode {} -n 50 --workers 2 --devices npu0pe0,npu0pe1 --json '{}'",
                                           model.string(), mode, json.string()),
                               tmp);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("queries: 50 (0 errors)"));
    CHECK_THAT(r.out, Catch::Contains("latency (us): min"));
    std::ifstream f(json);
    const auto j = nlohmann::json::parse(f);
    CHECK(j["mode"] == mode);
    CHECK(j["queries"] == 50);
    CHECK(j["errors"] == 0);
    CHECK(j["batch_size"] == 1);
    CHECK(j["workers"] == 2);
    CHECK(j["qps"].get<double>() > 0);
    const auto& l = j["latency_us"];
    for (const char* k : {"min", "mean", "p50", "p90", "p95", "p99", "p999", "max"}) CHECK(l.contains(k));
    CHECK(l["min"].get<double>() <= l["p50"].get<double>());
    CHECK(l["p50"].get<double>() <= l["p99"].get<double>());
    CHECK(l["p99"].get<double>() <= l["max"].get<double>());
  }
}

TEST_CASE("furiosa-run --sim-mode timing says the outputs are not valid and writes none", "[tools][timing]") {
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  const test::TempDir scratch("run-test");  // removed even when a check fails
  const fs::path& tmp = scratch.path();
  const auto r = furiosa_run(fmt::format("'{}' --sim-mode timing --sim-pacing off --output-dir '{}'",
                                         (dir / "mnist-12-int8.onnx").string(), (tmp / "out").string()),
                             tmp);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("backend: sim (") && Catch::Contains("timing mode"));
  CHECK_THAT(r.out, Catch::Contains("outputs are not valid"));
  CHECK_THAT(r.out, !Catch::Contains("top-5"));
  CHECK_FALSE(fs::exists(tmp / "out"));

  const auto d = furiosa_run("--sim-mode timing --dataset fashion-mnist", tmp);
  CHECK(d.exit_code == 1);
  CHECK(line_count(d.err) == 1);
  CHECK_THAT(d.err, Catch::StartsWith("error: InvalidArgument: --dataset needs outputs"));
  CHECK(d.out.empty());
}

TEST_CASE("furiosa-run picks its backend: --backend, FURIOSA_BACKEND, else sim without a card", "[tools][backend]") {
  const test::TempDir scratch("run-test");  // removed even when a check fails
  const fs::path& tmp = scratch.path();
  const std::string model = test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx").string();
  // No Warboy card on a test machine: automatic selection says why it took the simulator.
  const auto automatic = furiosa_run(fmt::format("'{}'", model), tmp);
  INFO(automatic.out << automatic.err);
  REQUIRE(automatic.exit_code == 0);
  CHECK_THAT(automatic.out, Catch::Contains("backend: sim (no Warboy card found by pcie"));
  // The environment variable, named in the reason.
  const auto env = test::run_command(fmt::format("cd '{}' && FURIOSA_BACKEND=sim '{}' '{}'", tmp.string(),
                                                 FURIOSA_RUN_BINARY, model));
  CHECK(env.exit_code == 0);
  CHECK_THAT(env.out, Catch::Contains("backend: sim (FURIOSA_BACKEND=sim"));
  // The PCIe backend without a card: one line naming the device file and what to do instead.
  const auto pcie = furiosa_run(fmt::format("'{}' --backend pcie", model), tmp);
  CHECK(pcie.exit_code == 1);
  CHECK(line_count(pcie.err) == 1);
  CHECK_THAT(pcie.err, Catch::StartsWith("error: DeviceNotFound: pcie: no NPU card found") &&
                           Catch::Contains("--backend sim"));
  // An unknown backend is refused by the option check.
  CHECK(furiosa_run(fmt::format("'{}' --backend tpu", model), tmp).exit_code != 0);
}

TEST_CASE("furiosa-run --verbose prints each device kernel's modelled bound and spilled bytes",
          "[tools][timing]") {
  // SSD-ResNet34 at 1200x1200 holds more activations than a PE's SRAM (docs/timing.md, "On-chip
  // memory"): its residual blocks spill their shortcuts.
  const fs::path model = FURIOSA_SSD_RESNET34;
  if (!fs::exists(model))
    FAIL("missing " << model.string() << ": build the ssd-resnet34-model target");
  const test::TempDir scratch("run-verbose");
  const auto r = furiosa_run(
      fmt::format("'{}' --sim-mode timing --sim-pacing off --devices npu0pe0-1 --verbose",
                  model.string()),
      scratch.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(
                        "device kernels of program 0 (timing model, one execution): 79 kernels"));
  CHECK_THAT(r.out, Catch::Contains("of which 98.30 MB spilled activations"));
  // A shortcut read back by its Add: DRAM-bound, 6.14 MB from DRAM.
  bool add_from_dram = false;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream row(line);
    std::string index, kernel, op, cycles, weight_load, bound, dram, spill;
    row >> index >> kernel >> op >> cycles >> weight_load >> bound >> dram >> spill;
    add_from_dram = add_from_dram || (kernel == "LowLevelAdd" && bound == "dram" &&
                                      dram == "6.14" && spill == "6.14");
  }
  CHECK(add_from_dram);
  // Without --verbose, no table.
  const auto quiet = furiosa_run(
      fmt::format("'{}' --sim-mode timing --sim-pacing off --devices npu0pe0-1", model.string()),
      scratch.path());
  REQUIRE(quiet.exit_code == 0);
  CHECK_THAT(quiet.out, !Catch::Contains("device kernels"));
}
