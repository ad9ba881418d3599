// SSD anchors, box decoding and NMS (ssd.h).
#include "furiosa/postprocess/ssd.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "furiosa/core/error.h"

namespace furiosa::postprocess {

std::vector<Anchor> ssd_anchors(const SsdAnchorOptions& o) {
  const std::size_t layers = o.feature_map_sizes.size();
  if (layers == 0 || o.aspect_ratios.empty() || !(o.min_scale > 0) || !(o.max_scale >= o.min_scale)) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("ssd_anchors: need >= 1 layer, >= 1 aspect ratio and 0 < min_scale <= max_scale "
                            "(have {} layers, {} aspect ratios, scales {} .. {})",
                            layers, o.aspect_ratios.size(), o.min_scale, o.max_scale));
  }
  // Scales in double, as TF's Python list computes them; the anchors in float32.
  std::vector<double> scales;
  for (std::size_t i = 0; i < layers; ++i) {
    scales.push_back(layers == 1 ? double{o.min_scale}
                                 : double{o.min_scale} + (double{o.max_scale} - double{o.min_scale}) *
                                                             static_cast<double>(i) / static_cast<double>(layers - 1));
  }
  scales.push_back(1.0);
  std::vector<Anchor> out;
  for (std::size_t l = 0; l < layers; ++l) {
    std::vector<std::pair<float, float>> specs;  // (scale, aspect ratio)
    if (l == 0 && o.reduce_boxes_in_lowest_layer) {
      const auto s0 = static_cast<float>(scales[0]);
      specs = {{0.1f, 1.0f}, {s0, 2.0f}, {s0, 0.5f}};
    } else {
      for (float a : o.aspect_ratios) specs.emplace_back(static_cast<float>(scales[l]), a);
      if (o.interpolated_scale_aspect_ratio > 0) {
        specs.emplace_back(static_cast<float>(std::sqrt(scales[l] * scales[l + 1])), o.interpolated_scale_aspect_ratio);
      }
    }
    const std::int64_t g = o.feature_map_sizes[l];
    if (g <= 0) throw Error(ErrorCode::InvalidArgument, fmt::format("ssd_anchors: feature map {} has size {}", l, g));
    for (std::int64_t r = 0; r < g; ++r) {
      for (std::int64_t c = 0; c < g; ++c) {
        for (auto [s, a] : specs) {
          const float ra = std::sqrt(a);
          out.push_back({.ycenter = (static_cast<float>(r) + 0.5f) / static_cast<float>(g),
                         .xcenter = (static_cast<float>(c) + 0.5f) / static_cast<float>(g),
                         .height = s / ra,
                         .width = s * ra});
        }
      }
    }
  }
  return out;
}

std::vector<Anchor> ssd_mobilenet_v1_anchors() { return ssd_anchors(SsdAnchorOptions{}); }

Box decode_box(const float e[4], const Anchor& a, const BoxVariances& v) {
  const float yc = e[0] * v.y * a.height + a.ycenter;
  const float xc = e[1] * v.x * a.width + a.xcenter;
  const float h = std::exp(e[2] * v.h) * a.height;
  const float w = std::exp(e[3] * v.w) * a.width;
  return {.ymin = yc - h / 2, .xmin = xc - w / 2, .ymax = yc + h / 2, .xmax = xc + w / 2};
}

std::vector<Box> decode_boxes(std::span<const float> encodings, std::span<const Anchor> anchors,
                              const BoxVariances& variances) {
  if (encodings.size() != anchors.size() * 4) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("decode_boxes: {} box encodings for {} anchors (need 4 per anchor)", encodings.size(),
                            anchors.size()));
  }
  std::vector<Box> out(anchors.size());
  for (std::size_t i = 0; i < anchors.size(); ++i) out[i] = decode_box(&encodings[i * 4], anchors[i], variances);
  return out;
}

float iou(const Box& a, const Box& b) {
  const float area_a = (a.ymax - a.ymin) * (a.xmax - a.xmin);
  const float area_b = (b.ymax - b.ymin) * (b.xmax - b.xmin);
  if (!(area_a > 0) || !(area_b > 0)) return 0.0f;
  const float ih = std::max(0.0f, std::min(a.ymax, b.ymax) - std::max(a.ymin, b.ymin));
  const float iw = std::max(0.0f, std::min(a.xmax, b.xmax) - std::max(a.xmin, b.xmin));
  const float inter = ih * iw;
  return inter / (area_a + area_b - inter);
}

std::vector<std::size_t> nms(std::span<const Box> boxes, std::span<const float> scores, float iou_threshold,
                             std::size_t max_output) {
  if (boxes.size() != scores.size()) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("nms: {} boxes but {} scores", boxes.size(), scores.size()));
  }
  std::vector<std::size_t> order(boxes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });
  std::vector<std::size_t> kept;
  for (std::size_t i : order) {
    if (kept.size() >= max_output) break;
    const bool suppressed =
        std::any_of(kept.begin(), kept.end(), [&](std::size_t k) { return iou(boxes[i], boxes[k]) > iou_threshold; });
    if (!suppressed) kept.push_back(i);
  }
  return kept;
}

std::vector<Detection> detect(std::span<const float> encodings, std::span<const float> class_outputs,
                              std::size_t classes, std::span<const Anchor> anchors, const DetectOptions& o) {
  const std::size_t n = anchors.size();
  if (classes == 0 || class_outputs.size() != n * classes) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("detect: {} class outputs for {} anchors x {} classes", class_outputs.size(), n, classes));
  }
  const std::vector<Box> boxes = decode_boxes(encodings, anchors, o.variances);
  std::vector<float> scores(class_outputs.begin(), class_outputs.end());
  if (o.scores == ScoreConversion::Sigmoid) {
    for (float& s : scores) s = 1.0f / (1.0f + std::exp(-s));
  } else if (o.scores == ScoreConversion::Softmax) {
    for (std::size_t a = 0; a < n; ++a) {
      float* row = &scores[a * classes];
      const float mx = *std::max_element(row, row + classes);
      float sum = 0;
      for (std::size_t c = 0; c < classes; ++c) sum += (row[c] = std::exp(row[c] - mx));
      for (std::size_t c = 0; c < classes; ++c) row[c] /= sum;
    }
  }
  std::vector<Detection> all;
  std::vector<Box> cand_boxes;
  std::vector<float> cand_scores;
  std::vector<std::size_t> cand_anchor;
  for (std::size_t c = 0; c < classes; ++c) {
    if (static_cast<int>(c) == o.background_class) continue;
    cand_boxes.clear();
    cand_scores.clear();
    cand_anchor.clear();
    for (std::size_t a = 0; a < n; ++a) {
      const float s = scores[a * classes + c];
      if (s > o.score_threshold) {
        cand_boxes.push_back(boxes[a]);
        cand_scores.push_back(s);
        cand_anchor.push_back(a);
      }
    }
    for (std::size_t k : nms(cand_boxes, cand_scores, o.iou_threshold, o.max_per_class)) {
      all.push_back({.box = cand_boxes[k], .class_id = static_cast<int>(c), .score = cand_scores[k],
                     .anchor = cand_anchor[k]});
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Detection& a, const Detection& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.class_id != b.class_id) return a.class_id < b.class_id;
    return a.anchor < b.anchor;
  });
  if (all.size() > o.max_detections) all.resize(o.max_detections);
  return all;
}

}  // namespace furiosa::postprocess
