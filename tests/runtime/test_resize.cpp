// Nearest Resize on the NPU (LowLevelResize): placed there only when the ONNX Resize's own index
// map is a whole-factor repeat, and then bit-identical to the host library's Resize (the ONNX
// spec's arithmetic) in both layouts; other index maps stay on the host.
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

struct ResizeCase {
  std::string coordinate_mode;
  std::string nearest_mode;
  std::vector<float> scales;  // [1, 1, sh, sw]
};

// x (uint8 [1, 3, 5, 7]) -> [Conv 1x1 when `lowered`, so Resize reads the lowered layout] ->
// Resize -> y.
compiler::Graph resize_graph(const ResizeCase& c, bool lowered) {
  test::GraphBuilder b;
  b.g.name = "resize";
  const Shape xs{1, 3, 5, 7};
  const Shape ys{1, 3, static_cast<std::int64_t>(5 * c.scales[2]), static_cast<std::int64_t>(7 * c.scales[3])};
  const int x = b.add("x", DType::UInt8, xs), y = b.add("y", DType::UInt8, ys);
  b.g.inputs = {x};
  b.g.outputs = {y};
  int r_in = x;
  if (lowered) {
    r_in = b.add("c", DType::UInt8, xs);
    Tensor w(DType::Int8, {3, 3, 1, 1});
    for (int i = 0; i < 3; ++i) w.as<std::int8_t>()[static_cast<std::size_t>(i * 3 + i)] = 1;  // identity
    const int s = b.scalar("s", test::scalar_of(DType::Float32, 1.0)), z = b.scalar("z", test::scalar_of(DType::UInt8, 0));
    const int wz = b.scalar("wz", test::scalar_of(DType::Int8, 0)), wi = b.scalar("w", std::move(w));
    b.node("QLinearConv", {x, s, z, wi, s, wz, s, z}, {r_in});
  }
  Tensor scales(DType::Float32, {4});
  std::copy(c.scales.begin(), c.scales.end(), scales.as<float>().begin());
  const int roi = b.scalar("roi", Tensor(DType::Float32, {0}));
  const int sc = b.scalar("scales", std::move(scales));
  b.node("Resize", {r_in, roi, sc}, {y},
         {{"mode", std::string("nearest")},
          {"coordinate_transformation_mode", c.coordinate_mode},
          {"nearest_mode", c.nearest_mode}});
  return b.g;
}

std::size_t kernels_of(const runtime::Runner& r, isa::KernelKind kind) {
  std::size_t n = 0;
  for (const auto& call : r.compiled().npu_calls) {
    for (const auto& k : call.program->kernels) n += k.kind == kind;
  }
  return n;
}

}  // namespace

TEST_CASE("nearest Resize by whole factors runs on the NPU, equal to the ONNX arithmetic", "[runtime][resize]") {
  const std::vector<ResizeCase> cases = {
      {"asymmetric", "floor", {1, 1, 2, 2}},            // YOLOv5/v8 and FPN upsampling
      {"half_pixel", "round_prefer_floor", {1, 1, 2, 2}},  // ONNX's defaults
      {"asymmetric", "floor", {1, 1, 3, 1}},
      {"pytorch_half_pixel", "round_prefer_ceil", {1, 1, 2, 4}},
  };
  std::mt19937 rng(7);
  Tensor x(DType::UInt8, {1, 3, 5, 7});
  for (auto& v : x.as<std::uint8_t>()) v = static_cast<std::uint8_t>(rng());
  for (const auto& c : cases) {
    for (const bool lowered : {false, true}) {
      INFO(c.coordinate_mode << " " << c.nearest_mode << " x" << c.scales[2] << " x" << c.scales[3]
                             << (lowered ? " lowered" : " linear"));
      const compiler::Graph g = resize_graph(c, lowered);
      runtime::RunnerOptions o;
      o.device = "npu0pe0";
      auto runner = runtime::create_runner(g, o);
      CHECK(kernels_of(*runner, isa::KernelKind::Resize) == 1);
      CHECK(runner->partition_report().count("fallback") == 0);
      // The reference: the host library's Resize (ONNX spec) on the same tensor.
      const auto& resize = g.nodes.back();
      const Tensor& roi = *g.values[static_cast<std::size_t>(resize.inputs[1])].constant;
      const Tensor& scales = *g.values[static_cast<std::size_t>(resize.inputs[2])].constant;
      const Tensor want = host::run_cpu_op(resize, {&x, &roi, &scales}).at(0);
      const Tensor got = runner->run({x}).at(0);
      CHECK(test::max_abs_diff(got, want) == 0);
    }
  }
}

