// Bad input through the API: clear errors naming the tensor, nothing submitted.
#include <sys/stat.h>

#include <filesystem>

#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/from_graph.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "test_support.h"

using namespace furiosa;

namespace {

// Runs `f` and returns the Error it throws (fails the test when it throws nothing).
template <class F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("no furiosa::Error was thrown");
  return Error(ErrorCode::Internal, "unreachable");
}

}  // namespace

TEST_CASE("wrong inputs are refused with the tensor named", "[runtime][errors]") {
  auto runner = runtime::create_runner(test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx"));
  SECTION("wrong shape") {
    auto e = error_of([&] { runner->run({Tensor(DType::Float32, {1, 1, 28, 27})}); });
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK_THAT(e.what(), Catch::Contains("Input3") && Catch::Contains("[1, 1, 28, 28]") &&
                             Catch::Contains("[1, 1, 28, 27]"));
    CHECK(e.tensor() == "Input3");
  }
  SECTION("wrong dtype") {
    auto e = error_of([&] { runner->run({Tensor(DType::UInt8, {1, 1, 28, 28})}); });
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK_THAT(e.what(), Catch::Contains("Input3") && Catch::Contains("float32") && Catch::Contains("uint8"));
    CHECK(e.tensor() == "Input3");
  }
  SECTION("wrong count") {
    auto e = error_of([&] { runner->run({}); });
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK_THAT(e.what(), Catch::Contains("expected 1 input"));
  }
  SECTION("unknown name") {
    std::map<std::string, Tensor> in{{"Input3", Tensor(DType::Float32, {1, 1, 28, 28})},
                                     {"image", Tensor(DType::Float32, {1, 1, 28, 28})}};
    auto e = error_of([&] { runner->run_with({}, in); });
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK_THAT(e.what(), Catch::Contains("'image'"));
    CHECK(e.tensor() == "image");
  }
  SECTION("the runner still works after refusing") {
    CHECK(runner->run({Tensor(DType::Float32, {1, 1, 28, 28})}).size() == 1);
  }
}

TEST_CASE("a model with unknown operators is refused with every such node listed", "[runtime][errors]") {
  compiler::Graph g;
  g.name = "unsupported";
  auto add_value = [&](const std::string& name) {
    compiler::Value v;
    v.name = name;
    v.dtype = DType::Float32;
    v.shape = {1, 4};
    v.dim_params = {"", ""};
    v.has_shape = true;
    g.values.push_back(v);
    return static_cast<int>(g.values.size() - 1);
  };
  const int x = add_value("x"), a = add_value("a"), b = add_value("b"), y = add_value("y");
  g.inputs = {x};
  g.outputs = {y};
  auto add_node = [&](const std::string& name, const std::string& op, const std::string& domain, int in, int out) {
    compiler::Node n;
    n.name = name;
    n.op_type = op;
    n.domain = domain;
    n.index = static_cast<std::int32_t>(g.nodes.size());
    n.inputs = {in};
    n.outputs = {out};
    g.nodes.push_back(n);
  };
  add_node("relu", "Relu", "", x, a);
  add_node("frob", "Frobnicate", "com.example", a, b);
  add_node("lstm", "LSTM", "", b, y);
  auto e = error_of([&] { runtime::create_runner(std::move(g)); });
  CHECK(e.code() == ErrorCode::UnsupportedOperator);
  const std::string msg = e.what();
  CHECK_THAT(msg, Catch::Contains("node 'frob' (op Frobnicate, domain 'com.example')"));
  CHECK_THAT(msg, Catch::Contains("node 'lstm' (op LSTM, domain 'ai.onnx')"));
  CHECK_THAT(msg, !Catch::Contains("node 'relu'"));
  CHECK_THAT(msg, Catch::Contains("supported operators"));
}

TEST_CASE("a FIFO or a device as model or input file is refused at once, by name", "[runtime][errors][file]") {
  const test::TempDir dir("special-files");  // removed even when a check fails
  // No writer ever opens these FIFOs: an open for reading without O_NONBLOCK would block forever.
  for (const char* name : {"model.onnx", "model.enf", "model.tflite", "model", "input.npy", "input.pb"}) {
    REQUIRE(::mkfifo((dir / name).c_str(), 0600) == 0);
  }
  std::filesystem::create_symlink("/dev/zero", dir / "zero.npy");
  std::filesystem::create_symlink("/dev/zero", dir / "zero.onnx");
  for (const char* name : {"model.onnx", "model.enf", "model.tflite", "model", "zero.onnx"}) {
    const std::string path = (dir / name).string();
    INFO(path);
    auto e = error_of([&] { runtime::create_runner(path); });
    CHECK(e.code() == ErrorCode::ModelLoadFailed);
    CHECK(e.message().find('\n') == std::string::npos);
    CHECK_THAT(e.message(), Catch::Contains("'" + path + "' is not a regular file"));
  }
  for (const char* name : {"input.npy", "input.pb", "zero.npy"}) {
    const std::string path = (dir / name).string();
    INFO(path);
    auto e = error_of([&] { runtime::load_tensor_file(path); });
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK_THAT(e.message(), Catch::Contains("'" + path + "' is not a regular file"));
    CHECK(e.file() == path);
  }
}

TEST_CASE("a second runner on an overlapping device is DeviceBusy", "[runtime][errors]") {
  const auto model = test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  runtime::RunnerOptions fused;
  fused.device = "npu0pe0-1";
  auto first = runtime::create_runner(model, fused);
  runtime::RunnerOptions single;
  single.device = "npu0pe1";
  auto e = error_of([&] { runtime::create_runner(model, single); });
  CHECK(e.code() == ErrorCode::DeviceBusy);
  CHECK_THAT(e.what(), Catch::Contains("npu0pe1"));
  first.reset();
  CHECK(runtime::create_runner(model, single)->device_name() == "npu0pe1");
}

