// TFLite TRANSPOSE_CONV against the TFLite peer (TensorFlow Lite 2.14's reference kernels,
// tflite_peer.h): small models written with tflite_writer.h; uint8 (per-tensor weights) and int8
// (per-channel weights) on the NPU as a QLinearConv over the zero-point-spread input, float32 on
// the host as furiosa::TFLiteTransposeConv; strides 1, 2 and 3, SAME and VALID, kernels 2x2 to
// 4x4, with and without bias, fused RELU / RELU6 / RELU_N1_TO_1, output shapes other than the
// largest one a stride allows; outputs compared byte for byte. And the refusals: a computed
// output_shape, an output_shape that no forward convolution maps onto the input, int8 weights
// with one scale for several output channels, an int8 bias whose zero point is not 0.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"
#include "tflite_peer.h"
#include "tflite_writer.h"

using namespace furiosa;
namespace fb = furiosa::tflite_fb;
using test::QSpec;
using test::TfliteWriter;

namespace {

using Dims = std::vector<std::int32_t>;
using Act = fb::ActivationFunctionType;

constexpr int kTransposeConv = 67;

/// One TRANSPOSE_CONV: input [N, H, W, I], weights [O, KH, KW, I], output [N, OH, OW, O].
struct TcCase {
  const char* name;
  Dims in;
  std::int32_t o, kh, kw, sh, sw;
  fb::Padding padding;
  std::int32_t oh, ow;
  bool bias;
  Act act;
};

const std::vector<TcCase> kCases = {
    {"k3_s1_same", {1, 5, 6, 3}, 4, 3, 3, 1, 1, fb::Padding::SAME, 5, 6, true, Act::NONE},
    {"k3_s1_valid", {1, 4, 4, 5}, 3, 3, 3, 1, 1, fb::Padding::VALID, 6, 6, false, Act::RELU6},
    {"k3_s2_same", {1, 4, 5, 3}, 4, 3, 3, 2, 2, fb::Padding::SAME, 8, 10, true, Act::RELU},
    // SAME with odd sizes: 7 x 9 is not the largest output (8 x 10) a stride of 2 gives.
    {"k3_s2_same_odd", {1, 4, 5, 3}, 2, 3, 3, 2, 2, fb::Padding::SAME, 7, 9, true, Act::RELU6},
    {"k2_s2_valid", {1, 3, 4, 2}, 3, 2, 2, 2, 2, fb::Padding::VALID, 6, 8, false, Act::NONE},
    {"k2_s2_same_odd", {1, 3, 4, 2}, 3, 2, 2, 2, 2, fb::Padding::SAME, 5, 7, true, Act::NONE},
    {"k4_s2_same_batch2", {2, 3, 3, 3}, 4, 4, 4, 2, 2, fb::Padding::SAME, 6, 6, true, Act::NONE},
    // VALID one row / column past the smallest output (3 - 1) * 2 + 4 = 8: only bias there.
    {"k4_s2_valid_longer",
     {1, 3, 4, 2},
     2,
     4,
     4,
     2,
     2,
     fb::Padding::VALID,
     9,
     11,
     true,
     Act::RELU_N1_TO_1},
    {"k3x2_s2x1_same", {1, 4, 5, 2}, 3, 3, 2, 2, 1, fb::Padding::SAME, 8, 5, true, Act::NONE},
    {"k2_s3_valid_gaps", {1, 3, 3, 2}, 2, 2, 2, 3, 3, fb::Padding::VALID, 8, 8, false, Act::NONE},
    // One input row: nothing to spread along the height, the stride only sets the padding.
    {"k3_s2_same_one_row", {1, 1, 4, 3}, 2, 3, 3, 2, 2, fb::Padding::SAME, 2, 8, true, Act::NONE},
};

fb::TensorType tc_type(DType d) {
  return d == DType::UInt8  ? fb::TensorType::UINT8
         : d == DType::Int8 ? fb::TensorType::INT8
                            : fb::TensorType::FLOAT32;
}
const char* tc_tag(DType d) {
  return d == DType::UInt8 ? "uint8" : d == DType::Int8 ? "int8" : "float32";
}

/// The model y = TRANSPOSE_CONV(output_shape, w, x[, b]) of case c; `wq` / `bq` quantize the
/// weights / bias (null for float32).
std::string tc_model(const TcCase& c, DType d, const std::vector<std::uint8_t>& w_bytes,
                     const std::vector<std::uint8_t>& b_bytes, const QSpec* qx, const QSpec* qw,
                     const QSpec* qb, const QSpec* qy) {
  TfliteWriter w;
  const Dims out = {c.in[0], c.oh, c.ow, c.o};
  const auto shape_bytes = test::raw_bytes(out);
  const int s = w.tensor("output_shape", fb::TensorType::INT32, {4}, nullptr, &shape_bytes);
  const int k = w.tensor("weights", tc_type(d), {c.o, c.kh, c.kw, c.in[3]}, qw, &w_bytes);
  const int x = w.tensor("x", tc_type(d), c.in, qx);
  const int y = w.tensor("y", tc_type(d), out, qy);
  std::vector<std::int32_t> inputs = {s, k, x};
  if (c.bias) {
    inputs.push_back(w.tensor("bias",
                              d == DType::Float32 ? fb::TensorType::FLOAT32 : fb::TensorType::INT32,
                              {c.o}, qb, &b_bytes));
  }
  w.op(kTransposeConv, inputs, {y}, fb::BuiltinOptions::TransposeConvOptions,
       fb::CreateTransposeConvOptions(w.builder(), c.padding, c.sw, c.sh, c.act).Union());
  return w.finish({x}, {y});
}

struct TcRun {
  std::unique_ptr<runtime::Runner> runner;
  Tensor ours, peer;
};

TcRun run_case(const std::string& name, const std::string& bytes, const Tensor& x) {
  const auto path = test::write_peer_model(name + ".tflite", bytes);
  TcRun r;
  r.runner = runtime::create_runner(path, test::peer_runner_options());
  auto ours = r.runner->run({x});
  auto peer = test::run_tflite_peer(path, {x}, ours);
  REQUIRE(ours.size() == 1);
  REQUIRE(peer.size() == 1);
  r.ours = std::move(ours[0]);
  r.peer = std::move(peer[0]);
  fmt::print("tflite peer: transpose_conv {}: worst difference {}\n", name,
             test::worst_difference(r.ours, r.peer));
  return r;
}

void check_identical(const TcRun& r) {
  REQUIRE(r.ours.shape() == r.peer.shape());
  REQUIRE(r.ours.dtype() == r.peer.dtype());
  CHECK(test::worst_difference(r.ours, r.peer) == 0);
  CHECK(std::memcmp(r.ours.bytes().data(), r.peer.bytes().data(), r.ours.size_bytes()) == 0);
}

/// The smallest stored value of an 8-bit tensor.
int lowest_stored(const Tensor& t) {
  int lo = 255;
  for (std::int64_t i = 0; i < t.elements(); ++i) {
    const auto b = static_cast<std::uint8_t>(t.bytes()[static_cast<std::size_t>(i)]);
    lo = std::min(lo, t.dtype() == DType::Int8 ? static_cast<int>(static_cast<std::int8_t>(b))
                                               : static_cast<int>(b));
  }
  return lo;
}

void require_all_on(const runtime::Runner& runner, const std::string& op,
                    const std::string& where) {
  const auto p = test::placements(runner, op);
  INFO(op << " placements: " << fmt::format("{}", fmt::join(p, ", ")));
  REQUIRE(!p.empty());
  for (const auto& e : p) CHECK(e == where);
}

}  // namespace

