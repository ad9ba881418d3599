// SSD post-processing on the host: anchors, box decoding, IoU, non-maximum suppression and the
// per-class detection step that turns an SSD's raw head outputs into detections.
//
// Conventions are those of TensorFlow's Object Detection API, which MLPerf's SSD-MobileNet v1
// (ssd_mobilenet_v1_coco_2018_01_28) was trained and is evaluated with:
// - boxes are [ymin, xmin, ymax, xmax] in coordinates normalised to the image (0..1);
// - anchors are [ycenter, xcenter, height, width], from the multiple-grid anchor generator
//   (object_detection/anchor_generators/multiple_grid_anchor_generator.py, create_ssd_anchors);
// - box encodings are [ty, tx, th, tw] of the Faster R-CNN box coder
//   (object_detection/box_coders/faster_rcnn_box_coder.py) with scale factors 10, 10, 5, 5,
//   written here as their inverses, the variances 0.1, 0.1, 0.2, 0.2 of the SSD paper.
// Functions throw furiosa::Error(InvalidArgument) for inconsistent sizes or options.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace furiosa::postprocess {

/// An axis-aligned box, normalised coordinates (TF order).
struct Box {
  float ymin = 0, xmin = 0, ymax = 0, xmax = 0;
  bool operator==(const Box&) const = default;
};

/// An anchor (prior box): centre and size, normalised coordinates.
struct Anchor {
  float ycenter = 0, xcenter = 0, height = 0, width = 0;
  bool operator==(const Anchor&) const = default;
};

/// Multipliers of the encoded offsets (SSD's "variances"): centre offsets are in units of
/// variance_y/x times the anchor size, log-sizes in units of variance_h/w.
struct BoxVariances {
  float y = 0.1f, x = 0.1f, h = 0.2f, w = 0.2f;
};

/// TF's create_ssd_anchors() parameters (ssd_anchor_generator in the model's pipeline.config).
struct SsdAnchorOptions {
  std::vector<std::int64_t> feature_map_sizes = {19, 10, 5, 3, 2, 1};  ///< square grids, one per layer
  float min_scale = 0.2f;
  float max_scale = 0.95f;
  std::vector<float> aspect_ratios = {1.0f, 2.0f, 0.5f, 3.0f, 1.0f / 3.0f};
  /// > 0: one more anchor per cell of scale sqrt(scale * next scale) and this aspect ratio.
  float interpolated_scale_aspect_ratio = 1.0f;
  /// The first layer uses only (0.1, 1.0), (scale, 2.0), (scale, 0.5): 3 anchors per cell.
  bool reduce_boxes_in_lowest_layer = true;
};

/// The anchors of an SSD with square feature maps, in the order of the heads' flattened
/// outputs: layer, then row, then column, then the cell's anchors (as TF's generator lists them:
/// the layer's (scale, aspect ratio) pairs in order). Scales of layer i are min_scale +
/// (max_scale - min_scale) * i / (layers - 1) (1 layer: min_scale; in double like TF), then 1.0 after the last;
/// an anchor of scale s and aspect ratio a has height s / sqrt(a) and width s * sqrt(a); cell
/// (r, c) of a G x G grid has centre ((r + 0.5) / G, (c + 0.5) / G). Arithmetic in float32 like TF.
std::vector<Anchor> ssd_anchors(const SsdAnchorOptions& options);

/// The 1917 anchors of MLPerf's SSD-MobileNet v1 300x300 (ssd_anchors() with the defaults).
std::vector<Anchor> ssd_mobilenet_v1_anchors();

/// Decodes one box: ycenter = ty * v.y * anchor.height + anchor.ycenter (x likewise),
/// height = exp(th * v.h) * anchor.height (width likewise), then the corners.
Box decode_box(const float encoding[4], const Anchor& anchor, const BoxVariances& variances = {});

/// Decodes every box: `encodings` holds anchors.size() rows of [ty, tx, th, tw] (a head output
/// [1, A, 4] flattened). Throws InvalidArgument when the sizes do not fit.
std::vector<Box> decode_boxes(std::span<const float> encodings, std::span<const Anchor> anchors,
                              const BoxVariances& variances = {});

/// Intersection over union; 0 when either box has no area.
float iou(const Box& a, const Box& b);

/// Greedy non-maximum suppression: candidates in order of decreasing score (equal scores: lower
/// index first), a candidate is kept when its IoU with every kept box is <= iou_threshold
/// (ONNX NonMaxSuppression's rule: suppressed when IoU > threshold), at most max_output kept.
/// Returns indices into `boxes` in the order kept. `scores` has boxes.size() entries.
std::vector<std::size_t> nms(std::span<const Box> boxes, std::span<const float> scores, float iou_threshold,
                             std::size_t max_output);

/// How raw class outputs become scores.
enum class ScoreConversion : std::uint8_t {
  Identity,  ///< already probabilities
  Sigmoid,   ///< 1 / (1 + exp(-x)) per class (TF SSD's score_converter SIGMOID)
  Softmax,   ///< softmax over the classes of each anchor
};

/// Options of the detection step; defaults are MLPerf SSD-MobileNet's (TF's
/// batch_non_max_suppression in the model's pipeline.config: score threshold 0.3, IoU 0.6,
/// 100 per class, 100 in total, sigmoid scores, class 0 is the background).
struct DetectOptions {
  float score_threshold = 0.3f;  ///< keep scores > threshold
  float iou_threshold = 0.6f;
  std::size_t max_per_class = 100;
  std::size_t max_detections = 100;
  int background_class = 0;  ///< never reported; -1: none
  ScoreConversion scores = ScoreConversion::Sigmoid;
  BoxVariances variances{};
};

/// One detection.
struct Detection {
  Box box;
  int class_id = 0;      ///< index into the class axis of the scores
  float score = 0;       ///< converted score
  std::size_t anchor = 0;  ///< the anchor (row of the head outputs) it came from
};

/// SSD detection: decodes the boxes, converts the scores, then per class (except the
/// background) keeps anchors whose score is above the threshold, runs nms() with max_per_class,
/// and finally keeps the max_detections best over all classes, sorted by decreasing score (equal
/// scores: lower class, then lower anchor first). `encodings` is [A, 4] and `class_outputs`
/// [A, classes] row-major (a batch-1 head output), `anchors` has A entries.
std::vector<Detection> detect(std::span<const float> encodings, std::span<const float> class_outputs,
                              std::size_t classes, std::span<const Anchor> anchors, const DetectOptions& options = {});

}  // namespace furiosa::postprocess
