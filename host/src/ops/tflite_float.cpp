// The host operator library (host/cpu_ops.h): furiosa::TFLiteFloat, TFLite's float32 arithmetic
// as TensorFlow Lite 2.14's reference kernels write it, element by element with numpy
// broadcasting (tensorflow/lite/kernels/internal/reference/{add,sub,mul,div,prelu,
// leaky_relu,hard_swish}.h, kernels/squared_difference.cc). The ONNX host operators give the same
// values except at signed zeros: TFLite's LeakyRelu multiplies when x <= 0 (val > 0 ? val :
// val * alpha), HardSwish clamps with std::max(0, x + 3) (+0 for -0), so they are written out
// here once. Attribute kind:
//  - "add", "sub", "mul", "div": a op b, then min(max(v, activation_min), activation_max)
//    (ActivationFunctionWithMinMax; the importer passes CalculateActivationRange<float>);
//  - "squared_difference": (a - b) * (a - b);
//  - "prelu" (b = alpha): a >= 0 ? a : a * b (kernels/activations.cc ApplyPrelu);
//  - "leaky_relu" (one input, attribute alpha): x > 0 ? x : x * alpha;
//  - "hard_swish" (one input): x * min(6, max(0, x + 3)) / 6.
// Built with -ffp-contract=off (host/CMakeLists.txt): no fused multiply-add.
#include "ops_common.h"

namespace furiosa::host::detail {
namespace {

enum class Kind { Add, Sub, Mul, Div, SquaredDifference, Prelu, LeakyRelu, HardSwish };

std::optional<Kind> kind_of(const Node& n) {
  static const std::array<std::pair<const char*, Kind>, 8> kNames = {{
      {"add", Kind::Add},
      {"sub", Kind::Sub},
      {"mul", Kind::Mul},
      {"div", Kind::Div},
      {"squared_difference", Kind::SquaredDifference},
      {"prelu", Kind::Prelu},
      {"leaky_relu", Kind::LeakyRelu},
      {"hard_swish", Kind::HardSwish},
  }};
  const std::string k = n.attr_string("kind", "");
  for (const auto& [name, kind] : kNames) {
    if (k == name) return kind;
  }
  return std::nullopt;
}

bool unary(Kind k) { return k == Kind::LeakyRelu || k == Kind::HardSwish; }

std::string check_tflite_float(const Node& n, const DtypeList& d) {
  Checker ch{n, d, {}};
  const auto kind = kind_of(n);
  ch.require(kind.has_value(),
             fmt::format("attribute 'kind' '{}' is not add, sub, mul, div, squared_difference, "
                         "prelu, leaky_relu or hard_swish",
                         n.attr_string("kind", "")));
  if (!kind) return ch.reason;
  ch.in(0, "A", kF32);
  if (unary(*kind)) {
    ch.require(!ch.present(1), fmt::format("kind '{}' takes one input", n.attr_string("kind", "")));
  } else {
    ch.in(1, "B", kF32);
  }
  return ch.reason;
}

OutInfos infer_tflite_float(const Ctx& c) {
  if (!c.has(1)) return {{DType::Float32, c.shape(0, "A")}};
  return {{DType::Float32, broadcast_shape(c, c.shape(0, "A"), c.shape(1, "B"))}};
}

std::vector<Tensor> run_tflite_float(const Ctx& c, const OutInfos& o) {
  const Node& n = c.node;
  const Kind kind = *kind_of(n);  // checked
  const float lo = float_attr(n, "activation_min", std::numeric_limits<float>::lowest());
  const float hi = float_attr(n, "activation_max", std::numeric_limits<float>::max());
  const float alpha = float_attr(n, "alpha", 0.0f);
  Tensor ty(DType::Float32, o[0].second);
  float* py = ty.as<float>().data();
  const float* pa = c.t(0).as<float>().data();
  if (unary(kind)) {
    const std::int64_t count = ty.elements();
    for (std::int64_t i = 0; i < count; ++i) {
      const float x = pa[i];
      py[i] = kind == Kind::LeakyRelu
                  ? (x > 0 ? x : x * alpha)
                  : x * std::min(6.0f, std::max(0.0f, x + 3.0f)) / 6.0f;
    }
    return single_output(std::move(ty));
  }
  auto f = [&](float a, float b) -> float {
    switch (kind) {
      case Kind::Add: return std::min(std::max(a + b, lo), hi);
      case Kind::Sub: return std::min(std::max(a - b, lo), hi);
      case Kind::Mul: return std::min(std::max(a * b, lo), hi);
      case Kind::Div: return std::min(std::max(a / b, lo), hi);
      case Kind::SquaredDifference: return (a - b) * (a - b);
      case Kind::Prelu: return a >= 0.0f ? a : a * b;
      default: return a;  // (unary kinds handled above)
    }
  };
  const float* pb = c.t(1).as<float>().data();
  const Shape& out = ty.shape();
  strided_rows<2>(out,
                  {broadcast_strides(c.t(0).shape(), out.size()),
                   broadcast_strides(c.t(1).shape(), out.size())},
                  {0, 0},
                  [&](std::int64_t row, std::array<std::int64_t, 2> off, std::int64_t len,
                      std::array<std::int64_t, 2> inner) {
                    for (std::int64_t j = 0; j < len; ++j) {
                      py[row + j] = f(pa[off[0] + j * inner[0]], pb[off[1] + j * inner[1]]);
                    }
                  });
  return single_output(std::move(ty));
}

}  // namespace

OpRows tflite_float_ops() {
  OpRows rows;
  rows.furiosa.push_back(
      {"TFLiteFloat", 1, 2, 1, check_tflite_float, infer_tflite_float, run_tflite_float});
  return rows;
}

}  // namespace furiosa::host::detail
