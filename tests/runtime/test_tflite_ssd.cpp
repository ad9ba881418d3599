// A small but real-shaped uint8 SSD TFLite model (tests/runtime/make_tflite_ssd.cpp: MobileNet-
// style backbone, two feature maps, box and class heads, RESHAPE + CONCATENATION, LOGISTIC, SSD
// anchors, the custom TFLite_Detection_PostProcess) through the whole stack on three seeded
// inputs, against TFLite's arithmetic (tests/models/tflite_ref.py) and Arm NN 20.08's CpuRef
// backend (tests/models/armnn_ssd_ref.py). The CTest fixtures tflite_ssd_model,
// tflite_ssd_tflite_reference and tflite_ssd_armnn_reference write the models, inputs and
// references into FURIOSA_TFLITE_SSD_DIR; this test is hidden from the default Catch2 run ([.])
// and runs as the CTest test tflite_ssd_vs_armnn after them. Without the files it fails (it never
// skips).
//
// What is compared, and how closely:
//  - the heads (the post-processing's inputs: uint8 box encodings and LOGISTIC scores) equal
//    TFLite's reference-kernel arithmetic exactly. Against Arm NN they differ by a few steps in
//    7-10% of the elements (measured: at most 2 steps in the box encodings, 3 in the scores):
//    Arm NN computes each quantized convolution in float and rounds once, TFLite's kernels (and
//    this runtime) round twice (MultiplyByQuantizedMultiplier; docs/operators.md). Bounded here
//    (at most 4 steps, at most 15% of the elements) and printed;
//  - TFLite_Detection_PostProcess against Arm NN's on equal inputs: the post-processing model
//    alone on Arm NN's own heads, and the full model against Arm NN's post-processing of
//    TFLite's heads. Fast NMS with one class per detection and regular NMS: the number of
//    detections, per slot the score (the same dequantized uint8 value: within 1e-6, far below
//    one step of 1/256), and per run of equal scores the same classes and box corners within
//    kBoxTol (Arm NN decodes in float32, TFLite and this runtime in double rounded to float32;
//    measured worst in the printed line). Equal scores are common (uint8 scores) and their order
//    is unspecified in TFLite's kernel and Arm NN's (std::partial_sort); this runtime puts the
//    lower anchor index first. Where max_detections cuts a run of equal scores, which of them
//    are kept is that order too: only their scores are compared (the count is printed);
//  - the full model against Arm NN's full model: the head differences move scores by a step or
//    two, which can reorder detections of close scores and swap the last ones in or out. The
//    number of detections must be equal, and at least 90% of Arm NN's detections must have one
//    of ours of the same class with IoU >= 0.98 and a score within 3 steps (measured: 57 of 58);
//  - placement: one NPU program with every convolution, reshape, concatenation and the LOGISTIC
//    table; on the host only the input's Lower, the Dequantize steps of the post-processing's
//    two inputs and TFLiteDetectionPostProcess.
// Fast NMS with max_classes_per_detection > 1 is not compared: Arm NN treats each (anchor,
// class) pair as its own detection, TFLite's kernel (which this runtime follows) fills an
// anchor's classes into consecutive slots of one detection.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <set>
#include <string>

#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

constexpr int kInputs = 3;
constexpr int kMaxDetections = 16;
constexpr float kScoreThreshold = 0.6f;  // the models' nms_score_threshold
constexpr double kScoreStep = 1.0 / 256;
// Box corners from equal box encodings: float32 rounding only (Arm NN decodes in float32, TFLite
// and this runtime in double rounded to float32); one encoding step moves a corner by ~1e-3.
constexpr double kBoxTol = 1e-6;

fs::path ssd_file(const std::string& name) {
  const fs::path p = fs::path(FURIOSA_TFLITE_SSD_DIR) / name;
  if (!fs::exists(p)) {
    FAIL("missing " << p.string()
         << ": run the CTest fixtures tflite_ssd_model, tflite_ssd_tflite_reference and tflite_ssd_armnn_reference "
            "(they need Debian python3-pyarmnn, libarmnn-cpuref-backend22, python3-flatbuffers and python3-numpy; "
            "see .ci/install-deps)");
  }
  return p;
}

runtime::RunnerOptions ssd_options() {
  runtime::RunnerOptions o;
  o.worker_num = 1;
  o.device = "npu0pe0";
  return o;
}

