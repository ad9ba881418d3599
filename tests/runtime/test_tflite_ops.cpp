// TFLite: hand-made int8 and uint8 models of the supported operators against float references.
// TFLite models through the whole stack (importer, compiler, simulator, runtime): hand-made models
// written here with the FlatBuffers builder of our schema subset into the build tree: an int8
// model with per-channel weights (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED) and a uint8 model
// with the other operators (PAD, MAX_POOL_2D, AVERAGE_POOL_2D, ADD, CONCATENATION with
// rescaling, RESHAPE, SOFTMAX, DEQUANTIZE), each stage checked against a float reference computed
// here from the previous stage's output; RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR, ARG_MAX,
// ARG_MIN and LOGISTIC.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/compiler/tflite_import.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/from_graph.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"
#include "tflite_subset_generated.h"
#include "tflite_test_support.h"
#include "tflite_writer.h"

using namespace furiosa;
using namespace furiosa::test::tflite_tests;
namespace fs = std::filesystem;
namespace fb = furiosa::tflite_fb;

// ---- hand-made int8 model with per-channel weights --------------------------------------------

// clang-format off
TEST_CASE("TFLite: int8 per-channel CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED match a float reference",
          "[tflite][int8]") {
  // clang-format on
  std::mt19937 rng(20240611);
  TfliteWriter w;
  auto& b = w.builder();
  // Quantization of the activations (asymmetric int8) and the per-channel weights.
  const double s0 = 1.0 / 127, s1 = 0.05, s2 = 0.03, s3 = 0.1;
  const std::int32_t z0 = 3, z1 = -20, z2 = -128, z3 = 5;
  const QSpec q0{{static_cast<float>(s0)}, {z0}}, q1{{static_cast<float>(s1)}, {z1}};
  const QSpec q2{{static_cast<float>(s2)}, {z2}}, q3{{static_cast<float>(s3)}, {z3}};
  QSpec wq1, wq2, wq3, bq1, bq2, bq3;
  for (int c = 0; c < 8; ++c) wq1.scales.push_back(0.002f + 0.0015f * static_cast<float>(c));
  for (int c = 0; c < 8; ++c)
    wq2.scales.push_back(0.01f + 0.004f * static_cast<float>((c * 5) % 8));
  for (int c = 0; c < 10; ++c) wq3.scales.push_back(0.001f + 0.0007f * static_cast<float>(c));
  wq1.zero_points.assign(8, 0), wq2.zero_points.assign(8, 0), wq3.zero_points.assign(10, 0);
  wq2.dim = 3;  // depthwise weights [1, kh, kw, C * multiplier]: per channel along dim 3
  for (int c = 0; c < 8; ++c)
    bq1.scales.push_back(static_cast<float>(s0) * wq1.scales[static_cast<std::size_t>(c)]);
  for (int c = 0; c < 8; ++c)
    bq2.scales.push_back(static_cast<float>(s1) * wq2.scales[static_cast<std::size_t>(c)]);
  for (int c = 0; c < 10; ++c)
    bq3.scales.push_back(static_cast<float>(s2) * wq3.scales[static_cast<std::size_t>(c)]);
  bq1.zero_points.assign(8, 0), bq2.zero_points.assign(8, 0), bq3.zero_points.assign(10, 0);

  const auto w1 = random_ints(rng, 8 * 3 * 3 * 3, -127, 127), b1 = random_ints(rng, 8, -3000, 3000);
  const auto w2 = random_ints(rng, 3 * 3 * 8, -127, 127), b2 = random_ints(rng, 8, -2000, 2000);
  const auto w3 = random_ints(rng, 10 * 128, -127, 127), b3 = random_ints(rng, 10, -5000, 5000);
  const auto w1b = bytes8(w1), w2b = bytes8(w2), w3b = bytes8(w3);
  const auto b1b = bytes32(b1), b2b = bytes32(b2), b3b = bytes32(b3);

  const int x = w.tensor("x", fb::TensorType::FLOAT32, {1, 8, 8, 3});
  const int t0 = w.tensor("t0", fb::TensorType::INT8, {1, 8, 8, 3}, &q0);
  const int tw1 = w.tensor("w1", fb::TensorType::INT8, {8, 3, 3, 3}, &wq1, &w1b);
  const int tb1 = w.tensor("b1", fb::TensorType::INT32, {8}, &bq1, &b1b);
  const int t1 = w.tensor("t1", fb::TensorType::INT8, {1, 8, 8, 8}, &q1);
  const int tw2 = w.tensor("w2", fb::TensorType::INT8, {1, 3, 3, 8}, &wq2, &w2b);
  const int tb2 = w.tensor("b2", fb::TensorType::INT32, {8}, &bq2, &b2b);
  const int t2 = w.tensor("t2", fb::TensorType::INT8, {1, 4, 4, 8}, &q2);
  const int tw3 = w.tensor("w3", fb::TensorType::INT8, {10, 128}, &wq3, &w3b);
  const int tb3 = w.tensor("b3", fb::TensorType::INT32, {10}, &bq3, &b3b);
  const int t3 = w.tensor("t3", fb::TensorType::INT8, {1, 10}, &q3);
  const int yf = w.tensor("y", fb::TensorType::FLOAT32, {1, 10});
  w.op(114, {x}, {t0});  // QUANTIZE
  w.op(3, {t0, tw1, tb1}, {t1}, fb::BuiltinOptions::Conv2DOptions,
       fb::CreateConv2DOptions(b, fb::Padding::SAME, 1, 1, fb::ActivationFunctionType::RELU)
           .Union());
  w.op(4, {t1, tw2, tb2}, {t2}, fb::BuiltinOptions::DepthwiseConv2DOptions,
       fb::CreateDepthwiseConv2DOptions(b, fb::Padding::SAME, 2, 2, 1,
                                        fb::ActivationFunctionType::RELU6)
           .Union());
  w.op(9, {t2, tw3, tb3}, {t3}, fb::BuiltinOptions::FullyConnectedOptions,
       fb::CreateFullyConnectedOptions(b, fb::ActivationFunctionType::NONE).Union());
  w.op(6, {t3}, {yf});  // DEQUANTIZE
  const fs::path path = write_model("int8_per_channel.tflite", w.finish({x}, {t0, t1, t2, t3, yf}));

  auto runner = runtime::create_runner(path, test_options());
  const auto& m = runner->model();
  REQUIRE(m.inputs.size() == 1);
  CHECK(m.inputs[0].format == "NHWC");
  CHECK(m.inputs[0].dtype == DType::Float32);
  REQUIRE(m.outputs.size() == 5);
  CHECK(m.outputs[1].shape == Shape{1, 8, 8, 8});
  CHECK(m.outputs[1].format == "NHWC");
  CHECK(m.outputs[3].format == "NC");
  // Every requantizing kernel carries TFLite's fixed-point rule.
  int fixed = 0;
  for (const auto& e : runner->partition_report().entries) {
    if (e.placement == "npu" && e.reason.find("fixed-point") != std::string::npos) ++fixed;
  }
  CHECK(fixed == 3);

  Tensor input(DType::Float32, {1, 8, 8, 3});
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& v : input.as<float>()) v = u(rng);
  const auto out = runner->run({input});

  // QUANTIZE: exactly TFLite's rounding (half away from zero) of x / scale.
  std::vector<std::int32_t> e0;
  for (float v : input.as<float>()) {
    e0.push_back(static_cast<std::int32_t>(std::clamp(
        std::round(v / static_cast<float>(s0)) + static_cast<float>(z0), -128.0f, 127.0f)));
  }
  CHECK(worst_diff(out[0], e0) == 0);

  // Each stage from the previous stage's actual output, in float, then quantized.
  auto dq = [](const std::vector<std::int32_t>& q, const QSpec& s, std::size_t channels,
               std::size_t inner) {
    std::vector<double> out(q.size());
    for (std::size_t i = 0; i < q.size(); ++i)
      out[i] = q[i] * static_cast<double>(s.scales[(i / inner) % channels]);
    return out;
  };
  std::vector<double> bias1(8), bias2(8), bias3(10);
  for (std::size_t c = 0; c < 8; ++c) bias1[c] = b1[c] * static_cast<double>(bq1.scales[c]);
  for (std::size_t c = 0; c < 8; ++c) bias2[c] = b2[c] * static_cast<double>(bq2.scales[c]);
  for (std::size_t c = 0; c < 10; ++c) bias3[c] = b3[c] * static_cast<double>(bq3.scales[c]);
  Shape ys;
  auto r1 = conv_ref(dequantized(out[0], static_cast<float>(s0), z0), {1, 8, 8, 3},
                     dq(w1, wq1, 8, 27), {8, 3, 3, 3}, bias1, 1, true, false, &ys);
  for (auto& v : r1) v = std::max(v, 0.0);  // RELU
  REQUIRE(ys == Shape{1, 8, 8, 8});
  const int d1 = worst_diff(out[1], quantize_all(r1, static_cast<float>(s1), z1, DType::Int8));
  auto r2 = conv_ref(dequantized(out[1], static_cast<float>(s1), z1), {1, 8, 8, 8},
                     dq(w2, wq2, 8, 1), {1, 3, 3, 8}, bias2, 2, true, true, &ys);
  for (auto& v : r2) v = std::clamp(v, 0.0, 6.0);  // RELU6
  REQUIRE(ys == Shape{1, 4, 4, 8});
  const int d2 = worst_diff(out[2], quantize_all(r2, static_cast<float>(s2), z2, DType::Int8));
  const auto a3 =
      dequantized(out[2], static_cast<float>(s2), z2);  // NHWC order = TFLite's flattening
  std::vector<double> r3(10);
  for (std::size_t u3 = 0; u3 < 10; ++u3) {
    r3[u3] = bias3[u3];
    for (std::size_t k = 0; k < 128; ++k)
      r3[u3] += a3[k] * w3[u3 * 128 + k] * static_cast<double>(wq3.scales[u3]);
  }
  const auto e3 = quantize_all(r3, static_cast<float>(s3), z3, DType::Int8);
  const int d3 = worst_diff(out[3], e3);
  fmt::print(
      "TFLite int8 per-channel model: worst |output - float reference| conv {}, depthwise {}, "
      "fully connected {}\n",
      d1, d2, d3);
  CHECK(d1 <= 1);
  CHECK(d2 <= 1);
  CHECK(d3 <= 1);
  for (std::size_t i = 0; i < 4; ++i) CHECK(distinct(out[i]) >= 8);
  // The per-channel scales matter: one scale for all channels would be far off.
  bool clamped = false;
  for (std::size_t i = 0; i < static_cast<std::size_t>(out[2].elements()); ++i)
    clamped = clamped || out[2].as<std::int8_t>()[i] == 72;
  CHECK(clamped);  // RELU6 at zero point -128 and scale 0.03 clamps at -128 + 200 = 72
  // DEQUANTIZE: (q - zero point) * scale.
  for (std::size_t i = 0; i < 10; ++i) {
    CHECK(out[4].as<float>()[i] ==
          static_cast<float>(out[3].as<std::int8_t>()[i] - z3) * static_cast<float>(s3));
  }
}

