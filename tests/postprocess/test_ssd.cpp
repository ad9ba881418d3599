// SSD post-processing (furiosa/postprocess/ssd.h) on hand-computed cases.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/postprocess/ssd.h"

using namespace furiosa::postprocess;
using Catch::Matchers::WithinAbs;

namespace {
void check_box(const Box& b, float ymin, float xmin, float ymax, float xmax) {
  CHECK_THAT(b.ymin, WithinAbs(ymin, 1e-6));
  CHECK_THAT(b.xmin, WithinAbs(xmin, 1e-6));
  CHECK_THAT(b.ymax, WithinAbs(ymax, 1e-6));
  CHECK_THAT(b.xmax, WithinAbs(xmax, 1e-6));
}
}  // namespace

TEST_CASE("decode_box applies the variances 0.1/0.1/0.2/0.2 against the anchor", "[postprocess]") {
  const Anchor a{.ycenter = 0.5f, .xcenter = 0.5f, .height = 0.2f, .width = 0.4f};
  // ty 1 -> yc 0.5 + 0.1 * 0.2 = 0.52; tx -2 -> xc 0.5 - 0.2 * 0.4 = 0.42; th 0 -> h 0.2;
  // tw = ln(2) / 0.2 -> w = 2 * 0.4 = 0.8.
  const float e[4] = {1.0f, -2.0f, 0.0f, std::log(2.0f) / 0.2f};
  check_box(decode_box(e, a), 0.42f, 0.02f, 0.62f, 0.82f);
  // Zero encodings give the anchor itself.
  const float z[4] = {0, 0, 0, 0};
  check_box(decode_box(z, a), 0.4f, 0.3f, 0.6f, 0.7f);
  // Other variances: ty 1 with variance 0.5 moves by half the anchor height.
  check_box(decode_box(z, a, {.y = 0.5f}), 0.4f, 0.3f, 0.6f, 0.7f);
  const float ty[4] = {1.0f, 0, 0, 0};
  check_box(decode_box(ty, a, {.y = 0.5f}), 0.5f, 0.3f, 0.7f, 0.7f);
}

TEST_CASE("decode_boxes checks the sizes", "[postprocess]") {
  const std::vector<Anchor> anchors(2, Anchor{0.5f, 0.5f, 1.0f, 1.0f});
  const std::vector<float> enc(8, 0.0f);
  const auto boxes = decode_boxes(enc, anchors);
  REQUIRE(boxes.size() == 2);
  check_box(boxes[1], 0.0f, 0.0f, 1.0f, 1.0f);
  const std::vector<float> short_enc(7, 0.0f);
  CHECK_THROWS_AS(decode_boxes(short_enc, anchors), furiosa::Error);
}

TEST_CASE("iou of overlapping, disjoint, equal and empty boxes", "[postprocess]") {
  const Box a{0, 0, 1, 1};
  CHECK_THAT(iou(a, {0, 0.5f, 1, 1.5f}), WithinAbs(1.0 / 3.0, 1e-6));  // 0.5 / 1.5
  CHECK_THAT(iou(a, {0.5f, 0.5f, 1.5f, 1.5f}), WithinAbs(0.25 / 1.75, 1e-6));
  CHECK(iou(a, {2, 2, 3, 3}) == 0.0f);
  CHECK(iou(a, a) == 1.0f);
  CHECK(iou(a, {0.5f, 0.5f, 0.5f, 0.9f}) == 0.0f);  // no area
}

TEST_CASE("nms keeps the best box and drops those overlapping it by more than the threshold", "[postprocess]") {
  const std::vector<Box> boxes = {{0, 0, 1, 1}, {0, 0.1f, 1, 1.1f}, {0, 0.5f, 1, 1.5f}, {3, 3, 4, 4}};
  // IoU(0, 1) = 0.9 / 1.1 = 0.818 > 0.6: 1 goes; IoU(0, 2) = 1/3 and IoU(1, 2) does not matter.
  const std::vector<float> scores = {0.9f, 0.8f, 0.7f, 0.95f};
  CHECK(nms(boxes, scores, 0.6f, 10) == std::vector<std::size_t>{3, 0, 2});
  // A threshold above 0.818 keeps box 1; the limit cuts the list.
  CHECK(nms(boxes, scores, 0.85f, 10) == std::vector<std::size_t>{3, 0, 1, 2});
  CHECK(nms(boxes, scores, 0.6f, 2) == std::vector<std::size_t>{3, 0});
  // IoU exactly at the threshold is kept (suppressed only when greater): IoU(0, 2) = 1/3.
  CHECK(nms(boxes, scores, 1.0f / 3.0f, 10).size() == 3);
  // Equal scores: the lower index first.
  const std::vector<float> tied = {0.5f, 0.5f, 0.5f, 0.5f};
  CHECK(nms(boxes, tied, 0.6f, 10) == std::vector<std::size_t>{0, 2, 3});
  CHECK_THROWS_AS(nms(boxes, std::vector<float>(3, 0.5f), 0.5f, 10), furiosa::Error);
}

