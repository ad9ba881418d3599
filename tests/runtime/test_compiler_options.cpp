// The performance guide's compiler knobs (CompilerOptions) on real models: each one changes only
// the dtype or layout in which a tensor crosses the host boundary, never the values computed,
// and removes the host step it names.
#include <fmt/format.h>

#include <algorithm>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/host/layout.h"
#include "furiosa/host/quantize.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/from_graph.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"

using namespace furiosa;

namespace {

const std::string kMnist = "onnx-zoo/mnist-12-int8";

// Two runners live at once in each test, so the baseline takes PE 0 and the one with knobs PE 1.
runtime::RunnerOptions on_pe(int pe, const compiler::CompilerOptions& copts = {}) {
  runtime::RunnerOptions o;
  o.device = fmt::format("npu:0:{}", pe);
  o.compiler_config = copts;
  return o;
}

std::unique_ptr<runtime::Runner> mnist_runner(const compiler::CompilerOptions& copts) {
  const runtime::RunnerOptions o = on_pe(copts.without_quantize.empty() && copts.normalized_pixel_outputs.empty() &&
                                                 copts.permute_input.empty() && !copts.remove_lower &&
                                                 !copts.remove_unlower
                                             ? 0
                                             : 1,
                                         copts);
  return runtime::create_runner(test::shared_model(kMnist) / "mnist-12-int8.onnx", o);
}

Tensor mnist_input(int set) {
  return compiler::load_tensor_pb(test::shared_model(kMnist) / fmt::format("test_data_set_{}/input_0.pb", set));
}

std::size_t count_steps(const runtime::Runner& r, compiler::CpuOpKind kind) {
  const auto& steps = r.compiled().steps;
  return static_cast<std::size_t>(std::count_if(steps.begin(), steps.end(), [&](const compiler::Step& s) {
    return s.kind == compiler::Step::Kind::Cpu && s.cpu.kind == kind;
  }));
}

// The host Quantize step's parameters for the model's first input.
const compiler::CpuOp& quantize_step(const runtime::Runner& r) {
  for (const auto& s : r.compiled().steps) {
    if (s.kind == compiler::Step::Kind::Cpu && s.cpu.kind == compiler::CpuOpKind::Quantize) return s.cpu;
  }
  FAIL("no host Quantize step");
  throw;  // unreachable
}

Tensor quantized(const Tensor& x, float scale, std::int32_t zero_point) {
  Tensor q(DType::UInt8, x.shape());
  host::quantize(x.as<float>().data(), q.as<std::uint8_t>().data(), x.elements(), scale, zero_point);
  return q;
}

// A dense [N, C, H, W] tensor in the lowered layout: [N, C, H, padded W] with zero padding.
Tensor lowered(const Tensor& x) {
  Shape s = x.shape();
  s[3] = host::padded_width(s[3]);
  Tensor out(x.dtype(), s);
  host::lower(x.shape(), dtype_size(x.dtype()), x.bytes(), out.bytes());
  return out;
}

// Transpose of a 4-D tensor by `perm`: out.shape[j] = x.shape[perm[j]].
Tensor transposed(const Tensor& x, std::array<std::size_t, 4> perm) {
  const Shape& xs = x.shape();
  Shape os(4);
  for (std::size_t j = 0; j < 4; ++j) os[j] = xs[perm[j]];
  Tensor out(x.dtype(), os);
  const std::size_t es = dtype_size(x.dtype());
  std::array<std::int64_t, 4> xstride{xs[1] * xs[2] * xs[3], xs[2] * xs[3], xs[3], 1};
  std::array<std::int64_t, 4> i{};
  std::size_t o = 0;
  for (i[0] = 0; i[0] < os[0]; ++i[0])
    for (i[1] = 0; i[1] < os[1]; ++i[1])
      for (i[2] = 0; i[2] < os[2]; ++i[2])
        for (i[3] = 0; i[3] < os[3]; ++i[3], ++o) {
          std::int64_t src = 0;
          for (std::size_t j = 0; j < 4; ++j) src += i[j] * xstride[perm[j]];
          std::memcpy(out.bytes().data() + o * es, x.bytes().data() + static_cast<std::size_t>(src) * es, es);
        }
  return out;
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::equal(a.bytes().begin(), a.bytes().end(), b.bytes().begin(), b.bytes().end());
}

}  // namespace

