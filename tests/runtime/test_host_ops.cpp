// Models whose non-NPU part runs on the host operator library, through the full runtime: a
// dynamically quantized model with Constant nodes (DynamicQuantizeLinear -> ConvInteger -> Cast
// -> Mul), made at build time with its numpy reference output by
// tests/models/make_dynamic_quant.py.
#include <algorithm>
#include <cmath>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/from_graph.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

TEST_CASE("host ops: Constant nodes import as initializers", "[runtime][host_ops]") {
  const fs::path dir = FURIOSA_DYNQ_DIR;
  const compiler::Graph g = compiler::import_onnx(dir / "model.onnx");
  for (const auto& n : g.nodes) CHECK(n.op_type != "Constant");
  const int gain = g.find_value("gain");
  REQUIRE(gain >= 0);
  const auto& v = g.values[static_cast<std::size_t>(gain)];
  REQUIRE(v.constant);
  CHECK(v.dtype == DType::Float32);
  CHECK(v.shape.empty());
  CHECK(v.constant->as<float>()[0] == 0.5f);
  const int ws = g.find_value("w_scale");
  REQUIRE(ws >= 0);
  REQUIRE(g.values[static_cast<std::size_t>(ws)].constant);
  CHECK(g.values[static_cast<std::size_t>(ws)].shape == Shape{1, 4, 1, 1});
  // The nodes keep their position in the ONNX graph (operator_index) with the Constants gone.
  REQUIRE(!g.nodes.empty());
  CHECK(g.nodes.front().op_type == "Mul");
  CHECK(g.nodes.front().index == 2);
}

TEST_CASE("host ops: DynamicQuantizeLinear -> ConvInteger model agrees with numpy", "[runtime][host_ops]") {
  const fs::path dir = FURIOSA_DYNQ_DIR;
  auto runner = runtime::create_runner(dir / "model.onnx");
  const auto& report = runner->partition_report();
  bool dql = false, conv = false;
  for (const auto& e : report.entries) {
    INFO(e.node_name << " " << e.op << " " << e.placement << " " << e.reason);
    CHECK(e.op != "Constant");
    if (e.op == "DynamicQuantizeLinear") dql = true;
    if (e.op == "ConvInteger") conv = true;
  }
  CHECK(dql);
  CHECK(conv);
  const Tensor x = compiler::load_tensor_pb(dir / "input_0.pb");
  const Tensor expected = compiler::load_tensor_pb(dir / "output_0.pb");
  auto out = runner->run({x});
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].shape() == expected.shape());
  REQUIRE(out[0].dtype() == DType::Float32);
  const auto a = out[0].as<float>();
  const auto e = expected.as<float>();
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - e[i]) / (1e-6 + std::abs(static_cast<double>(e[i]))));
  }
  CHECK(worst < 1e-5);
}
