// Private to the host operator library's Resize: what its three files share. resize.cpp (the
// spec's arithmetic, the node check and shape, run_resize, resize_ops), resize_tflite.cpp
// (TFLite's RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR arithmetic, tflite_arithmetic = 1) and
// resize_ort.cpp (ONNX Runtime's float32 and 8-bit linear arithmetic).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops_common.h"

namespace furiosa::host::detail::resize {

/// The ONNX coordinate_transformation_mode values (the spec's formulas, output -> input).
enum class Coord {
  HalfPixel,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn,
  TfCropAndResize,
  HalfPixelSymmetric
};

/// The Coord of an ONNX coordinate_transformation_mode name, or none for an unknown name.
std::optional<Coord> coord_mode(const std::string& s);

/// Output shape and the per-dim scale and crop window, from the attributes and inputs.
struct ResizePlan {
  Shape out;
  std::vector<double> scale;      // output / input per dim (1 for dims not resized)
  std::vector<double> roi_start;  // normalized crop window per dim (tf_crop_and_resize)
  std::vector<double> roi_end;
  std::vector<bool> resized;  // dims listed in `axes`
  bool by_scales = false;     // the output size came from `scales` (else from `sizes`)
};

/// The ResizePlan of the node for X of shape `x` (`axes`, `scales` or `sizes`,
/// keep_aspect_ratio_policy; the roi window of tf_crop_and_resize when `need_roi`); bad-model
/// errors through `c`.
/// `ort_sizes`: output dims from `scales` as ONNX Runtime computes them, the float32 product
/// scale * dim truncated (every ONNX Resize: models are made for ONNX Runtime, and a model whose
/// next node expects ORT's shape must get it); else the spec's floor of the exact product (a
/// float32 product can round up to the next integer, e.g. 0.7f * 10 gives 7 where the spec gives
/// 6; TFLite's resizes take sizes, where both agree).
ResizePlan resize_plan(const Ctx& c, const Shape& x, bool need_roi, bool ort_sizes = false);

// --- resize_tflite.cpp -------------------------------------------------------------------------

/// Resize with tflite_arithmetic = 1: TFLite 2.14's reference RESIZE_BILINEAR (float32 / uint8
/// float sums, int8 10-bit fixed point) or RESIZE_NEAREST_NEIGHBOR over the two dims in `axes`
/// (H before W), bit-exact with TFLite (the rules in resize_tflite.cpp).
std::vector<Tensor> run_tflite_resize(const Ctx& c, const OutInfos& o);

// --- resize_ort.cpp ----------------------------------------------------------------------------

/// One output coordinate of one dim: the two source indices and their weights, in float32 and in
/// 1/1024 units.
struct OrtTap {
  std::int64_t i1 = 0, i2 = 0;
  float w1 = 0, w2 = 0;  // weights of i1 and i2
  std::int32_t w1_10 = 0, w2_10 = 0;
};

/// ONNX Runtime's taps of one dim of `in` -> `out` elements at float32 scale `scale`: the source
/// coordinate in float32 (the coordinate itself when scale is 1), clamped to [0, in - 1],
/// i1 = (int) c, i2 = min(i1 + 1, in - 1), weights |c - i2| and |c - i1| (1/2 and 1/2 when
/// i1 = i2), also in 1/1024 units (upsamplebase.h / upsample.cc).
std::vector<OrtTap> ort_taps(Coord mode, std::int64_t in, std::int64_t out, float scale);

/// ONNX Runtime's UpsampleBilinear / UpsampleTrilinear over `dims` (outermost first), the taps
/// per dim in the same order: per output the sum over the corners, the innermost dim's index
/// fastest, of ((w_inner * w_next) [* w_outer]) * x in float32; `integer` (8-bit X only): the
/// NHWC integer path instead. 8-bit outputs are truncated and clamped, float32 ones stored as is.
/// X of shape `xs` at `src`, Y of shape `ys` at `dst`, both contiguous. Defined in
/// resize_ort.cpp for float, uint8_t and int8_t.
template <class T>
void interpolate_ort(const T* src, const Shape& xs, T* dst, const Shape& ys,
                     const std::vector<std::size_t>& dims,
                     const std::vector<std::vector<OrtTap>>& taps, bool integer);
extern template void interpolate_ort<float>(const float* src, const Shape& xs, float* dst,
                                            const Shape& ys, const std::vector<std::size_t>& dims,
                                            const std::vector<std::vector<OrtTap>>& taps,
                                            bool integer);

/// Mode linear on uint8 / int8 X: ONNX Runtime 1.30's CPU arithmetic (the NHWC integer path or
/// the float path by rank and scales, as a quantized model runs it), bit-exact with ORT; ranks
/// and scales ORT refuses are refused.
std::vector<Tensor> run_ort_linear_q8(const Ctx& c, const OutInfos& o);

/// The float32 scale of dim d as ONNX Runtime holds it: the `scales` value, or out / in with
/// `sizes`; 1 for dims that are not resized.
float ort_scale(const ResizePlan& p, const Shape& xs, std::size_t d);

/// The dims ONNX Runtime's float32 linear kernel interpolates for this node (outermost first), or
/// none when it is not one of the cases run_resize follows ORT in: the opset-10 form,
/// tf_crop_and_resize / half_pixel_symmetric, `axes`, aspect-ratio policies other than stretch,
/// and ranks or scales ORT runs otherwise keep the double-precision rule.
std::vector<std::size_t> ort_float_linear_dims(const Node& n, const ResizePlan& p, Coord coord,
                                               bool opset10);

}  // namespace furiosa::host::detail::resize
