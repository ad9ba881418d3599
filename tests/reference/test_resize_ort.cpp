// Resize mode linear on uint8 and int8 tensors (issue 15) on this runtime against ONNX Runtime 1.30
// (onnxruntime-node, run by ort_run.js), exact to the quantization step. The models are built
// here with ONNX's protobuf: a float32 input, QuantizeLinear, Resize(linear) on the 8-bit tensor
// (one per coordinate mode, side by side), DequantizeLinear to float32 outputs; ORT's side is the
// whole model under ort_run.js, ours the same file through create_runner (compile + Runner: a 4-D
// NCHW Resize on the NPU, LowLevelResize's OnnxLinear mode, the others host steps of the host
// operator library; both the library's arithmetic).
// The input values are exact multiples of the quantization step, so QuantizeLinear is exact on
// both sides and every difference would be Resize's.
// Contexts (host/src/ops/resize_ort.cpp, run_ort_linear_q8, says which ORT path each takes):
// - QLinearConv -> Resize -> QLinearConv on NCHW (the quantized model's case): ORT's NHWC
//   transformer moves the Resize to NHWC; its integer path, or its float path when only W is
//   resized;
// - Resize on an NHWC tensor (scales [1, sh, sw, 1]): ORT's NHWC kernel as is;
// - 2-D and 5-D X: ORT's float bilinear / trilinear;
// - a lone NCHW Resize: ORT's float path over H, W, which this library does not follow; the test
//   shows ORT's result is that path (this library's 2-D rule per channel) and ours is within one
//   step of it.
// node and onnxruntime-node are required (ort_reference.h).
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include "furiosa/host/cpu_ops.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/runner.h"
#include "onnx_model_builder.h"
#include "ort_reference.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

constexpr float kStep = 0.0625f;  // the quantization step of every 8-bit tensor
const std::vector<std::string> kModes = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                                         "tf_half_pixel_for_nn"};

// Output size of the two spatial dims, by `scales` (float32, as the model holds them) or `sizes`.
struct Geometry {
  std::string name;
  std::int64_t h, w;
  bool by_scales;
  float sh, sw;          // by_scales
  std::int64_t oh, ow;   // !by_scales
};

const std::vector<Geometry> kGeometries = {
    {"x2 by scales", 5, 7, true, 2.0f, 2.0f, 0, 0},
    {"x1.5, x1.3 by scales", 8, 10, true, 1.5f, 1.3f, 0, 0},
    {"13 -> 20 by sizes", 13, 13, false, 0, 0, 20, 20},
    {"downsample by sizes", 13, 11, false, 0, 0, 7, 5},
    // 0.7f * 10 is 7 in float32 (ORT's output size), 6.99999988 exactly (the spec's floor: 6).
    {"downsample x0.5, x0.7 by scales", 10, 10, true, 0.5f, 0.7f, 0, 0},
    {"W only (sh = 1) by sizes", 6, 9, false, 0, 0, 6, 17},
};

// Whether the Resizes sit between two QLinearConvs, alone between Quantize and Dequantize, or on
// the float32 input itself (no quantization: `q` is ignored).
enum class Context { QLinearConvs, Lone, Float };

