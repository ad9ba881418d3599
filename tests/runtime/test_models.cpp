// Every ONNX model in ../shared/models with reference data runs and agrees with its reference
// (ONNX Runtime outputs, see MANIFEST.md): same top-1 class on every set, top-5 sets equal on
// the ImageNet car image, and outputs within 3 output quantization steps (quantized models) or a
// small float tolerance (float models running on host operators).
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/device/sim.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

struct ModelCase {
  std::string path;            // under ../shared/models
  std::vector<int> sets;       // reference sets compared value by value
  std::vector<int> argmax_only;  // sets only compared on the top-1 class
  bool top5 = false;           // compare top-5 sets too
};

std::vector<std::size_t> top_k(const Tensor& t, std::size_t k) {
  std::vector<std::size_t> idx(static_cast<std::size_t>(t.elements()));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                    [&](auto a, auto b) { return test::element(t, a) > test::element(t, b); });
  idx.resize(k);
  return idx;
}

// The scale of the DequantizeLinear producing model output 0, or 0 for a float output.
double output_step(const runtime::Runner& runner) {
  const auto& cm = runner.compiled();
  for (const auto& s : cm.steps) {
    if (s.kind == compiler::Step::Kind::Cpu && s.cpu.kind == compiler::CpuOpKind::Dequantize &&
        s.cpu.outputs.at(0) == cm.output_slots.at(0)) {
      return s.cpu.scales.at(0);
    }
  }
  return 0;
}

void check_model(const ModelCase& c) {
  const fs::path model = test::shared_model(c.path);
  const fs::path dir = model.parent_path();
  auto runner = runtime::create_runner(model);
  const double step = output_step(*runner);
  double worst = 0, worst_ref = 0;
  auto compare = [&](int set, bool values) {
    const fs::path sdir = dir / fmt::format("test_data_set_{}", set);
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < runner->model().inputs.size(); ++i) {
      inputs.push_back(compiler::load_tensor_pb(sdir / fmt::format("input_{}.pb", i)));
    }
    auto out = runner->run(inputs);
    Tensor expected = compiler::load_tensor_pb(sdir / "output_0.pb");
    INFO(c.path << " set " << set);
    CHECK(test::argmax(out[0]) == test::argmax(expected));
    if (c.top5 && values) {  // top-5 on the car image sets only
      auto a = top_k(out[0], 5), b = top_k(expected, 5);
      CHECK(std::set<std::size_t>(a.begin(), a.end()) == std::set<std::size_t>(b.begin(), b.end()));
    }
    if (!values) return;
    const double d = test::max_abs_diff(out[0], expected);
    worst = std::max(worst, d);
    for (std::size_t i = 0; i < static_cast<std::size_t>(expected.elements()); ++i) {
      worst_ref = std::max(worst_ref, std::abs(test::element(expected, i)));
    }
    if (step > 0) CHECK(d <= 3 * step * 1.0001);
    else CHECK(d <= 1e-3 * std::max(1.0, worst_ref));
  };
  for (int s : c.sets) compare(s, true);
  for (int s : c.argmax_only) compare(s, false);
  const auto& r = runner->partition_report();
  fmt::print("{}: worst |diff| {:.6g} = {:.3g} output steps (step {}); nodes: {} npu, {} host Q/DQ, "
             "{} fallback, {} folded, {} constant; {} NPU program(s)\n",
             c.path, worst, step > 0 ? worst / step : 0.0, step, r.count("npu"), r.count("cpu"),
             r.count("fallback"), r.count("folded"), r.count("constant"), runner->compiled().npu_calls.size());
}

