// The one quantization rule of the project: float -> 8-bit (ONNX QuantizeLinear, the requantize
// step of QLinearConv / QLinearMatMul / QLinearAdd, the simulator's Requantize tables, the
// runtime's Quantize step) and 8-bit -> float (DequantizeLinear). Every module calls these; no
// other float -> int quantize formula exists in the tree.
//
// Rule (ONNX operator spec, QuantizeLinear): q = saturate(round(v) + zero_point) computed in
// float32, round = half to even (std::nearbyint in the default FE_TONEAREST mode; TFLite's
// QUANTIZE rounds half away from zero instead, Rounding::HalfAwayFromZero), saturate to the
// 8-bit type's range. Values the spec leaves open: NaN quantizes to the zero point (as the host
// library always did; ONNX's reference computes rint(NaN) and leaves the cast undefined), +inf to
// qmax and -inf to qmin.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "furiosa/core/tensor.h"

namespace furiosa::host {

/// How v / scale is rounded to an integer.
enum class Rounding : std::uint8_t {
  HalfToEven,        ///< ONNX QuantizeLinear, QLinear* requantization
  HalfAwayFromZero,  ///< TFLite QUANTIZE (std::round)
};

/// Saturation range of an 8-bit type: [0, 255] for UInt8, [-128, 127] for Int8. Throws
/// Error(InvalidArgument) naming the dtype for any other type.
std::array<std::int32_t, 2> quant_range(DType dtype);

/// Quantizes one value already divided by its scale: round(v) + zero_point saturated to
/// [qmin, qmax] (NaN -> zero_point). Thread-safe, pure.
inline std::int32_t quantize_value(float v, std::int32_t zero_point, std::int32_t qmin, std::int32_t qmax,
                                   Rounding rounding = Rounding::HalfToEven) noexcept {
  if (std::isnan(v)) return zero_point;
  const float r = rounding == Rounding::HalfToEven ? std::nearbyint(v) : std::round(v);
  const float q = r + static_cast<float>(zero_point);
  if (q < static_cast<float>(qmin)) return qmin;
  if (q > static_cast<float>(qmax)) return qmax;
  return static_cast<std::int32_t>(q);
}

/// The requantization of an int32 accumulator (QLinearConv / QLinearMatMul, ONNX operator spec):
/// quantize_value(float(acc) * multiplier, ...), with multiplier = x_scale * w_scale / y_scale
/// computed by the caller in float32.
inline std::int32_t requantize(std::int32_t acc, float multiplier, std::int32_t zero_point, std::int32_t qmin,
                               std::int32_t qmax) noexcept {
  return quantize_value(static_cast<float>(acc) * multiplier, zero_point, qmin, qmax);
}

/// Quantizes n contiguous floats with one scale and zero point into uint8 / int8 by the rule
/// above: y[i] = quantize_value(x[i] / scale, zero_point, range of Q, rounding). Vectorized
/// (AVX-512 / AVX2 clones picked at load time) and bit-identical to quantize_value.
/// scale must be finite and non-zero (callers check; ONNX requires it).
void quantize(const float* x, std::uint8_t* y, std::int64_t n, float scale, std::int32_t zero_point,
              Rounding rounding = Rounding::HalfToEven);
void quantize(const float* x, std::int8_t* y, std::int64_t n, float scale, std::int32_t zero_point,
              Rounding rounding = Rounding::HalfToEven);

/// y[i] = float(x[i] - zero_point) * scale (ONNX DequantizeLinear), n contiguous elements.
void dequantize(const std::uint8_t* x, float* y, std::int64_t n, float scale, std::int32_t zero_point);
void dequantize(const std::int8_t* x, float* y, std::int64_t n, float scale, std::int32_t zero_point);
void dequantize(const std::int32_t* x, float* y, std::int64_t n, float scale, std::int32_t zero_point);

/// Calls fn(offset, length, k) for every contiguous run of a row-major tensor of `shape` whose
/// elements share one quantization parameter: with per-axis parameters (ONNX QuantizeLinear /
/// DequantizeLinear `axis`, 0 <= axis < rank) the runs of elements whose index along `axis` is
/// k, in memory order; with axis < 0 (per tensor) one run of the whole tensor and k = 0. Offsets
/// and lengths count elements. The one per-axis loop of the host operators and the runtime's
/// Quantize/Dequantize steps.
template <class Fn>
void for_each_quant_block(const Shape& shape, std::int64_t axis, Fn&& fn) {
  std::int64_t outer = 1, n = 1, inner = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const auto di = static_cast<std::int64_t>(d);
    if (axis < 0 || di > axis) inner *= shape[d];
    else if (di < axis) outer *= shape[d];
    else n = shape[d];
  }
  for (std::int64_t a = 0; a < outer; ++a) {
    for (std::int64_t k = 0; k < n; ++k) fn((a * n + k) * inner, inner, k);
  }
}

}  // namespace furiosa::host
