// The fixed-point requantization rule of TFLite's quantization specification, shared by the host
// operator library (TFLite MEAN), the compiler (TFLite models' multipliers) and the NPU kernels
// (isa.h re-exports it for the kernels' params).
#pragma once

#include <climits>
#include <cstdint>

namespace furiosa::host {

// Integer-only arithmetic as defined by gemmlowp and TFLite's quantization specification and
// reference kernels (tensorflow/lite/kernels/internal/common.h, quantization_util.cc): a real
// multiplier M is stored as an int32 significand q in [2^30, 2^31) and an exponent `shift` with
// M ~= q * 2^(shift - 31); x * M is computed as a rounding doubling high multiply followed by a
// rounding right shift ("double rounding", TFLite's default build).

/// A real multiplier in fixed point: value = multiplier * 2^(shift - 31). multiplier is 0 (the
/// real value 0) or in [2^30, 2^31 - 1]; shift is in [-31, 30].
struct QuantizedMultiplier {
  std::int32_t multiplier = 0;
  std::int32_t shift = 0;
};

/// (a * b * 2) / 2^32 rounded to nearest with ties rounded up (toward +infinity, for negative
/// products too), saturated: the one overflow case a == b == INT32_MIN gives INT32_MAX (gemmlowp
/// SaturatingRoundingDoublingHighMul).
inline std::int32_t saturating_rounding_doubling_high_mul(std::int32_t a, std::int32_t b) noexcept {
  if (a == b && a == INT32_MIN) return INT32_MAX;
  const std::int64_t ab = static_cast<std::int64_t>(a) * static_cast<std::int64_t>(b);
  const std::int64_t nudge = ab >= 0 ? (std::int64_t{1} << 30) : (1 - (std::int64_t{1} << 30));
  return static_cast<std::int32_t>((ab + nudge) / (std::int64_t{1} << 31));  // truncates to 0
}

/// x / 2^exponent rounded to nearest, ties away from zero (gemmlowp RoundingDivideByPOT).
/// exponent in [0, 31].
inline std::int32_t rounding_divide_by_pot(std::int32_t x, int exponent) noexcept {
  const std::int32_t mask = static_cast<std::int32_t>((std::int64_t{1} << exponent) - 1);
  const std::int32_t remainder = x & mask;
  const std::int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/// x * m in fixed point (TFLite MultiplyByQuantizedMultiplier): a positive shift multiplies x by
/// 2^shift first (wrapping like the int32 arithmetic it models), a negative one divides the
/// high product by 2^-shift with rounding.
inline std::int32_t multiply_by_quantized_multiplier(std::int32_t x, QuantizedMultiplier m) noexcept {
  const int left = m.shift > 0 ? m.shift : 0;
  const int right = m.shift > 0 ? 0 : -m.shift;
  const auto shifted = static_cast<std::int32_t>(static_cast<std::uint32_t>(x) << left);
  return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, m.multiplier), right);
}

/// The fixed-point form of a real multiplier >= 0 (TFLite QuantizeMultiplier): frexp gives a
/// significand in [0.5, 1), scaled by 2^31 and rounded half away from zero; a significand that
/// rounds up to 2^31 is halved with the exponent raised. Values too small for shift -31 become 0,
/// values too large for shift 30 saturate to the largest representable one. Throws
/// Error(InvalidArgument) for a negative or non-finite value.
QuantizedMultiplier quantize_multiplier(double real_multiplier);

}  // namespace furiosa::host
