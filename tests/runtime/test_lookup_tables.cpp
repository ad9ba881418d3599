// Element-wise activations on quantized tensors as 256-entry lookup tables computed at compile
// time (compiler-bridge/src/passes.cpp, fuse_lookup_tables): every entry equals the float
// function of the dequantized input, quantized with the output's parameters (ONNX
// QuantizeLinear: float32, round half to even, saturate), for uint8 and int8, and the simulated
// NPU maps every input through the table.
#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <set>

#include "furiosa/host/quantize.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/from_graph.h"
#include "furiosa/runtime/runner.h"
#include "graph_builder.h"
#include "test_support.h"

using namespace furiosa;

namespace {

struct Activation {
  std::string op;
  std::map<std::string, compiler::Attribute> attributes;
  std::function<float(float)> f;  // the ONNX operator's definition in float32
};

float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

std::vector<Activation> activations() {
  return {
      {"Sigmoid", {}, sigmoid},
      {"Tanh", {}, [](float v) { return std::tanh(v); }},
      {"Exp", {}, [](float v) { return std::exp(v); }},
      {"Relu", {}, [](float v) { return std::max(v, 0.0f); }},
      {"LeakyRelu", {{"alpha", 0.1f}}, [](float v) { return v < 0 ? 0.1f * v : v; }},
      {"HardSigmoid", {}, [](float v) { return std::max(0.0f, std::min(1.0f, 0.2f * v + 0.5f)); }},
      {"HardSwish", {}, [](float v) { return v * std::max(0.0f, std::min(1.0f, v / 6.0f + 0.5f)); }},
  };
}

struct QParams {
  float x_scale;
  std::int32_t x_zp;
  float y_scale;
  std::int32_t y_zp;
};

// x -> DQ -> op -> Q -> y, all 8-bit of dtype `d`.
compiler::Graph activation_graph(const Activation& a, DType d, QParams p) {
  test::GraphBuilder b;
  b.g.name = a.op;
  const Shape s{1, 2, 16, 8};
  const int x = b.add("x", d, s), xf = b.add("xf", DType::Float32, s), yf = b.add("yf", DType::Float32, s),
            y = b.add("y", d, s);
  b.g.inputs = {x};
  b.g.outputs = {y};
  const int xs = b.scalar("xs", test::scalar_of(DType::Float32, p.x_scale)), xz = b.scalar("xz", test::scalar_of(d, p.x_zp));
  const int ys = b.scalar("ys", test::scalar_of(DType::Float32, p.y_scale)), yz = b.scalar("yz", test::scalar_of(d, p.y_zp));
  b.node("DequantizeLinear", {x, xs, xz}, {xf});
  b.node(a.op, {xf}, {yf}, a.attributes);
  b.node("QuantizeLinear", {yf, ys, yz}, {y});
  return b.g;
}

// The table entry the float function gives for raw input byte `byte` of dtype `d`.
std::uint8_t expected_entry(const std::function<float(float)>& f, DType d, QParams p, int byte) {
  const std::int32_t q = d == DType::UInt8 ? byte : static_cast<std::int8_t>(static_cast<std::uint8_t>(byte));
  const float x = static_cast<float>(q - p.x_zp) * p.x_scale;
  const auto range = host::quant_range(d);
  const std::int32_t y = host::quantize_value(f(x) / p.y_scale, p.y_zp, range[0], range[1]);
  return static_cast<std::uint8_t>(y & 0xff);
}

// The one NPU kernel of the compiled graph, which must be a table Requantize.
const isa::RequantizeParams& only_table(const compiler::CompiledModel& cm) {
  REQUIRE(cm.npu_calls.size() == 1);
  const auto& kernels = cm.npu_calls[0].program->kernels;
  REQUIRE(kernels.size() == 1);
  REQUIRE(kernels[0].kind == isa::KernelKind::Requantize);
  const auto& p = std::get<isa::RequantizeParams>(kernels[0].params);
  REQUIRE(p.table.size() == 256);
  return p;
}

// Runs every byte value through the runner and checks the outputs against `table`.
void check_device_maps(runtime::Runner& runner, DType d, const std::vector<std::uint8_t>& table) {
  Tensor x(d, {1, 2, 16, 8});
  for (std::size_t i = 0; i < 256; ++i) x.bytes()[i] = static_cast<std::byte>(i);
  const Tensor y = runner.run({x}).at(0);
  for (std::size_t i = 0; i < 256; ++i) {
    INFO("byte " << i);
    CHECK(static_cast<std::uint8_t>(y.bytes()[i]) == table[i]);
  }
}

}  // namespace

TEST_CASE("lookup-table activations: all 256 entries equal the float function, uint8 and int8",
          "[runtime][lut]") {
  for (const DType d : {DType::UInt8, DType::Int8}) {
    // Input covers about [-8, 8]; the output's scale fits each function's range.
    const QParams p = d == DType::UInt8 ? QParams{0.0625f, 128, 0.03125f, 64} : QParams{0.0625f, 0, 0.03125f, -64};
    for (const auto& a : activations()) {
      INFO(a.op << " " << dtype_name(d));
      runtime::RunnerOptions o;
      o.device = "npu0pe0";
      auto runner = runtime::create_runner(activation_graph(a, d, p), o);
      const auto& params = only_table(runner->compiled());
      std::size_t mismatches = 0, distinct = 0;
      std::set<std::uint8_t> values;
      for (int b = 0; b < 256; ++b) {
        mismatches += params.table[static_cast<std::size_t>(b)] != expected_entry(a.f, d, p, b);
        values.insert(params.table[static_cast<std::size_t>(b)]);
      }
      distinct = values.size();
      CHECK(mismatches == 0);
      CHECK(distinct > 16);  // a real function of the input, not a constant
      CHECK(runner->partition_report().count("fallback") == 0);
      check_device_maps(*runner, d, params.table);
    }
  }
}

