// A small but real-shaped uint8 SSD TFLite model (tests/runtime/make_tflite_ssd.cpp: MobileNet-
// style backbone, two feature maps, box and class heads, RESHAPE + CONCATENATION, LOGISTIC, SSD
// anchors, the custom TFLite_Detection_PostProcess) through the whole stack against the TFLite
// peer (TensorFlow Lite 2.14's reference kernels and its TFLite_Detection_PostProcess,
// tflite_peer.h). The CTest fixture tflite_ssd_model writes the models and three seeded inputs
// into FURIOSA_TFLITE_SSD_DIR; this test is hidden from the default Catch2 run ([.]) and runs as
// the CTest test tflite_ssd_vs_tflite after it. Without the files or the peer it fails (it
// never skips).
//
// What is compared:
//  - the heads (the post-processing's inputs: uint8 box encodings and LOGISTIC scores), byte for
//    byte;
//  - the detections of the full model on the three inputs, fast NMS with one and with three
//    classes per detection and regular NMS, and of the post-processing alone on seeded random
//    heads whose scores repeat often (uint8 scores of few distinct values): the number of
//    detections, and the (class, score, box) entries of the used slots, exactly. Equal scores
//    may come in any order (TFLite sorts them with std::partial_sort, which does not say in what
//    order equal keys end up; this runtime puts the lower anchor index first), so the entries are
//    compared as multisets and the scores slot by slot. When max_detections cuts through a run
//    of equal scores, which of them are kept is that order too: those entries are compared by
//    score only (the count is printed). The printed line says how many slots were equal in place;
//  - placement: one NPU program with every convolution, reshape, concatenation and the LOGISTIC
//    table; on the host only the input's Lower, the Dequantize steps of the post-processing's
//    two inputs and TFLiteDetectionPostProcess.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "test_support.h"
#include "tflite_peer.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

constexpr int kInputs = 3;
constexpr int kMaxDetections = 16;
constexpr float kScoreThreshold = 0.6f;  // the models' nms_score_threshold
constexpr std::int64_t kAnchors = 540, kClasses = 4;

fs::path ssd_file(const std::string& name) {
  const fs::path p = fs::path(FURIOSA_TFLITE_SSD_DIR) / name;
  if (!fs::exists(p)) {
    FAIL("missing " << p.string() << ": run the CTest fixture tflite_ssd_model (make-tflite-ssd)");
  }
  return p;
}

// The four outputs of TFLite_Detection_PostProcess: boxes [1, S, 4], classes [1, S], scores
// [1, S], num [1] (float32), S = max_detections x max_classes_per_detection slots.
struct Detections {
  std::vector<Tensor> t;
  std::size_t num() const { return static_cast<std::size_t>(t[3].as<float>()[0]); }
  std::size_t slots() const { return static_cast<std::size_t>(t[1].elements()); }
  float cls(std::size_t s) const { return t[1].as<float>()[s]; }
  float score(std::size_t s) const { return t[2].as<float>()[s]; }
  std::array<float, 4> box(std::size_t s) const {
    const auto b = t[0].as<float>();
    return {b[4 * s], b[4 * s + 1], b[4 * s + 2], b[4 * s + 3]};
  }
};

// What compare() saw besides its assertions.
struct Seen {
  std::size_t detections = 0, slots = 0, in_place = 0, at_cap = 0;
  std::set<float> classes;
};

// Equal detections (see the header): count, scores slot by slot (one class per detection) or
// per detection (several: the slots of a detection hold its classes by decreasing score), and
// the multiset of (score, class, box) entries, exactly, except entries of the last score when the
// output is full.
void compare(const Detections& ours, const Detections& ref, int classes_per_detection, Seen& seen) {
  REQUIRE(ours.t.size() == 4);
  for (std::size_t k = 0; k < 4; ++k) {
    REQUIRE(ours.t[k].dtype() == DType::Float32);
    REQUIRE(ours.t[k].shape() == ref.t[k].shape());
  }
  REQUIRE(ours.num() == ref.num());
  CHECK(ours.num() > 3);
  const auto per = static_cast<std::size_t>(classes_per_detection);
  const std::size_t used = ours.num() * per;
  const bool full = ours.num() == ours.slots() / per;
  // The score a full output's last kept detection has: entries of that score may differ.
  const float cut = full ? ref.score((ours.num() - 1) * per) : -1.0f;
  using Entry = std::tuple<float, float, std::array<float, 4>>;
  std::multiset<Entry> a, b;
  for (std::size_t s = 0; s < used; ++s) {
    INFO("slot " << s);
    if (s % per == 0) CHECK(ours.score(s) == ref.score(s));
    if (s % per == 0) CHECK(ours.score(s) >= kScoreThreshold);
    seen.in_place +=
        ours.score(s) == ref.score(s) && ours.cls(s) == ref.cls(s) && ours.box(s) == ref.box(s);
    seen.classes.insert(ours.cls(s));
    const float lead_ours = ours.score(s - s % per), lead_ref = ref.score(s - s % per);
    if (lead_ours != cut) a.insert({ours.score(s), ours.cls(s), ours.box(s)});
    if (lead_ref != cut) b.insert({ref.score(s), ref.cls(s), ref.box(s)});
    seen.at_cap += lead_ref == cut;
  }
  CHECK(a.size() == b.size());
  CHECK(a == b);
  // Unused slots: TFLite's kernel leaves them as they were (uninitialized memory); this runtime
  // writes zeros.
  for (std::size_t s = used; s < ours.slots(); ++s) {
    INFO("unused slot " << s);
    CHECK(ours.score(s) == 0.0f);
    CHECK(ours.cls(s) == 0.0f);
  }
  seen.detections += ours.num();
  seen.slots += used;
}

