// The float32 forms of TFLite's binary and unary arithmetic against the TFLite peer (TensorFlow
// Lite 2.14's reference kernels, tflite_peer.h): ADD, SUB, MUL, DIV with broadcasting and fused
// activations, SQUARED_DIFFERENCE, PRELU, LEAKY_RELU, HARD_SWISH and SQRT on the host as
// furiosa::TFLiteFloat / Sqrt; MINIMUM, MAXIMUM, EXP and RSQRT, which were imported before. The
// inputs hold the values where float results differ in their sign bit (+0, -0, -3 for HARD_SWISH)
// and the outputs are compared byte for byte.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
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

using Dims = std::vector<std::int32_t>;
using Act = fb::ActivationFunctionType;
using MakeOptions = std::function<flatbuffers::Offset<void>(flatbuffers::FlatBufferBuilder&)>;

constexpr int kAdd = 0, kMul = 18, kSub = 41, kDiv = 42, kExp = 47, kPrelu = 54, kMaximum = 55,
              kMinimum = 57, kSqrt = 75, kRsqrt = 76, kLeakyRelu = 98, kSquaredDifference = 99,
              kHardSwish = 117;

/// Seeded floats uniform in [lo, hi], the first elements replaced by `specials`.
Tensor float_input(const Dims& dims, float lo, float hi, unsigned seed,
                   const std::vector<float>& specials) {
  Tensor t(DType::Float32, Shape(dims.begin(), dims.end()));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  auto v = t.as<float>();
  for (auto& e : v) e = dist(rng);
  for (std::size_t i = 0; i < specials.size() && i < v.size(); ++i) v[i] = specials[i];
  return t;
}

std::vector<std::uint8_t> tensor_bytes(const Tensor& t) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(t.bytes().data());
  return {p, p + t.size_bytes()};
}

/// y = op(a[, b]) on float32 tensors; b a constant when `b_data` is given; `options` of `type`.
std::string float_model(int code, const Dims& as, const Dims* bs, const Dims& ys,
                        fb::BuiltinOptions type = fb::BuiltinOptions::NONE,
                        const MakeOptions& options = {}, const Tensor* b_data = nullptr) {
  TfliteWriter w;
  const int a = w.tensor("a", fb::TensorType::FLOAT32, as);
  std::vector<std::int32_t> in = {a}, graph_in = {a};
  std::vector<std::uint8_t> b_bytes;
  if (bs) {
    if (b_data) b_bytes = tensor_bytes(*b_data);
    const int b = w.tensor("b", fb::TensorType::FLOAT32, *bs, nullptr, b_data ? &b_bytes : nullptr);
    in.push_back(b);
    if (!b_data) graph_in.push_back(b);
  }
  const int y = w.tensor("y", fb::TensorType::FLOAT32, ys);
  w.op(code, in, {y}, type, options ? options(w.builder()) : flatbuffers::Offset<void>());
  return w.finish(graph_in, {y});
}

struct FloatRun {
  std::unique_ptr<runtime::Runner> runner;
  Tensor ours, peer;
};

FloatRun run_float(const std::string& name, const std::string& bytes,
                   const std::vector<Tensor>& inputs) {
  const auto path = test::write_peer_model(name + ".tflite", bytes);
  FloatRun r;
  r.runner = runtime::create_runner(path, test::peer_runner_options());
  auto ours = r.runner->run(inputs);
  auto peer = test::run_tflite_peer(path, inputs, ours);
  REQUIRE(ours.size() == 1);
  REQUIRE(peer.size() == 1);
  r.ours = std::move(ours[0]);
  r.peer = std::move(peer[0]);
  fmt::print("tflite peer: float32 {}: worst difference {}\n", name,
             test::worst_difference(r.ours, r.peer));
  REQUIRE(r.ours.shape() == r.peer.shape());
  CHECK(test::worst_difference(r.ours, r.peer) == 0);
  CHECK(std::memcmp(r.ours.bytes().data(), r.peer.bytes().data(), r.ours.size_bytes()) == 0);
  CHECK(test::distinct(r.ours) > 8);
  return r;
}

