// YOLOv8 detections from the decoded head output (yolo.h).
#include "furiosa/postprocess/yolo.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "furiosa/core/error.h"

namespace furiosa::postprocess {

std::vector<Detection> yolo_detect(std::span<const float> output, std::size_t classes, const YoloDetectOptions& o) {
  if (classes == 0 || output.size() % (4 + classes) != 0) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("yolo_detect: the output has {} values, not a multiple of 4 + {} classes", output.size(),
                            classes));
  }
  if (!(o.iou_threshold >= 0 && o.iou_threshold <= 1)) {
    throw Error(ErrorCode::InvalidArgument, fmt::format("yolo_detect: IoU threshold {} is outside [0, 1]", o.iou_threshold));
  }
  const std::size_t anchors = output.size() / (4 + classes);
  auto at = [&](std::size_t row, std::size_t a) { return output[row * anchors + a]; };
  std::vector<Detection> cand;
  for (std::size_t a = 0; a < anchors; ++a) {
    std::size_t best = 0;
    for (std::size_t c = 1; c < classes; ++c) {
      if (at(4 + c, a) > at(4 + best, a)) best = c;
    }
    const float score = at(4 + best, a);
    if (!(score > o.score_threshold)) continue;
    const float cx = at(0, a), cy = at(1, a), w = at(2, a), h = at(3, a);
    cand.push_back({.box = {.ymin = cy - h / 2, .xmin = cx - w / 2, .ymax = cy + h / 2, .xmax = cx + w / 2},
                    .class_id = static_cast<int>(best),
                    .score = score,
                    .anchor = a});
  }
  std::stable_sort(cand.begin(), cand.end(), [](const Detection& x, const Detection& y) { return x.score > y.score; });
  if (cand.size() > o.max_candidates) cand.resize(o.max_candidates);

  // Greedy NMS in score order; a box only suppresses boxes of its own class unless agnostic.
  std::vector<Detection> kept;
  for (const Detection& d : cand) {
    if (kept.size() >= o.max_detections) break;
    const bool suppressed = std::any_of(kept.begin(), kept.end(), [&](const Detection& k) {
      return (o.class_agnostic || k.class_id == d.class_id) && iou(k.box, d.box) > o.iou_threshold;
    });
    if (!suppressed) kept.push_back(d);
  }
  return kept;
}

}  // namespace furiosa::postprocess
