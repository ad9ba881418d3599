// TFLite operators against the TFLite peer (TensorFlow Lite 2.14's reference kernels,
// tflite_peer.h): small models written with tflite_writer.h, uint8 and int8, seeded random inputs,
// outputs compared bit-exactly (worst difference printed and required to be 0), and the
// NPU/host placement of each operator checked in the compiled model's report.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "furiosa/runtime/runner.h"
#include "test_support.h"
#include "tflite_peer.h"
#include "tflite_writer.h"

using namespace furiosa;
namespace fb = furiosa::tflite_fb;
using test::QSpec;
using test::TfliteWriter;

namespace {

fb::TensorType tflite_type(DType d) {
  return d == DType::UInt8 ? fb::TensorType::UINT8 : fb::TensorType::INT8;
}
const char* type_tag(DType d) { return d == DType::UInt8 ? "uint8" : "int8"; }
int type_min(DType d) { return d == DType::UInt8 ? 0 : -128; }
int type_max(DType d) { return d == DType::UInt8 ? 255 : 127; }

/// One model run by the runtime and by the peer on the same inputs.
struct PeerRun {
  std::unique_ptr<runtime::Runner> runner;
  std::vector<Tensor> ours, peer;
  double worst = 0;  ///< largest difference over all outputs
};

PeerRun run_both(const std::string& name, const std::string& bytes,
                 const std::vector<Tensor>& inputs) {
  const auto path = test::write_peer_model(name + ".tflite", bytes);
  PeerRun r;
  r.runner = runtime::create_runner(path, test::peer_runner_options());
  r.ours = r.runner->run(inputs);
  r.peer = test::run_tflite_peer(path, inputs, r.ours);
  for (std::size_t i = 0; i < r.ours.size(); ++i)
    r.worst = std::max(r.worst, test::worst_difference(r.ours[i], r.peer[i]));
  fmt::print("tflite peer: {}: worst difference {} step(s)\n", name, r.worst);
  return r;
}

/// Every entry of `op` in the report has placement `where` (and there is at least one).
void check_placement(const runtime::Runner& runner, const std::string& op,
                     const std::string& where) {
  const auto p = test::placements(runner, op);
  INFO(op << " placements: " << fmt::format("{}", fmt::join(p, ", ")));
  REQUIRE(!p.empty());
  for (const auto& e : p) CHECK(e == where);
}

}  // namespace

TEST_CASE("TFLite peer: ADD and LOGISTIC are bit-identical to TFLite's reference kernels",
          "[tflite_peer]") {
  for (DType d : {DType::UInt8, DType::Int8}) {
    INFO(type_tag(d));
    const int zp = d == DType::UInt8 ? 128 : 0;
    TfliteWriter w;
    const QSpec qa{{0.05f}, {zp}}, qb{{0.03f}, {zp - 10}}, qs{{0.07f}, {zp + 3}};
    const QSpec ql{{1.0f / 256}, {d == DType::UInt8 ? 0 : -128}};
    const int a = w.tensor("a", tflite_type(d), {1, 4, 5, 3}, &qa);
    const int b = w.tensor("b", tflite_type(d), {1, 4, 5, 3}, &qb);
    const int s = w.tensor("s", tflite_type(d), {1, 4, 5, 3}, &qs);
    const int y = w.tensor("y", tflite_type(d), {1, 4, 5, 3}, &ql);
    w.op(0, {a, b}, {s});
    w.op(14, {s}, {y});
    const auto r = run_both(fmt::format("add_logistic_{}", type_tag(d)), w.finish({a, b}, {s, y}),
                            {test::seeded_ints(d, {1, 4, 5, 3}, type_min(d), type_max(d), 1),
                             test::seeded_ints(d, {1, 4, 5, 3}, type_min(d), type_max(d), 2)});
    CHECK(r.worst == 0);
    check_placement(*r.runner, "furiosa::Requantize", "npu");
  }
}

