// Program files (.enf): the whole CompiledModel survives save/load, the bytes are stable, and
// damaged, foreign or other-version files are refused with one line naming the problem.
#include <fmt/format.h>
#include <zlib.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <variant>

#include "furiosa/compiler/compile_cache.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/compiler/program_file.h"
#include "furiosa/compiler/tflite_import.h"
#include "furiosa/core/error.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

Tensor bytes_tensor(DType dtype, Shape shape, int seed) {
  Tensor t(dtype, std::move(shape));
  for (std::size_t i = 0; i < t.size_bytes(); ++i) t.bytes()[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(seed)) & 0xff);
  return t;
}

isa::TensorRef ref(std::uint64_t address, DType dtype, Shape shape, isa::Layout layout = isa::Layout::Linear) {
  return {.address = address, .dtype = dtype, .shape = std::move(shape), .layout = layout};
}

// A hand-made model with every kernel kind, every params alternative (fixed-point variants,
// Requantize tables, optional biases), a constant host slot, an External node with every
// attribute kind, and every CpuOp kind: what the real models do not all exercise.
compiler::CompiledModel synthetic_model() {
  using isa::KernelKind;
  compiler::CompiledModel m;
  const auto lowered = isa::Layout::LoweredNCHW;
  m.slots.push_back({"x", DType::Float32, {1, 2, 4, 4}, isa::Layout::Linear, nullptr, "NHWC"});
  m.slots.push_back({"xq", DType::UInt8, {1, 2, 4, 4}, isa::Layout::Linear, nullptr});
  m.slots.push_back({"xl", DType::UInt8, {1, 2, 4, 4}, lowered, nullptr});
  m.slots.push_back({"yl", DType::UInt8, {1, 2, 4, 4}, lowered, nullptr});
  m.slots.push_back({"y", DType::UInt8, {1, 2, 4, 4}, isa::Layout::Linear, nullptr});
  m.slots.push_back({"yf", DType::Float32, {1, 2, 4, 4}, isa::Layout::Linear, nullptr});
  m.slots.push_back({"k", DType::Int64, {2}, isa::Layout::Linear,
                     std::make_shared<const Tensor>(bytes_tensor(DType::Int64, {2}, 3))});
  m.slots.push_back({"out", DType::Float32, {1, 32}, isa::Layout::Linear, nullptr});
  m.input_slots = {0};
  m.output_slots = {7};

  auto p = std::make_shared<isa::Program>();
  p->name = "npu_segment_0";
  p->constants.resize(512);
  for (std::size_t i = 0; i < p->constants.size(); ++i) p->constants[i] = static_cast<std::byte>(i * 7);
  p->dram_bytes = 8192;
  const auto a_in = ref(1024, DType::UInt8, {1, 2, 4, 4}, lowered);   // 2*4*32 = 256 bytes
  const auto a_mid = ref(2048, DType::UInt8, {1, 2, 4, 4}, lowered);
  const auto a_out = ref(3072, DType::UInt8, {1, 2, 4, 4}, lowered);
  const auto lin = ref(4096, DType::UInt8, {1, 32});
  const auto lin2 = ref(4160, DType::UInt8, {1, 32});
  const auto halves = std::vector<isa::TensorRef>{ref(4224, DType::UInt8, {1, 16}), ref(4240, DType::UInt8, {1, 16})};
  p->inputs = {a_in};
  p->outputs = {a_out};
  const isa::QuantParam q{0.5f, 3}, q2{0.25f, -7};
  isa::Conv2dParams conv{.weight = ref(0, DType::Int8, {2, 2, 3, 3}), .bias = ref(64, DType::Int32, {2}),
                         .pads = {1, 1, 1, 1}, .strides = {1, 1}, .dilations = {1, 1}, .group = 1, .x = q,
                         .w_scale = {0.1f, 0.2f}, .w_zero_point = {0, 1}, .y = q2};
  isa::Conv2dParams dw = conv;
  dw.weight = ref(128, DType::Int8, {2, 1, 3, 3});
  dw.bias = std::nullopt;
  dw.group = 2;
  dw.fixed_point = isa::FixedPointRequant{{{1 << 30, -3}, {(1 << 30) + 5, 2}}, 0, 200};
  isa::MatMulParams mm{.b = ref(256, DType::Int8, {32, 2}), .a = q, .b_scale = {0.3f}, .b_zero_point = {0}, .y = q2,
                       .bias = ref(320, DType::Int32, {2}),
                       .fixed_point = isa::FixedPointRequant{{{1 << 30, 0}}, -128, 127}};
  isa::RequantizeParams table{q, q2, std::vector<std::uint8_t>(256)};
  for (int i = 0; i < 256; ++i) table.table[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(255 - i);
  const auto kernel = [](KernelKind kind, std::vector<isa::TensorRef> in, std::vector<isa::TensorRef> out,
                         decltype(isa::Kernel::params) params) {
    return isa::Kernel{kind, fmt::format("node_{}", isa::kernel_name(kind)), static_cast<std::int32_t>(kind), std::move(in),
                       std::move(out), std::move(params)};
  };
  p->kernels.push_back(kernel(KernelKind::Conv2d, {a_in}, {a_mid}, conv));
  p->kernels.push_back(kernel(KernelKind::DepthwiseConv2d, {a_mid}, {a_out}, dw));
  p->kernels.push_back(kernel(KernelKind::MaxPool, {a_out}, {a_mid},
                              isa::MaxPoolParams{{2, 2}, {0, 0, 1, 1}, {2, 2}, {1, 1}}));
  p->kernels.push_back(kernel(KernelKind::Reshape, {a_mid}, {lin}, isa::ReshapeParams{}));
  p->kernels.push_back(kernel(KernelKind::MatMul, {lin}, {lin2}, mm));
  p->kernels.push_back(kernel(KernelKind::Add, {lin, lin2}, {lin},
                              isa::AddParams{q, q2, q, isa::FixedPointAdd{20, {1 << 30, -1}, {1 << 30, -2}, {1 << 30, 0}, 0, 255}}));
  p->kernels.push_back(kernel(KernelKind::Add, {lin, lin2}, {lin2}, isa::AddParams{q, q2, q}));
  p->kernels.push_back(kernel(KernelKind::Requantize, {lin2}, {lin}, table));
  p->kernels.push_back(kernel(KernelKind::Requantize, {lin}, {lin2}, isa::RequantizeParams{q2, q}));
  p->kernels.push_back(kernel(KernelKind::Split, {lin2}, halves, isa::SplitParams{1}));
  p->kernels.push_back(kernel(KernelKind::Concat, halves, {lin}, isa::ConcatParams{1}));
  p->kernels.push_back(kernel(KernelKind::Transpose, {a_out}, {a_mid}, isa::TransposeParams{{0, 1, 3, 2}}));
  p->kernels.push_back(kernel(KernelKind::GlobalAveragePool, {a_mid}, {ref(4300, DType::UInt8, {1, 2, 1, 1})},
                              isa::GlobalAveragePoolParams{q, q2}));
  p->kernels.push_back(kernel(KernelKind::Resize, {ref(4400, DType::UInt8, {1, 2, 2, 2})}, {ref(4500, DType::UInt8, {1, 2, 4, 6})},
                              isa::ResizeParams{2, 3}));
  p->kernels.push_back(kernel(KernelKind::Resize, {ref(4500, DType::UInt8, {1, 2, 4, 6})}, {ref(4600, DType::UInt8, {1, 2, 5, 7})},
                              isa::ResizeParams{.mode = isa::ResizeParams::Mode::TfliteBilinear, .align_corners = true}));
  p->kernels.push_back(kernel(KernelKind::GlobalAveragePool, {ref(4600, DType::UInt8, {1, 2, 5, 7})},
                              {ref(4700, DType::UInt8, {1, 2, 1, 1})},
                              isa::GlobalAveragePoolParams{.x = {}, .y = {}, .integer_mean_clamp = std::array<std::int32_t, 2>{0, 200}}));
  p->kernels.push_back(kernel(KernelKind::Slice, {ref(4500, DType::UInt8, {1, 2, 4, 6})},
                              {ref(4800, DType::UInt8, {1, 1, 2, 2})}, isa::SliceParams{{0, 1, 3, 5}, {1, -1, -2, -4}}));
  p->kernels.push_back(kernel(KernelKind::Pad, {ref(4800, DType::UInt8, {1, 1, 2, 2})},
                              {ref(4900, DType::UInt8, {1, 1, 4, 3})},
                              isa::PadParams{{0, 0, 1, -1}, isa::PadParams::Mode::Reflect, 0}));
  p->kernels.push_back(kernel(KernelKind::Pad, {ref(4800, DType::Int8, {1, 1, 2, 2})},
                              {ref(4900, DType::Int8, {1, 1, 4, 3})},
                              isa::PadParams{{0, 0, 1, 0}, isa::PadParams::Mode::Constant, -7}));
  p->kernels.push_back(kernel(KernelKind::Resize, {ref(4500, DType::UInt8, {1, 2, 4, 6})}, {ref(4600, DType::UInt8, {1, 2, 5, 7})},
                              isa::ResizeParams{.mode = isa::ResizeParams::Mode::OnnxLinear,
                                                .coordinate_transformation_mode = "pytorch_half_pixel",
                                                .scales = std::array<float, 2>{1.25f, 1.2f}}));
  p->kernels.push_back(kernel(KernelKind::Mul, {lin, lin2}, {lin}, isa::MulParams{q, q2, q}));
  p->kernels.push_back(kernel(KernelKind::Sub, {lin2, lin}, {lin2}, isa::SubParams{q2, q, q2}));
  m.npu_calls.push_back({p, {2}, {3}, 3 * 256, 5 * 256});

  const auto cpu = [](compiler::CpuOpKind kind, std::vector<int> in, std::vector<int> out) {
    compiler::CpuOp op;
    op.kind = kind;
    op.inputs = std::move(in);
    op.outputs = std::move(out);
    return op;
  };
  compiler::CpuOp quant = cpu(compiler::CpuOpKind::Quantize, {0}, {1});
  quant.node_name = "q";
  quant.operator_index = 0;
  quant.scales = {0.5f, 0.25f};
  quant.zero_points = {1, 2};
  quant.axis = 1;
  quant.round_half_away_from_zero = true;
  compiler::CpuOp lower = cpu(compiler::CpuOpKind::Lower, {1}, {2});
  lower.channels_last = true;
  const compiler::CpuOp unlower = cpu(compiler::CpuOpKind::Unlower, {3}, {4});
  compiler::CpuOp deq = cpu(compiler::CpuOpKind::Dequantize, {4}, {5});
  deq.node_name = "dq";
  deq.operator_index = 4;
  deq.scales = {0.125f};
  deq.zero_points = {-3};
  deq.axis = 0;
  auto node = std::make_shared<compiler::Node>();
  node->name = "reshape_7";
  node->op_type = "Reshape";
  node->domain = "";
  node->index = 7;
  node->inputs = {12, -1, 13};
  node->outputs = {14};
  node->attributes = {{"i", std::int64_t{-5}}, {"f", 1.5e-7f}, {"s", std::string("half_away_from_zero")},
                      {"ints", std::vector<std::int64_t>{1, -1, 1LL << 40}}, {"floats", std::vector<float>{0.1f, -2.5f}},
                      {"t", bytes_tensor(DType::Int32, {2, 3}, 9)}};
  compiler::CpuOp ext = cpu(compiler::CpuOpKind::External, {5, -1, 6}, {7});
  ext.node_name = "reshape_7";
  ext.operator_index = 7;
  ext.node = node;
  for (const auto& op : {quant, lower}) m.steps.push_back({compiler::Step::Kind::Cpu, op, -1});
  m.steps.push_back({compiler::Step::Kind::Npu, {}, 0});
  for (const auto& op : {unlower, deq, ext}) m.steps.push_back({compiler::Step::Kind::Cpu, op, -1});
  m.report.entries.push_back({"conv", "QLinearConv", 1, "npu", "LowLevelConv2d", "op table"});
  m.report.entries.push_back({"reshape_7", "Reshape", 7, "fallback", "Reshape", "not on the NPU"});
  m.report.notes = {"Lower on host: width 4 is not a multiple of 32"};
  return m;
}

compiler::CompilerOptions knob_options() {
  compiler::CompilerOptions o;
  o.batch_size = 3;
  o.pe_count = 1;
  o.without_quantize = {"x"};
  o.normalized_pixel_outputs = {"out", "other"};
  o.permute_input = {{"x", {0, 3, 1, 2}}};
  o.input_shapes = {{"x", {1, 3, 640, 480}}};
  o.remove_lower = true;
  o.remove_unlower = true;
  return o;
}

void check_same(const isa::TensorRef& a, const isa::TensorRef& b) {
  CHECK(a.address == b.address);
  CHECK(a.dtype == b.dtype);
  CHECK(a.shape == b.shape);
  CHECK(a.layout == b.layout);
}

void check_same_tensor(const Tensor& a, const Tensor& b) {
  CHECK(a.dtype() == b.dtype());
  CHECK(a.shape() == b.shape());
  CHECK(std::equal(a.bytes().begin(), a.bytes().end(), b.bytes().begin(), b.bytes().end()));
}

// The model's program file with one byte changed (offset from the start).
std::string with_byte(std::string bytes, std::size_t offset, char value) {
  bytes.at(offset) = value;
  return bytes;
}

std::string refusal(std::string_view bytes) {
  try {
    (void)compiler::deserialize_program(bytes, "model.enf");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::ModelLoadFailed);
    CHECK(e.file() == "model.enf");
    CHECK(e.message().find('\n') == std::string::npos);  // one line
    return e.message();
  }
  FAIL("the bytes were accepted");
  return {};
}