// ---- hand-made uint8 model with the other operators ---------------------------------------------

// clang-format off
TEST_CASE("TFLite: uint8 PAD, pools, ADD, CONCATENATION, CONV_2D, RESHAPE, FULLY_CONNECTED, SOFTMAX, DEQUANTIZE",
          "[tflite][uint8]") {
  // clang-format on
  std::mt19937 rng(7);
  TfliteWriter w;
  auto& b = w.builder();
  const QSpec qx{{0.05f}, {128}}, qd{{0.07f}, {120}}, qe{{0.06f}, {110}}, qf{{0.2f}, {100}};
  const QSpec qh{{0.25f}, {130}}, qp{{1.0f / 256}, {0}}, qwf{{0.02f}, {128}}, qwh{{0.002f}, {120}};
  const QSpec qbf{{0.06f * 0.02f}, {0}}, qbh{{0.2f * 0.002f}, {0}};
  const auto wf = random_ints(rng, 6 * 8, 0, 255), bf = random_ints(rng, 6, -500, 500);
  const auto wh = random_ints(rng, 5 * 96, 0, 255), bh = random_ints(rng, 5, -800, 800);
  const std::vector<std::int32_t> pads = {0, 0, 1, 1, 1, 1, 0, 0}, shape2 = {1, 96};
  const auto wfb = bytes8(wf), whb = bytes8(wh), bfb = bytes32(bf), bhb = bytes32(bh);
  const auto padsb = bytes32(pads), shape2b = bytes32(shape2);

  const int x = w.tensor("x", fb::TensorType::UINT8, {1, 6, 6, 4}, &qx);
  const int tp = w.tensor("pads", fb::TensorType::INT32, {4, 2}, nullptr, &padsb);
  const int a = w.tensor("a", fb::TensorType::UINT8, {1, 8, 8, 4}, &qx);
  const int bt = w.tensor("b", fb::TensorType::UINT8, {1, 4, 4, 4}, &qx);
  const int c = w.tensor("c", fb::TensorType::UINT8, {1, 4, 4, 4}, &qx);
  const int d = w.tensor("d", fb::TensorType::UINT8, {1, 4, 4, 4}, &qd);
  const int e = w.tensor("e", fb::TensorType::UINT8, {1, 4, 4, 8}, &qe);
  const int twf = w.tensor("wf", fb::TensorType::UINT8, {6, 1, 1, 8}, &qwf, &wfb);
  const int tbf = w.tensor("bf", fb::TensorType::INT32, {6}, &qbf, &bfb);
  const int f = w.tensor("f", fb::TensorType::UINT8, {1, 4, 4, 6}, &qf);
  const int tshape = w.tensor("shape", fb::TensorType::INT32, {2}, nullptr, &shape2b);
  const int g = w.tensor("g", fb::TensorType::UINT8, {1, 96}, &qf);
  const int twh = w.tensor("wh", fb::TensorType::UINT8, {5, 96}, &qwh, &whb);
  const int tbh = w.tensor("bh", fb::TensorType::INT32, {5}, &qbh, &bhb);
  const int h = w.tensor("h", fb::TensorType::UINT8, {1, 5}, &qh);
  const int p = w.tensor("p", fb::TensorType::UINT8, {1, 5}, &qp);
  const int pf = w.tensor("pf", fb::TensorType::FLOAT32, {1, 5});
  w.op(34, {x, tp}, {a}, fb::BuiltinOptions::PadOptions, fb::CreatePadOptions(b).Union());
  w.op(17, {a}, {bt}, fb::BuiltinOptions::Pool2DOptions,
       fb::CreatePool2DOptions(b, fb::Padding::VALID, 2, 2, 2, 2).Union());
  w.op(1, {a}, {c}, fb::BuiltinOptions::Pool2DOptions,
       fb::CreatePool2DOptions(b, fb::Padding::SAME, 2, 2, 3, 3, fb::ActivationFunctionType::RELU)
           .Union());
  w.op(0, {bt, c}, {d}, fb::BuiltinOptions::AddOptions,
       fb::CreateAddOptions(b, fb::ActivationFunctionType::RELU).Union());
  w.op(2, {d, bt}, {e}, fb::BuiltinOptions::ConcatenationOptions,
       fb::CreateConcatenationOptions(b, 3).Union());
  w.op(3, {e, twf, tbf}, {f}, fb::BuiltinOptions::Conv2DOptions,
       fb::CreateConv2DOptions(b, fb::Padding::VALID, 1, 1).Union());
  w.op(22, {f, tshape}, {g}, fb::BuiltinOptions::ReshapeOptions,
       fb::CreateReshapeOptionsDirect(b, &shape2).Union());
  w.op(9, {g, twh, tbh}, {h}, fb::BuiltinOptions::FullyConnectedOptions,
       fb::CreateFullyConnectedOptions(b).Union());
  w.op(25, {h}, {p}, fb::BuiltinOptions::SoftmaxOptions, fb::CreateSoftmaxOptions(b, 1.0f).Union());
  w.op(6, {p}, {pf});
  const fs::path path = write_model("uint8_ops.tflite", w.finish({x}, {bt, c, d, e, f, h, p, pf}));

  auto runner = runtime::create_runner(path, test_options());
  Tensor input(DType::UInt8, {1, 6, 6, 4});
  for (auto& v : input.as<std::uint8_t>()) v = static_cast<std::uint8_t>(rng() % 256);
  const auto out = runner->run({input});
  REQUIRE(out.size() == 8);
  const auto& X = input;
  auto at = [](const Tensor& t, std::int64_t n, std::int64_t hh, std::int64_t ww, std::int64_t cc) {
    const auto& s = t.shape();
    return static_cast<std::int32_t>(
        test::element(t, static_cast<std::size_t>(((n * s[1] + hh) * s[2] + ww) * s[3] + cc)));
  };
  // PAD with the zero point, then MAX_POOL_2D 2x2/2: the maximum of stored values, exactly.
  auto padded = [&](std::int64_t hh, std::int64_t ww, std::int64_t cc) {
    return hh < 1 || hh > 6 || ww < 1 || ww > 6 ? 128 : at(X, 0, hh - 1, ww - 1, cc);
  };
  std::vector<std::int32_t> eb, ec;
  for (std::int64_t oh = 0; oh < 4; ++oh)
    for (std::int64_t ow = 0; ow < 4; ++ow)
      for (std::int64_t cc = 0; cc < 4; ++cc) {
        std::int32_t best = 0;
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j) best = std::max(best, padded(oh * 2 + i, ow * 2 + j, cc));
        eb.push_back(best);
        // AVERAGE_POOL_2D 3x3/2 SAME on the 8x8 padded tensor (pads 0 before, 1 after): the mean
        // over the in-bounds taps, RELU.
        double sum = 0;
        int count = 0;
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j) {
            const std::int64_t hh = oh * 2 + i, ww = ow * 2 + j;
            if (hh >= 8 || ww >= 8) continue;
            sum += (padded(hh, ww, cc) - 128) * 0.05;
            ++count;
          }
        ec.push_back(quantize_ref(std::max(0.0, sum / count), 0.05, 128, DType::UInt8));
      }
  CHECK(worst_diff(out[0], eb) == 0);
  const int dc = worst_diff(out[1], ec);
  // ADD with RELU, from our b and c.
  std::vector<std::int32_t> ed;
  for (std::size_t i = 0; i < 64; ++i) {
    const double v =
        (test::element(out[0], i) - 128) * 0.05 + (test::element(out[1], i) - 128) * 0.05;
    ed.push_back(quantize_ref(std::max(0.0, v), static_cast<double>(0.07f), 120, DType::UInt8));
  }
  const int dd = worst_diff(out[2], ed);
  // CONCATENATION along channels: d and b rescaled to e's parameters.
  std::vector<std::int32_t> ee;
  for (std::int64_t pix = 0; pix < 16; ++pix) {
    for (std::int64_t cc = 0; cc < 4; ++cc) {
      ee.push_back(
          quantize_ref((test::element(out[2], static_cast<std::size_t>(pix * 4 + cc)) - 120) *
                           static_cast<double>(0.07f),
                       static_cast<double>(0.06f), 110, DType::UInt8));
    }
    for (std::int64_t cc = 0; cc < 4; ++cc) {
      ee.push_back(
          quantize_ref((test::element(out[0], static_cast<std::size_t>(pix * 4 + cc)) - 128) * 0.05,
                       static_cast<double>(0.06f), 110, DType::UInt8));
    }
  }
  const int de = worst_diff(out[3], ee);
  // CONV_2D 1x1 (uint8 weights, zero point 128).
  std::vector<double> wfd, bfd(6);
  for (auto v : wf) wfd.push_back((v - 128) * static_cast<double>(0.02f));
  for (std::size_t i = 0; i < 6; ++i) bfd[i] = bf[i] * static_cast<double>(qbf.scales[0]);
  Shape fs_;
  const auto rf = conv_ref(dequantized(out[3], static_cast<double>(0.06f), 110), {1, 4, 4, 8}, wfd,
                           {6, 1, 1, 8}, bfd, 1, false, false, &fs_);
  const int df = worst_diff(out[4], quantize_all(rf, static_cast<double>(0.2f), 100, DType::UInt8));
  // RESHAPE (NHWC order) + FULLY_CONNECTED.
  const auto gv = dequantized(out[4], static_cast<double>(0.2f), 100);
  std::vector<double> rh(5);
  for (std::size_t u = 0; u < 5; ++u) {
    rh[u] = bh[u] * static_cast<double>(qbh.scales[0]);
    for (std::size_t k = 0; k < 96; ++k)
      rh[u] += gv[k] * (wh[u * 96 + k] - 120) * static_cast<double>(0.002f);
  }
  const int dh =
      worst_diff(out[5], quantize_all(rh, static_cast<double>(0.25f), 130, DType::UInt8));
  // SOFTMAX of our h.
  const int dp = worst_diff(out[6], softmax_q(out[5], static_cast<double>(0.25f), 130));
  fmt::print(
      "TFLite uint8 ops model: worst |output - float reference| avgpool {}, add {}, concat {}, "
      "conv {}, fully connected {}, softmax {} (maxpool exact)\n",
      dc, dd, de, df, dh, dp);
  CHECK(dc <= 1);
  CHECK(dd <= 1);
  CHECK(de <= 1);
  CHECK(df <= 1);
  CHECK(dh <= 1);
  CHECK(dp <= 1);
  for (std::size_t i = 0; i < 6; ++i) CHECK(distinct(out[i]) >= 5);
  CHECK(distinct(out[6]) >= 2);
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(out[7].as<float>()[i] == static_cast<float>(out[6].as<std::uint8_t>()[i]) * (1.0f / 256));
  }
}