namespace {

using Dims = std::vector<std::int32_t>;

Shape to_shape(const Dims& d) { return Shape(d.begin(), d.end()); }

/// Options of an operator: its union type and a function writing the table.
struct Options {
  fb::BuiltinOptions type = fb::BuiltinOptions::NONE;
  std::function<flatbuffers::Offset<void>(flatbuffers::FlatBufferBuilder&)> write;
};

/// A model of one two-operand operator `code`: y = op(a, b); b is a graph input, or a constant
/// holding `b_const` when given.
std::string binary_model(int code, DType d, const Dims& as, const Dims& bs, const Dims& ys,
                         const QSpec& qa, const QSpec& qb, const QSpec& qy, const Options& opts,
                         const std::vector<std::uint8_t>* b_const = nullptr) {
  TfliteWriter w;
  const int a = w.tensor("a", tflite_type(d), as, &qa);
  const int b = w.tensor("b", tflite_type(d), bs, &qb, b_const);
  const int y = w.tensor("y", tflite_type(d), ys, &qy);
  w.op(code, {a, b}, {y}, opts.type, opts.write ? opts.write(w.builder()) : 0);
  return b_const ? w.finish({a}, {y}) : w.finish({a, b}, {y});
}

/// Seeded random inputs over the whole range of `d` for each shape.
std::vector<Tensor> random_inputs(DType d, const std::vector<Dims>& shapes, unsigned seed) {
  std::vector<Tensor> out;
  for (const auto& s : shapes)
    out.push_back(test::seeded_ints(d, to_shape(s), type_min(d), type_max(d), seed++));
  return out;
}

/// The bytes of a seeded random 8-bit constant of `n` elements.
std::vector<std::uint8_t> random_bytes(std::size_t n, unsigned seed) {
  const Tensor t = test::seeded_ints(DType::UInt8, {static_cast<std::int64_t>(n)}, 0, 255, seed);
  return {t.as<std::uint8_t>().begin(), t.as<std::uint8_t>().end()};
}

Options sub_options(fb::ActivationFunctionType act) {
  return {fb::BuiltinOptions::SubOptions, [act](flatbuffers::FlatBufferBuilder& b) {
            return fb::CreateSubOptions(b, act).Union();
          }};
}
Options mul_options(fb::ActivationFunctionType act) {
  return {fb::BuiltinOptions::MulOptions, [act](flatbuffers::FlatBufferBuilder& b) {
            return fb::CreateMulOptions(b, act).Union();
          }};
}

constexpr int kMul = 18, kTranspose = 39, kSub = 41, kPrelu = 54, kMaximum = 55, kMinimum = 57,
              kLeakyRelu = 98;

}  // namespace

TEST_CASE(
    "TFLite peer: SUB and MUL, uint8 and int8, with broadcasting and fused activations, on the "
    "host",
    "[tflite_peer]") {
  using Act = fb::ActivationFunctionType;
  struct Case {
    const char* name;
    int code;
    Dims as, bs;
    Act act;
    bool constant_b;
  };
  const std::vector<Case> cases = {
      {"sub", kSub, {1, 6, 7, 5}, {1, 6, 7, 5}, Act::NONE, false},
      {"sub_broadcast_relu", kSub, {1, 6, 7, 5}, {1, 1, 1, 5}, Act::RELU, false},
      {"sub_rank3_relu6", kSub, {2, 3, 8}, {3, 1}, Act::RELU6, false},
      {"mul", kMul, {1, 6, 7, 5}, {1, 6, 7, 5}, Act::NONE, false},
      {"mul_broadcast_relu6", kMul, {1, 6, 7, 5}, {5}, Act::RELU6, false},
      {"mul_constant", kMul, {1, 4, 4, 8}, {1, 1, 1, 8}, Act::NONE, true},
  };
  for (DType d : {DType::UInt8, DType::Int8}) {
    for (const Case& c : cases) {
      const std::string name = fmt::format("{}_{}", c.name, type_tag(d));
      INFO(name);
      const int zp = d == DType::UInt8 ? 128 : 0;
      const QSpec qa{{0.0731f}, {zp + 7}}, qb{{0.0419f}, {zp - 21}},
          qy{{c.code == kMul ? 0.0913f : 0.0577f}, {zp - 3}};
      const auto ys = to_shape(c.as);
      const auto b_bytes =
          random_bytes(static_cast<std::size_t>(element_count(to_shape(c.bs))), 99);
      const std::string bytes =
          binary_model(c.code, d, c.as, c.bs, c.as, qa, qb, qy,
                       c.code == kSub ? sub_options(c.act) : mul_options(c.act),
                       c.constant_b ? &b_bytes : nullptr);
      const auto inputs =
          c.constant_b ? random_inputs(d, {c.as}, 11) : random_inputs(d, {c.as, c.bs}, 11);
      const auto r = run_both(name, bytes, inputs);
      CHECK(r.worst == 0);
      CHECK(test::distinct(r.ours[0]) > 10);
      check_placement(*r.runner, "furiosa::TFLiteBinary", "fallback");
    }
  }
}

