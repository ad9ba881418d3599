// The host operator library (host/cpu_ops.h): detection post-processing: NonMaxSuppression and
// furiosa::TFLiteDetectionPostProcess (TFLite's custom op TFLite_Detection_PostProcess).
#include "ops_common.h"

namespace furiosa::host::detail {
namespace {

// ---------------------------------------------------------------------------------------------
// NonMaxSuppression
// ---------------------------------------------------------------------------------------------

std::string check_nms(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "boxes", kF32)
      .in(1, "scores", kF32)
      .in(2, "max_output_boxes_per_class", bit(DType::Int64), false)
      .in(3, "iou_threshold", kF32, false)
      .in(4, "score_threshold", kF32, false);
  const std::int64_t cpb = n.attr_int("center_point_box", 0);
  ch.require(cpb == 0 || cpb == 1, fmt::format("center_point_box = {} must be 0 or 1", cpb));
  return ch.reason;
}

// One scalar parameter (a tensor of one element) or `fallback` when the input is omitted.
template <class T>
T nms_param(const Ctx& c, std::size_t i, const char* what, T fallback) {
  if (!c.has(i)) return fallback;
  const Tensor& t = c.constant(i, what);
  if (t.elements() != 1) c.bad(fmt::format("input {} ({}) must hold one value, holds {}", i, what, t.elements()));
  return t.as<T>()[0];
}

// Selected (batch, class, box) triples, in ONNX order: by batch, then class, then descending
// score. Boxes are suppressed when their IoU with a selected box of the same class is greater
// than iou_threshold; only scores greater than score_threshold (when given) are candidates;
// equal scores are taken lower box index first (ONNX Runtime's order).
std::vector<std::array<std::int64_t, 3>> nms_select(const Ctx& c) {
  const Tensor& boxes = c.constant(0, "boxes");
  const Tensor& scores = c.constant(1, "scores");
  const Shape& bs = boxes.shape();
  const Shape& ss = scores.shape();
  if (bs.size() != 3 || bs[2] != 4) c.bad(fmt::format("boxes must be [batch, boxes, 4], is {}", shape_to_string(bs)));
  if (ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1]) {
    c.bad(fmt::format("scores must be [batch, classes, boxes] = [{}, C, {}], is {}", bs[0], bs[1], shape_to_string(ss)));
  }
  const std::int64_t max_out = nms_param<std::int64_t>(c, 2, "max_output_boxes_per_class", 0);
  const float iou_threshold = nms_param<float>(c, 3, "iou_threshold", 0.0f);
  const bool has_score_threshold = c.has(4);
  const float score_threshold = nms_param<float>(c, 4, "score_threshold", 0.0f);
  if (iou_threshold < 0.0f || iou_threshold > 1.0f) {
    c.bad(fmt::format("iou_threshold {} is outside [0, 1]", iou_threshold));
  }
  const bool center = c.node.attr_int("center_point_box", 0) != 0;
  const std::int64_t B = bs[0], N = bs[1], C = ss[1];
  // Corners as (y1, x1, y2, x2) with y1 <= y2, x1 <= x2.
  std::vector<std::array<float, 4>> corners(static_cast<std::size_t>(B * N));
  auto bv = boxes.as<float>();
  for (std::size_t i = 0; i < corners.size(); ++i) {
    const float* b = bv.data() + i * 4;
    if (center) {
      const float xc = b[0], yc = b[1], w = b[2], h = b[3];
      corners[i] = {yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2};
    } else {
      corners[i] = {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
    }
  }
  auto suppresses = [&](const std::array<float, 4>& a, const std::array<float, 4>& b) {
    const float ih = std::min(a[2], b[2]) - std::max(a[0], b[0]);
    const float iw = std::min(a[3], b[3]) - std::max(a[1], b[1]);
    if (ih <= 0 || iw <= 0) return false;
    const float area_a = (a[2] - a[0]) * (a[3] - a[1]);
    const float area_b = (b[2] - b[0]) * (b[3] - b[1]);
    if (area_a <= 0 || area_b <= 0) return false;
    const float inter = ih * iw;
    return inter / (area_a + area_b - inter) > iou_threshold;
  };
  std::vector<std::array<std::int64_t, 3>> out;
  if (max_out <= 0) return out;
  auto sv = scores.as<float>();
  std::vector<std::int64_t> cand;
  std::vector<std::int64_t> kept;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t k = 0; k < C; ++k) {
      const float* s = sv.data() + (b * C + k) * N;
      cand.clear();
      for (std::int64_t i = 0; i < N; ++i) {
        if (!has_score_threshold || s[i] > score_threshold) cand.push_back(i);
      }
      std::stable_sort(cand.begin(), cand.end(), [&](std::int64_t l, std::int64_t r) { return s[l] > s[r]; });
      kept.clear();
      for (std::int64_t i : cand) {
        if (static_cast<std::int64_t>(kept.size()) >= max_out) break;
        const auto& box = corners[static_cast<std::size_t>(b * N + i)];
        bool keep = true;
        for (std::int64_t j : kept) {
          if (suppresses(corners[static_cast<std::size_t>(b * N + j)], box)) {
            keep = false;
            break;
          }
        }
        if (!keep) continue;
        kept.push_back(i);
        out.push_back({b, k, i});
      }
    }
  }
  return out;
}

