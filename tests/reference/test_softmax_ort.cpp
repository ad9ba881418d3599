// Quantized Softmax against ONNX Runtime 1.30 (issue 33). ORT fuses DequantizeLinear -> Softmax
// -> QuantizeLinear into com.microsoft QLinearSoftmax, whose lookup table, float32 sum and scaling
// round differently from the float Softmax (about one output in 10^5 with the quantizer's fixed
// 1/256 output scale, about one in 100 with a calibrated one: QLinearSoftmax scales by
// floor(1 / y_scale) and adds the zero point after rounding); this runtime computes the same
// kernel (furiosa::QLinearSoftmax, host/cpu_ops.h), and every output must be equal. Models: QDQ
// uint8 (reduced lengths 16, 40 and 1000: MLAS's 32-element blocks, its 16-element output blocks
// and their tails), int8 with both, neither and one of its Q -> DQ pairs moved to uint8 by ORT (the
// last one ORT leaves unfused, in float32), an opset-11 Softmax (over the dims from axis on), and
// com.microsoft QLinearSoftmax of QOperator models. node and onnxruntime-node are required
// (ort_reference.h).
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "furiosa/runtime/runner.h"
#include "onnx_model_builder.h"
#include "ort_reference.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

enum class Form { Qdq, QOperator };

struct SoftmaxCase {
  const char* name;
  Form form;
  bool is_signed;
  Shape shape;
  std::int64_t axis;
  int opset;
  float sx, sy;
  int zx, zy;
  bool extra_x = false, extra_y = false;  // the pair's Q also feeds a second DequantizeLinear
};

// Output scales: the quantizer's fixed 1/256, or calibrated ones (QLinearSoftmax then scales by
// floor(1 / y_scale), and its outputs differ from the float graph's in many places).
const std::vector<SoftmaxCase> kCases = {
    {"u8_d16_axis1", Form::Qdq, false, {1, 16, 4, 2000}, 1, 13, 0.13f, 1.0f / 256, 127, 0},
    {"u8_d40_calibrated", Form::Qdq, false, {2, 30, 40}, -1, 13, 0.07f, 0.0039f, 100, 0},
    {"u8_d10_calibrated", Form::Qdq, false, {64, 10}, -1, 13, 0.05f, 0.0041f, 128, 2},
    {"u8_d1000", Form::Qdq, false, {3, 1000}, -1, 13, 0.09f, 1.0f / 256, 180, 0},
    {"i8_moved_calibrated", Form::Qdq, true, {1, 16, 4, 50}, 1, 13, 0.11f, 0.0043f, -20, -128},
    {"i8_d40_not_moved",
     Form::Qdq,
     true,
     {2, 30, 40},
     -1,
     13,
     0.05f,
     0.0045f,
     10,
     -128,
     true,
     true},
    {"i8_half_moved", Form::Qdq, true, {2, 30, 40}, -1, 13, 0.05f, 0.0045f, 10, -128, true, false},
    {"u8_opset11_calibrated", Form::Qdq, false, {2, 3, 4, 5}, 1, 11, 0.2f, 0.0047f, 128, 0},
    {"i8_symmetric", Form::Qdq, true, {2, 120, 120}, -1, 13, 0.05f, 1.0f / 127, 0, 0},
    {"i8_symmetric_d16", Form::Qdq, true, {2, 120, 16}, -1, 13, 0.05f, 1.0f / 127, 0, 0},
    {"qoperator_u8", Form::QOperator, false, {4, 100}, -1, 13, 0.08f, 0.0041f, 120, 0},
    {"qoperator_i8", Form::QOperator, true, {4, 100}, -1, 13, 0.08f, 1.0f / 256, -5, -128},
};

int qtype(bool is_signed) { return is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8; }