TEST_CASE("TFLite peer: PRELU with a per-channel constant alpha, uint8 and int8, on the host",
          "[tflite_peer]") {
  for (DType d : {DType::UInt8, DType::Int8}) {
    const std::string name = fmt::format("prelu_{}", type_tag(d));
    INFO(name);
    const int zp = d == DType::UInt8 ? 128 : 0;
    const QSpec qx{{0.0625f}, {zp + 5}}, qalpha{{0.0039f}, {zp - 40}}, qy{{0.047f}, {zp - 30}};
    const auto alpha = random_bytes(6, 5);
    const std::string bytes =
        binary_model(kPrelu, d, {1, 5, 4, 6}, {1, 1, 6}, {1, 5, 4, 6}, qx, qalpha, qy, {}, &alpha);
    const auto r = run_both(name, bytes, random_inputs(d, {{1, 5, 4, 6}}, 21));
    CHECK(r.worst == 0);
    CHECK(test::distinct(r.ours[0]) > 10);
    check_placement(*r.runner, "furiosa::TFLiteBinary", "fallback");
  }
}

TEST_CASE("TFLite peer: MINIMUM and MAXIMUM with broadcasting, uint8 and int8, on the host",
          "[tflite_peer]") {
  for (DType d : {DType::UInt8, DType::Int8}) {
    for (int code : {kMinimum, kMaximum}) {
      const std::string name =
          fmt::format("{}_{}", code == kMinimum ? "minimum" : "maximum", type_tag(d));
      INFO(name);
      const QSpec q{{0.05f}, {d == DType::UInt8 ? 100 : -10}};
      const Options mm{fb::BuiltinOptions::MaximumMinimumOptions,
                       [](flatbuffers::FlatBufferBuilder& b) {
                         return fb::CreateMaximumMinimumOptions(b).Union();
                       }};
      const std::string bytes =
          binary_model(code, d, {1, 4, 6, 3}, {1, 1, 6, 1}, {1, 4, 6, 3}, q, q, q, mm);
      const auto r = run_both(name, bytes, random_inputs(d, {{1, 4, 6, 3}, {1, 1, 6, 1}}, 31));
      CHECK(r.worst == 0);
      check_placement(*r.runner, code == kMinimum ? "Min" : "Max", "fallback");
    }
  }
}

