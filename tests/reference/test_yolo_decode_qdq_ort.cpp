// YOLOv8's decode head (DFL Softmax and Conv, dist2bbox's Sub / Add / Div / Concat / Mul, the class
// Sigmoid) quantized the way ONNX Runtime's static quantizer writes it
// (tests/models/make_yolo_decode_qdq.py), on this runtime against ONNX Runtime 1.30 run twice: with
// all graph optimizations (QDQ groups fused into integer kernels) and with none (the graph as
// written: DequantizeLinear, the float op, QuantizeLinear). Issue 33's measure for a QDQ model:
// no output element farther from ORT's optimized run than ORT's unoptimized run is, and the same
// detections after Ultralytics' NMS (class equal, IoU >= 0.9, score within one output step).
// Where ORT's optimized run differs from its unoptimized one, it is a kernel whose arithmetic
// differs from the literal graph's (QLinearSoftmax's lookup table, QLinearAdd's MLAS formula;
// docs/operators.md); the runtime computes those too, so it must equal the optimized run on every
// element. The test prints how many elements each pair of runs differs in.
// node and onnxruntime-node are required (ort_reference.h).
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "furiosa/postprocess/yolo.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "ort_reference.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kClasses = 80, kAnchors = 8400;

// The float32 scalar initializer `name` of an ONNX model.
float scalar_initializer(const fs::path& model, const std::string& name) {
  onnx::ModelProto m;
  std::ifstream f(model, std::ios::binary);
  REQUIRE(m.ParseFromIstream(&f));
  for (const auto& t : m.graph().initializer()) {
    if (t.name() != name) continue;
    REQUIRE(t.data_type() == onnx::TensorProto::FLOAT);
    if (t.float_data_size() == 1) return t.float_data(0);
    REQUIRE(t.raw_data().size() == sizeof(float));
    float v = 0;
    std::memcpy(&v, t.raw_data().data(), sizeof v);
    return v;
  }
  FAIL("initializer " << name << " not in " << model.string());
  return 0;
}

// Elements of `a` and `b` that differ, and the largest difference in steps (`box_step` for the
// four box rows of output0 [1, 84, 8400], `score_step` for the class rows).
struct Spread {
  std::size_t differing = 0;
  double worst_steps = 0;
};
Spread spread(const std::vector<float>& a, const std::vector<float>& b, float box_step,
              float score_step) {
  Spread s;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k] == b[k]) continue;
    ++s.differing;
    const float step = k < 4 * kAnchors ? box_step : score_step;
    s.worst_steps = std::max(s.worst_steps, std::abs(static_cast<double>(a[k]) - b[k]) / step);
  }
  return s;
}

std::size_t ours_all_differing(const std::vector<float>& ours, const std::vector<float>& all) {
  std::size_t n = 0;
  for (std::size_t k = 0; k < ours.size(); ++k) n += ours[k] != all[k] ? 1 : 0;
  return n;
}

postprocess::YoloDetectOptions detect_options() {
  postprocess::YoloDetectOptions o;
  o.score_threshold = 0.85f;
  return o;
}

// Each of ours has a distinct detection of `ref` of its class with IoU >= 0.9 and a score within
// one step; returns how many.
std::size_t matched(const std::vector<postprocess::Detection>& ours,
                    const std::vector<postprocess::Detection>& ref, float score_step) {
  std::vector<bool> used(ref.size(), false);
  std::size_t n = 0;
  for (const auto& d : ours) {
    for (std::size_t k = 0; k < ref.size(); ++k) {
      if (used[k] || ref[k].class_id != d.class_id ||
          std::abs(ref[k].score - d.score) > score_step * 1.001f ||
          postprocess::iou(d.box, ref[k].box) < 0.9f) {
        continue;
      }
      used[k] = true;
      ++n;
      break;
    }
  }
  return n;
}

}  // namespace

