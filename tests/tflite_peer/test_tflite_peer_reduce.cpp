// TFLite SUM and REDUCE_MAX with constant axes against the TFLite peer (TensorFlow Lite 2.14's
// reference kernels, tflite_peer.h): small models written with tflite_writer.h, seeded random
// inputs, outputs compared bit-exactly, placements checked in the report (SUM uint8; REDUCE_MAX
// uint8 and int8); and the refusals of the SUMs the importer does not take: int8 (the peer's
// rescaling int8 SUM gave -1 for every output of these cases, nothing to match) and equal
// parameters (TFLite adds the stored values in 8 bits, wrapping around); and float32 RELU6,
// RELU_N1_TO_1, PADV2 and REDUCE_MAX.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <memory>
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

constexpr int kSum = 74, kReduceMax = 82;

fb::TensorType q8_type(DType d) {
  return d == DType::UInt8 ? fb::TensorType::UINT8 : fb::TensorType::INT8;
}
const char* q8_tag(DType d) { return d == DType::UInt8 ? "uint8" : "int8"; }

/// A model y = op(x, axes) with keep_dims.
std::string reduce_model(int code, DType d, const Dims& in, const Dims& axes, bool keep,
                         const QSpec& qx, const QSpec& qy) {
  Dims out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    bool reduced = false;
    for (auto a : axes)
      reduced = reduced || (a < 0 ? a + static_cast<std::int32_t>(in.size()) : a) ==
                               static_cast<std::int32_t>(i);
    if (!reduced) {
      out.push_back(in[i]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  TfliteWriter w;
  const auto axes_bytes = test::raw_bytes(axes);
  const int x = w.tensor("x", q8_type(d), in, &qx);
  const int a = w.tensor("axes", fb::TensorType::INT32, {static_cast<std::int32_t>(axes.size())},
                         nullptr, &axes_bytes);
  const int y = w.tensor("y", q8_type(d), out, &qy);
  w.op(code, {x, a}, {y}, fb::BuiltinOptions::ReducerOptions,
       fb::CreateReducerOptions(w.builder(), keep).Union());
  return w.finish({x}, {y});
}

struct ReduceCase {
  Dims in, axes;
  bool keep;
  float out_scale;  ///< SUM's output scale (REDUCE_MAX keeps the input's)
};

const std::vector<ReduceCase> kCases = {{{1, 4, 5, 6}, {1, 2}, true, 0.2f},
                                        {{3, 8}, {-1}, false, 0.12f},
                                        {{2, 3, 4}, {0, 2, 0}, false, 0.13f},
                                        {{2, 5, 3}, {1}, true, 0.09f}};

}  // namespace

TEST_CASE("TFLite peer: SUM with rescaling (constant axes, keep_dims), uint8, on the host",
          "[tflite_peer]") {
  for (DType d : {DType::UInt8}) {
    for (std::size_t k = 0; k < kCases.size(); ++k) {
      const ReduceCase& c = kCases[k];
      const std::string name = fmt::format("sum{}_{}", k, q8_tag(d));
      INFO(name);
      const int mid = d == DType::UInt8 ? 128 : 0;
      const QSpec qx{{0.05f}, {mid + 3}}, qy{{c.out_scale}, {mid - 4}};
      const auto path = test::write_peer_model(name + ".tflite",
                                               reduce_model(kSum, d, c.in, c.axes, c.keep, qx, qy));
      const auto runner = runtime::create_runner(path, test::peer_runner_options());
      const std::vector<Tensor> inputs = {test::seeded_ints(d, Shape(c.in.begin(), c.in.end()),
                                                            d == DType::UInt8 ? 0 : -128,
                                                            d == DType::UInt8 ? 255 : 127, 81)};
      const auto ours = runner->run(inputs);
      const auto peer = test::run_tflite_peer(path, inputs, ours);
      const double worst = test::worst_difference(ours[0], peer[0]);
      fmt::print("tflite peer: {}: worst difference {} step(s)\n", name, worst);
      CHECK(worst == 0);
      CHECK(test::distinct(ours[0]) > 2);
      for (const auto& p : test::placements(*runner, "furiosa::QuantizedMean"))
        CHECK(p == "fallback");
      CHECK(!test::placements(*runner, "furiosa::QuantizedMean").empty());
    }
  }
}

TEST_CASE("TFLite peer: REDUCE_MAX (constant axes, keep_dims), uint8 and int8, on the host",
          "[tflite_peer]") {
  for (DType d : {DType::UInt8, DType::Int8}) {
    for (std::size_t k = 0; k < kCases.size(); ++k) {
      const ReduceCase& c = kCases[k];
      const std::string name = fmt::format("reduce_max{}_{}", k, q8_tag(d));
      INFO(name);
      const QSpec q{{0.05f}, {d == DType::UInt8 ? 130 : 2}};
      const auto path = test::write_peer_model(
          name + ".tflite", reduce_model(kReduceMax, d, c.in, c.axes, c.keep, q, q));
      const auto runner = runtime::create_runner(path, test::peer_runner_options());
      const std::vector<Tensor> inputs = {test::seeded_ints(d, Shape(c.in.begin(), c.in.end()),
                                                            d == DType::UInt8 ? 0 : -128,
                                                            d == DType::UInt8 ? 255 : 127, 91)};
      const auto ours = runner->run(inputs);
      const auto peer = test::run_tflite_peer(path, inputs, ours);
      const double worst = test::worst_difference(ours[0], peer[0]);
      fmt::print("tflite peer: {}: worst difference {} step(s)\n", name, worst);
      CHECK(worst == 0);
      CHECK(test::distinct(ours[0]) > 2);
      const auto p = test::placements(*runner, "ReduceMax");
      REQUIRE(!p.empty());
      for (const auto& e : p) CHECK(e == "fallback");
    }
  }
}

TEST_CASE("TFLite SUM on int8 is refused naming the operator", "[tflite_peer]") {
  const QSpec qx{{0.05f}, {3}}, qy{{0.2f}, {-4}};
  const auto path = test::write_peer_model(
      "sum_int8.tflite", reduce_model(kSum, DType::Int8, {1, 4, 5, 6}, {1, 2}, true, qx, qy));
  try {
    runtime::create_runner(path, test::peer_runner_options());
    FAIL("an int8 SUM was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::UnsupportedOperator);
    CHECK_THAT(e.message(), Catch::Contains("operator 0 (SUM)"));
    CHECK_THAT(e.message(), Catch::Contains("int8"));
  }
}

TEST_CASE("TFLite SUM with equal input and output parameters is refused naming the operator",
          "[tflite_peer]") {
  const QSpec q{{0.05f}, {128}};
  const auto path = test::write_peer_model(
      "sum_same_params.tflite", reduce_model(kSum, DType::UInt8, {1, 4, 5, 6}, {1, 2}, true, q, q));
  try {
    runtime::create_runner(path, test::peer_runner_options());
    FAIL("a SUM with equal parameters was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::UnsupportedOperator);
    CHECK_THAT(e.message(), Catch::Contains("operator 0 (SUM)"));
    CHECK_THAT(e.message(), Catch::Contains("share their quantization parameters"));
  }
}

TEST_CASE("TFLite peer: float32 RELU6, RELU_N1_TO_1, PADV2 and REDUCE_MAX on the host",
          "[tflite_peer]") {
  constexpr int kReluN1To1 = 20, kRelu6 = 21, kPadV2 = 60;
  const Dims in = {1, 4, 5, 3};
  Tensor x_in(DType::Float32, {1, 4, 5, 3});
  auto xv = x_in.as<float>();
  for (std::size_t i = 0; i < xv.size(); ++i)
    xv[i] = static_cast<float>(static_cast<int>(i * 37 % 61) - 30) * 0.25f;
  xv[0] = 6.0f;
  xv[1] = -1.0f;
  xv[2] = 1.0f;
  struct Case {
    const char* name;
    int code;
  };
  for (const Case c : {Case{"relu6_float", kRelu6}, Case{"relu_n1_to_1_float", kReluN1To1},
                       Case{"padv2_float", kPadV2}, Case{"reduce_max_float", kReduceMax}}) {
    INFO(c.name);
    const auto pad_bytes = test::raw_bytes(Dims{0, 0, 1, 2, 2, 1, 0, 1});
    const auto value_bytes = test::raw_bytes(std::vector<float>{-3.5f});
    const auto axes_bytes = test::raw_bytes(Dims{1, 2});
    std::string bytes;
    if (c.code == kPadV2) {
      TfliteWriter w2;
      const int x2 = w2.tensor("x", fb::TensorType::FLOAT32, in);
      const int p = w2.tensor("paddings", fb::TensorType::INT32, {4, 2}, nullptr, &pad_bytes);
      const int v = w2.tensor("value", fb::TensorType::FLOAT32, {1}, nullptr, &value_bytes);
      const int y = w2.tensor("y", fb::TensorType::FLOAT32, {1, 7, 8, 4});
      w2.op(c.code, {x2, p, v}, {y});
      bytes = w2.finish({x2}, {y});
    } else if (c.code == kReduceMax) {
      TfliteWriter w2;
      const int x2 = w2.tensor("x", fb::TensorType::FLOAT32, in);
      const int a = w2.tensor("axes", fb::TensorType::INT32, {2}, nullptr, &axes_bytes);
      const int y = w2.tensor("y", fb::TensorType::FLOAT32, {1, 3});
      w2.op(c.code, {x2, a}, {y}, fb::BuiltinOptions::ReducerOptions,
            fb::CreateReducerOptions(w2.builder(), false).Union());
      bytes = w2.finish({x2}, {y});
    } else {
      TfliteWriter w2;
      const int x2 = w2.tensor("x", fb::TensorType::FLOAT32, in);
      const int y = w2.tensor("y", fb::TensorType::FLOAT32, in);
      w2.op(c.code, {x2}, {y});
      bytes = w2.finish({x2}, {y});
    }
    const auto path = test::write_peer_model(std::string(c.name) + ".tflite", bytes);
    const auto runner = runtime::create_runner(path, test::peer_runner_options());
    const auto ours = runner->run({x_in});
    const auto peer = test::run_tflite_peer(path, {x_in}, ours);
    const double worst = test::worst_difference(ours[0], peer[0]);
    fmt::print("tflite peer: {}: worst difference {}\n", c.name, worst);
    CHECK(worst == 0);
    CHECK(test::distinct(ours[0]) > 2);
  }
}
