// Every simulator kernel against a straightforward reference computed here, on small hand-made
// data. Lowered inputs carry garbage in their row padding (widths are not multiples of 32), so
// a kernel that reads padding produces wrong results.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "device_test_util.h"

using namespace furiosa;
using namespace furiosa::device;
using namespace furiosa::device::test;

namespace {

/// Description of one QLinearConv test case.
struct ConvCase {
  const char* name;
  std::int64_t n, c, h, w, m, kh, kw, group;
  std::array<std::int64_t, 4> pads;
  std::array<std::int64_t, 2> strides, dilations;
  DType x_type, w_type, y_type;
  bool per_channel, with_bias, depthwise;
};

/// Output size of one spatial dim (ONNX explicit padding).
std::int64_t out_dim(std::int64_t in, std::int64_t k, std::int64_t pad_begin, std::int64_t pad_end,
                     std::int64_t stride, std::int64_t dilation) {
  return (in + pad_begin + pad_end - dilation * (k - 1) - 1) / stride + 1;
}

/// Reference QLinearConv accumulators (before requantization), [N][M][OH][OW].
std::vector<std::int32_t> conv_acc(const ConvCase& cc, const std::vector<std::int32_t>& x,
                                   std::int32_t x_zp, const std::vector<std::int32_t>& w,
                                   const std::vector<std::int32_t>& w_zp,
                                   const std::vector<std::int32_t>& bias, std::int64_t oh_n,
                                   std::int64_t ow_n) {
  const std::int64_t cg = cc.c / cc.group, mg = cc.m / cc.group;
  std::vector<std::int32_t> acc;
  for (std::int64_t n = 0; n < cc.n; ++n) {
    for (std::int64_t m = 0; m < cc.m; ++m) {
      const std::int32_t wz = w_zp[w_zp.size() == 1 ? 0 : static_cast<std::size_t>(m)];
      for (std::int64_t oh = 0; oh < oh_n; ++oh) {
        for (std::int64_t ow = 0; ow < ow_n; ++ow) {
          std::int32_t sum = bias.empty() ? 0 : bias[static_cast<std::size_t>(m)];
          for (std::int64_t ci = 0; ci < cg; ++ci) {
            const std::int64_t c = (m / mg) * cg + ci;
            for (std::int64_t kh = 0; kh < cc.kh; ++kh) {
              for (std::int64_t kw = 0; kw < cc.kw; ++kw) {
                const std::int64_t ih = oh * cc.strides[0] - cc.pads[0] + kh * cc.dilations[0];
                const std::int64_t iw = ow * cc.strides[1] - cc.pads[1] + kw * cc.dilations[1];
                if (ih < 0 || ih >= cc.h || iw < 0 || iw >= cc.w) continue;
                const std::int32_t xv =
                    x[static_cast<std::size_t>(((n * cc.c + c) * cc.h + ih) * cc.w + iw)];
                const std::int32_t wv =
                    w[static_cast<std::size_t>(((m * cg + ci) * cc.kh + kh) * cc.kw + kw)];
                sum += (xv - x_zp) * (wv - wz);
              }
            }
          }
          acc.push_back(sum);
        }
      }
    }
  }
  return acc;
}

void check_conv(const ConvCase& cc) {
  INFO(cc.name);
  const std::int64_t oh_n =
      out_dim(cc.h, cc.kh, cc.pads[0], cc.pads[2], cc.strides[0], cc.dilations[0]);
  const std::int64_t ow_n =
      out_dim(cc.w, cc.kw, cc.pads[1], cc.pads[3], cc.strides[1], cc.dilations[1]);
  const Shape xs{cc.n, cc.c, cc.h, cc.w}, ys{cc.n, cc.m, oh_n, ow_n};
  const Shape ws{cc.m, cc.c / cc.group, cc.kh, cc.kw};

  const auto x = random_8bit(static_cast<std::size_t>(element_count(xs)), cc.x_type, 100);
  const auto w = random_8bit(static_cast<std::size_t>(element_count(ws)), cc.w_type, 200);
  const std::int32_t x_zp = cc.x_type == DType::UInt8 ? 117 : -9;
  const std::size_t qn = cc.per_channel ? static_cast<std::size_t>(cc.m) : 1;
  std::vector<std::int32_t> w_zp =
      cc.w_type == DType::UInt8 ? random_values(qn, 100, 150, 300) : random_values(qn, -5, 5, 300);
  std::vector<float> w_scale;
  for (std::size_t i = 0; i < qn; ++i) w_scale.push_back(0.002f * static_cast<float>(i % 5 + 1));
  std::vector<std::int32_t> bias;
  if (cc.with_bias) bias = random_values(static_cast<std::size_t>(cc.m), -20000, 20000, 400);

  const auto acc = conv_acc(cc, x, x_zp, w, w_zp, bias, oh_n, ow_n);
  // Choose y's scale so that most outputs land inside the range and some saturate.
  std::int64_t max_abs = 1;
  for (std::int32_t a : acc) max_abs = std::max<std::int64_t>(max_abs, std::abs(a));
  isa::QuantParam xq{0.05f, x_zp};
  isa::QuantParam yq{0.05f * 0.002f * static_cast<float>(max_abs) / 200.0f,
                     cc.y_type == DType::UInt8 ? 128 : 3};
  const auto [qmin, qmax] = isa::quant_range(cc.y_type);
  std::vector<std::int32_t> expected;
  const std::int64_t plane = oh_n * ow_n;
  for (std::size_t i = 0; i < acc.size(); ++i) {
    const auto m = static_cast<std::size_t>((static_cast<std::int64_t>(i) / plane) % cc.m);
    const float mult = (xq.scale * w_scale[w_scale.size() == 1 ? 0 : m]) / yq.scale;
    expected.push_back(isa::requantize(acc[i], mult, yq.zero_point, qmin, qmax));
  }
  const auto inside = std::count_if(expected.begin(), expected.end(),
                                    [lo = qmin, hi = qmax](std::int32_t v) { return v > lo && v < hi; });
  CHECK(inside > static_cast<std::int64_t>(expected.size()) / 2);  // the data is not degenerate

  ProgramBuilder b(cc.name);
  isa::Conv2dParams p;
  p.weight = b.constant(cc.w_type, ws, w);
  if (cc.with_bias) p.bias = b.constant(DType::Int32, {cc.m}, bias);
  p.pads = cc.pads;
  p.strides = cc.strides;
  p.dilations = cc.dilations;
  p.group = cc.group;
  p.x = xq;
  p.w_scale = w_scale;
  p.w_zero_point = w_zp;
  p.y = yq;
  isa::TensorRef xr = b.activation(cc.x_type, xs, isa::Layout::LoweredNCHW);
  isa::TensorRef yr = b.activation(cc.y_type, ys, isa::Layout::LoweredNCHW);
  b.kernel(cc.depthwise ? isa::KernelKind::DepthwiseConv2d : isa::KernelKind::Conv2d, {xr}, {yr},
           p);
  auto program = b.finish({xr}, {yr});

  auto s = open_sim();
  auto out = run_program(*s.device, program, {lower(x, xs, cc.x_type)});
  CHECK(unlower(out[0], ys, cc.y_type) == expected);
  // The output's row padding is defined (zero) rather than left over.
  for (std::int64_t r = 0; r < cc.n * cc.m * oh_n; ++r) {
    for (std::int64_t i = ow_n; i < isa::padded_width(ow_n); ++i) {
      REQUIRE(out[0][static_cast<std::size_t>(r * isa::padded_width(ow_n) + i)] == std::byte{0});
    }
  }
}

/// Reference MaxPool over dense NCHW values.
std::vector<std::int32_t> maxpool_ref(const std::vector<std::int32_t>& x, const Shape& xs,
                                      const Shape& ys, const isa::MaxPoolParams& p,
                                      std::int32_t lowest) {
  std::vector<std::int32_t> y;
  for (std::int64_t nc = 0; nc < xs[0] * xs[1]; ++nc) {
    for (std::int64_t oh = 0; oh < ys[2]; ++oh) {
      for (std::int64_t ow = 0; ow < ys[3]; ++ow) {
        std::int32_t best = lowest;
        for (std::int64_t kh = 0; kh < p.kernel[0]; ++kh) {
          for (std::int64_t kw = 0; kw < p.kernel[1]; ++kw) {
            const std::int64_t ih = oh * p.strides[0] - p.pads[0] + kh * p.dilations[0];
            const std::int64_t iw = ow * p.strides[1] - p.pads[1] + kw * p.dilations[1];
            if (ih < 0 || ih >= xs[2] || iw < 0 || iw >= xs[3]) continue;
            best = std::max(best, x[static_cast<std::size_t>((nc * xs[2] + ih) * xs[3] + iw)]);
          }
        }
        y.push_back(best);
      }
    }
  }
  return y;
}

}  // namespace

