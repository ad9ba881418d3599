// The host operator library's float32 exp and sigmoid (host/src/float_math.h): accuracy against
// double-precision references over the whole float32 range that matters, the edge values, and
// the same bits on every CPU. The last case records a hash of the outputs over a sweep of inputs:
// the suite runs it natively (the AVX-512 clone on such a CPU), under qemu-x86_64 as a Haswell
// (the AVX2 clone) and as a Nehalem (no AVX: the baseline clone), and the aarch64 cross build
// runs it under qemu-aarch64, so every build and clone must give these bits
// (tests/host/CMakeLists.txt).
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "float_math.h"

using furiosa::host::detail::exp_f32;
using furiosa::host::detail::sigmoid_f32;
using furiosa::host::detail::softmax_f32;

namespace {

// Distance in representable floats between two finite floats of the same sign.
std::int64_t ulps(float a, float b) {
  const auto ia = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a));
  const auto ib = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(b));
  return ia > ib ? ia - ib : ib - ia;
}

// Inputs from lo to hi in `count` even steps.
std::vector<float> sweep(float lo, float hi, std::int64_t count) {
  std::vector<float> x(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    x[static_cast<std::size_t>(i)] =
        lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(count - 1);
  }
  return x;
}

}  // namespace

TEST_CASE("exp_f32 is within 2 ulp of e^x and exact at the edges", "[host][float_math]") {
  auto x = sweep(-87.33f, 88.72f, 1 << 20);
  std::vector<float> y(x.size());
  exp_f32(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  std::int64_t worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto ref = static_cast<float>(std::exp(static_cast<double>(x[i])));
    worst = std::max(worst, ulps(y[i], ref));
  }
  INFO("worst " << worst << " ulp");
  CHECK(worst <= 2);

  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> edge{0.0f, -0.0f,   1.0f,    -1.0f,   88.72f, 88.723f, 89.0f, 1e30f,
                          inf,  -87.33f, -87.34f, -100.0f, -1e30f, -inf,    nan};
  std::vector<float> e(edge.size());
  exp_f32(edge.data(), e.data(), static_cast<std::int64_t>(edge.size()));
  CHECK(e[0] == 1.0f);
  CHECK(e[1] == 1.0f);
  CHECK(ulps(e[2], 2.71828183f) <= 1);
  CHECK(ulps(e[3], 0.367879441f) <= 1);
  CHECK(std::isfinite(e[4]));
  CHECK(e[5] == inf);  // e^88.723 > FLT_MAX
  CHECK(e[6] == inf);
  CHECK(e[7] == inf);
  CHECK(e[8] == inf);
  CHECK(e[9] > 0.0f);
  CHECK(e[10] == 0.0f);  // below FLT_MIN: flushed (documented)
  CHECK(e[11] == 0.0f);
  CHECK(e[12] == 0.0f);
  CHECK(e[13] == 0.0f);
  CHECK(std::isnan(e[14]));

  // In place, and the same value whatever its position (vector body or scalar tail).
  std::vector<float> z(x.begin(), x.begin() + 37);
  exp_f32(z.data(), z.data(), 37);
  for (std::size_t i = 0; i < z.size(); ++i) {
    float one = 0;
    exp_f32(&x[i], &one, 1);
    CHECK(std::bit_cast<std::uint32_t>(z[i]) == std::bit_cast<std::uint32_t>(one));
    CHECK(z[i] == y[i]);
  }
}

