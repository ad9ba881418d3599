// Host operator library: Conv, ConvInteger and pooling (1-D to 4-D) against brute-force references.
// Targeted cases of the host (CPU fallback) operator library for what the ONNX backend node tests
// (test_cpu_ops_onnx_conformance.cpp) do not cover: dtypes, attribute variants of older/newer
// opsets, errors.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cpu_ops_test_support.h"
#include "furiosa/core/error.h"
#include "furiosa/host/cpu_ops.h"

using namespace furiosa;
using compiler::Attribute;
using compiler::Node;
using namespace furiosa::test::cpu_ops_tests;

namespace {

// Naive 2-D convolution reference (x: [N, C, H, W], w: [M, C/g, KH, KW]).
std::vector<double> conv_ref(const std::vector<double>& x, const Shape& xs,
                             const std::vector<double>& w, const Shape& ws,
                             const std::vector<double>& bias, std::int64_t group,
                             std::array<std::int64_t, 2> s, std::array<std::int64_t, 2> d,
                             std::array<std::int64_t, 4> p, Shape& ys) {
  const std::int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], M = ws[0], KH = ws[2], KW = ws[3];
  const std::int64_t OH = (H + p[0] + p[2] - ((KH - 1) * d[0] + 1)) / s[0] + 1;
  const std::int64_t OW = (W + p[1] + p[3] - ((KW - 1) * d[1] + 1)) / s[1] + 1;
  ys = {N, M, OH, OW};
  std::vector<double> y(static_cast<std::size_t>(N * M * OH * OW), 0.0);
  const std::int64_t cg = C / group, mg = M / group;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          double acc = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(m)];
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t kh = 0; kh < KH; ++kh)
              for (std::int64_t kw = 0; kw < KW; ++kw) {
                const std::int64_t ih = oh * s[0] - p[0] + kh * d[0],
                                   iw = ow * s[1] - p[1] + kw * d[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc +=
                    x[static_cast<std::size_t>(((n * C + (m / mg) * cg + c) * H + ih) * W + iw)] *
                    w[static_cast<std::size_t>(((m * cg + c) * KH + kh) * KW + kw)];
              }
          y[static_cast<std::size_t>(((n * M + m) * OH + oh) * OW + ow)] = acc;
        }
  return y;
}

}  // namespace

