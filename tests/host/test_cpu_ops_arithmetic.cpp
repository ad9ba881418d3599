// Host operator library: Cast, integer and elementwise arithmetic, Softmax and quantization.
// Targeted cases of the host (CPU fallback) operator library for what the ONNX backend node tests
// (test_cpu_ops_onnx_conformance.cpp) do not cover: dtypes, attribute variants of older/newer
// opsets, errors.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cpu_ops_test_support.h"
#include "furiosa/core/error.h"
#include "furiosa/host/cpu_ops.h"
#include "furiosa/host/quantize.h"

using namespace furiosa;
using compiler::Attribute;
using compiler::Node;
using namespace furiosa::test::cpu_ops_tests;

TEST_CASE("cpu ops: Cast between the five dtypes", "[compiler][cpu_ops]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = f32({8}, {-1.7f, -0.5f, 0.5f, 2.9f, 300.0f, -300.0f, nan, 3e9f});
  auto to = [&](std::int64_t onnx_type, const Tensor& in) {
    return run1(make_node("Cast", 1, {{"to", onnx_type}}), {&in});
  };
  // float -> int: truncation toward zero, NaN -> 0, saturation out of range.
  CHECK(values<std::uint8_t>(to(2, x)) == std::vector<std::uint8_t>{0, 0, 0, 2, 255, 0, 0, 255});
  CHECK(values<std::int8_t>(to(3, x)) == std::vector<std::int8_t>{-1, 0, 0, 2, 127, -128, 0, 127});
  CHECK(values<std::int32_t>(to(6, x)) ==
        std::vector<std::int32_t>{-1, 0, 0, 2, 300, -300, 0,
                                  std::numeric_limits<std::int32_t>::max()});
  CHECK(values<std::int64_t>(to(7, x)) ==
        std::vector<std::int64_t>{-1, 0, 0, 2, 300, -300, 0, 3000000000});
  // int -> narrower int wraps (numpy astype); int -> float exact for small values.
  Tensor w = i64({4}, {-1, 256, 300, -129});
  CHECK(values<std::uint8_t>(to(2, w)) == std::vector<std::uint8_t>{255, 0, 44, 127});
  CHECK(values<std::int8_t>(to(3, w)) == std::vector<std::int8_t>{-1, 0, 44, 127});
  CHECK(values<float>(to(1, w)) == std::vector<float>{-1.0f, 256.0f, 300.0f, -129.0f});
  Tensor u = make<std::uint8_t>(DType::UInt8, {2}, {200, 7});
  CHECK(values<std::int8_t>(to(3, u)) == std::vector<std::int8_t>{-56, 7});
  CHECK(values<std::int32_t>(to(6, u)) == std::vector<std::int32_t>{200, 7});
  const host::CpuValueInfo info{DType::UInt8, {2, 5}, nullptr};
  auto inferred = host::cpu_op_infer(make_node("Cast", 1, {{"to", std::int64_t{6}}}), {&info});
  CHECK(inferred.at(0).first == DType::Int32);
  CHECK(inferred.at(0).second == Shape{2, 5});
}

