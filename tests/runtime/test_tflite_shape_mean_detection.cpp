// TFLite: shape operators, STRIDED_SLICE, MEAN and TFLite_Detection_PostProcess.
// TFLite models through the whole stack (importer, compiler, simulator, runtime): shape operators
// (SHAPE, STRIDED_SLICE, PACK) folded at compile time and STRIDED_SLICE on data with its masks,
// uint8 MEAN against TFLite's QuantizedMeanOrSum arithmetic, and the custom
// TFLite_Detection_PostProcess (fast and regular NMS) on hand-computed cases.
#include <flatbuffers/flexbuffers.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/compiler/tflite_import.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/from_graph.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"
#include "tflite_subset_generated.h"
#include "tflite_test_support.h"
#include "tflite_writer.h"

using namespace furiosa;
using namespace furiosa::test::tflite_tests;
namespace fs = std::filesystem;
namespace fb = furiosa::tflite_fb;

// ---- shape operators, MEAN, TFLite_Detection_PostProcess ---------------------------------------

// clang-format off
TEST_CASE("TFLite: SHAPE -> STRIDED_SLICE -> PACK folds, and STRIDED_SLICE on data follows TFLite's masks",
          "[tflite][shape]") {
  // clang-format on
  TfliteWriter w;
  auto& b = w.builder();
  const QSpec q{{0.1f}, {0}};
  auto ints = [&](const std::string& name, const std::vector<std::int32_t>& v,
                  std::vector<std::int32_t> shape) {
    const auto bytes = bytes32(v);
    return w.tensor(name, fb::TensorType::INT32, std::move(shape), nullptr, &bytes);
  };
  const int x = w.tensor("x", fb::TensorType::UINT8, {2, 3, 4}, &q);
  // tf.reshape(x, [tf.shape(x)[0], -1])
  const int shape = w.tensor("shape", fb::TensorType::INT32, {3});
  const int dim0 = w.tensor("dim0", fb::TensorType::INT32, {});
  const int packed = w.tensor("packed", fb::TensorType::INT32, {2});
  const int r = w.tensor("r", fb::TensorType::UINT8, {2, 12}, &q);
  w.op(77, {x}, {shape}, fb::BuiltinOptions::ShapeOptions,
       fb::CreateShapeOptions(b, fb::TensorType::INT32).Union());
  w.op(45, {shape, ints("b0", {0}, {1}), ints("e0", {1}, {1}), ints("s0", {1}, {1})}, {dim0},
       fb::BuiltinOptions::StridedSliceOptions,
       fb::CreateStridedSliceOptions(b, 0, 0, 0, 0, 1).Union());
  w.op(83, {dim0, ints("minus1", {-1}, {})}, {packed}, fb::BuiltinOptions::PackOptions,
       fb::CreatePackOptions(b, 2, 0).Union());
  w.op(22, {x, packed}, {r});
  // x[:, -1:0:-1... ] cases: begin_mask/end_mask on dim 0, a negative stride on dim 1, stride 2.
  const int s1 = w.tensor("s1", fb::TensorType::UINT8, {2, 2, 2}, &q);
  w.op(45,
       {x, ints("b1", {1, -1, 0}, {3}), ints("e1", {0, 0, 4}, {3}), ints("st1", {1, -1, 2}, {3})},
       {s1}, fb::BuiltinOptions::StridedSliceOptions,
       fb::CreateStridedSliceOptions(b, 0b001, 0b001, 0, 0, 0).Union());
  // x[-1, :, ::-1]: shrink dim 0 at -1, dim 1 whole by the masks, dim 2 reversed to the start.
  const int s2 = w.tensor("s2", fb::TensorType::UINT8, {3, 4}, &q);
  w.op(45,
       {x, ints("b2", {-1, 0, -1}, {3}), ints("e2", {0, 0, 0}, {3}), ints("st2", {1, 1, -1}, {3})},
       {s2}, fb::BuiltinOptions::StridedSliceOptions,
       fb::CreateStridedSliceOptions(b, 0b010, 0b110, 0, 0, 0b001).Union());
  const fs::path path = write_model("shape_ops.tflite", w.finish({x}, {r, s1, s2}));

  auto runner = runtime::create_runner(path, test_options());
  Tensor input(DType::UInt8, {2, 3, 4});
  for (std::size_t i = 0; i < 24; ++i)
    input.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(10 * i + 3);
  const auto out = runner->run({input});
  REQUIRE(out.size() == 3);
  auto X = [&](int a, int bb, int c) {
    return static_cast<int>(
        input.as<std::uint8_t>()[static_cast<std::size_t>((a * 3 + bb) * 4 + c)]);
  };
  REQUIRE(out[0].shape() == Shape{2, 12});
  CHECK(std::equal(out[0].as<std::uint8_t>().begin(), out[0].as<std::uint8_t>().end(),
                   input.as<std::uint8_t>().begin()));
  REQUIRE(out[1].shape() == Shape{2, 2, 2});
  for (int a = 0; a < 2; ++a)
    for (int bb = 0; bb < 2; ++bb)
      for (int c = 0; c < 2; ++c) {
        INFO("s1 at " << a << "," << bb << "," << c);
        CHECK(static_cast<int>(
                  out[1].as<std::uint8_t>()[static_cast<std::size_t>((a * 2 + bb) * 2 + c)]) ==
              X(a, 2 - bb, 2 * c));
      }
  REQUIRE(out[2].shape() == Shape{3, 4});
  for (int bb = 0; bb < 3; ++bb)
    for (int c = 0; c < 4; ++c)
      CHECK(static_cast<int>(out[2].as<std::uint8_t>()[static_cast<std::size_t>(bb * 4 + c)]) ==
            X(1, bb, 3 - c));
  // The shape chain is evaluated at compile time: no host step, "constant" in the report.
  std::size_t folded = 0;
  for (const auto& e : runner->compiled().report.entries) {
    if (e.node_name.starts_with("STRIDED_SLICE#1") || e.node_name.starts_with("PACK#2")) {
      CHECK(e.placement == std::string("constant"));
      ++folded;
    }
  }
  CHECK(folded >= 2);
  for (const auto& line : compiler::summarize_placement(runner->compiled()).host_steps) {
    CHECK_THAT(line, !Catch::Contains("STRIDED_SLICE#1") && !Catch::Contains("PACK#2") &&
                         !Catch::Contains("SHAPE#0"));
  }
}

