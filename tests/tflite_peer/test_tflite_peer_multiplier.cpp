// The requantization multiplier of TFLite's convolutions against the TFLite peer (TensorFlow
// Lite 2.14's reference kernels, tflite_peer.h). TFLite forms input_scale * filter_scale /
// output_scale in two ways (kernels/kernel_util.cc): the per-channel arrays multiply the scales
// in double, GetQuantizedConvolutionMultipler multiplies them in float32 first; which one a
// kernel reads depends on the operator, the type and the weights' quantization (importer.h:
// ScaleProduct). The two multipliers differ in their last bits for most scales, so the results
// differ only at rounding boundaries: about one output in 350,000 of DeepLabV3's last backbone
// convolution, never in small seeded models. These cases hit the boundaries on purpose: scales
// whose two multipliers differ, and per output channel a bias that puts the accumulator on a
// value the two multipliers requantize differently (checked here, so each case can tell the
// products apart). CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and TRANSPOSE_CONV; uint8, int8
// with one weight scale and int8 with one per channel; outputs compared byte for byte.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "furiosa/host/fixed_point.h"
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

constexpr int kConv2d = 3, kDepthwise = 4, kFullyConnected = 9, kTransposeConv = 67;
constexpr int kChannels = 8;
constexpr int kInputOffset = 3;  // the input's stored value minus its zero point

enum class Product { Double, Float32 };

double real_multiplier(float xs, float ws, float ys, Product p) {
  const double xw = p == Product::Float32 ? static_cast<double>(xs * ws)
                                          : static_cast<double>(xs) * static_cast<double>(ws);
  return xw / static_cast<double>(ys);
}

std::int32_t requantize(std::int32_t acc, float xs, float ws, float ys, Product p,
                        std::int32_t zy) {
  return host::multiply_by_quantized_multiplier(
             acc, host::quantize_multiplier(real_multiplier(xs, ws, ys, p))) +
         zy;
}

/// One output channel: its weight scale, the weight's stored offset from its zero point and the
/// accumulator the bias completes.
struct Channel {
  float ws = 0;
  std::int32_t w = 0;
  std::int32_t acc = 0;
};

/// A weight scale for which the two products give different multipliers, and an accumulator
/// (of `sign`) that they requantize to different values inside [lo, hi].
Channel boundary_channel(std::mt19937& rng, float xs, float ys, std::int32_t zy, int lo, int hi,
                         int sign) {
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  for (int attempt = 0; attempt < 10000; ++attempt) {
    const float ws = scale(rng);
    if (host::quantize_multiplier(real_multiplier(xs, ws, ys, Product::Double)).multiplier ==
        host::quantize_multiplier(real_multiplier(xs, ws, ys, Product::Float32)).multiplier) {
      continue;
    }
    const double real = real_multiplier(xs, ws, ys, Product::Double);
    const auto reach = static_cast<std::int32_t>(std::min(hi - zy, zy - lo) / real);
    for (std::int32_t k = 1; k <= reach; ++k) {
      const std::int32_t acc = sign * k;
      const std::int32_t d = requantize(acc, xs, ws, ys, Product::Double, zy);
      const std::int32_t f = requantize(acc, xs, ws, ys, Product::Float32, zy);
      if (d != f && d >= lo && d <= hi && f >= lo && f <= hi) {
        return {ws, 1 + static_cast<std::int32_t>(rng() % 5), acc};
      }
    }
  }
  FAIL("no scale with a requantization boundary found");
  return {};
}

struct Case {
  const char* name;
  int op;
  DType dtype;
  bool per_channel;
};

const std::vector<Case> kCases = {
    {"conv2d_uint8", kConv2d, DType::UInt8, false},
    {"conv2d_int8_per_tensor", kConv2d, DType::Int8, false},
    {"conv2d_int8_per_channel", kConv2d, DType::Int8, true},
    {"depthwise_uint8", kDepthwise, DType::UInt8, false},
    {"depthwise_int8_per_tensor", kDepthwise, DType::Int8, false},
    {"depthwise_int8_per_channel", kDepthwise, DType::Int8, true},
    {"fully_connected_uint8", kFullyConnected, DType::UInt8, false},
    {"fully_connected_int8_per_tensor", kFullyConnected, DType::Int8, false},
    {"fully_connected_int8_per_channel", kFullyConnected, DType::Int8, true},
    {"transpose_conv_uint8", kTransposeConv, DType::UInt8, false},
    {"transpose_conv_int8_per_channel", kTransposeConv, DType::Int8, true},
};

