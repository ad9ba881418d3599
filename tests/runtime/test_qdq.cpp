// QDQ and QOperator forms of the same network give identical outputs: the compiler fuses
// DequantizeLinear -> Conv/MatMul/Add/GlobalAveragePool -> QuantizeLinear groups back into the
// quantized kernels. The QDQ models are made at build time by tests/models/qoperator_to_qdq.py.
#include <fmt/format.h>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

void check_identical(const fs::path& qop_path, const std::string& qdq_name, const std::vector<Tensor>& inputs) {
  const fs::path qdq_path = fs::path(FURIOSA_QDQ_DIR) / qdq_name;
  REQUIRE(fs::exists(qdq_path));
  // Devices are held exclusively: one single PE each.
  runtime::RunnerOptions pe0, pe1;
  pe0.device = "npu0pe0";
  pe1.device = "npu0pe1";
  auto qop = runtime::create_runner(qop_path, pe0);
  auto qdq = runtime::create_runner(qdq_path, pe1);
  const auto& report = qdq->partition_report();
  // Every quantized operator of the QDQ model was fused: no float Conv/MatMul/Add on the host.
  for (const auto& e : report.entries) {
    INFO(e.node_name << " " << e.op << " " << e.placement);
    if (e.op == "Conv" || e.op == "MatMul" || e.op == "Add" || e.op == "GlobalAveragePool") {
      CHECK(e.placement == "npu");
    }
  }
  CHECK(report.count("fallback") == qop->partition_report().count("fallback"));
  for (const auto& in : inputs) {
    auto a = qop->run({in});
    auto b = qdq->run({in});
    REQUIRE(a.size() == b.size());
    for (std::size_t o = 0; o < a.size(); ++o) CHECK(test::max_abs_diff(a[o], b[o]) == 0);
  }
  fmt::print("{}: QDQ form identical to QOperator on {} input(s); {} npu, {} folded, {} fallback nodes\n",
             qdq_name, inputs.size(), report.count("npu"), report.count("folded"), report.count("fallback"));
}

Tensor set_input(const std::string& rel, int set) {
  return compiler::load_tensor_pb(test::shared_model(rel) / fmt::format("test_data_set_{}/input_0.pb", set));
}

}  // namespace

TEST_CASE("QDQ mnist-12-int8 equals its QOperator form", "[qdq][models]") {
  std::vector<Tensor> in;
  for (int s = 0; s < 10; ++s) in.push_back(set_input("onnx-zoo/mnist-12-int8", s));
  check_identical(test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx"), "mnist-12-int8-qdq.onnx", in);
}

TEST_CASE("QDQ mobilenetv2-12-int8 equals its QOperator form", "[qdq][models]") {
  check_identical(test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx"),
                  "mobilenetv2-12-int8-qdq.onnx", {set_input("onnx-zoo/mobilenetv2-12-int8", 0)});
}

TEST_CASE("QDQ shufflenet-v2-12-int8 equals its QOperator form", "[qdq][models]") {
  check_identical(test::shared_model("onnx-zoo/shufflenet-v2-12-int8/shufflenet-v2-12-int8.onnx"),
                  "shufflenet-v2-12-int8-qdq.onnx",
                  {set_input("onnx-zoo/shufflenet-v2-12-int8", 0), set_input("onnx-zoo/shufflenet-v2-12-int8", 1)});
}

TEST_CASE("QDQ default model equals its QOperator form", "[qdq][models]") {
  const fs::path models = FURIOSA_MODELS_DIR;
  std::vector<Tensor> in;
  for (int i = 0; i < 8; ++i) in.push_back(runtime::read_npy(models / fmt::format("images/fashion_{}.npy", i)));
  check_identical(models / "fashion_mnist_int8.onnx", "fashion_mnist_int8-qdq.onnx", in);
}

TEST_CASE("QDQ with float weights (quantized at compile time) equals the QOperator form", "[qdq][models]") {
  std::vector<Tensor> in;
  for (int s = 0; s < 10; ++s) in.push_back(set_input("onnx-zoo/mnist-12-int8", s));
  check_identical(test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx"),
                  "mnist-12-int8-qdq-float-weights.onnx", in);
  check_identical(test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx"),
                  "mobilenetv2-12-int8-qdq-float-weights.onnx", {set_input("onnx-zoo/mobilenetv2-12-int8", 0)});
}
