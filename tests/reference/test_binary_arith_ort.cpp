// Quantized Add and Mul of two tensors against ONNX Runtime 1.30, bit for bit over every pair of
// 8-bit codes (issue 33). ORT computes them in several ways, and each model must get the one ORT
// runs (isa::AddFormula, isa::MulParams::dequantized):
// - com.microsoft QLinearAdd and a uint8 QDQ group DequantizeLinear x2 -> Add -> QuantizeLinear,
//   which ORT fuses into it: MLAS's AVX2 kernel (AddFormula::MlasRatios), with the operands
//   swapped where the first one is broadcast along the innermost dim;
// - an int8 QDQ group: ORT first moves every int8 Q -> DQ pair whose Q feeds only that DQ to
//   uint8 (QDQS8ToU8Transformer). All three pairs moved: a uint8 QLinearAdd on codes + 128
//   (MlasRatiosUint8); none: an int8 QLinearAdd (MlasRatios); some: the types differ, the group
//   stays unfused, DequantizeLinear, Add / Mul and QuantizeLinear in float32 (Dequantized);
// - QDQ Mul fused: QLinearMul's contrib formula, unchanged by the uint8 shift.
// The formulas differ only where the final rounding is a near tie, about one element in 10^5,
// so each model covers all 65,536 code pairs under several scales and zero points; a pair
// whose Q feeds a second DequantizeLinear (an extra graph output) is one ORT does not move.
// node and onnxruntime-node are required (ort_reference.h).
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/runner.h"
#include "onnx_model_builder.h"
#include "ort_reference.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

struct Params {
  float sa, sb, sy;
  int za, zb, zy;
};

// Scale and zero-point sets: arbitrary float32 scales (ratios far from powers of two), zero
// points inside the type's range.
std::vector<Params> param_sets(bool is_signed, unsigned seed, int count) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> scale(0.004f, 0.09f);
  std::uniform_int_distribution<int> zp(is_signed ? -128 : 0, is_signed ? 127 : 255);
  std::vector<Params> out;
  for (int i = 0; i < count; ++i)
    out.push_back({scale(gen), scale(gen), scale(gen), zp(gen), zp(gen), zp(gen)});
  return out;
}

fs::path work_dir() { return fs::path(FURIOSA_TEST_WORK_DIR) / "binary_arith"; }

int qtype(bool is_signed) { return is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8; }

// The quantization parameters of the model: a, b, y scales and zero points as initializers.
void add_params(test::OnnxModelBuilder& b, const Params& p, bool is_signed) {
  b.init<float>("sa", onnx::TensorProto::FLOAT, {}, {p.sa});
  b.init<float>("sb", onnx::TensorProto::FLOAT, {}, {p.sb});
  b.init<float>("sy", onnx::TensorProto::FLOAT, {}, {p.sy});
  for (const auto& [name, z] :
       {std::pair{"za", p.za}, std::pair{"zb", p.zb}, std::pair{"zy", p.zy}}) {
    b.init<std::int8_t>(name, qtype(is_signed), {}, {static_cast<std::int8_t>(z)});
  }
}

// Every code pair: x [2, 256, 256] float32, x[0][i][j] the value of code i of a and x[1][i][j]
// that of code j of b (exact multiples of the scales, so QuantizeLinear gives the codes back).
Tensor pair_input(const Params& p, bool is_signed) {
  Tensor x(DType::Float32, {2, 256, 256});
  auto v = x.as<float>();
  const int lo = is_signed ? -128 : 0;
  for (int i = 0; i < 256; ++i) {
    for (int j = 0; j < 256; ++j) {
      v[static_cast<std::size_t>(i * 256 + j)] =
          static_cast<float>((i + lo - p.za) * static_cast<double>(p.sa));
      v[static_cast<std::size_t>(65536 + i * 256 + j)] =
          static_cast<float>((j + lo - p.zb) * static_cast<double>(p.sb));
    }
  }
  return x;
}

enum class Form { Qdq, QOperator };

// Which quantized tensors of the model also feed a second DequantizeLinear (graph outputs "e_a",
// "e_b", "e_y"), so that their QuantizeLinear has two consumers.
struct Extra {
  bool a = false, b = false, y = false;
};