/// The model and input of one case: x [1, 1, 1, 1] (the depthwise one [1, 1, 1, C], fully
/// connected [1, 1]) holding zero point + kInputOffset, 1x1 weights, bias acc - kInputOffset * w
/// per channel, output of C channels.
struct Built {
  std::string model;
  Tensor x;
  std::vector<Channel> channels;
  float xs = 0, ys = 0;
  std::int32_t zy = 0;
};

Built build(const Case& c, unsigned seed) {
  std::mt19937 rng(seed);
  const bool u8 = c.dtype == DType::UInt8;
  const int lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
  Built b;
  b.xs = std::uniform_real_distribution<float>(0.005f, 0.05f)(rng);
  b.ys = std::uniform_real_distribution<float>(0.05f, 0.3f)(rng);
  b.zy =
      u8 ? 100 + static_cast<std::int32_t>(rng() % 50) : static_cast<std::int32_t>(rng() % 40) - 20;
  const std::int32_t zx = u8 ? 120 : -10;
  const std::int32_t zw = u8 ? 128 : 0;  // TFLite's int8 weights are symmetric
  if (c.per_channel) {
    for (int k = 0; k < kChannels; ++k)
      b.channels.push_back(boundary_channel(rng, b.xs, b.ys, b.zy, lo, hi, k % 2 ? -1 : 1));
  } else {
    // One weight scale: its boundary accumulators, then more of the same scale.
    const Channel first = boundary_channel(rng, b.xs, b.ys, b.zy, lo, hi, 1);
    const double real = real_multiplier(b.xs, first.ws, b.ys, Product::Double);
    const auto reach = static_cast<std::int32_t>(std::min(hi - b.zy, b.zy - lo) / real);
    for (std::int32_t k = 1; k <= reach && static_cast<int>(b.channels.size()) < kChannels; ++k) {
      for (int sign : {1, -1}) {
        const std::int32_t acc = sign * k;
        if (requantize(acc, b.xs, first.ws, b.ys, Product::Double, b.zy) !=
                requantize(acc, b.xs, first.ws, b.ys, Product::Float32, b.zy) &&
            static_cast<int>(b.channels.size()) < kChannels) {
          b.channels.push_back({first.ws, 1 + static_cast<std::int32_t>(rng() % 5), acc});
        }
      }
    }
    REQUIRE(b.channels.size() >= 2);
  }
  const auto C = static_cast<std::int32_t>(b.channels.size());

  const fb::TensorType type = u8 ? fb::TensorType::UINT8 : fb::TensorType::INT8;
  std::vector<float> w_scales, b_scales;
  std::vector<std::int64_t> w_zps, b_zps;
  std::vector<std::uint8_t> w_bytes;
  std::vector<std::int32_t> bias;
  for (const Channel& ch : b.channels) {
    if (c.per_channel || w_scales.empty()) {
      w_scales.push_back(ch.ws);
      w_zps.push_back(zw);
      b_scales.push_back(b.xs * ch.ws);
      b_zps.push_back(0);
    }
    w_bytes.push_back(static_cast<std::uint8_t>(zw + ch.w));
    bias.push_back(ch.acc - kInputOffset * ch.w);
  }
  const int w_dim = c.op == kDepthwise ? 3 : 0;
  const QSpec qx{{b.xs}, {zx}, 0}, qy{{b.ys}, {b.zy}, 0};
  const QSpec qw{w_scales, w_zps, w_dim}, qb{b_scales, b_zps, 0};
  const auto bias_bytes = test::raw_bytes(bias);

  TfliteWriter w;
  const Dims x_shape = c.op == kDepthwise        ? Dims{1, 1, 1, C}
                       : c.op == kFullyConnected ? Dims{1, 1}
                                                 : Dims{1, 1, 1, 1};
  const Dims y_shape = c.op == kFullyConnected ? Dims{1, C} : Dims{1, 1, 1, C};
  const Dims w_shape = c.op == kDepthwise        ? Dims{1, 1, 1, C}
                       : c.op == kFullyConnected ? Dims{C, 1}
                                                 : Dims{C, 1, 1, 1};
  const int wt = w.tensor("weights", type, w_shape, &qw, &w_bytes);
  const int bt = w.tensor("bias", fb::TensorType::INT32, {C}, &qb, &bias_bytes);
  const int x = w.tensor("x", type, x_shape, &qx);
  const int y = w.tensor("y", type, y_shape, &qy);
  switch (c.op) {
    case kConv2d:
      w.op(kConv2d, {x, wt, bt}, {y}, fb::BuiltinOptions::Conv2DOptions,
           fb::CreateConv2DOptions(w.builder(), fb::Padding::VALID, 1, 1).Union());
      break;
    case kDepthwise:
      w.op(kDepthwise, {x, wt, bt}, {y}, fb::BuiltinOptions::DepthwiseConv2DOptions,
           fb::CreateDepthwiseConv2DOptions(w.builder(), fb::Padding::VALID, 1, 1, 1).Union());
      break;
    case kFullyConnected:
      w.op(kFullyConnected, {x, wt, bt}, {y}, fb::BuiltinOptions::FullyConnectedOptions,
           fb::CreateFullyConnectedOptions(w.builder()).Union());
      break;
    default: {
      const auto shape_bytes = test::raw_bytes(y_shape);
      const int s = w.tensor("output_shape", fb::TensorType::INT32, {4}, nullptr, &shape_bytes);
      w.op(kTransposeConv, {s, wt, x, bt}, {y}, fb::BuiltinOptions::TransposeConvOptions,
           fb::CreateTransposeConvOptions(w.builder(), fb::Padding::VALID, 1, 1).Union());
    }
  }
  b.model = w.finish({x}, {y});
  std::vector<std::int32_t> x_values(static_cast<std::size_t>(c.op == kDepthwise ? C : 1),
                                     zx + kInputOffset);
  b.x = Tensor(c.dtype,
               c.op == kFullyConnected ? Shape{1, 1} : Shape{1, 1, 1, c.op == kDepthwise ? C : 1});
  for (std::size_t i = 0; i < x_values.size(); ++i)
    b.x.bytes()[i] = static_cast<std::byte>(static_cast<std::uint8_t>(x_values[i]));
  return b;
}