TEST_CASE(
    "TFLite peer: TRANSPOSE_CONV uint8 and int8 (per-channel) on the NPU, strides, paddings, "
    "kernels, bias, fused activations",
    "[tflite_peer]") {
  for (DType d : {DType::UInt8, DType::Int8}) {
    for (const TcCase& c : kCases) {
      const std::string name = fmt::format("{}_{}", c.name, tc_tag(d));
      INFO(name);
      const bool u8 = d == DType::UInt8;
      const std::int32_t I = c.in[3];
      const float x_scale = 0.05f;
      std::vector<float> w_scales;
      for (std::int32_t o = 0; o < (u8 ? 1 : c.o); ++o)
        w_scales.push_back(0.01f * (1.0f + 0.15f * static_cast<float>(o)));
      // The output scale keeps typical sums about 50 steps from the zero point: |x - zp| ~ 74,
      // |w - zp| ~ 23 on average, about I kh kw / (sh sw) products per output.
      const double taps = static_cast<double>(I * c.kh * c.kw) / (c.sh * c.sw);
      const auto y_scale =
          static_cast<float>(x_scale * w_scales[0] * 74 * 23 * std::sqrt(taps) / 50);
      const QSpec qx{{x_scale}, {u8 ? 131 : -3}};
      const QSpec qy{{y_scale}, {u8 ? 120 : -9}};
      QSpec qw{w_scales, std::vector<std::int64_t>(w_scales.size(), u8 ? 118 : 0), 0};
      QSpec qb{{}, std::vector<std::int64_t>(w_scales.size(), 0), 0};
      for (float s : w_scales) qb.scales.push_back(x_scale * s);
      const Tensor wt = test::seeded_ints(d, {c.o, c.kh, c.kw, I}, u8 ? 78 : -40, u8 ? 158 : 40, 5);
      const std::vector<std::uint8_t> w_bytes(
          reinterpret_cast<const std::uint8_t*>(wt.bytes().data()),
          reinterpret_cast<const std::uint8_t*>(wt.bytes().data()) + wt.size_bytes());
      const Tensor bt = test::seeded_ints(DType::Int32, {c.o}, -3000, 3000, 6);
      const std::vector<std::uint8_t> b_bytes(
          reinterpret_cast<const std::uint8_t*>(bt.bytes().data()),
          reinterpret_cast<const std::uint8_t*>(bt.bytes().data()) + bt.size_bytes());
      const std::string bytes = tc_model(c, d, w_bytes, b_bytes, &qx, &qw, &qb, &qy);
      const Tensor x =
          test::seeded_ints(d, Shape(c.in.begin(), c.in.end()), u8 ? 0 : -128, u8 ? 255 : 127, 7);
      const TcRun r = run_case(name, bytes, x);
      check_identical(r);
      CHECK(test::distinct(r.ours) > (c.act == Act::RELU_N1_TO_1 ? 8u : 20u));
      if (c.act != Act::NONE) {  // the fused activation's clamp is reached
        const int lo_steps =
            static_cast<int>(std::round((c.act == Act::RELU_N1_TO_1 ? -1.0f : 0.0f) / y_scale));
        CHECK(lowest_stored(r.ours) ==
              std::max(static_cast<int>(qy.zero_points[0]) + lo_steps, u8 ? 0 : -128));
      }
      require_all_on(*r.runner, "QLinearConv", "npu");
      if (c.sh > 1 || c.sw > 1) require_all_on(*r.runner, "Pad", "npu");  // the zero-point spread
    }
  }
}