// Seeded heads for the post-processing alone: box encodings uniform over the uint8 range, and
// scores of few distinct values (most below the threshold, ties common above it).
std::vector<Tensor> seeded_heads(unsigned seed) {
  std::mt19937 rng(seed);
  Tensor boxes(DType::UInt8, {1, kAnchors, 4}), scores(DType::UInt8, {1, kAnchors, kClasses + 1});
  for (auto& v : boxes.as<std::uint8_t>()) v = static_cast<std::uint8_t>(rng() % 256);
  // x 1/256: three levels below the threshold (0.6), five above it for one entry in 150 (about
  // 14 of the 2,160, so that max_detections rarely cuts a run of equal scores).
  const std::array<std::uint8_t, 8> levels = {10, 60, 120, 160, 180, 200, 230, 250};
  for (auto& v : scores.as<std::uint8_t>())
    v = rng() % 150 != 0 ? levels[rng() % 3] : levels[3 + rng() % 5];
  return {boxes, scores};
}

std::vector<Tensor> output_like(int classes_per_detection) {
  const std::int64_t slots = kMaxDetections * classes_per_detection;
  return {Tensor(DType::Float32, {1, slots, 4}), Tensor(DType::Float32, {1, slots}),
          Tensor(DType::Float32, {1, slots}), Tensor(DType::Float32, {1})};
}

}  // namespace

TEST_CASE(
    "TFLite peer: a uint8 SSD with TFLite_Detection_PostProcess gives TensorFlow Lite's detections",
    "[.][tflite_ssd]") {
  const auto t_start = std::chrono::steady_clock::now();
  std::vector<Tensor> inputs;
  for (int i = 0; i < kInputs; ++i) {
    inputs.push_back(runtime::read_npy(ssd_file(fmt::format("input_{}.npy", i))));
    REQUIRE(inputs.back().dtype() == DType::UInt8);
    REQUIRE(inputs.back().shape() == Shape{1, 96, 96, 3});
  }

  {  // the heads, byte for byte
    const fs::path model = ssd_file("ssd_heads.tflite");
    auto runner = runtime::create_runner(model, test::peer_runner_options());
    REQUIRE(runner->model().outputs.size() == 2);
    for (int i = 0; i < kInputs; ++i) {
      INFO("heads, input " << i);
      const auto out = runner->run({inputs[static_cast<std::size_t>(i)]});
      REQUIRE(out[0].shape() == Shape{1, kAnchors, 4});
      REQUIRE(out[1].shape() == Shape{1, kAnchors, kClasses + 1});
      const auto ref = test::run_tflite_peer(model, {inputs[static_cast<std::size_t>(i)]}, out);
      for (std::size_t k = 0; k < 2; ++k) {
        CHECK(std::memcmp(out[k].bytes().data(), ref[k].bytes().data(), out[k].size_bytes()) == 0);
        CHECK(test::distinct(out[k]) > 16);
      }
    }
  }

  struct Variant {
    const char* name;
    const char* file;
    int classes_per_detection;
  };
  for (const Variant v :
       {Variant{"fast NMS", "ssd_fast.tflite", 1}, Variant{"regular NMS", "ssd_regular.tflite", 1},
        Variant{"fast NMS with 3 classes per detection", "ssd_fast_multiclass.tflite", 3}}) {
    INFO(v.name);
    const fs::path model = ssd_file(v.file);
    auto runner = runtime::create_runner(model, test::peer_runner_options());
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
      if (e.op == "QLinearConv" || e.op == "furiosa::Requantize" || e.op == "Concat")
        CHECK(e.placement == "npu");
      if (e.op == "furiosa::TFLiteDetectionPostProcess") CHECK(e.placement == "fallback");
    }
    CHECK(convs == 11);
    Seen seen;
    for (int i = 0; i < kInputs; ++i) {
      INFO("full model, input " << i);
      const auto& x = inputs[static_cast<std::size_t>(i)];
      const Detections ours{runner->run({x})};
      compare(ours,
              Detections{test::run_tflite_peer(model, {x}, output_like(v.classes_per_detection))},
              v.classes_per_detection, seen);
    }
    fmt::print(
        "TFLite SSD, {}, vs TensorFlow Lite 2.14 on {} inputs: {} detections in {} slots, equal "
        "(class, score, "
        "box) entries; {} slots equal in place, {} entries of the last score of a full output "
        "compared by "
        "score only; classes seen {}\n",
        v.name, kInputs, seen.detections, seen.slots, seen.in_place, seen.at_cap,
        seen.classes.size());
    CHECK(seen.classes.size() >= 2);
  }

  for (const auto& [name, file] : {std::pair{"fast NMS", "ssd_postprocess_fast.tflite"},
                                   std::pair{"regular NMS", "ssd_postprocess_regular.tflite"}}) {
    INFO("post-processing alone, " << name);
    const fs::path model = ssd_file(file);
    auto runner = runtime::create_runner(model, test::peer_runner_options());
    REQUIRE(runner->model().inputs.size() == 2);
    Seen seen;
    for (unsigned seed = 1; seed <= 4; ++seed) {
      INFO("seeded heads " << seed);
      const auto heads = seeded_heads(seed);
      const Detections ours{runner->run(heads)};
      compare(ours, Detections{test::run_tflite_peer(model, heads, output_like(1))}, 1, seen);
    }
    fmt::print(
        "TFLite SSD post-processing alone, {}, vs TensorFlow Lite 2.14 on 4 seeded heads: {} "
        "detections, equal "
        "(class, score, box) entries; {} slots equal in place, {} entries of the last score "
        "compared by score "
        "only\n",
        name, seen.detections, seen.in_place, seen.at_cap);
  }
  fmt::print("TFLite SSD comparison: {:.2f} s\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
}