TEST_CASE("without_quantize: the input is given quantized, no host Quantize, same outputs", "[runtime][knobs]") {
  auto base = mnist_runner({});
  const compiler::CpuOp q = quantize_step(*base);
  compiler::CompilerOptions copts;
  copts.without_quantize = {"Input3"};
  auto knob = mnist_runner(copts);
  CHECK(count_steps(*base, compiler::CpuOpKind::Quantize) == 1);
  CHECK(count_steps(*knob, compiler::CpuOpKind::Quantize) == 0);
  REQUIRE(knob->model().inputs[0].dtype == DType::UInt8);
  CHECK(knob->model().inputs[0].name == "Input3");
  CHECK(knob->model().inputs[0].shape == Shape{1, 1, 28, 28});
  for (int set = 0; set < 10; ++set) {
    const Tensor x = mnist_input(set);
    const auto want = base->run({x});
    const auto got = knob->run({quantized(x, q.scales.at(0), q.zero_points.at(0))});
    INFO("set " << set);
    CHECK(bit_equal(got.at(0), want.at(0)));
  }
}

TEST_CASE("without_quantize refuses an input that is not only quantized, naming it", "[runtime][knobs]") {
  compiler::CompilerOptions copts;
  copts.without_quantize = {"NoSuchInput"};
  try {
    mnist_runner(copts);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::IncompatibleModel);
    CHECK(e.tensor() == "NoSuchInput");
    CHECK_THAT(e.message(), Catch::Contains("Input3"));
  }
}

TEST_CASE("remove_lower: the quantized input is given lowered, no host Lower, same outputs", "[runtime][knobs]") {
  auto base = mnist_runner({});
  const compiler::CpuOp q = quantize_step(*base);
  compiler::CompilerOptions copts;
  copts.without_quantize = {"Input3"};
  copts.remove_lower = true;
  auto knob = mnist_runner(copts);
  CHECK(count_steps(*base, compiler::CpuOpKind::Lower) == 1);  // width 28 is not a multiple of 32
  CHECK(count_steps(*knob, compiler::CpuOpKind::Lower) == 0);
  CHECK(knob->model().inputs[0].shape == Shape{1, 1, 28, 32});
  for (int set = 0; set < 3; ++set) {
    const Tensor x = mnist_input(set);
    const auto want = base->run({x});
    const auto got = knob->run({lowered(quantized(x, q.scales.at(0), q.zero_points.at(0)))});
    CHECK(bit_equal(got.at(0), want.at(0)));
  }
}

// permute_input follows FuriosaAI's performance guide: the sequence permutes the model input's
// axes like torch.permute, so the caller's tensor is x.permute(perm) of the model's input x.
TEST_CASE("permute_input [0, 3, 1, 2] on an NHWC model takes NCHW images (the guide's case)",
          "[runtime][knobs]") {
  // MNISTnet_uint8_quant.tflite: a TFLite model, input [1, 28, 28, 1] NHWC.
  const auto dir = test::shared_model("furiosa-sdk/MNISTnet_uint8_quant");
  auto base = runtime::create_runner(dir / "MNISTnet_uint8_quant.tflite", on_pe(0));
  REQUIRE(base->model().inputs.at(0).shape == Shape{1, 28, 28, 1});
  runtime::RunnerOptions o = on_pe(1);
  o.compiler_config.permute_input[base->model().inputs.at(0).name] = {0, 3, 1, 2};
  auto knob = runtime::create_runner(dir / "MNISTnet_uint8_quant.tflite", o);
  CHECK(knob->model().inputs.at(0).shape == Shape{1, 1, 28, 28});
  CHECK(knob->model().inputs.at(0).format == "NCHW");
  CHECK(knob->model().inputs.at(0).dtype == base->model().inputs.at(0).dtype);
  for (int set = 0; set < 3; ++set) {
    const Tensor x =
        compiler::load_tensor_pb(dir / fmt::format("test_data_set_{}/input_0.pb", set));
    REQUIRE(x.shape() == Shape{1, 28, 28, 1});
    // The NCHW image the guide's program feeds: x.permute(0, 3, 1, 2).
    CHECK(bit_equal(knob->run({transposed(x, {0, 3, 1, 2})}).at(0), base->run({x}).at(0)));
  }
}