// x -> Split -> QuantizeLinear a, b -> (QDQ: DequantizeLinear x2 -> op -> QuantizeLinear;
// QOperator: com.microsoft QLinear<op>) -> DequantizeLinear -> y.
void write_pair_model(const fs::path& path, const std::string& op, Form form, const Params& p,
                      bool is_signed, Extra extra = {}) {
  test::OnnxModelBuilder b("binary_pairs");
  b.input("x", {2, 256, 256});
  add_params(b, p, is_signed);
  b.init<std::int64_t>("split", onnx::TensorProto::INT64, {2}, {1, 1});
  auto* split = b.node("Split", {"x", "split"}, "xa");
  split->add_output("xb");
  test::OnnxModelBuilder::attr(split, "axis", std::int64_t{0});
  b.node("QuantizeLinear", {"xa", "sa", "za"}, "qa");
  b.node("QuantizeLinear", {"xb", "sb", "zb"}, "qb");
  if (form == Form::Qdq) {
    b.node("DequantizeLinear", {"qa", "sa", "za"}, "da");
    b.node("DequantizeLinear", {"qb", "sb", "zb"}, "db");
    b.node(op, {"da", "db"}, "f");
    b.node("QuantizeLinear", {"f", "sy", "zy"}, "qy");
  } else {
    b.contrib("QLinear" + op, {"qa", "sa", "za", "qb", "sb", "zb", "sy", "zy"}, "qy");
  }
  b.node("DequantizeLinear", {"qy", "sy", "zy"}, "y");
  b.output("y");
  for (const auto& [on, q, sc, zp] :
       {std::tuple{extra.a, "qa", "sa", "za"}, std::tuple{extra.b, "qb", "sb", "zb"},
        std::tuple{extra.y, "qy", "sy", "zy"}}) {
    if (!on) continue;
    const std::string out = std::string("e_") + std::string(q).substr(1);
    b.node("DequantizeLinear", {q, sc, zp}, out);
    b.output(out);
  }
  b.save(path);
}

// x [1, 64, 16, 17]: a = x[..., :16] (every code once per channel), b = ReduceMax(x[..., 16:])
// over H, W ([1, 64, 1, 1], one code per channel); QDQ Add of a and b (`b_first`: b + a).
void write_broadcast_model(const fs::path& path, const Params& p, bool b_first) {
  test::OnnxModelBuilder b("add_broadcast");
  b.input("x", {1, 64, 16, 17});
  add_params(b, p, false);
  b.init<std::int64_t>("s0", onnx::TensorProto::INT64, {1}, {0});
  b.init<std::int64_t>("e0", onnx::TensorProto::INT64, {1}, {16});
  b.init<std::int64_t>("e1", onnx::TensorProto::INT64, {1}, {17});
  b.init<std::int64_t>("ax", onnx::TensorProto::INT64, {1}, {3});
  b.node("Slice", {"x", "s0", "e0", "ax"}, "xa");
  b.node("Slice", {"x", "e0", "e1", "ax"}, "xr");
  auto* r = b.node("ReduceMax", {"xr"}, "xb");
  test::OnnxModelBuilder::attr(r, "axes", std::vector<std::int64_t>{2, 3});
  b.node("QuantizeLinear", {"xa", "sa", "za"}, "qa");
  b.node("QuantizeLinear", {"xb", "sb", "zb"}, "qb");
  b.node("DequantizeLinear", {"qa", "sa", "za"}, "da");
  b.node("DequantizeLinear", {"qb", "sb", "zb"}, "db");
  b.node("Add",
         b_first ? std::vector<std::string>{"db", "da"} : std::vector<std::string>{"da", "db"},
         "f");
  b.node("QuantizeLinear", {"f", "sy", "zy"}, "qy");
  b.node("DequantizeLinear", {"qy", "sy", "zy"}, "y");
  b.output("y");
  b.save(path);
}

Tensor broadcast_input(const Params& p, unsigned seed) {
  Tensor x(DType::Float32, {1, 64, 16, 17});
  auto v = x.as<float>();
  std::mt19937 gen(seed);
  std::vector<int> codes(256);
  for (int c = 0; c < 64; ++c) {
    for (int k = 0; k < 256; ++k) codes[static_cast<std::size_t>(k)] = k;
    std::shuffle(codes.begin(), codes.end(), gen);
    for (int h = 0; h < 16; ++h) {
      for (int w = 0; w < 17; ++w) {
        const int code =
            w < 16 ? codes[static_cast<std::size_t>(h * 16 + w)] : static_cast<int>(gen() % 256);
        const int zp = w < 16 ? p.za : p.zb;
        const float s = w < 16 ? p.sa : p.sb;
        v[static_cast<std::size_t>((c * 16 + h) * 17 + w)] =
            static_cast<float>((code - zp) * static_cast<double>(s));
      }
    }
  }
  return x;
}