compiler::CompiledModel compile_file(const fs::path& path, const compiler::CompilerOptions& o = {}) {
  return compiler::compile(compiler::import_model(path), o);
}

}  // namespace

TEST_CASE("program file: a synthetic model with every kernel, params and attribute kind round-trips", "[program_file]") {
  const auto m = synthetic_model();
  const auto opts = knob_options();
  const std::string bytes = compiler::serialize_program(m, opts);
  const compiler::ProgramFile f = compiler::deserialize_program(bytes, "synthetic.enf");
  CHECK(f.compiler_version == compiler::compiler_version());
  CHECK(f.options.batch_size == 3);
  CHECK(f.options.pe_count == 1);
  CHECK(f.options.without_quantize == opts.without_quantize);
  CHECK(f.options.normalized_pixel_outputs == opts.normalized_pixel_outputs);
  CHECK(f.options.permute_input == opts.permute_input);
  CHECK(f.options.input_shapes == opts.input_shapes);
  CHECK(f.options.remove_lower);
  CHECK(f.options.remove_unlower);
  const auto& g = f.model;
  REQUIRE(g.slots.size() == m.slots.size());
  for (std::size_t i = 0; i < m.slots.size(); ++i) {
    CHECK(g.slots[i].name == m.slots[i].name);
    CHECK(g.slots[i].dtype == m.slots[i].dtype);
    CHECK(g.slots[i].shape == m.slots[i].shape);
    CHECK(g.slots[i].layout == m.slots[i].layout);
    CHECK(g.slots[i].format == m.slots[i].format);
    REQUIRE(bool(g.slots[i].constant) == bool(m.slots[i].constant));
    if (m.slots[i].constant) check_same_tensor(*g.slots[i].constant, *m.slots[i].constant);
  }
  CHECK(g.input_slots == m.input_slots);
  CHECK(g.output_slots == m.output_slots);
  REQUIRE(g.npu_calls.size() == 1);
  const auto& gp = *g.npu_calls[0].program;
  const auto& mp = *m.npu_calls[0].program;
  CHECK(gp.name == mp.name);
  CHECK(gp.constants == mp.constants);
  CHECK(gp.dram_bytes == mp.dram_bytes);
  CHECK(g.npu_calls[0].activation_bytes == 768);
  CHECK(g.npu_calls[0].activation_bytes_unplanned == 1280);
  REQUIRE(gp.kernels.size() == mp.kernels.size());
  for (std::size_t k = 0; k < mp.kernels.size(); ++k) {
    INFO("kernel " << k);
    CHECK(gp.kernels[k].kind == mp.kernels[k].kind);
    CHECK(gp.kernels[k].node_name == mp.kernels[k].node_name);
    CHECK(gp.kernels[k].operator_index == mp.kernels[k].operator_index);
    CHECK(gp.kernels[k].params.index() == mp.kernels[k].params.index());
    REQUIRE(gp.kernels[k].inputs.size() == mp.kernels[k].inputs.size());
    for (std::size_t i = 0; i < mp.kernels[k].inputs.size(); ++i) check_same(gp.kernels[k].inputs[i], mp.kernels[k].inputs[i]);
  }
  const auto& dw = std::get<isa::Conv2dParams>(gp.kernels[1].params);
  REQUIRE(dw.fixed_point);
  CHECK(dw.fixed_point->multipliers.at(1).multiplier == (1 << 30) + 5);
  CHECK(dw.fixed_point->multipliers.at(1).shift == 2);
  CHECK(dw.fixed_point->out_max == 200);
  CHECK_FALSE(dw.bias);
  CHECK(dw.w_scale == std::vector<float>{0.1f, 0.2f});
  CHECK(std::get<isa::Conv2dParams>(gp.kernels[0].params).bias->address == 64);
  const auto& add = std::get<isa::AddParams>(gp.kernels[5].params);
  REQUIRE(add.fixed_point);
  CHECK(add.fixed_point->b_mult.shift == -2);
  CHECK_FALSE(std::get<isa::AddParams>(gp.kernels[6].params).fixed_point);
  CHECK(std::get<isa::RequantizeParams>(gp.kernels[7].params).table ==
        std::get<isa::RequantizeParams>(mp.kernels[7].params).table);
  CHECK(std::get<isa::TransposeParams>(gp.kernels[11].params).perm == std::vector<std::int64_t>{0, 1, 3, 2});
  CHECK(std::get<isa::MatMulParams>(gp.kernels[4].params).fixed_point->out_min == -128);
  std::set<std::size_t> alternatives;
  for (const auto& k : mp.kernels) alternatives.insert(k.params.index());
  CHECK(alternatives.size() == std::variant_size_v<decltype(isa::Kernel::params)>);  // a new params kind joins this model
  CHECK(std::get<isa::ResizeParams>(gp.kernels[13].params).scale_h == 2);
  CHECK(std::get<isa::ResizeParams>(gp.kernels[13].params).scale_w == 3);
  CHECK(std::get<isa::ResizeParams>(gp.kernels[13].params).mode == isa::ResizeParams::Mode::NearestRepeat);
  const auto& bilinear = std::get<isa::ResizeParams>(gp.kernels[14].params);
  CHECK(bilinear.mode == isa::ResizeParams::Mode::TfliteBilinear);
  CHECK(bilinear.align_corners);
  CHECK_FALSE(bilinear.half_pixel_centers);
  CHECK_FALSE(std::get<isa::GlobalAveragePoolParams>(gp.kernels[12].params).integer_mean_clamp);
  CHECK(std::get<isa::GlobalAveragePoolParams>(gp.kernels[15].params).integer_mean_clamp ==
        std::array<std::int32_t, 2>{0, 200});
  CHECK(std::get<isa::SliceParams>(gp.kernels[16].params).starts == std::vector<std::int64_t>{0, 1, 3, 5});
  CHECK(std::get<isa::SliceParams>(gp.kernels[16].params).steps == std::vector<std::int64_t>{1, -1, -2, -4});
  CHECK(std::get<isa::PadParams>(gp.kernels[17].params).begins == std::vector<std::int64_t>{0, 0, 1, -1});
  CHECK(std::get<isa::PadParams>(gp.kernels[17].params).mode == isa::PadParams::Mode::Reflect);
  CHECK(std::get<isa::PadParams>(gp.kernels[18].params).value == -7);
  const auto& linear = std::get<isa::ResizeParams>(gp.kernels[19].params);
  CHECK(linear.mode == isa::ResizeParams::Mode::OnnxLinear);
  CHECK(linear.coordinate_transformation_mode == "pytorch_half_pixel");
  CHECK(linear.scales == std::array<float, 2>{1.25f, 1.2f});
  CHECK(std::get<isa::MulParams>(gp.kernels[20].params).b.scale == 0.25f);
  CHECK(std::get<isa::SubParams>(gp.kernels[21].params).a.zero_point == -7);
  REQUIRE(g.steps.size() == m.steps.size());
  CHECK(g.steps[0].cpu.scales == std::vector<float>{0.5f, 0.25f});
  CHECK(g.steps[0].cpu.round_half_away_from_zero);
  CHECK(g.steps[1].cpu.channels_last);
  CHECK(g.steps[2].kind == compiler::Step::Kind::Npu);
  CHECK(g.steps[4].cpu.zero_points == std::vector<std::int32_t>{-3});
  const auto& ext = g.steps[5].cpu;
  CHECK(ext.inputs == std::vector<int>{5, -1, 6});
  REQUIRE(ext.node);
  CHECK(ext.node->inputs == std::vector<int>{12, -1, 13});
  CHECK(ext.node->index == 7);
  REQUIRE(ext.node->attributes.size() == 6);
  CHECK(std::get<std::int64_t>(ext.node->attributes.at("i")) == -5);
  CHECK(std::get<float>(ext.node->attributes.at("f")) == 1.5e-7f);
  CHECK(std::get<std::string>(ext.node->attributes.at("s")) == "half_away_from_zero");
  CHECK(std::get<std::vector<std::int64_t>>(ext.node->attributes.at("ints")) == std::vector<std::int64_t>{1, -1, 1LL << 40});
  CHECK(std::get<std::vector<float>>(ext.node->attributes.at("floats")) == std::vector<float>{0.1f, -2.5f});
  check_same_tensor(std::get<Tensor>(ext.node->attributes.at("t")), bytes_tensor(DType::Int32, {2, 3}, 9));
  CHECK(g.report.entries.size() == 2);
  CHECK(g.report.entries[1].placement == "fallback");
  CHECK(g.report.notes == m.report.notes);
  CHECK(compiler::serialize_program(g, f.options) == bytes);
}