OutInfos infer_nms(const Ctx& c) {
  return {{DType::Int64, {static_cast<std::int64_t>(nms_select(c).size()), 3}}};
}
std::vector<Tensor> run_nms(const Ctx& c, const OutInfos& o) {
  const auto sel = nms_select(c);
  Tensor y = c.output(o, 0);
  auto v = y.as<std::int64_t>();
  for (std::size_t i = 0; i < sel.size(); ++i) std::copy(sel[i].begin(), sel[i].end(), v.begin() + static_cast<std::ptrdiff_t>(3 * i));
  return single_output(std::move(y));
}

// ---------------------------------------------------------------------------------------------
// furiosa::TFLiteDetectionPostProcess: SSD box decode + NMS with the semantics of TFLite's
// kernels/detection_postprocess.cc (batch 1, float32 inputs; the importer dequantizes)
// ---------------------------------------------------------------------------------------------

struct DppParams {
  std::int64_t max_detections = 0, max_classes_per_detection = 1, detections_per_class = 100, num_classes = 0;
  bool regular = false;
  float score_threshold = 0, iou_threshold = 0;
  float y_scale = 1, x_scale = 1, h_scale = 1, w_scale = 1;
};

std::string check_dpp(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "box_encodings", kF32).in(1, "class_predictions", kF32).in(2, "anchors", kF32);
  for (const char* key : {"max_detections", "max_classes_per_detection", "num_classes"}) {
    ch.require(n.attributes.count(key) > 0, fmt::format("attribute '{}' is required", key));
  }
  return ch.reason;
}

DppParams dpp_params(const Ctx& c) {
  const Node& n = c.node;
  DppParams p;
  p.max_detections = n.attr_int("max_detections", 0);
  p.max_classes_per_detection = n.attr_int("max_classes_per_detection", 1);
  p.detections_per_class = n.attr_int("detections_per_class", 100);
  p.num_classes = n.attr_int("num_classes", 0);
  p.regular = n.attr_int("use_regular_nms", 0) != 0;
  p.score_threshold = float_attr(n, "nms_score_threshold", 0.0f);
  p.iou_threshold = float_attr(n, "nms_iou_threshold", 0.0f);
  p.y_scale = float_attr(n, "y_scale", 1.0f);
  p.x_scale = float_attr(n, "x_scale", 1.0f);
  p.h_scale = float_attr(n, "h_scale", 1.0f);
  p.w_scale = float_attr(n, "w_scale", 1.0f);
  if (p.max_detections < 0) c.bad(fmt::format("max_detections {} must be >= 0", p.max_detections));
  if (p.max_classes_per_detection < 1) c.bad(fmt::format("max_classes_per_detection {} must be >= 1", p.max_classes_per_detection));
  if (p.regular && p.detections_per_class < 1) c.bad(fmt::format("detections_per_class {} must be >= 1", p.detections_per_class));
  if (!(p.iou_threshold > 0.0f && p.iou_threshold <= 1.0f)) {
    c.bad(fmt::format("nms_iou_threshold {} must be in (0, 1]", p.iou_threshold));
  }
  return p;
}

// Checks the input shapes; returns the anchor count A and the score columns C' (num_classes or
// num_classes + 1 with the background column 0).
std::array<std::int64_t, 2> dpp_dims(const Ctx& c, const DppParams& p) {
  const Shape& b = c.shape(0, "box_encodings");
  const Shape& s = c.shape(1, "class_predictions");
  const Shape& a = c.shape(2, "anchors");
  if (b.size() != 3 || b[0] != 1 || b[2] < 4) {
    c.bad(fmt::format("box_encodings must be [1, anchors, >= 4], is {}", shape_to_string(b)));
  }
  if (s.size() != 3 || s[0] != 1 || s[1] != b[1]) {
    c.bad(fmt::format("class_predictions must be [1, {}, classes], is {}", b[1], shape_to_string(s)));
  }
  if (a.size() != 2 || a[0] != b[1] || a[1] != 4) {
    c.bad(fmt::format("anchors must be [{}, 4], is {}", b[1], shape_to_string(a)));
  }
  if (p.num_classes < 1 || s[2] < p.num_classes || s[2] - p.num_classes > 1) {
    c.bad(fmt::format("num_classes {} does not fit class_predictions {} (num_classes or num_classes + 1 columns)",
                      p.num_classes, shape_to_string(s)));
  }
  return {b[1], s[2]};
}