TEST_CASE("sigmoid_f32 is within 3 ulp of the logistic function", "[host][float_math]") {
  auto x = sweep(-100.0f, 100.0f, 1 << 20);
  std::vector<float> y(x.size());
  sigmoid_f32(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  std::int64_t worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const auto ref =
        static_cast<float>(v >= 0 ? 1.0 / (1.0 + std::exp(-v)) : std::exp(v) / (1.0 + std::exp(v)));
    if (ref < std::numeric_limits<float>::min()) {
      CHECK(y[i] <= std::numeric_limits<float>::min());  // e^x flushed below FLT_MIN
      continue;
    }
    worst = std::max(worst, ulps(y[i], ref));
  }
  INFO("worst " << worst << " ulp");
  CHECK(worst <= 3);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> edge{0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> s(edge.size());
  sigmoid_f32(edge.data(), s.data(), 4);
  CHECK(s[0] == 0.5f);
  CHECK(s[1] == 1.0f);
  CHECK(s[2] == 0.0f);
  CHECK(std::isnan(s[3]));
}

TEST_CASE("exp_f32 and sigmoid_f32 give the same bits on every CPU", "[host][float_math][bits]") {
  // FNV-1a over the output bits of a sweep through both functions' whole active range.
  auto x = sweep(-104.0f, 90.0f, 3 * (1 << 18) + 5);
  std::vector<float> y(x.size());
  std::uint64_t h = 14695981039346656037ull;
  const auto mix = [&h](const std::vector<float>& v) {
    for (float f : v) {
      h ^= std::bit_cast<std::uint32_t>(f);
      h *= 1099511628211ull;
    }
  };
  exp_f32(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  mix(y);
  sigmoid_f32(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  mix(y);
  // Recorded on x86-64 (AVX-512 clone); see the file comment for where else it runs.
  CHECK(h == 0xdd446aa83ec830c4ull);
}

TEST_CASE("softmax_f32 gives the bits of the row-by-row Softmax on every CPU",
          "[host][float_math][bits]") {
  // x [n][inner] with inner not a multiple of any vector width; values from an LCG in
  // [-40, 40), a row of -inf in one column and a NaN in another.
  const std::int64_t n = 16, inner = 1031;
  std::vector<float> x(static_cast<std::size_t>(n * inner));
  std::uint32_t state = 12345;
  for (auto& v : x) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / 16777216.0f * 80.0f - 40.0f;
  }
  x[5] = -std::numeric_limits<float>::infinity();
  x[static_cast<std::size_t>(3 * inner + 9)] = std::numeric_limits<float>::quiet_NaN();
  std::uint64_t h = 14695981039346656037ull;
  for (bool log : {false, true}) {
    // The reference: the max, x - max, exp_f32, sums in double in the order of k, then
    // e * float(1 / sum) or x - max - float(log(sum)), one row at a time.
    std::vector<float> mx(static_cast<std::size_t>(inner), -std::numeric_limits<float>::infinity());
    std::vector<double> sum(static_cast<std::size_t>(inner), 0.0);
    std::vector<float> want(x.size());
    for (std::int64_t k = 0; k < n; ++k) {
      for (std::int64_t i = 0; i < inner; ++i) {
        auto& m = mx[static_cast<std::size_t>(i)];
        m = std::max(m, x[static_cast<std::size_t>(k * inner + i)]);
      }
    }
    for (std::int64_t k = 0; k < n; ++k) {
      float* r = want.data() + k * inner;
      for (std::int64_t i = 0; i < inner; ++i)
        r[i] = x[static_cast<std::size_t>(k * inner + i)] - mx[static_cast<std::size_t>(i)];
      exp_f32(r, r, inner);
      for (std::int64_t i = 0; i < inner; ++i) sum[static_cast<std::size_t>(i)] += r[i];
    }
    for (std::int64_t k = 0; k < n; ++k) {
      for (std::int64_t i = 0; i < inner; ++i) {
        const auto u = static_cast<std::size_t>(i);
        float& r = want[static_cast<std::size_t>(k * inner + i)];
        r = log ? x[static_cast<std::size_t>(k * inner + i)] - mx[u] -
                      static_cast<float>(std::log(sum[u]))
                : r * static_cast<float>(1.0 / sum[u]);
      }
    }
    std::vector<float> got(x.size()), smx(static_cast<std::size_t>(inner)),
        snorm(static_cast<std::size_t>(inner));
    std::vector<double> ssum(static_cast<std::size_t>(inner));
    softmax_f32(x.data(), got.data(), n, inner, log, smx.data(), ssum.data(), snorm.data());
    std::int64_t differ = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      differ += std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]);
      h ^= std::bit_cast<std::uint32_t>(got[i]);
      h *= 1099511628211ull;
    }
    INFO((log ? "LogSoftmax" : "Softmax"));
    CHECK(differ == 0);
  }
  // Recorded on x86-64 (AVX-512 clone); see the file comment for where else it runs.
  CHECK(h == 0x43b0318249ca058eull);
}

TEST_CASE("axpy_f32 gives the bits of the scalar row update on every CPU",
          "[host][float_math][bits]") {
  std::vector<float> x(4099), y0(2053);
  std::uint32_t state = 99;
  const auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.0f * 8.0f - 4.0f;
  };
  for (auto& v : x) v = next();
  for (auto& v : y0) v = next();
  std::uint64_t h = 14695981039346656037ull;
  for (std::int64_t stride : {1, 2}) {
    for (std::int64_t n : {1, 15, 16, 17, 1000, 2049}) {
      std::vector<float> want(y0), got(y0);
      const float a = next();
      for (std::int64_t i = 0; i < n; ++i)
        want[static_cast<std::size_t>(i)] += a * x[static_cast<std::size_t>(i * stride)];
      furiosa::host::detail::axpy_f32(got.data(), x.data(), a, n, stride);
      INFO("stride " << stride << ", n " << n);
      CHECK(got == want);
      for (float f : got) {
        h ^= std::bit_cast<std::uint32_t>(f);
        h *= 1099511628211ull;
      }
    }
  }
  // Recorded on x86-64 (AVX-512 clone); see the file comment for where else it runs.
  CHECK(h == 0xf2f0d16cdbe88bc5ull);
}
