// The host operator library (host/cpu_ops.h): Resize with the attribute tflite_arithmetic = 1,
// TFLite's RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR reference arithmetic (run_tflite_resize,
// called by run_resize in resize.cpp; the rules below).
#include "resize_impl.h"

namespace furiosa::host::detail::resize {
namespace {

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
  std::vector<float> frac;        // c - lo (float32 kernel)
  std::vector<std::int32_t> c10;  // coordinate in 1/1024 units (integer kernel)
};

TfliteAxis tflite_float_axis(std::int64_t in, std::int64_t out, TfliteFlags f) {
  TfliteAxis a;
  const float scale = tflite_scale(in, out, f.align_corners);
  for (std::int64_t o = 0; o < out; ++o) {
    const float c = f.half_pixel_centers ? (static_cast<float>(o) + 0.5f) * scale - 0.5f
                                         : static_cast<float>(o) * scale;
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
  if (f.align_corners && out32 > 1)
    scale10 = ((1 << 10) * (in32 - 1) + (out32 - 1) / 2) / (out32 - 1);
  for (std::int32_t o = 0; o < out32; ++o) {
    const std::int32_t c =
        f.half_pixel_centers ? o * scale10 + scale10 / 2 - (1 << 9) : o * scale10;
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
    auto v = static_cast<std::int64_t>(
        static_cast<std::int32_t>(f.align_corners ? std::round(c) : std::floor(c)));
    v = std::min(v, in - 1);
    if (f.half_pixel_centers) v = std::max<std::int64_t>(v, 0);
    idx.push_back(v);
  }
  return idx;
}

}  // namespace

std::vector<Tensor> run_tflite_resize(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Shape& xs = x.shape();
  const ResizePlan p = resize_plan(c, xs, false);
  const auto axes = c.node.attr_ints("axes", {});
  const auto ya =
      static_cast<std::size_t>(c.axis(axes[0], static_cast<std::int64_t>(xs.size()), "axes entry"));
  const auto xa =
      static_cast<std::size_t>(c.axis(axes[1], static_cast<std::int64_t>(xs.size()), "axes entry"));
  if (ya >= xa) c.bad("tflite_arithmetic needs 'axes' in increasing order (H before W)");
  const TfliteFlags f = tflite_flags(c.node);
  const bool linear = c.node.attr_string("mode", "nearest") == "linear";
  Tensor y = c.output(o, 0);
  if (y.elements() == 0) return single_output(std::move(y));
  if (!linear) {
    std::vector<std::vector<std::int64_t>> tables(xs.size());
    for (std::size_t d = 0; d < xs.size(); ++d) {
      if (d == ya || d == xa) {
        tables[d] = tflite_nearest_axis(xs[d], p.out[d], f);
      } else {
        for (std::int64_t i = 0; i < xs[d]; ++i) tables[d].push_back(i);
      }
    }
    gather_indexed(dtype_size(x.dtype()), x.bytes().data(), xs, y.bytes().data(), p.out, tables,
                   nullptr);
    return single_output(std::move(y));
  }
  // View the tensor as [outer, H, between, W, inner] around the two spatial axes.
  auto prod = [&](const Shape& s, std::size_t a, std::size_t b) {
    std::int64_t n = 1;
    for (std::size_t d = a; d < b; ++d) n *= s[d];
    return n;
  };
  const std::int64_t outer = prod(xs, 0, ya), between = prod(xs, ya + 1, xa),
                     inner = prod(xs, xa + 1, xs.size());
  const std::int64_t ih = xs[ya], iw = xs[xa], oh = p.out[ya], ow = p.out[xa];
  auto in_at = [&](std::int64_t b, std::int64_t h, std::int64_t m, std::int64_t w, std::int64_t k) {
    return (((b * ih + h) * between + m) * iw + w) * inner + k;
  };
  auto out_at = [&](std::int64_t b, std::int64_t h, std::int64_t m, std::int64_t w,
                    std::int64_t k) { return (((b * oh + h) * between + m) * ow + w) * inner + k; };
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
              const std::int64_t sum = src[in_at(b, y0, m, x0, k)] * wy0 * wx0 +
                                       src[in_at(b, y1, m, x0, k)] * wy1 * wx0 +
                                       src[in_at(b, y0, m, x1, k)] * wy0 * wx1 +
                                       src[in_at(b, y1, m, x1, k)] * wy1 * wx1;
              const std::int64_t round = sum > 0 ? (1 << 19) : -(1 << 19);
              dst[out_at(b, h, m, w, k)] = static_cast<std::int8_t>(
                  std::clamp<std::int64_t>((sum + round) / (1 << 20), -128, 127));
            }
          }
      }
    return single_output(std::move(y));
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
                  dst[out_at(b, h, m, w, k)] =
                      static_cast<std::uint8_t>(std::clamp(std::trunc(rounded), 0.0f, 255.0f));
                }
              }
            }
        }
    }
  });
  return single_output(std::move(y));
}

}  // namespace furiosa::host::detail::resize