TEST_CASE("TFLite peer: TRANSPOSE_CONV float32 on the host in the reference's scatter order",
          "[tflite_peer]") {
  for (const TcCase& c : kCases) {
    const std::string name = fmt::format("{}_float32", c.name);
    INFO(name);
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> wv(static_cast<std::size_t>(c.o * c.kh * c.kw * c.in[3])),
        bv(static_cast<std::size_t>(c.o));
    for (auto& v : wv) v = dist(rng);
    for (auto& v : bv) v = dist(rng);
    Tensor x(DType::Float32, Shape(c.in.begin(), c.in.end()));
    for (auto& v : x.as<float>()) v = 2.0f * dist(rng);
    const std::string bytes = tc_model(c, DType::Float32, test::raw_bytes(wv), test::raw_bytes(bv),
                                       nullptr, nullptr, nullptr, nullptr);
    const TcRun r = run_case(name, bytes, x);
    check_identical(r);
    CHECK(test::distinct(r.ours) > 8);
    if (c.act != Act::NONE) {  // the fused activation's clamp is reached
      const auto v = r.ours.as<float>();
      CHECK(*std::min_element(v.begin(), v.end()) == (c.act == Act::RELU_N1_TO_1 ? -1.0f : 0.0f));
    }
    require_all_on(*r.runner, "furiosa::TFLiteTransposeConv", "fallback");
  }
}

