// Branch-free float32 exp and sigmoid (float_math.h), cloned for AVX-512 and AVX2 hosts like
// quantize.cpp; every clone computes the same IEEE operations.
#include "float_math.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace furiosa::host::detail {
namespace {

// Sanitizer builds and Clang compile one plain version (see quantize.cpp: the clones' ifunc
// resolvers run before a sanitizer runtime is initialized); other architectures one version
// for their baseline.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__) || defined(__clang__) || \
    !defined(__x86_64__)
#define FURIOSA_FLOAT_MATH_CLONES
#else
#define FURIOSA_FLOAT_MATH_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif

constexpr float kLog2e = 1.44269504088896341f;
// ln 2 = kLn2Hi + kLn2Lo, kLn2Hi with 9 significant bits, so n * kLn2Hi is exact for |n| <= 128.
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kMaxArg = 88.7228394f;   // largest x with e^x finite in float32
constexpr float kMinArg = -87.3365479f;  // e^x below this is under FLT_MIN
// Adding and subtracting 1.5 * 2^23 rounds |v| < 2^22 to an integer, ties to even.
constexpr float kRoundMagic = 12582912.0f;

// e^x without branches (the loops below vectorize it): x = n ln 2 + r with |r| <= ln 2 / 2,
// e^r = 1 + r + r^2 P(r) (Cephes expf's coefficients, relative error below 2e-7 on that
// range), then scaled by 2^n built in the exponent bits (2^(n-1) * 2 for n = 128).
// kNonPositive: for arguments <= 0 or NaN only (sigmoid's -|x|, Softmax's x - max), where the
// overflow clamps and the 2^128 scaling cannot act (n <= 0): left out, the same bits.
template <bool kNonPositive>
inline float exp_impl(float x) {
  const bool nan = x != x;
  float v = nan ? 0.0f : x;
  if constexpr (!kNonPositive) v = v > kMaxArg ? kMaxArg : v;
  v = v < kMinArg ? kMinArg : v;
  const float n = (v * kLog2e + kRoundMagic) - kRoundMagic;  // in [-126, 128]
  const float r = (v - n * kLn2Hi) - n * kLn2Lo;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  const auto ni = static_cast<std::int32_t>(n);
  float y;
  if constexpr (kNonPositive) {
    y = p * std::bit_cast<float>(static_cast<std::uint32_t>(ni + 127) << 23);
  } else {
    const std::int32_t e = ni > 127 ? 127 : ni;
    y = p * std::bit_cast<float>(static_cast<std::uint32_t>(e + 127) << 23);
    y = ni > 127 ? y * 2.0f : y;
    y = x > kMaxArg ? __builtin_inff() : y;
  }
  y = x < kMinArg ? 0.0f : y;
  return nan ? x : y;
}

inline float exp_one(float x) { return exp_impl<false>(x); }
inline float exp_nonpositive(float x) { return exp_impl<true>(x); }

FURIOSA_FLOAT_MATH_CLONES void exp_block(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = exp_one(x[i]);
}

FURIOSA_FLOAT_MATH_CLONES void sigmoid_block(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = exp_nonpositive(v < 0.0f ? v : -v);  // e^-|x| (NaN passes through)
    // One division: the numerator is chosen first (1 / d or e / d, the same quotient bits).
    y[i] = (v >= 0.0f ? 1.0f : e) / (1.0f + e);
  }
}

FURIOSA_FLOAT_MATH_CLONES void softmax_block(const float* x, float* y, std::int64_t n,
                                             std::int64_t inner, bool log, float* mx, double* sum,
                                             float* norm) {
  for (std::int64_t i = 0; i < inner; ++i) {
    mx[i] = -__builtin_inff();
    sum[i] = 0.0;
  }
  for (std::int64_t k = 0; k < n; ++k) {
    const float* xr = x + k * inner;
    for (std::int64_t i = 0; i < inner; ++i) mx[i] = xr[i] > mx[i] ? xr[i] : mx[i];
  }
  for (std::int64_t k = 0; k < n; ++k) {
    const float* xr = x + k * inner;
    float* yr = y + k * inner;
    // x - max is <= 0 or NaN (a NaN x, or inf - inf).
    for (std::int64_t i = 0; i < inner; ++i) yr[i] = exp_nonpositive(xr[i] - mx[i]);
    for (std::int64_t i = 0; i < inner; ++i) sum[i] += yr[i];
  }
  if (log) {
    for (std::int64_t i = 0; i < inner; ++i) norm[i] = static_cast<float>(std::log(sum[i]));
    for (std::int64_t k = 0; k < n; ++k) {
      const float* xr = x + k * inner;
      float* yr = y + k * inner;
      for (std::int64_t i = 0; i < inner; ++i) yr[i] = xr[i] - mx[i] - norm[i];
    }
    return;
  }
  for (std::int64_t i = 0; i < inner; ++i) norm[i] = static_cast<float>(1.0 / sum[i]);
  for (std::int64_t k = 0; k < n; ++k) {
    float* yr = y + k * inner;
    for (std::int64_t i = 0; i < inner; ++i) yr[i] *= norm[i];
  }
}

FURIOSA_FLOAT_MATH_CLONES void axpy_block(float* y, const float* x, float a, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

void exp_f32(const float* x, float* y, std::int64_t n) { exp_block(x, y, n); }

void axpy_f32(float* y, const float* x, float a, std::int64_t n, std::int64_t stride) {
  if (stride == 1) return axpy_block(y, x, a, n);
  for (std::int64_t i = 0; i < n; ++i) y[i] += a * x[i * stride];
}

void softmax_f32(const float* x, float* y, std::int64_t n, std::int64_t inner, bool log, float* mx,
                 double* sum, float* norm) {
  softmax_block(x, y, n, inner, log, mx, sum, norm);
}

void sigmoid_f32(const float* x, float* y, std::int64_t n) { sigmoid_block(x, y, n); }

}  // namespace furiosa::host::detail