TEST_CASE(
    "permute_input [0, 2, 3, 1]: NHWC images for an NCHW model, transposed in the host Lower step",
    "[runtime][knobs]") {
  SECTION("mnist-12-int8 (one channel, width 28: host Lower)") {
    compiler::CompilerOptions copts;
    copts.permute_input["Input3"] = {0, 2, 3, 1};
    auto base = mnist_runner({});
    auto knob = mnist_runner(copts);
    CHECK(knob->model().inputs[0].shape == Shape{1, 28, 28, 1});
    CHECK(knob->model().inputs[0].format == "NHWC");
    CHECK(count_steps(*knob, compiler::CpuOpKind::External) == 0);  // no host Transpose
    for (int set = 0; set < 3; ++set) {
      const Tensor x = mnist_input(set);
      CHECK(bit_equal(knob->run({transposed(x, {0, 2, 3, 1})}).at(0), base->run({x}).at(0)));
    }
  }
  SECTION("MobileNetV2 (three channels, width 224)") {
    const auto dir = test::shared_model("onnx-zoo/mobilenetv2-12-int8");
    auto base = runtime::create_runner(dir / "mobilenetv2-12-int8.onnx", on_pe(0));
    runtime::RunnerOptions o = on_pe(1);
    o.compiler_config.permute_input["input"] = {0, 2, 3, 1};
    auto knob = runtime::create_runner(dir / "mobilenetv2-12-int8.onnx", o);
    CHECK(knob->model().inputs[0].shape == Shape{1, 224, 224, 3});
    CHECK(count_steps(*knob, compiler::CpuOpKind::External) == 0);
    CHECK(count_steps(*knob, compiler::CpuOpKind::Lower) == 1);  // the NHWC -> lowered NCHW transpose
    const Tensor x = compiler::load_tensor_pb(dir / "test_data_set_0/input_0.pb");
    CHECK(bit_equal(knob->run({transposed(x, {0, 2, 3, 1})}).at(0), base->run({x}).at(0)));
  }
}

TEST_CASE("normalized_pixel_outputs: uint8 = QuantizeLinear(float output, 1/255, 0), no host Dequantize",
          "[runtime][knobs]") {
  // MobileNetV2's logits: a model output produced by a DequantizeLinear, with values inside
  // (0, 1) as well as saturating ones.
  const auto dir = test::shared_model("onnx-zoo/mobilenetv2-12-int8");
  auto base = runtime::create_runner(dir / "mobilenetv2-12-int8.onnx", on_pe(0));
  const std::string name = base->model().outputs.at(0).name;
  compiler::CompilerOptions copts;
  copts.normalized_pixel_outputs = {name};
  auto knob = runtime::create_runner(dir / "mobilenetv2-12-int8.onnx", on_pe(1, copts));
  CHECK(count_steps(*base, compiler::CpuOpKind::Dequantize) == 1);
  CHECK(count_steps(*knob, compiler::CpuOpKind::Dequantize) == 0);
  REQUIRE(knob->model().outputs[0].dtype == DType::UInt8);
  CHECK(knob->model().outputs[0].name == name);
  const Tensor x = compiler::load_tensor_pb(dir / "test_data_set_0/input_0.pb");
  const Tensor y = base->run({x}).at(0);
  const Tensor pixels = knob->run({x}).at(0);
  CHECK(bit_equal(pixels, quantized(y, 1.0f / 255.0f, 0)));
  std::size_t unsaturated = 0;
  for (auto v : pixels.as<std::uint8_t>()) unsaturated += v > 0 && v < 255;
  CHECK(unsaturated > 10);  // the comparison covers rounding, not only saturation
}

TEST_CASE("remove_unlower: a lowered 4-D output is returned lowered, no host Unlower", "[runtime][knobs]") {
  // mnist-12-int8 with the first convolution's quantized output [1, 8, 28, 28] as an extra output.
  auto graph_with_conv_output = [] {
    auto g = compiler::import_onnx(test::shared_model(kMnist) / "mnist-12-int8.onnx");
    auto conv = std::find_if(g.nodes.begin(), g.nodes.end(), [](const auto& n) { return n.op_type == "QLinearConv"; });
    REQUIRE(conv != g.nodes.end());
    g.outputs.push_back(conv->outputs[0]);
    return g;
  };
  auto base = runtime::create_runner(graph_with_conv_output(), on_pe(0));
  runtime::RunnerOptions o = on_pe(1);
  o.compiler_config.remove_unlower = true;
  auto knob = runtime::create_runner(graph_with_conv_output(), o);
  REQUIRE(base->model().outputs.size() == 2);
  CHECK(base->model().outputs[1].shape == Shape{1, 8, 28, 28});
  CHECK(knob->model().outputs[1].shape == Shape{1, 8, 28, 32});
  CHECK(count_steps(*base, compiler::CpuOpKind::Unlower) == 1);
  CHECK(count_steps(*knob, compiler::CpuOpKind::Unlower) == 0);
  const Tensor x = mnist_input(0);
  const auto want = base->run({x});
  const auto got = knob->run({x});
  CHECK(bit_equal(got.at(0), want.at(0)));
  CHECK(bit_equal(got.at(1), lowered(want.at(1))));
}
