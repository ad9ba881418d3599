// Host operator library: Pad, Tile, Expand, Range, ConstantOfShape, TopK, ArgMax/ArgMin and NMS.
// Targeted cases of the host (CPU fallback) operator library for what the ONNX backend node tests
// (test_cpu_ops_onnx_conformance.cpp) do not cover: dtypes, attribute variants of older/newer
// opsets, errors.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cpu_ops_test_support.h"
#include "furiosa/core/error.h"
#include "furiosa/host/cpu_ops.h"

using namespace furiosa;
using compiler::Attribute;
using compiler::Node;
using namespace furiosa::test::cpu_ops_tests;

TEST_CASE("cpu ops: TopK, ArgMax and ArgMin ties and NaN", "[compiler][cpu_ops]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = f32({2, 4}, {3, 1, 3, 2, 5, nan, 5, 0});
  Tensor k = i64({1}, {2});
  auto top = host::run_cpu_op(make_node("TopK", 2, {}, 2), {&x, &k});
  REQUIRE(top.size() == 2);
  // Equal values: lower index first; NaN is the greatest value.
  CHECK(values<std::int64_t>(top[1]) == std::vector<std::int64_t>{0, 2, 1, 0});
  auto small = host::run_cpu_op(make_node("TopK", 2, {{"largest", std::int64_t{0}}}, 2), {&x, &k});
  CHECK(values<std::int64_t>(small[1]) == std::vector<std::int64_t>{1, 3, 3, 0});
  // int64 input, k from the opset-1 attribute, axis 0.
  Tensor xi = i64({3, 1}, {7, 9, 7});
  auto ti = host::run_cpu_op(
      make_node("TopK", 1, {{"k", std::int64_t{3}}, {"axis", std::int64_t{0}}}, 2), {&xi});
  CHECK(values<std::int64_t>(ti[0]) == std::vector<std::int64_t>{9, 7, 7});
  CHECK(values<std::int64_t>(ti[1]) == std::vector<std::int64_t>{1, 0, 2});
  // ArgMax: first of equal maxima, or the last with select_last_index; NaN wins (numpy).
  Node am = make_node("ArgMax", 1, {{"axis", std::int64_t{1}}, {"keepdims", std::int64_t{0}}});
  CHECK(values<std::int64_t>(run1(am, {&x})) == std::vector<std::int64_t>{0, 1});
  am.attributes["select_last_index"] = std::int64_t{1};
  CHECK(values<std::int64_t>(run1(am, {&x})) == std::vector<std::int64_t>{2, 1});
  Tensor u = make<std::uint8_t>(DType::UInt8, {4}, {4, 0, 9, 0});
  Tensor amin = run1(make_node("ArgMin", 1), {&u});
  CHECK(amin.shape() == Shape{1});
  CHECK(values<std::int64_t>(amin) == std::vector<std::int64_t>{1});
}

TEST_CASE("cpu ops: NonMaxSuppression with ties, thresholds and center boxes",
          "[compiler][cpu_ops]") {
  // Four boxes of one batch; boxes 0 and 1 overlap (IoU 0.6), 2 is apart, 3 duplicates 2.
  Tensor boxes = f32({1, 4, 4}, {0, 0, 1, 1, 0, 0.25f, 1, 1.25f, 0, 5, 1, 6, 1, 6, 0, 5});
  // Two classes. Class 0: boxes 0..3 scores with a tie between 0 and 2.
  Tensor scores = f32({1, 2, 4}, {0.9f, 0.95f, 0.9f, 0.9f, 0.1f, 0.2f, 0.3f, 0.05f});
  Tensor max_out = i64({1}, {3});
  Tensor iou = f32({1}, {0.5f});
  Tensor thr = f32({1}, {0.15f});
  Tensor sel = run1(make_node("NonMaxSuppression", 5), {&boxes, &scores, &max_out, &iou, &thr});
  REQUIRE(sel.dtype() == DType::Int64);
  // Class 0: 1 (0.95); 0 suppressed by 1; then the tie 2 (lower index first); 3 is 2's
  // duplicate (corners flipped) and suppressed. Class 1: only scores > 0.15: 2, then 1.
  CHECK(values<std::int64_t>(sel) == std::vector<std::int64_t>{0, 0, 1, 0, 0, 2, 0, 1, 2, 0, 1, 1});
  // IoU exactly at the threshold is kept (suppression needs IoU > threshold).
  Tensor iou6 = f32({1}, {0.6f});
  Tensor all = run1(make_node("NonMaxSuppression", 4), {&boxes, &scores, &max_out, &iou6});
  CHECK(all.shape()[0] >= 4);
  // max_output_boxes_per_class omitted: no output (the spec's default 0).
  Tensor none = run1(make_node("NonMaxSuppression", 2), {&boxes, &scores});
  CHECK(none.shape() == Shape{0, 3});
  // center_point_box = 1: [x_center, y_center, w, h].
  Tensor cb = f32({1, 2, 4}, {0.5f, 0.5f, 1, 1, 0.5f, 0.6f, 1, 1});
  Tensor cs = f32({1, 1, 2}, {0.5f, 0.6f});
  Tensor one = run1(make_node("NonMaxSuppression", 4, {{"center_point_box", std::int64_t{1}}}),
                    {&cb, &cs, &max_out, &iou});
  CHECK(values<std::int64_t>(one) == std::vector<std::int64_t>{0, 0, 1});
  // The output count depends on the scores: shape inference needs them as constants.
  host::CpuValueInfo bi{DType::Float32, {1, 4, 4}, &boxes}, si{DType::Float32, {1, 2, 4}, nullptr};
  CHECK_THROWS_AS(host::cpu_op_infer(make_node("NonMaxSuppression", 2), {&bi, &si}), Error);
}

