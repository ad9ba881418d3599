// compiler-bridge on real models: import, shape inference, partition record, errors.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <random>

#include <onnx/onnx_pb.h>

#include "furiosa/compiler/compiler.h"
#include "furiosa/compiler/onnx_import.h"
#include "furiosa/core/error.h"
#include "memory_plan.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

const compiler::PartitionEntry* entry(const compiler::PartitionReport& r, const std::string& node) {
  for (const auto& e : r.entries) {
    if (e.node_name == node) return &e;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("mnist-12-int8 is partitioned into Quantize/Lower, an NPU program and Dequantize", "[compiler]") {
  auto g = compiler::import_onnx(test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx"));
  REQUIRE(g.nodes.size() == 11);
  auto cm = compiler::compile(std::move(g), {});
  // QuantizeLinear -> host Quantize, width 28 -> host Lower, one NPU program, DequantizeLinear ->
  // host Dequantize.
  REQUIRE(cm.steps.size() == 4);
  CHECK(cm.steps[0].cpu.kind == compiler::CpuOpKind::Quantize);
  CHECK(cm.steps[1].cpu.kind == compiler::CpuOpKind::Lower);
  REQUIRE(cm.steps[2].kind == compiler::Step::Kind::Npu);
  CHECK(cm.steps[3].cpu.kind == compiler::CpuOpKind::Dequantize);
  CHECK(cm.steps[3].cpu.scales.at(0) == Approx(59.930737f));
  REQUIRE(cm.npu_calls.size() == 1);
  const auto& program = cm.npu_calls[0].program;
  std::vector<std::string> kernels;
  for (const auto& k : program->kernels) kernels.emplace_back(isa::kernel_name(k.kind));
  CHECK(kernels == std::vector<std::string>{"LowLevelConv2d", "LowLevelMaxPool", "LowLevelConv2d",
                                            "LowLevelMaxPool", "LowLevelReshape", "LowLevelMatMul",
                                            "LowLevelAdd"});
  // The DequantizeLinear -> MaxPool -> Reshape -> QuantizeLinear chain is folded.
  const auto* dq = entry(cm.report, "Convolution110_DequantizeLinear");
  const auto* folded_q = entry(cm.report, "Pooling160_Output_0_reshape0_QuantizeLinear");
  for (const auto& e : cm.report.entries) {
    if (e.placement == "folded") CHECK_THAT(e.reason, Catch::Contains("quantized tensor"));
  }
  (void)dq;
  (void)folded_q;
  CHECK(cm.report.count("folded") == 2);
  CHECK(cm.report.count("npu") == 7);
  CHECK(cm.report.count("cpu") == 2);
  CHECK(cm.report.entries.size() == 11);
  const std::string table = cm.report.to_string();
  CHECK_THAT(table, Catch::Contains("LowLevelConv2d") && Catch::Contains("not a multiple of 32"));
  // Memory: every tensor lies inside the program's DRAM region; constants first.
  for (const auto& k : program->kernels) {
    for (const auto& r : k.inputs) CHECK(r.address + r.size_bytes() <= program->dram_bytes);
    for (const auto& r : k.outputs) {
      CHECK(r.address >= program->constants.size());
      CHECK(r.address + r.size_bytes() <= program->dram_bytes);
    }
  }
}

TEST_CASE("shape inference on mnist-12-int8 matches the declared shapes", "[compiler]") {
  auto g = compiler::import_onnx(test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx"));
  compiler::infer_shapes(g, {});
  auto shape_of = [&](const std::string& name) {
    int id = g.find_value(name);
    REQUIRE(id >= 0);
    return g.values[static_cast<std::size_t>(id)].shape;
  };
  CHECK(shape_of("Convolution28_QuantizeLinear_0") == Shape{1, 8, 28, 28});
  CHECK(shape_of("Pooling66_Output_0_quantized") == Shape{1, 8, 14, 14});
  CHECK(shape_of("Pooling160_Output_0") == Shape{1, 16, 4, 4});
  CHECK(shape_of("Plus214_Output_0") == Shape{1, 10});
}

TEST_CASE("model file errors name the file", "[compiler][errors]") {
  SECTION("missing") {
    try {
      compiler::import_onnx("/nonexistent/model.onnx");
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::ModelLoadFailed);
      CHECK_THAT(e.what(), Catch::Contains("/nonexistent/model.onnx"));
    }
  }
  SECTION("truncated") {
    const auto src = test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
    std::ifstream in(src, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      compiler::import_onnx_bytes(bytes.substr(0, bytes.size() / 2), "half.onnx");
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::ModelLoadFailed);
      CHECK_THAT(e.what(), Catch::Contains("half.onnx"));
    }
  }
}

TEST_CASE("declared sizes are checked against the data before anything is allocated", "[compiler][errors]") {
  // mnist-12-int8 with one initializer's dims claiming 4294967296 x 5 elements while its data stays.
  const auto src = test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  std::ifstream in(src, std::ios::binary);
  onnx::ModelProto model;
  REQUIRE(model.ParseFromIstream(&in));
  REQUIRE(model.graph().initializer_size() > 0);
  const auto refusal = [&](const onnx::ModelProto& m) {
    std::string bytes;
    REQUIRE(m.SerializeToString(&bytes));
    try {
      (void)compiler::import_onnx_bytes(bytes, "bad.onnx");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    FAIL("the model was accepted");
    return std::string();
  };
  SECTION("more elements than any tensor may have") {
    onnx::ModelProto m = model;
    auto* init = m.mutable_graph()->mutable_initializer(0);
    const std::string name = init->name();
    init->clear_dims();
    init->add_dims(4294967296);
    init->add_dims(5);
    const std::string what = refusal(m);
    CHECK_THAT(what, Catch::Contains("bad.onnx") && Catch::Contains(name));
    CHECK_THAT(what, Catch::Contains("[4294967296, 5]") && Catch::Contains("its dims claim more than"));
  }
  SECTION("more elements than the data holds") {
    onnx::ModelProto m = model;
    onnx::TensorProto* init = nullptr;
    for (auto& t : *m.mutable_graph()->mutable_initializer()) {
      if (t.has_raw_data() && t.raw_data().size() > 16) init = &t;
    }
    REQUIRE(init != nullptr);
    init->clear_dims();
    init->add_dims(4294967);
    init->add_dims(5);
    CHECK_THAT(refusal(m), Catch::Contains("bad.onnx") && Catch::Contains("raw data is") && Catch::Contains("expected"));
  }
  SECTION("dims whose product overflows") {
    onnx::ModelProto m = model;
    auto* init = m.mutable_graph()->mutable_initializer(0);
    init->clear_dims();
    for (int i = 0; i < 4; ++i) init->add_dims(std::int64_t{1} << 31);
    CHECK_THAT(refusal(m), Catch::Contains("its dims claim more than"));
  }
  SECTION("typed values fewer than the shape needs") {
    onnx::ModelProto m = model;
    auto* init = m.mutable_graph()->mutable_initializer(0);
    const std::int64_t n = [&] {
      std::int64_t e = 1;
      for (auto d : init->dims()) e *= d;
      return e;
    }();
    init->clear_raw_data();
    init->clear_float_data();
    init->clear_int32_data();
    init->clear_int64_data();
    init->add_dims(1000000);
    CHECK_THAT(refusal(m), Catch::Contains(fmt::format("holds 0 values, its shape needs {}", n * 1000000)));
  }
}

TEST_CASE("TensorProto files load with their names", "[compiler]") {
  std::string name;
  auto t = compiler::load_tensor_pb(test::shared_model("onnx-zoo/mnist-12-int8/test_data_set_0/input_0.pb"), &name);
  CHECK(name == "Input3");
  CHECK(t.dtype() == DType::Float32);
  CHECK(t.shape() == Shape{1, 1, 28, 28});
}

TEST_CASE("memory plan: buffers share DRAM only when their live ranges are disjoint", "[compiler][memory]") {
  using compiler::detail::BufferUse;
  // A chain a -> b -> c: a and c never live together, so c reuses a's bytes; b overlaps both.
  std::uint64_t peak = 0;
  auto offsets = compiler::detail::plan_buffers({{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}}, 64, peak);
  CHECK(offsets[0] == offsets[2]);
  CHECK(offsets[1] != offsets[0]);
  CHECK(peak == 2048);  // two 1000-byte buffers, each rounded up to 64 bytes

  // Random instances: every pair live at the same time is disjoint in DRAM, offsets are aligned,
  // and the peak is at least the largest sum of sizes live at one kernel.
  std::mt19937 rng(1234);
  for (int round = 0; round < 200; ++round) {
    std::vector<BufferUse> uses(1 + rng() % 40);
    for (auto& u : uses) {
      u.size = 1 + rng() % 5000;
      u.first = static_cast<std::int64_t>(rng() % 30);
      u.last = u.first + static_cast<std::int64_t>(rng() % 8);
    }
    offsets = compiler::detail::plan_buffers(uses, 64, peak);
    std::uint64_t busiest = 0;
    for (std::int64_t k = 0; k < 40; ++k) {
      std::uint64_t live = 0;
      for (const auto& u : uses) live += u.first <= k && k <= u.last ? u.size : 0;
      busiest = std::max(busiest, live);
    }
    CHECK(peak >= busiest);
    for (std::size_t i = 0; i < uses.size(); ++i) {
      CHECK(offsets[i] % 64 == 0);
      CHECK(offsets[i] + uses[i].size <= peak);
      for (std::size_t j = i + 1; j < uses.size(); ++j) {
        const bool together = uses[i].first <= uses[j].last && uses[j].first <= uses[i].last;
        const bool apart = offsets[i] + uses[i].size <= offsets[j] || offsets[j] + uses[j].size <= offsets[i];
        if (together) CHECK(apart);
      }
    }
  }
}

TEST_CASE("memory plan: MobileNetV2's activations need a fraction of the unplanned DRAM", "[compiler][memory]") {
  auto graph = compiler::import_onnx(test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx"));
  const auto cm = compiler::compile(std::move(graph), {});
  REQUIRE_FALSE(cm.npu_calls.empty());
  for (const auto& call : cm.npu_calls) {
    INFO(call.program->name << ": activations " << call.activation_bytes << " B planned, "
                            << call.activation_bytes_unplanned << " B without reuse");
    CHECK(call.activation_bytes <= call.activation_bytes_unplanned);
    CHECK(call.program->dram_bytes >= call.activation_bytes);
  }
  const auto& main_call = cm.npu_calls.front();
  WARN("MobileNetV2 program 0: activations " << main_call.activation_bytes << " B with reuse, "
                                             << main_call.activation_bytes_unplanned << " B without");
  // The 112x112 stages dominate: with reuse a few of them live at once instead of all of them.
  CHECK(main_call.activation_bytes * 4 < main_call.activation_bytes_unplanned);
  bool noted = false;
  for (const auto& note : cm.report.notes) noted = noted || note.find("buffer reuse by liveness") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("placement, the unsupported-operator listing and npu_operators() read one op table", "[compiler]") {
  const auto npu_ops = compiler::npu_operators();
  const auto listing = compiler::supported_operators();
  for (const auto& op : npu_ops) {
    INFO(op);
    CHECK(std::any_of(listing.begin(), listing.end(),
                      [&](const std::string& line) { return line.find(": " + op + " (") != std::string::npos; }));
  }
  // Every node a real model places on the NPU is an op of the table.
  auto g = compiler::import_onnx(test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx"));
  auto cm = compiler::compile(std::move(g), {});
  std::size_t on_npu = 0;
  for (const auto& e : cm.report.entries) {
    if (e.placement != "npu") continue;
    ++on_npu;
    INFO(e.node_name << " " << e.op);
    CHECK(std::find(npu_ops.begin(), npu_ops.end(), e.op) != npu_ops.end());
  }
  CHECK(on_npu == 66);  // 52 QLinearConv, 11 QLinearAdd, pooling, Reshape, QLinearMatMul
}

TEST_CASE("summarize_placement counts the NPU's and the host's MACs and lists the host steps", "[compiler]") {
  // MNIST: conv 5x5 1->8 on 28x28 (156,800 MACs), conv 5x5 8->16 on 14x14 (627,200), fc 256x10
  // (2,560): 786,560 MACs, on the NPU in the int8 model and on the host in the float one.
  constexpr std::uint64_t kMnistMacs = 156'800 + 627'200 + 2'560;
  const auto npu = compiler::summarize_placement(
      compiler::compile(compiler::import_onnx(test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx")), {}));
  CHECK(npu.npu_macs == kMnistMacs);
  CHECK(npu.host_macs == 0);
  CHECK(npu.npu_programs == 1);
  CHECK(npu.npu_mac_share_percent() == 100.0);
  REQUIRE(npu.host_steps.size() == 3);  // Quantize, Lower, Dequantize
  CHECK_THAT(npu.host_steps[0], Catch::StartsWith("Quantize"));
  CHECK_THAT(npu.host_steps[1], Catch::StartsWith("Lower"));
  CHECK_THAT(npu.host_steps[2], Catch::StartsWith("Dequantize"));
  CHECK_THAT(npu.to_string(), Catch::Contains("NPU share of MACs: 100.00%") && Catch::Contains("NPU programs: 1"));

  const auto host = compiler::summarize_placement(
      compiler::compile(compiler::import_onnx(test::shared_model("onnx-zoo/mnist-12/mnist-12.onnx")), {}));
  CHECK(host.npu_macs == 0);
  CHECK(host.host_macs == kMnistMacs);
  CHECK(host.npu_programs == 0);
  CHECK(host.npu_mac_share_percent() == 0.0);
  CHECK_THAT(host.to_string(), Catch::Contains("NPU share of MACs: 0.00%") &&
                                   Catch::Contains("Conv 'Convolution28': no NPU kernel"));
}