TEST_CASE("TFLite peer: LEAKY_RELU as a 256-entry table on the NPU, uint8 and int8",
          "[tflite_peer]") {
  for (DType d : {DType::UInt8, DType::Int8}) {
    for (float alpha : {0.1f, 0.2f, 1.7f}) {
      const std::string name = fmt::format("leaky_relu_{}_{}", alpha, type_tag(d));
      INFO(name);
      const int zp = d == DType::UInt8 ? 128 : 0;
      TfliteWriter w;
      const QSpec qx{{0.0625f}, {zp + 9}}, qy{{0.0411f}, {zp - 50}};
      const int x = w.tensor("x", tflite_type(d), {1, 16, 16, 1}, &qx);
      const int y = w.tensor("y", tflite_type(d), {1, 16, 16, 1}, &qy);
      w.op(kLeakyRelu, {x}, {y}, fb::BuiltinOptions::LeakyReluOptions,
           fb::CreateLeakyReluOptions(w.builder(), alpha).Union());
      Tensor in(d, {1, 16, 16, 1});
      for (std::size_t i = 0; i < 256; ++i)
        std::memcpy(in.bytes().data() + i, &i, 1);  // every byte once
      const auto r = run_both(name, w.finish({x}, {y}), {in});
      CHECK(r.worst == 0);
      check_placement(*r.runner, "furiosa::Requantize", "npu");
    }
  }
}

TEST_CASE("TFLite peer: TRANSPOSE of 8-bit tensors on the NPU, uint8 and int8", "[tflite_peer]") {
  struct Case {
    Dims in, perm;
  };
  const std::vector<Case> cases = {{{1, 4, 6, 3}, {0, 3, 1, 2}},
                                   {{1, 4, 6, 3}, {0, 2, 1, 3}},
                                   {{5, 7}, {1, 0}},
                                   {{2, 3, 4}, {2, 0, 1}}};
  for (DType d : {DType::UInt8, DType::Int8}) {
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      const std::string name = fmt::format("transpose{}_{}", k, type_tag(d));
      INFO(name);
      const QSpec q{{0.05f}, {d == DType::UInt8 ? 128 : 0}};
      Dims out;
      for (auto p : c.perm) out.push_back(c.in[static_cast<std::size_t>(p)]);
      TfliteWriter w;
      const auto perm_bytes = test::raw_bytes(c.perm);
      const int x = w.tensor("x", tflite_type(d), c.in, &q);
      const int p = w.tensor("perm", fb::TensorType::INT32,
                             {static_cast<std::int32_t>(c.perm.size())}, nullptr, &perm_bytes);
      const int y = w.tensor("y", tflite_type(d), out, &q);
      w.op(kTranspose, {x, p}, {y});
      const auto r = run_both(name, w.finish({x}, {y}), random_inputs(d, {c.in}, 41));
      CHECK(r.worst == 0);
      check_placement(*r.runner, "Transpose", "npu");
    }
  }
}

TEST_CASE("TFLite peer: HARD_SWISH as a 256-entry table on the NPU, uint8 and int8",
          "[tflite_peer]") {
  constexpr int kHardSwish = 117;
  struct Scales {
    float in, out;
  };
  for (DType d : {DType::UInt8, DType::Int8}) {
    for (const Scales s : {Scales{0.0625f, 0.05f}, Scales{0.03f, 0.021f}, Scales{0.2f, 0.1f}}) {
      const std::string name = fmt::format("hard_swish_{}_{}_{}", s.in, s.out, type_tag(d));
      INFO(name);
      const int zp = d == DType::UInt8 ? 128 : 0;
      TfliteWriter w;
      const QSpec qx{{s.in}, {zp + 3}}, qy{{s.out}, {zp - 60}};
      const int x = w.tensor("x", tflite_type(d), {1, 16, 16, 1}, &qx);
      const int y = w.tensor("y", tflite_type(d), {1, 16, 16, 1}, &qy);
      w.op(kHardSwish, {x}, {y});
      Tensor in(d, {1, 16, 16, 1});
      for (std::size_t i = 0; i < 256; ++i)
        std::memcpy(in.bytes().data() + i, &i, 1);  // every byte once
      const auto r = run_both(name, w.finish({x}, {y}), {in});
      CHECK(r.worst == 0);
      CHECK(test::distinct(r.ours[0]) > 50);
      check_placement(*r.runner, "furiosa::Requantize", "npu");
    }
  }
}