TEST_CASE("TFLite: STRIDED_SLICE with an ellipsis or new axis mask is refused naming the operator",
          "[tflite][errors]") {
  TfliteWriter w;
  const auto v = bytes32({0, 0});
  const int x = w.tensor("x", fb::TensorType::UINT8, {2, 3}, nullptr);
  const int bgn = w.tensor("b", fb::TensorType::INT32, {2}, nullptr, &v);
  const int end = w.tensor("e", fb::TensorType::INT32, {2}, nullptr, &v);
  const int st = w.tensor("s", fb::TensorType::INT32, {2}, nullptr, &v);
  const int y = w.tensor("y", fb::TensorType::UINT8, {2, 3}, nullptr);
  w.op(45, {x, bgn, end, st}, {y}, fb::BuiltinOptions::StridedSliceOptions,
       fb::CreateStridedSliceOptions(w.builder(), 0, 0, 1, 0, 0).Union());
  const fs::path path = write_model("strided_slice_ellipsis.tflite", w.finish({x}, {y}));
  try {
    compiler::import_tflite(path);
    FAIL("ellipsis_mask was accepted");
  } catch (const Error& err) {
    CHECK(err.code() == ErrorCode::UnsupportedOperator);
    CHECK_THAT(err.message(),
               Catch::Contains("operator 0 (STRIDED_SLICE)") && Catch::Contains("ellipsis_mask 1"));
  }
}

