// The host module's primitives: the one quantization rule (scalar and vectorized bulk paths
// agree on every special value, both roundings, both 8-bit types) and the one relayout (round
// trips on the widths models have).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/host/layout.h"
#include "furiosa/host/quantize.h"

using namespace furiosa;

namespace {

/// Values that exercise the rule: ties both ways, past the range, NaN, infinities, denormals,
/// long enough (> 64) that the vector body and the tail both run.
std::vector<float> special_values() {
  std::vector<float> v = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, 127.5f, -128.5f, 254.5f, 255.5f,
                          1000.0f, -1000.0f, 3e9f, -3e9f, std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                          -0.0f, 0.0f, 0.49999997f, -0.49999997f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-300.0f, 300.0f);
  for (int i = 0; i < 200; ++i) v.push_back(std::round(dist(rng)) + (i % 2 ? 0.5f : 0.25f));
  return v;
}

template <class Q>
void check_bulk_matches_scalar(host::Rounding rounding, float scale, std::int32_t zp) {
  const auto x = special_values();
  std::vector<Q> bulk(x.size());
  host::quantize(x.data(), bulk.data(), static_cast<std::int64_t>(x.size()), scale, zp, rounding);
  const auto [lo, hi] = host::quant_range(std::is_same_v<Q, std::uint8_t> ? DType::UInt8 : DType::Int8);
  for (std::size_t i = 0; i < x.size(); ++i) {
    INFO("x = " << x[i] << ", scale " << scale << ", zero point " << zp);
    CHECK(static_cast<std::int32_t>(bulk[i]) == host::quantize_value(x[i] / scale, zp, lo, hi, rounding));
  }
}

}  // namespace

TEST_CASE("host quantize: the rule's special values", "[host][quantize]") {
  using host::quantize_value;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Half to even (ONNX) and half away from zero (TFLite).
  CHECK(quantize_value(2.5f, 0, -128, 127) == 2);
  CHECK(quantize_value(-2.5f, 0, -128, 127) == -2);
  CHECK(quantize_value(2.5f, 0, -128, 127, host::Rounding::HalfAwayFromZero) == 3);
  CHECK(quantize_value(-2.5f, 0, -128, 127, host::Rounding::HalfAwayFromZero) == -3);
  // Saturation, infinities, and NaN -> the zero point.
  CHECK(quantize_value(1000.0f, 10, 0, 255) == 255);
  CHECK(quantize_value(-1000.0f, 10, 0, 255) == 0);
  CHECK(quantize_value(inf, 10, 0, 255) == 255);
  CHECK(quantize_value(-inf, 10, 0, 255) == 0);
  CHECK(quantize_value(nan, 10, 0, 255) == 10);
  CHECK(quantize_value(nan, -3, -128, 127) == -3);
  // The accumulator requantization is the same rule.
  CHECK(host::requantize(5, 0.5f, 0, -128, 127) == 2);  // 2.5 -> 2
  CHECK(host::requantize(7, 0.5f, 100, 0, 255) == 104);  // 3.5 -> 4
  CHECK(host::quant_range(DType::UInt8) == std::array<std::int32_t, 2>{0, 255});
  CHECK(host::quant_range(DType::Int8) == std::array<std::int32_t, 2>{-128, 127});
  CHECK_THROWS_AS(host::quant_range(DType::Float32), Error);
}

TEST_CASE("host quantize: the vectorized bulk loop equals the scalar rule", "[host][quantize]") {
  for (auto rounding : {host::Rounding::HalfToEven, host::Rounding::HalfAwayFromZero}) {
    check_bulk_matches_scalar<std::uint8_t>(rounding, 1.0f, 0);
    check_bulk_matches_scalar<std::uint8_t>(rounding, 0.5f, 128);
    check_bulk_matches_scalar<std::uint8_t>(rounding, 3.0f, 255);
    check_bulk_matches_scalar<std::int8_t>(rounding, 1.0f, 0);
    check_bulk_matches_scalar<std::int8_t>(rounding, 0.25f, -5);
    check_bulk_matches_scalar<std::int8_t>(rounding, 7.0f, 127);
  }
}

TEST_CASE("host dequantize: (x - zero point) * scale", "[host][quantize]") {
  const std::vector<std::uint8_t> x = {0, 10, 255};
  std::vector<float> y(3);
  host::dequantize(x.data(), y.data(), 3, 0.5f, 10);
  CHECK(y == std::vector<float>{-5.0f, 0.0f, 122.5f});
  const std::vector<std::int32_t> b = {-100000, 70000};
  std::vector<float> yb(2);
  host::dequantize(b.data(), yb.data(), 2, 0.001f, 0);
  CHECK(yb[0] == Approx(-100.0f));
  CHECK(yb[1] == Approx(70.0f));
}

TEST_CASE("host layout: lower / unlower round trips and the NHWC lowering", "[host][layout]") {
  CHECK(host::padded_width(1) == 32);
  CHECK(host::padded_width(32) == 32);
  CHECK(host::padded_width(33) == 64);
  CHECK(host::padded_width(112) == 128);
  for (std::int64_t w : {1, 28, 31, 32, 33, 112}) {
    for (std::size_t es : {std::size_t{1}, std::size_t{4}}) {
      const Shape s{2, 3, 5, w};
      std::vector<std::byte> dense(static_cast<std::size_t>(element_count(s)) * es);
      for (std::size_t i = 0; i < dense.size(); ++i) dense[i] = static_cast<std::byte>(i * 31 + 7);
      std::vector<std::byte> lowered(host::lowered_size(s, es), std::byte{0xEE});
      REQUIRE(lowered.size() == static_cast<std::size_t>(2 * 3 * 5 * host::padded_width(w)) * es);
      host::lower(s, es, dense, lowered);
      // Element (n, c, h, x) lands at row (n, c, h), column x; padding is zero.
      const auto wp = static_cast<std::size_t>(host::padded_width(w));
      for (std::size_t row = 0; row < 30; ++row) {
        for (std::size_t col = 0; col < wp * es; ++col) {
          const std::byte got = lowered[row * wp * es + col];
          if (col < static_cast<std::size_t>(w) * es) {
            CHECK(got == dense[row * static_cast<std::size_t>(w) * es + col]);
          } else {
            CHECK(got == std::byte{0});
          }
        }
      }
      std::vector<std::byte> back(dense.size());
      host::unlower(s, es, lowered, back);
      CHECK(back == dense);
    }
  }
  // NHWC [1, 2, 3, 4] -> lowered NCHW [1, 4, 2, 3]: element (h, w, c) at row (c, h), column w.
  const Shape nhwc{1, 2, 3, 4};
  std::vector<std::byte> in(24);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::byte>(i + 1);
  std::vector<std::byte> out(host::lowered_size({1, 4, 2, 3}, 1), std::byte{0xEE});
  host::lower_nhwc(nhwc, 1, in, out);
  for (std::size_t c = 0; c < 4; ++c) {
    for (std::size_t h = 0; h < 2; ++h) {
      for (std::size_t w = 0; w < 32; ++w) {
        const std::byte expected = w < 3 ? in[(h * 3 + w) * 4 + c] : std::byte{0};
        CHECK(out[(c * 2 + h) * 32 + w] == expected);
      }
    }
  }
}