TEST_CASE("TFLite peer: EXP as a 256-entry table on the NPU, int8 (TFLite's EXP takes no uint8)",
          "[tflite_peer]") {
  constexpr int kExp = 47;
  for (DType d : {DType::Int8}) {
    const std::string name = fmt::format("exp_{}", type_tag(d));
    INFO(name);
    const int zp = d == DType::UInt8 ? 128 : 0;
    TfliteWriter w;
    const QSpec qx{{0.02f}, {zp + 20}}, qy{{0.05f}, {d == DType::UInt8 ? 0 : -128}};
    const int x = w.tensor("x", tflite_type(d), {1, 16, 16, 1}, &qx);
    const int y = w.tensor("y", tflite_type(d), {1, 16, 16, 1}, &qy);
    w.op(kExp, {x}, {y});
    Tensor in(d, {1, 16, 16, 1});
    for (std::size_t i = 0; i < 256; ++i)
      std::memcpy(in.bytes().data() + i, &i, 1);  // every byte once
    const auto r = run_both(name, w.finish({x}, {y}), {in});
    CHECK(r.worst == 0);
    CHECK(test::distinct(r.ours[0]) > 50);
    check_placement(*r.runner, "furiosa::Requantize", "npu");
  }
}

TEST_CASE("TFLite peer: GATHER_ND with constant indices, uint8 and int8", "[tflite_peer]") {
  constexpr int kGatherNd = 107;
  struct Case {
    Dims x, idx_shape;
    std::vector<std::int32_t> idx;
  };
  const std::vector<Case> cases = {
      {{1, 5, 6, 3}, {4, 3}, {0, 1, 2, 0, 4, 5, 0, 0, 0, 0, 2, 2}},  // pick pixels -> [4, 3]
      {{6, 4, 2}, {2, 2, 1}, {5, 0, 3, 3}},                          // pick rows -> [2, 2, 4, 2]
  };
  for (DType d : {DType::UInt8, DType::Int8}) {
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      const std::string name = fmt::format("gather_nd{}_{}", k, type_tag(d));
      INFO(name);
      Dims out(c.idx_shape.begin(), c.idx_shape.end() - 1);
      out.insert(out.end(), c.x.begin() + c.idx_shape.back(), c.x.end());
      const QSpec q{{0.05f}, {d == DType::UInt8 ? 128 : 0}};
      TfliteWriter w;
      const auto idx_bytes = test::raw_bytes(c.idx);
      const int x = w.tensor("x", tflite_type(d), c.x, &q);
      const int i = w.tensor("indices", fb::TensorType::INT32, c.idx_shape, nullptr, &idx_bytes);
      const int y = w.tensor("y", tflite_type(d), out, &q);
      w.op(kGatherNd, {x, i}, {y});
      const auto r = run_both(name, w.finish({x}, {y}), random_inputs(d, {c.x}, 51));
      CHECK(r.worst == 0);
      check_placement(*r.runner, "Gather", "fallback");
    }
  }
}

