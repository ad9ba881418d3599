// Slice and Pad of quantized tensors on the NPU (LowLevelSlice, LowLevelPad), in the QOperator
// form (Slice / Pad on uint8 or int8 data) and inside QDQ regions (DequantizeLinear -> Pad ->
// Slice -> QuantizeLinear, the Pad's float constant_value requantized with the region), equal to
// the host operator library running the same nodes; what stays on the host stays there.
// (Both against ONNX Runtime: tests/reference/test_npu_ops_ort.cpp.)
#include <fmt/format.h>

#include <random>

#include "furiosa/host/cpu_ops.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/from_graph.h"
#include "furiosa/runtime/runner.h"
#include "graph_builder.h"
#include "test_support.h"

using namespace furiosa;

namespace {

std::size_t kernels_of(const runtime::Runner& r, isa::KernelKind kind) {
  std::size_t n = 0;
  for (const auto& call : r.compiled().npu_calls) {
    for (const auto& k : call.program->kernels) n += k.kind == kind;
  }
  return n;
}

// Runs the nodes of a chain graph one by one with the host operator library (the reference); a
// QLinearConv is the tests' identity convolution (1x1, identity weights, scales 1, zero points 0).
Tensor run_on_host(const compiler::Graph& g, const Tensor& x) {
  std::map<int, Tensor> known{{g.inputs[0], x}};
  for (const auto& n : g.nodes) {
    if (n.op_type == "QLinearConv") {
      known.insert_or_assign(n.outputs[0], Tensor(known.at(n.inputs[0])));
      continue;
    }
    std::vector<const Tensor*> ins;
    for (int i : n.inputs) {
      if (i < 0) ins.push_back(nullptr);
      else if (g.values[static_cast<std::size_t>(i)].constant) ins.push_back(&*g.values[static_cast<std::size_t>(i)].constant);
      else ins.push_back(&known.at(i));
    }
    known.insert_or_assign(n.outputs[0], std::move(host::run_cpu_op(n, ins).at(0)));
  }
  return known.at(g.outputs[0]);
}

int int64s(test::GraphBuilder& b, const std::string& name, const std::vector<std::int64_t>& v) {
  Tensor t(DType::Int64, {static_cast<std::int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.as<std::int64_t>().begin());
  return b.scalar(name, std::move(t));
}

Tensor random_input(DType dtype, const Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  Tensor x(dtype, shape);
  for (auto& v : x.bytes()) v = static_cast<std::byte>(rng());
  return x;
}

}  // namespace

TEST_CASE("uint8/int8 Slice and Pad run on the NPU, equal to the host library", "[runtime][slice][pad]") {
  for (const DType dtype : {DType::UInt8, DType::Int8}) {
    for (const std::string mode : {"constant", "edge", "reflect", "wrap"}) {
      for (const bool lowered : {false, true}) {
        INFO(dtype_name(dtype) << " " << mode << (lowered ? " after a conv (lowered)" : " on the input (linear)"));
        // x [1, 3, 6, 37] -> [QLinearConv 1x1 identity] -> Pad -> Slice -> y
        test::GraphBuilder b;
        b.g.name = "slice-pad";
        const Shape xs{1, 3, 6, 37};
        const int x = b.add("x", dtype, xs);
        int cur = x;
        if (lowered) {
          cur = b.add("c", dtype, xs);
          Tensor w(DType::Int8, {3, 3, 1, 1});
          for (int i = 0; i < 3; ++i) w.as<std::int8_t>()[static_cast<std::size_t>(i * 3 + i)] = 1;
          const int s = b.scalar("s", test::scalar_of(DType::Float32, 1.0)), z = b.scalar("z", test::scalar_of(dtype, 0));
          const int wz = b.scalar("wz", test::scalar_of(DType::Int8, 0)), wi = b.scalar("w", std::move(w));
          b.node("QLinearConv", {x, s, z, wi, s, wz, s, z}, {cur});
        }
        const int padded = b.add("p", dtype, {1, 3, 9, 39});
        const int value = b.scalar("v", test::scalar_of(dtype, 5));
        b.node("Pad", {cur, int64s(b, "pads", {0, 0, 2, -1, 0, 0, 1, 3}), value}, {padded}, {{"mode", mode}});
        const int y = b.add("y", dtype, {1, 2, 5, 13});
        // Slice: C 2, 1 (backwards, before 0); W 38, 35, ..., 2 (from the end by -3; the end clamps
        // to -1); H 0, 2, ..., 8 (start -9 counts from the end, end 38 clamps to 9).
        b.node("Slice", {padded, int64s(b, "starts", {2, -1, -9}), int64s(b, "ends", {0, -100, 38}),
                         int64s(b, "axes", {1, 3, 2}), int64s(b, "steps", {-1, -3, 2})},
               {y});
        b.g.inputs = {x};
        b.g.outputs = {y};
        runtime::RunnerOptions o;
        o.device = "npu0pe0";
        auto runner = runtime::create_runner(b.g, o);
        CHECK(kernels_of(*runner, isa::KernelKind::Pad) == 1);
        CHECK(kernels_of(*runner, isa::KernelKind::Slice) == 1);
        CHECK(runner->partition_report().count("fallback") == 0);
        const Tensor in = random_input(dtype, xs, 11);
        CHECK(test::max_abs_diff(runner->run({in}).at(0), run_on_host(b.g, in)) == 0);
      }
    }
  }
}

TEST_CASE("a QDQ region with Pad and Slice runs on the quantized tensor", "[runtime][slice][pad][qdq]") {
  // x uint8 -> DequantizeLinear -> Pad (constant 0.5) -> Slice -> QuantizeLinear (other params) -> y
  test::GraphBuilder b;
  b.g.name = "qdq-slice-pad";
  const int x = b.add("x", DType::UInt8, {1, 2, 4, 6}), xf = b.add("xf", DType::Float32, {1, 2, 4, 6});
  const int pf = b.add("pf", DType::Float32, {1, 2, 6, 8}), sf = b.add("sf", DType::Float32, {1, 2, 3, 8});
  const int y = b.add("y", DType::UInt8, {1, 2, 3, 8});
  b.g.inputs = {x};
  b.g.outputs = {y};
  const int s = b.scalar("s", test::scalar_of(DType::Float32, 0.1)), z = b.scalar("z", test::scalar_of(DType::UInt8, 3));
  const int s2 = b.scalar("s2", test::scalar_of(DType::Float32, 0.07)), z2 = b.scalar("z2", test::scalar_of(DType::UInt8, 9));
  b.node("DequantizeLinear", {x, s, z}, {xf});
  b.node("Pad", {xf, int64s(b, "pads", {0, 0, 1, 1, 0, 0, 1, 1}), b.scalar("c", test::scalar_of(DType::Float32, 0.5))},
         {pf});
  b.node("Slice", {pf, int64s(b, "starts", {0}), int64s(b, "ends", {6}), int64s(b, "axes", {2}), int64s(b, "steps", {2})},
         {sf});
  b.node("QuantizeLinear", {sf, s2, z2}, {y});
  runtime::RunnerOptions o;
  o.device = "npu0pe0";
  auto runner = runtime::create_runner(b.g, o);
  CHECK(kernels_of(*runner, isa::KernelKind::Pad) == 1);
  CHECK(kernels_of(*runner, isa::KernelKind::Slice) == 1);
  CHECK(kernels_of(*runner, isa::KernelKind::Requantize) == 1);  // 0.1/3 -> 0.07/9 at the boundary
  CHECK(runner->partition_report().count("fallback") == 0);
  const Tensor in = random_input(DType::UInt8, {1, 2, 4, 6}, 12);
  const Tensor got = runner->run({in}).at(0);
  CHECK(test::max_abs_diff(got, run_on_host(b.g, in)) == 0);
  // The padded border holds Q(0.5) = round(0.5 / 0.07) + 9 = 16.
  CHECK(got.as<std::uint8_t>()[0] == 16);
}

TEST_CASE("Pad with a constant_value fed at run time stays on the host", "[runtime][pad]") {
  test::GraphBuilder b;
  b.g.name = "pad-runtime-value";
  const int x = b.add("x", DType::UInt8, {1, 1, 2, 3}), v = b.add("v", DType::UInt8, {});
  const int y = b.add("y", DType::UInt8, {1, 1, 4, 5});
  b.g.inputs = {x, v};
  b.g.outputs = {y};
  b.node("Pad", {x, int64s(b, "pads", {0, 0, 1, 1, 0, 0, 1, 1}), v}, {y});
  runtime::RunnerOptions o;
  o.device = "npu0pe0";
  auto runner = runtime::create_runner(b.g, o);
  CHECK(kernels_of(*runner, isa::KernelKind::Pad) == 0);
  CHECK(runner->partition_report().count("fallback") == 1);
}
