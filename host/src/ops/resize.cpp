// The host operator library (host/cpu_ops.h): Resize (opsets 11-19: X, roi, scales, sizes;
// nearest, N-D linear and N-D cubic; the coordinate transformation modes of the spec; the
// opset-10 form X, scales as ONNX Runtime runs it, see resize_plan; linear on uint8 / int8 with
// ONNX Runtime's arithmetic, see run_ort_linear_q8; float32 linear with ORT's float32 sums, see
// ort_float_linear_dims), and with the
// attribute tflite_arithmetic = 1 TFLite's RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR reference
// arithmetic (see tflite_resize below).
#include "ops_common.h"

namespace furiosa::host::detail {
namespace {

// ---------------------------------------------------------------------------------------------
// Resize
// ---------------------------------------------------------------------------------------------

enum class Coord { HalfPixel, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNn, TfCropAndResize, HalfPixelSymmetric };
enum class Nearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

std::optional<Coord> coord_mode(const std::string& s) {
  if (s == "half_pixel") return Coord::HalfPixel;
  if (s == "pytorch_half_pixel") return Coord::PytorchHalfPixel;
  if (s == "align_corners") return Coord::AlignCorners;
  if (s == "asymmetric") return Coord::Asymmetric;
  if (s == "tf_half_pixel_for_nn") return Coord::TfHalfPixelForNn;
  if (s == "tf_crop_and_resize") return Coord::TfCropAndResize;
  if (s == "half_pixel_symmetric") return Coord::HalfPixelSymmetric;
  return std::nullopt;
}
std::optional<Nearest> nearest_mode(const std::string& s) {
  if (s == "round_prefer_floor") return Nearest::RoundPreferFloor;
  if (s == "round_prefer_ceil") return Nearest::RoundPreferCeil;
  if (s == "floor") return Nearest::Floor;
  if (s == "ceil") return Nearest::Ceil;
  return std::nullopt;
}

std::string check_resize(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  ch.in(0, "X", kAll).in(1, "roi", kF32, false).in(2, "scales", kF32, false).in(3, "sizes", bit(DType::Int64), false);
  const std::string mode = n.attr_string("mode", "nearest");
  if (n.inputs.size() == 2) {
    // The opset-10 form: X, scales (float32, one per dim); nearest or linear only.
    ch.in(1, "scales", kF32);
    ch.require(mode == "nearest" || mode == "linear",
               fmt::format("mode '{}' does not exist in the opset-10 form (X, scales) of Resize", mode));
  }
  ch.require(mode == "nearest" || mode == "linear" || mode == "cubic",
             fmt::format("mode '{}' is not an ONNX Resize mode (nearest, linear, cubic)", mode));
  if (n.attr_int("tflite_arithmetic", 0) != 0) {
    // TFLite's kernels: float32, uint8 and int8 for both modes; the two spatial axes listed
    // in `axes`; the coordinate modes that TFLite's align_corners / half_pixel_centers give.
    const std::string coord = n.attr_string("coordinate_transformation_mode", "half_pixel");
    const std::string half = mode == "linear" ? "half_pixel" : "tf_half_pixel_for_nn";
    ch.require(!ch.present(0) || *d[0] == DType::Float32 || *d[0] == DType::UInt8 || *d[0] == DType::Int8,
               fmt::format("tflite_arithmetic takes float32, uint8 or int8 X, the node's X is {}",
                           ch.present(0) ? dtype_name(*d[0]) : "missing"));
    ch.require(coord == "align_corners" || coord == "asymmetric" || coord == half,
               fmt::format("tflite_arithmetic with mode '{}' takes coordinate_transformation_mode align_corners, "
                           "asymmetric or {}, not '{}'", mode, half, coord));
    ch.require(n.attr_ints("axes", {}).size() == 2, "tflite_arithmetic needs 'axes' with the two spatial axes (H, W)");
    return ch.reason;
  }
  const bool q8 = ch.present(0) && (*d[0] == DType::UInt8 || *d[0] == DType::Int8);
  ch.require(mode == "nearest" || !ch.present(0) || *d[0] == DType::Float32 || (mode == "linear" && q8),
             fmt::format("mode '{}' takes {} X, the node's X is {} (mode 'nearest' takes all five dtypes)", mode,
                         mode == "linear" ? "float32, uint8 or int8" : "float32",
                         ch.present(0) ? dtype_name(*d[0]) : "missing"));
  const std::string coord = n.attr_string("coordinate_transformation_mode", "half_pixel");
  ch.require(coord_mode(coord).has_value(),
             fmt::format("coordinate_transformation_mode '{}' is not an ONNX mode", coord));
  if (mode == "linear" && q8) {
    // ONNX Runtime's 8-bit arithmetic (run_ort_linear_q8), for the coordinate modes it was
    // compared with ONNX Runtime on.
    ch.require(coord != "tf_crop_and_resize" && coord != "half_pixel_symmetric",
               fmt::format("mode 'linear' on {} X takes coordinate_transformation_mode half_pixel, "
                           "pytorch_half_pixel, align_corners, asymmetric or tf_half_pixel_for_nn, not '{}'",
                           dtype_name(*d[0]), coord));
    ch.require(n.attr_string("keep_aspect_ratio_policy", "stretch") == "stretch",
               fmt::format("mode 'linear' on {} X takes keep_aspect_ratio_policy 'stretch' only", dtype_name(*d[0])));
  }
  const std::string nearest = n.attr_string("nearest_mode", "round_prefer_floor");
  ch.require(nearest_mode(nearest).has_value(), fmt::format("nearest_mode '{}' is not an ONNX mode", nearest));
  ch.require(n.attr_int("antialias", 0) == 0, "antialias=1 is not implemented");
  const std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
  ch.require(policy == "stretch" || policy == "not_larger" || policy == "not_smaller",
             fmt::format("keep_aspect_ratio_policy '{}' is not an ONNX policy", policy));
  return ch.reason;
}

// Output shape and the per-dim scale and crop window, from the attributes and inputs.
struct ResizePlan {
  Shape out;
  std::vector<double> scale;     // output / input per dim (1 for dims not resized)
  std::vector<double> roi_start;  // normalized crop window per dim (tf_crop_and_resize)
  std::vector<double> roi_end;
  std::vector<bool> resized;     // dims listed in `axes`
  bool by_scales = false;        // the output size came from `scales` (else from `sizes`)
};

// `ort_sizes`: output dims from `scales` as ONNX Runtime computes them, the float32 product
// scale * dim truncated (every ONNX Resize: models are made for ONNX Runtime, and a model whose
// next node expects ORT's shape must get it); else the spec's floor of the exact product (a
// float32 product can round up to the next integer, e.g. 0.7f * 10 gives 7 where the spec gives
// 6; TFLite's resizes take sizes, where both agree).
ResizePlan resize_plan(const Ctx& c, const Shape& x, bool need_roi, bool ort_sizes = false) {
  const auto rank = static_cast<std::int64_t>(x.size());
  std::vector<std::size_t> axes;
  std::vector<bool> listed(x.size(), false);
  if (c.node.attributes.count("axes")) {
    for (auto a : c.node.attr_ints("axes", {})) {
      const auto ax = static_cast<std::size_t>(c.axis(a, rank, "axes entry"));
      if (listed[ax]) c.bad(fmt::format("axis {} is listed twice in 'axes'", a));
      listed[ax] = true;
      axes.push_back(ax);
    }
  } else {
    for (std::size_t d = 0; d < x.size(); ++d) axes.push_back(d);
    listed.assign(x.size(), true);
  }
  ResizePlan p;
  p.out = x;
  p.scale.assign(x.size(), 1.0);
  p.roi_start.assign(x.size(), 0.0);
  p.roi_end.assign(x.size(), 1.0);
  p.resized = listed;
  // The opset-10 form (X, scales) has its scales at input 1.
  const std::size_t scales_input = c.node.inputs.size() == 2 ? 1 : 2;
  const bool has_scales = c.has(scales_input) && element_count(*c.in[scales_input].shape) > 0;
  const bool has_sizes = c.node.inputs.size() > 2 && c.has(3) && element_count(*c.in[3].shape) > 0;
  if (has_scales == has_sizes) {
    c.bad(has_scales ? "both scales and sizes are given; exactly one must be non-empty"
                     : "neither scales nor sizes is given; exactly one must be non-empty");
  }
  p.by_scales = has_scales;
  if (has_scales) {
    const Tensor& s = c.constant(scales_input, "scales");
    if (static_cast<std::size_t>(s.elements()) != axes.size()) {
      c.bad(fmt::format("scales has {} values for {} axes", s.elements(), axes.size()));
    }
    auto sv = s.as<float>();
    for (std::size_t i = 0; i < axes.size(); ++i) {
      if (!(sv[i] > 0.0f)) c.bad(fmt::format("scales[{}] = {} must be > 0", i, sv[i]));
      p.scale[axes[i]] = static_cast<double>(sv[i]);
      p.out[axes[i]] = ort_sizes ? static_cast<std::int64_t>(sv[i] * static_cast<float>(x[axes[i]]))
                                 : static_cast<std::int64_t>(std::floor(static_cast<double>(x[axes[i]]) * p.scale[axes[i]]));
    }
  } else {
    const auto sizes = int_values(c.constant(3, "sizes"));
    if (sizes.size() != axes.size()) c.bad(fmt::format("sizes has {} values for {} axes", sizes.size(), axes.size()));
    const std::string policy = c.node.attr_string("keep_aspect_ratio_policy", "stretch");
    for (std::size_t i = 0; i < axes.size(); ++i) {
      if (sizes[i] < 0) c.bad(fmt::format("sizes[{}] = {} must be >= 0", i, sizes[i]));
      if (x[axes[i]] == 0) c.bad("cannot resize a dim of size 0");
    }
    if (policy == "stretch") {
      for (std::size_t i = 0; i < axes.size(); ++i) {
        p.out[axes[i]] = sizes[i];
        p.scale[axes[i]] = static_cast<double>(sizes[i]) / static_cast<double>(x[axes[i]]);
      }
    } else {
      // One scale for all listed axes, the smallest (not_larger) or largest (not_smaller) of
      // sizes / input; output dims round(scale * input) with halves rounded up (the spec).
      double s = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const double r = static_cast<double>(sizes[i]) / static_cast<double>(x[axes[i]]);
        s = policy == "not_larger" ? std::min(s, r) : std::max(s, r);
      }
      for (auto ax : axes) {
        p.scale[ax] = s;
        p.out[ax] = static_cast<std::int64_t>(std::floor(s * static_cast<double>(x[ax]) + 0.5));
      }
    }
  }
  const Coord coord = c.node.inputs.size() == 2
                          ? Coord::Asymmetric
                          : *coord_mode(c.node.attr_string("coordinate_transformation_mode", "half_pixel"));
  if (need_roi && coord == Coord::TfCropAndResize) {
    const Tensor* roi = c.opt(1);
    if (!roi || roi->elements() == 0) c.bad("coordinate_transformation_mode 'tf_crop_and_resize' needs the roi input");
    if (static_cast<std::size_t>(roi->elements()) != 2 * axes.size()) {
      c.bad(fmt::format("roi has {} values, 2 x {} axes expected", roi->elements(), axes.size()));
    }
    auto rv = roi->as<float>();
    for (std::size_t i = 0; i < axes.size(); ++i) {
      p.roi_start[axes[i]] = static_cast<double>(rv[i]);
      p.roi_end[axes[i]] = static_cast<double>(rv[axes.size() + i]);
    }
  }
  return p;
}

// Whether the node takes the 8-bit linear path (run_ort_linear_q8).
bool ort_linear_q8(const Node& n, DType x) {
  return (x == DType::UInt8 || x == DType::Int8) && n.attr_string("mode", "nearest") == "linear" &&
         n.attr_int("tflite_arithmetic", 0) == 0;
}

OutInfos infer_resize(const Ctx& c) {
  const Shape& x = c.shape(0, "X");
  const DType dt = c.dtype(0, "X");
  return {{dt, resize_plan(c, x, false, c.node.attr_int("tflite_arithmetic", 0) == 0).out}};
}

// Input coordinate of output coordinate `o` along one dim (the spec's formulas).
double source_coord(Coord mode, double o, double scale, std::int64_t in_len, std::int64_t out_len,
                    double roi_start, double roi_end) {
  const double in = static_cast<double>(in_len), out = static_cast<double>(out_len);
  switch (mode) {
    case Coord::HalfPixel: return (o + 0.5) / scale - 0.5;
    case Coord::PytorchHalfPixel: return out_len > 1 ? (o + 0.5) / scale - 0.5 : 0.0;
    case Coord::AlignCorners: return out_len == 1 ? 0.0 : o * (in - 1) / (out - 1);
    case Coord::Asymmetric: return o / scale;
    case Coord::TfHalfPixelForNn: return (o + 0.5) / scale;
    case Coord::TfCropAndResize:
      return out_len > 1 ? roi_start * (in - 1) + o * (roi_end - roi_start) * (in - 1) / (out - 1)
                         : 0.5 * (roi_start + roi_end) * (in - 1);
    case Coord::HalfPixelSymmetric: {
      const double adjustment = out / (scale * in);
      const double offset = in / 2 * (1 - adjustment);
      return offset + (o + 0.5) / scale - 0.5;
    }
  }
  return 0.0;
}

std::int64_t round_nearest(Nearest mode, double x) {
  const double f = std::floor(x);
  switch (mode) {
    case Nearest::Floor: return static_cast<std::int64_t>(f);
    case Nearest::Ceil: return static_cast<std::int64_t>(std::ceil(x));
    case Nearest::RoundPreferFloor:
      return static_cast<std::int64_t>(x - f == 0.5 ? f : std::round(x));
    case Nearest::RoundPreferCeil:
      return static_cast<std::int64_t>(x - f == 0.5 ? f + 1 : std::round(x));
  }
  return 0;
}

// Per output coordinate of one dim: the two source indices (clamped to the edge), the weight of
// the second, and whether the coordinate lies outside the input (tf_crop_and_resize only).
struct Tap {
  std::int64_t i0 = 0, i1 = 0;
  double w1 = 0.0;
  bool outside = false;
};

// ONNX Runtime's rounding of the opset-10 form (its "simple" nearest mode): the source
// coordinate truncated when upsampling, rounded up when downsampling (the opset-10 spec leaves
// the rule open; the Upsample-9 rule it replaced is the truncation).
std::int64_t opset10_nearest(double x, double scale) {
  return static_cast<std::int64_t>(scale < 1.0 ? std::ceil(x) : std::trunc(x));
}

// Per output coordinate of one dim in mode cubic: four source indices and their weights (the
// spec's cubic convolution with coefficient a, Keys 1981: taps floor(x) - 1 .. floor(x) + 2 at
// fraction t = x - floor(x)); taps outside the input take the edge value, or with
// exclude_outside get weight 0 and the others are renormalised to sum 1. Like the linear taps,
// dims not resized map 1:1.
struct CubicTap {
  std::array<std::int64_t, 4> i{};
  std::array<double, 4> w{};
  bool outside = false;
};

std::vector<CubicTap> cubic_taps(const ResizePlan& p, std::size_t d, std::int64_t in_len, Coord coord, double a,
                                 bool exclude_outside) {
  const std::int64_t out_len = p.out[d];
  std::vector<CubicTap> taps(static_cast<std::size_t>(out_len));
  for (std::int64_t o = 0; o < out_len; ++o) {
    CubicTap& t = taps[static_cast<std::size_t>(o)];
    if (!p.resized[d]) {
      t.i = {o, o, o, o};
      t.w = {0.0, 1.0, 0.0, 0.0};
      continue;
    }
    const double x = source_coord(coord, static_cast<double>(o), p.scale[d], in_len, out_len, p.roi_start[d],
                                  p.roi_end[d]);
    if (coord == Coord::TfCropAndResize && (x < 0 || x > static_cast<double>(in_len - 1))) {
      t.outside = true;
      continue;
    }
    const double f = std::floor(x), u = x - f;
    const double d0 = u + 1, d1 = u, d2 = 1 - u, d3 = 2 - u;  // distances to the four taps
    t.w = {((a * d0 - 5 * a) * d0 + 8 * a) * d0 - 4 * a, ((a + 2) * d1 - (a + 3)) * d1 * d1 + 1,
           ((a + 2) * d2 - (a + 3)) * d2 * d2 + 1, ((a * d3 - 5 * a) * d3 + 8 * a) * d3 - 4 * a};
    double sum = 0;
    for (int k = 0; k < 4; ++k) {
      const std::int64_t src = static_cast<std::int64_t>(f) - 1 + k;
      if (exclude_outside && (src < 0 || src >= in_len)) t.w[static_cast<std::size_t>(k)] = 0;
      sum += t.w[static_cast<std::size_t>(k)];
      t.i[static_cast<std::size_t>(k)] = std::clamp<std::int64_t>(src, 0, in_len - 1);
    }
    if (exclude_outside && sum != 0) {
      for (double& w : t.w) w /= sum;
    }
  }
  return taps;
}

std::vector<Tap> dim_taps(const ResizePlan& p, std::size_t d, std::int64_t in_len, Coord coord,
                          bool linear, Nearest nearest, bool opset10) {
  const std::int64_t out_len = p.out[d];
  std::vector<Tap> taps(static_cast<std::size_t>(out_len));
  for (std::int64_t o = 0; o < out_len; ++o) {
    Tap& t = taps[static_cast<std::size_t>(o)];
    if (!p.resized[d]) {
      t.i0 = t.i1 = o;
      continue;
    }
    const double x = source_coord(coord, static_cast<double>(o), p.scale[d], in_len, out_len,
                                  p.roi_start[d], p.roi_end[d]);
    if (coord == Coord::TfCropAndResize && (x < 0 || x > static_cast<double>(in_len - 1))) {
      t.outside = true;
      continue;
    }
    if (linear) {
      const double f = std::floor(x);
      t.i0 = std::clamp<std::int64_t>(static_cast<std::int64_t>(f), 0, in_len - 1);
      t.i1 = std::clamp<std::int64_t>(static_cast<std::int64_t>(f) + 1, 0, in_len - 1);
      t.w1 = t.i0 == t.i1 ? 0.0 : x - f;
    } else {
      t.i0 = t.i1 = std::clamp<std::int64_t>(opset10 ? opset10_nearest(x, p.scale[d]) : round_nearest(nearest, x), 0,
                                             in_len - 1);
    }
  }
  return taps;
}


// ---------------------------------------------------------------------------------------------
// TFLite arithmetic (attribute tflite_arithmetic = 1)
// ---------------------------------------------------------------------------------------------
//
// The importer of .tflite models maps RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR onto Resize with
// `axes` = the two spatial axes (H then W), `sizes` for them, and
// coordinate_transformation_mode align_corners (TFLite align_corners), half_pixel (bilinear) or
// tf_half_pixel_for_nn (nearest) (TFLite half_pixel_centers), else asymmetric. With
// tflite_arithmetic = 1 the result is bit-exact with TFLite's reference kernels
// (tensorflow/lite/kernels/internal/reference/resize_bilinear.h and resize_nearest_neighbor.h,
// selected by tensorflow/lite/kernels/resize_bilinear.cc for the kReference kernel type):
//  - scale per axis, in float32: (in - 1) / (out - 1) with align_corners and out > 1, else
//    in / out;
//  - bilinear source coordinate in float32: (o + 0.5) * scale - 0.5 with half_pixel_centers,
//    else o * scale; lower index max(floor(c), 0), upper index min(ceil(c), in - 1), and the
//    fractions dy = c - lower, dx likewise (so for c < 0 the weights are 1 - dy > 1 and dy < 0
//    on the same row, which sums to that row);
//  - float32 and uint8 (the generic template reference_ops::ResizeBilinear<T> in
//    reference/resize_bilinear.h, which resize_bilinear.cc's Eval picks for kTfLiteFloat32 and
//    kTfLiteUInt8; only int8 / int16 go to ResizeBilinearInteger): the float32 sum
//    v00 (1 - dy)(1 - dx) + v10 dy (1 - dx) + v01 (1 - dy) dx + v11 dy dx + rounding_offset,
//    evaluated left to right in that order, then static_cast<T>. rounding_offset is
//    `std::numeric_limits<T>::is_integer ? .5f : .0f`: 0 for float32, and 0.5 for uint8, so
//    uint8 rounds half up (truncation of sum + 0.5f), not a plain truncation of the sum;
//  - int8 (ResizeBilinearInteger): scales in 1/1024 units, ((1024 in + out / 2) / out, with
//    align_corners ((1024 (in - 1) + (out - 1) / 2) / (out - 1)), integer division), coordinate
//    o * scale (+ scale / 2 - 512 with half_pixel_centers), indices c / 1024 (C division) and
//    (c + 1023) / 1024 clamped as above, the four products with 10-bit weights summed in int64
//    and divided by 2^20 after adding 2^19 (or subtracting it when the sum is not positive),
//    i.e. rounded half away from zero;
//  - nearest (GetNearestNeighbor): source index of output o is floor((o + offset) * scale), or
//    round-half-away-from-zero of it with align_corners, offset 0.5 with half_pixel_centers
//    else 0, computed in float32, then clamped to [0, in - 1].
// Node-level checks: the op must list exactly two axes; other dims keep their size.

struct TfliteFlags {
  bool align_corners = false;
  bool half_pixel_centers = false;
};

TfliteFlags tflite_flags(const Node& n) {
  const std::string coord = n.attr_string("coordinate_transformation_mode", "half_pixel");
  return {coord == "align_corners", coord == "half_pixel" || coord == "tf_half_pixel_for_nn"};
}

float tflite_scale(std::int64_t in, std::int64_t out, bool align_corners) {
  if (align_corners && out > 1) return static_cast<float>(in - 1) / static_cast<float>(out - 1);
  return static_cast<float>(in) / static_cast<float>(out);
}

// One axis of the bilinear kernels: lower/upper source index and the float fraction per output
// coordinate (float32 / uint8 kernel), or the 10-bit fixed-point coordinate (int8 kernel).
struct TfliteAxis {
  std::vector<std::int64_t> lo, hi;
  std::vector<float> frac;         // c - lo (float32 kernel)
  std::vector<std::int32_t> c10;   // coordinate in 1/1024 units (integer kernel)
};

TfliteAxis tflite_float_axis(std::int64_t in, std::int64_t out, TfliteFlags f) {
  TfliteAxis a;
  const float scale = tflite_scale(in, out, f.align_corners);
  for (std::int64_t o = 0; o < out; ++o) {
    const float c = f.half_pixel_centers ? (static_cast<float>(o) + 0.5f) * scale - 0.5f : static_cast<float>(o) * scale;
    const auto lo = std::max<std::int64_t>(static_cast<std::int32_t>(std::floor(c)), 0);
    const auto hi = std::min<std::int64_t>(static_cast<std::int32_t>(std::ceil(c)), in - 1);
    a.lo.push_back(lo);
    a.hi.push_back(hi);
    a.frac.push_back(c - static_cast<float>(lo));
  }
  return a;
}

TfliteAxis tflite_integer_axis(std::int64_t in, std::int64_t out, TfliteFlags f) {
  TfliteAxis a;
  const auto in32 = static_cast<std::int32_t>(in), out32 = static_cast<std::int32_t>(out);
  std::int32_t scale10 = ((1 << 10) * in32 + out32 / 2) / out32;
  if (f.align_corners && out32 > 1) scale10 = ((1 << 10) * (in32 - 1) + (out32 - 1) / 2) / (out32 - 1);
  for (std::int32_t o = 0; o < out32; ++o) {
    const std::int32_t c = f.half_pixel_centers ? o * scale10 + scale10 / 2 - (1 << 9) : o * scale10;
    a.lo.push_back(std::max(c / (1 << 10), 0));
    a.hi.push_back(std::min((c + (1 << 10) - 1) / (1 << 10), in32 - 1));
    a.c10.push_back(c);
  }
  return a;
}

std::vector<std::int64_t> tflite_nearest_axis(std::int64_t in, std::int64_t out, TfliteFlags f) {
  std::vector<std::int64_t> idx;
  const float scale = tflite_scale(in, out, f.align_corners);
  const float offset = f.half_pixel_centers ? 0.5f : 0.0f;
  for (std::int64_t o = 0; o < out; ++o) {
    const float c = (static_cast<float>(o) + offset) * scale;
    auto v = static_cast<std::int64_t>(static_cast<std::int32_t>(f.align_corners ? std::round(c) : std::floor(c)));
    v = std::min(v, in - 1);
    if (f.half_pixel_centers) v = std::max<std::int64_t>(v, 0);
    idx.push_back(v);
  }
  return idx;
}

std::vector<Tensor> run_tflite_resize(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Shape& xs = x.shape();
  const ResizePlan p = resize_plan(c, xs, false);
  const auto axes = c.node.attr_ints("axes", {});
  const auto ya = static_cast<std::size_t>(c.axis(axes[0], static_cast<std::int64_t>(xs.size()), "axes entry"));
  const auto xa = static_cast<std::size_t>(c.axis(axes[1], static_cast<std::int64_t>(xs.size()), "axes entry"));
  if (ya >= xa) c.bad("tflite_arithmetic needs 'axes' in increasing order (H before W)");
  const TfliteFlags f = tflite_flags(c.node);
  const bool linear = c.node.attr_string("mode", "nearest") == "linear";
  Tensor y(o[0].first, o[0].second);
  if (y.elements() == 0) return {std::move(y)};
  if (!linear) {
    std::vector<std::vector<std::int64_t>> tables(xs.size());
    for (std::size_t d = 0; d < xs.size(); ++d) {
      if (d == ya || d == xa) {
        tables[d] = tflite_nearest_axis(xs[d], p.out[d], f);
      } else {
        for (std::int64_t i = 0; i < xs[d]; ++i) tables[d].push_back(i);
      }
    }
    gather_indexed(dtype_size(x.dtype()), x.bytes().data(), xs, y.bytes().data(), p.out, tables, nullptr);
    return {std::move(y)};
  }
  // View the tensor as [outer, H, between, W, inner] around the two spatial axes.
  auto prod = [&](const Shape& s, std::size_t a, std::size_t b) {
    std::int64_t n = 1;
    for (std::size_t d = a; d < b; ++d) n *= s[d];
    return n;
  };
  const std::int64_t outer = prod(xs, 0, ya), between = prod(xs, ya + 1, xa), inner = prod(xs, xa + 1, xs.size());
  const std::int64_t ih = xs[ya], iw = xs[xa], oh = p.out[ya], ow = p.out[xa];
  auto in_at = [&](std::int64_t b, std::int64_t h, std::int64_t m, std::int64_t w, std::int64_t k) {
    return (((b * ih + h) * between + m) * iw + w) * inner + k;
  };
  auto out_at = [&](std::int64_t b, std::int64_t h, std::int64_t m, std::int64_t w, std::int64_t k) {
    return (((b * oh + h) * between + m) * ow + w) * inner + k;
  };
  if (x.dtype() == DType::Int8) {
    const TfliteAxis ay = tflite_integer_axis(ih, oh, f), ax = tflite_integer_axis(iw, ow, f);
    const auto* src = x.as<std::int8_t>().data();
    auto* dst = y.as<std::int8_t>().data();
    for (std::int64_t b = 0; b < outer; ++b)
      for (std::int64_t h = 0; h < oh; ++h) {
        const auto hu = static_cast<std::size_t>(h);
        const std::int64_t y0 = ay.lo[hu], y1 = ay.hi[hu];
        const std::int64_t wy1 = ay.c10[hu] - (1 << 10) * y0, wy0 = (1 << 10) - wy1;
        for (std::int64_t m = 0; m < between; ++m)
          for (std::int64_t w = 0; w < ow; ++w) {
            const auto wu = static_cast<std::size_t>(w);
            const std::int64_t x0 = ax.lo[wu], x1 = ax.hi[wu];
            const std::int64_t wx1 = ax.c10[wu] - (1 << 10) * x0, wx0 = (1 << 10) - wx1;
            for (std::int64_t k = 0; k < inner; ++k) {
              const std::int64_t sum = src[in_at(b, y0, m, x0, k)] * wy0 * wx0 + src[in_at(b, y1, m, x0, k)] * wy1 * wx0 +
                                       src[in_at(b, y0, m, x1, k)] * wy0 * wx1 + src[in_at(b, y1, m, x1, k)] * wy1 * wx1;
              const std::int64_t round = sum > 0 ? (1 << 19) : -(1 << 19);
              dst[out_at(b, h, m, w, k)] = static_cast<std::int8_t>(std::clamp<std::int64_t>((sum + round) / (1 << 20), -128, 127));
            }
          }
      }
    return {std::move(y)};
  }
  const TfliteAxis ay = tflite_float_axis(ih, oh, f), ax = tflite_float_axis(iw, ow, f);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, std::uint8_t>) {
      const T* src = x.as<T>().data();
      T* dst = y.as<T>().data();
      for (std::int64_t b = 0; b < outer; ++b)
        for (std::int64_t h = 0; h < oh; ++h) {
          const auto hu = static_cast<std::size_t>(h);
          const std::int64_t y0 = ay.lo[hu], y1 = ay.hi[hu];
          const float dy = ay.frac[hu], ry = 1.0f - dy;
          for (std::int64_t m = 0; m < between; ++m)
            for (std::int64_t w = 0; w < ow; ++w) {
              const auto wu = static_cast<std::size_t>(w);
              const std::int64_t x0 = ax.lo[wu], x1 = ax.hi[wu];
              const float dx = ax.frac[wu], rx = 1.0f - dx;
              for (std::int64_t k = 0; k < inner; ++k) {
                const float v = static_cast<float>(src[in_at(b, y0, m, x0, k)]) * ry * rx +
                                static_cast<float>(src[in_at(b, y1, m, x0, k)]) * dy * rx +
                                static_cast<float>(src[in_at(b, y0, m, x1, k)]) * ry * dx +
                                static_cast<float>(src[in_at(b, y1, m, x1, k)]) * dy * dx;
                if constexpr (std::is_same_v<T, float>) {
                  dst[out_at(b, h, m, w, k)] = v;
                } else {
                  // reference_ops::ResizeBilinear<uint8_t> (TFLite 2.14,
                  // kernels/internal/reference/resize_bilinear.h): static_cast<uint8_t>(sum +
                  // rounding_offset) with rounding_offset = 0.5f, the 0.5f added last in float32.
                  // The clamp keeps the conversion defined (a float outside [0, 256) converted
                  // to uint8_t is UB) for sums rounded just below 0; in range it changes nothing.
                  const float rounded = v + 0.5f;
                  dst[out_at(b, h, m, w, k)] = static_cast<std::uint8_t>(std::clamp(std::trunc(rounded), 0.0f, 255.0f));
                }
              }
            }
        }
    }
  });
  return {std::move(y)};
}