OutInfos infer_dpp(const Ctx& c) {
  const DppParams p = dpp_params(c);
  dpp_dims(c, p);
  const std::int64_t n = p.max_detections * p.max_classes_per_detection;
  return {{DType::Float32, {1, n, 4}}, {DType::Float32, {1, n}}, {DType::Float32, {1, n}}, {DType::Float32, {1}}};
}

// Box corners (ymin, xmin, ymax, xmax) of TFLite's BoxCornerEncoding.
using Corners = std::array<float, 4>;

// TFLite's ComputeIntersectionOverUnion: 0 for boxes without area.
float dpp_iou(const Corners& i, const Corners& j) {
  const float area_i = (i[2] - i[0]) * (i[3] - i[1]);
  const float area_j = (j[2] - j[0]) * (j[3] - j[1]);
  if (area_i <= 0 || area_j <= 0) return 0.0f;
  const float ih = std::max(std::min(i[2], j[2]) - std::max(i[0], j[0]), 0.0f);
  const float iw = std::max(std::min(i[3], j[3]) - std::max(i[1], j[1]), 0.0f);
  const float inter = ih * iw;
  return inter / (area_i + area_j - inter);
}

// Indices sorted by decreasing value, equal values by increasing index (std::stable_sort, as
// TFLite's DecreasingArgSort; TFLite's partial sorts leave ties unspecified).
std::vector<std::int64_t> decreasing(const std::vector<float>& v, std::size_t keep) {
  std::vector<std::int64_t> idx(v.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>(i);
  std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) {
    return v[static_cast<std::size_t>(a)] > v[static_cast<std::size_t>(b)];
  });
  idx.resize(std::min(keep, idx.size()));
  return idx;
}

// NonMaxSuppressionSingleClassHelper: scores >= threshold, by decreasing score, a candidate is
// dropped when its IoU with a selected box is > iou_threshold; at most `max_out` selected.
std::vector<std::int64_t> dpp_single_class(const std::vector<Corners>& boxes, const std::vector<float>& scores,
                                           const DppParams& p, std::int64_t max_out) {
  std::vector<float> kept_scores;
  std::vector<std::int64_t> kept;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    if (scores[i] >= p.score_threshold) {
      kept_scores.push_back(scores[i]);
      kept.push_back(static_cast<std::int64_t>(i));
    }
  }
  const auto order = decreasing(kept_scores, kept_scores.size());
  std::vector<bool> active(order.size(), true);
  std::vector<std::int64_t> selected;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (static_cast<std::int64_t>(selected.size()) >= max_out) break;
    if (!active[i]) continue;
    const std::int64_t bi = kept[static_cast<std::size_t>(order[i])];
    selected.push_back(bi);
    for (std::size_t j = i + 1; j < order.size(); ++j) {
      if (active[j] && dpp_iou(boxes[static_cast<std::size_t>(bi)],
                               boxes[static_cast<std::size_t>(kept[static_cast<std::size_t>(order[j])])]) > p.iou_threshold) {
        active[j] = false;
      }
    }
  }
  return selected;
}