TEST_CASE("Conv2d matches the QLinearConv reference", "[device][kernels][conv]") {
  using D = DType;
  // name, n, c, h, w, m, kh, kw, group, pads(t,l,b,r), strides, dilations, x, w, y types,
  // per_channel, bias, depthwise
  const ConvCase cases[] = {
      {"3x3 pad1 stride1 u8/i8 per-channel",
       1,
       3,
       6,
       37,
       5,
       3,
       3,
       1,
       {1, 1, 1, 1},
       {1, 1},
       {1, 1},
       D::UInt8,
       D::Int8,
       D::UInt8,
       true,
       true,
       false},
      {"asymmetric pads, strides, dilations, groups",
       2,
       4,
       9,
       45,
       6,
       3,
       2,
       2,
       {1, 2, 0, 1},
       {2, 3},
       {2, 1},
       D::UInt8,
       D::Int8,
       D::UInt8,
       true,
       true,
       false},
      {"int8 activations, uint8 weights, per-tensor, no bias",
       1,
       6,
       5,
       33,
       4,
       2,
       3,
       1,
       {0, 1, 1, 0},
       {1, 2},
       {1, 1},
       D::Int8,
       D::UInt8,
       D::Int8,
       false,
       false,
       false},
      {"1x1 stride 1 wide",
       1,
       16,
       3,
       70,
       8,
       1,
       1,
       1,
       {0, 0, 0, 0},
       {1, 1},
       {1, 1},
       D::UInt8,
       D::Int8,
       D::Int8,
       true,
       true,
       false},
      {"7x7 stride 2 pad 3",
       1,
       3,
       15,
       29,
       4,
       7,
       7,
       1,
       {3, 3, 3, 3},
       {2, 2},
       {1, 1},
       D::UInt8,
       D::Int8,
       D::UInt8,
       true,
       true,
       false},
      {"depthwise 3x3 stride 2",
       1,
       5,
       8,
       35,
       5,
       3,
       3,
       5,
       {1, 1, 1, 1},
       {2, 2},
       {1, 1},
       D::Int8,
       D::UInt8,
       D::UInt8,
       true,
       true,
       true},
      {"depthwise multiplier 2, dilation 2",
       2,
       3,
       7,
       40,
       6,
       3,
       3,
       3,
       {2, 2, 2, 2},
       {1, 1},
       {2, 2},
       D::UInt8,
       D::Int8,
       D::Int8,
       true,
       false,
       true},
  };
  for (const ConvCase& cc : cases) check_conv(cc);
}