// Number of elements of two uint8 tensors that differ, and the largest difference.
std::pair<std::size_t, int> uint8_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dtype() == DType::UInt8);
  REQUIRE(b.dtype() == DType::UInt8);
  REQUIRE(a.shape() == b.shape());
  std::size_t n = 0;
  int worst = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(a.elements()); ++i) {
    const int d = std::abs(static_cast<int>(a.as<std::uint8_t>()[i]) - static_cast<int>(b.as<std::uint8_t>()[i]));
    n += d != 0;
    worst = std::max(worst, d);
  }
  return {n, worst};
}

// The four outputs of TFLite_Detection_PostProcess: boxes [1, D, 4], classes [1, D], scores
// [1, D], num [1] (float32).
struct Detections {
  std::vector<Tensor> t;
  std::size_t num() const { return static_cast<std::size_t>(t[3].as<float>()[0]); }
  float cls(std::size_t s) const { return t[1].as<float>()[s]; }
  float score(std::size_t s) const { return t[2].as<float>()[s]; }
  float corner(std::size_t s, std::size_t j) const { return t[0].as<float>()[4 * s + j]; }
};

Detections armnn_detections(const std::string& prefix) {
  Detections d;
  for (const char* what : {"boxes", "classes", "scores", "num"}) {
    d.t.push_back(runtime::read_npy(ssd_file(fmt::format("{}_{}.npy", prefix, what))));
    REQUIRE(d.t.back().dtype() == DType::Float32);
  }
  REQUIRE(d.t[0].shape() == Shape{1, kMaxDetections, 4});
  REQUIRE(d.t[3].shape() == Shape{1});
  return d;
}

// What check_equal saw besides the assertions.
struct TieCounts {
  std::size_t reordered = 0;  // slots whose partner sits elsewhere among the equal scores
  std::size_t at_cap = 0;     // detections of the last score at max_detections that differ
};

// Equal detections: equal count (more than three), the scores slot by slot within 1e-6 (both
// are sorted by score), and among the slots of one score the same (class, box) pairs, corners
// within kBoxTol: equal scores come in any order from Arm NN (std::partial_sort, as in TFLite's
// kernel), lower anchor index first here. One exception: when max_detections cuts through a run
// of equal scores, which of them fill the last slots is that unspecified order too, so those
// slots need only their score (counted in `ties.at_cap`). Every (class, box) pair distinct,
// unused slots zero. Returns the worst corner difference; `classes` collects our classes.
double check_equal(const Detections& ours, const Detections& ref, std::set<float>& classes, TieCounts& ties) {
  REQUIRE(ours.t.size() == 4);
  for (std::size_t k = 0; k < 4; ++k) {
    REQUIRE(ours.t[k].dtype() == DType::Float32);
    REQUIRE(ours.t[k].shape() == ref.t[k].shape());
  }
  CHECK(ours.num() == ref.num());
  CHECK(ours.num() > 3);
  const std::size_t n = std::min(ours.num(), ref.num());
  auto corner_diff = [&](std::size_t o, std::size_t r) {
    double d = 0;
    for (std::size_t j = 0; j < 4; ++j) d = std::max(d, static_cast<double>(std::abs(ours.corner(o, j) - ref.corner(r, j))));
    return d;
  };
  double worst = 0;
  std::vector<bool> used(n, false);
  std::set<std::pair<float, std::array<float, 4>>> pairs;
  std::set<std::array<float, 4>> boxes;
  for (std::size_t r = 0; r < n; ++r) {
    INFO("slot " << r);
    CHECK(std::abs(ours.score(r) - ref.score(r)) <= 1e-6);
    CHECK(ours.score(r) >= kScoreThreshold);
    if (r > 0) CHECK(ours.score(r) <= ours.score(r - 1));
    classes.insert(ours.cls(r));
    std::array<float, 4> box{};
    for (std::size_t j = 0; j < 4; ++j) box[j] = ours.corner(r, j);
    pairs.insert({ours.cls(r), box});
    boxes.insert(box);
    // Ref's slot r in its group of equal scores.
    std::size_t partner = n;
    for (std::size_t o = 0; o < n; ++o) {
      if (used[o] || ours.score(o) != ref.score(r) || ours.cls(o) != ref.cls(r) || corner_diff(o, r) > kBoxTol) continue;
      partner = o;
      if (o == r) break;  // prefer the same slot
    }
    if (partner == n && ref.num() == static_cast<std::size_t>(kMaxDetections) && ref.score(r) == ref.score(n - 1)) {
      ++ties.at_cap;
      continue;
    }
    if (partner == n) {
      FAIL_CHECK("Arm NN's detection in slot " << r << " (class " << ref.cls(r) << ", score " << ref.score(r) << ", box "
                 << ref.corner(r, 0) << " " << ref.corner(r, 1) << " " << ref.corner(r, 2) << " " << ref.corner(r, 3)
                 << ") has no equal one among ours of that score");
      continue;
    }
    used[partner] = true;
    ties.reordered += partner != r;
    worst = std::max(worst, corner_diff(partner, r));
  }
  CHECK(pairs.size() == n);            // no detection repeated
  CHECK(boxes.size() >= (n + 1) / 2);  // not a few boxes repeated under many classes
  for (std::size_t s = ours.num(); s < static_cast<std::size_t>(kMaxDetections); ++s) {  // unused slots: zeros
    INFO("unused slot " << s);
    CHECK(ours.cls(s) == 0.0f);
    CHECK(ours.score(s) == 0.0f);
  }
  return worst;
}