/// The stored values of an 8-bit tensor as ints.
std::vector<int> stored(const Tensor& t) {
  std::vector<int> v;
  for (std::int64_t i = 0; i < t.elements(); ++i) {
    const auto u = static_cast<std::uint8_t>(t.bytes()[static_cast<std::size_t>(i)]);
    v.push_back(t.dtype() == DType::Int8 ? static_cast<int>(static_cast<std::int8_t>(u))
                                         : static_cast<int>(u));
  }
  return v;
}

}  // namespace

TEST_CASE("TFLite peer: convolution multipliers at requantization boundaries in uint8 and int8",
          "[tflite_peer]") {
  const runtime::RunnerOptions options = test::peer_runner_options();
  unsigned seed = 20261128;
  for (const Case& c : kCases) {
    INFO("case " << c.name);
    const Built b = build(c, seed++);
    const auto path = test::write_peer_model(fmt::format("multiplier_{}.tflite", c.name), b.model);
    auto runner = runtime::create_runner(path, options);
    const auto ours = runner->run({b.x});
    const auto peer = test::run_tflite_peer(path, {b.x}, ours);
    REQUIRE(ours.size() == 1);
    const std::vector<int> o = stored(ours[0]), p = stored(peer[0]);
    REQUIRE(o.size() == b.channels.size());
    // Every channel sits on a boundary: the peer's value is one of the two candidates, and
    // the other one differs.
    int float32_hits = 0, double_hits = 0;
    std::size_t equal = 0;
    for (std::size_t k = 0; k < o.size(); ++k) {
      const Channel& ch = b.channels[k];
      const int d = requantize(ch.acc, b.xs, ch.ws, b.ys, Product::Double, b.zy);
      const int f = requantize(ch.acc, b.xs, ch.ws, b.ys, Product::Float32, b.zy);
      INFO("channel " << k << ": accumulator " << ch.acc << ", double product " << d
                      << ", float32 product " << f << ", peer " << p[k] << ", ours " << o[k]);
      REQUIRE(d != f);
      CHECK((p[k] == d || p[k] == f));
      double_hits += p[k] == d;
      float32_hits += p[k] == f;
      equal += o[k] == p[k];
      CHECK(o[k] == p[k]);
    }
    fmt::print(
        "tflite peer: multiplier {}: {} channels on requantization boundaries; the peer took the "
        "double "
        "product on {}, the float32 one on {}; ours equal on {}\n",
        c.name, o.size(), double_hits, float32_hits, equal);
  }
}