TEST_CASE(
    "TFLite: RESIZE_BILINEAR on the NPU, RESIZE_NEAREST_NEIGHBOR, ARG_MAX and ARG_MIN on the host",
    "[tflite][uint8]") {
  std::mt19937 rng(11);
  TfliteWriter w;
  auto& b = w.builder();
  const QSpec q{{0.1f}, {128}};
  const std::vector<std::int32_t> size33 = {3, 3}, size44 = {4, 4}, axis_last = {-1}, axis3 = {3};
  const auto size33b = bytes32(size33), size44b = bytes32(size44), axis_lastb = bytes32(axis_last),
             axis3b = bytes32(axis3);
  const int x = w.tensor("x", fb::TensorType::UINT8, {1, 2, 2, 5}, &q);
  const int s33 = w.tensor("size33", fb::TensorType::INT32, {2}, nullptr, &size33b);
  const int s44 = w.tensor("size44", fb::TensorType::INT32, {2}, nullptr, &size44b);
  const int a_last = w.tensor("axis_last", fb::TensorType::INT32, {1}, nullptr, &axis_lastb);
  const int a3 = w.tensor("axis3", fb::TensorType::INT32, {1}, nullptr, &axis3b);
  const int y = w.tensor("y", fb::TensorType::UINT8, {1, 3, 3, 5}, &q);
  const int n = w.tensor("n", fb::TensorType::UINT8, {1, 4, 4, 5}, &q);
  const int z = w.tensor("z", fb::TensorType::INT64, {1, 3, 3});
  const int m = w.tensor("m", fb::TensorType::INT32, {1, 3, 3});
  w.op(23, {x, s33}, {y}, fb::BuiltinOptions::ResizeBilinearOptions,
       fb::CreateResizeBilinearOptions(b, true, false).Union());
  w.op(97, {x, s44}, {n}, fb::BuiltinOptions::ResizeNearestNeighborOptions,
       fb::CreateResizeNearestNeighborOptions(b, false, true).Union());
  w.op(56, {y, a3}, {z}, fb::BuiltinOptions::ArgMaxOptions,
       fb::CreateArgMaxOptions(b, fb::TensorType::INT64).Union());
  w.op(79, {y, a_last}, {m}, fb::BuiltinOptions::ArgMinOptions,
       fb::CreateArgMinOptions(b, fb::TensorType::INT32).Union());
  const fs::path path = write_model("resize_argmax.tflite", w.finish({x}, {y, n, z, m}));

  auto runner = runtime::create_runner(path, test_options());
  Tensor input(DType::UInt8, {1, 2, 2, 5});
  for (auto& v : input.as<std::uint8_t>()) v = static_cast<std::uint8_t>(rng() % 256);
  // Ties for the index rules: channels 1 and 3 of pixel (0, 0) equal and largest, channels 0
  // and 2 equal and smallest, in all four corners (so every resized pixel ties the same way).
  for (int p = 0; p < 4; ++p) {
    auto* px = input.as<std::uint8_t>().data() + p * 5;
    px[1] = px[3] = 250;
    px[0] = px[2] = static_cast<std::uint8_t>(p);
    px[4] = 100;
  }
  const auto out = runner->run({input});
  REQUIRE(out.size() == 4);
  const auto X = input.as<std::uint8_t>();
  auto at = [&](int h, int wd, int c) {
    return static_cast<int>(X[static_cast<std::size_t>((h * 2 + wd) * 5 + c)]);
  };
  // align_corners 2 -> 3 puts every output on a corner, an edge midpoint or the centre with
  // weights 0, 1/2 or 1/4, exact in float32: TFLite's uint8 kernel (the generic
  // reference_ops::ResizeBilinear<T>) adds rounding_offset 0.5 and truncates, so the mean
  // rounded half up.
  REQUIRE(out[0].shape() == Shape{1, 3, 3, 5});
  const auto Y = out[0].as<std::uint8_t>();
  for (int h = 0; h < 3; ++h)
    for (int wd = 0; wd < 3; ++wd)
      for (int c = 0; c < 5; ++c) {
        const std::vector<int> rows = h == 1 ? std::vector<int>{0, 1} : std::vector<int>{h / 2};
        const std::vector<int> cols = wd == 1 ? std::vector<int>{0, 1} : std::vector<int>{wd / 2};
        int sum = 0;
        for (int r : rows)
          for (int k : cols) sum += at(r, k, c);
        const int count = static_cast<int>(rows.size() * cols.size());
        const int expected = (2 * sum + count) / (2 * count);
        INFO("y at " << h << "," << wd << "," << c);
        CHECK(static_cast<int>(Y[static_cast<std::size_t>((h * 3 + wd) * 5 + c)]) == expected);
      }
  // half_pixel_centers nearest 2 -> 4: sources floor((o + 0.5) / 2) = 0, 0, 1, 1.
  REQUIRE(out[1].shape() == Shape{1, 4, 4, 5});
  const auto N = out[1].as<std::uint8_t>();
  for (int h = 0; h < 4; ++h)
    for (int wd = 0; wd < 4; ++wd)
      for (int c = 0; c < 5; ++c)
        CHECK(static_cast<int>(N[static_cast<std::size_t>((h * 4 + wd) * 5 + c)]) ==
              at(h / 2, wd / 2, c));
  // ARG_MAX int64 and ARG_MIN int32 over the channels of y, first index on ties.
  REQUIRE(out[2].dtype() == DType::Int64);
  REQUIRE(out[2].shape() == Shape{1, 3, 3});
  REQUIRE(out[3].dtype() == DType::Int32);
  REQUIRE(out[3].shape() == Shape{1, 3, 3});
  for (std::size_t p = 0; p < 9; ++p) {
    std::size_t hi = 0, lo = 0;
    for (std::size_t c = 1; c < 5; ++c) {
      if (Y[p * 5 + c] > Y[p * 5 + hi]) hi = c;
      if (Y[p * 5 + c] < Y[p * 5 + lo]) lo = c;
    }
    CHECK(out[2].as<std::int64_t>()[p] == static_cast<std::int64_t>(hi));
    CHECK(out[3].as<std::int32_t>()[p] == static_cast<std::int32_t>(lo));
  }
  CHECK(out[2].as<std::int64_t>()[0] == 1);  // the tie 1 / 3 resolved to the first
  CHECK(out[3].as<std::int32_t>()[0] == 0);  // the tie 0 / 2 resolved to the first
  // RESIZE_BILINEAR runs on the NPU (LowLevelResize in TFLite's bilinear mode, the values above);
  // the nearest resize (an `axes` Resize, not a whole-factor repeat on NCHW) and the two
  // arg-reductions on the host as external operators (partition report, external steps).
  std::size_t fallback = 0, external = 0, npu_bilinear = 0;
  for (const auto& e : runner->compiled().report.entries) {
    if (e.op == "Resize" || e.op == "ArgMax" || e.op == "ArgMin")
      fallback += e.placement == "fallback";
    npu_bilinear += e.op == "Resize" && e.placement == "npu" && e.target == "LowLevelResize";
  }
  for (const auto& step : runner->compiled().steps) {
    external +=
        step.kind == compiler::Step::Kind::Cpu && step.cpu.kind == compiler::CpuOpKind::External;
  }
  CHECK(npu_bilinear == 1);
  CHECK(fallback == 3);
  CHECK(external >= 3);
  std::size_t bilinear_kernels = 0;
  for (const auto& call : runner->compiled().npu_calls) {
    for (const auto& k : call.program->kernels) {
      if (k.kind == isa::KernelKind::Resize) {
        const auto& p = std::get<isa::ResizeParams>(k.params);
        bilinear_kernels += p.mode == isa::ResizeParams::Mode::TfliteBilinear && p.align_corners &&
                            !p.half_pixel_centers;
      }
    }
  }
  CHECK(bilinear_kernels == 1);
}