TEST_CASE("a nearest Resize whose index map is not a repeat stays on the host", "[runtime][resize]") {
  // asymmetric + ceil maps output 0, 1, 2, 3, ... onto input 0, 1, 1, 2, ... (not a repeat;
  // align_corners x2 of 5 -> 10 happens to be one).
  const compiler::Graph g = resize_graph({"asymmetric", "ceil", {1, 1, 2, 2}}, false);
  runtime::RunnerOptions o;
  o.device = "npu0pe0";
  auto runner = runtime::create_runner(g, o);
  CHECK(kernels_of(*runner, isa::KernelKind::Resize) == 0);
  CHECK(runner->partition_report().count("fallback") == 1);
  Tensor x(DType::UInt8, {1, 3, 5, 7});
  for (std::size_t i = 0; i < 105; ++i) x.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(i);
  const auto& resize = g.nodes.back();
  const Tensor want = host::run_cpu_op(resize, {&x, &*g.values[static_cast<std::size_t>(resize.inputs[1])].constant,
                                                &*g.values[static_cast<std::size_t>(resize.inputs[2])].constant})
                          .at(0);
  CHECK(test::max_abs_diff(runner->run({x}).at(0), want) == 0);
}

TEST_CASE("a QDQ nearest Resize (DequantizeLinear -> Resize -> QuantizeLinear) runs on the NPU", "[runtime][resize]") {
  test::GraphBuilder b;
  b.g.name = "qdq-resize";
  const int x = b.add("x", DType::UInt8, {1, 2, 4, 6}), xf = b.add("xf", DType::Float32, {1, 2, 4, 6});
  const int yf = b.add("yf", DType::Float32, {1, 2, 8, 12}), y = b.add("y", DType::UInt8, {1, 2, 8, 12});
  b.g.inputs = {x};
  b.g.outputs = {y};
  const int s = b.scalar("s", test::scalar_of(DType::Float32, 0.1)), z = b.scalar("z", test::scalar_of(DType::UInt8, 3));
  Tensor scales(DType::Float32, {4});
  scales.as<float>()[0] = scales.as<float>()[1] = 1;
  scales.as<float>()[2] = scales.as<float>()[3] = 2;
  const int roi = b.scalar("roi", Tensor(DType::Float32, {0})), sc = b.scalar("scales", scales);
  b.node("DequantizeLinear", {x, s, z}, {xf});
  b.node("Resize", {xf, roi, sc}, {yf},
         {{"mode", std::string("nearest")}, {"coordinate_transformation_mode", std::string("asymmetric")},
          {"nearest_mode", std::string("floor")}});
  b.node("QuantizeLinear", {yf, s, z}, {y});
  runtime::RunnerOptions o;
  o.device = "npu0pe0";
  auto runner = runtime::create_runner(b.g, o);
  CHECK(kernels_of(*runner, isa::KernelKind::Resize) == 1);
  CHECK(runner->partition_report().count("fallback") == 0);
  Tensor in(DType::UInt8, {1, 2, 4, 6});
  for (std::size_t i = 0; i < 48; ++i) in.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(5 * i);
  const Tensor out = runner->run({in}).at(0);
  for (std::int64_t c = 0; c < 2; ++c)
    for (std::int64_t h = 0; h < 8; ++h)
      for (std::int64_t w = 0; w < 12; ++w) {
        INFO(c << " " << h << " " << w);
        CHECK(out.as<std::uint8_t>()[static_cast<std::size_t>((c * 8 + h) * 12 + w)] ==
              in.as<std::uint8_t>()[static_cast<std::size_t>((c * 4 + h / 2) * 6 + w / 2)]);
      }
}