// x (float32, `shape`) -> QuantizeLinear -> [QLinearConv] -> per mode of `modes`: Resize(linear)
// over the spatial dims `hd`, `wd` -> [QLinearConv] -> DequantizeLinear -> y_<mode>. The
// QLinearConvs are 1x1 identities with unit requantization (exact on both sides).
void write_model(const fs::path& path, DType q, Context ctx, const Shape& shape, std::size_t hd, std::size_t wd,
                 const Geometry& geo, const std::vector<std::string>& modes) {
  test::OnnxModelBuilder b("resize_q8");
  b.input("x", shape);
  const int qtype = q == DType::UInt8 ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
  const std::uint8_t zp = q == DType::UInt8 ? 128 : 0;
  b.init<float>("step", onnx::TensorProto::FLOAT, {}, {kStep});
  b.init<float>("one", onnx::TensorProto::FLOAT, {}, {1.0f});
  b.init<std::uint8_t>("zp", qtype, {}, {zp});
  b.init<float>("roi", onnx::TensorProto::FLOAT, {0}, {});
  const std::size_t r = shape.size();
  std::vector<float> scales(r, 1.0f);
  std::vector<std::int64_t> sizes(shape.begin(), shape.end());
  if (geo.by_scales) {
    scales[hd] = geo.sh;
    scales[wd] = geo.sw;
    b.init<float>("scales", onnx::TensorProto::FLOAT, {static_cast<std::int64_t>(r)}, scales);
  } else {
    sizes[hd] = geo.oh;
    sizes[wd] = geo.ow;
    b.init<float>("no_scales", onnx::TensorProto::FLOAT, {0}, {});
    b.init<std::int64_t>("sizes", onnx::TensorProto::INT64, {static_cast<std::int64_t>(r)}, sizes);
  }
  const bool quantized = ctx != Context::Float;
  if (quantized) b.node("QuantizeLinear", {"x", "step", "zp"}, "xq");
  std::string resize_in = quantized ? "xq" : "x";
  const bool convs = ctx == Context::QLinearConvs;
  if (convs) {
    const std::int64_t c = shape[1];
    std::vector<std::int8_t> eye(static_cast<std::size_t>(c * c), 0);
    for (std::int64_t i = 0; i < c; ++i) eye[static_cast<std::size_t>(i * c + i)] = 1;
    b.init<std::int8_t>("w", onnx::TensorProto::INT8, {c, c, 1, 1}, eye);
    b.init<std::int8_t>("wzp", onnx::TensorProto::INT8, {}, {0});
    b.node("QLinearConv", {"xq", "step", "zp", "w", "one", "wzp", "step", "zp"}, "c0");
    resize_in = "c0";
  }
  for (const auto& mode : modes) {
    auto* n =
        b.node("Resize",
               geo.by_scales ? std::vector<std::string>{resize_in, "roi", "scales"}
                             : std::vector<std::string>{resize_in, "roi", "no_scales", "sizes"},
               (quantized ? "r_" : "y_") + mode);
    test::OnnxModelBuilder::attr(n, "mode", "linear");
    test::OnnxModelBuilder::attr(n, "coordinate_transformation_mode", mode);
    std::string out = "r_" + mode;
    if (convs) {
      b.node("QLinearConv", {out, "step", "zp", "w", "one", "wzp", "step", "zp"}, "c_" + mode);
      out = "c_" + mode;
    }
    if (quantized) b.node("DequantizeLinear", {out, "step", "zp"}, "y_" + mode);
    b.output("y_" + mode);
  }
  b.save(path);
}

// Float32 inputs whose values are exact multiples of kStep over the whole 8-bit range.
Tensor seeded_codes(const Shape& shape, DType q, unsigned seed) {
  Tensor t(DType::Float32, shape);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> code(0, 255);
  const int zp = q == DType::UInt8 ? 128 : 0, lo = q == DType::UInt8 ? 0 : -128;
  for (float& v : t.as<float>()) v = static_cast<float>(code(gen) + lo - zp) * kStep;
  return t;
}

struct Compared {
  std::size_t elements = 0, differing = 0;
  double worst_steps = 0;
};

// Runs `path` under ORT and through create_runner on two seeded inputs; per output, the ORT
// values and ours.
struct Runs {
  std::map<compiler::CpuOpKind, int> host_steps;  // of the compiled model, by kind
  int resize_kernels = 0;                         // LowLevelResize kernels in its NPU programs
  std::vector<Tensor> inputs;
  std::vector<test::OrtOutputs> ort;
  std::vector<std::map<std::string, std::vector<float>>> ours;
};

