// The fixed-point requantization rule of the ISA (isa.h; TFLite's quantization specification and
// reference kernels): the arithmetic helpers on known values, and the kernels that carry it
// (Conv2d, MatMul with a bias, Add, Requantize with a table) against references written here.
// Those kernels run on the portable code only: every case runs unprepared with the fast kernels
// enabled, prepared, and with the fast kernels disabled, and must give the reference each time.
// The float scales of the cases are chosen so that the float rule would give other bytes, so a
// kernel that took a fast (float-rule) path would fail.
#include <catch2/catch.hpp>

#include <climits>
#include <cmath>
#include <cstring>
#include <random>

#include "device_test_util.h"
#include "kernels.h"

using namespace furiosa;
using namespace furiosa::device;
using namespace furiosa::device::test;
using isa::Layout;

namespace {

struct FastOn {
  ~FastOn() { sim::set_fast_kernels_enabled(true); }
};

std::vector<std::byte> region_of(const isa::Program& prog, std::mt19937& rng) {
  std::vector<std::byte> region(static_cast<std::size_t>(prog.dram_bytes));
  for (auto& b : region) b = static_cast<std::byte>(rng());
  if (!prog.constants.empty()) std::memcpy(region.data(), prog.constants.data(), prog.constants.size());
  return region;
}

// Runs kernel 0 three ways on copies of `region` and returns the bytes of `out` each time.
std::vector<std::vector<std::byte>> three_ways(const isa::Program& prog, const std::vector<std::byte>& region,
                                               const isa::TensorRef& out) {
  FastOn restore;
  std::vector<std::vector<std::byte>> results;
  auto slice = [&](const std::vector<std::byte>& r) {
    return std::vector<std::byte>(r.begin() + static_cast<std::ptrdiff_t>(out.address),
                                  r.begin() + static_cast<std::ptrdiff_t>(out.address + out.size_bytes()));
  };
  sim::set_fast_kernels_enabled(true);
  auto r = region;
  sim::run_kernel(prog.kernels[0], r);
  results.push_back(slice(r));
  auto prepared = sim::prepare_program(prog);
  r = region;
  sim::run_kernel(prog.kernels[0], r, prepared.get(), 0);
  results.push_back(slice(r));
  sim::set_fast_kernels_enabled(false);
  r = region;
  sim::run_kernel(prog.kernels[0], r);
  results.push_back(slice(r));
  return results;
}

std::int32_t at8(const std::vector<std::byte>& region, std::uint64_t address, DType d) {
  const auto u = std::to_integer<std::uint8_t>(region[static_cast<std::size_t>(address)]);
  return d == DType::Int8 ? static_cast<std::int8_t>(u) : static_cast<std::int32_t>(u);
}

}  // namespace