TEST_CASE("Conv2d requantization rounds half to even", "[device][kernels][conv]") {
  // 1x1 conv, one channel, weight 1, multiplier 0.5: acc 5 -> 2, 7 -> 4, -5 -> -2, -7 -> -4.
  ProgramBuilder b("half_even");
  isa::Conv2dParams p;
  p.weight = b.constant(DType::Int8, {1, 1, 1, 1}, std::vector<std::int32_t>{1});
  p.x = {1.0f, 0};
  p.w_scale = {0.5f};
  p.w_zero_point = {0};
  p.y = {1.0f, 0};
  const Shape shape{1, 1, 1, 6};
  isa::TensorRef x = b.activation(DType::Int8, shape, isa::Layout::LoweredNCHW);
  isa::TensorRef y = b.activation(DType::Int8, shape, isa::Layout::LoweredNCHW);
  b.kernel(isa::KernelKind::Conv2d, {x}, {y}, p);
  auto program = b.finish({x}, {y});
  auto s = open_sim();
  const std::vector<std::int32_t> in{5, 7, -5, -7, 127, -128};
  auto out = run_program(*s.device, program, {lower(in, shape, DType::Int8)});
  CHECK(unlower(out[0], shape, DType::Int8) == std::vector<std::int32_t>{2, 4, -2, -4, 64, -64});
}

