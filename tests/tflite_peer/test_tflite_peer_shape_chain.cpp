// Operands a model computes from the shape of a tensor, against the TFLite peer (TensorFlow
// Lite 2.14's reference kernels, tflite_peer.h). TILE multiples from SHAPE -> STRIDED_SLICE ->
// MUL (int32) -> CONCATENATION, and SHAPE -> STRIDED_SLICE (shrunk to scalars) -> PACK -> CAST
// (int64): the importer's SHAPE constant and the compiler's fold_constants pass evaluate the chain
// at compile time, every node of it is "constant" in the report and only TILE runs on the host.
// RESIZE_BILINEAR's size and TRANSPOSE_CONV's output_shape, which the importer needs as
// constants, from the same chains evaluated at import (shape_values.cpp). Outputs equal the
// peer's byte for byte. A size that depends on a graph input is refused naming the operator and
// the input.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "furiosa/compiler/compiler.h"
#include "furiosa/core/error.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"
#include "tflite_peer.h"
#include "tflite_writer.h"

using namespace furiosa;
namespace fb = furiosa::tflite_fb;
using test::TfliteWriter;

namespace {

using Dims = std::vector<std::int32_t>;

constexpr int kConcatenation = 2, kMul = 18, kResizeBilinear = 23, kStridedSlice = 45, kCast = 53,
              kTransposeConv = 67, kTile = 69, kShape = 77, kPack = 83;

/// An int32 constant tensor of `shape` holding `v`.
int ints(TfliteWriter& w, const std::string& name, const std::vector<std::int32_t>& v,
         const Dims& shape) {
  const auto bytes = test::raw_bytes(v);
  return w.tensor(name, fb::TensorType::INT32, shape, nullptr, &bytes);
}

/// y = s[begin:begin + 1] (shrink: the scalar s[begin]).
int slice1(TfliteWriter& w, int s, std::int32_t begin, bool shrink, const std::string& name) {
  const int y = w.tensor(name, fb::TensorType::INT32, shrink ? Dims{} : Dims{1});
  w.op(kStridedSlice,
       {s, ints(w, name + "/begin", {begin}, {1}), ints(w, name + "/end", {begin + 1}, {1}),
        ints(w, name + "/strides", {1}, {1})},
       {y}, fb::BuiltinOptions::StridedSliceOptions,
       fb::CreateStridedSliceOptions(w.builder(), 0, 0, 0, 0, shrink ? 1 : 0).Union());
  return y;
}

/// x [1, 3, 4, 2] float32; multiples [n, c * n, c, n] = [1, 2, 2, 1] by MUL and CONCATENATION.
std::string concat_model() {
  TfliteWriter w;
  const int x = w.tensor("x", fb::TensorType::FLOAT32, {1, 3, 4, 2});
  const int s = w.tensor("shape", fb::TensorType::INT32, {4});
  w.op(kShape, {x}, {s}, fb::BuiltinOptions::ShapeOptions,
       fb::CreateShapeOptions(w.builder(), fb::TensorType::INT32).Union());
  const int n = slice1(w, s, 0, false, "n");
  const int c = slice1(w, s, 3, false, "c");
  const int cn = w.tensor("cn", fb::TensorType::INT32, {1});
  w.op(kMul, {c, n}, {cn}, fb::BuiltinOptions::MulOptions,
       fb::CreateMulOptions(w.builder(), fb::ActivationFunctionType::NONE).Union());
  const int m = w.tensor("multiples", fb::TensorType::INT32, {4});
  w.op(kConcatenation, {n, cn, c, n}, {m}, fb::BuiltinOptions::ConcatenationOptions,
       fb::CreateConcatenationOptions(w.builder(), 0).Union());
  const int y = w.tensor("y", fb::TensorType::FLOAT32, {1, 6, 8, 2});
  w.op(kTile, {x, m}, {y});
  return w.finish({x}, {y});
}

/// x [1, 3, 4, 2] float32; multiples int64(PACK(n, c, n, c)) = [1, 2, 1, 2].
std::string pack_model() {
  TfliteWriter w;
  const int x = w.tensor("x", fb::TensorType::FLOAT32, {1, 3, 4, 2});
  const int s = w.tensor("shape", fb::TensorType::INT32, {4});
  w.op(kShape, {x}, {s}, fb::BuiltinOptions::ShapeOptions,
       fb::CreateShapeOptions(w.builder(), fb::TensorType::INT32).Union());
  const int n = slice1(w, s, 0, true, "n");
  const int c = slice1(w, s, 3, true, "c");
  const int p = w.tensor("packed", fb::TensorType::INT32, {4});
  w.op(kPack, {n, c, n, c}, {p}, fb::BuiltinOptions::PackOptions,
       fb::CreatePackOptions(w.builder(), 4, 0).Union());
  const int m = w.tensor("multiples", fb::TensorType::INT64, {4});
  w.op(kCast, {p}, {m}, fb::BuiltinOptions::CastOptions,
       fb::CreateCastOptions(w.builder(), fb::TensorType::INT32, fb::TensorType::INT64).Union());
  const int y = w.tensor("y", fb::TensorType::FLOAT32, {1, 6, 4, 4});
  w.op(kTile, {x, m}, {y});
  return w.finish({x}, {y});
}

/// x [1, 4, 5, 3] (int8 or float32) resized to size = SHAPE(x)[1:3] * scale (constant [2, 2], or
/// a graph input when `scale_input`).
std::string resize_model(bool i8, bool scale_input) {
  TfliteWriter w;
  const test::QSpec q{{0.05f}, {3}};
  const fb::TensorType type = i8 ? fb::TensorType::INT8 : fb::TensorType::FLOAT32;
  const int x = w.tensor("x", type, {1, 4, 5, 3}, i8 ? &q : nullptr);
  const int s = w.tensor("shape", fb::TensorType::INT32, {4});
  w.op(kShape, {x}, {s}, fb::BuiltinOptions::ShapeOptions,
       fb::CreateShapeOptions(w.builder(), fb::TensorType::INT32).Union());
  const int hw = w.tensor("hw", fb::TensorType::INT32, {2});
  w.op(kStridedSlice,
       {s, ints(w, "begin", {1}, {1}), ints(w, "end", {3}, {1}), ints(w, "strides", {1}, {1})},
       {hw}, fb::BuiltinOptions::StridedSliceOptions,
       fb::CreateStridedSliceOptions(w.builder()).Union());
  const int scale = scale_input ? w.tensor("scale", fb::TensorType::INT32, {2})
                                : ints(w, "scale", {2, 2}, {2});
  const int size = w.tensor("size", fb::TensorType::INT32, {2});
  w.op(kMul, {hw, scale}, {size}, fb::BuiltinOptions::MulOptions,
       fb::CreateMulOptions(w.builder(), fb::ActivationFunctionType::NONE).Union());
  const int y = w.tensor("y", type, {1, 8, 10, 3}, i8 ? &q : nullptr);
  w.op(kResizeBilinear, {x, size}, {y}, fb::BuiltinOptions::ResizeBilinearOptions,
       fb::CreateResizeBilinearOptions(w.builder(), false, true).Union());
  return w.finish(scale_input ? std::vector<std::int32_t>{x, scale} : std::vector<std::int32_t>{x},
                  {y});
}

/// x [1, 4, 5, 2] float32, TRANSPOSE_CONV stride 2 SAME with output_shape PACK(n, 2 h, 2 w, 3)
/// from shrunk STRIDED_SLICEs of SHAPE(x) and scalar MULs.
std::string transpose_conv_model() {
  TfliteWriter w;
  const int x = w.tensor("x", fb::TensorType::FLOAT32, {1, 4, 5, 2});
  const int s = w.tensor("shape", fb::TensorType::INT32, {4});
  w.op(kShape, {x}, {s}, fb::BuiltinOptions::ShapeOptions,
       fb::CreateShapeOptions(w.builder(), fb::TensorType::INT32).Union());
  const int n = slice1(w, s, 0, true, "n");
  std::vector<std::int32_t> dims = {n};
  for (std::int32_t axis : {1, 2}) {
    const int d = slice1(w, s, axis, true, fmt::format("d{}", axis));
    const int d2 = w.tensor(fmt::format("d{}x2", axis), fb::TensorType::INT32, {});
    w.op(kMul, {d, ints(w, fmt::format("two{}", axis), {2}, {})}, {d2},
         fb::BuiltinOptions::MulOptions,
         fb::CreateMulOptions(w.builder(), fb::ActivationFunctionType::NONE).Union());
    dims.push_back(d2);
  }
  dims.push_back(ints(w, "channels", {3}, {}));
  const int os = w.tensor("output_shape", fb::TensorType::INT32, {4});
  w.op(kPack, dims, {os}, fb::BuiltinOptions::PackOptions,
       fb::CreatePackOptions(w.builder(), 4, 0).Union());
  std::vector<float> wv(3 * 3 * 3 * 2);
  for (std::size_t i = 0; i < wv.size(); ++i) wv[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  const auto w_bytes = test::raw_bytes(wv);
  const int k = w.tensor("weights", fb::TensorType::FLOAT32, {3, 3, 3, 2}, nullptr, &w_bytes);
  const int y = w.tensor("y", fb::TensorType::FLOAT32, {1, 8, 10, 3});
  w.op(kTransposeConv, {os, k, x}, {y}, fb::BuiltinOptions::TransposeConvOptions,
       fb::CreateTransposeConvOptions(w.builder(), fb::Padding::SAME, 2, 2).Union());
  return w.finish({x}, {y});
}

Tensor input_of(DType d, const Shape& shape) {
  if (d != DType::Float32) return test::seeded_ints(d, shape, -128, 127, 31);
  Tensor x(DType::Float32, shape);
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  for (auto& v : x.as<float>()) v = dist(rng);
  return x;
}

}  // namespace

TEST_CASE(
    "TFLite peer: RESIZE_BILINEAR size and TRANSPOSE_CONV output_shape from SHAPE -> "
    "STRIDED_SLICE -> MUL / PACK, evaluated at import",
    "[tflite_peer]") {
  struct Case {
    std::string name, bytes;
    DType d;
    Shape in;
  };
  const std::vector<Case> cases = {
      {"shape_chain_resize_int8", resize_model(true, false), DType::Int8, {1, 4, 5, 3}},
      {"shape_chain_resize_float32", resize_model(false, false), DType::Float32, {1, 4, 5, 3}},
      {"shape_chain_transpose_conv", transpose_conv_model(), DType::Float32, {1, 4, 5, 2}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const auto path = test::write_peer_model(c.name + ".tflite", c.bytes);
    runtime::RunnerOptions o;
    o.worker_num = 1;
    o.device = "npu0pe0";
    auto runner = runtime::create_runner(path, o);
    const Tensor x = input_of(c.d, c.in);
    const auto ours = runner->run({x});
    const auto peer = test::run_tflite_peer(path, {x}, ours);
    REQUIRE(ours.size() == 1);
    REQUIRE(peer.size() == 1);
    REQUIRE(ours[0].shape() == peer[0].shape());
    fmt::print("tflite peer: {}: worst difference {}\n", c.name,
               test::worst_difference(ours[0], peer[0]));
    CHECK(test::worst_difference(ours[0], peer[0]) == 0);
    CHECK(std::memcmp(ours[0].bytes().data(), peer[0].bytes().data(), ours[0].size_bytes()) == 0);
    CHECK(test::distinct(ours[0]) > 8);
    for (const auto& line : compiler::summarize_placement(runner->compiled()).host_steps) {
      INFO(line);
      for (const char* op : {"SHAPE#", "STRIDED_SLICE#", "MUL#", "PACK#"})
        CHECK_THAT(line, !Catch::Contains(op));
    }
  }
}

TEST_CASE("TFLite: a RESIZE_BILINEAR size computed from a graph input is refused naming where",
          "[tflite_peer][errors]") {
  const auto path = test::write_peer_model("shape_chain_resize_dynamic.tflite", resize_model(true, true));
  runtime::RunnerOptions o;
  o.worker_num = 1;
  o.device = "npu0pe0";
  try {
    (void)runtime::create_runner(path, o);
    FAIL("the model was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
    CHECK_THAT(e.message(),
               Catch::Contains("operator 3 (RESIZE_BILINEAR)") &&
                   Catch::Contains("size 'size' must be a constant; it stays dynamic at operator 2 "
                                   "(MUL), whose input 'scale' is known only at run time"));
  }
}

TEST_CASE(
    "TFLite peer: TILE multiples from SHAPE -> STRIDED_SLICE -> MUL / CONCATENATION / PACK / "
    "CAST fold at compile time",
    "[tflite_peer]") {
  for (const bool packed : {false, true}) {
    const std::string name = packed ? "shape_chain_pack_cast" : "shape_chain_mul_concat";
    INFO(name);
    const auto path = test::write_peer_model(name + ".tflite", packed ? pack_model() : concat_model());
    runtime::RunnerOptions o;
    o.worker_num = 1;
    o.device = "npu0pe0";
    auto runner = runtime::create_runner(path, o);
    Tensor x(DType::Float32, {1, 3, 4, 2});
    std::mt19937 rng(21);
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
    for (auto& v : x.as<float>()) v = dist(rng);
    const auto ours = runner->run({x});
    const auto peer = test::run_tflite_peer(path, {x}, ours);
    REQUIRE(ours.size() == 1);
    REQUIRE(peer.size() == 1);
    REQUIRE(ours[0].shape() == peer[0].shape());
    fmt::print("tflite peer: {}: worst difference {}\n", name,
               test::worst_difference(ours[0], peer[0]));
    CHECK(test::worst_difference(ours[0], peer[0]) == 0);
    CHECK(std::memcmp(ours[0].bytes().data(), peer[0].bytes().data(), ours[0].size_bytes()) == 0);
    // The chain is evaluated at compile time: each of its nodes is "constant" in the report and
    // none is a host step; TILE is.
    const std::vector<std::string> chain = {"SHAPE", "STRIDED_SLICE", "MUL", "CONCATENATION",
                                            "PACK", "CAST"};
    std::size_t folded = 0;
    for (const auto& e : runner->compiled().report.entries) {
      for (const auto& op : chain) {
        if (e.node_name.starts_with(op + "#")) {
          INFO(e.node_name);
          CHECK(e.placement == std::string("constant"));
          ++folded;
        }
      }
    }
    CHECK(folded >= 3);
    bool tile_on_host = false;
    for (const auto& line : compiler::summarize_placement(runner->compiled()).host_steps) {
      INFO(line);
      for (const auto& op : chain) CHECK_THAT(line, !Catch::Contains(op + "#"));
      tile_on_host = tile_on_host || line.find("TILE#") != std::string::npos;
    }
    CHECK(tile_on_host);
  }
}
