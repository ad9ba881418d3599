// mnist-12-int8 (ONNX Model Zoo) end to end on the simulated Warboy, against the ten reference
// sets of ../shared/models (outputs computed with ONNX Runtime, see MANIFEST.md).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "test_support.h"

using namespace furiosa;

TEST_CASE("mnist-12-int8 agrees with the ONNX Runtime reference on all ten sets", "[runtime][model]") {
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  auto runner = runtime::create_runner(dir / "mnist-12-int8.onnx");
  REQUIRE(runner->model().inputs.size() == 1);
  REQUIRE(runner->model().outputs.size() == 1);
  CHECK(runner->model().inputs[0].name == "Input3");
  CHECK(runner->model().outputs[0].name == "Plus214_Output_0");
  // One output quantization step: the scale of the final DequantizeLinear.
  const auto& steps = runner->compiled().steps;
  REQUIRE(!steps.empty());
  REQUIRE(steps.back().cpu.kind == compiler::CpuOpKind::Dequantize);
  const double step = steps.back().cpu.scales.at(0);

  double worst = 0;
  for (int set = 0; set < 10; ++set) {
    const auto sdir = dir / fmt::format("test_data_set_{}", set);
    Tensor input = compiler::load_tensor_pb(sdir / "input_0.pb");
    Tensor expected = compiler::load_tensor_pb(sdir / "output_0.pb");
    auto out = runner->run({input});
    REQUIRE(out.size() == 1);
    const double diff = test::max_abs_diff(out[0], expected);
    INFO("set " << set << " max |diff| " << diff << " step " << step);
    CHECK(test::argmax(out[0]) == test::argmax(expected));
    CHECK(diff <= step * 1.0001);
    worst = std::max(worst, diff);
  }
  // Reported in the test log (ctest -V) for the closing note.
  fmt::print("mnist-12-int8: worst |diff| over 10 sets = {} ({} output steps of {})\n", worst,
             worst / step, step);
}

TEST_CASE("mnist-12-int8 runs from many threads with the same results", "[runtime][model]") {
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  runtime::RunnerOptions opts;
  opts.worker_num = 3;
  auto runner = runtime::create_runner(dir / "mnist-12-int8.onnx", opts);
  std::vector<Tensor> inputs, expected;
  for (int set = 0; set < 10; ++set) {
    inputs.push_back(compiler::load_tensor_pb(dir / fmt::format("test_data_set_{}/input_0.pb", set)));
    expected.push_back(runner->run({inputs.back()})[0]);
  }
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const int set = (t * 7 + i) % 10;
        auto out = runner->run({inputs[static_cast<std::size_t>(set)]});
        const auto& want = expected[static_cast<std::size_t>(set)];
        // No Catch2 assertions off the main thread: compare bytes and count.
        if (!std::ranges::equal(out[0].bytes(), want.bytes())) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(mismatches == 0);
}
