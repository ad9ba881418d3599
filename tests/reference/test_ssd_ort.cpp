// SSD-MobileNet v1 (models/ssd_mobilenet_v1.py, QOperator and QDQ forms) on this runtime against
// ONNX Runtime 1.30 (onnxruntime-node, run by ort_run.js) on three seeded inputs and a photograph
// (issue 15; tests/models/make_detector_inputs.py):
// - the whole network is one NPU program (backbone, heads, Transpose/Reshape, Concat) with
//   only the input Quantize and the output Dequantize steps on the host;
// - raw outputs within 2 steps of each output's quantization;
// - after box decoding and NMS (furiosa/postprocess/ssd.h), the same detections: equal count,
//   each matched by one of the same class with IoU >= 0.99.
// node and onnxruntime-node are required (ort_reference.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "furiosa/postprocess/ssd.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "ort_reference.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

constexpr int kInputs = 4;  // three seeded, the photograph last

// Uniform [-1, 1) floats (the model's input range) from a seeded generator.
Tensor seeded_image(unsigned seed) { return test::seeded_uniform({1, 3, 300, 300}, -1.0f, 1.0f, seed); }

// Detections' options: MLPerf's IoU 0.6 and limits; a score threshold of 0.85 (sigmoid) leaves
// about 170 class/anchor candidates per input of the random-weight model (0.3 would leave most
// of the 1917 x 90), so the comparison sees NMS at work below the 100-detection cap.
postprocess::DetectOptions detect_options() {
  postprocess::DetectOptions o;
  o.score_threshold = 0.85f;
  return o;
}

void compare_with_ort(const std::string& file, const char* device) {
  const fs::path model = fs::path(FURIOSA_GENERATED_MODELS_DIR) / file;
  INFO("model " << model.string());
  auto runner = test::generated_model_runner(file, device);

  // Placement: one NPU program; on the host only the input's Quantize and Lower (width 300 is
  // not a multiple of 32) and the two outputs' Dequantize.
  const auto summary = compiler::summarize_placement(runner->compiled());
  INFO(summary.to_string());
  CHECK(summary.npu_programs == 1);
  CHECK(summary.host_macs == 0);
  CHECK(summary.npu_macs == 1'237'129'408ull);  // printed by models/ssd_mobilenet_v1.py
  CHECK(test::host_step_kinds(runner->compiled()) == std::map<compiler::CpuOpKind, int>{{compiler::CpuOpKind::Quantize, 1},
                                                         {compiler::CpuOpKind::Lower, 1},
                                                         {compiler::CpuOpKind::Dequantize, 2}});
  CHECK(summary.host_steps.size() == 4);
  CHECK(runner->partition_report().count("fallback") == 0);

  std::vector<Tensor> inputs;
  for (int i = 0; i < kInputs - 1; ++i)
    inputs.push_back(seeded_image(20261125u + static_cast<unsigned>(i)));
  inputs.push_back(runtime::read_npy(fs::path(FURIOSA_GENERATED_MODELS_DIR) / "photo_ssd_300.npy"));
  const auto ort = test::run_ort(model, "image", inputs, fs::path(FURIOSA_TEST_WORK_DIR) / fs::path(file).stem());

  const auto& names = runner->model().outputs;
  REQUIRE(names.size() == 2);
  const auto anchors = postprocess::ssd_mobilenet_v1_anchors();
  double worst_steps = 0;
  std::size_t detections = 0, matched_all = 0;
  for (int i = 0; i < kInputs; ++i) {
    const auto ours = runner->run({inputs[static_cast<std::size_t>(i)]});
    std::map<std::string, std::span<const float>> got;
    for (std::size_t o = 0; o < names.size(); ++o) {
      const std::string& name = names[o].name;
      INFO("input " << i << ", output " << name);
      const float step = test::output_step(runner->compiled(), name);
      const auto it = ort[static_cast<std::size_t>(i)].find(name);
      REQUIRE(it != ort[static_cast<std::size_t>(i)].end());
      const auto a = ours[o].as<float>();
      REQUIRE(a.size() == it->second.size());
      double worst = 0;
      for (std::size_t k = 0; k < a.size(); ++k) {
        worst = std::max(worst, std::abs(static_cast<double>(a[k]) - it->second[k]) / step);
      }
      CHECK(worst <= 2.0 + 1e-3);
      worst_steps = std::max(worst_steps, worst);
      got[name] = a;
    }
    const auto& ref = ort[static_cast<std::size_t>(i)];
    const auto d_ours = postprocess::detect(got.at("boxes"), got.at("scores"), 91, anchors, detect_options());
    const auto d_ort = postprocess::detect(ref.at("boxes"), ref.at("scores"), 91, anchors, detect_options());
    INFO("input " << i);
    CHECK(!d_ort.empty());
    CHECK(d_ours.size() == d_ort.size());
    matched_all += test::match_detections(d_ours, d_ort);
    detections += d_ours.size();
  }
  fmt::print("{}: {} inputs vs ONNX Runtime 1.30: worst output difference {:.3f} steps; {} detections in all, "
             "{} matched with ORT; NPU share of MACs {:.2f}%, {} NPU program(s), {} host steps\n",
             file, kInputs, worst_steps, detections, matched_all, summary.npu_mac_share_percent(), summary.npu_programs,
             summary.host_steps.size());
}

}  // namespace

TEST_CASE("SSD-MobileNet v1 QOperator agrees with ONNX Runtime", "[ssd][ort][models]") {
  compare_with_ort("ssd_mobilenet_v1.onnx", "npu0pe0");
}

TEST_CASE("SSD-MobileNet v1 QDQ agrees with ONNX Runtime", "[ssd][ort][models]") {
  compare_with_ort("ssd_mobilenet_v1_qdq.onnx", "npu0pe1");
}