// ---------------------------------------------------------------------------------------------
// Mode linear on uint8 / int8 X: ONNX Runtime's CPU arithmetic
// ---------------------------------------------------------------------------------------------
//
// ONNX Runtime's quantizer (QOperator form) leaves Resize on uint8 (or int8) tensors between
// QLinearConvs. Its CPU kernel (onnxruntime/core/providers/cpu/tensor/upsample.cc, upsample.h,
// upsamplebase.h) does everything in float32, and the result here is bit-exact with ONNX Runtime
// 1.30 (tests/reference/test_resize_ort.cpp):
//  - scale per dim in float32: the `scales` value, or float(out) / float(in) with `sizes`;
//    output dim from `scales` = the float32 product scale * in, truncated;
//  - source coordinate of output o in float32 by the coordinate mode's formula (asymmetric
//    o / s, half_pixel (o + 0.5) / s - 0.5, pytorch_half_pixel the same or 0 when out = 1,
//    align_corners o * (in - 1) / (out - 1) or 0 when out = 1, tf_half_pixel_for_nn
//    (o + 0.5) / s), or o itself when the dim's scale is 1; clamped to [0, in - 1];
//  - taps i1 = (int) c, i2 = min(i1 + 1, in - 1); weights |c - i2| for i1 and |c - i1| for i2,
//    or 1/2 and 1/2 when i1 = i2 (the last row / column);
//  - integer path (NhwcUpsampleBilinearInteger): 10-bit fixed point weights,
//    w = |(int) (c * 1024) - 1024 i2| for i1 and |(int) (c * 1024) - 1024 i1| for i2 (512 and
//    512 when i1 = i2); output = the sum of the four products wy * wx * x in int32, divided by
//    2^20 (C division: truncated toward zero);
//  - float path (UpsampleBilinear, UpsampleTrilinear): output = the sum over the corners, x
//    fastest then y then z, of ((wx * wy) [* wz]) * x in float32, converted to the 8-bit type
//    (truncated toward zero);
//  - which path: 4-D X with scales 1 on N and C (NCHW) is run the way a quantized model gets it:
//    ONNX Runtime's NHWC transformer turns QLinearConv into NhwcQLinearConv and the Resize
//    between two of them into a Resize of the [N, H, W, C] tensor with scales [1, sh, sw, 1],
//    whose kernel takes the integer path over H, W when sh != 1, and when sh = 1 the float path
//    of an "NCHW" tensor, with W as its rows and C (scale 1, so 1/2 and 1/2 on the last
//    channel) as its columns. 4-D X with scales 1 on N and the last dim (NHWC) takes the integer
//    path over dims 1, 2. 2-D X (bilinear) and 3-D X or 5-D X with scales 1 on N and C
//    (trilinear over the other dims) take the float path; other ranks are refused, as ONNX
//    Runtime refuses them.
//  ONNX Runtime runs a lone NCHW 8-bit Resize (not between NHWC operators) through the float
//  path over H, W instead, one step off the quantized model's result in a few percent of the
//  elements (tests/reference/test_resize_ort.cpp shows both); this library follows the
//  quantized model.