namespace {

// TFLite's QuantizeMultiplier (frexp, significand * 2^31 rounded half away from zero).
std::pair<std::int32_t, int> quantize_multiplier_ref(double m) {
  int shift = 0;
  const double q = std::frexp(m, &shift);
  auto q_fixed = static_cast<std::int64_t>(std::round(q * static_cast<double>(1LL << 31)));
  if (q_fixed == (1LL << 31)) {
    q_fixed /= 2;
    ++shift;
  }
  return {static_cast<std::int32_t>(q_fixed), shift};
}

// TFLite's MultiplyByQuantizedMultiplier, written out with gemmlowp's two roundings.
std::int32_t mbqm_ref(std::int32_t x, std::int32_t mult, int shift) {
  const int left = std::max(shift, 0), right = std::max(-shift, 0);
  const std::int64_t ab = static_cast<std::int64_t>(x * (1 << left)) * mult;
  const std::int64_t nudge = ab >= 0 ? (1LL << 30) : (1 - (1LL << 30));
  const auto high = static_cast<std::int32_t>((ab + nudge) / (1LL << 31));
  const std::int32_t mask = (1 << right) - 1;  // right <= 30 in these tests
  const std::int32_t remainder = high & mask;
  const std::int32_t threshold = (mask >> 1) + (high < 0 ? 1 : 0);
  return (high >> right) + (remainder > threshold ? 1 : 0);
}

// reference_ops::QuantizedMeanOrSum (compute_sum false) of one sum of `count` uint8 values.
int tflite_mean_ref(std::int32_t sum, std::int32_t count, double in_scale, int in_zp,
                    double out_scale, int out_zp) {
  auto [mult, shift] = quantize_multiplier_ref(in_scale / out_scale);
  int s = 63 - __builtin_clzll(static_cast<unsigned long long>(count));
  s = std::min(s, 32);
  s = std::min(s, 31 + shift);
  mult = static_cast<std::int32_t>((static_cast<std::int64_t>(mult) << s) / count);
  shift -= s;
  const int v = mbqm_ref(sum - in_zp * count, mult, shift) + out_zp;
  return std::clamp(v, 0, 255);
}

}  // namespace

TEST_CASE("TFLite: uint8 MEAN matches TFLite's QuantizedMeanOrSum, keep_dims and rescaling",
          "[tflite][mean]") {
  TfliteWriter w;
  auto& b = w.builder();
  const QSpec qin{{0.5f}, {10}}, qout{{0.3f}, {3}};
  const auto hw = bytes32({1, 2}), last = bytes32({-1});
  const int x = w.tensor("x", fb::TensorType::UINT8, {1, 2, 2, 3}, &qin);
  const int a_hw = w.tensor("axes_hw", fb::TensorType::INT32, {2}, nullptr, &hw);
  const int a_last = w.tensor("axes_last", fb::TensorType::INT32, {1}, nullptr, &last);
  const int y1 = w.tensor("y1", fb::TensorType::UINT8, {1, 1, 1, 3}, &qin);  // same parameters
  const int y2 = w.tensor("y2", fb::TensorType::UINT8, {1, 3}, &qout);       // rescaled
  const int y3 = w.tensor("y3", fb::TensorType::UINT8, {1, 2, 2}, &qout);
  w.op(40, {x, a_hw}, {y1}, fb::BuiltinOptions::ReducerOptions,
       fb::CreateReducerOptions(b, true).Union());
  w.op(40, {x, a_hw}, {y2}, fb::BuiltinOptions::ReducerOptions,
       fb::CreateReducerOptions(b, false).Union());
  w.op(40, {x, a_last}, {y3}, fb::BuiltinOptions::ReducerOptions,
       fb::CreateReducerOptions(b, false).Union());
  const fs::path path = write_model("mean.tflite", w.finish({x}, {y1, y2, y3}));

  auto runner = runtime::create_runner(path, test_options());
  // Channel 0: values - zp = 1, 2, 3, 0 (mean 1.5, a tie); channel 1: -1, -2, -3, 0 (-1.5);
  // channel 2: spread values.
  Tensor input(DType::UInt8, {1, 2, 2, 3});
  const std::array<std::array<int, 3>, 4> px = {
      {{11, 9, 200}, {12, 8, 3}, {13, 7, 77}, {10, 10, 254}}};
  for (std::size_t p = 0; p < 4; ++p)
    for (std::size_t c = 0; c < 3; ++c)
      input.as<std::uint8_t>()[p * 3 + c] = static_cast<std::uint8_t>(px[p][c]);
  const auto out = runner->run({input});
  REQUIRE(out.size() == 3);
  REQUIRE(out[0].shape() == Shape{1, 1, 1, 3});
  REQUIRE(out[1].shape() == Shape{1, 3});
  REQUIRE(out[2].shape() == Shape{1, 2, 2});
  // Equal parameters: the integer mean rounded half away from zero (TFLite's fixed point).
  CHECK(static_cast<int>(out[0].as<std::uint8_t>()[0]) == 12);  // 10 + round(1.5)
  CHECK(static_cast<int>(out[0].as<std::uint8_t>()[1]) == 8);   // 10 + round(-1.5)
  for (std::size_t c = 0; c < 3; ++c) {
    int sum = 0;
    for (std::size_t p = 0; p < 4; ++p) sum += px[p][c];
    INFO("channel " << c);
    CHECK(static_cast<int>(out[0].as<std::uint8_t>()[c]) ==
          tflite_mean_ref(sum, 4, 0.5f, 10, 0.5f, 10));
    CHECK(static_cast<int>(out[1].as<std::uint8_t>()[c]) ==
          tflite_mean_ref(sum, 4, 0.5f, 10, 0.3f, 3));
  }
  CHECK(static_cast<int>(out[1].as<std::uint8_t>()[2]) ==
        209);  // (133.5 - 10) * 0.5 / 0.3 + 3 = 208.8
  for (std::size_t p = 0; p < 4; ++p) {
    const int sum = px[p][0] + px[p][1] + px[p][2];
    CHECK(static_cast<int>(out[2].as<std::uint8_t>()[p]) ==
          tflite_mean_ref(sum, 3, 0.5f, 10, 0.3f, 3));
  }
  std::size_t host = 0;
  for (const auto& e : runner->compiled().report.entries)
    host += e.op == "furiosa::QuantizedMean" && e.placement == "fallback";
  CHECK(host == 3);
}

