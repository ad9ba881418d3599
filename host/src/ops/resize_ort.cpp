// The host operator library (host/cpu_ops.h): ONNX Runtime's Resize arithmetic, mode linear on
// uint8 / int8 X (run_ort_linear_q8) and the float32 sums run_resize (resize.cpp) takes for
// float32 linear (ort_float_linear_dims, ort_taps, interpolate_ort).
#include "resize_impl.h"

namespace furiosa::host::detail::resize {
namespace {

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

}  // namespace

std::vector<OrtTap> ort_taps(Coord mode, std::int64_t in, std::int64_t out, float scale) {
  std::vector<OrtTap> taps(static_cast<std::size_t>(out));
  const float last = static_cast<float>(in - 1);
  for (std::int64_t o = 0; o < out; ++o) {
    OrtTap& t = taps[static_cast<std::size_t>(o)];
    float x = scale == 1.0f ? static_cast<float>(o)
                            : ort_source_coord(mode, static_cast<float>(o), scale,
                                               static_cast<float>(out), static_cast<float>(in));
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

template void interpolate_ort<float>(const float* src, const Shape& xs, float* dst, const Shape& ys,
                                     const std::vector<std::size_t>& dims,
                                     const std::vector<std::vector<OrtTap>>& taps, bool integer);

std::vector<Tensor> run_ort_linear_q8(const Ctx& c, const OutInfos& o) {
  const Tensor& x = c.t(0);
  const Shape& xs = x.shape();
  const ResizePlan p = resize_plan(c, xs, false, true);
  const Coord coord =
      c.node.inputs.size() == 2
          ? Coord::Asymmetric
          : *coord_mode(c.node.attr_string("coordinate_transformation_mode", "half_pixel"));
  Tensor y = c.output(o, 0);
  if (y.elements() == 0) return single_output(std::move(y));
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
    c.bad(fmt::format(
        "mode 'linear' on {} X of rank {} with scales [{}] is not implemented: ONNX Runtime's "
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
  return single_output(std::move(y));
}

float ort_scale(const ResizePlan& p, const Shape& xs, std::size_t d) {
  if (!p.resized[d]) return 1.0f;
  return p.by_scales ? static_cast<float>(p.scale[d])
                     : static_cast<float>(p.out[d]) / static_cast<float>(xs[d]);
}

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

}  // namespace furiosa::host::detail::resize
