// The host operator library (host/cpu_ops.h): Resize (opsets 11-19: X, roi, scales, sizes;
// nearest, N-D linear and N-D cubic; the coordinate transformation modes of the spec; the
// opset-10 form X, scales as ONNX Runtime runs it, see resize_plan): the node check and shape,
// the spec's arithmetic and run_resize, which dispatches linear on uint8 / int8 and float32
// linear to ONNX Runtime's arithmetic (resize_ort.cpp: run_ort_linear_q8, ort_float_linear_dims)
// and, with the attribute tflite_arithmetic = 1, to TFLite's RESIZE_BILINEAR /
// RESIZE_NEAREST_NEIGHBOR reference arithmetic (resize_tflite.cpp). resize_impl.h declares what
// the three files share.
#include "resize_impl.h"

namespace furiosa::host::detail::resize {

// ---------------------------------------------------------------------------------------------
// Resize: the modes, the node check, the output shape and the spec's arithmetic
// ---------------------------------------------------------------------------------------------

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

namespace {

enum class Nearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

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

}  // namespace

ResizePlan resize_plan(const Ctx& c, const Shape& x, bool need_roi, bool ort_sizes) {
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

namespace {

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
  Tensor y = c.output(o, 0);
  if (y.elements() == 0) return single_output(std::move(y));
  if (mode == "cubic") {
    return single_output(run_cubic(x, p, coord, float_attr(c.node, "cubic_coeff_a", -0.75f),
                                   c.node.attr_int("exclude_outside", 0) != 0, extrapolation,
                                   std::move(y)));
  }
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
    return single_output(std::move(y));
  }
  // Linear on float32 X of rank 2 (bilinear), 3 (trilinear) or 4 / 5 with scale 1 on N and C
  // (bilinear over H, W / trilinear over D, H, W): ONNX Runtime's float32 arithmetic, as its CPU
  // kernel computes these ranks (UpsampleBilinear, UpsampleTrilinear; resize_ort.cpp, as its
  // 8-bit float path).
  // QDQ models run such a Resize in float32 between DequantizeLinear and QuantizeLinear (ORT drops
  // the QDQ pair only around nearest Resizes), so the weighted sums must round as ORT's do: a
  // 2x half_pixel upsample of quantized values lands exactly on half steps, where the last bit
  // decides QuantizeLinear's rounding.
  if (const auto dims = ort_float_linear_dims(c.node, p, coord, opset10); !dims.empty()) {
    std::vector<std::vector<OrtTap>> otaps;
    for (auto d : dims) otaps.push_back(ort_taps(coord, xs[d], p.out[d], ort_scale(p, xs, d)));
    interpolate_ort(x.as<float>().data(), xs, y.as<float>().data(), p.out, dims, otaps, false);
    return single_output(std::move(y));
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
  return single_output(std::move(y));
}

}  // namespace
}  // namespace furiosa::host::detail::resize

namespace furiosa::host::detail {

OpRows resize_ops() {
  OpRows rows;
  rows.onnx.push_back(
      {"Resize", 1, 4, 1, resize::check_resize, resize::infer_resize, resize::run_resize});
  return rows;
}

}  // namespace furiosa::host::detail