namespace {

struct DppCase {
  bool regular = false;
  int max_detections = 5, max_classes_per_detection = 1;
};

// 4 anchors (yc, xc, h, w), zero box encodings (each box is its anchor), 2 classes after the
// background column, uint8 class predictions with scale 0.01: anchors 0 and 1 overlap (IoU
// 0.905), anchor 2 has a high background score, anchor 3 scores under the threshold.
fs::path dpp_model(const DppCase& k, const std::string& name) {
  TfliteWriter w;
  const std::vector<float> anchors = {0.5f, 0.5f, 0.2f, 0.2f, 0.51f, 0.5f, 0.2f, 0.2f,
                                      0.2f, 0.2f, 0.1f, 0.1f, 0.8f,  0.8f, 0.1f, 0.1f};
  const auto anchor_bytes = raw_bytes(anchors);
  const QSpec qs{{0.01f}, {0}};
  const int boxes = w.tensor("boxes", fb::TensorType::FLOAT32, {1, 4, 4});
  const int scores = w.tensor("scores", fb::TensorType::UINT8, {1, 4, 3}, &qs);
  const int anc = w.tensor("anchors", fb::TensorType::FLOAT32, {4, 4}, nullptr, &anchor_bytes);
  const int n = k.max_detections * k.max_classes_per_detection;
  const int ob = w.tensor("detection_boxes", fb::TensorType::FLOAT32, {1, n, 4});
  const int oc = w.tensor("detection_classes", fb::TensorType::FLOAT32, {1, n});
  const int os = w.tensor("detection_scores", fb::TensorType::FLOAT32, {1, n});
  const int on = w.tensor("num_detections", fb::TensorType::FLOAT32, {1});
  flexbuffers::Builder fbb;
  fbb.Map([&] {
    fbb.Int("max_detections", k.max_detections);
    fbb.Int("max_classes_per_detection", k.max_classes_per_detection);
    fbb.Int("detections_per_class", 10);
    fbb.Bool("use_regular_nms", k.regular);
    fbb.Float("nms_score_threshold", 0.3f);
    fbb.Float("nms_iou_threshold", 0.5f);
    fbb.Int("num_classes", 2);
    fbb.Float("y_scale", 10.0f);
    fbb.Float("x_scale", 10.0f);
    fbb.Float("h_scale", 5.0f);
    fbb.Float("w_scale", 5.0f);
  });
  fbb.Finish();
  w.custom_op("TFLite_Detection_PostProcess", {boxes, scores, anc}, {ob, oc, os, on},
              fbb.GetBuffer());
  return write_model(name, w.finish({boxes, scores}, {ob, oc, os, on}));
}

// One detection expected in an output slot: anchor, class, quantized score.
struct Expect {
  int anchor, cls, q;
};

void check_dpp(const std::vector<Tensor>& out, int slots,
               const std::vector<std::pair<int, Expect>>& expected, int num) {
  const std::vector<std::array<float, 4>> corners = {{0.4f, 0.4f, 0.6f, 0.6f},
                                                     {0.41f, 0.4f, 0.61f, 0.6f},
                                                     {0.15f, 0.15f, 0.25f, 0.25f},
                                                     {0.75f, 0.75f, 0.85f, 0.85f}};
  REQUIRE(out.size() == 4);
  REQUIRE(out[0].shape() == Shape{1, slots, 4});
  REQUIRE(out[1].shape() == Shape{1, slots});
  REQUIRE(out[3].shape() == Shape{1});
  CHECK(out[3].as<float>()[0] == static_cast<float>(num));
  std::vector<bool> filled(static_cast<std::size_t>(slots), false);
  for (const auto& [slot, e] : expected) {
    const auto s = static_cast<std::size_t>(slot);
    filled[s] = true;
    INFO("slot " << slot);
    CHECK(out[1].as<float>()[s] == static_cast<float>(e.cls));
    CHECK(out[2].as<float>()[s] == static_cast<float>(e.q) * 0.01f);
    for (std::size_t j = 0; j < 4; ++j)
      CHECK(std::abs(out[0].as<float>()[4 * s + j] -
                     corners[static_cast<std::size_t>(e.anchor)][j]) < 1e-6f);
  }
  for (std::size_t s = 0; s < filled.size(); ++s) {  // padding: zeros
    if (filled[s]) continue;
    INFO("padding slot " << s);
    CHECK(out[1].as<float>()[s] == 0.0f);
    CHECK(out[2].as<float>()[s] == 0.0f);
    for (std::size_t j = 0; j < 4; ++j) CHECK(out[0].as<float>()[4 * s + j] == 0.0f);
  }
}

std::vector<Tensor> run_dpp(const fs::path& path) {
  auto runner = runtime::create_runner(path, test_options());
  Tensor boxes(DType::Float32, {1, 4, 4});
  std::fill(boxes.as<float>().begin(), boxes.as<float>().end(), 0.0f);
  Tensor scores(DType::UInt8, {1, 4, 3});
  const std::vector<std::uint8_t> s = {0, 90, 10, 0, 80, 70, 95, 5, 60, 0, 20, 25};
  std::copy(s.begin(), s.end(), scores.as<std::uint8_t>().begin());
  return runner->run({boxes, scores});
}

}  // namespace