TEST_CASE("TFLite: LOGISTIC as TFLite's 256-entry table (uint8) and Sigmoid (float32)",
          "[tflite][logistic]") {
  // uint8: every input byte once; the table must be round(256 * sigmoid((q - 128) * 0.05)),
  // saturated at 255 (TFLite's PopulateLookupTable, float32 arithmetic; the rounding of the
  // float32 and double formulas agrees on these 256 values).
  auto model = [](float out_scale, bool float32) {
    TfliteWriter w;
    const QSpec qin{{0.05f}, {128}}, qout{{out_scale}, {0}};
    const auto type = float32 ? fb::TensorType::FLOAT32 : fb::TensorType::UINT8;
    const int x = w.tensor("x", type, {1, 256}, float32 ? nullptr : &qin);
    const int y = w.tensor("y", type, {1, 256}, float32 ? nullptr : &qout);
    w.op(14, {x}, {y});
    return w.finish({x}, {y});
  };
  auto runner = runtime::create_runner(write_model("logistic.tflite", model(1.0f / 256, false)),
                                       test_options());
  Tensor in(DType::UInt8, {1, 256});
  for (std::size_t i = 0; i < 256; ++i) in.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(i);
  const Tensor out = runner->run({in}).at(0);
  for (int q = 0; q < 256; ++q) {
    INFO("q " << q);
    const double sig = 1.0 / (1.0 + std::exp(-(q - 128) * static_cast<double>(0.05f)));
    CHECK(static_cast<int>(out.as<std::uint8_t>()[static_cast<std::size_t>(q)]) ==
          std::min(255, static_cast<int>(std::round(256 * sig))));
  }
  std::size_t on_npu = 0;
  for (const auto& e : runner->compiled().report.entries)
    on_npu += e.op == "furiosa::Requantize" && e.placement == "npu";
  CHECK(on_npu == 1);
  // TFLite requires the output scale 1/256 (and zero point 0 for uint8).
  try {
    (void)compiler::import_tflite_bytes(model(1.0f / 128, false), "logistic.tflite");
    FAIL("a LOGISTIC with output scale 1/128 was accepted");
  } catch (const Error& e) {
    CHECK_THAT(e.message(), Catch::Contains("LOGISTIC") && Catch::Contains("1/256"));
  }
  // float32: Sigmoid on the host.
  auto frunner = runtime::create_runner(write_model("logistic_f32.tflite", model(1.0f, true)),
                                        test_options("npu0pe1"));
  Tensor fin(DType::Float32, {1, 256});
  for (std::size_t i = 0; i < 256; ++i) fin.as<float>()[i] = (static_cast<float>(i) - 128) * 0.1f;
  const Tensor fout = frunner->run({fin}).at(0);
  for (std::size_t i = 0; i < 256; ++i) {
    CHECK(fout.as<float>()[i] ==
          Approx(1.0 / (1.0 + std::exp(-static_cast<double>(fin.as<float>()[i])))).epsilon(1e-6));
  }
}
