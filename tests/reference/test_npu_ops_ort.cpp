// Pad, Slice, and Mul / Sub of two quantized tensors on the NPU against ONNX Runtime 1.30 (issue 15),
// on the model of tests/models/make_npu_ops_model.py: constant, reflect, edge (through `axes`) and
// wrap Pad; strided and backwards Slice; QLinearMul of a tensor and its SE-style gate (broadcast)
// and of two convolution outputs; a QDQ Sub (DequantizeLinear x2 -> Sub -> QuantizeLinear, which
// ONNX Runtime runs unfused in float32). The whole model after the input Quantize is one NPU
// program, and both outputs equal ONNX Runtime's on three seeded inputs: 0 steps.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/runner.h"
#include "ort_reference.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

std::map<isa::KernelKind, int> kernel_kinds(const compiler::CompiledModel& m) {
  std::map<isa::KernelKind, int> out;
  for (const auto& call : m.npu_calls) {
    for (const auto& k : call.program->kernels) ++out[k.kind];
  }
  return out;
}

void compare_with_ort(const char* device) {
  const std::string file = "npu_ops.onnx";
  const fs::path model = fs::path(FURIOSA_GENERATED_MODELS_DIR) / file;
  INFO("model " << model.string() << " on " << device);
  auto runner = test::generated_model_runner(file, device);
  const auto& compiled = runner->compiled();
  CHECK(compiled.npu_calls.size() == 1);
  // On the host: the input's Quantize, the outputs' Dequantize, and the Unlower of wrap_out (width
  // 16 is not a multiple of 32).
  CHECK(test::host_step_kinds(compiled) == std::map<compiler::CpuOpKind, int>{{compiler::CpuOpKind::Quantize, 1},
                                                                              {compiler::CpuOpKind::Dequantize, 2},
                                                                              {compiler::CpuOpKind::Unlower, 1}});
  const auto kinds = kernel_kinds(compiled);
  auto count = [&](isa::KernelKind k) { return kinds.count(k) ? kinds.at(k) : 0; };
  CHECK(count(isa::KernelKind::Pad) == 4);
  CHECK(count(isa::KernelKind::Slice) == 2);
  CHECK(count(isa::KernelKind::Mul) == 2);
  CHECK(count(isa::KernelKind::Sub) == 1);

  std::vector<Tensor> inputs;
  for (unsigned i = 0; i < 3; ++i) inputs.push_back(test::seeded_uniform({1, 8, 20, 24}, -2.5f, 2.5f, 1500u + i));
  const auto ort = test::run_ort(model, "x", inputs, fs::path(FURIOSA_TEST_WORK_DIR) / "npu_ops");
  const auto& names = runner->model().outputs;
  REQUIRE(names.size() == 2);
  double worst = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("input " << i);
    const auto ours = runner->run({inputs[i]});
    for (std::size_t o = 0; o < names.size(); ++o) {
      INFO("output " << names[o].name);
      REQUIRE(ort[i].count(names[o].name) == 1);
      const auto& want = ort[i].at(names[o].name);
      const auto got = ours[o].as<float>();
      REQUIRE(got.size() == want.size());
      const float step = test::output_step(compiled, names[o].name);
      std::set<float> distinct(want.begin(), want.end());
      CHECK(distinct.size() > 100);  // the comparison sees most of the uint8 range
      for (std::size_t k = 0; k < got.size(); ++k) {
        worst = std::max(worst, std::abs(static_cast<double>(got[k]) - want[k]) / step);
      }
    }
  }
  fmt::print("{} on {}: 3 inputs vs ONNX Runtime 1.30: worst difference {:.3f} steps; kernels Pad {}, Slice {}, "
             "Mul {}, Sub {} in {} NPU program(s)\n",
             file, device, worst, count(isa::KernelKind::Pad), count(isa::KernelKind::Slice),
             count(isa::KernelKind::Mul), count(isa::KernelKind::Sub), compiled.npu_calls.size());
  CHECK(worst == 0.0);
}

}  // namespace

TEST_CASE("Pad, Slice and Mul/Sub of quantized tensors run on the NPU, equal to ONNX Runtime", "[ort][npu-ops]") {
  compare_with_ort("npu0pe0");
}