TEST_CASE("TFLite: TFLite_Detection_PostProcess, fast and regular NMS on hand-computed cases",
          "[tflite][detection]") {
  SECTION("regular NMS: per class; anchor 1 suppressed in class 0, kept in class 1") {
    const auto out = run_dpp(dpp_model({true, 5, 1}, "dpp_regular.tflite"));
    check_dpp(out, 5, {{0, {0, 0, 90}}, {1, {1, 1, 70}}, {2, {2, 1, 60}}}, 3);
  }
  SECTION("fast NMS, one class per detection: class-agnostic on each anchor's best score") {
    const auto out = run_dpp(dpp_model({false, 5, 1}, "dpp_fast.tflite"));
    check_dpp(out, 5, {{0, {0, 0, 90}}, {1, {2, 1, 60}}}, 2);
  }
  SECTION("fast NMS, two classes per detection: an anchor's classes in its two slots") {
    const auto out = run_dpp(dpp_model({false, 3, 2}, "dpp_fast2.tflite"));
    check_dpp(out, 6, {{0, {0, 0, 90}}, {1, {0, 1, 10}}, {2, {2, 1, 60}}, {3, {2, 0, 5}}}, 2);
  }
  SECTION("max_detections caps the regular result") {
    const auto out = run_dpp(dpp_model({true, 2, 1}, "dpp_regular2.tflite"));
    check_dpp(out, 2, {{0, {0, 0, 90}}, {1, {1, 1, 70}}}, 2);
  }
}
