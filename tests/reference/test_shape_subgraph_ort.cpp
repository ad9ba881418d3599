// Shape subgraphs folded at compile time once free dims are pinned (issue 33): an FPN-style
// quantized model whose input has symbolic H and W, whose Resize sizes and Tile repeats are
// computed at run time from Shape -> Slice -> Mul/Div -> Concat chains, runs with
// CompilerOptions::input_shapes (furiosa-run --input-shape) and equals ONNX Runtime 1.30 on the
// same file, which resolves the shapes itself.
//
//   x [1, 3, H, W] -> QuantizeLinear -> c0 = QLinearConv 1x1 (3 -> 4)           [1, 4, H, W]
//     -> c1 = QLinearConv 1x1 stride 2 -> c2 = QLinearConv 1x1 stride 2        [.., H/2, W/2], [..,
//     H/4, W/4]
//   p1 = QLinearAdd(Resize(c2, sizes = [1, 4] ++ Shape(c1)[2:4]), c1)
//   p0 = QLinearAdd(Resize(p1, sizes = [1, 4] ++ Shape(p1)[2:4] * 2), c0)      -> y
//   (DequantizeLinear) t  = Tile(c2, repeats = [1, 1] ++ Shape(c1)[2:4] / Shape(c2)[2:4]) -> yt
//   (DequantizeLinear)
//
// Shape(p1) has a shape only once the first Resize's sizes are folded, so the second level folds
// in a later round of fold_constants (its fixpoint). Input values are multiples of the
// quantization step and the convolutions are exact selections, so every difference would be the
// folding's or a kernel's. node and onnxruntime-node are required (ort_reference.h).
#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "furiosa/compiler/compiler.h"
#include "furiosa/core/error.h"
#include "furiosa/runtime/runner.h"
#include "onnx_model_builder.h"
#include "ort_reference.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

constexpr float kStep = 0.0625f;

void write_fpn_model(const fs::path& path) {
  test::OnnxModelBuilder b("fpn_shape_subgraphs");
  using Dim = test::OnnxModelBuilder::Dim;
  const std::vector<Dim> dims = {std::int64_t{1}, std::int64_t{3}, std::string("H"),
                                 std::string("W")};
  test::OnnxModelBuilder::value(b.g->mutable_input(), "x", &dims);
  b.init<float>("step", onnx::TensorProto::FLOAT, {}, {kStep});
  b.init<float>("one", onnx::TensorProto::FLOAT, {}, {1.0f});
  b.init<std::uint8_t>("zp", onnx::TensorProto::UINT8, {}, {128});
  b.init<std::int8_t>("wzp", onnx::TensorProto::INT8, {}, {0});
  // c0: output channel i selects input channel i % 3; c1, c2: identities.
  std::vector<std::int8_t> w0(12, 0), w1(16, 0);
  for (int i = 0; i < 4; ++i) {
    w0[static_cast<std::size_t>(i * 3 + i % 3)] = 1;
    w1[static_cast<std::size_t>(i * 4 + i)] = 1;
  }
  b.init<std::int8_t>("w0", onnx::TensorProto::INT8, {4, 3, 1, 1}, w0);
  b.init<std::int8_t>("w1", onnx::TensorProto::INT8, {4, 4, 1, 1}, w1);
  b.init<float>("roi", onnx::TensorProto::FLOAT, {0}, {});
  b.init<float>("no_scales", onnx::TensorProto::FLOAT, {0}, {});
  b.init<std::int64_t>("nc", onnx::TensorProto::INT64, {2}, {1, 4});
  b.init<std::int64_t>("ones", onnx::TensorProto::INT64, {2}, {1, 1});
  b.init<std::int64_t>("two", onnx::TensorProto::INT64, {1}, {2});
  b.init<std::int64_t>("hw_start", onnx::TensorProto::INT64, {1}, {2});
  b.init<std::int64_t>("hw_end", onnx::TensorProto::INT64, {1}, {4});

  b.node("QuantizeLinear", {"x", "step", "zp"}, "xq");
  b.node("QLinearConv", {"xq", "step", "zp", "w0", "one", "wzp", "step", "zp"}, "c0");
  auto* c1 = b.node("QLinearConv", {"c0", "step", "zp", "w1", "one", "wzp", "step", "zp"}, "c1");
  test::OnnxModelBuilder::attr(c1, "strides", std::vector<std::int64_t>{2, 2});
  auto* c2 = b.node("QLinearConv", {"c1", "step", "zp", "w1", "one", "wzp", "step", "zp"}, "c2");
  test::OnnxModelBuilder::attr(c2, "strides", std::vector<std::int64_t>{2, 2});
  auto nearest = [&](const std::string& x, const std::string& sizes, const std::string& out) {
    auto* r = b.node("Resize", {x, "roi", "no_scales", sizes}, out);
    test::OnnxModelBuilder::attr(r, "mode", "nearest");
    test::OnnxModelBuilder::attr(r, "coordinate_transformation_mode", "asymmetric");
    test::OnnxModelBuilder::attr(r, "nearest_mode", "floor");
  };
  auto hw_of = [&](const std::string& v) {
    b.node("Shape", {v}, "shape_" + v);
    b.node("Slice", {"shape_" + v, "hw_start", "hw_end"}, "hw_" + v);
    return "hw_" + v;
  };
  auto concat = [&](const std::vector<std::string>& in, const std::string& out) {
    test::OnnxModelBuilder::attr(b.node("Concat", in, out), "axis", std::int64_t{0});
  };
  // Level 1: c2 up to c1's size.
  concat({"nc", hw_of("c1")}, "sizes1");
  nearest("c2", "sizes1", "r1");
  b.contrib("QLinearAdd", {"r1", "step", "zp", "c1", "step", "zp", "step", "zp"}, "p1");
  // Level 0: p1 up to twice its own size (known only once level 1 has folded).
  b.node("Mul", {hw_of("p1"), "two"}, "hw2");
  concat({"nc", "hw2"}, "sizes0");
  nearest("p1", "sizes0", "r0");
  b.contrib("QLinearAdd", {"r0", "step", "zp", "c0", "step", "zp", "step", "zp"}, "p0");
  b.node("DequantizeLinear", {"p0", "step", "zp"}, "y");
  b.output("y");
  // Tile repeats: c1's spatial size over c2's.
  b.node("Div", {"hw_c1", hw_of("c2")}, "ratio");
  concat({"ones", "ratio"}, "repeats");
  b.node("Tile", {"c2", "repeats"}, "t");
  b.node("DequantizeLinear", {"t", "step", "zp"}, "yt");
  b.output("yt");
  b.save(path);
}

