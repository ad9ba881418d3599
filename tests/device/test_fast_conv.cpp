// Fast kernels: convolution (Conv2d, DepthwiseConv2d) and prepared programs against a reference.
// The simulator's fast kernels (device/sim/fast_kernels*.cpp, every ISA level) against
// straightforward references written here, on randomized shapes and parameters: odd channel
// counts, widths that are not multiples of 16 or 32, strides, dilations, padding, groups,
// depthwise with channel multipliers, int8 and uint8 activations and weights, per-channel
// non-zero weight zero points, biases, multipliers that saturate, both layouts. Every case runs
// three ways at every ISA level this CPU has (check_three_ways, fast_kernel_test_support.h).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <fmt/format.h>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "device_test_util.h"
#include "fast_kernels.h"
#include "fork_join.h"
#include "fast_kernel_test_support.h"
#include "fast_switch.h"
#include "kernels.h"

using namespace furiosa;
using namespace furiosa::device;
using namespace furiosa::device::test;
using isa::Layout;

namespace {

// ---------------------------------------------------------------------------------------------
// Convolution.

struct ConvSpec {
  std::int64_t n, c, h, w, m, kh, kw, group;
  std::array<std::int64_t, 4> pads;
  std::array<std::int64_t, 2> strides, dilations;
  DType x_type, w_type, y_type;
  Layout x_layout, y_layout;
  bool per_channel, with_bias, depthwise_kind;
  float mult_scale;  // scales the requantization multipliers (large: saturation)
  // Inputs at the ends of their range and weights at the values where 16-bit sums of two
  // int8 products overflow (vpmaddubsw's pairs; docs/simulator-speed.md, "Exact int8 products
  // without VNNI"): 0 no, 1 every weight from those values, 2 weights within +-64 of the
  // middle but 1 in 200 at an end (a kernel that splits the pairs past 128 must get the few
  // k4 rows that need a second pass right).
  int extreme = 0;
  // Weight zero points all at the middle of the range (0 for int8, 128 for uint8): the plan has
  // no weight zero points to correct for, which the avx512 direct taps need (ConvPlan::w_taps).
  bool symmetric = false;
};

std::string describe(const ConvSpec& s) {
  return fmt::format(
      "x [{}, {}, {}, {}] {} {}, w [{}, {}, {}, {}] {}, group {}, pads [{}, {}, {}, {}], "
      "strides [{}, {}], dilations [{}, {}], y {} {}, per_channel {}, bias {}, kind {}, "
      "mult x{}",
      s.n, s.c, s.h, s.w, dtype_name(s.x_type), isa::layout_name(s.x_layout), s.m, s.c / s.group,
      s.kh, s.kw, dtype_name(s.w_type), s.group, s.pads[0], s.pads[1], s.pads[2], s.pads[3],
      s.strides[0], s.strides[1], s.dilations[0], s.dilations[1], dtype_name(s.y_type),
      isa::layout_name(s.y_layout), s.per_channel, s.with_bias,
      s.depthwise_kind ? "depthwise" : "conv", s.mult_scale);
}

// Builds the conv kernel of `s` with random data, computes the reference and checks it.
// `in_place`: the output is placed over the input (same address; needs equal sizes).
void run_conv_case(const ConvSpec& s, std::uint32_t seed, bool in_place = false) {
  INFO(describe(s) << (in_place ? " (in place)" : "") << " seed " << seed);
  std::mt19937 rng(seed);
  const std::int64_t oh = out_dim(s.h, s.kh, s.pads[0], s.pads[2], s.strides[0], s.dilations[0]);
  const std::int64_t ow = out_dim(s.w, s.kw, s.pads[1], s.pads[3], s.strides[1], s.dilations[1]);
  REQUIRE(oh > 0);
  REQUIRE(ow > 0);
  const std::int64_t cg = s.c / s.group, mg = s.m / s.group;
  const Shape ws{s.m, cg, s.kh, s.kw};
  auto w = random_8bit(static_cast<std::size_t>(element_count(ws)), s.w_type, seed + 1);
  const auto [wlo, whi] = isa::quant_range(s.w_type);
  const auto [xlo, xhi] = isa::quant_range(s.x_type);
  if (s.extreme == 1) {
    // Offsets from the bottom of the range: the ends, and +-64 / +-65 around the middle.
    const std::int32_t offsets[] = {0, 1, 2, 63, 64, 65, 127, 128, 191, 192, 193, 254, 255};
    for (auto& v : w) v = wlo + offsets[rnd(rng, static_cast<std::int64_t>(std::size(offsets)))];
  } else if (s.extreme == 2) {
    for (auto& v : w) {
      v = wlo + (rnd(rng, 200) == 0 ? (rnd(rng, 2) ? 255 : 0) : 64 + rnd(rng, 129));
    }
  }
  const auto [ylo, yhi] = isa::quant_range(s.y_type);

  isa::Conv2dParams p;
  p.pads = s.pads;
  p.strides = s.strides;
  p.dilations = s.dilations;
  p.group = s.group;
  p.x = {0.0173f, random_in(rng, xlo, xhi)};
  p.y = {0.0411f, random_in(rng, ylo, yhi)};
  const std::size_t nq = s.per_channel ? static_cast<std::size_t>(s.m) : 1;
  for (std::size_t i = 0; i < nq; ++i) {
    p.w_scale.push_back(std::uniform_real_distribution<float>(0.0005f, 0.02f)(rng) * s.mult_scale);
    const std::int32_t middle = s.w_type == DType::Int8 ? 0 : 128;
    p.w_zero_point.push_back(s.symmetric        ? middle
                             : rnd(rng, 3) == 0 ? 0
                                                : random_in(rng, wlo, whi));
  }
  std::vector<std::int32_t> bias;
  ProgramBuilder b("conv");
  p.weight = b.constant(s.w_type, ws, w);
  if (s.with_bias) {
    bias = random_values(static_cast<std::size_t>(s.m), -20000, 20000, seed + 2);
    p.bias = b.constant(DType::Int32, {s.m}, bias);
  }
  const isa::TensorRef x = b.activation(s.x_type, {s.n, s.c, s.h, s.w}, s.x_layout);
  isa::TensorRef y = b.activation(s.y_type, {s.n, s.m, oh, ow}, s.y_layout);
  if (in_place) {
    REQUIRE(y.size_bytes() == x.size_bytes());
    y.address = x.address;
  }
  b.kernel(s.depthwise_kind ? isa::KernelKind::DepthwiseConv2d : isa::KernelKind::Conv2d, {x}, {y},
           p);
  auto prog = b.finish({x}, {y});
  auto region = make_region(*prog, rng);
  if (s.extreme != 0) {  // mostly the top of the range: activations of 255 once made unsigned
    for (std::size_t i = 0; i < x.size_bytes(); ++i) {
      region[x.address + i] =
          static_cast<std::byte>(static_cast<std::uint8_t>(rnd(rng, 8) == 0 ? xlo : xhi));
    }
  }

  // Reference, on the input bytes as placed in the region.
  std::vector<std::byte> expected(y.size_bytes(), std::byte{0});
  for (std::int64_t n = 0; n < s.n; ++n) {
    for (std::int64_t m = 0; m < s.m; ++m) {
      const std::size_t q = s.per_channel ? static_cast<std::size_t>(m) : 0;
      const std::int32_t wz = p.w_zero_point[q];
      const float mult = (p.x.scale * p.w_scale[q]) / p.y.scale;
      for (std::int64_t i = 0; i < oh; ++i) {
        for (std::int64_t j = 0; j < ow; ++j) {
          std::uint32_t acc =
              bias.empty() ? 0u : static_cast<std::uint32_t>(bias[static_cast<std::size_t>(m)]);
          for (std::int64_t ci = 0; ci < cg; ++ci) {
            const std::int64_t c = (m / mg) * cg + ci;
            for (std::int64_t kh = 0; kh < s.kh; ++kh) {
              for (std::int64_t kw = 0; kw < s.kw; ++kw) {
                const std::int64_t ih = i * s.strides[0] - s.pads[0] + kh * s.dilations[0];
                const std::int64_t iw = j * s.strides[1] - s.pads[1] + kw * s.dilations[1];
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                const std::int32_t xv =
                    value_of(region.data() + offset4(x, n, c, ih, iw), s.x_type);
                const std::int32_t wv =
                    w[static_cast<std::size_t>(((m * cg + ci) * s.kh + kh) * s.kw + kw)];
                acc += static_cast<std::uint32_t>((xv - p.x.zero_point) * (wv - wz));
              }
            }
          }
          put4(expected, y, n, m, i, j,
               isa::requantize(static_cast<std::int32_t>(acc), mult, p.y.zero_point, ylo, yhi));
        }
      }
    }
  }
  check_three_ways(*prog, region, y, expected);
}

ConvSpec random_conv(std::mt19937& rng, bool depthwise) {
  ConvSpec s{};
  s.n = rnd(rng, 4) == 0 ? 2 : 1;
  s.kh = 1 + rnd(rng, 4);
  s.kw = 1 + rnd(rng, 5);
  if (rnd(rng, 3) == 0) s.kh = s.kw = 1;
  if (rnd(rng, 3) == 0) s.kh = s.kw = 3;
  s.strides = {1 + rnd(rng, 3), 1 + rnd(rng, 3)};
  s.dilations = {1 + (rnd(rng, 4) == 0 ? 1 : 0), 1 + (rnd(rng, 4) == 0 ? 1 : 0)};
  for (auto& pad : s.pads) pad = rnd(rng, 3);
  s.h = 1 + rnd(rng, 20);
  s.w = 1 + rnd(rng, 70);
  if (depthwise) {
    s.c = 1 + rnd(rng, 13);
    s.group = s.c;
    s.m = s.c * (rnd(rng, 4) == 0 ? 2 : 1);
    s.depthwise_kind = rnd(rng, 4) != 0;
  } else {
    s.group = rnd(rng, 4) == 0 ? 1 + rnd(rng, 3) : 1;
    s.c = s.group * (1 + rnd(rng, 13));
    s.m = s.group * (1 + rnd(rng, 15));
  }
  // Keep the output non-empty.
  const auto span = [](std::int64_t k, std::int64_t d) { return d * (k - 1) + 1; };
  s.h = std::max(s.h, span(s.kh, s.dilations[0]));
  s.w = std::max(s.w, span(s.kw, s.dilations[1]));
  s.x_type = pick_8bit(rng);
  s.w_type = pick_8bit(rng);
  s.y_type = pick_8bit(rng);
  s.x_layout = rnd(rng, 4) == 0 ? Layout::Linear : Layout::LoweredNCHW;
  s.y_layout = rnd(rng, 4) == 0 ? Layout::Linear : Layout::LoweredNCHW;
  s.per_channel = rnd(rng, 2) == 0;
  s.with_bias = rnd(rng, 4) != 0;
  const float scales[] = {1.0f, 1.0f, 1.0f, 0.2f, 8.0f, 400.0f};
  s.mult_scale = scales[rnd(rng, 6)];
  return s;
}

TEST_CASE("Fast conv matches the reference on random shapes", "[device][kernels][fast][conv]") {
  std::mt19937 rng(2024);
  for (int i = 0; i < 150; ++i) run_conv_case(random_conv(rng, false), 1000 + i);
}

TEST_CASE("Fast conv is exact where 16-bit sums of two int8 products would saturate",
          "[device][kernels][fast][conv]") {
  std::mt19937 rng(4096);
  for (int i = 0; i < 120; ++i) {
    ConvSpec s = random_conv(rng, false);
    s.extreme = 1 + i % 2;
    s.mult_scale = 0.01f;  // accumulators of up to about 10^6: keep the outputs in range
    run_conv_case(s, 9000 + i);
  }
}

TEST_CASE("Fast depthwise conv matches the reference on random shapes",
          "[device][kernels][fast][conv]") {
  std::mt19937 rng(77);
  for (int i = 0; i < 150; ++i) run_conv_case(random_conv(rng, true), 5000 + i);
}

// The avx512 level's row tiles (conv_depthwise_rows): 3 x 3 stride-1 layers whose rows of 9 to
// 29 outputs are packed floor(64 / OW) rows to a tile, vectors crossing row boundaries (rows of
// 16 plane bytes up to OW = 14, of 32 above). Widths at the ends of both, a last tile of fewer
// rows, a kernel 2 wide, no padding with two outputs per channel, int8 and uint8, weight zero
// points on and off, saturation; the other levels run the same shapes on their own paths.
TEST_CASE("Fast depthwise conv packs rows of 9 to 29 outputs into tiles",
          "[device][kernels][fast][conv]") {
  const auto U8 = DType::UInt8, I8 = DType::Int8;
  const auto L = Layout::LoweredNCHW;
  // clang-format off
  const std::vector<ConvSpec> specs = {
      {1, 24, 19, 19, 24, 3, 3, 24, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, true, 1.0f},
      {1, 24, 19, 19, 24, 3, 3, 24, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, true, 1.0f, 0, true},
      {1, 10, 17, 29, 10, 3, 3, 10, {1, 1, 1, 1}, {1, 1}, {1, 1}, I8, U8, I8, L, L, false, true, true, 1.0f},
      {1, 9, 13, 15, 9, 3, 3, 9, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, U8, U8, L, L, true, false, true, 1.0f},
      {1, 5, 12, 20, 5, 3, 2, 5, {1, 0, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, true, 1.0f},
      {1, 20, 10, 10, 20, 3, 3, 20, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, true, 1.0f, 0, true},
      {1, 7, 11, 9, 7, 3, 3, 7, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, U8, U8, L, L, true, true, true, 1.0f},
      {1, 6, 9, 14, 12, 3, 3, 6, {0, 0, 0, 0}, {1, 1}, {1, 1}, I8, I8, I8, L, L, true, true, true, 1.0f},
      {1, 33, 14, 14, 33, 3, 3, 33, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, true, 8.0f},
  };
  // clang-format on
  std::uint32_t seed = 14000;
  for (const auto& s : specs) run_conv_case(s, seed++);
}

// Intra-op parallelism splits a convolution into chunks (of channels, blocks of output channels
// or B's rows) that must be independent: run them one at a time, last first, and the bytes stay
// the same (a chunk writing past its end into the next one's part would be overwritten when the
// chunks run in order, and shows here).
TEST_CASE("Fast conv gives the same bytes with its chunks run last first",
          "[device][kernels][fast][conv]") {
  struct Reverse {
    Reverse() { furiosa::device::sim::set_reverse_inline_chunks(true); }
    ~Reverse() { furiosa::device::sim::set_reverse_inline_chunks(false); }
  } reverse;
  std::mt19937 rng(4242);
  for (int i = 0; i < 60; ++i) run_conv_case(random_conv(rng, i % 3 == 0), 12000 + i);
  const auto U8 = DType::UInt8, I8 = DType::Int8;
  const auto L = Layout::LoweredNCHW;
  // clang-format off
  const std::vector<ConvSpec> specs = {
      // rows of 7 (9 per tile of 64 slots), 14 and 28
      {1, 20, 28, 7, 24, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, false, 1.0f},
      {1, 24, 28, 28, 30, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, U8, U8, U8, L, L, true, true, false, 1.0f},
      {1, 200, 28, 28, 20, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, U8, U8, U8, L, L, true, true, false, 1.0f},
      {1, 170, 14, 14, 20, 3, 3, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, U8, I8, L, L, true, true, false, 1.0f},
      // dense tiles over rows of 56 and of 13 (linear), segments of 112
      {1, 80, 56, 56, 12, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, U8, U8, U8, L, L, true, true, false, 1.0f},
      {1, 70, 40, 13, 12, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, U8, U8, U8, Layout::Linear, Layout::Linear, true, true, false, 1.0f},
      {1, 16, 9, 112, 20, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, U8, U8, U8, L, L, true, true, false, 1.0f},
      // depthwise over many rows
      {1, 12, 60, 60, 12, 3, 3, 12, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, true, 1.0f},
      {1, 12, 61, 33, 12, 3, 3, 12, {1, 1, 1, 1}, {2, 2}, {1, 1}, U8, U8, U8, L, L, true, true, true, 1.0f},
  };
  // clang-format on
  std::uint32_t seed = 13000;
  for (const auto& s : specs) run_conv_case(s, seed++);
}

TEST_CASE("Fast conv handles the model-like shapes", "[device][kernels][fast][conv]") {
  const auto U8 = DType::UInt8, I8 = DType::Int8;
  const auto L = Layout::LoweredNCHW;
  // clang-format off
  std::vector<ConvSpec> specs = {
      // pointwise (GEMM without im2col), MobileNetV2 / ShuffleNet-like, odd channel counts
      {1, 24, 56, 56, 144, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, false, 1.0f},
      {1, 58, 28, 28, 58, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, U8, I8, U8, L, L, false, true, false, 1.0f},
      {1, 160, 7, 7, 37, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, I8, U8, I8, L, L, true, true, false, 1.0f},
      {1, 17, 14, 14, 96, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, U8, U8, U8, L, L, true, false, false, 1.0f},
      // row segments (OW > 32): 112 = 64 + 48 per row, and 224 whose last segment ends the
      // padded row after 32 bytes; weight zero points on
      {1, 16, 4, 112, 20, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, U8, U8, U8, L, L, true, true, false, 1.0f},
      {1, 8, 3, 224, 12, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, I8, U8, I8, L, L, true, true, false, 1.0f},
      {1, 3, 9, 80, 16, 3, 3, 1, {1, 1, 1, 1}, {2, 2}, {1, 1}, U8, U8, U8, L, L, true, true, false, 1.0f},
      // first layer: 3x3 stride 2 over 3 channels
      {1, 3, 45, 45, 32, 3, 3, 1, {1, 1, 1, 1}, {2, 2}, {1, 1}, U8, I8, U8, L, L, true, true, false, 1.0f},
      // depthwise 3x3 stride 1 / 2, widths around vector sizes
      {1, 19, 33, 33, 19, 3, 3, 19, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, true, 1.0f},
      {1, 11, 66, 66, 11, 3, 3, 11, {1, 1, 1, 1}, {2, 2}, {1, 1}, I8, I8, I8, L, L, true, true, true, 1.0f},
      {1, 7, 17, 130, 7, 3, 3, 7, {0, 1, 2, 1}, {1, 2}, {2, 1}, U8, U8, U8, L, L, true, true, true, 1.0f},
      // depthwise the 256-bit levels refuse (3 sw + 3 dw > 15: their taps of 4 outputs do not
      // fit 16 bytes), so the prepared and unprepared runs fall back to the portable kernel
      {1, 4, 9, 40, 4, 3, 3, 4, {1, 1, 1, 1}, {1, 3}, {1, 3}, U8, I8, U8, L, L, true, true, true, 1.0f},
      // depthwise rows of more than 128 outputs (byte counts past a signed char)
      {1, 3, 6, 150, 3, 3, 3, 3, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, false, true, true, 1.0f},
      // narrow depthwise (OW <= 8: two output rows per vector): 7 x 7 like MobileNetV2's last
      // stages, 11 rows (two groups of 8, an odd last row) with a depth multiplier of 2,
      // kernel width 2 at OW 8; weight zero points on
      {1, 24, 7, 7, 24, 3, 3, 24, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, U8, U8, L, L, true, true, true, 1.0f},
      {1, 10, 11, 6, 20, 3, 3, 10, {0, 1, 2, 1}, {1, 1}, {1, 1}, I8, U8, I8, L, L, true, true, true, 1.0f},
      {1, 9, 6, 8, 9, 3, 2, 9, {1, 0, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, true, 1.0f},
      // depthwise with kernel widths beyond 4 taps and strides beyond the vpermb window
      {1, 5, 20, 40, 5, 5, 7, 5, {2, 3, 2, 3}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, true, 1.0f},
      {1, 4, 30, 90, 4, 3, 3, 4, {1, 1, 1, 1}, {5, 5}, {1, 1}, U8, I8, U8, L, L, true, true, true, 1.0f},
      // grouped, not depthwise
      {1, 12, 9, 23, 18, 3, 3, 3, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, false, 1.0f},
      // long K (ResNet-50's last stages): 3 x 3 over 520 channels at 7 x 7 (one tile of whole
      // rows), over 300 channels at 14 x 14 (dense tiles); 1 x 1 over 1030 channels
      {1, 520, 7, 7, 40, 3, 3, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, false, 1.0f},
      {1, 300, 14, 14, 27, 3, 3, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, U8, I8, L, L, true, true, false, 1.0f},
      {1, 1030, 7, 7, 13, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, I8, I8, U8, L, L, true, true, false, 1.0f},
      // huge multipliers: everything saturates, both ends
      {1, 9, 10, 10, 13, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, false, 1e6f},
      {1, 9, 10, 10, 9, 3, 3, 9, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, I8, L, L, true, true, true, 1e6f},
      // linear layouts on both sides, widths not multiples of 16
      {2, 6, 5, 13, 10, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, U8, I8, U8, Layout::Linear, Layout::Linear, true, true, false, 1.0f},
      {2, 6, 5, 13, 6, 3, 3, 6, {1, 1, 1, 1}, {1, 1}, {1, 1}, I8, I8, U8, Layout::Linear, Layout::Linear, true, true, true, 1.0f},
  };
  // clang-format on
  std::uint32_t seed = 9000;
  for (const auto& s : specs) run_conv_case(s, seed++);
}

// The avx512 GEMM's direct taps (fast_kernels_avx512_conv.inc: Segments tiles read B from the
// phase planes interleaved by 4 channels, ConvPlan::w_taps): kernels of several taps over
// output rows wider than 32, without weight zero points. Every level runs these; the others
// take their im2col path.
TEST_CASE("Fast conv reads the taps of wide rows straight from the phase planes",
          "[device][kernels][fast][conv]") {
  const auto U8 = DType::UInt8, I8 = DType::Int8;
  const auto L = Layout::LoweredNCHW;
  // clang-format off
  std::vector<ConvSpec> specs = {
      // YOLOv8n-like 3 x 3 stride 1 at 80 (64 + 16) and 160 (2 x 64 + 32), and stride 2
      {1, 20, 7, 80, 24, 3, 3, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, false, 1.0f},
      {1, 16, 5, 160, 16, 3, 3, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, false, true, false, 1.0f},
      {1, 16, 9, 320, 32, 3, 3, 1, {1, 1, 1, 1}, {2, 2}, {1, 1}, U8, I8, U8, L, L, true, true, false, 1.0f},
      // 7 input channels (two words of 4 with a stand-in channel), stride 2 as a first layer
      {1, 7, 11, 130, 16, 3, 3, 1, {1, 1, 1, 1}, {2, 2}, {1, 1}, U8, I8, U8, L, L, true, true, false, 1.0f},
      // odd channel counts, int8 activations, uint8 weights at 128, signed outputs
      {1, 15, 6, 128, 19, 3, 3, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}, I8, U8, I8, L, L, true, true, false, 1.0f},
      // kernel 3 x 1 (plane rows of exactly OW bytes), 1 x 3, 5 x 5 with dilation 2, asymmetric pads
      {1, 21, 8, 70, 10, 3, 1, 1, {0, 0, 2, 0}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, false, 1.0f},
      {1, 11, 5, 99, 10, 1, 3, 1, {0, 1, 0, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, false, 1.0f},
      {1, 7, 12, 128, 9, 5, 5, 1, {4, 3, 2, 4}, {1, 2}, {2, 2}, I8, I8, U8, L, L, true, false, false, 1.0f},
      // two groups, saturating multipliers
      {1, 8, 6, 66, 14, 3, 3, 2, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true, true, false, 1.0f},
      {1, 12, 4, 64, 8, 3, 3, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, I8, L, L, true, true, false, 1e5f},
  };
  // clang-format on
  std::uint32_t seed = 14000;
  for (auto s : specs) {
    s.symmetric = true;
    run_conv_case(s, seed++);
  }
  std::mt19937 rng(31);
  for (int i = 0; i < 60; ++i) {
    ConvSpec s = random_conv(rng, false);
    s.symmetric = true;
    s.w = std::max<std::int64_t>(s.w, 40 + rnd(rng, 100));  // rows over 32 for most strides
    s.y_layout = Layout::LoweredNCHW;
    run_conv_case(s, 15000 + i);
  }
  // Chunks of the interleaving and of the GEMM run last first (see the test above).
  furiosa::device::sim::set_reverse_inline_chunks(true);
  struct Reset {
    ~Reset() { furiosa::device::sim::set_reverse_inline_chunks(false); }
  } reset;
  for (auto s : specs) {
    s.symmetric = true;
    run_conv_case(s, seed++);
  }
}

TEST_CASE("Fast conv reads its input before writing an output placed over it",
          "[device][kernels][fast][conv]") {
  const auto U8 = DType::UInt8, I8 = DType::Int8;
  const auto L = Layout::LoweredNCHW;
  // Same input and output sizes: pointwise C -> C and depthwise stride 1 with padding 1.
  // clang-format off
  run_conv_case({1, 8, 9, 20, 8, 1, 1, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true,
                 true, false, 1.0f},
                31, true);
  run_conv_case({1, 8, 9, 20, 8, 3, 3, 8, {1, 1, 1, 1}, {1, 1}, {1, 1}, U8, I8, U8, L, L, true,
                 true, true, 1.0f},
                32, true);
  // clang-format on
}

TEST_CASE("Prepared weights are not used when a kernel writes over them",
          "[device][kernels][fast][conv]") {
  // Kernel 0 copies an activation over the weights of kernel 1; the prepared program must not
  // use the weights packed at load for kernel 1.
  ProgramBuilder b("overwrite");
  const Shape ws{4, 3, 1, 1};
  const auto w0 = random_8bit(12, DType::Int8, 1);
  isa::Conv2dParams p;
  p.weight = b.constant(DType::Int8, ws, w0);
  p.x = {0.02f, 3};
  p.y = {0.05f, 100};
  p.w_scale = {0.01f};
  p.w_zero_point = {0};
  const isa::TensorRef new_w = b.activation(DType::Int8, {12}, Layout::Linear);
  const isa::TensorRef x = b.activation(DType::UInt8, {1, 3, 4, 5}, Layout::LoweredNCHW);
  const isa::TensorRef y = b.activation(DType::UInt8, {1, 4, 4, 5}, Layout::LoweredNCHW);
  isa::TensorRef w_view = p.weight;
  w_view.shape = {12};
  b.kernel(isa::KernelKind::Reshape, {new_w}, {w_view}, isa::ReshapeParams{});
  b.kernel(isa::KernelKind::Conv2d, {x}, {y}, p);
  auto prog = b.finish({new_w, x}, {y});
  std::mt19937 rng(5);
  auto region = make_region(*prog, rng);
  auto reference = region;
  {
    FastSwitch restore;
    sim::set_fast_kernels_enabled(false);
    sim::run_kernel(prog->kernels[0], reference);
    sim::run_kernel(prog->kernels[1], reference);
  }
  auto prepared = sim::prepare_program(*prog);
  sim::run_kernel(prog->kernels[0], region, prepared.get(), 0);
  sim::run_kernel(prog->kernels[1], region, prepared.get(), 1);
  CHECK(region == reference);
}

// [threads]: left out under qemu-aarch64, where no thread starts (tests/device/CMakeLists.txt).
TEST_CASE("Prepared programs run concurrently on several threads",
          "[device][kernels][fast][threads]") {
  // clang-format off
  const ConvSpec s{1, 20, 30, 45, 36, 3, 3, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}, DType::UInt8,
                   DType::Int8, DType::UInt8, Layout::LoweredNCHW, Layout::LoweredNCHW, true,
                   true, false, 1.0f};
  // clang-format on
  ProgramBuilder b("threads");
  isa::Conv2dParams p;
  p.weight = b.constant(DType::Int8, {s.m, s.c, 3, 3}, random_8bit(36 * 20 * 9, DType::Int8, 3));
  p.pads = s.pads;
  p.x = {0.02f, 3};
  p.y = {0.05f, 100};
  p.w_scale = {0.01f};
  p.w_zero_point = {-3};
  const isa::TensorRef x = b.activation(DType::UInt8, {1, s.c, s.h, s.w}, Layout::LoweredNCHW);
  const isa::TensorRef y = b.activation(DType::UInt8, {1, s.m, s.h, s.w}, Layout::LoweredNCHW);
  b.kernel(isa::KernelKind::Conv2d, {x}, {y}, p);
  auto prog = b.finish({x}, {y});
  std::mt19937 rng(8);
  const auto region = make_region(*prog, rng);
  auto reference = region;
  sim::run_kernel(prog->kernels[0], reference);
  auto prepared = sim::prepare_program(*prog);
  std::vector<std::vector<std::byte>> results(4, region);
  std::vector<std::thread> threads;
  for (auto& r : results) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) sim::run_kernel(prog->kernels[0], r, prepared.get(), 0);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) CHECK(r == reference);
}

}  // namespace