TEST_CASE("cpu ops: integer arithmetic", "[compiler][cpu_ops]") {
  Tensor a = i64({4}, {7, -7, 7, -7}), b = i64({4}, {2, 2, -2, -2});
  CHECK(values<std::int64_t>(run1(make_node("Div", 2), {&a, &b})) ==
        std::vector<std::int64_t>{3, -3, -3, 3});
  Tensor big = i64({1}, {std::numeric_limits<std::int64_t>::max()}), one = i64({1}, {1});
  CHECK(values<std::int64_t>(run1(make_node("Add", 2), {&big, &one}))[0] ==
        std::numeric_limits<std::int64_t>::min());
  Tensor u1 = make<std::uint8_t>(DType::UInt8, {2}, {250, 3}),
         u2 = make<std::uint8_t>(DType::UInt8, {2}, {10, 5});
  CHECK(values<std::uint8_t>(run1(make_node("Add", 2), {&u1, &u2})) ==
        std::vector<std::uint8_t>{4, 8});
  CHECK(values<std::uint8_t>(run1(make_node("Sub", 2), {&u1, &u2})) ==
        std::vector<std::uint8_t>{240, 254});
  CHECK(values<std::uint8_t>(run1(make_node("Mul", 2), {&u1, &u2})) ==
        std::vector<std::uint8_t>{196, 15});
  // Shape arithmetic as it appears in exported graphs: Shape -> Gather -> Mul -> Unsqueeze ->
  // Concat.
  Tensor x = f32({2, 3, 4}, std::vector<float>(24, 0.0f));
  Tensor shape = run1(make_node("Shape", 1), {&x});
  CHECK(values<std::int64_t>(shape) == std::vector<std::int64_t>{2, 3, 4});
  Tensor i1 = i64({}, {1}), i2 = i64({}, {2});
  Tensor d1 = run1(make_node("Gather", 2), {&shape, &i1});
  Tensor d2 = run1(make_node("Gather", 2), {&shape, &i2});
  CHECK(d1.shape().empty());
  Tensor prod = run1(make_node("Mul", 2), {&d1, &d2});
  Tensor axes0 = i64({1}, {0});
  Tensor u = run1(make_node("Unsqueeze", 2), {&prod, &axes0});
  Tensor first = run1(make_node("Unsqueeze", 2), {&i2, &axes0});
  Tensor target = run1(make_node("Concat", 2, {{"axis", std::int64_t{0}}}), {&first, &u});
  CHECK(values<std::int64_t>(target) == std::vector<std::int64_t>{2, 12});
  Tensor r = run1(make_node("Reshape", 2), {&x, &target});
  CHECK(r.shape() == Shape{2, 12});
}

