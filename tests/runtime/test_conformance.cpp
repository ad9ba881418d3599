// ONNX operator conformance for the operators the walking skeleton claims, from the ONNX backend
// test cases (../shared/models/onnx-node-tests and Debian's libonnx-testdata). These cases pass
// weights and scales as graph inputs; the harness binds every input but the first as a constant
// before compiling, as the compiler requires constant quantization parameters.
#include <fmt/format.h>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

// Runs every test_data_set_* of an ONNX backend test case; returns the worst |diff|.
double run_case(const fs::path& dir) {
  int sets = 0;
  double worst = 0;
  for (int s = 0; fs::exists(dir / fmt::format("test_data_set_{}", s)); ++s, ++sets) {
    const fs::path sdir = dir / fmt::format("test_data_set_{}", s);
    compiler::Graph g = compiler::import_onnx(dir / "model.onnx");
    std::vector<std::string> names;
    for (int id : g.inputs) names.push_back(g.values[static_cast<std::size_t>(id)].name);
    Tensor first;
    for (std::size_t i = 0; i < names.size(); ++i) {
      Tensor t = compiler::load_tensor_pb(sdir / fmt::format("input_{}.pb", i));
      if (i == 0) first = std::move(t);
      else g.bind_constant(names[i], std::move(t));
    }
    auto runner = runtime::create_runner(std::move(g));
    auto out = runner->run({first});
    for (std::size_t o = 0; o < out.size(); ++o) {
      Tensor expected = compiler::load_tensor_pb(sdir / fmt::format("output_{}.pb", o));
      const double d = test::max_abs_diff(out[o], expected);
      INFO(dir.filename().string() << " set " << s << " output " << o);
      CHECK(d == 0);
      worst = std::max(worst, d);
    }
  }
  REQUIRE(sets > 0);
  return worst;
}

}  // namespace

TEST_CASE("ONNX conformance: QuantizeLinear", "[conformance]") {
  CHECK(run_case(test::shared_model("onnx-node-tests/test_quantizelinear")) == 0);
}

TEST_CASE("ONNX conformance: DequantizeLinear", "[conformance]") {
  CHECK(run_case(test::shared_model("onnx-node-tests/test_dequantizelinear")) == 0);
}

TEST_CASE("ONNX conformance: QLinearConv", "[conformance]") {
  CHECK(run_case(test::shared_model("onnx-node-tests/test_qlinearconv")) == 0);
}

TEST_CASE("ONNX conformance: QLinearMatMul 2D", "[conformance]") {
  CHECK(run_case(test::shared_model("onnx-node-tests/test_qlinearmatmul_2D")) == 0);
}

TEST_CASE("ONNX conformance: MaxPool uint8 (libonnx-testdata)", "[conformance]") {
  CHECK(run_case(test::onnx_node_test("test_maxpool_2d_uint8")) == 0);
}