std::vector<Tensor> run_dpp(const Ctx& c, const OutInfos& o) {
  const DppParams p = dpp_params(c);
  const std::array<std::int64_t, 2> dims = dpp_dims(c, p);  // (no structured binding: clang 14 cannot capture one)
  const std::int64_t A = dims[0], cols = dims[1];
  const Tensor& enc = c.t(0);
  const std::int64_t enc_len = enc.shape()[2];
  const float* e = enc.as<float>().data();
  const float* sc = c.t(1).as<float>().data();
  const float* an = c.t(2).as<float>().data();
  // DecodeCenterSizeBoxes: (y, x, h, w) encodings against (ycenter, xcenter, h, w) anchors, in
  // double, each result rounded to float.
  std::vector<Corners> boxes(static_cast<std::size_t>(A));
  for (std::int64_t i = 0; i < A; ++i) {
    const float* b = e + i * enc_len;
    const float* a = an + i * 4;
    const auto yc = static_cast<float>(double(b[0]) / double(p.y_scale) * double(a[2]) + double(a[0]));
    const auto xc = static_cast<float>(double(b[1]) / double(p.x_scale) * double(a[3]) + double(a[1]));
    const auto hh = static_cast<float>(0.5 * std::exp(double(b[2]) / double(p.h_scale)) * double(a[2]));
    const auto hw = static_cast<float>(0.5 * std::exp(double(b[3]) / double(p.w_scale)) * double(a[3]));
    const Corners box = {yc - hh, xc - hw, yc + hh, xc + hw};
    // TFLite's ValidateBoxes fails the whole operator on an inverted box (negative anchor size).
    if (box[0] > box[2] || box[1] > box[3]) c.bad(fmt::format("anchor {} decodes to an inverted box", i));
    boxes[static_cast<std::size_t>(i)] = box;
  }
  const std::int64_t offset = cols - p.num_classes;  // 1: column 0 is the background
  auto score = [&](std::int64_t anchor, std::int64_t cls) { return sc[anchor * cols + offset + cls]; };
  Tensor out_boxes = c.output(o, 0), out_classes = c.output(o, 1);
  Tensor out_scores = c.output(o, 2), out_num = c.output(o, 3);
  auto ob = out_boxes.as<float>();
  auto oc = out_classes.as<float>();
  auto os = out_scores.as<float>();
  std::fill(ob.begin(), ob.end(), 0.0f);
  std::fill(oc.begin(), oc.end(), 0.0f);
  std::fill(os.begin(), os.end(), 0.0f);
  auto put = [&](std::int64_t slot, std::int64_t anchor, std::int64_t cls, float s) {
    const auto k = static_cast<std::size_t>(slot);
    std::copy(boxes[static_cast<std::size_t>(anchor)].begin(), boxes[static_cast<std::size_t>(anchor)].end(),
              ob.begin() + static_cast<std::ptrdiff_t>(4 * k));
    oc[k] = static_cast<float>(cls);
    os[k] = s;
  };
  std::int64_t count = 0;
  if (p.regular) {
    // NonMaxSuppressionMultiClassRegularHelper: NMS per class (detections_per_class each), the
    // running best max_detections over the classes kept after each class.
    struct Det {
      std::int64_t anchor, cls;
      float score;
    };
    std::vector<Det> best;
    std::vector<float> class_scores(static_cast<std::size_t>(A));
    for (std::int64_t k = 0; k < p.num_classes; ++k) {
      for (std::int64_t i = 0; i < A; ++i) class_scores[static_cast<std::size_t>(i)] = score(i, k);
      std::vector<Det> merged = best;
      for (std::int64_t i : dpp_single_class(boxes, class_scores, p, p.detections_per_class)) {
        merged.push_back({i, k, class_scores[static_cast<std::size_t>(i)]});
      }
      std::vector<float> values;
      for (const Det& d : merged) values.push_back(d.score);
      best.clear();
      for (std::int64_t m : decreasing(values, static_cast<std::size_t>(p.max_detections))) {
        best.push_back(merged[static_cast<std::size_t>(m)]);
      }
    }
    for (const Det& d : best) put(count++, d.anchor, d.cls, d.score);
  } else {
    // NonMaxSuppressionMultiClassFastHelper: each anchor's top max_classes_per_detection classes,
    // one class-agnostic NMS on each anchor's best score; an anchor's classes fill its
    // max_classes_per_detection output slots.
    const std::int64_t per_anchor = std::min(p.max_classes_per_detection, p.num_classes);
    std::vector<float> max_scores(static_cast<std::size_t>(A));
    std::vector<std::vector<std::int64_t>> top(static_cast<std::size_t>(A));
    std::vector<float> row(static_cast<std::size_t>(p.num_classes));
    for (std::int64_t i = 0; i < A; ++i) {
      for (std::int64_t k = 0; k < p.num_classes; ++k) row[static_cast<std::size_t>(k)] = score(i, k);
      top[static_cast<std::size_t>(i)] = decreasing(row, static_cast<std::size_t>(per_anchor));
      max_scores[static_cast<std::size_t>(i)] = row[static_cast<std::size_t>(top[static_cast<std::size_t>(i)][0])];
    }
    for (std::int64_t i : dpp_single_class(boxes, max_scores, p, p.max_detections)) {
      const auto& classes = top[static_cast<std::size_t>(i)];
      for (std::size_t col = 0; col < classes.size(); ++col) {
        put(p.max_classes_per_detection * count + static_cast<std::int64_t>(col), i, classes[col], score(i, classes[col]));
      }
      ++count;
    }
  }
  out_num.as<float>()[0] = static_cast<float>(count);
  std::vector<Tensor> out;
  out.push_back(std::move(out_boxes));
  out.push_back(std::move(out_classes));
  out.push_back(std::move(out_scores));
  out.push_back(std::move(out_num));
  return out;
}

}  // namespace

OpRows detection_ops() {
  OpRows rows;
  rows.onnx.push_back({"NonMaxSuppression", 2, 5, 1, check_nms, infer_nms, run_nms});
  rows.furiosa.push_back({"TFLiteDetectionPostProcess", 3, 3, 4, check_dpp, infer_dpp, run_dpp});
  return rows;
}

}  // namespace furiosa::host::detail