TEST_CASE("TFLite peer: SPLIT and SPLIT_V on the NPU, uint8 and int8", "[tflite_peer]") {
  constexpr int kSplit = 49, kSplitV = 102;
  for (DType d : {DType::UInt8, DType::Int8}) {
    const QSpec q{{0.05f}, {d == DType::UInt8 ? 128 : 0}};
    {
      TfliteWriter w;
      const std::vector<std::int32_t> axis{3};
      const auto axis_bytes = test::raw_bytes(axis);
      const int a = w.tensor("axis", fb::TensorType::INT32, {}, nullptr, &axis_bytes);
      const int x = w.tensor("x", tflite_type(d), {1, 4, 5, 6}, &q);
      const int y0 = w.tensor("y0", tflite_type(d), {1, 4, 5, 2}, &q);
      const int y1 = w.tensor("y1", tflite_type(d), {1, 4, 5, 2}, &q);
      const int y2 = w.tensor("y2", tflite_type(d), {1, 4, 5, 2}, &q);
      w.op(kSplit, {a, x}, {y0, y1, y2}, fb::BuiltinOptions::SplitOptions,
           fb::CreateSplitOptions(w.builder(), 3).Union());
      const auto r = run_both(fmt::format("split_{}", type_tag(d)), w.finish({x}, {y0, y1, y2}),
                              random_inputs(d, {{1, 4, 5, 6}}, 61));
      CHECK(r.worst == 0);
      check_placement(*r.runner, "Split", "npu");
    }
    {
      TfliteWriter w;
      const std::vector<std::int32_t> axis{-3}, sizes{1, -1, 2};
      const auto axis_bytes = test::raw_bytes(axis), size_bytes = test::raw_bytes(sizes);
      const int x = w.tensor("x", tflite_type(d), {1, 7, 5, 3}, &q);
      const int s = w.tensor("sizes", fb::TensorType::INT32, {3}, nullptr, &size_bytes);
      const int a = w.tensor("axis", fb::TensorType::INT32, {1}, nullptr, &axis_bytes);
      const int y0 = w.tensor("y0", tflite_type(d), {1, 1, 5, 3}, &q);
      const int y1 = w.tensor("y1", tflite_type(d), {1, 4, 5, 3}, &q);
      const int y2 = w.tensor("y2", tflite_type(d), {1, 2, 5, 3}, &q);
      w.op(kSplitV, {x, s, a}, {y0, y1, y2}, fb::BuiltinOptions::SplitVOptions,
           fb::CreateSplitVOptions(w.builder(), 3).Union());
      const auto r = run_both(fmt::format("split_v_{}", type_tag(d)), w.finish({x}, {y0, y1, y2}),
                              random_inputs(d, {{1, 7, 5, 3}}, 62));
      CHECK(r.worst == 0);
      check_placement(*r.runner, "Split", "npu");
    }
  }
}

TEST_CASE("TFLite peer: DEPTH_TO_SPACE and SPACE_TO_DEPTH on the NPU, uint8 and int8",
          "[tflite_peer]") {
  constexpr int kDepthToSpace = 5, kSpaceToDepth = 26;
  for (DType d : {DType::UInt8, DType::Int8}) {
    const QSpec q{{0.05f}, {d == DType::UInt8 ? 128 : 0}};
    for (bool to_space : {true, false}) {
      const std::string name =
          fmt::format("{}_{}", to_space ? "depth_to_space" : "space_to_depth", type_tag(d));
      INFO(name);
      const Dims xs = to_space ? Dims{1, 3, 4, 12} : Dims{1, 6, 8, 3};
      const Dims ys = to_space ? Dims{1, 6, 8, 3} : Dims{1, 3, 4, 12};
      TfliteWriter w;
      const int x = w.tensor("x", tflite_type(d), xs, &q);
      const int y = w.tensor("y", tflite_type(d), ys, &q);
      if (to_space) {
        w.op(kDepthToSpace, {x}, {y}, fb::BuiltinOptions::DepthToSpaceOptions,
             fb::CreateDepthToSpaceOptions(w.builder(), 2).Union());
      } else {
        w.op(kSpaceToDepth, {x}, {y}, fb::BuiltinOptions::SpaceToDepthOptions,
             fb::CreateSpaceToDepthOptions(w.builder(), 2).Union());
      }
      const auto r = run_both(name, w.finish({x}, {y}), random_inputs(d, {xs}, 71));
      CHECK(r.worst == 0);
      check_placement(*r.runner, "Transpose", "npu");
    }
  }
}