TEST_CASE("cpu ops: Pad modes, Tile, Expand, Range and ConstantOfShape on integer dtypes",
          "[compiler][cpu_ops]") {
  Tensor x = make<std::uint8_t>(DType::UInt8, {3}, {1, 2, 3});
  Tensor pads = i64({2}, {4, 2});
  auto pad = [&](const std::string& mode) {
    return values<std::uint8_t>(run1(make_node("Pad", 2, {{"mode", mode}}), {&x, &pads}));
  };
  // Reflect beyond the dim's length repeats the mirror (numpy 'reflect').
  CHECK(pad("reflect") == std::vector<std::uint8_t>{1, 2, 3, 2, 1, 2, 3, 2, 1});
  CHECK(pad("edge") == std::vector<std::uint8_t>{1, 1, 1, 1, 1, 2, 3, 3, 3});
  // wrap is periodic (the spec's torus) also for pads longer than the dim.
  CHECK(pad("wrap") == std::vector<std::uint8_t>{3, 1, 2, 3, 1, 2, 3, 1, 2});
  Tensor cv = make<std::uint8_t>(DType::UInt8, {}, {9});
  CHECK(values<std::uint8_t>(run1(make_node("Pad", 3), {&x, &pads, &cv})) ==
        std::vector<std::uint8_t>{9, 9, 9, 9, 1, 2, 3, 9, 9});
  // Negative pads crop; opset-18 axes select the padded dims.
  Tensor m = make<std::int8_t>(DType::Int8, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor crop = i64({2}, {-1, 1});
  Tensor axes = i64({1}, {-1});
  Node pa = make_node("Pad", 4);
  pa.inputs[2] = -1;
  CHECK(values<std::int8_t>(run1(pa, {&m, &crop, nullptr, &axes})) ==
        std::vector<std::int8_t>{2, 3, 0, 5, 6, 0});
  // Tile and Expand on int64; Range on int64 with a negative delta; ConstantOfShape with int8.
  Tensor t = i64({1, 2}, {7, 8});
  Tensor reps = i64({2}, {2, 2});
  CHECK(values<std::int64_t>(run1(make_node("Tile", 2), {&t, &reps})) ==
        std::vector<std::int64_t>{7, 8, 7, 8, 7, 8, 7, 8});
  Tensor shape = i64({3}, {2, 1, 2});
  Tensor e = run1(make_node("Expand", 2), {&t, &shape});
  CHECK(e.shape() == Shape{2, 1, 2});
  Tensor r0 = i64({}, {10}), r1 = i64({}, {3}), rd = i64({}, {-3});
  CHECK(values<std::int64_t>(run1(make_node("Range", 3), {&r0, &r1, &rd})) ==
        std::vector<std::int64_t>{10, 7, 4});
  Tensor fill = make<std::int8_t>(DType::Int8, {1}, {-5});
  Tensor dims = i64({2}, {2, 2});
  Tensor c = run1(make_node("ConstantOfShape", 1, {{"value", fill}}), {&dims});
  CHECK(c.dtype() == DType::Int8);
  CHECK(values<std::int8_t>(c) == std::vector<std::int8_t>{-5, -5, -5, -5});
  // Dropout's mask output would be bool: refused with the reason.
  std::string why;
  CHECK_FALSE(host::cpu_op_supported(make_node("Dropout", 1, {}, 2), {DType::Float32}, &why));
  CHECK_THAT(why, Catch::Contains("mask"));
}