TEST_CASE("cpu ops: Softmax and LogSoftmax over one axis of a 4-D input", "[compiler][cpu_ops]") {
  const Shape s{2, 3, 2, 2};
  Tensor x = f32(s, ramp(24, 8.0f));
  auto sm = values<float>(run1(make_node("Softmax", 1, {{"axis", std::int64_t{1}}}), {&x}));
  auto lsm = values<float>(run1(make_node("LogSoftmax", 1, {{"axis", std::int64_t{1}}}), {&x}));
  auto xv = values<float>(x);
  for (int n = 0; n < 2; ++n) {
    for (int i = 0; i < 4; ++i) {
      double sum = 0;
      for (int c = 0; c < 3; ++c) sum += std::exp(static_cast<double>(xv[(n * 3 + c) * 4 + i]));
      for (int c = 0; c < 3; ++c) {
        const std::size_t at = static_cast<std::size_t>((n * 3 + c) * 4 + i);
        CHECK(sm[at] == Approx(std::exp(xv[at]) / sum).epsilon(1e-5));
        CHECK(lsm[at] == Approx(xv[at] - std::log(sum)).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("cpu ops: QuantizeLinear / DequantizeLinear variants", "[compiler][cpu_ops]") {
  // Rounding half to even, int8 saturation, per tensor.
  Tensor x = f32({8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 1000.0f, -1000.0f});
  Tensor scale = f32({}, {1.0f});
  Tensor zp = make<std::int8_t>(DType::Int8, {}, {0});
  Tensor q = run1(make_node("QuantizeLinear", 3), {&x, &scale, &zp});
  CHECK(q.dtype() == DType::Int8);
  CHECK(values<std::int8_t>(q) == std::vector<std::int8_t>{0, 2, 2, 0, -2, -2, 127, -128});
  // No zero point: uint8 output.
  Tensor qu = run1(make_node("QuantizeLinear", 2), {&x, &scale});
  CHECK(qu.dtype() == DType::UInt8);
  CHECK(values<std::uint8_t>(qu) == std::vector<std::uint8_t>{0, 2, 2, 0, 0, 0, 255, 0});
  // Per axis 0 of a [2, 3] tensor.
  Tensor x2 = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor s2 = f32({2}, {0.5f, 2.0f});
  Tensor z2 = make<std::uint8_t>(DType::UInt8, {2}, {10, 100});
  Tensor q2 = run1(make_node("QuantizeLinear", 3, {{"axis", std::int64_t{0}}}), {&x2, &s2, &z2});
  CHECK(values<std::uint8_t>(q2) == std::vector<std::uint8_t>{12, 14, 16, 102, 102, 103});
  Tensor d2 = run1(make_node("DequantizeLinear", 3, {{"axis", std::int64_t{0}}}), {&q2, &s2, &z2});
  CHECK(values<float>(d2) == std::vector<float>{1, 2, 3, 4, 4, 6});
  // int32 input (bias dequantization), no zero point.
  Tensor b = make<std::int32_t>(DType::Int32, {3}, {-100000, 0, 70000});
  Tensor bs = f32({}, {0.001f});
  auto bd = values<float>(run1(make_node("DequantizeLinear", 2), {&b, &bs}));
  CHECK(bd[0] == Approx(-100.0f));
  CHECK(bd[2] == Approx(70.0f));
  // Per-axis scale whose size does not match the axis.
  Tensor bad = f32({3}, {1, 1, 1});
  CHECK_THROWS_AS(run1(make_node("QuantizeLinear", 2, {{"axis", std::int64_t{0}}}), {&x2, &bad}),
                  Error);
}

TEST_CASE("cpu ops: DynamicQuantizeLinear of all zeros", "[compiler][cpu_ops]") {
  Tensor x = f32({2, 2}, {0, 0, 0, 0});
  auto out = host::run_cpu_op(make_node("DynamicQuantizeLinear", 1, {}, 3), {&x});
  REQUIRE(out.size() == 3);
  CHECK(out[1].as<float>()[0] == 1.0f);
  CHECK(out[2].as<std::uint8_t>()[0] == 0);
  CHECK(values<std::uint8_t>(out[0]) == std::vector<std::uint8_t>{0, 0, 0, 0});
}

TEST_CASE("cpu ops: MatMulInteger with per-row and per-column zero points", "[compiler][cpu_ops]") {
  const std::int64_t M = 3, K = 4, N = 2;
  std::vector<std::int8_t> av(M * K), bv(K * N);
  for (std::size_t i = 0; i < av.size(); ++i)
    av[i] = static_cast<std::int8_t>(static_cast<int>(i * 37 % 255) - 127);
  for (std::size_t i = 0; i < bv.size(); ++i)
    bv[i] = static_cast<std::int8_t>(static_cast<int>(i * 91 % 255) - 127);
  Tensor a = make(DType::Int8, {M, K}, av), b = make(DType::Int8, {K, N}, bv);
  Tensor az = make<std::int8_t>(DType::Int8, {M}, {1, -2, 3});
  Tensor bz = make<std::int8_t>(DType::Int8, {N}, {-4, 5});
  Tensor y = run1(make_node("MatMulInteger", 4), {&a, &b, &az, &bz});
  REQUIRE(y.dtype() == DType::Int32);
  REQUIRE(y.shape() == Shape{M, N});
  const auto yv = values<std::int32_t>(y);
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      std::int32_t ref = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        ref +=
            (av[i * K + k] - az.as<std::int8_t>()[i]) * (bv[k * N + j] - bz.as<std::int8_t>()[j]);
      }
      CHECK(yv[static_cast<std::size_t>(i * N + j)] == ref);
    }
  }
  // Batched A [2, M, K] with a per-row zero point shaped [2, M, 1] and a scalar b zero point.
  std::vector<std::int8_t> av2(av);
  av2.insert(av2.end(), av.begin(), av.end());
  Tensor a2 = make(DType::Int8, {2, M, K}, av2);
  Tensor az2 = make<std::int8_t>(DType::Int8, {2, M, 1}, {1, -2, 3, 0, 0, 0});
  Tensor bz0 = make<std::int8_t>(DType::Int8, {}, {0});
  Tensor y2 = run1(make_node("MatMulInteger", 4), {&a2, &b, &az2, &bz0});
  REQUIRE(y2.shape() == Shape{2, M, N});
  const auto y2v = values<std::int32_t>(y2);
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      std::int32_t r0 = 0, r1 = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        r0 += (av[i * K + k] - az.as<std::int8_t>()[i]) * bv[k * N + j];
        r1 += av[i * K + k] * bv[k * N + j];
      }
      CHECK(y2v[static_cast<std::size_t>(i * N + j)] == r0);
      CHECK(y2v[static_cast<std::size_t>(M * N + i * N + j)] == r1);
    }
  }
}