TEST_CASE("fixed point: multipliers and the rounding arithmetic", "[device][fixed_point]") {
  using isa::quantize_multiplier;
  CHECK(quantize_multiplier(0.5).multiplier == (1 << 30));
  CHECK(quantize_multiplier(0.5).shift == 0);
  CHECK(quantize_multiplier(1.0).multiplier == (1 << 30));
  CHECK(quantize_multiplier(1.0).shift == 1);
  CHECK(quantize_multiplier(3.0).multiplier == 1610612736);  // 0.75 * 2^31
  CHECK(quantize_multiplier(3.0).shift == 2);
  CHECK(quantize_multiplier(0.0).multiplier == 0);
  CHECK(quantize_multiplier(1e-12).multiplier == 0);  // below 2^-32: flushed to zero
  // A significand that rounds up to 2^31 is halved, the exponent raised.
  const auto up = quantize_multiplier(std::nextafter(1.0, 0.0));
  CHECK(up.multiplier == (1 << 30));
  CHECK(up.shift == 1);
  CHECK_THROWS_AS(quantize_multiplier(-0.5), Error);
  CHECK_THROWS_AS(quantize_multiplier(std::nan("")), Error);

  CHECK(isa::saturating_rounding_doubling_high_mul(INT32_MIN, INT32_MIN) == INT32_MAX);
  CHECK(isa::rounding_divide_by_pot(5, 1) == 3);    // 2.5 -> 3
  CHECK(isa::rounding_divide_by_pot(-5, 1) == -3);  // -2.5 -> -3 (away from zero)
  CHECK(isa::rounding_divide_by_pot(-7, 2) == -2);  // -1.75 -> -2
  const auto half = quantize_multiplier(0.5), quarter = quantize_multiplier(0.25);
  CHECK(isa::multiply_by_quantized_multiplier(3, half) == 2);    // 1.5: the high multiply's tie rounds up
  CHECK(isa::multiply_by_quantized_multiplier(-3, half) == -1);  // -1.5: ties round up there, also for negatives
  CHECK(isa::multiply_by_quantized_multiplier(6, quarter) == 2);  // 1.5: the shift's tie rounds away from zero
  // 1.25 -> 2: "double rounding" (2.5 rounds to 3 in the high multiply, then 3 / 2 = 1.5 to 2),
  // as TFLite's default (not single-rounding) build computes it.
  CHECK(isa::multiply_by_quantized_multiplier(5, quarter) == 2);
  CHECK(isa::multiply_by_quantized_multiplier(1000, quantize_multiplier(2.5)) == 2500);
  // The two roundings (high multiply, then the shift) stay within one of x * real.
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::int32_t> xs(-(1 << 20), 1 << 20);
  std::uniform_real_distribution<double> reals(1e-5, 3.0);
  for (int i = 0; i < 2000; ++i) {
    const std::int32_t x = xs(rng);
    const double real = reals(rng);
    INFO("x " << x << " real " << real);
    CHECK(std::abs(isa::multiply_by_quantized_multiplier(x, quantize_multiplier(real)) - static_cast<double>(x) * real) <= 1.0);
  }
  CHECK(isa::requantize_fixed_point(1000, quantize_multiplier(0.1), 5, 0, 60) == 60);
  CHECK(isa::requantize_fixed_point(-1000, quantize_multiplier(0.1), 5, -20, 60) == -20);
  CHECK(isa::requantize_fixed_point(300, quantize_multiplier(0.1), 5, 0, 60) == 35);
}