TEST_CASE("SSD-MobileNet v1 anchors follow TF's create_ssd_anchors", "[postprocess]") {
  const auto a = ssd_mobilenet_v1_anchors();
  REQUIRE(a.size() == 1917);  // 19*19*3 + (100 + 25 + 9 + 4 + 1) * 6
  // Layer 0, cell (0, 0): centre 0.5 / 19; (0.1, 1.0), (0.2, 2.0), (0.2, 0.5).
  const float c0 = 0.5f / 19.0f;
  CHECK_THAT(a[0].ycenter, WithinAbs(c0, 1e-7));
  CHECK_THAT(a[0].xcenter, WithinAbs(c0, 1e-7));
  CHECK_THAT(a[0].height, WithinAbs(0.1, 1e-7));
  CHECK_THAT(a[0].width, WithinAbs(0.1, 1e-7));
  CHECK_THAT(a[1].height, WithinAbs(0.2 / std::sqrt(2.0), 1e-6));
  CHECK_THAT(a[1].width, WithinAbs(0.2 * std::sqrt(2.0), 1e-6));
  CHECK_THAT(a[2].height, WithinAbs(0.2 * std::sqrt(2.0), 1e-6));
  // Layer 0, cell (0, 1) starts at anchor 3 and moves right by 1 / 19.
  CHECK_THAT(a[3].xcenter, WithinAbs(1.5 / 19.0, 1e-7));
  CHECK_THAT(a[3].ycenter, WithinAbs(c0, 1e-7));
  // Layer 1 (10 x 10) starts at 1083 with scale 0.2 + 0.75 / 5 = 0.35; its 6th anchor is the
  // interpolated sqrt(0.35 * 0.5) with aspect ratio 1; the 4th has aspect ratio 3.
  CHECK_THAT(a[1083].ycenter, WithinAbs(0.05, 1e-7));
  CHECK_THAT(a[1083].height, WithinAbs(0.35, 1e-6));
  CHECK_THAT(a[1086].height, WithinAbs(0.35 / std::sqrt(3.0), 1e-6));
  CHECK_THAT(a[1086].width, WithinAbs(0.35 * std::sqrt(3.0), 1e-6));
  CHECK_THAT(a[1088].height, WithinAbs(std::sqrt(0.35 * 0.5), 1e-6));
  // The last: layer 5 (1 x 1), scale 0.95, interpolated with 1.0: sqrt(0.95), centred.
  CHECK_THAT(a[1916].ycenter, WithinAbs(0.5, 1e-7));
  CHECK_THAT(a[1916].height, WithinAbs(std::sqrt(0.95), 1e-6));
  CHECK_THAT(a[1911].width, WithinAbs(0.95, 1e-6));
  CHECK_THROWS_AS(ssd_anchors({.feature_map_sizes = {}}), furiosa::Error);
}

TEST_CASE("detect: threshold, background, per-class NMS and the overall order", "[postprocess]") {
  // Three anchors over the unit square, zero encodings (boxes = anchors): 0 and 1 overlap by
  // IoU 0.9 / 1.1, 2 is apart. Classes: 0 background, 1, 2. Identity scores.
  const std::vector<Anchor> anchors = {{0.5f, 0.5f, 1, 1}, {0.5f, 0.6f, 1, 1}, {3.5f, 3.5f, 1, 1}};
  const std::vector<float> enc(12, 0.0f);
  const std::vector<float> scores = {
      0.99f, 0.9f, 0.2f,   // anchor 0: class 1 0.9, class 2 below the threshold
      0.99f, 0.8f, 0.5f,   // anchor 1: class 1 suppressed by anchor 0, class 2 0.5
      0.99f, 0.25f, 0.7f,  // anchor 2: class 1 below the threshold, class 2 0.7
  };
  DetectOptions o{.score_threshold = 0.3f, .iou_threshold = 0.6f, .scores = ScoreConversion::Identity};
  auto d = detect(enc, scores, 3, anchors, o);
  REQUIRE(d.size() == 3);
  CHECK(d[0].class_id == 1);
  CHECK(d[0].anchor == 0);
  CHECK(d[0].score == 0.9f);
  check_box(d[0].box, 0.0f, 0.0f, 1.0f, 1.0f);
  CHECK(d[1].class_id == 2);
  CHECK(d[1].anchor == 2);
  CHECK(d[2].class_id == 2);
  CHECK(d[2].anchor == 1);  // class 2 does not see class 1's boxes
  // Total limit.
  o.max_detections = 2;
  CHECK(detect(enc, scores, 3, anchors, o).size() == 2);
  // No background class: class 0 (0.99 everywhere) takes anchor 0 and 2 (anchor 1 suppressed).
  o.max_detections = 100;
  o.background_class = -1;
  d = detect(enc, scores, 3, anchors, o);
  REQUIRE(d.size() == 5);
  CHECK(d[0].class_id == 0);
  CHECK(d[0].anchor == 0);
  CHECK(d[1].class_id == 0);
  CHECK(d[1].anchor == 2);
  // Sigmoid scores: logit 0 -> 0.5 passes 0.3; logit -1 -> 0.269 does not.
  const std::vector<float> logits = {9, 0, -1, 9, -1, -1, 9, -1, -1};
  d = detect(enc, logits, 3, anchors, {});
  REQUIRE(d.size() == 1);
  CHECK(d[0].class_id == 1);
  CHECK_THAT(d[0].score, WithinAbs(0.5, 1e-7));
  CHECK_THROWS_AS(detect(enc, std::vector<float>(8, 0.0f), 3, anchors, o), furiosa::Error);
}