TEST_CASE("a QDQ SiLU (x * sigmoid(x) with its own Q/DQ pair) becomes one table", "[runtime][lut]") {
  // x -> DQ -> Sigmoid -> Q(s) -> DQ(s) -> Mul(DQ(x), .) -> Q -> y, as ONNX Runtime's QDQ
  // quantizer writes YOLOv8's SiLU.
  const QParams p{0.0625f, 128, 0.05f, 20};
  const float s_scale = 1.0f / 255.0f;
  test::GraphBuilder b;
  b.g.name = "silu";
  const Shape s{1, 2, 16, 8};
  const int x = b.add("x", DType::UInt8, s), xf = b.add("xf", DType::Float32, s), sf = b.add("sf", DType::Float32, s),
            sq = b.add("sq", DType::UInt8, s), sd = b.add("sd", DType::Float32, s),
            mf = b.add("mf", DType::Float32, s), y = b.add("y", DType::UInt8, s);
  b.g.inputs = {x};
  b.g.outputs = {y};
  const int xs = b.scalar("xs", test::scalar_of(DType::Float32, p.x_scale)), xz = b.scalar("xz", test::scalar_of(DType::UInt8, p.x_zp));
  const int ss = b.scalar("ss", test::scalar_of(DType::Float32, s_scale)), sz = b.scalar("sz", test::scalar_of(DType::UInt8, 0));
  const int ys = b.scalar("ys", test::scalar_of(DType::Float32, p.y_scale)), yz = b.scalar("yz", test::scalar_of(DType::UInt8, p.y_zp));
  b.node("DequantizeLinear", {x, xs, xz}, {xf});
  b.node("Sigmoid", {xf}, {sf});
  b.node("QuantizeLinear", {sf, ss, sz}, {sq});
  b.node("DequantizeLinear", {sq, ss, sz}, {sd});
  b.node("Mul", {xf, sd}, {mf});
  b.node("QuantizeLinear", {mf, ys, yz}, {y});
  runtime::RunnerOptions o;
  o.device = "npu0pe0";
  auto runner = runtime::create_runner(b.g, o);
  const auto& params = only_table(runner->compiled());
  // DQ, DQ -> Mul -> Q runs as ONNX Runtime runs it, com.microsoft QLinearMul's formula
  // (passes.cpp, expand_contrib_mul): the sigmoid quantized to steps of 1/255, then the integer
  // product (x - x_zp) * (s - s_zp) times the float32 ratio x_scale * s_scale / y_scale, plus
  // y_zp, rounded half to even and saturated.
  const float ratio = p.x_scale * s_scale / p.y_scale;
  for (int byte = 0; byte < 256; ++byte) {
    INFO("byte " << byte);
    const float v = static_cast<float>(byte - p.x_zp) * p.x_scale;
    const std::int32_t sq = host::quantize_value(sigmoid(v) / s_scale, 0, 0, 255);
    const float product = static_cast<float>((byte - p.x_zp) * sq);
    const std::int32_t expected = host::quantize_value(product * ratio + static_cast<float>(p.y_zp), 0, 0, 255);
    CHECK(params.table[static_cast<std::size_t>(byte)] == expected);
  }
  check_device_maps(*runner, DType::UInt8, params.table);
}

TEST_CASE("QLinearSigmoid and QLinearLeakyRelu (com.microsoft) run as tables", "[runtime][lut]") {
  const QParams p{0.0625f, 128, 0.03125f, 64};
  for (const std::string op : {"QLinearSigmoid", "QLinearLeakyRelu"}) {
    INFO(op);
    test::GraphBuilder b;
    b.g.name = op;
    const Shape s{1, 2, 16, 8};
    const int x = b.add("x", DType::UInt8, s), y = b.add("y", DType::UInt8, s);
    b.g.inputs = {x};
    b.g.outputs = {y};
    const int xs = b.scalar("xs", test::scalar_of(DType::Float32, p.x_scale)), xz = b.scalar("xz", test::scalar_of(DType::UInt8, p.x_zp));
    const int ys = b.scalar("ys", test::scalar_of(DType::Float32, p.y_scale)), yz = b.scalar("yz", test::scalar_of(DType::UInt8, p.y_zp));
    b.node(op, {x, xs, xz, ys, yz}, {y}, op == "QLinearLeakyRelu" ? std::map<std::string, compiler::Attribute>{{"alpha", 0.1f}}
                                                                 : std::map<std::string, compiler::Attribute>{});
    b.g.nodes.back().domain = "com.microsoft";
    runtime::RunnerOptions o;
    o.device = "npu0pe0";
    auto runner = runtime::create_runner(b.g, o);
    const auto& params = only_table(runner->compiled());
    const std::function<float(float)> f =
        op == "QLinearSigmoid" ? std::function<float(float)>(sigmoid) : [](float v) { return v < 0 ? 0.1f * v : v; };
    for (int byte = 0; byte < 256; ++byte) {
      INFO("byte " << byte);
      CHECK(params.table[static_cast<std::size_t>(byte)] == expected_entry(f, DType::UInt8, p, byte));
    }
  }
}
