// The quantization rule's bulk loops (quantize.h): branch-free so GCC vectorizes them, cloned
// for AVX-512 and AVX2 hosts; each clone computes the same IEEE float operations as
// quantize_value.
#include "furiosa/host/quantize.h"

#include <fmt/format.h>

#include <type_traits>

#include "furiosa/core/error.h"

namespace furiosa::host {

std::array<std::int32_t, 2> quant_range(DType dtype) {
  switch (dtype) {
    case DType::UInt8: return {0, 255};
    case DType::Int8: return {-128, 127};
    default:
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{} is not an 8-bit quantized type", dtype_name(dtype)));
  }
}

namespace {

// Adding and subtracting 1.5 * 2^23 rounds a float of magnitude below 2^22 to the nearest
// integer, ties to even, in the default rounding mode: std::nearbyint without a libm call per
// element, so the loop stays branch-free.
constexpr float kRoundMagic = 12582912.0f;

// Rounds v (|v| < 2^22): half to even by kRoundMagic, or half away from zero (std::round) from
// the exact fraction v - trunc(v). Both branch-free.
template <bool kAwayFromZero>
inline float round_quantized(float v) {
  if constexpr (kAwayFromZero) {
    const float t = std::trunc(v);
    const float frac = v - t;
    return t + (frac >= 0.5f ? 1.0f : 0.0f) - (frac <= -0.5f ? 1.0f : 0.0f);
  } else {
    return (v + kRoundMagic) - kRoundMagic;
  }
}

// Sanitizer builds compile one plain version: the clones' ifunc resolver runs while the dynamic
// loader relocates, before the sanitizer runtime is initialized, and instrumented it crashes.
// Clang (the fuzz targets' compiler) does not support target_clones on templates at all. Other
// architectures (aarch64) compile one version for their baseline.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__) || defined(__clang__) || \
    !defined(__x86_64__)
#define FURIOSA_QUANTIZE_CLONES
#else
#define FURIOSA_QUANTIZE_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif

// Clamping v = x / scale to [qmin - zp, qmax - zp] before rounding gives the same result as
// rounding and then saturating (the bounds are integers) and keeps v small enough for
// round_quantized; NaN is replaced by 0 first, so it quantizes to the zero point.
template <class Q, bool kAwayFromZero>
FURIOSA_QUANTIZE_CLONES void quantize_block(const float* x, Q* y, std::int64_t n, float scale,
                                            std::int32_t zero_point, float lo, float hi) {
  for (std::int64_t i = 0; i < n; ++i) {
    float v = x[i] / scale;
    v = v == v ? v : 0.0f;
    v = v > lo ? v : lo;
    v = v < hi ? v : hi;
    y[i] = static_cast<Q>(static_cast<std::int32_t>(round_quantized<kAwayFromZero>(v)) + zero_point);
  }
}

template <class Q>
void quantize_any(const float* x, Q* y, std::int64_t n, float scale, std::int32_t zero_point, Rounding rounding) {
  const auto range = quant_range(std::is_same_v<Q, std::uint8_t> ? DType::UInt8 : DType::Int8);
  const float lo = static_cast<float>(range[0] - zero_point);
  const float hi = static_cast<float>(range[1] - zero_point);
  if (rounding == Rounding::HalfAwayFromZero) {
    quantize_block<Q, true>(x, y, n, scale, zero_point, lo, hi);
  } else {
    quantize_block<Q, false>(x, y, n, scale, zero_point, lo, hi);
  }
}

// One subtraction and one multiplication per element, the same operations in every clone.
template <class X>
FURIOSA_QUANTIZE_CLONES void dequantize_any(const X* x, float* y, std::int64_t n, float scale, std::int32_t zero_point) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<std::int32_t>(x[i]) - zero_point) * scale;
}

}  // namespace

void quantize(const float* x, std::uint8_t* y, std::int64_t n, float scale, std::int32_t zero_point,
              Rounding rounding) {
  quantize_any(x, y, n, scale, zero_point, rounding);
}
void quantize(const float* x, std::int8_t* y, std::int64_t n, float scale, std::int32_t zero_point,
              Rounding rounding) {
  quantize_any(x, y, n, scale, zero_point, rounding);
}
void dequantize(const std::uint8_t* x, float* y, std::int64_t n, float scale, std::int32_t zero_point) {
  dequantize_any(x, y, n, scale, zero_point);
}
void dequantize(const std::int8_t* x, float* y, std::int64_t n, float scale, std::int32_t zero_point) {
  dequantize_any(x, y, n, scale, zero_point);
}
void dequantize(const std::int32_t* x, float* y, std::int64_t n, float scale, std::int32_t zero_point) {
  dequantize_any(x, y, n, scale, zero_point);
}

}  // namespace furiosa::host