Runs run_both(const fs::path& path, DType q, const Shape& shape, unsigned seed) {
  Runs r;
  for (unsigned i = 0; i < 2; ++i) r.inputs.push_back(seeded_codes(shape, q, seed + i));
  r.ort = test::run_ort(path, "x", r.inputs, path.parent_path() / path.stem());
  runtime::RunnerOptions opts;
  opts.device = "npu0pe0";
  auto runner = runtime::create_runner(path, opts);
  r.host_steps = test::host_step_kinds(runner->compiled());
  for (const auto& call : runner->compiled().npu_calls) {
    for (const auto& k : call.program->kernels) r.resize_kernels += k.kind == isa::KernelKind::Resize ? 1 : 0;
  }
  const auto& names = runner->model().outputs;
  for (const auto& in : r.inputs) {
    const auto out = runner->run({in});
    REQUIRE(out.size() == names.size());
    std::map<std::string, std::vector<float>> m;
    for (std::size_t o = 0; o < names.size(); ++o) {
      const auto v = out[o].as<float>();
      m[names[o].name] = {v.begin(), v.end()};
    }
    r.ours.push_back(std::move(m));
  }
  return r;
}

int external_steps(const Runs& r) {
  const auto it = r.host_steps.find(compiler::CpuOpKind::External);
  return it == r.host_steps.end() ? 0 : it->second;
}

Compared compare(const std::vector<float>& a, const std::vector<float>& b) {
  Compared c;
  REQUIRE(a.size() == b.size());
  c.elements = a.size();
  for (std::size_t k = 0; k < a.size(); ++k) {
    const double steps = std::abs(static_cast<double>(a[k]) - b[k]) / kStep;
    c.differing += steps != 0 ? 1 : 0;
    c.worst_steps = std::max(c.worst_steps, steps);
  }
  return c;
}

fs::path model_path(const std::string& stem) { return fs::path(FURIOSA_TEST_WORK_DIR) / "resize_q8" / (stem + ".onnx"); }

std::string slug(std::string s) {
  for (char& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s;
}

// Every output of every run equal to ORT's, element for element; returns the outputs compared.
std::size_t require_equal(const Runs& r, const std::vector<std::string>& modes) {
  std::size_t outputs = 0;
  for (std::size_t i = 0; i < r.inputs.size(); ++i) {
    for (const auto& mode : modes) {
      INFO("input " << i << ", coordinate_transformation_mode " << mode);
      const auto it = r.ort[i].find("y_" + mode);
      REQUIRE(it != r.ort[i].end());
      REQUIRE(r.ours[i].count("y_" + mode) == 1);
      const Compared c = compare(r.ours[i].at("y_" + mode), it->second);
      INFO(c.differing << " of " << c.elements << " elements differ, worst " << c.worst_steps << " steps");
      CHECK(c.differing == 0);
      CHECK(c.elements > 0);
      ++outputs;
    }
  }
  return outputs;
}

}  // namespace

TEST_CASE("Resize linear on uint8/int8 between QLinearConvs equals ONNX Runtime 1.30", "[reference][resize]") {
  for (const DType q : {DType::UInt8, DType::Int8}) {
    for (const auto& geo : kGeometries) {
      INFO(dtype_name(q) << ", " << geo.name);
      const Shape shape{1, 4, geo.h, geo.w};
      const fs::path path = model_path(fmt::format("qlinearconv_{}_{}", dtype_name(q), slug(geo.name)));
      write_model(path, q, Context::QLinearConvs, shape, 2, 3, geo, kModes);
      const Runs r = run_both(path, q, shape, 1500u);
      CHECK(require_equal(r, kModes) == 2 * kModes.size());
      // Every Resize runs on the NPU (LowLevelResize's OnnxLinear mode, whose simulator kernel is
      // the host library's arithmetic), between the QLinearConvs: no host step.
      CHECK(external_steps(r) == 0);
      CHECK(r.resize_kernels == static_cast<int>(kModes.size()));
    }
  }
}