TEST_CASE("MaxPool matches the reference and never picks padding", "[device][kernels][pool]") {
  struct PoolCase {
    DType type;
    isa::MaxPoolParams p;
    Shape xs;
  };
  isa::MaxPoolParams resnet;  // ResNet's stem pool
  resnet.kernel = {3, 3};
  resnet.pads = {1, 1, 1, 1};
  resnet.strides = {2, 2};
  isa::MaxPoolParams dilated;
  dilated.kernel = {2, 3};
  dilated.pads = {0, 2, 1, 0};
  dilated.strides = {1, 2};
  dilated.dilations = {2, 1};
  const PoolCase cases[] = {{DType::UInt8, resnet, {2, 3, 9, 37}},
                            {DType::Int8, resnet, {1, 2, 8, 40}},
                            {DType::Int8, dilated, {1, 3, 7, 35}},
                            {DType::UInt8, dilated, {1, 1, 5, 61}}};
  for (const PoolCase& pc : cases) {
    const isa::MaxPoolParams& p = pc.p;
    const Shape ys{
        pc.xs[0], pc.xs[1],
        out_dim(pc.xs[2], p.kernel[0], p.pads[0], p.pads[2], p.strides[0], p.dilations[0]),
        out_dim(pc.xs[3], p.kernel[1], p.pads[1], p.pads[3], p.strides[1], p.dilations[1])};
    // Values well below the garbage, so reading padding (0xFF / 0x7F) would win a window.
    const bool is_signed = pc.type == DType::Int8;
    const auto x =
        random_values(static_cast<std::size_t>(element_count(pc.xs)), is_signed ? -120 : 0, 100, 7);
    const auto expected = maxpool_ref(x, pc.xs, ys, p, is_signed ? -128 : 0);

    ProgramBuilder b("pool");
    isa::TensorRef xr = b.activation(pc.type, pc.xs, isa::Layout::LoweredNCHW);
    isa::TensorRef yr = b.activation(pc.type, ys, isa::Layout::LoweredNCHW);
    b.kernel(isa::KernelKind::MaxPool, {xr}, {yr}, p);
    auto program = b.finish({xr}, {yr});
    auto s = open_sim();
    auto out = run_program(*s.device, program, {lower(x, pc.xs, pc.type, is_signed ? 0x7F : 0xFF)});
    CHECK(unlower(out[0], ys, pc.type) == expected);
  }
}

