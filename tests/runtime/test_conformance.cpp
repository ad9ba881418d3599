// ONNX operator conformance for the operators the walking skeleton claims, from the ONNX backend
// test cases (../shared/models/onnx-node-tests and Debian's libonnx-testdata). These cases pass
// weights and scales as graph inputs; the harness binds every input but the first as a constant
// before compiling, as the compiler requires constant quantization parameters.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "furiosa/host/cpu_ops.h"

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/from_graph.h"
#include "furiosa/runtime/runner.h"
#include "graph_builder.h"
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

// The NPU's LowLevelMaxPool is 2-D (NCHW): a 5-D uint8 MaxPool, given directly or as a QDQ
// region (DQ -> MaxPool -> Q, which the compiler turns into a uint8 MaxPool), must run on the
// host, with the host library's result; the same pool on a 4-D tensor runs on the NPU.
TEST_CASE("a uint8 MaxPool runs on the NPU only when 4-D, 3-D pools on the host", "[conformance][pool]") {
  using V = std::vector<std::int64_t>;
  const std::map<std::string, compiler::Attribute> attrs = {{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}};
  const std::map<std::string, compiler::Attribute> attrs3 = {{"kernel_shape", V{2, 2, 2}}, {"strides", V{2, 2, 2}}};
  for (bool qdq : {false, true}) {
    for (int rank : {4, 5}) {
      INFO("rank " << rank << (qdq ? " QDQ" : ""));
      const Shape xs = rank == 4 ? Shape{1, 3, 8, 64} : Shape{1, 3, 4, 8, 64};
      const Shape ys = rank == 4 ? Shape{1, 3, 4, 32} : Shape{1, 3, 2, 4, 32};
      test::GraphBuilder b;
      b.g.name = "maxpool";
      const int x = b.add("x", DType::UInt8, xs), y = b.add("y", DType::UInt8, ys);
      b.g.inputs = {x};
      b.g.outputs = {y};
      if (qdq) {
        const int xf = b.add("xf", DType::Float32, xs), yf = b.add("yf", DType::Float32, ys);
        const int s = b.scalar("s", test::scalar_of(DType::Float32, 0.05)), z = b.scalar("z", test::scalar_of(DType::UInt8, 9));
        b.node("DequantizeLinear", {x, s, z}, {xf});
        b.node("MaxPool", {xf}, {yf}, rank == 4 ? attrs : attrs3);
        b.node("QuantizeLinear", {yf, s, z}, {y});
      } else {
        b.node("MaxPool", {x}, {y}, rank == 4 ? attrs : attrs3);
      }
      auto runner = runtime::create_runner(b.g);
      const auto& report = runner->partition_report();
      const auto pool = std::find_if(report.entries.begin(), report.entries.end(),
                                     [](const compiler::PartitionEntry& e) { return e.op == "MaxPool"; });
      REQUIRE(pool != report.entries.end());
      if (rank == 4) {
        CHECK(pool->placement == "npu");
        CHECK(runner->compiled().npu_calls.size() == 1);
      } else {
        CHECK(pool->placement == "fallback");
        CHECK(runner->compiled().npu_calls.empty());
      }
      Tensor in(DType::UInt8, xs);
      for (std::size_t i = 0; i < static_cast<std::size_t>(in.elements()); ++i) {
        in.as<std::uint8_t>()[i] = static_cast<std::uint8_t>((i * 131 + i / 7) % 256);
      }
      compiler::Node node;
      node.name = "ref";
      node.op_type = "MaxPool";
      node.inputs = {0};
      node.outputs = {1};
      node.attributes = rank == 4 ? attrs : attrs3;
      const Tensor expected = host::run_cpu_op(node, {&in}).at(0);
      const Tensor out = runner->run({in}).at(0);
      REQUIRE(out.shape() == ys);
      CHECK(test::max_abs_diff(out, expected) == 0);
    }
  }
}

