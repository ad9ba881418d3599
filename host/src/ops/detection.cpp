// The host operator library (host/cpu_ops.h): detection post-processing: NonMaxSuppression.
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
  Tensor y(o[0].first, o[0].second);
  auto v = y.as<std::int64_t>();
  for (std::size_t i = 0; i < sel.size(); ++i) std::copy(sel[i].begin(), sel[i].end(), v.begin() + static_cast<std::ptrdiff_t>(3 * i));
  return {std::move(y)};
}

}  // namespace

OpRows detection_ops() {
  OpRows rows;
  rows.onnx.push_back({"NonMaxSuppression", 2, 5, 1, check_nms, infer_nms, run_nms});
  return rows;
}

}  // namespace furiosa::host::detail