double iou(const Detections& a, std::size_t i, const Detections& b, std::size_t j) {
  const double y0 = std::max(a.corner(i, 0), b.corner(j, 0)), x0 = std::max(a.corner(i, 1), b.corner(j, 1));
  const double y1 = std::min(a.corner(i, 2), b.corner(j, 2)), x1 = std::min(a.corner(i, 3), b.corner(j, 3));
  const double inter = std::max(0.0, y1 - y0) * std::max(0.0, x1 - x0);
  const double area_a = (a.corner(i, 2) - a.corner(i, 0)) * (a.corner(i, 3) - a.corner(i, 1));
  const double area_b = (b.corner(j, 2) - b.corner(j, 0)) * (b.corner(j, 3) - b.corner(j, 1));
  const double uni = area_a + area_b - inter;
  return uni > 0 ? inter / uni : 0;
}

// How many of ref's detections have one of ours (each used once) of the same class with IoU >=
// 0.98 and a score within 3 steps.
std::size_t matched(const Detections& ours, const Detections& ref) {
  std::vector<bool> used(ours.num(), false);
  std::size_t n = 0;
  for (std::size_t r = 0; r < ref.num(); ++r) {
    for (std::size_t o = 0; o < ours.num(); ++o) {
      if (used[o] || ours.cls(o) != ref.cls(r) || std::abs(ours.score(o) - ref.score(r)) > 3 * kScoreStep + 1e-6 ||
          iou(ours, o, ref, r) < 0.98) {
        continue;
      }
      used[o] = true;
      ++n;
      break;
    }
  }
  return n;
}

}  // namespace