TEST_CASE("TFLite: refusals of TRANSPOSE_CONV are one line naming the operator and the tensor",
          "[tflite_peer][errors]") {
  auto refused = [](const std::string& bytes, const std::string& name) -> std::string {
    try {
      (void)runtime::create_runner(test::write_peer_model(name, bytes),
                                   test::peer_runner_options());
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find_first_of("\n\x1b") == std::string::npos);
      return e.message();
    }
    FAIL(name << " was accepted");
    return {};
  };
  const QSpec q{{0.05f}, {128}}, qw{{0.01f}, {128}};
  const std::vector<std::uint8_t> w_bytes(3 * 3 * 3 * 2, 130);
  const auto options = [](TfliteWriter& w, fb::Padding p, int s) {
    return fb::CreateTransposeConvOptions(w.builder(), p, s, s).Union();
  };
  {  // a computed output_shape, with a hostile name that comes back escaped
    TfliteWriter w;
    const int s = w.tensor("shape\n\x1b[2J", fb::TensorType::INT32, {4});
    const int k = w.tensor("weights", fb::TensorType::UINT8, {3, 3, 3, 2}, &qw, &w_bytes);
    const int x = w.tensor("x", fb::TensorType::UINT8, {1, 4, 4, 2}, &q);
    const int y = w.tensor("y", fb::TensorType::UINT8, {1, 8, 8, 3}, &q);
    w.op(kTransposeConv, {s, k, x}, {y}, fb::BuiltinOptions::TransposeConvOptions,
         options(w, fb::Padding::SAME, 2));
    const std::string msg = refused(w.finish({s, x}, {y}), "transpose_conv_dynamic_shape.tflite");
    CHECK_THAT(msg, Catch::Contains("operator 0 (TRANSPOSE_CONV)") &&
                        Catch::Contains("output_shape 'shape\\x0a\\x1b[2J' must be a constant"));
  }
  {  // an output_shape the stride cannot map onto the input: a forward conv of 10 gives 5, not 4
    TfliteWriter w;
    const auto shape_bytes = test::raw_bytes(Dims{1, 10, 8, 3});
    const int s = w.tensor("out\x1b[31mshape", fb::TensorType::INT32, {4}, nullptr, &shape_bytes);
    const int k = w.tensor("weights", fb::TensorType::UINT8, {3, 3, 3, 2}, &qw, &w_bytes);
    const int x = w.tensor("x", fb::TensorType::UINT8, {1, 4, 4, 2}, &q);
    const int y = w.tensor("y", fb::TensorType::UINT8, {1, 10, 8, 3}, &q);
    w.op(kTransposeConv, {s, k, x}, {y}, fb::BuiltinOptions::TransposeConvOptions,
         options(w, fb::Padding::SAME, 2));
    const std::string msg = refused(w.finish({x}, {y}), "transpose_conv_bad_shape.tflite");
    CHECK_THAT(msg,
               Catch::Contains("operator 0 (TRANSPOSE_CONV)") &&
                   Catch::Contains(
                       "output_shape 'out\\x1b[31mshape' [1, 10, 8, 3] does not fit input 'x'") &&
                   Catch::Contains("gives 5, not 4"));
  }
  {  // int8 weights with one scale for three output channels (TFLite reads one per channel)
    TfliteWriter w;
    const auto shape_bytes = test::raw_bytes(Dims{1, 8, 8, 3});
    const QSpec q8{{0.05f}, {0}}, qw8{{0.01f}, {0}};
    const std::vector<std::uint8_t> w8(3 * 3 * 3 * 2, 3);
    const int s = w.tensor("output_shape", fb::TensorType::INT32, {4}, nullptr, &shape_bytes);
    const int k = w.tensor("weights", fb::TensorType::INT8, {3, 3, 3, 2}, &qw8, &w8);
    const int x = w.tensor("x", fb::TensorType::INT8, {1, 4, 4, 2}, &q8);
    const int y = w.tensor("y", fb::TensorType::INT8, {1, 8, 8, 3}, &q8);
    w.op(kTransposeConv, {s, k, x}, {y}, fb::BuiltinOptions::TransposeConvOptions,
         options(w, fb::Padding::SAME, 2));
    const std::string msg = refused(w.finish({x}, {y}), "transpose_conv_int8_per_tensor.tflite");
    CHECK_THAT(msg, Catch::Contains("operator 0 (TRANSPOSE_CONV)") &&
                        Catch::Contains("int8 weights 'weights' have 1 scales along dim 0"));
  }
  {  // an int8 bias with zero point 3 (TFLite's Prepare requires 0), its name escaped
    TfliteWriter w;
    const auto shape_bytes = test::raw_bytes(Dims{1, 8, 8, 3});
    const QSpec q8{{0.05f}, {0}}, qw8{{0.01f, 0.01f, 0.01f}, {0, 0, 0}, 0},
        qb8{{0.0005f, 0.0005f, 0.0005f}, {3, 0, 0}, 0};
    const std::vector<std::uint8_t> w8(3 * 3 * 3 * 2, 3);
    const auto b_bytes = test::raw_bytes(std::vector<std::int32_t>{10, -20, 30});
    const int s = w.tensor("output_shape", fb::TensorType::INT32, {4}, nullptr, &shape_bytes);
    const int k = w.tensor("weights", fb::TensorType::INT8, {3, 3, 3, 2}, &qw8, &w8);
    const int x = w.tensor("x", fb::TensorType::INT8, {1, 4, 4, 2}, &q8);
    const int y = w.tensor("y", fb::TensorType::INT8, {1, 8, 8, 3}, &q8);
    const int b = w.tensor("bias\n\x1b[1m", fb::TensorType::INT32, {3}, &qb8, &b_bytes);
    w.op(kTransposeConv, {s, k, x, b}, {y}, fb::BuiltinOptions::TransposeConvOptions,
         options(w, fb::Padding::SAME, 2));
    const std::string msg = refused(w.finish({x}, {y}), "transpose_conv_int8_bias_zp.tflite");
    CHECK_THAT(msg, Catch::Contains("operator 0 (TRANSPOSE_CONV)") &&
                        Catch::Contains("int8 bias 'bias\\x0a\\x1b[1m' has zero point 3; "
                                        "TFLite's TRANSPOSE_CONV requires 0"));
  }
}