TEST_CASE(
    "TFLite peer: SQUARED_DIFFERENCE, int8 (TFLite's quantized kernel takes int8 only), on the "
    "host",
    "[tflite_peer]") {
  constexpr int kSquaredDifference = 99;
  for (const bool broadcast : {false, true}) {
    const std::string name =
        fmt::format("squared_difference{}_int8", broadcast ? "_broadcast" : "");
    INFO(name);
    const QSpec qa{{0.02f}, {7}}, qb{{0.03f}, {-11}}, qy{{0.04f}, {-128}};
    const Dims bs = broadcast ? Dims{1, 1, 1, 5} : Dims{1, 6, 7, 5};
    const std::string bytes = binary_model(kSquaredDifference, DType::Int8, {1, 6, 7, 5}, bs,
                                           {1, 6, 7, 5}, qa, qb, qy, {});
    const auto r = run_both(name, bytes, random_inputs(DType::Int8, {{1, 6, 7, 5}, bs}, 81));
    CHECK(r.worst == 0);
    CHECK(test::distinct(r.ours[0]) > 20);
    check_placement(*r.runner, "furiosa::TFLiteBinary", "fallback");
  }
}

TEST_CASE("TFLite peer: GATHER and CAST (imported before the peer existed), uint8 and int8",
          "[tflite_peer]") {
  constexpr int kGather = 36, kCast = 53;
  for (DType d : {DType::UInt8, DType::Int8}) {
    const QSpec q{{0.05f}, {d == DType::UInt8 ? 128 : 0}};
    {
      TfliteWriter w;
      const std::vector<std::int32_t> idx{4, 0, 2, 2, 1};
      const auto idx_bytes = test::raw_bytes(idx);
      const int x = w.tensor("x", tflite_type(d), {1, 5, 6, 3}, &q);
      const int i = w.tensor("indices", fb::TensorType::INT32, {5}, nullptr, &idx_bytes);
      const int y = w.tensor("y", tflite_type(d), {1, 5, 5, 3}, &q);
      w.op(kGather, {x, i}, {y}, fb::BuiltinOptions::GatherOptions,
           fb::CreateGatherOptions(w.builder(), 2).Union());
      const auto r = run_both(fmt::format("gather_{}", type_tag(d)), w.finish({x}, {y}),
                              random_inputs(d, {{1, 5, 6, 3}}, 91));
      CHECK(r.worst == 0);
    }
    {
      TfliteWriter w;
      const int x = w.tensor("x", tflite_type(d), {2, 40}, &q);
      const int y = w.tensor("y", fb::TensorType::INT32, {2, 40});
      const int f = w.tensor("f", fb::TensorType::FLOAT32, {2, 40});
      w.op(kCast, {x}, {y});
      w.op(kCast, {x}, {f});
      const auto r = run_both(fmt::format("cast_{}", type_tag(d)), w.finish({x}, {y, f}),
                              random_inputs(d, {{2, 40}}, 92));
      CHECK(r.worst == 0);
    }
  }
}

TEST_CASE("TFLite peer: refusals of the new operators are one line naming the operator",
          "[tflite_peer][errors]") {
  auto refused = [](const std::string& bytes, const std::string& name) -> std::string {
    try {
      (void)runtime::create_runner(test::write_peer_model(name, bytes),
                                   test::peer_runner_options());
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
      return e.message();
    }
    FAIL(name << " was accepted");
    return {};
  };
  const QSpec q{{0.05f}, {128}};
  {  // GATHER_ND with computed indices
    TfliteWriter w;
    const int x = w.tensor("x", fb::TensorType::UINT8, {4, 3}, &q);
    const int i = w.tensor("indices", fb::TensorType::INT32, {2, 1});
    const int y = w.tensor("y", fb::TensorType::UINT8, {2, 3}, &q);
    w.op(107, {x, i}, {y});
    const std::string msg = refused(w.finish({x, i}, {y}), "gather_nd_dynamic.tflite");
    CHECK_THAT(msg, Catch::Contains("operator 0 (GATHER_ND)") &&
                        Catch::Contains("indices 'indices' must be constant"));
  }
  {  // uint8 EXP (TFLite's EXP takes no uint8)
    TfliteWriter w;
    const int x = w.tensor("x", fb::TensorType::UINT8, {1, 8}, &q);
    const int y = w.tensor("y", fb::TensorType::UINT8, {1, 8}, &q);
    w.op(47, {x}, {y});
    const std::string msg = refused(w.finish({x}, {y}), "exp_uint8_refused.tflite");
    CHECK_THAT(msg, Catch::Contains("operator 0 (EXP)") && Catch::Contains("uint8"));
  }
}