// Source coordinate of output o along one dim, in float32 as ONNX Runtime computes it.
float ort_source_coord(Coord mode, float o, float scale, float out_len, float in_len) {
  switch (mode) {
    case Coord::Asymmetric: return o / scale;
    case Coord::PytorchHalfPixel: return out_len > 1 ? (o + 0.5f) / scale - 0.5f : 0.0f;
    case Coord::TfHalfPixelForNn: return (o + 0.5f) / scale;
    case Coord::AlignCorners: return out_len == 1 ? 0.0f : o * (in_len - 1) / (out_len - 1);
    case Coord::HalfPixel: return (o + 0.5f) / scale - 0.5f;
    case Coord::TfCropAndResize:
    case Coord::HalfPixelSymmetric: break;  // refused by check_resize for 8-bit X
  }
  throw Error(ErrorCode::Internal, "resize: coordinate mode without an 8-bit linear rule");
}

// One output coordinate of one dim: the two source indices and their weights, in float32 and in
// 1/1024 units.
struct OrtTap {
  std::int64_t i1 = 0, i2 = 0;
  float w1 = 0, w2 = 0;            // weights of i1 and i2
  std::int32_t w1_10 = 0, w2_10 = 0;
};

std::vector<OrtTap> ort_taps(Coord mode, std::int64_t in, std::int64_t out, float scale) {
  std::vector<OrtTap> taps(static_cast<std::size_t>(out));
  const float last = static_cast<float>(in - 1);
  for (std::int64_t o = 0; o < out; ++o) {
    OrtTap& t = taps[static_cast<std::size_t>(o)];
    float x = scale == 1.0f ? static_cast<float>(o)
                            : ort_source_coord(mode, static_cast<float>(o), scale, static_cast<float>(out),
                                               static_cast<float>(in));
    x = std::max(0.0f, std::min(x, last));
    const auto x10 = static_cast<std::int32_t>(x * 1024.0f);
    t.i1 = std::min<std::int64_t>(static_cast<std::int32_t>(x), in - 1);
    t.i2 = std::min<std::int64_t>(t.i1 + 1, in - 1);
    if (t.i1 == t.i2) {
      t.w1 = t.w2 = 0.5f;
      t.w1_10 = t.w2_10 = 512;
    } else {
      t.w1 = std::fabs(x - static_cast<float>(t.i2));
      t.w2 = std::fabs(x - static_cast<float>(t.i1));
      t.w1_10 = std::abs(x10 - static_cast<std::int32_t>(t.i2) * 1024);
      t.w2_10 = std::abs(x10 - static_cast<std::int32_t>(t.i1) * 1024);
    }
  }
  return taps;
}