void check_host(const runtime::Runner& runner, const std::string& op) {
  const auto p = test::placements(runner, op);
  INFO(op << " placements: " << fmt::format("{}", fmt::join(p, ", ")));
  REQUIRE(!p.empty());
  for (const auto& e : p) CHECK(e == "fallback");
}

MakeOptions act_options(int code, Act act) {
  return [code, act](flatbuffers::FlatBufferBuilder& b) -> flatbuffers::Offset<void> {
    switch (code) {
      case kAdd: return fb::CreateAddOptions(b, act).Union();
      case kSub: return fb::CreateSubOptions(b, act).Union();
      case kMul: return fb::CreateMulOptions(b, act).Union();
      default: return fb::CreateDivOptions(b, act).Union();
    }
  };
}

fb::BuiltinOptions act_type(int code) {
  switch (code) {
    case kAdd: return fb::BuiltinOptions::AddOptions;
    case kSub: return fb::BuiltinOptions::SubOptions;
    case kMul: return fb::BuiltinOptions::MulOptions;
    default: return fb::BuiltinOptions::DivOptions;
  }
}

const std::vector<float> kSignedZeros = {1.5f, 0.0f, -0.0f, -3.0f, 3.0f, -0.0f, 0.0f};

}  // namespace

TEST_CASE(
    "TFLite peer: float32 ADD, SUB, MUL and DIV with broadcasting and fused activations on the "
    "host",
    "[tflite_peer]") {
  struct Case {
    const char* name;
    Dims as, bs;
    Act act;
    bool constant_b;
  };
  const std::vector<Case> cases = {
      {"same", {1, 6, 7, 5}, {1, 6, 7, 5}, Act::NONE, false},
      {"broadcast_relu", {1, 6, 7, 5}, {5}, Act::RELU, false},
      {"rank3_relu6", {2, 3, 8}, {3, 1}, Act::RELU6, false},
      {"constant_relu_n1_to_1", {1, 4, 4, 8}, {1, 1, 1, 8}, Act::RELU_N1_TO_1, true},
      {"scalar_left", {}, {2, 5, 3}, Act::NONE, false},
  };
  for (int code : {kAdd, kSub, kMul, kDiv}) {
    const char* op = code == kAdd ? "add" : code == kSub ? "sub" : code == kMul ? "mul" : "div";
    for (const Case& c : cases) {
      const std::string name = fmt::format("{}_{}", op, c.name);
      INFO(name);
      Dims ys(std::max(c.as.size(), c.bs.size()), 1);
      for (std::size_t k = 0; k < ys.size(); ++k) {
        const std::int32_t da = k < c.as.size() ? c.as[c.as.size() - 1 - k] : 1;
        const std::int32_t db = k < c.bs.size() ? c.bs[c.bs.size() - 1 - k] : 1;
        ys[ys.size() - 1 - k] = std::max(da, db);
      }
      const Tensor a = float_input(c.as, -4.0f, 4.0f, 3, kSignedZeros);
      // (DIV's divisors include +0 and -0 where b has room for them: TFLite divides, giving
      // signed infinities.)
      const bool room = std::accumulate(c.bs.begin(), c.bs.end(), 1, std::multiplies<>()) >= 8;
      const Tensor b = float_input(c.bs, -2.0f, 2.0f, 4,
                                   room ? std::vector<float>{-0.0f, 0.5f, 0.0f} : std::vector<float>{});
      const std::string bytes = float_model(code, c.as, &c.bs, ys, act_type(code),
                                            act_options(code, c.act), c.constant_b ? &b : nullptr);
      const auto r = run_float(name, bytes, c.constant_b ? std::vector<Tensor>{a}
                                                         : std::vector<Tensor>{a, b});
      check_host(*r.runner, "furiosa::TFLiteFloat");
    }
  }
}