// Runs `path` on `input` under ORT and through the runtime (npu0pe0); returns how many of y's
// elements differ and fails when the shapes do.
std::size_t differing(const fs::path& path, const Tensor& input) {
  const auto ort = test::run_ort(path, "x", {input}, path.parent_path() / path.stem());
  runtime::RunnerOptions opts;
  opts.device = "npu0pe0";
  auto runner = runtime::create_runner(path, opts);
  const auto out = runner->run({input});
  const auto& names = runner->model().outputs;
  REQUIRE(out.size() == names.size());
  std::size_t y = names.size();
  for (std::size_t i = 0; i < names.size(); ++i) y = names[i].name == "y" ? i : y;
  REQUIRE(y < names.size());
  const auto ours = out[y].as<float>();
  const auto& ref = ort.at(0).at("y");
  REQUIRE(ours.size() == ref.size());
  std::size_t n = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) n += ours[i] != ref[i] ? 1 : 0;
  return n;
}

// Every code pair of `op` in `form` under `sets` parameter sets: no element differs.
void check_pairs(const std::string& op, Form form, bool is_signed, unsigned seed, int sets,
                 Extra extra = {}) {
  int set = 0;
  const std::string tag =
      fmt::format("{}{}{}", extra.a ? "a" : "", extra.b ? "b" : "", extra.y ? "y" : "");
  for (const Params& p : param_sets(is_signed, seed, sets)) {
    INFO(fmt::format("{} {} {}, second DequantizeLinear on '{}', set {}: a {} {}, b {} {}, y {} {}",
                     form == Form::Qdq ? "QDQ" : "QOperator", is_signed ? "int8" : "uint8", op, tag,
                     set, p.sa, p.za, p.sb, p.zb, p.sy, p.zy));
    const fs::path path =
        work_dir() / fmt::format("{}_{}_{}_{}_{}.onnx", form == Form::Qdq ? "qdq" : "qop", op,
                                 is_signed ? "int8" : "uint8", tag, set++);
    write_pair_model(path, op, form, p, is_signed, extra);
    CHECK(differing(path, pair_input(p, is_signed)) == 0);
  }
}

}  // namespace

TEST_CASE("QDQ uint8 Add equals ONNX Runtime's fused QLinearAdd on every code pair",
          "[reference][qdq][add]") {
  check_pairs("Add", Form::Qdq, false, 3301u, 8);
}

TEST_CASE("QDQ int8 Add equals ONNX Runtime on every code pair, whichever pairs move to uint8",
          "[reference][qdq][add]") {
  check_pairs("Add", Form::Qdq, true, 3302u, 6);  // all: MlasRatiosUint8
  check_pairs("Add", Form::Qdq, true, 3308u, 6,
              {.a = true, .b = true, .y = true});              // none: MlasRatios
  check_pairs("Add", Form::Qdq, true, 3309u, 6, {.a = true});  // some: Dequantized
}

TEST_CASE("com.microsoft QLinearAdd int8 and uint8 equal ONNX Runtime on every code pair",
          "[reference][qdq][add]") {
  check_pairs("Add", Form::QOperator, true, 3303u, 4);
  check_pairs("Add", Form::QOperator, false, 3304u, 4);
}

TEST_CASE("QDQ Mul equals ONNX Runtime on every code pair, fused or left unfused",
          "[reference][qdq][mul]") {
  check_pairs("Mul", Form::Qdq, false, 3305u, 4);
  check_pairs("Mul", Form::Qdq, true, 3306u, 4);  // fused as uint8: the contrib formula
  check_pairs("Mul", Form::Qdq, true, 3310u, 6, {.y = true});  // unfused: float32
}

TEST_CASE("QDQ uint8 Add with a per-channel operand equals ONNX Runtime in both operand orders",
          "[reference][qdq][add]") {
  // ORT streams the full operand and takes the broadcast one as its scalar: with the broadcast
  // operand first it calls its kernel with the operands swapped, which rounds differently.
  int set = 0;
  for (const Params& p : param_sets(false, 3307u, 12)) {
    for (const bool b_first : {false, true}) {
      INFO(fmt::format("set {}, broadcast operand {}", set, b_first ? "first" : "second"));
      const fs::path path =
          work_dir() / fmt::format("add_broadcast_{}_{}.onnx", set, b_first ? "ba" : "ab");
      write_broadcast_model(path, p, b_first);
      CHECK(differing(path, broadcast_input(p, 3400u + static_cast<unsigned>(set))) == 0);
    }
    ++set;
  }
}