TEST_CASE("Resize linear on uint8/int8 NHWC tensors equals ONNX Runtime 1.30", "[reference][resize]") {
  for (const DType q : {DType::UInt8, DType::Int8}) {
    for (const auto& geo : kGeometries) {
      // With sh = 1 the scales [1, 1, sw, 1] read as an NCHW tensor's, which the library runs as
      // the quantized model's Resize (the integer path over dims 2, 3); ORT's kernel on a lone
      // tensor takes its float path there, the lone-NCHW case of the last test.
      if (geo.by_scales ? geo.sh == 1.0f : geo.oh == geo.h) continue;
      INFO(dtype_name(q) << ", " << geo.name);
      const Shape shape{1, geo.h, geo.w, 3};
      const fs::path path = model_path(fmt::format("nhwc_{}_{}", dtype_name(q), slug(geo.name)));
      write_model(path, q, Context::Lone, shape, 1, 2, geo, kModes);
      const Runs r = run_both(path, q, shape, 1600u);
      CHECK(require_equal(r, kModes) == 2 * kModes.size());
      CHECK(external_steps(r) == static_cast<int>(kModes.size()));
    }
  }
}

TEST_CASE("Resize linear on 2-D and 5-D uint8/int8 (ORT's float paths) equals ONNX Runtime 1.30",
          "[reference][resize]") {
  const std::vector<std::string> modes = {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"};
  for (const DType q : {DType::UInt8, DType::Int8}) {
    const Geometry g2{"2-D 13 x 11 -> 20 x 6 by sizes", 13, 11, false, 0, 0, 20, 6};
    const Geometry g5{"5-D x1.5, x0.75 by scales", 6, 8, true, 1.5f, 0.75f, 0, 0};
    for (const auto& [geo, shape, hd, wd] :
         {std::tuple{g2, Shape{13, 11}, std::size_t{0}, std::size_t{1}},
          std::tuple{g5, Shape{1, 2, 3, 6, 8}, std::size_t{3}, std::size_t{4}}}) {
      INFO(dtype_name(q) << ", " << geo.name);
      const fs::path path = model_path(fmt::format("rank{}_{}", shape.size(), dtype_name(q)));
      write_model(path, q, Context::Lone, shape, hd, wd, geo, modes);
      const Runs r = run_both(path, q, shape, 1700u);
      CHECK(require_equal(r, modes) == 2 * modes.size());
      CHECK(external_steps(r) == static_cast<int>(modes.size()));
    }
  }
}

TEST_CASE("A lone NCHW uint8/int8 Resize: ONNX Runtime takes its float path, at most one step from ours",
          "[reference][resize]") {
  // The other context (docs/operators.md): with no QLinearConv around it ORT runs the NCHW
  // tensor through its float path over H, W, which is this library's 2-D rule applied per
  // channel; the runtime follows the quantized model's integer path and differs by one step in
  // a few elements.
  const Geometry geo = kGeometries[2];  // 13 -> 20 by sizes
  for (const DType q : {DType::UInt8, DType::Int8}) {
    INFO(dtype_name(q));
    const Shape shape{1, 3, geo.h, geo.w};
    const fs::path path = model_path(fmt::format("lone_nchw_{}", dtype_name(q)));
    write_model(path, q, Context::Lone, shape, 2, 3, geo, kModes);
    const Runs r = run_both(path, q, shape, 1800u);
    std::size_t differing = 0;
    for (std::size_t i = 0; i < r.inputs.size(); ++i) {
      // Per channel: quantize as QuantizeLinear does (exact here), 2-D Resize, dequantize.
      const int zp = q == DType::UInt8 ? 128 : 0;
      for (const auto& mode : kModes) {
        INFO("input " << i << ", coordinate_transformation_mode " << mode);
        host::OpNode n;
        n.name = "resize_2d";
        n.op_type = "Resize";
        n.inputs = {0, 1, 2, 3};
        n.outputs = {4};
        n.attributes = {{"mode", std::string("linear")}, {"coordinate_transformation_mode", mode}};
        Tensor sizes(DType::Int64, {2});
        sizes.as<std::int64_t>()[0] = geo.oh;
        sizes.as<std::int64_t>()[1] = geo.ow;
        std::vector<float> expect;
        const auto in = r.inputs[i].as<float>();
        for (std::int64_t ch = 0; ch < shape[1]; ++ch) {
          Tensor plane(q, {geo.h, geo.w});
          for (std::int64_t k = 0; k < geo.h * geo.w; ++k) {
            const auto code = static_cast<int>(std::lrint(in[static_cast<std::size_t>(ch * geo.h * geo.w + k)] / kStep)) + zp;
            if (q == DType::UInt8) {
              plane.as<std::uint8_t>()[static_cast<std::size_t>(k)] = static_cast<std::uint8_t>(code);
            } else {
              plane.as<std::int8_t>()[static_cast<std::size_t>(k)] = static_cast<std::int8_t>(code);
            }
          }
          const Tensor y = host::run_cpu_op(n, {&plane, nullptr, nullptr, &sizes}).at(0);
          for (std::int64_t k = 0; k < geo.oh * geo.ow; ++k) {
            const int v = q == DType::UInt8 ? y.as<std::uint8_t>()[static_cast<std::size_t>(k)]
                                            : y.as<std::int8_t>()[static_cast<std::size_t>(k)];
            expect.push_back(static_cast<float>(v - zp) * kStep);
          }
        }
        const auto& ort = r.ort[i].at("y_" + mode);
        const Compared rule = compare(expect, ort);
        CHECK(rule.differing == 0);
        const Compared ours = compare(r.ours[i].at("y_" + mode), ort);
        INFO(ours.differing << " of " << ours.elements << " differ");
        CHECK(ours.worst_steps <= 1.0);
        differing += ours.differing;
      }
    }
    // The contexts do differ (else docs/operators.md would be wrong to tell them apart).
    CHECK(differing > 0);
  }
}

TEST_CASE("Resize linear on float32 equals ONNX Runtime 1.30 bit for bit", "[reference][resize]") {
  // A QDQ model runs a linear Resize in float32 between DequantizeLinear and QuantizeLinear (ORT
  // drops the QDQ pair only around nearest Resizes), on values that are multiples of the step: a
  // 2x half_pixel upsample lands exactly on half steps, so the float32 sums must round as ORT's
  // UpsampleBilinear / UpsampleTrilinear do or QuantizeLinear rounds the other way
  // (host/src/ops/resize_ort.cpp, ort_float_linear_dims). The inputs are such multiples.
  const std::vector<std::string> modes = {"half_pixel", "asymmetric", "align_corners",
                                          "pytorch_half_pixel"};
  std::vector<std::tuple<Geometry, Shape, std::size_t, std::size_t>> cases;
  for (const auto& geo : kGeometries) {
    cases.emplace_back(geo, Shape{1, 3, geo.h, geo.w}, 2, 3);
  }
  cases.emplace_back(Geometry{"2-D 13 x 11 -> 20 x 6 by sizes", 13, 11, false, 0, 0, 20, 6},
                     Shape{13, 11}, 0, 1);
  cases.emplace_back(Geometry{"5-D x1.5, x0.75 by scales", 6, 8, true, 1.5f, 0.75f, 0, 0},
                     Shape{1, 2, 3, 6, 8}, 3, 4);
  std::size_t outputs = 0;
  for (const auto& [geo, shape, hd, wd] : cases) {
    INFO("float32, " << geo.name << ", rank " << shape.size());
    const fs::path path = model_path(fmt::format("float_rank{}_{}", shape.size(), slug(geo.name)));
    write_model(path, DType::Float32, Context::Float, shape, hd, wd, geo, modes);
    const Runs r = run_both(path, DType::UInt8, shape, 1900u);
    outputs += require_equal(r, modes);
    CHECK(external_steps(r) == static_cast<int>(modes.size()));
  }
  CHECK(outputs == 2 * modes.size() * cases.size());
}
