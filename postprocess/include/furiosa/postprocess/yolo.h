// YOLOv8 post-processing on the host: from the decoded head output Ultralytics' ONNX export
// writes ([1, 4 + classes, anchors]: cx, cy, w, h in input pixels, then one sigmoid score per
// class) to detections, as ultralytics.utils.ops.non_max_suppression does for a detector with
// its prediction defaults (confidence 0.25, IoU 0.7, at most 300 detections, class-aware NMS).
// Functions throw furiosa::Error(InvalidArgument) for inconsistent sizes or options.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "furiosa/postprocess/ssd.h"

namespace furiosa::postprocess {

/// Options of yolo_detect(); defaults are Ultralytics' predict defaults (conf 0.25, iou 0.7,
/// max_det 300, max_nms 30000, agnostic_nms False).
struct YoloDetectOptions {
  float score_threshold = 0.25f;   ///< keep anchors whose best class score is > threshold
  float iou_threshold = 0.7f;      ///< suppress a box of the same class with IoU > threshold
  std::size_t max_candidates = 30000;  ///< best-scored candidates entering NMS (Ultralytics' max_nms)
  std::size_t max_detections = 300;    ///< detections returned (Ultralytics' max_det)
  bool class_agnostic = false;     ///< true: one NMS over all classes
};

/// YOLOv8 detection on one image: `output` is the batch-1 head output [4 + classes, anchors]
/// row-major (channel-major, Ultralytics' layout), `classes` the number of classes. Each anchor
/// takes its best class (ties: the lower class index) and that score; anchors above
/// score_threshold become boxes (xmin = cx - w / 2, ... in input pixels, stored in Box's
/// fields), at most max_candidates of them by decreasing score; greedy NMS (nms()'s rule) per
/// class, or over all with class_agnostic; then the max_detections best, by decreasing score
/// (equal scores: lower anchor first). Detection::anchor is the anchor's column in `output`.
std::vector<Detection> yolo_detect(std::span<const float> output, std::size_t classes,
                                   const YoloDetectOptions& options = {});

}  // namespace furiosa::postprocess