TEST_CASE("MatMul matches the QLinearMatMul reference", "[device][kernels][matmul]") {
  struct MatMulCase {
    DType a_type, b_type, y_type;
    Shape a_shape;
    std::int64_t n;
    bool per_column;
  };
  const MatMulCase cases[] = {{DType::UInt8, DType::Int8, DType::UInt8, {2, 3, 40}, 7, true},
                              {DType::Int8, DType::UInt8, DType::Int8, {5, 33}, 10, false},
                              {DType::UInt8, DType::UInt8, DType::Int8, {1, 1, 2, 64}, 3, true}};
  for (const MatMulCase& mc : cases) {
    const std::int64_t K = mc.a_shape.back(), M = mc.a_shape[mc.a_shape.size() - 2];
    const std::int64_t batch = element_count(mc.a_shape) / (M * K), N = mc.n;
    Shape ys = mc.a_shape;
    ys.back() = N;
    const auto a = random_8bit(static_cast<std::size_t>(element_count(mc.a_shape)), mc.a_type, 31);
    const auto bv = random_8bit(static_cast<std::size_t>(K * N), mc.b_type, 32);
    const std::size_t qn = mc.per_column ? static_cast<std::size_t>(N) : 1;
    const std::int32_t a_zp = mc.a_type == DType::UInt8 ? 120 : 4;
    const auto b_zp =
        mc.b_type == DType::UInt8 ? random_values(qn, 110, 140, 33) : random_values(qn, -6, 6, 33);
    std::vector<float> b_scale;
    for (std::size_t i = 0; i < qn; ++i) b_scale.push_back(0.01f + 0.003f * static_cast<float>(i));
    const isa::QuantParam aq{0.02f, a_zp};
    std::vector<std::int32_t> acc;
    for (std::int64_t r = 0; r < batch * M; ++r) {
      for (std::int64_t n = 0; n < N; ++n) {
        const std::size_t pick = qn == 1 ? 0 : static_cast<std::size_t>(n);
        std::int32_t sum = 0;
        for (std::int64_t k = 0; k < K; ++k) {
          sum += (a[static_cast<std::size_t>(r * K + k)] - a_zp) *
                 (bv[static_cast<std::size_t>(k * N + n)] - b_zp[pick]);
        }
        acc.push_back(sum);
      }
    }
    // Choose y's scale so that most outputs land inside the range.
    std::int64_t max_abs = 1;
    for (std::int32_t v : acc) max_abs = std::max<std::int64_t>(max_abs, std::abs(v));
    const float max_b_scale = *std::max_element(b_scale.begin(), b_scale.end());
    const isa::QuantParam yq{aq.scale * max_b_scale * static_cast<float>(max_abs) / 150.0f,
                             mc.y_type == DType::UInt8 ? 130 : -2};
    const auto [qmin, qmax] = isa::quant_range(mc.y_type);
    std::vector<std::int32_t> expected;
    for (std::size_t i = 0; i < acc.size(); ++i) {
      const std::size_t pick = qn == 1 ? 0 : i % static_cast<std::size_t>(N);
      expected.push_back(isa::requantize(acc[i], (aq.scale * b_scale[pick]) / yq.scale,
                                         yq.zero_point, qmin, qmax));
    }
    const auto inside = std::count_if(expected.begin(), expected.end(),
                                      [lo = qmin, hi = qmax](std::int32_t v) { return v > lo && v < hi; });
    CHECK(inside > static_cast<std::int64_t>(expected.size()) / 2);

    ProgramBuilder b("matmul");
    isa::MatMulParams p;
    p.b = b.constant(mc.b_type, {K, N}, bv);
    p.a = aq;
    p.b_scale = b_scale;
    p.b_zero_point = b_zp;
    p.y = yq;
    isa::TensorRef ar = b.activation(mc.a_type, mc.a_shape, isa::Layout::Linear);
    isa::TensorRef yr = b.activation(mc.y_type, ys, isa::Layout::Linear);
    b.kernel(isa::KernelKind::MatMul, {ar}, {yr}, p);
    auto program = b.finish({ar}, {yr});
    auto s = open_sim();
    auto out = run_program(*s.device, program, {to_bytes(a, mc.a_type)});
    CHECK(from_bytes(out[0], mc.y_type) == expected);
  }
}

namespace {

/// Reference QLinearAdd of one element, written out as in the contrib-op documentation.
std::int32_t add_ref(std::int32_t a, isa::QuantParam qa, std::int32_t b, isa::QuantParam qb,
                     isa::QuantParam qy, DType y_type) {
  const float va = qa.scale * static_cast<float>(a - qa.zero_point);
  const float vb = qb.scale * static_cast<float>(b - qb.zero_point);
  const float v = (va + vb) / qy.scale;
  const auto [qmin, qmax] = isa::quant_range(y_type);
  const float q = std::nearbyint(v) + static_cast<float>(qy.zero_point);
  return static_cast<std::int32_t>(
      std::clamp(q, static_cast<float>(qmin), static_cast<float>(qmax)));
}

}  // namespace