// ONNX Runtime's UpsampleBilinear / UpsampleTrilinear over `dims` (outermost first), the taps
// per dim in the same order: per output the sum over the corners, the innermost dim's index
// fastest, of ((w_inner * w_next) [* w_outer]) * x in float32; `integer` (8-bit X only): the
// NHWC integer path instead. 8-bit outputs are truncated and clamped, float32 ones stored as is.
template <class T>
void interpolate_ort(const T* src, const Shape& xs, T* dst, const Shape& ys,
                     const std::vector<std::size_t>& dims,
                     const std::vector<std::vector<OrtTap>>& taps, bool integer) {
  const std::size_t r = xs.size(), k = dims.size();
  const auto st = contiguous_strides(xs);
  std::vector<bool> interp(r, false);
  for (auto d : dims) interp[d] = true;
  std::vector<std::int64_t> idx(r, 0);
  const std::size_t corners = std::size_t{1} << k;
  const std::int64_t total = element_count(ys);
  for (std::int64_t i = 0; i < total; ++i) {
    std::int64_t base = 0;
    for (std::size_t d = 0; d < r; ++d) {
      if (!interp[d]) base += idx[d] * st[d];
    }
    // Corner m takes, for the j-th interpolated dim from the innermost, i2 when bit j of m is set.
    std::int32_t iacc = 0;
    float facc = 0.0f;
    for (std::size_t m = 0; m < corners; ++m) {
      std::int64_t off = base;
      std::int32_t iw = 1;
      float fw = 1.0f;
      for (std::size_t j = 0; j < k; ++j) {
        const std::size_t d = dims[k - 1 - j];
        const OrtTap& t = taps[k - 1 - j][static_cast<std::size_t>(idx[d])];
        const bool hi = (m >> j) & 1u;
        off += (hi ? t.i2 : t.i1) * st[d];
        iw *= hi ? t.w2_10 : t.w1_10;
        fw *= hi ? t.w2 : t.w1;
      }
      if (integer) {
        iacc += iw * static_cast<std::int32_t>(src[off]);
      } else {
        facc += fw * static_cast<float>(src[off]);
      }
    }
    if constexpr (std::is_floating_point_v<T>) {
      dst[i] = facc;
    } else {
      constexpr float lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
      dst[i] = integer ? static_cast<T>(iacc / (1 << 20))
                       : static_cast<T>(std::clamp(std::trunc(facc), lo, hi));
    }
    for (std::size_t d = r; d-- > 0;) {
      if (++idx[d] < ys[d]) break;
      idx[d] = 0;
    }
  }
}