// x -> QuantizeLinear -> (QDQ: DequantizeLinear -> Softmax -> QuantizeLinear; QOperator:
// com.microsoft QLinearSoftmax) -> DequantizeLinear -> y, and the extra DequantizeLinear outputs.
void write_model(const fs::path& path, const SoftmaxCase& c) {
  test::OnnxModelBuilder b("softmax", c.opset);
  b.input("x", c.shape);
  b.init<float>("sx", onnx::TensorProto::FLOAT, {}, {c.sx});
  b.init<float>("sy", onnx::TensorProto::FLOAT, {}, {c.sy});
  b.init<std::int8_t>("zx", qtype(c.is_signed), {}, {static_cast<std::int8_t>(c.zx)});
  b.init<std::int8_t>("zy", qtype(c.is_signed), {}, {static_cast<std::int8_t>(c.zy)});
  b.node("QuantizeLinear", {"x", "sx", "zx"}, "qx");
  if (c.form == Form::Qdq) {
    b.node("DequantizeLinear", {"qx", "sx", "zx"}, "dx");
    auto* s = b.node("Softmax", {"dx"}, "f");
    test::OnnxModelBuilder::attr(s, "axis", c.axis);
    b.node("QuantizeLinear", {"f", "sy", "zy"}, "qy");
  } else {
    auto* s = b.contrib("QLinearSoftmax", {"qx", "sx", "zx", "sy", "zy"}, "qy");
    test::OnnxModelBuilder::attr(s, "axis", c.axis);
    test::OnnxModelBuilder::attr(s, "opset", std::int64_t{c.opset});
  }
  b.node("DequantizeLinear", {"qy", "sy", "zy"}, "y");
  b.output("y");
  if (c.extra_x) {
    b.node("DequantizeLinear", {"qx", "sx", "zx"}, "e_x");
    b.output("e_x");
  }
  if (c.extra_y) {
    b.node("DequantizeLinear", {"qy", "sy", "zy"}, "e_y");
    b.output("e_y");
  }
  b.save(path);
}

}  // namespace

TEST_CASE("Quantized Softmax equals ONNX Runtime's QLinearSoftmax", "[reference][qdq][softmax]") {
  const fs::path dir = fs::path(FURIOSA_TEST_WORK_DIR) / "softmax";
  fs::create_directories(dir);
  unsigned seed = 33;
  std::size_t spread_total = 0;  // fused cases: where QLinearSoftmax differs from the float graph
  for (const SoftmaxCase& c : kCases) {
    INFO("case " << c.name);
    const fs::path path = dir / fmt::format("{}.onnx", c.name);
    write_model(path, c);
    // Inputs over the quantized range and a little beyond (saturating codes included).
    const float lo =
        (static_cast<float>(c.is_signed ? -128 : 0) - static_cast<float>(c.zx) - 3.0f) * c.sx;
    const float hi =
        (static_cast<float>(c.is_signed ? 127 : 255) - static_cast<float>(c.zx) + 3.0f) * c.sx;
    std::vector<Tensor> inputs;
    for (int k = 0; k < 3; ++k) inputs.push_back(test::seeded_uniform(c.shape, lo, hi, seed++));
    const auto ort = test::run_ort(path, "x", inputs, dir / c.name);
    const auto literal = test::run_ort(path, "x", inputs, dir / c.name / "disabled",
                                       test::OrtOptimization::Disabled);
    runtime::RunnerOptions opts;
    opts.device = "npu0pe0";
    auto runner = runtime::create_runner(path, opts);
    std::size_t differing = 0, total = 0, ort_spread = 0;
    std::set<float> values;
    double worst = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto out = runner->run({inputs[i]});
      const auto ours = out.at(0).as<float>();
      REQUIRE(runner->model().outputs.at(0).name == "y");
      const auto& ref = ort.at(i).at("y");
      REQUIRE(ours.size() == ref.size());
      for (std::size_t k = 0; k < ref.size(); ++k) {
        differing += ours[k] != ref[k] ? 1 : 0;
        worst = std::max(worst, std::abs(static_cast<double>(ours[k]) - ref[k]) / c.sy);
        ort_spread += ref[k] != literal.at(i).at("y")[k] ? 1 : 0;
        values.insert(ref[k]);
      }
      total += ref.size();
    }
    fmt::print(
        "softmax {}: {} of {} outputs differ from ONNX Runtime 1.30 (worst {:.0f} steps); ORT's "
        "optimized and "
        "unoptimized runs differ in {}; {} distinct output values\n",
        c.name, differing, total, worst, ort_spread, values.size());
    CHECK(values.size() >= 6);  // not a degenerate output
    spread_total += c.extra_x != c.extra_y ? 0 : ort_spread;
    CHECK(differing == 0);
  }
  // The cases reach the outputs where ORT's kernel and the literal graph round differently, so
  // a runtime computing the literal graph would fail this test.
  CHECK(spread_total > 0);
}
