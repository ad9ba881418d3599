// A YOLO11-style attention block (C2PSA's PSABlock: qkv Conv, MatMul of two activations, scalar
// Mul, Softmax, MatMul, depthwise positional Conv, residual Adds, a SiLU FFN) written in QDQ form
// the way ONNX Runtime's static quantizer writes it (tests/models/make_attention_qdq.py: uint8,
// int8 and symmetric int8 activations), on this runtime against ONNX Runtime 1.30 with all graph
// optimizations (issue 33). ORT fuses some groups into integer kernels, leaves others in float32
// and moves int8 Q -> DQ pairs to uint8 first; every output element must be equal on three
// seeded inputs: the runtime follows each of those decisions (docs/operators.md).
// node and onnxruntime-node are required (ort_reference.h).
#include <fmt/format.h>

#include "furiosa/runtime/runner.h"
#include "ort_reference.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

TEST_CASE("QDQ attention block as ORT's quantizer writes it equals ONNX Runtime 1.30 bit for bit",
          "[reference][qdq][attention]") {
  for (const char* variant : {"u8", "i8", "i8s"}) {
    const std::string file = fmt::format("attention_qdq_{}.onnx", variant);
    INFO("model " << file);
    const fs::path model = fs::path(FURIOSA_GENERATED_MODELS_DIR) / file;
    auto runner = test::generated_model_runner(file, "npu0pe0");
    std::vector<Tensor> inputs;
    for (unsigned seed = 1; seed <= 3; ++seed)
      inputs.push_back(test::seeded_uniform({1, 64, 10, 12}, -1.0f, 1.0f, seed));
    const auto ort = test::run_ort(model, "images", inputs,
                                   fs::path(FURIOSA_TEST_WORK_DIR) / "attention_qdq" / variant);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      INFO("input " << i);
      const auto out = runner->run({inputs[i]});
      REQUIRE(out.size() == 1);
      const auto ours = out[0].as<float>();
      const auto& ref = ort[i].at("output0");
      REQUIRE(ours.size() == ref.size());
      std::size_t differing = 0;
      for (std::size_t k = 0; k < ref.size(); ++k) differing += ours[k] != ref[k] ? 1 : 0;
      CHECK(differing == 0);
    }
  }
}