TEST_CASE("cpu ops: Conv with group, dilations, strides and asymmetric pads",
          "[compiler][cpu_ops]") {
  const Shape xs{2, 4, 9, 8}, ws{6, 2, 3, 2};
  const auto xv = ramp(static_cast<std::size_t>(element_count(xs)), 2.0f);
  const auto wv = ramp(static_cast<std::size_t>(element_count(ws)), 1.0f);
  const std::vector<float> bv{0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f};
  Tensor x = f32(xs, xv), w = f32(ws, wv), b = f32({6}, bv);
  Node n = make_node("Conv", 3,
                     {{"group", std::int64_t{2}},
                      {"strides", std::vector<std::int64_t>{2, 1}},
                      {"dilations", std::vector<std::int64_t>{2, 3}},
                      {"pads", std::vector<std::int64_t>{1, 0, 2, 3}}});
  Tensor y = run1(n, {&x, &w, &b});
  Shape ys;
  const auto ref = conv_ref({xv.begin(), xv.end()}, xs, {wv.begin(), wv.end()}, ws,
                            {bv.begin(), bv.end()}, 2, {2, 1}, {2, 3}, {1, 0, 2, 3}, ys);
  REQUIRE(y.shape() == ys);
  const auto yv = values<float>(y);
  for (std::size_t i = 0; i < ref.size(); ++i) CHECK(yv[i] == Approx(ref[i]).margin(1e-5));

  // ConvInteger, int8, per-output-channel weight zero point, depthwise (group = C).
  const Shape xq{1, 3, 5, 5}, wq{3, 1, 3, 3};
  std::vector<std::int8_t> xi(75), wi(27);
  for (std::size_t i = 0; i < xi.size(); ++i)
    xi[i] = static_cast<std::int8_t>(static_cast<int>(i * 53 % 200) - 100);
  for (std::size_t i = 0; i < wi.size(); ++i)
    wi[i] = static_cast<std::int8_t>(static_cast<int>(i * 29 % 60) - 30);
  Tensor tx = make(DType::Int8, xq, xi), tw = make(DType::Int8, wq, wi);
  Tensor xz = make<std::int8_t>(DType::Int8, {}, {-3});
  Tensor wz = make<std::int8_t>(DType::Int8, {3}, {1, 0, -1});
  Node ci =
      make_node("ConvInteger", 4,
                {{"group", std::int64_t{3}}, {"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  Tensor yq = run1(ci, {&tx, &tw, &xz, &wz});
  REQUIRE(yq.dtype() == DType::Int32);
  std::vector<double> xd(xi.size()), wd(wi.size());
  for (std::size_t i = 0; i < xi.size(); ++i) xd[i] = xi[i] + 3;
  for (std::size_t i = 0; i < wi.size(); ++i) wd[i] = wi[i] - wz.as<std::int8_t>()[i / 9];
  const auto refq = conv_ref(xd, xq, wd, wq, {}, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, ys);
  REQUIRE(yq.shape() == ys);
  const auto yqv = values<std::int32_t>(yq);
  for (std::size_t i = 0; i < refq.size(); ++i) CHECK(yqv[i] == static_cast<std::int32_t>(refq[i]));

  // 1-D Conv equals the 2-D one with a height of 1.
  Tensor x1 = f32({1, 2, 7}, ramp(14)), w1 = f32({3, 2, 3}, ramp(18));
  Tensor x1b = f32({1, 2, 1, 7}, ramp(14)), w1b = f32({3, 2, 1, 3}, ramp(18));
  Tensor y1 = run1(make_node("Conv", 2,
                             {{"strides", std::vector<std::int64_t>{2}},
                              {"pads", std::vector<std::int64_t>{1, 1}}}),
                   {&x1, &w1});
  Tensor y1b = run1(make_node("Conv", 2,
                              {{"strides", std::vector<std::int64_t>{1, 2}},
                               {"pads", std::vector<std::int64_t>{0, 1, 0, 1}}}),
                    {&x1b, &w1b});
  CHECK(y1.shape() == Shape{1, 3, 4});
  CHECK(values<float>(y1) == values<float>(y1b));
}

TEST_CASE("cpu ops: pooling variants", "[compiler][cpu_ops]") {
  // int8 MaxPool with Indices in column-major storage order.
  Tensor x = make<std::int8_t>(DType::Int8, {1, 1, 2, 3}, {-5, 7, 1, 9, -128, 2});
  auto out = host::run_cpu_op(make_node("MaxPool", 1,
                                        {{"kernel_shape", std::vector<std::int64_t>{2, 2}},
                                         {"storage_order", std::int64_t{1}}},
                                        2),
                              {&x});
  REQUIRE(out.size() == 2);
  CHECK(values<std::int8_t>(out[0]) == std::vector<std::int8_t>{9, 7});
  // 9 is at (h=1, w=0): column-major index 0*2 + 1; 7 at (0, 1): 1*2 + 0.
  CHECK(values<std::int64_t>(out[1]) == std::vector<std::int64_t>{1, 2});
  // AveragePool, count_include_pad with ceil_mode: the divisor counts pads but not taps beyond
  // them.
  Tensor f = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor a = run1(make_node("AveragePool", 1,
                            {{"kernel_shape", std::vector<std::int64_t>{2, 2}},
                             {"strides", std::vector<std::int64_t>{2, 2}},
                             {"pads", std::vector<std::int64_t>{1, 1, 0, 0}},
                             {"count_include_pad", std::int64_t{1}},
                             {"ceil_mode", std::int64_t{1}}}),
                  {&f});
  REQUIRE(a.shape() == Shape{1, 1, 2, 2});
  CHECK(values<float>(a) ==
        std::vector<float>{1.0f / 4, (2.0f + 3) / 4, (4.0f + 7) / 4, (5.0f + 6 + 8 + 9) / 4});
  // Without pads: the last window hangs over the end; only the taps inside the input count.
  Tensor a2 = run1(make_node("AveragePool", 1,
                             {{"kernel_shape", std::vector<std::int64_t>{2, 2}},
                              {"strides", std::vector<std::int64_t>{2, 2}},
                              {"count_include_pad", std::int64_t{1}},
                              {"ceil_mode", std::int64_t{1}}}),
                   {&f});
  REQUIRE(a2.shape() == Shape{1, 1, 2, 2});
  CHECK(values<float>(a2) == std::vector<float>{3.0f, 4.5f, 7.5f, 9.0f});
  Tensor g = run1(make_node("GlobalAveragePool", 1), {&f});
  CHECK(g.shape() == Shape{1, 1, 1, 1});
  CHECK(values<float>(g)[0] == Approx(5.0f));
}

namespace {

// Brute-force 3-D pooling reference, written out per dim (independent of the library's N-D
// window walk): x [N, C, D, H, W], attributes as ONNX names them (pads: begins then ends).
// Gives the max, the average, the row-major and column-major argmax offsets and the shape.
struct Pool3dRef {
  std::vector<float> max, avg;
  std::vector<std::int64_t> idx_row, idx_col;
  Shape ys;
};
Pool3dRef pool3d_ref(const std::vector<float>& x, const Shape& xs, std::array<std::int64_t, 3> k,
                     std::array<std::int64_t, 3> s, std::array<std::int64_t, 3> d,
                     std::array<std::int64_t, 6> p, const std::string& auto_pad, bool ceil_mode,
                     bool include_pad) {
  const std::int64_t N = xs[0], C = xs[1];
  const std::array<std::int64_t, 3> in{xs[2], xs[3], xs[4]};
  std::array<std::int64_t, 3> o{};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::int64_t eff = (k[i] - 1) * d[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      o[i] = (in[i] + s[i] - 1) / s[i];
      const std::int64_t total = std::max<std::int64_t>(0, (o[i] - 1) * s[i] + eff - in[i]);
      p[i] = auto_pad == "SAME_LOWER" ? (total + 1) / 2 : total / 2;
      p[i + 3] = total - p[i];
    } else {
      const double f =
          static_cast<double>(in[i] + p[i] + p[i + 3] - eff) / static_cast<double>(s[i]);
      o[i] = static_cast<std::int64_t>(ceil_mode ? std::ceil(f) : std::floor(f)) + 1;
      if (ceil_mode && (o[i] - 1) * s[i] >= in[i] + p[i]) --o[i];
    }
  }
  Pool3dRef r;
  r.ys = {N, C, o[0], o[1], o[2]};
  const std::int64_t plane = in[0] * in[1] * in[2];
  for (std::int64_t nc = 0; nc < N * C; ++nc)
    for (std::int64_t a = 0; a < o[0]; ++a)
      for (std::int64_t b = 0; b < o[1]; ++b)
        for (std::int64_t e = 0; e < o[2]; ++e) {
          float best = 0, sum = 0;
          std::int64_t row = -1, col = -1, inside = 0, padded = 0;
          for (std::int64_t ka = 0; ka < k[0]; ++ka)
            for (std::int64_t kb = 0; kb < k[1]; ++kb)
              for (std::int64_t ke = 0; ke < k[2]; ++ke) {
                const std::int64_t i0 = a * s[0] - p[0] + ka * d[0],
                                   i1 = b * s[1] - p[1] + kb * d[1],
                                   i2 = e * s[2] - p[2] + ke * d[2];
                padded += i0 >= -p[0] && i0 < in[0] + p[3] && i1 >= -p[1] && i1 < in[1] + p[4] &&
                          i2 >= -p[2] && i2 < in[2] + p[5];
                if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2])
                  continue;
                const float v =
                    x[static_cast<std::size_t>(nc * plane + (i0 * in[1] + i1) * in[2] + i2)];
                ++inside;
                sum += v;
                if (row < 0 || v > best) {
                  best = v;
                  row = nc * plane + (i0 * in[1] + i1) * in[2] + i2;
                  col = nc * plane + i0 + i1 * in[0] + i2 * in[0] * in[1];
                }
              }
          const std::int64_t count = include_pad ? padded : inside;
          r.max.push_back(best);
          r.avg.push_back(count > 0 ? sum / static_cast<float>(count) : 0.0f);
          r.idx_row.push_back(row);
          r.idx_col.push_back(col);
        }
  return r;
}

}  // namespace