TEST_CASE("cpu ops: QuantizeLinear follows the one rule of the runtime's Quantize step",
          "[compiler][cpu_ops]") {
  // The library's QuantizeLinear (constant folding, host fallback) and host::quantize (the
  // runtime's Quantize step) must agree on every value, NaN and infinities included.
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  const std::vector<float> xs = {0.5f,    1.5f,     2.5f, -0.5f, -2.5f, 63.75f,
                                 1000.0f, -1000.0f, nan,  inf,   -inf,  -0.0f};
  Tensor x = f32({static_cast<std::int64_t>(xs.size())}, xs);
  Tensor scale = f32({}, {0.5f});
  Tensor zp_u = make<std::uint8_t>(DType::UInt8, {}, {7});
  Tensor zp_s = make<std::int8_t>(DType::Int8, {}, {-3});
  const auto library_u =
      values<std::uint8_t>(run1(make_node("QuantizeLinear", 3), {&x, &scale, &zp_u}));
  const auto library_s =
      values<std::int8_t>(run1(make_node("QuantizeLinear", 3), {&x, &scale, &zp_s}));
  std::vector<std::uint8_t> runtime_u(xs.size());
  std::vector<std::int8_t> runtime_s(xs.size());
  host::quantize(xs.data(), runtime_u.data(), static_cast<std::int64_t>(xs.size()), 0.5f, 7);
  host::quantize(xs.data(), runtime_s.data(), static_cast<std::int64_t>(xs.size()), 0.5f, -3);
  CHECK(library_u == runtime_u);
  CHECK(library_s == runtime_s);
  CHECK(library_u[8] == 7);  // NaN -> the zero point
  CHECK(library_s[8] == -3);
  CHECK(library_u[9] == 255);    // +inf -> qmax
  CHECK(library_s[10] == -128);  // -inf -> qmin
}

TEST_CASE("cpu ops: elementwise functions on edge values", "[compiler][cpu_ops]") {
  Tensor x = f32({4}, {-3, -0.5f, 0, 4});
  CHECK(values<float>(run1(make_node("HardSwish", 1), {&x})) ==
        std::vector<float>{0, -0.5f * (2.5f / 6), 0, 4});
  CHECK(values<float>(run1(make_node("LeakyRelu", 1, {{"alpha", 0.1f}}), {&x}))[0] ==
        Approx(-0.3f));
  CHECK(values<float>(run1(make_node("HardSigmoid", 1), {&x})) ==
        std::vector<float>{0, 0.4f, 0.5f, 1});
  Tensor lo = make<std::int8_t>(DType::Int8, {3}, {-128, -3, 4});
  CHECK(values<std::int8_t>(run1(make_node("Neg", 1), {&lo})) ==
        std::vector<std::int8_t>{-128, 3, -4});
  CHECK(values<std::int8_t>(run1(make_node("Abs", 1), {&lo})) ==
        std::vector<std::int8_t>{-128, 3, 4});
  // Max with NaN propagates it; three inputs broadcast.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = f32({2, 1}, {1, nan}), b = f32({3}, {0, 2, 4}), c = f32({}, {3});
  const auto m = values<float>(run1(make_node("Max", 3), {&a, &b, &c}));
  REQUIRE(m.size() == 6);
  CHECK(m[0] == 3);
  CHECK(m[2] == 4);
  CHECK(std::isnan(m[3]));
  // Pow with an int32 base and a float exponent truncates like ONNX Runtime.
  Tensor base = make<std::int32_t>(DType::Int32, {2}, {2, 3});
  Tensor e = f32({}, {0.5f});
  CHECK(values<std::int32_t>(run1(make_node("Pow", 2), {&base, &e})) ==
        std::vector<std::int32_t>{1, 1});
}