TEST_CASE(
    "QDQ YOLOv8 decode head as ORT's quantizer writes it stays within ONNX Runtime's own spread",
    "[reference][qdq][yolo]") {
  const std::string file = "yolo_decode_qdq.onnx";
  const fs::path model = fs::path(FURIOSA_GENERATED_MODELS_DIR) / file;
  auto runner = test::generated_model_runner(file, "npu0pe0");
  const float box_step = scalar_initializer(model, "dbox_scale");
  const float score_step = scalar_initializer(model, "cls_sigmoid_scale");
  std::vector<Tensor> inputs;
  for (int seed = 1; seed <= 3; ++seed) {
    inputs.push_back(runtime::read_npy(fs::path(FURIOSA_GENERATED_MODELS_DIR) /
                                       fmt::format("yolo_decode_qdq_input_{}.npy", seed)));
    REQUIRE(inputs.back().shape() == Shape{1, 144, static_cast<std::int64_t>(kAnchors)});
  }
  const fs::path work = fs::path(FURIOSA_TEST_WORK_DIR) / "yolo_decode_qdq";
  const auto all = test::run_ort(model, "raw", inputs, work / "all", test::OrtOptimization::All);
  const auto off =
      test::run_ort(model, "raw", inputs, work / "disabled", test::OrtOptimization::Disabled);
  std::size_t detections = 0, candidates_total = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("input " << i + 1);
    const auto out = runner->run({inputs[i]});
    REQUIRE(out.size() == 1);
    const auto o = out[0].as<float>();
    const std::vector<float> ours(o.begin(), o.end());
    const auto& a = all[i].at("output0");
    const auto& d = off[i].at("output0");
    REQUIRE(ours.size() == a.size());
    REQUIRE(d.size() == a.size());
    // Element by element: where ours differs from ORT's optimized run, ORT's unoptimized run
    // differs from it at least as much.
    std::size_t farther = 0;
    for (std::size_t k = 0; k < a.size(); ++k) {
      if (ours[k] != a[k] && std::abs(ours[k] - a[k]) > std::abs(d[k] - a[k])) ++farther;
    }
    CHECK(farther == 0);
    // And where ORT fuses, the runtime computes what ORT's kernels compute (QLinearAdd's MLAS
    // formula, QLinearSoftmax's table): equal to the optimized run everywhere.
    CHECK(ours_all_differing(ours, a) == 0);
    const Spread ours_all = spread(ours, a, box_step, score_step),
                 ours_off = spread(ours, d, box_step, score_step),
                 all_off = spread(a, d, box_step, score_step);
    // The detections: equal count, each matched.
    const auto d_ours = postprocess::yolo_detect(ours, kClasses, detect_options());
    const auto d_all = postprocess::yolo_detect(a, kClasses, detect_options());
    CHECK(d_all.size() >= 10);
    CHECK(d_ours.size() == d_all.size());
    const std::size_t m = matched(d_ours, d_all, score_step);
    CHECK(m == d_ours.size());
    detections += d_ours.size();
    std::size_t candidates = 0;
    for (std::size_t anchor = 0; anchor < kAnchors; ++anchor) {
      float best = 0;
      for (std::size_t c = 0; c < kClasses; ++c)
        best = std::max(best, a[(4 + c) * kAnchors + anchor]);
      candidates += best > detect_options().score_threshold;
    }
    candidates_total += candidates;
    fmt::print(
        "{} input {}: {} elements; ours vs ORT optimized {} differ (worst {:.0f} steps), ours vs "
        "ORT unoptimized "
        "{} ({:.0f}), ORT optimized vs unoptimized {} ({:.0f}); {} candidates, {} detections, {} "
        "matched\n",
        file, i + 1, a.size(), ours_all.differing, ours_all.worst_steps, ours_off.differing,
        ours_off.worst_steps, all_off.differing, all_off.worst_steps, candidates, d_ours.size(), m);
  }
  CHECK(candidates_total > detections);  // NMS had work to do
}