TEST_CASE("program file: save(load(save(x))) == save(x) on mnist, MobileNetV2 and a TFLite model", "[program_file]") {
  const test::TempDir scratch("enf-test");  // removed even when a check fails
  const fs::path& dir = scratch.path();
  const std::pair<const char*, int> models[] = {
      {"onnx-zoo/mnist-12-int8/mnist-12-int8.onnx", 2},
      {"onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx", 1},
      {"furiosa-sdk/MNIST_MobileNet_v2_uint8_quant_without_avgpool_softmax/"
       "MNIST_MobileNet_v2_uint8_quant_without_avgpool_softmax.tflite", 1}};
  for (const auto& [rel, pe] : models) {
    INFO(rel);
    compiler::CompilerOptions o;
    o.pe_count = pe;
    const auto cm = compile_file(test::shared_model(rel), o);
    const fs::path enf = dir / (fs::path(rel).stem().string() + ".enf");
    compiler::save_program(cm, o, enf);
    const std::string first = compiler::serialize_program(cm, o);
    CHECK(fs::file_size(enf) == first.size());
    const auto loaded = compiler::load_program(enf);
    CHECK(loaded.options.pe_count == pe);
    CHECK(loaded.model.steps.size() == cm.steps.size());
    CHECK(loaded.model.report.to_string() == cm.report.to_string());
    CHECK(compiler::serialize_program(loaded.model, loaded.options) == first);
    CHECK(compiler::is_program_file(enf));
    fmt::print("program file {}: {} bytes\n", enf.filename().string(), first.size());
  }
  CHECK_FALSE(compiler::is_program_file(test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx")));
}

TEST_CASE("program file: saving over a planted symbolic link replaces the link, never its target",
          "[program_file][hostile]") {
  const test::TempDir scratch("enf-link");  // removed even when a check fails
  const test::TempDir elsewhere("enf-victim");
  const fs::path victim = elsewhere / "victim";
  {
    std::ofstream(victim, std::ios::binary) << "precious bytes\n";
  }
  const fs::path enf = scratch / "model.enf";
  fs::create_symlink(victim, enf);  // as another user could in a shared compile cache
  compiler::CompilerOptions o;
  const auto cm = compile_file(test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx"), o);
  compiler::save_program(cm, o, enf);
  CHECK_FALSE(fs::is_symlink(enf));
  CHECK(compiler::is_program_file(enf));
  std::ifstream in(victim, std::ios::binary);
  CHECK(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()) == "precious bytes\n");
  // No temporary file is left behind.
  CHECK(std::distance(fs::directory_iterator(scratch.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("compile cache: a directory other users may write to, or another user's, is not used",
          "[program_file][cache][hostile]") {
  const fs::path model = test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  const test::TempDir scratch("cache-dir");  // removed even when a check fails
  compiler::CompilerOptions o;
  // A missing directory is created for this user alone, and used.
  const fs::path fresh = scratch / "fresh" / "compile";
  CHECK(compiler::compile_model_file(model, o, fresh).cache == compiler::CacheStatus::Miss);
  CHECK(compiler::compile_model_file(model, o, fresh).cache == compiler::CacheStatus::Hit);
  CHECK((fs::status(fresh).permissions() & fs::perms::all) == fs::perms::owner_all);
  // World-writable (as /tmp/shared-cache could be): compiled without it, nothing written there.
  const fs::path shared = scratch / "shared";
  fs::create_directory(shared);
  fs::permissions(shared, fs::perms::all);
  CHECK(compiler::compile_model_file(model, o, shared).cache == compiler::CacheStatus::Off);
  CHECK(fs::is_empty(shared));
  // Another user's (root can hand it over; elsewhere only the check above applies).
  const fs::path foreign = scratch / "foreign";
  fs::create_directory(foreign);
  fs::permissions(foreign, fs::perms::owner_all);
  if (::geteuid() == 0 && ::chown(foreign.c_str(), 65534, 65534) == 0) {
    CHECK(compiler::compile_model_file(model, o, foreign).cache == compiler::CacheStatus::Off);
    CHECK(fs::is_empty(foreign));
  } else {
    WARN("not root: the other-owner case is not checked");
  }
}

TEST_CASE("program file: truncated, corrupted, foreign and other-version files are refused", "[program_file][errors]") {
  const std::string good = compiler::serialize_program(synthetic_model(), knob_options());
  REQUIRE_NOTHROW(compiler::deserialize_program(good, "model.enf"));
  SECTION("truncated") {
    CHECK_THAT(refusal(good.substr(0, good.size() - 1)), Catch::StartsWith("model.enf: truncated"));
    CHECK_THAT(refusal(good.substr(0, 20)), Catch::Contains("truncated") && Catch::Contains("header"));
    CHECK_THAT(refusal(good + "x"), Catch::Contains("unexpected bytes after the body"));
  }
  SECTION("one flipped byte in the body fails the checksum") {
    const std::size_t offset = good.size() - 100;
    CHECK_THAT(refusal(with_byte(good, offset, static_cast<char>(good[offset] ^ 0x01))),
               Catch::Equals("model.enf: corrupted: the checksum of the body does not match"));
    CHECK_THAT(refusal(with_byte(good, compiler::kProgramHeaderBytes + 3, static_cast<char>(good[compiler::kProgramHeaderBytes + 3] ^ 0x40))),
               Catch::Contains("checksum of the meta block"));
  }
  SECTION("wrong magic") {
    CHECK_THAT(refusal(with_byte(good, 1, 'X')), Catch::Contains("not a program file (wrong magic"));
    CHECK_THAT(refusal("ONNX"), Catch::Contains("not a program file"));
  }
  SECTION("another format version") {
    CHECK_THAT(refusal(with_byte(good, 8, static_cast<char>(compiler::kProgramFormatVersion + 1))),
               Catch::Contains(fmt::format("format version {} is newer than this build's version {}",
                                           compiler::kProgramFormatVersion + 1, compiler::kProgramFormatVersion)));
    CHECK_THAT(refusal(with_byte(good, 8, 0)), Catch::Contains("format version 0 is older"));
  }
  SECTION("hostile CBOR bodies are refused, not a crash (found by fuzz_program_file)") {
    // The good file's header and meta with another body, and CRCs that match it.
    const std::uint64_t meta_len = static_cast<unsigned char>(good[12]) | static_cast<unsigned char>(good[13]) << 8 |
                                   static_cast<unsigned char>(good[14]) << 16 |
                                   static_cast<std::uint64_t>(static_cast<unsigned char>(good[15])) << 24;
    const std::string meta = good.substr(compiler::kProgramHeaderBytes, meta_len);
    auto with_body = [&](const std::string& body) {
      std::string bad = good.substr(0, compiler::kProgramHeaderBytes) + meta + body;
      auto put = [&](std::size_t at, std::uint64_t v, int n) {
        for (int i = 0; i < n; ++i) bad[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
      };
      auto crc = [](const std::string& part) {
        return crc32(0L, reinterpret_cast<const Bytef*>(part.data()), static_cast<uInt>(part.size()));
      };
      put(16, body.size(), 8);
      put(24, crc(meta), 4);
      put(28, crc(body), 4);
      return bad;
    };
    // 50,000 nested one-element arrays: nlohmann's CBOR reader recursed once per level.
    CHECK_THAT(refusal(with_body(std::string(50000, '\x81') + '\xf6')),
               Catch::Equals("model.enf: the body nests deeper than 64 levels"));
    // An array announcing 0x6c616c6c6c6c6c6c (about 7.8e18) elements: nlohmann threw out_of_range.408.
    CHECK_THAT(refusal(with_body(std::string("\x9b\x6c\x61\x6c\x6c\x6c\x6c\x6c\x6c", 9))),
               Catch::StartsWith("model.enf: the body is not valid CBOR") && Catch::Contains("excessive array size"));
  }
  SECTION("load_program names the file") {
    const test::TempDir scratch("bad-enf");  // removed even when a check fails
    const fs::path p = scratch / "bad.enf";
    {
      std::ofstream f(p, std::ios::binary);
      f << good.substr(0, good.size() / 2);
    }
    try {
      (void)compiler::load_program(p);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::ModelLoadFailed);
      CHECK_THAT(e.message(), Catch::StartsWith(p.string() + ": truncated"));
    }
    fs::remove(p);
    CHECK_THROWS_WITH(compiler::load_program(p), Catch::Contains(p.string()) && Catch::Contains("does not exist"));
  }
}

TEST_CASE("program file: content is validated before use", "[program_file][errors]") {
  const auto opts = knob_options();
  SECTION("a step naming an NPU call that does not exist") {
    auto m = synthetic_model();
    m.steps[2].npu = 4;
    CHECK_THAT(refusal(compiler::serialize_program(m, opts)), Catch::Contains("body.steps[2].npu: 4 is out of range [0, 0]"));
  }
  SECTION("a host operator reading a slot that does not exist") {
    auto m = synthetic_model();
    m.steps[0].cpu.inputs = {42};
    CHECK_THAT(refusal(compiler::serialize_program(m, opts)), Catch::Contains("body.steps[0].cpu.inputs[0]: 42 is out of range"));
  }
  SECTION("a kernel tensor outside the program's DRAM region") {
    auto m = synthetic_model();
    auto p = std::make_shared<isa::Program>(*m.npu_calls[0].program);
    p->kernels[3].outputs[0].address = 8190;
    m.npu_calls[0].program = p;
    CHECK_THAT(refusal(compiler::serialize_program(m, opts)),
               Catch::Contains("kernels[3].outputs[0]: bytes [8190, 8222) lie outside the program's DRAM region of 8192 bytes"));
  }
  SECTION("a Requantize table of the wrong size") {
    auto m = synthetic_model();
    auto p = std::make_shared<isa::Program>(*m.npu_calls[0].program);
    std::get<isa::RequantizeParams>(p->kernels[7].params).table.resize(255);
    m.npu_calls[0].program = p;
    CHECK_THAT(refusal(compiler::serialize_program(m, opts)), Catch::Contains("expected 0 or 256 entries, got 255"));
  }
  SECTION("an NPU call whose slots do not fit the program's inputs") {
    auto m = synthetic_model();
    m.npu_calls[0].input_slots = {0};
    CHECK_THAT(refusal(compiler::serialize_program(m, opts)), Catch::Contains("slot 'x' holds 128 bytes"));
  }
}

TEST_CASE("compile cache: the key follows the model bytes, the options and the environment's directory", "[program_file][cache]") {
  compiler::CompilerOptions a, b;
  b.pe_count = 1;
  CHECK(compiler::compile_cache_key("model", a) == compiler::compile_cache_key("model", a));
  CHECK(compiler::compile_cache_key("model", a) != compiler::compile_cache_key("model", b));
  CHECK(compiler::compile_cache_key("model", a) != compiler::compile_cache_key("modem", a));
  CHECK(compiler::compile_cache_key("model", a).size() == 64);
  const char* saved = std::getenv("FURIOSA_COMPILE_CACHE_DIR");
  const std::string restore = saved ? saved : "";
  ::setenv("FURIOSA_COMPILE_CACHE_DIR", "off", 1);
  CHECK_FALSE(compiler::compile_cache_dir_from_environment());
  ::setenv("FURIOSA_COMPILE_CACHE_DIR", "", 1);
  CHECK_FALSE(compiler::compile_cache_dir_from_environment());
  ::setenv("FURIOSA_COMPILE_CACHE_DIR", "/tmp/somewhere", 1);
  CHECK(compiler::compile_cache_dir_from_environment() == fs::path("/tmp/somewhere"));
  ::unsetenv("FURIOSA_COMPILE_CACHE_DIR");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string xdg_restore = xdg ? xdg : "";
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  CHECK(compiler::compile_cache_dir_from_environment() == fs::path("/tmp/xdg/furiosa/compile"));
  if (xdg) ::setenv("XDG_CACHE_HOME", xdg_restore.c_str(), 1);
  else ::unsetenv("XDG_CACHE_HOME");
  if (saved) ::setenv("FURIOSA_COMPILE_CACHE_DIR", restore.c_str(), 1);
}
