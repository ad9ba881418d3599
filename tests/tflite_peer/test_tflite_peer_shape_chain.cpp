// TILE whose multiples a model computes from the shape of a tensor, against the TFLite peer
// (TensorFlow Lite 2.14's reference kernels, tflite_peer.h): SHAPE -> STRIDED_SLICE ->
// MUL (int32) -> CONCATENATION, and SHAPE -> STRIDED_SLICE (shrunk to scalars) -> PACK -> CAST
// (int64). All shapes are static, so the importer's SHAPE constant and the compiler's
// fold_constants pass evaluate the chain at compile time: the outputs equal the peer's byte for
// byte, every node of the chain is "constant" in the report and only TILE runs on the host.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"
#include "tflite_peer.h"
#include "tflite_writer.h"

using namespace furiosa;
namespace fb = furiosa::tflite_fb;
using test::TfliteWriter;

namespace {

using Dims = std::vector<std::int32_t>;

constexpr int kConcatenation = 2, kMul = 18, kStridedSlice = 45, kCast = 53, kTile = 69,
              kShape = 77, kPack = 83;

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

}  // namespace

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
