// YOLOv8 detections (furiosa/postprocess/yolo.h) on hand-built head outputs.
#include <catch2/catch.hpp>

#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/postprocess/yolo.h"

using namespace furiosa::postprocess;

namespace {
// A [4 + classes, anchors] head output; set(a, cx, cy, w, h, class, score) fills one anchor.
struct Head {
  std::size_t classes, anchors;
  std::vector<float> v;
  Head(std::size_t c, std::size_t n) : classes(c), anchors(n), v((4 + c) * n, 0.0f) {}
  void set(std::size_t a, float cx, float cy, float w, float h, std::size_t cls, float score) {
    v[0 * anchors + a] = cx;
    v[1 * anchors + a] = cy;
    v[2 * anchors + a] = w;
    v[3 * anchors + a] = h;
    v[(4 + cls) * anchors + a] = score;
  }
};
}  // namespace

TEST_CASE("yolo_detect: best class per anchor, threshold, xywh to corners", "[postprocess][yolo]") {
  Head h(3, 4);
  h.set(0, 100, 50, 20, 10, 2, 0.9f);
  h.v[(4 + 1) * 4 + 0] = 0.5f;  // a lower second class score on the same anchor
  h.set(1, 300, 300, 40, 40, 1, 0.25f);  // not above the 0.25 threshold
  h.set(3, 10, 10, 4, 4, 0, 0.3f);
  const auto d = yolo_detect(h.v, 3);
  REQUIRE(d.size() == 2);
  CHECK(d[0].anchor == 0);
  CHECK(d[0].class_id == 2);
  CHECK(d[0].score == 0.9f);
  CHECK(d[0].box == Box{.ymin = 45, .xmin = 90, .ymax = 55, .xmax = 110});
  CHECK(d[1].anchor == 3);
  CHECK(d[1].class_id == 0);
}

TEST_CASE("yolo_detect: NMS is per class unless class_agnostic", "[postprocess][yolo]") {
  Head h(2, 3);
  h.set(0, 100, 100, 50, 50, 0, 0.9f);
  h.set(1, 102, 100, 50, 50, 0, 0.8f);  // IoU with anchor 0 about 0.92: suppressed
  h.set(2, 101, 100, 50, 50, 1, 0.7f);  // same place, other class: kept
  auto d = yolo_detect(h.v, 2);
  REQUIRE(d.size() == 2);
  CHECK(d[0].anchor == 0);
  CHECK(d[1].anchor == 2);
  d = yolo_detect(h.v, 2, {.class_agnostic = true});
  REQUIRE(d.size() == 1);
  CHECK(d[0].anchor == 0);
  // An IoU threshold above the 0.92 overlap keeps anchor 1 too.
  d = yolo_detect(h.v, 2, {.iou_threshold = 0.95f});
  CHECK(d.size() == 3);
  d = yolo_detect(h.v, 2, {.max_detections = 1});
  REQUIRE(d.size() == 1);
  CHECK(d[0].anchor == 0);
}

TEST_CASE("yolo_detect refuses sizes that do not fit", "[postprocess][yolo]") {
  const std::vector<float> v(85, 0.0f);
  CHECK_THROWS_AS(yolo_detect(v, 80), furiosa::Error);  // 85 is not a multiple of 84
  CHECK_THROWS_AS(yolo_detect(v, 0), furiosa::Error);
  CHECK_THROWS_AS(yolo_detect(std::vector<float>(84, 0.0f), 80, {.iou_threshold = 1.5f}), furiosa::Error);
  CHECK(yolo_detect(std::vector<float>(84, 0.0f), 80).empty());
}