std::vector<Tensor> run_ort_linear_q8(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Shape& xs = x.shape();
  const ResizePlan p = resize_plan(c, xs, false, true);
  const Coord coord = c.node.inputs.size() == 2
                          ? Coord::Asymmetric
                          : *coord_mode(c.node.attr_string("coordinate_transformation_mode", "half_pixel"));
  Tensor y(o[0].first, o[0].second);
  if (y.elements() == 0) return {std::move(y)};
  const std::size_t r = xs.size();
  std::vector<float> scale(r, 1.0f);
  for (std::size_t d = 0; d < r; ++d) {
    if (!p.resized[d]) continue;
    scale[d] = p.by_scales ? static_cast<float>(p.scale[d])
                           : static_cast<float>(p.out[d]) / static_cast<float>(xs[d]);
  }
  // ONNX Runtime's interpolated dims per rank, outermost first.
  std::vector<std::size_t> dims;
  bool integer = false;
  if (r == 2) {
    dims = {0, 1};
  } else if (r == 3) {
    dims = {0, 1, 2};
  } else if (r == 4 && scale[0] == 1.0f && scale[1] == 1.0f) {
    // NCHW, as ONNX Runtime runs it after moving it to NHWC: [N, H, W, C] with scales
    // [1, sh, sw, 1] takes the integer path when sh != 1, else the float path of an "NCHW"
    // tensor, which interpolates W as its rows and C (scale 1) as its columns.
    if (scale[2] != 1.0f) {
      dims = {2, 3};
      integer = true;
    } else {
      dims = {3, 1};
    }
  } else if (r == 4 && scale[0] == 1.0f && scale[3] == 1.0f) {
    dims = {1, 2};
    integer = true;
  } else if (r == 5 && scale[0] == 1.0f && scale[1] == 1.0f) {
    dims = {2, 3, 4};
  } else {
    std::string scales;
    for (std::size_t d = 0; d < r; ++d) scales += fmt::format("{}{}", d ? ", " : "", scale[d]);
    c.bad(fmt::format("mode 'linear' on {} X of rank {} with scales [{}] is not implemented: ONNX Runtime's "
                      "arithmetic covers rank 2 and 3, rank 4 with scale 1 on dims 0 and 1 or on dims 0 and 3, "
                      "and rank 5 with scale 1 on dims 0 and 1",
                      dtype_name(x.dtype()), r, scales));
  }
  std::vector<std::vector<OrtTap>> taps;
  for (auto d : dims) taps.push_back(ort_taps(coord, xs[d], p.out[d], scale[d]));
  if (x.dtype() == DType::UInt8) {
    interpolate_ort(x.as<std::uint8_t>().data(), xs, y.as<std::uint8_t>().data(), p.out, dims, taps,
                    integer);
  } else {
    interpolate_ort(x.as<std::int8_t>().data(), xs, y.as<std::int8_t>().data(), p.out, dims, taps,
                    integer);
  }
  return {std::move(y)};
}