TEST_CASE("Add broadcasts linear operands and saturates", "[device][kernels][add]") {
  const Shape as{2, 3, 4, 5}, bs{1, 3, 1, 5}, ys{2, 3, 4, 5};
  const auto a = random_8bit(static_cast<std::size_t>(element_count(as)), DType::UInt8, 41);
  const auto bv = random_8bit(static_cast<std::size_t>(element_count(bs)), DType::Int8, 42);
  const isa::QuantParam qa{0.1f, 128}, qb{0.2f, -3}, qy{0.15f, 5};
  std::vector<std::int32_t> expected;
  for (std::int64_t n = 0; n < 2; ++n) {
    for (std::int64_t c = 0; c < 3; ++c) {
      for (std::int64_t h = 0; h < 4; ++h) {
        for (std::int64_t w = 0; w < 5; ++w) {
          const std::int32_t av = a[static_cast<std::size_t>(((n * 3 + c) * 4 + h) * 5 + w)];
          const std::int32_t bval = bv[static_cast<std::size_t>(c * 5 + w)];
          expected.push_back(add_ref(av, qa, bval, qb, qy, DType::Int8));
        }
      }
    }
  }
  CHECK(std::count(expected.begin(), expected.end(), 127) > 0);   // saturated high
  CHECK(std::count(expected.begin(), expected.end(), -128) > 0);  // saturated low

  ProgramBuilder b("add_broadcast");
  isa::TensorRef br = b.constant(DType::Int8, bs, bv);  // b is a constant
  isa::TensorRef ar = b.activation(DType::UInt8, as, isa::Layout::Linear);
  isa::TensorRef yr = b.activation(DType::Int8, ys, isa::Layout::Linear);
  b.kernel(isa::KernelKind::Add, {ar, br}, {yr}, isa::AddParams{qa, qb, qy});
  auto program = b.finish({ar}, {yr});
  auto s = open_sim();
  auto out = run_program(*s.device, program, {to_bytes(a, DType::UInt8)});
  CHECK(from_bytes(out[0], DType::Int8) == expected);
}

TEST_CASE("Add on lowered operands ignores their padding", "[device][kernels][add]") {
  const Shape shape{1, 3, 5, 40};
  const std::size_t count = static_cast<std::size_t>(element_count(shape));
  const auto a = random_8bit(count, DType::Int8, 51);
  const auto bv = random_8bit(count, DType::Int8, 52);
  const isa::QuantParam qa{0.05f, 0}, qb{0.07f, 10}, qy{0.06f, 120};
  std::vector<std::int32_t> expected;
  for (std::size_t i = 0; i < count; ++i)
    expected.push_back(add_ref(a[i], qa, bv[i], qb, qy, DType::UInt8));

  ProgramBuilder b("add_lowered");
  isa::TensorRef ar = b.activation(DType::Int8, shape, isa::Layout::LoweredNCHW);
  isa::TensorRef br = b.activation(DType::Int8, shape, isa::Layout::LoweredNCHW);
  isa::TensorRef yr = b.activation(DType::UInt8, shape, isa::Layout::LoweredNCHW);
  b.kernel(isa::KernelKind::Add, {ar, br}, {yr}, isa::AddParams{qa, qb, qy});
  auto program = b.finish({ar, br}, {yr});
  auto s = open_sim();
  auto out = run_program(*s.device, program,
                         {lower(a, shape, DType::Int8), lower(bv, shape, DType::Int8, 0x55)});
  CHECK(unlower(out[0], shape, DType::UInt8) == expected);
}

TEST_CASE("Reshape copies lowered data to linear in row-major order",
          "[device][kernels][reshape]") {
  const Shape xs{1, 3, 5, 37};
  const auto x = random_8bit(static_cast<std::size_t>(element_count(xs)), DType::UInt8, 61);
  ProgramBuilder b("reshape");
  isa::TensorRef xr = b.activation(DType::UInt8, xs, isa::Layout::LoweredNCHW);
  isa::TensorRef flat = b.activation(DType::UInt8, {1, 555}, isa::Layout::Linear);
  isa::TensorRef again = b.activation(DType::UInt8, {15, 37}, isa::Layout::Linear);
  b.kernel(isa::KernelKind::Reshape, {xr}, {flat}, isa::ReshapeParams{});
  b.kernel(isa::KernelKind::Reshape, {flat}, {again}, isa::ReshapeParams{});
  auto program = b.finish({xr}, {flat, again});
  auto s = open_sim();
  auto out = run_program(*s.device, program, {lower(x, xs, DType::UInt8)});
  CHECK(from_bytes(out[0], DType::UInt8) == x);
  CHECK(from_bytes(out[1], DType::UInt8) == x);
}