TEST_CASE("TFLite peer: float32 SQUARED_DIFFERENCE and PRELU with broadcasting on the host",
          "[tflite_peer]") {
  {
    const Dims as = {1, 5, 6, 4}, bs = {1, 1, 6, 1};
    const Tensor a = float_input(as, -4.0f, 4.0f, 5, kSignedZeros);
    const Tensor b = float_input(bs, -4.0f, 4.0f, 6, {0.0f, -0.0f});
    const auto r = run_float("squared_difference", float_model(kSquaredDifference, as, &bs, as),
                             {a, b});
    check_host(*r.runner, "furiosa::TFLiteFloat");
  }
  {  // alpha per channel, a constant, with negative and zero slopes
    const Dims as = {1, 5, 6, 4}, bs = {1, 1, 4};
    const Tensor a = float_input(as, -4.0f, 4.0f, 7, kSignedZeros);
    const Tensor alpha = float_input(bs, -0.5f, 0.5f, 8, {0.25f, -0.5f, 0.0f});
    const auto r = run_float("prelu", float_model(kPrelu, as, &bs, as, fb::BuiltinOptions::NONE, {},
                                                  &alpha),
                             {a});
    check_host(*r.runner, "furiosa::TFLiteFloat");
  }
}

TEST_CASE("TFLite peer: float32 LEAKY_RELU, HARD_SWISH and SQRT on the host", "[tflite_peer]") {
  const Dims s = {1, 6, 5, 4};
  for (float alpha : {0.2f, -0.5f, 0.0f}) {
    const std::string name = fmt::format("leaky_relu_{}", alpha);
    INFO(name);
    const Tensor x = float_input(s, -4.0f, 4.0f, 9, kSignedZeros);
    const auto r = run_float(
        name,
        float_model(kLeakyRelu, s, nullptr, s, fb::BuiltinOptions::LeakyReluOptions,
                    [alpha](flatbuffers::FlatBufferBuilder& b) {
                      return fb::CreateLeakyReluOptions(b, alpha).Union();
                    }),
        {x});
    check_host(*r.runner, "furiosa::TFLiteFloat");
  }
  {  // -3 gives -0 in TFLite's formula (std::max(0, -0) is +0, -3 * +0 is -0)
    const Tensor x = float_input(s, -8.0f, 8.0f, 10, kSignedZeros);
    const auto r = run_float("hard_swish", float_model(kHardSwish, s, nullptr, s), {x});
    check_host(*r.runner, "furiosa::TFLiteFloat");
  }
  {
    const Tensor x = float_input(s, 0.0f, 50.0f, 11, {0.0f, -0.0f, 1.0f, 2.0f});
    const auto r = run_float("sqrt", float_model(kSqrt, s, nullptr, s), {x});
    check_host(*r.runner, "Sqrt");
  }
}

TEST_CASE("TFLite peer: float32 MINIMUM, MAXIMUM, EXP and RSQRT on the host", "[tflite_peer]") {
  const Dims as = {1, 4, 5, 3}, bs = {3};
  for (int code : {kMinimum, kMaximum}) {
    const Tensor a = float_input(as, -4.0f, 4.0f, 12, kSignedZeros);
    const Tensor b = float_input(bs, -1.0f, 1.0f, 13, {});
    const std::string name = code == kMinimum ? "minimum" : "maximum";
    const auto r = run_float(name, float_model(code, as, &bs, as), {a, b});
    check_host(*r.runner, code == kMinimum ? "Min" : "Max");
  }
  {
    const Tensor x = float_input(as, -6.0f, 6.0f, 14, kSignedZeros);
    const auto r = run_float("exp", float_model(kExp, as, nullptr, as), {x});
    check_host(*r.runner, "Exp");
  }
  {
    const Tensor x = float_input(as, 0.01f, 40.0f, 15, {1.0f, 4.0f});
    (void)run_float("rsqrt", float_model(kRsqrt, as, nullptr, as), {x});
  }
}