// Mode cubic (float32): per output element the weighted sum over the 4^k taps of the k resized
// dims (weights in double, their product per tap, as the ONNX reference's separable
// interpolation computes them), or extrapolation_value outside a tf_crop_and_resize window.
Tensor run_cubic(const Tensor& x, const ResizePlan& p, Coord coord, float a, bool exclude_outside, float extrapolation,
                 Tensor y) {
  const Shape& xs = x.shape();
  const std::size_t r = xs.size();
  std::vector<std::vector<CubicTap>> taps(r);
  std::vector<std::size_t> active;
  for (std::size_t d = 0; d < r; ++d) {
    taps[d] = cubic_taps(p, d, xs[d], coord, static_cast<double>(a), exclude_outside);
    if (p.resized[d]) active.push_back(d);
  }
  const auto st = contiguous_strides(xs);
  const float* src = x.as<float>().data();
  auto out = y.as<float>();
  std::vector<std::int64_t> idx(r, 0);
  std::size_t corners = 1;
  for (std::size_t k = 0; k < active.size(); ++k) corners *= 4;
  for (std::int64_t i = 0; i < y.elements(); ++i) {
    bool outside = false;
    std::int64_t base = 0;
    for (std::size_t d = 0; d < r; ++d) {
      const CubicTap& t = taps[d][static_cast<std::size_t>(idx[d])];
      outside = outside || t.outside;
      if (!p.resized[d]) base += idx[d] * st[d];
    }
    double acc = 0.0;
    if (!outside) {
      for (std::size_t m = 0; m < corners; ++m) {
        double w = 1.0;
        std::int64_t off = base;
        std::size_t code = m;
        for (std::size_t d : active) {
          const CubicTap& t = taps[d][static_cast<std::size_t>(idx[d])];
          w *= t.w[code % 4];
          off += t.i[code % 4] * st[d];
          code /= 4;
        }
        if (w != 0.0) acc += w * static_cast<double>(src[off]);
      }
    }
    out[static_cast<std::size_t>(i)] = outside ? extrapolation : static_cast<float>(acc);
    for (std::size_t d = r; d-- > 0;) {
      if (++idx[d] < p.out[d]) break;
      idx[d] = 0;
    }
  }
  return y;
}