TEST_CASE("A small network runs end to end deterministically", "[device][kernels]") {
  // conv(3x3, pad 1) -> maxpool(2x2, stride 2) -> add(residual-like, constant) -> reshape ->
  // matmul: same inputs give the same outputs and cycles on two devices.
  ProgramBuilder b("tiny_net");
  const Shape xs{1, 3, 12, 36}, cs{1, 4, 12, 36}, ps{1, 4, 6, 18};
  isa::Conv2dParams conv;
  conv.weight = b.constant(DType::Int8, {4, 3, 3, 3}, random_8bit(4 * 3 * 3 * 3, DType::Int8, 71));
  conv.bias = b.constant(DType::Int32, {4}, random_values(4, -500, 500, 72));
  conv.pads = {1, 1, 1, 1};
  conv.x = {0.02f, 128};
  conv.w_scale = {0.01f, 0.02f, 0.015f, 0.012f};
  conv.w_zero_point = {0};
  conv.y = {0.05f, 100};
  isa::TensorRef addend = b.constant(DType::UInt8, ps, random_8bit(4 * 6 * 18, DType::UInt8, 73));
  isa::MatMulParams fc;
  fc.b = b.constant(DType::Int8, {432, 10}, random_8bit(4320, DType::Int8, 74));
  fc.a = {0.05f, 0};
  fc.b_scale = {0.01f};
  fc.b_zero_point = {0};
  fc.y = {0.5f, 0};
  isa::TensorRef x = b.activation(DType::UInt8, xs, isa::Layout::LoweredNCHW);
  isa::TensorRef c = b.activation(DType::UInt8, cs, isa::Layout::LoweredNCHW);
  isa::TensorRef pool = b.activation(DType::UInt8, ps, isa::Layout::LoweredNCHW);
  isa::TensorRef sum = b.activation(DType::UInt8, ps, isa::Layout::LoweredNCHW);
  isa::TensorRef flat = b.activation(DType::UInt8, {1, 432}, isa::Layout::Linear);
  isa::TensorRef logits = b.activation(DType::Int8, {1, 10}, isa::Layout::Linear);
  isa::MaxPoolParams mp;
  mp.kernel = {2, 2};
  mp.strides = {2, 2};
  b.kernel(isa::KernelKind::Conv2d, {x}, {c}, conv, "conv");
  b.kernel(isa::KernelKind::MaxPool, {c}, {pool}, mp, "pool");
  b.kernel(isa::KernelKind::Add, {pool, addend}, {sum},
           isa::AddParams{{0.05f, 100}, {0.03f, 0}, {0.06f, 90}}, "add");
  b.kernel(isa::KernelKind::Reshape, {sum}, {flat}, isa::ReshapeParams{}, "flatten");
  b.kernel(isa::KernelKind::MatMul, {flat}, {logits}, fc, "fc");
  auto program = b.finish({x}, {logits});
  const auto input = lower(random_8bit(3 * 12 * 36, DType::UInt8, 75), xs, DType::UInt8);

  auto s1 = open_sim(fast_config(), "npu0pe0");
  auto s2 = open_sim(fast_config(), "npu0pe1");
  ExecutionTiming t1, t2;
  auto out1 = run_program(*s1.device, program, {input}, &t1);
  auto out2 = run_program(*s2.device, program, {input}, &t2);
  CHECK(out1 == out2);
  REQUIRE(t1.kernels.size() == 5);
  for (std::size_t k = 0; k < 5; ++k) CHECK(t1.kernels[k].cycles == t2.kernels[k].cycles);
  const auto logits1 = from_bytes(out1[0], DType::Int8);
  CHECK(std::any_of(logits1.begin(), logits1.end(), [](std::int32_t v) { return v != 0; }));
}