TEST_CASE("TFLite: a uint8 SSD with TFLite_Detection_PostProcess agrees with TFLite's arithmetic and Arm NN CpuRef",
          "[.][tflite_ssd]") {
  const auto t_start = std::chrono::steady_clock::now();
  std::vector<Tensor> inputs;
  for (int i = 0; i < kInputs; ++i) {
    inputs.push_back(runtime::read_npy(ssd_file(fmt::format("input_{}.npy", i))));
    REQUIRE(inputs.back().dtype() == DType::UInt8);
    REQUIRE(inputs.back().shape() == Shape{1, 96, 96, 3});
  }

  // The heads: equal to TFLite's arithmetic, a few steps from Arm NN's.
  std::vector<std::vector<Tensor>> armnn_heads;
  {
    auto runner = runtime::create_runner(ssd_file("ssd_heads.tflite"), ssd_options());
    REQUIRE(runner->model().outputs.size() == 2);
    for (int i = 0; i < kInputs; ++i) {
      INFO("input " << i);
      const auto out = runner->run({inputs[static_cast<std::size_t>(i)]});
      REQUIRE(out[0].shape() == Shape{1, 540, 4});
      REQUIRE(out[1].shape() == Shape{1, 540, 5});
      for (std::size_t k = 0; k < 2; ++k) {
        const Tensor tfl = runtime::read_npy(ssd_file(fmt::format("tflite_heads_{}_{}.npy", i, k)));
        CHECK(uint8_diff(out[k], tfl).first == 0);
      }
      armnn_heads.push_back({runtime::read_npy(ssd_file(fmt::format("armnn_heads_{}_boxes.npy", i))),
                             runtime::read_npy(ssd_file(fmt::format("armnn_heads_{}_scores.npy", i)))});
      const auto [nb, wb] = uint8_diff(out[0], armnn_heads.back()[0]);
      const auto [ns, ws] = uint8_diff(out[1], armnn_heads.back()[1]);
      const std::string line = fmt::format(
          "TFLite SSD heads, input {}: equal to TFLite's arithmetic; vs Arm NN CpuRef: box encodings {} of {} differ "
          "(worst {} steps), scores {} of {} (worst {} steps)", i, nb, out[0].elements(), wb, ns, out[1].elements(), ws);
      fmt::print("{}\n", line);
      INFO(line);
      CHECK(wb <= 4);
      CHECK(ws <= 4);
      CHECK(static_cast<double>(nb + ns) <= 0.15 * static_cast<double>(out[0].elements() + out[1].elements()));
    }
  }

  for (const char* variant : {"fast", "regular"}) {
    INFO(variant << " NMS");
    std::set<float> classes;
    double worst_post = 0, worst_full = 0;
    std::size_t detections = 0, full_matched = 0, full_total = 0;
    TieCounts ties;
    {  // the post-processing alone on Arm NN's heads
      auto runner = runtime::create_runner(ssd_file(fmt::format("ssd_postprocess_{}.tflite", variant)), ssd_options());
      REQUIRE(runner->model().inputs.size() == 2);
      for (int i = 0; i < kInputs; ++i) {
        INFO("post-processing alone, Arm NN's heads of input " << i);
        const Detections ours{runner->run(armnn_heads[static_cast<std::size_t>(i)])};
        worst_post = std::max(worst_post, check_equal(ours, armnn_detections(fmt::format("armnn_post_{}_armnn_{}", variant, i)), classes, ties));
      }
    }
    auto runner = runtime::create_runner(ssd_file(fmt::format("ssd_{}.tflite", variant)), ssd_options());
    REQUIRE(runner->model().inputs.size() == 1);
    REQUIRE(runner->model().outputs.size() == 4);
    CHECK(runner->model().inputs[0].format == "NHWC");
    // Placement: one NPU program for the backbone, the heads, their reshapes and
    // concatenations and the LOGISTIC table; the post-processing on the host.
    const auto summary = compiler::summarize_placement(runner->compiled());
    INFO(summary.to_string());
    CHECK(summary.npu_programs == 1);
    CHECK(summary.host_macs == 0);
    REQUIRE(summary.host_steps.size() == 4);
    CHECK_THAT(summary.host_steps[0], Catch::StartsWith("Lower"));
    CHECK_THAT(summary.host_steps[1], Catch::StartsWith("Dequantize"));
    CHECK_THAT(summary.host_steps[2], Catch::StartsWith("Dequantize"));
    CHECK_THAT(summary.host_steps[3], Catch::StartsWith("furiosa::TFLiteDetectionPostProcess"));
    std::size_t convs = 0;
    for (const auto& e : runner->compiled().report.entries) {
      INFO(e.node_name << " " << e.op << " " << e.placement);
      if (e.op == "QLinearConv") ++convs;
      if (e.op == "QLinearConv" || e.op == "furiosa::Requantize" || e.op == "Concat") CHECK(e.placement == "npu");
      if (e.op == "furiosa::TFLiteDetectionPostProcess") CHECK(e.placement == "fallback");
    }
    CHECK(convs == 11);

    for (int i = 0; i < kInputs; ++i) {
      INFO("full model, input " << i);
      const auto t0 = std::chrono::steady_clock::now();
      const Detections ours{runner->run({inputs[static_cast<std::size_t>(i)]})};
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      // Against Arm NN's post-processing of TFLite's heads (equal to ours, checked above).
      worst_full = std::max(worst_full, check_equal(ours, armnn_detections(fmt::format("armnn_post_{}_tflite_{}", variant, i)), classes, ties));
      // Against Arm NN's full model.
      const Detections full = armnn_detections(fmt::format("armnn_{}_{}", variant, i));
      CHECK(ours.num() == full.num());
      const std::size_t m = matched(ours, full);
      CHECK(static_cast<double>(m) >= 0.9 * static_cast<double>(full.num()));
      full_matched += m;
      full_total += full.num();
      detections += ours.num();
      std::string cls;
      for (std::size_t s = 0; s < ours.num(); ++s) cls += fmt::format(" {}", ours.cls(s));
      fmt::print("TFLite SSD ({} NMS) input {}: {} detections, classes{}; furiosa run {:.1f} ms (simulator, functional)\n",
                 variant, i, ours.num(), cls, ms);
    }
    fmt::print("TFLite SSD ({} NMS) vs Arm NN CpuRef: post-processing on equal heads (alone on Arm NN's heads, and "
               "the full model against Arm NN's post-processing of TFLite's heads): equal in count, class and score, "
               "worst box corner difference {:.2g} and {:.2g}, {} slots ordered differently among equal scores, {} of the "
               "last score at max_detections chosen differently; "
               "Arm NN's full model (its own heads): {} of {} detections matched (same class, IoU >= 0.98, score "
               "within 3 steps); {} detections of ours\n", variant, worst_post, worst_full, ties.reordered, ties.at_cap, full_matched,
               full_total, detections);
    CHECK(classes.size() >= 2);
  }
  fmt::print("TFLite SSD comparison: {:.2f} s\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
}