// Float32 values that are exact multiples of kStep over the whole uint8 range (zero point 128).
Tensor seeded_codes(const Shape& shape, unsigned seed) {
  Tensor t(DType::Float32, shape);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> code(0, 255);
  for (float& v : t.as<float>()) v = static_cast<float>(code(gen) - 128) * kStep;
  return t;
}

fs::path work_dir() { return fs::path(FURIOSA_TEST_WORK_DIR) / "shape_subgraphs"; }

}  // namespace

TEST_CASE(
    "Shape subgraphs fold once input_shapes pins the free dims, and the model equals ONNX Runtime "
    "1.30",
    "[reference][shape]") {
  const fs::path path = work_dir() / "fpn.onnx";
  write_fpn_model(path);
  for (const Shape& shape : {Shape{1, 3, 32, 48}, Shape{1, 3, 16, 8}}) {
    INFO("input shape " << shape_to_string(shape));
    std::vector<Tensor> inputs = {seeded_codes(shape, 3300u), seeded_codes(shape, 3301u)};
    const auto ort =
        test::run_ort(path, "x", inputs, work_dir() / fmt::format("ort_{}x{}", shape[2], shape[3]));

    runtime::RunnerOptions opts;
    opts.device = "npu0pe0";
    opts.compiler_config.input_shapes["x"] = {shape.begin(), shape.end()};
    auto runner = runtime::create_runner(path, opts);
    // Everything computed from shapes became a constant: no Shape, Slice, Mul, Div or Concat is
    // left to run, and the Resizes and the Tile got static sizes.
    const auto& report = runner->compiled().report;
    int folded = 0;
    for (const auto& e : report.entries) {
      if (e.op == "Shape" || e.op == "Slice" || e.op == "Concat" || e.op == "Mul" ||
          e.op == "Div") {
        INFO("node " << e.node_name << " placed " << e.placement);
        CHECK(e.placement == "constant");
        ++folded;
      }
    }
    CHECK(folded == 11);  // 3 Shape, 3 Slice, 1 Mul, 1 Div, 3 Concat
    const auto& outs = runner->model().outputs;
    REQUIRE(outs.size() == 2);
    CHECK(outs[0].shape == Shape{1, 4, shape[2], shape[3]});
    CHECK(outs[1].shape == Shape{1, 4, shape[2] / 2, shape[3] / 2});
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto ours = runner->run({inputs[i]});
      REQUIRE(ours.size() == 2);
      for (std::size_t o = 0; o < outs.size(); ++o) {
        INFO("input " << i << ", output " << outs[o].name);
        const auto it = ort[i].find(outs[o].name);
        REQUIRE(it != ort[i].end());
        const auto v = ours[o].as<float>();
        REQUIRE(v.size() == it->second.size());
        std::size_t differing = 0;
        for (std::size_t k = 0; k < v.size(); ++k) differing += v[k] != it->second[k] ? 1 : 0;
        CHECK(differing == 0);
      }
    }
  }
}

TEST_CASE("A free dim left unpinned is refused naming the input and the knob that pins it",
          "[reference][shape]") {
  const fs::path path = work_dir() / "fpn_unpinned.onnx";
  write_fpn_model(path);
  runtime::RunnerOptions opts;
  opts.device = "npu0pe0";
  try {
    (void)runtime::create_runner(path, opts);
    FAIL("a model with free dims H, W compiled without input_shapes");
  } catch (const Error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("graph input 'x' has symbolic dim 2 ('H')") != std::string::npos);
    CHECK(what.find("--input-shape x=") != std::string::npos);
  }
  // A pin that contradicts a fixed dim, or has the wrong rank, is refused naming the input.
  for (const std::vector<std::int64_t>& bad :
       {std::vector<std::int64_t>{1, 4, 32, 32}, {1, 3, 32}, {1, 3, 0, 32}}) {
    opts.compiler_config.input_shapes["x"] = bad;
    try {
      (void)runtime::create_runner(path, opts);
      FAIL("input_shapes accepted a shape the model cannot take");
    } catch (const Error& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK(what.find("input_shapes: input 'x' cannot take shape") != std::string::npos);
    }
  }
  opts.compiler_config.input_shapes.clear();
  opts.compiler_config.input_shapes["images"] = {1, 3, 32, 32};
  CHECK_THROWS_WITH(
      runtime::create_runner(path, opts),
      Catch::Contains("input_shapes: the model has no input named 'images' (inputs: x)"));
}