TEST_CASE("cpu ops: 3-D and higher pooling against a brute-force reference and the 2-D path",
          "[compiler][cpu_ops]") {
  using V = std::vector<std::int64_t>;
  const Shape xs{2, 3, 5, 6, 7};
  // Distinct values (a permutation of a ramp), so the argmax is unique and ties do not hide
  // an index error.
  std::vector<float> xv(static_cast<std::size_t>(element_count(xs)));
  for (std::size_t i = 0; i < xv.size(); ++i)
    xv[i] = static_cast<float>((i * 97) % xv.size()) * 0.25f - 40.0f;
  Tensor x = f32(xs, xv);
  struct Case {
    std::array<std::int64_t, 3> k, s, d;
    std::array<std::int64_t, 6> p;
    std::string auto_pad;
    bool ceil, include_pad;
  };
  // clang-format off
  const std::vector<Case> cases = {
      {{2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, "NOTSET", false, false},  // test_*pool_3d_default
      {{3, 2, 3}, {2, 1, 3}, {1, 2, 1}, {1, 0, 2, 1, 1, 0}, "NOTSET", false, false},
      {{3, 2, 3}, {2, 1, 3}, {1, 2, 1}, {1, 0, 2, 1, 1, 0}, "NOTSET", false, true},
      {{2, 3, 2}, {2, 2, 2}, {1, 1, 2}, {0, 1, 1, 0, 1, 0}, "NOTSET", true, true},
      {{2, 3, 2}, {2, 2, 2}, {1, 1, 2}, {0, 1, 1, 0, 1, 0}, "NOTSET", true, false},
      {{3, 3, 4}, {2, 3, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, "SAME_UPPER", false, true},
      {{3, 3, 4}, {2, 3, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, "SAME_LOWER", false, false},
      {{2, 2, 2}, {2, 2, 2}, {1, 1, 1}, {9, 9, 9, 9, 9, 9}, "VALID", true, false},
  };
  // clang-format on
  for (const auto& cs : cases) {
    INFO("kernel " << cs.k[0] << "x" << cs.k[1] << "x" << cs.k[2] << " auto_pad " << cs.auto_pad
                   << " ceil " << cs.ceil << " count_include_pad " << cs.include_pad);
    std::map<std::string, Attribute> attrs = {{"kernel_shape", V(cs.k.begin(), cs.k.end())},
                                              {"strides", V(cs.s.begin(), cs.s.end())},
                                              {"dilations", V(cs.d.begin(), cs.d.end())},
                                              {"ceil_mode", std::int64_t{cs.ceil}}};
    if (cs.auto_pad == "NOTSET") attrs["pads"] = V(cs.p.begin(), cs.p.end());
    else attrs["auto_pad"] = cs.auto_pad;
    const auto ref = pool3d_ref(xv, xs, cs.k, cs.s, cs.d,
                                cs.auto_pad == "NOTSET" ? cs.p : std::array<std::int64_t, 6>{},
                                cs.auto_pad, cs.ceil, cs.include_pad);
    std::string why;
    REQUIRE(host::cpu_op_supported(make_node("MaxPool", 1, attrs, 2), {DType::Float32}, &why));
    for (std::int64_t order : {0, 1}) {
      auto m_attrs = attrs;
      m_attrs["storage_order"] = order;
      auto out = host::run_cpu_op(make_node("MaxPool", 1, m_attrs, 2), {&x});
      REQUIRE(out.size() == 2);
      REQUIRE(out[0].shape() == ref.ys);
      REQUIRE(out[1].shape() == ref.ys);
      CHECK(values<float>(out[0]) == ref.max);
      CHECK(values<std::int64_t>(out[1]) == (order == 0 ? ref.idx_row : ref.idx_col));
    }
    auto a_attrs = attrs;
    a_attrs["count_include_pad"] = std::int64_t{cs.include_pad};
    Tensor avg = run1(make_node("AveragePool", 1, a_attrs), {&x});
    REQUIRE(avg.shape() == ref.ys);
    const auto av = values<float>(avg);
    for (std::size_t i = 0; i < av.size(); ++i)
      CHECK(av[i] == Approx(ref.avg[i]).epsilon(1e-6).margin(1e-6));
  }

  // uint8 and int8: values with ties (first tap in row-major window order wins).
  std::vector<std::uint8_t> xu(xv.size());
  std::vector<std::int8_t> xi(xv.size());
  std::vector<float> xuf(xv.size()), xif(xv.size());
  for (std::size_t i = 0; i < xu.size(); ++i) {
    xu[i] = static_cast<std::uint8_t>((i * 37) % 251);
    xi[i] = static_cast<std::int8_t>(static_cast<int>((i * 53) % 199) - 99);
    xuf[i] = xu[i];
    xif[i] = xi[i];
  }
  Tensor tu = make(DType::UInt8, xs, xu), ti = make(DType::Int8, xs, xi);
  const auto ru = pool3d_ref(xuf, xs, {2, 3, 2}, {2, 2, 2}, {1, 1, 1}, {1, 0, 1, 0, 1, 1}, "NOTSET",
                             false, false);
  const auto ri = pool3d_ref(xif, xs, {2, 3, 2}, {2, 2, 2}, {1, 1, 1}, {1, 0, 1, 0, 1, 1}, "NOTSET",
                             false, false);
  const Node q8 = make_node(
      "MaxPool", 1,
      {{"kernel_shape", V{2, 3, 2}}, {"strides", V{2, 2, 2}}, {"pads", V{1, 0, 1, 0, 1, 1}}}, 2);
  auto mu = host::run_cpu_op(q8, {&tu});
  auto mi = host::run_cpu_op(q8, {&ti});
  REQUIRE(mu[0].shape() == ru.ys);
  REQUIRE(mi[0].shape() == ri.ys);
  CHECK(values<std::int64_t>(mu[1]) == ru.idx_row);
  CHECK(values<std::int64_t>(mi[1]) == ri.idx_row);
  for (std::size_t i = 0; i < ru.max.size(); ++i) {
    CHECK(static_cast<float>(mu[0].as<std::uint8_t>()[i]) == ru.max[i]);
    CHECK(static_cast<float>(mi[0].as<std::int8_t>()[i]) == ri.max[i]);
  }

  // A kernel of 1 over the depth is the 2-D pool of every depth slice: the N-D walk and the 2-D
  // kernels (checked against the ONNX backend cases) agree on pads, strides, dilations and
  // ceil_mode, for both ops.
  const Shape x2s{2, 3 * 5, 6, 7};
  Tensor x2 = f32(x2s, xv);
  const std::map<std::string, Attribute> a3 = {
      {"kernel_shape", V{1, 3, 2}},   {"strides", V{1, 2, 3}},
      {"dilations", V{1, 2, 1}},      {"pads", V{0, 2, 1, 0, 1, 1}},
      {"ceil_mode", std::int64_t{1}}, {"count_include_pad", std::int64_t{1}}};
  const std::map<std::string, Attribute> a2 = {
      {"kernel_shape", V{3, 2}},      {"strides", V{2, 3}},
      {"dilations", V{2, 1}},         {"pads", V{2, 1, 1, 1}},
      {"ceil_mode", std::int64_t{1}}, {"count_include_pad", std::int64_t{1}}};
  for (const char* op : {"MaxPool", "AveragePool"}) {
    INFO(op);
    Tensor y3 = run1(make_node(op, 1, a3), {&x});
    Tensor y2 = run1(make_node(op, 1, a2), {&x2});
    REQUIRE(y3.shape().size() == 5);
    CHECK(Shape{y3.shape()[0], y3.shape()[1] * y3.shape()[2], y3.shape()[3], y3.shape()[4]} ==
          y2.shape());
    CHECK(values<float>(y3) == values<float>(y2));
  }

  // Four spatial dims: a kernel of 1 over the first is the 3-D pool of each of its slices.
  const Shape x4s{1, 2, 3, 4, 5, 6};
  const auto x4v = ramp(static_cast<std::size_t>(element_count(x4s)), 8.0f);
  Tensor x4 = f32(x4s, x4v), x4as3 = f32({1, 6, 4, 5, 6}, x4v);
  for (const char* op : {"MaxPool", "AveragePool"}) {
    INFO(op);
    Tensor y4 = run1(
        make_node(op, 1, {{"kernel_shape", V{1, 2, 3, 2}}, {"pads", V{0, 1, 1, 0, 0, 0, 1, 1}}}),
        {&x4});
    Tensor y3 = run1(
        make_node(op, 1, {{"kernel_shape", V{2, 3, 2}}, {"pads", V{1, 1, 0, 0, 1, 1}}}), {&x4as3});
    CHECK(y4.shape() == Shape{1, 2, 3, 4, 5, 6});
    CHECK(y3.shape() == Shape{1, 6, 4, 5, 6});
    CHECK(values<float>(y4) == values<float>(y3));
  }
  // An input of the wrong rank for the kernel is refused with both shapes named.
  CHECK_THROWS_MATCHES(run1(make_node("MaxPool", 1, {{"kernel_shape", V{2, 2}}}), {&x}), Error,
                       Catch::Predicate<Error>([](const Error& e) {
                         return e.code() == ErrorCode::IncompatibleModel &&
                                e.message().find("2 dims for 3 spatial dims") != std::string::npos;
                       }));
}