// The float32 scale of dim d as ONNX Runtime holds it: the `scales` value, or out / in with
// `sizes`; 1 for dims that are not resized.
float ort_scale(const ResizePlan& p, const Shape& xs, std::size_t d) {
  if (!p.resized[d]) return 1.0f;
  return p.by_scales ? static_cast<float>(p.scale[d])
                     : static_cast<float>(p.out[d]) / static_cast<float>(xs[d]);
}

// The dims ONNX Runtime's float32 linear kernel interpolates for this node (outermost first), or
// none when it is not one of the cases run_resize follows ORT in: the opset-10 form,
// tf_crop_and_resize / half_pixel_symmetric, `axes`, aspect-ratio policies other than stretch,
// and ranks or scales ORT runs otherwise keep the double-precision rule.
std::vector<std::size_t> ort_float_linear_dims(const Node& n, const ResizePlan& p, Coord coord,
                                               bool opset10) {
  if (opset10 || coord == Coord::TfCropAndResize || coord == Coord::HalfPixelSymmetric ||
      n.attributes.count("axes") ||
      n.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch") {
    return {};
  }
  const std::size_t r = p.out.size();
  const auto unit = [&](std::size_t d) { return p.scale[d] == 1.0; };
  if (r == 2) return {0, 1};
  if (r == 3) return {0, 1, 2};
  if (r == 4 && unit(0) && unit(1)) return {2, 3};
  if (r == 5 && unit(0) && unit(1)) return {2, 3, 4};
  return {};
}