TEST_CASE("fixed point: conv, matmul with bias, add and table requantize", "[device][fixed_point]") {
  std::mt19937 rng(5);
  SECTION("per-channel Conv2d with an output clamp") {
    const std::int64_t C = 3, H = 5, W = 7, M = 4;
    ProgramBuilder b;
    std::vector<std::int32_t> w(static_cast<std::size_t>(M * C * 9));
    for (auto& v : w) v = static_cast<std::int32_t>(rng() % 255) - 127;
    std::vector<std::int32_t> bias = {100, -250, 0, 4000};
    auto wref = b.constant(DType::Int8, {M, C, 3, 3}, w);
    auto bref = b.constant(DType::Int32, {M}, bias);
    auto x = b.activation(DType::UInt8, {1, C, H, W}, Layout::LoweredNCHW);
    auto y = b.activation(DType::UInt8, {1, M, H, W}, Layout::LoweredNCHW);
    isa::Conv2dParams p;
    p.weight = wref;
    p.bias = bref;
    p.pads = {1, 1, 1, 1};
    p.x = {1.0f, 120};
    p.w_scale = {1.0f};  // the float rule would multiply by 1 and saturate
    p.w_zero_point = {0};
    p.y = {1.0f, 30};
    isa::FixedPointRequant f;
    for (double real : {0.004, 0.011, 0.0007, 0.02}) f.multipliers.push_back(isa::quantize_multiplier(real));
    f.out_min = 30;
    f.out_max = 200;
    p.fixed_point = f;
    b.kernel(isa::KernelKind::Conv2d, {x}, {y}, p);
    auto prog = b.finish({x}, {y});
    const auto region = region_of(*prog, rng);
    std::vector<std::byte> expected(static_cast<std::size_t>(y.size_bytes()), std::byte{0});
    const std::int64_t xp = isa::padded_width(W), yp = isa::padded_width(W);
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t oh = 0; oh < H; ++oh)
        for (std::int64_t ow = 0; ow < W; ++ow) {
          std::int32_t acc = bias[static_cast<std::size_t>(m)];
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t r = 0; r < 3; ++r)
              for (std::int64_t s = 0; s < 3; ++s) {
                const std::int64_t ih = oh - 1 + r, iw = ow - 1 + s;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const std::int32_t xv = at8(region, x.address + static_cast<std::uint64_t>((c * H + ih) * xp + iw), DType::UInt8);
                acc += (xv - 120) * w[static_cast<std::size_t>(((m * C + c) * 3 + r) * 3 + s)];
              }
          const std::int32_t q = isa::requantize_fixed_point(acc, f.multipliers[static_cast<std::size_t>(m)], 30, 30, 200);
          expected[static_cast<std::size_t>((m * H + oh) * yp + ow)] = static_cast<std::byte>(q);
        }
    for (const auto& got : three_ways(*prog, region, y)) CHECK(got == expected);
  }
  SECTION("MatMul with a bias, per column") {
    const std::int64_t Mr = 3, K = 20, N = 6;
    ProgramBuilder b;
    std::vector<std::int32_t> bv(static_cast<std::size_t>(K * N)), bias(static_cast<std::size_t>(N));
    for (auto& v : bv) v = static_cast<std::int32_t>(rng() % 256);
    for (auto& v : bias) v = static_cast<std::int32_t>(rng() % 20000) - 10000;
    auto bref = b.constant(DType::UInt8, {K, N}, bv);
    auto biasref = b.constant(DType::Int32, {N}, bias);
    auto a = b.activation(DType::Int8, {Mr, K}, Layout::Linear);
    auto y = b.activation(DType::Int8, {Mr, N}, Layout::Linear);
    isa::MatMulParams p;
    p.b = bref;
    p.a = {2.0f, -3};
    p.b_scale = {2.0f};
    p.b_zero_point = {128};
    p.y = {0.5f, 7};
    p.bias = biasref;
    isa::FixedPointRequant f;
    for (std::int64_t n = 0; n < N; ++n) f.multipliers.push_back(isa::quantize_multiplier(0.001 * static_cast<double>(n + 1)));
    f.out_min = -128;
    f.out_max = 127;
    p.fixed_point = f;
    b.kernel(isa::KernelKind::MatMul, {a}, {y}, p);
    auto prog = b.finish({a}, {y});
    const auto region = region_of(*prog, rng);
    std::vector<std::byte> expected;
    for (std::int64_t r = 0; r < Mr; ++r)
      for (std::int64_t n = 0; n < N; ++n) {
        std::int32_t acc = bias[static_cast<std::size_t>(n)];
        for (std::int64_t k = 0; k < K; ++k) {
          acc += (at8(region, a.address + static_cast<std::uint64_t>(r * K + k), DType::Int8) + 3) *
                 (bv[static_cast<std::size_t>(k * N + n)] - 128);
        }
        expected.push_back(static_cast<std::byte>(
            static_cast<std::uint8_t>(isa::requantize_fixed_point(acc, f.multipliers[static_cast<std::size_t>(n)], 7, -128, 127))));
      }
    for (const auto& got : three_ways(*prog, region, y)) CHECK(got == expected);
  }
  SECTION("Add (TFLite's ADD arithmetic) with a RELU clamp") {
    ProgramBuilder b;
    const Shape s{1, 2, 3, 40};
    auto a = b.activation(DType::UInt8, s, Layout::LoweredNCHW);
    auto c = b.activation(DType::UInt8, s, Layout::LoweredNCHW);
    auto y = b.activation(DType::UInt8, s, Layout::LoweredNCHW);
    isa::AddParams p{.a = {0.05f, 128}, .b = {0.03f, 100}, .y = {0.07f, 110}};
    const double twice = 2 * 0.05;
    isa::FixedPointAdd f{.left_shift = 20,
                         .a_mult = isa::quantize_multiplier(0.05 / twice),
                         .b_mult = isa::quantize_multiplier(0.03 / twice),
                         .y_mult = isa::quantize_multiplier(twice / ((1 << 20) * 0.07)),
                         .out_min = 110,
                         .out_max = 255};
    p.fixed_point = f;
    b.kernel(isa::KernelKind::Add, {a, c}, {y}, p);
    auto prog = b.finish({a, c}, {y});
    const auto region = region_of(*prog, rng);
    std::vector<std::byte> expected(static_cast<std::size_t>(y.size_bytes()), std::byte{0});
    bool any_float_difference = false;
    for (std::int64_t row = 0; row < 6; ++row)
      for (std::int64_t i = 0; i < 40; ++i) {
        const std::uint64_t off = static_cast<std::uint64_t>(row * isa::padded_width(40) + i);
        const std::int32_t av = at8(region, a.address + off, DType::UInt8), bvv = at8(region, c.address + off, DType::UInt8);
        const std::int32_t sa = isa::multiply_by_quantized_multiplier((av - 128) * (1 << 20), f.a_mult);
        const std::int32_t sb = isa::multiply_by_quantized_multiplier((bvv - 100) * (1 << 20), f.b_mult);
        const std::int32_t v = std::clamp(isa::multiply_by_quantized_multiplier(sa + sb, f.y_mult) + 110, 110, 255);
        expected[static_cast<std::size_t>(off)] = static_cast<std::byte>(v);
        const double real = ((av - 128) * 0.05 + (bvv - 100) * 0.03) / 0.07;
        any_float_difference = any_float_difference || std::clamp<double>(std::nearbyint(real) + 110, 0, 255) != v;
      }
    CHECK(any_float_difference);  // the RELU clamp alone makes the float rule differ
    for (const auto& got : three_ways(*prog, region, y)) CHECK(got == expected);
  }
  SECTION("Requantize through a table") {
    ProgramBuilder b;
    auto x = b.activation(DType::Int8, {2, 3, 5, 33}, Layout::LoweredNCHW);
    auto y = b.activation(DType::UInt8, {2, 3, 5, 33}, Layout::Linear);
    isa::RequantizeParams p{.x = {1.0f, 0}, .y = {1.0f, 0}};
    for (int i = 0; i < 256; ++i) p.table.push_back(static_cast<std::uint8_t>((i * 37 + 11) % 256));
    b.kernel(isa::KernelKind::Requantize, {x}, {y}, p);
    auto prog = b.finish({x}, {y});
    const auto region = region_of(*prog, rng);
    std::vector<std::byte> expected;
    for (std::int64_t row = 0; row < 2 * 3 * 5; ++row)
      for (std::int64_t i = 0; i < 33; ++i) {
        const auto byte = std::to_integer<std::uint8_t>(
            region[static_cast<std::size_t>(x.address + static_cast<std::uint64_t>(row * isa::padded_width(33) + i))]);
        expected.push_back(static_cast<std::byte>(p.table[byte]));
      }
    for (const auto& got : three_ways(*prog, region, y)) CHECK(got == expected);
  }
}

