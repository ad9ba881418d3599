// RESIZE_BILINEAR against the TFLite peer (TensorFlow Lite 2.14's reference kernels,
// tflite_peer.h) for every option pair TFLite accepts (align_corners and half_pixel_centers are
// never both set) and three size ratios, on uint8, int8 and float32. resize_bilinear.cc's Eval
// sends float32 and uint8 to the generic reference_ops::ResizeBilinear<T>, whose uint8 result is
// static_cast<uint8_t>(sum + 0.5f) (rounding_offset), and int8 to ResizeBilinearInteger: the
// host's Resize with tflite_arithmetic = 1 (host/src/ops/resize_tflite.cpp) must equal each byte
// for byte, worst difference 0.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "furiosa/runtime/runner.h"
#include "test_support.h"
#include "tflite_peer.h"
#include "tflite_writer.h"

using namespace furiosa;
namespace fb = furiosa::tflite_fb;
using test::TfliteWriter;

namespace {

constexpr int kResizeBilinear = 23;

/// x [1, ih, iw, 3] of `type` resized to a constant size [oh, ow] with the two TFLite flags.
std::string resize_model(fb::TensorType type, std::int32_t ih, std::int32_t iw, std::int32_t oh,
                         std::int32_t ow, bool align_corners, bool half_pixel_centers) {
  TfliteWriter w;
  const test::QSpec q{{0.05f}, {type == fb::TensorType::UINT8 ? 128 : 3}};
  const test::QSpec* qp = type == fb::TensorType::FLOAT32 ? nullptr : &q;
  const int x = w.tensor("x", type, {1, ih, iw, 3}, qp);
  const auto size_bytes = test::raw_bytes(std::vector<std::int32_t>{oh, ow});
  const int size = w.tensor("size", fb::TensorType::INT32, {2}, nullptr, &size_bytes);
  const int y = w.tensor("y", type, {1, oh, ow, 3}, qp);
  w.op(kResizeBilinear, {x, size}, {y}, fb::BuiltinOptions::ResizeBilinearOptions,
       fb::CreateResizeBilinearOptions(w.builder(), align_corners, half_pixel_centers).Union());
  return w.finish({x}, {y});
}

Tensor input_of(DType d, const Shape& shape) {
  if (d == DType::UInt8) return test::seeded_ints(d, shape, 0, 255, 47);
  if (d == DType::Int8) return test::seeded_ints(d, shape, -128, 127, 47);
  Tensor x(DType::Float32, shape);
  std::mt19937 rng(47);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  for (auto& v : x.as<float>()) v = dist(rng);
  return x;
}

}  // namespace

TEST_CASE(
    "TFLite peer: RESIZE_BILINEAR on uint8 / int8 / float32 for each align_corners and "
    "half_pixel_centers pair and size ratio",
    "[tflite_peer]") {
  struct Type {
    const char* tag;
    fb::TensorType type;
    DType d;
  };
  struct Sizes {
    std::int32_t ih, iw, oh, ow;
  };
  struct Flags {
    bool align_corners, half_pixel_centers;
  };
  const std::vector<Type> types = {{"uint8", fb::TensorType::UINT8, DType::UInt8},
                                   {"int8", fb::TensorType::INT8, DType::Int8},
                                   {"float32", fb::TensorType::FLOAT32, DType::Float32}};
  // 2x up, an uneven up (7x3 -> 10x5), and a down (8x10 -> 3x4).
  const std::vector<Sizes> sizes = {{4, 5, 8, 10}, {7, 3, 10, 5}, {8, 10, 3, 4}};
  const std::vector<Flags> flags = {{false, false}, {true, false}, {false, true}};
  for (const Type& t : types)
    for (const Sizes& s : sizes)
      for (const Flags& f : flags) {
        const std::string name =
            fmt::format("resize_bilinear_{}_{}x{}_to_{}x{}_ac{}_hpc{}", t.tag, s.ih, s.iw, s.oh,
                        s.ow, int{f.align_corners}, int{f.half_pixel_centers});
        INFO(name);
        const auto path = test::write_peer_model(
            name + ".tflite",
            resize_model(t.type, s.ih, s.iw, s.oh, s.ow, f.align_corners, f.half_pixel_centers));
        runtime::RunnerOptions o;
        o.worker_num = 1;
        o.device = "npu0pe0";
        auto runner = runtime::create_runner(path, o);
        const Tensor x = input_of(t.d, {1, s.ih, s.iw, 3});
        const auto ours = runner->run({x});
        const auto peer = test::run_tflite_peer(path, {x}, ours);
        REQUIRE(ours.size() == 1);
        REQUIRE(peer.size() == 1);
        REQUIRE(ours[0].shape() == peer[0].shape());
        const double worst = test::worst_difference(ours[0], peer[0]);
        fmt::print("tflite peer: {}: worst difference {}\n", name, worst);
        CHECK(worst == 0);
        CHECK(std::memcmp(ours[0].bytes().data(), peer[0].bytes().data(), ours[0].size_bytes()) == 0);
        CHECK(test::distinct(ours[0]) > 8);
      }
}