std::vector<Tensor> run_resize(const Ctx& c, const OutInfos& o) {
  if (c.node.attr_int("tflite_arithmetic", 0) != 0) return run_tflite_resize(c, o);
  if (ort_linear_q8(c.node, c.t(0).dtype())) return run_ort_linear_q8(c, o);
  const Tensor& x = c.t(0);
  const Shape& xs = x.shape();
  const ResizePlan p = resize_plan(c, xs, true, true);
  const bool opset10 = c.node.inputs.size() == 2;
  const Coord coord = opset10 ? Coord::Asymmetric
                              : *coord_mode(c.node.attr_string("coordinate_transformation_mode", "half_pixel"));
  const std::string mode = c.node.attr_string("mode", "nearest");
  const bool linear = mode == "linear";
  const Nearest nearest = *nearest_mode(c.node.attr_string("nearest_mode", "round_prefer_floor"));
  const float extrapolation = float_attr(c.node, "extrapolation_value", 0.0f);
  const std::size_t r = xs.size();
  Tensor y(o[0].first, o[0].second);
  if (y.elements() == 0) return {std::move(y)};
  if (mode == "cubic") return {run_cubic(x, p, coord, float_attr(c.node, "cubic_coeff_a", -0.75f),
                                         c.node.attr_int("exclude_outside", 0) != 0, extrapolation, std::move(y))};
  std::vector<std::vector<Tap>> taps(r);
  for (std::size_t d = 0; d < r; ++d) taps[d] = dim_taps(p, d, xs[d], coord, linear, nearest, opset10);
  const auto st = contiguous_strides(xs);
  std::vector<std::int64_t> idx(r, 0);
  const std::int64_t total = y.elements();
  // Odometer over the output coordinates.
  auto advance = [&] {
    for (std::size_t d = r; d-- > 0;) {
      if (++idx[d] < p.out[d]) return;
      idx[d] = 0;
    }
  };
  auto is_outside = [&] {
    for (std::size_t d = 0; d < r; ++d) {
      if (taps[d][static_cast<std::size_t>(idx[d])].outside) return true;
    }
    return false;
  };
  if (!linear) {
    const std::size_t es = dtype_size(x.dtype());
    std::vector<std::byte> fill(es);
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T v = convert<T>(extrapolation);
      std::memcpy(fill.data(), &v, es);
    });
    std::vector<std::vector<std::int64_t>> tables(r);
    for (std::size_t d = 0; d < r; ++d) {
      for (const Tap& t : taps[d]) tables[d].push_back(t.outside ? -1 : t.i0);
    }
    gather_indexed(es, x.bytes().data(), xs, y.bytes().data(), p.out, tables, fill.data());
    return {std::move(y)};
  }
  // Linear on float32 X of rank 2 (bilinear), 3 (trilinear) or 4 / 5 with scale 1 on N and C
  // (bilinear over H, W / trilinear over D, H, W): ONNX Runtime's float32 arithmetic, as its CPU
  // kernel computes these ranks (UpsampleBilinear, UpsampleTrilinear; the 8-bit float path above).
  // QDQ models run such a Resize in float32 between DequantizeLinear and QuantizeLinear (ORT drops
  // the QDQ pair only around nearest Resizes), so the weighted sums must round as ORT's do: a
  // 2x half_pixel upsample of quantized values lands exactly on half steps, where the last bit
  // decides QuantizeLinear's rounding.
  if (const auto dims = ort_float_linear_dims(c.node, p, coord, opset10); !dims.empty()) {
    std::vector<std::vector<OrtTap>> otaps;
    for (auto d : dims) otaps.push_back(ort_taps(coord, xs[d], p.out[d], ort_scale(p, xs, d)));
    interpolate_ort(x.as<float>().data(), xs, y.as<float>().data(), p.out, dims, otaps, false);
    return {std::move(y)};
  }
  // Linear, other ranks and coordinate modes: the weighted sum over the 2^k corners of the dims
  // that interpolate (weights in double, as the ONNX reference computes).
  std::vector<std::size_t> active;
  for (std::size_t d = 0; d < r; ++d) {
    if (std::any_of(taps[d].begin(), taps[d].end(), [](const Tap& t) { return t.w1 != 0.0; })) active.push_back(d);
  }
  const float* src = x.as<float>().data();
  auto out = y.as<float>();
  const std::size_t corners = std::size_t{1} << active.size();
  for (std::int64_t i = 0; i < total; ++i, advance()) {
    if (is_outside()) {
      out[static_cast<std::size_t>(i)] = extrapolation;
      continue;
    }
    std::int64_t base = 0;
    for (std::size_t d = 0; d < r; ++d) base += taps[d][static_cast<std::size_t>(idx[d])].i0 * st[d];
    double acc = 0.0;
    for (std::size_t m = 0; m < corners; ++m) {
      double w = 1.0;
      std::int64_t off = base;
      for (std::size_t k = 0; k < active.size(); ++k) {
        const std::size_t d = active[k];
        const Tap& t = taps[d][static_cast<std::size_t>(idx[d])];
        if (m & (std::size_t{1} << k)) {
          w *= t.w1;
          off += (t.i1 - t.i0) * st[d];
        } else {
          w *= 1.0 - t.w1;
        }
      }
      if (w != 0.0) acc += w * static_cast<double>(src[off]);
    }
    out[static_cast<std::size_t>(i)] = static_cast<float>(acc);
  }
  return {std::move(y)};
}

}  // namespace

OpRows resize_ops() {
  OpRows rows;
  rows.onnx.push_back({"Resize", 1, 4, 1, check_resize, infer_resize, run_resize});
  return rows;
}

}  // namespace furiosa::host::detail