// The whole stack (compiler partition, NPU kernels or host operators, runtime) on every ONNX
// backend node test of Debian's libonnx-testdata whose single node is in the supported-op table
// (npu_operators() + cpu_op_list()). Inputs after the first are bound as constants. Cases the IR
// cannot import (float16, double, strings, sequences) or that the compiler refuses with a reason
// are listed, and every op of the table that has an importable case must run at least one.
TEST_CASE("ONNX backend node tests of the supported-op table run through the runtime", "[conformance]") {
  const fs::path root = FURIOSA_ONNX_TESTDATA_DIR;
  REQUIRE(fs::is_directory(root));
  std::set<std::string> table;
  for (const auto& op : compiler::npu_operators()) table.insert(op);
  for (const auto& op : host::cpu_op_list()) table.insert(op);
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root)) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  std::map<std::string, int> ran, on_npu;
  std::vector<std::string> skipped;
  for (const auto& dir : dirs) {
    if (!fs::exists(dir / "model.onnx") || !fs::exists(dir / "test_data_set_0")) continue;
    compiler::Graph g;
    try {
      g = compiler::import_onnx(dir / "model.onnx");
    } catch (const Error& e) {
      continue;  // types the runtime does not have (float16, double, string, sequences)
    }
    if (g.nodes.size() != 1 || !table.count(g.nodes[0].qualified_op())) continue;
    const std::string op = g.nodes[0].qualified_op();
    // Where the ONNX reference and ONNX Runtime (the project's reference) disagree, the library
    // follows ONNX Runtime (tests/host/test_cpu_ops_onnx_conformance.cpp's kExcludedCases has the
    // details).
    if (dir.filename() == "test_resize_downsample_scales_linear_align_corners" ||
        dir.filename() == "test_resize_downsample_scales_cubic_align_corners") {
      skipped.push_back(fmt::format("{} ({}): follows ONNX Runtime, not the ONNX reference",
                                    dir.filename().string(), op));
      continue;
    }
    const fs::path sdir = dir / "test_data_set_0";
    std::vector<std::string> names;
    for (int id : g.inputs) names.push_back(g.values[static_cast<std::size_t>(id)].name);
    std::vector<Tensor> feed;
    std::unique_ptr<runtime::Runner> runner;
    try {
      for (std::size_t i = 0; i < names.size(); ++i) {
        Tensor t = compiler::load_tensor_pb(sdir / fmt::format("input_{}.pb", i));
        if (i == 0) feed.push_back(std::move(t));
        else g.bind_constant(names[i], std::move(t));
      }
      runner = runtime::create_runner(std::move(g));
    } catch (const Error& e) {
      skipped.push_back(fmt::format("{} ({}): {}", dir.filename().string(), op,
                                    std::string(e.what()).substr(0, std::string(e.what()).find('\n'))));
      continue;
    }
    auto out = runner->run(feed);
    for (std::size_t o = 0; o < out.size(); ++o) {
      Tensor expected = compiler::load_tensor_pb(sdir / fmt::format("output_{}.pb", o));
      INFO(dir.filename().string() << " output " << o);
      REQUIRE(out[o].dtype() == expected.dtype());
      REQUIRE(out[o].shape() == expected.shape());
      for (std::size_t i = 0; i < static_cast<std::size_t>(expected.elements()); ++i) {
        const double a = test::element(out[o], i), e = test::element(expected, i);
        if (expected.dtype() == DType::Float32) {
          CHECK(std::abs(a - e) <= 1e-7 + 1e-3 * std::abs(e));  // numpy assert_allclose defaults of ONNX
        } else {
          CHECK(a == e);
        }
      }
    }
    ++ran[op];
    if (!runner->compiled().npu_calls.empty()) ++on_npu[op];
  }
  for (const auto& s : skipped) UNSCOPED_INFO("skipped " << s);
  int total = 0, npu = 0;
  for (const auto& [op, n] : ran) total += n;
  for (const auto& [op, n] : on_npu) npu += n;
  fmt::print("runtime conformance: {} cases over {} ops ({} cases ran NPU programs), {} refused:\n", total,
             ran.size(), npu, skipped.size());
  for (const auto& s : skipped) fmt::print("  refused {}\n", s);
  // Ops of the table with importable single-node cases must have run; com.microsoft ops have no
  // ONNX backend cases, and Cast's are all float16/double/string (see
  // test_cpu_ops_onnx_conformance.cpp).
  for (const char* op : {"QLinearConv", "QLinearMatMul", "QuantizeLinear", "DequantizeLinear", "MaxPool",
                         "ConvInteger", "MatMulInteger", "DynamicQuantizeLinear", "Softmax", "Conv", "Reshape",
                         "Transpose", "Concat", "Split", "Gemm", "ReduceMean"}) {
    INFO(op);
    CHECK(ran[op] > 0);
  }
  CHECK(on_npu["QLinearConv"] > 0);
  CHECK(on_npu["MaxPool"] > 0);
}