std::vector<int> sets(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

TEST_CASE("zoo model mnist-12-int8 agrees with its reference", "[models]") {
  check_model({"onnx-zoo/mnist-12-int8/mnist-12-int8.onnx", sets(10), {}, false});
}

TEST_CASE("zoo model mobilenetv2-12-int8 agrees with its reference", "[models]") {
  check_model({"onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx", {0}, {}, true});
}

TEST_CASE("zoo model shufflenet-v2-12-int8 agrees with its reference", "[models]") {
  // Set 0 was made by another ONNX Runtime build (MANIFEST.md): only its class is compared.
  check_model({"onnx-zoo/shufflenet-v2-12-int8/shufflenet-v2-12-int8.onnx", {1}, {0}, true});
}

TEST_CASE("dynamically quantized mnist-12-uint8-dynamic runs on host operators", "[models]") {
  check_model({"onnx-thirdparty/mnist-12-uint8-dynamic/mnist-12-uint8-dynamic.onnx", sets(10), {}, false});
}

TEST_CASE("float models mnist-12, mnist-8, mnist-mlp-fp32 run on host operators", "[models]") {
  check_model({"onnx-zoo/mnist-12/mnist-12.onnx", sets(10), {}, false});
  check_model({"onnx-zoo/mnist-8/mnist-8.onnx", sets(10), {}, false});
  check_model({"furiosa-sdk/mnist-mlp-fp32/mnist-mlp-fp32.onnx", sets(10), {}, false});
}

TEST_CASE("batch_size binds MobileNetV2's symbolic batch dim", "[models][batch]") {
  const fs::path model = test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx");
  runtime::RunnerOptions opts;
  opts.batch_size = 2;
  auto runner = runtime::create_runner(model, opts);
  REQUIRE(runner->model().inputs[0].shape == Shape{2, 3, 224, 224});
  REQUIRE(runner->model().outputs[0].shape == Shape{2, 1000});
  const Tensor car = compiler::load_tensor_pb(model.parent_path() / "test_data_set_0/input_0.pb");
  const Tensor expected = compiler::load_tensor_pb(model.parent_path() / "test_data_set_0/output_0.pb");
  Tensor batch(DType::Float32, {2, 3, 224, 224});
  std::copy(car.bytes().begin(), car.bytes().end(), batch.bytes().begin());
  std::copy(car.bytes().begin(), car.bytes().end(), batch.bytes().begin() + static_cast<std::ptrdiff_t>(car.size_bytes()));
  auto out = runner->run({batch});
  REQUIRE(out[0].shape() == Shape{2, 1000});
  for (std::size_t row = 0; row < 2; ++row) {
    for (std::size_t i = 0; i < 1000; ++i) CHECK(out[0].as<float>()[row * 1000 + i] == expected.as<float>()[i]);
  }
}

TEST_CASE("batch_size multiplies a fixed dim 0 of 1 (ShuffleNetV2, MNIST)", "[models][batch]") {
  for (const std::string rel : {"onnx-zoo/shufflenet-v2-12-int8/shufflenet-v2-12-int8.onnx",
                                "onnx-zoo/mnist-12-int8/mnist-12-int8.onnx"}) {
    const fs::path model = test::shared_model(rel);
    runtime::RunnerOptions one, three;
    one.device = "npu0pe0";
    three.device = "npu0pe1";
    three.batch_size = 3;
    auto single = runtime::create_runner(model, one);
    auto batched = runtime::create_runner(model, three);
    const Shape in1 = single->model().inputs[0].shape;
    Shape in3 = in1;
    in3[0] = 3;
    REQUIRE(batched->model().inputs[0].shape == in3);
    std::vector<Tensor> rows;
    Tensor batch(DType::Float32, in3);
    for (int r = 0; r < 3; ++r) {
      Tensor x = compiler::load_tensor_pb(model.parent_path() / fmt::format("test_data_set_{}/input_0.pb", r % 2));
      std::copy(x.bytes().begin(), x.bytes().end(), batch.bytes().begin() + static_cast<std::ptrdiff_t>(r * x.size_bytes()));
      rows.push_back(single->run({x})[0]);
    }
    auto out = batched->run({batch})[0];
    REQUIRE(out.shape()[0] == 3);
    const std::size_t per = rows[0].size_bytes();
    for (std::size_t r = 0; r < 3; ++r) {
      INFO(rel << " row " << r);
      CHECK(std::equal(rows[r].bytes().begin(), rows[r].bytes().end(),
                       out.bytes().begin() + static_cast<std::ptrdiff_t>(r * per)));
    }
  }
}

TEST_CASE("describe_model gives a runner's inputs and outputs without opening a device", "[models]") {
  // The device spec names a card that does not exist: describe_model must not look at it.
  runtime::SessionOptions none;
  none.device = "npu:9:0";
  none.batch_size = 2;
  const fs::path mobilenet = test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx");
  const runtime::Model described = runtime::describe_model(mobilenet, none);
  runtime::RunnerOptions opts;
  opts.batch_size = 2;
  auto runner = runtime::create_runner(mobilenet, opts);
  REQUIRE(described.inputs.size() == runner->model().inputs.size());
  REQUIRE(described.outputs.size() == runner->model().outputs.size());
  for (std::size_t i = 0; i < described.inputs.size(); ++i) {
    CHECK(described.inputs[i].to_string() == runner->model().inputs[i].to_string());
  }
  for (std::size_t i = 0; i < described.outputs.size(); ++i) {
    CHECK(described.outputs[i].to_string() == runner->model().outputs[i].to_string());
  }
  CHECK(described.inputs[0].shape == Shape{2, 3, 224, 224});
  // TFLite: the recorded NHWC format comes through too.
  const runtime::Model tfl = runtime::describe_model(
      test::shared_model("furiosa-sdk/MNISTnet_uint8_quant_without_softmax/MNISTnet_uint8_quant_without_softmax.tflite"));
  REQUIRE(tfl.inputs.size() == 1);
  CHECK(tfl.inputs[0].format == "NHWC");
  // Errors of the model itself still come out.
  try {
    runtime::describe_model(fs::path("/nonexistent/model.onnx"));
    FAIL("describe_model accepted a missing file");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::ModelLoadFailed);
  }
}