TEST_CASE("fixed point: malformed parameters fail the kernel", "[device][fixed_point]") {
  ProgramBuilder b;
  auto wref = b.constant(DType::Int8, {2, 1, 1, 1}, std::vector<std::int32_t>{1, 2});
  auto x = b.activation(DType::UInt8, {1, 1, 2, 2}, Layout::LoweredNCHW);
  auto y = b.activation(DType::UInt8, {1, 2, 2, 2}, Layout::LoweredNCHW);
  isa::Conv2dParams p;
  p.weight = wref;
  p.w_scale = {1.0f};
  p.w_zero_point = {0};
  p.fixed_point = isa::FixedPointRequant{.multipliers = {{5, 0}}, .out_min = 0, .out_max = 255};
  b.kernel(isa::KernelKind::Conv2d, {x}, {y}, p);
  auto prog = b.finish({x}, {y});
  std::vector<std::byte> region(static_cast<std::size_t>(prog->dram_bytes));
  try {
    sim::run_kernel(prog->kernels[0], region);
    FAIL("a malformed fixed-point multiplier was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::DeviceFault);
    CHECK_THAT(e.message(), Catch::Contains("fixed-point multiplier"));
  }
  ProgramBuilder b2;
  auto x2 = b2.activation(DType::UInt8, {4}, Layout::Linear);
  auto y2 = b2.activation(DType::UInt8, {4}, Layout::Linear);
  isa::RequantizeParams rp;
  rp.table.assign(10, 0);
  b2.kernel(isa::KernelKind::Requantize, {x2}, {y2}, rp);
  auto prog2 = b2.finish({x2}, {y2});
  std::vector<std::byte> region2(static_cast<std::size_t>(prog2->dram_bytes));
  CHECK_THROWS_WITH(sim::run_kernel(prog2->kernels[0], region2), Catch::Contains("256"));
}