TEST_CASE(
    "TFLite peer: RSQRT as a 256-entry table on the NPU, int8 (TFLite's RSQRT takes no uint8)",
    "[tflite_peer]") {
  constexpr int kRsqrt = 76;
  struct Params {
    float in_scale;
    int in_zp;
    float out_scale;
    int out_zp;
  };
  for (const Params p : {Params{0.05f, -128, 0.02f, -128}, Params{0.0123f, -100, 0.07f, -20},
                         Params{1.5f, -128, 0.004f, -128}}) {
    const std::string name = fmt::format("rsqrt_{}_{}_{}_int8", p.in_scale, p.in_zp, p.out_scale);
    INFO(name);
    TfliteWriter w;
    const QSpec qx{{p.in_scale}, {p.in_zp}}, qy{{p.out_scale}, {p.out_zp}};
    const std::int64_t n =
        127 - p.in_zp + 1;  // every input at or above the zero point (TFLite fails below it)
    const int x = w.tensor("x", fb::TensorType::INT8, {1, static_cast<std::int32_t>(n)}, &qx);
    const int y = w.tensor("y", fb::TensorType::INT8, {1, static_cast<std::int32_t>(n)}, &qy);
    w.op(kRsqrt, {x}, {y});
    Tensor in(DType::Int8, {1, n});
    for (std::int64_t i = 0; i < n; ++i)
      in.as<std::int8_t>()[static_cast<std::size_t>(i)] = static_cast<std::int8_t>(p.in_zp + i);
    const auto r = run_both(name, w.finish({x}, {y}), {in});
    CHECK(r.worst == 0);
    CHECK(test::distinct(r.ours[0]) > 10);
    check_placement(*r.runner, "furiosa::Requantize", "npu");
  }
}

TEST_CASE(
    "TFLite peer: DIV, uint8 (TFLite's quantized DIV takes uint8 only), with broadcasting, on the "
    "host",
    "[tflite_peer]") {
  constexpr int kDiv = 42;
  for (DType d : {DType::UInt8}) {
    for (const bool broadcast : {false, true}) {
      const std::string name = fmt::format("div{}_{}", broadcast ? "_broadcast" : "", type_tag(d));
      INFO(name);
      const int zp = d == DType::UInt8 ? 128 : 0;
      const QSpec qa{{0.05f}, {zp + 3}}, qb{{0.02f}, {zp - 100}}, qy{{0.08f}, {zp - 7}};
      const Dims bs = broadcast ? Dims{1, 1, 1, 5} : Dims{1, 6, 7, 5};
      const Options opts{fb::BuiltinOptions::DivOptions, [](flatbuffers::FlatBufferBuilder& b) {
                           return fb::CreateDivOptions(b).Union();
                         }};
      const std::string bytes =
          binary_model(kDiv, d, {1, 6, 7, 5}, bs, {1, 6, 7, 5}, qa, qb, qy, opts);
      auto inputs = random_inputs(d, {{1, 6, 7, 5}}, 101);
      // b on both sides of its zero point, never at it (a division by zero, undefined in TFLite)
      Tensor b = test::seeded_ints(d, to_shape(bs), type_min(d), type_max(d), 102);
      for (auto& v : b.as<std::uint8_t>())
        v = v == zp - 100 ? static_cast<std::uint8_t>(zp - 99) : v;
      inputs.push_back(std::move(b));
      const auto r = run_both(name, bytes, inputs);
      CHECK(r.worst == 0);
      CHECK(test::distinct(r.ours[0]) > 20);
      check_placement(*r.runner, "furiosa::TFLiteBinary", "fallback");
    }
  }
}