TEST_CASE("intra-op: kernels shared between compute threads give the bytes of one thread",
          "[models][intra_op]") {
  // SimConfig::intra_op splits convolutions between a device's idle compute threads
  // (device/sim/fork_join.h). Whichever thread computes which channels, the outputs must be the
  // bytes of a device that never splits. Several inferences, so some run while the second
  // thread stands by (which chunks it takes is up to the scheduler; tests/device/
  // test_fork_join.cpp makes the sharing itself deterministic).
  const fs::path model = test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx");
  // The zoo's input and a darker copy of it.
  std::vector<Tensor> inputs{compiler::load_tensor_pb(model.parent_path() / "test_data_set_0/input_0.pb")};
  inputs.push_back(inputs[0]);
  for (float& v : inputs[1].as<float>()) v *= 0.5f;
  std::vector<std::vector<Tensor>> outputs[2];
  for (const bool intra_op : {false, true}) {
    device::SimConfig config;
    config.intra_op = intra_op;
    config.compute_threads = 2;
    auto driver = device::create_sim_driver(config);
    runtime::RunnerOptions o;
    o.driver = driver.get();
    o.device = "npu0pe0-1";
    auto runner = runtime::create_runner(model, o);
    for (int round = 0; round < 3; ++round) {
      for (const Tensor& x : inputs) outputs[intra_op ? 1 : 0].push_back(runner->run({x}));
    }
  }
  REQUIRE(outputs[0].size() == outputs[1].size());
  for (std::size_t i = 0; i < outputs[0].size(); ++i) {
    INFO("inference " << i);
    REQUIRE(outputs[0][i].size() == 1);
    CHECK(std::equal(outputs[0][i][0].bytes().begin(), outputs[0][i][0].bytes().end(),
                     outputs[1][i][0].bytes().begin(), outputs[1][i][0].bytes().end()));
  }
}
