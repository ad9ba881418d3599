// The writer of program files: CompiledModel and CompilerOptions -> CBOR (nlohmann_json's CBOR,
// byte arrays as CBOR byte strings), and the file header (program_file.h).
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <span>

#include "codec.h"
#include "furiosa/core/error.h"
#include "furiosa/program/program_file.h"

namespace furiosa::program {

namespace detail {
namespace {

json bytes_of(std::span<const std::byte> b) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(b.data());
  return json::binary(std::vector<std::uint8_t>(p, p + b.size()));
}

json enc(const Tensor& t) {
  return {{"dtype", dtype_name(t.dtype())}, {"shape", t.shape()}, {"data", bytes_of(t.bytes())}};
}

json enc(const isa::TensorRef& r) {
  return {{"address", r.address}, {"dtype", dtype_name(r.dtype)}, {"shape", r.shape},
          {"layout", isa::layout_name(r.layout)}};
}

json enc(const std::optional<isa::TensorRef>& r) { return r ? enc(*r) : json(nullptr); }

json enc(isa::QuantParam q) { return {{"scale", q.scale}, {"zero_point", q.zero_point}}; }

json enc(isa::QuantizedMultiplier m) { return json::array({m.multiplier, m.shift}); }

json enc(const std::optional<isa::FixedPointRequant>& f) {
  if (!f) return nullptr;
  json mults = json::array();
  for (const auto& m : f->multipliers) mults.push_back(enc(m));
  return {{"multipliers", mults}, {"out_min", f->out_min}, {"out_max", f->out_max}};
}

json enc(const std::optional<isa::FixedPointAdd>& f) {
  if (!f) return nullptr;
  return {{"left_shift", f->left_shift}, {"a_mult", enc(f->a_mult)}, {"b_mult", enc(f->b_mult)},
          {"y_mult", enc(f->y_mult)}, {"out_min", f->out_min}, {"out_max", f->out_max}};
}

json enc_params(const isa::Conv2dParams& p) {
  return {{"weight", enc(p.weight)}, {"bias", enc(p.bias)}, {"pads", p.pads}, {"strides", p.strides},
          {"dilations", p.dilations}, {"group", p.group}, {"x", enc(p.x)}, {"w_scale", p.w_scale},
          {"w_zero_point", p.w_zero_point}, {"y", enc(p.y)}, {"fixed_point", enc(p.fixed_point)}};
}
json enc_params(const isa::MaxPoolParams& p) {
  return {{"kernel", p.kernel}, {"pads", p.pads}, {"strides", p.strides}, {"dilations", p.dilations}};
}
json enc_params(const isa::MatMulParams& p) {
  return {{"b", enc(p.b)}, {"a", enc(p.a)}, {"b_scale", p.b_scale}, {"b_zero_point", p.b_zero_point},
          {"y", enc(p.y)}, {"bias", enc(p.bias)}, {"fixed_point", enc(p.fixed_point)}};
}
json enc_params(const isa::AddParams& p) {
  return {{"a", enc(p.a)},
          {"b", enc(p.b)},
          {"y", enc(p.y)},
          {"fixed_point", enc(p.fixed_point)},
          {"formula", isa::add_formula_name(p.formula)}};
}
json enc_params(const isa::ReshapeParams&) { return json::object(); }
json enc_params(const isa::RequantizeParams& p) {
  return {{"x", enc(p.x)}, {"y", enc(p.y)}, {"table", json::binary(std::vector<std::uint8_t>(p.table))}};
}
json enc_params(const isa::ConcatParams& p) { return {{"axis", p.axis}}; }
json enc_params(const isa::TransposeParams& p) { return {{"perm", p.perm}}; }
json enc_params(const isa::SplitParams& p) { return {{"axis", p.axis}}; }
json enc_params(const isa::GlobalAveragePoolParams& p) {
  json j = {{"x", enc(p.x)}, {"y", enc(p.y)}};
  if (p.integer_mean_clamp) j["integer_mean_clamp"] = *p.integer_mean_clamp;
  return j;
}
json enc_params(const isa::ResizeParams& p) {
  json j = {{"scale_h", p.scale_h}, {"scale_w", p.scale_w}};
  if (p.mode == isa::ResizeParams::Mode::TfliteBilinear) {
    j["mode"] = "tflite_bilinear";
    j["align_corners"] = p.align_corners;
    j["half_pixel_centers"] = p.half_pixel_centers;
  }
  if (p.mode == isa::ResizeParams::Mode::OnnxLinear) {
    j["mode"] = "onnx_linear";
    j["coordinate_transformation_mode"] = p.coordinate_transformation_mode;
    j["scales"] = p.scales ? json(std::vector<float>{(*p.scales)[0], (*p.scales)[1]}) : json(nullptr);
  }
  return j;
}

json enc_params(const isa::SliceParams& p) { return {{"starts", p.starts}, {"steps", p.steps}}; }
json enc_params(const isa::PadParams& p) {
  return {{"begins", p.begins}, {"mode", static_cast<int>(p.mode)}, {"value", p.value}};
}
json enc_params(const isa::MulParams& p) {
  return {{"a", enc(p.a)}, {"b", enc(p.b)}, {"y", enc(p.y)}, {"dequantized", p.dequantized}};
}
json enc_params(const isa::SubParams& p) { return {{"a", enc(p.a)}, {"b", enc(p.b)}, {"y", enc(p.y)}}; }

json enc_refs(const std::vector<isa::TensorRef>& refs) {
  json a = json::array();
  for (const auto& r : refs) a.push_back(enc(r));
  return a;
}

json enc(const isa::Kernel& k) {
  if (k.params.index() != isa::kernel_params_index(k.kind)) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("kernel '{}' ({}) carries the params of another kernel kind", k.node_name,
                            isa::kernel_name(k.kind)));
  }
  return {{"kind", isa::kernel_name(k.kind)}, {"node_name", k.node_name}, {"operator_index", k.operator_index},
          {"inputs", enc_refs(k.inputs)}, {"outputs", enc_refs(k.outputs)},
          {"params", std::visit([](const auto& p) { return enc_params(p); }, k.params)}};
}

json enc(const isa::Program& p) {
  json kernels = json::array();
  for (const auto& k : p.kernels) kernels.push_back(enc(k));
  return {{"name", p.name}, {"kernels", kernels}, {"constants", bytes_of(p.constants)},
          {"dram_bytes", p.dram_bytes}, {"inputs", enc_refs(p.inputs)}, {"outputs", enc_refs(p.outputs)}};
}

json enc(const Attribute& a) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::int64_t>) return {{"int", v}};
        else if constexpr (std::is_same_v<T, float>) return {{"float", v}};
        else if constexpr (std::is_same_v<T, std::string>) return {{"string", v}};
        else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) return {{"ints", v}};
        else if constexpr (std::is_same_v<T, std::vector<float>>) return {{"floats", v}};
        else return {{"tensor", enc(v)}};
      },
      a);
}

json enc(const Node& n) {
  json attrs = json::object();
  for (const auto& [key, value] : n.attributes) attrs[key] = enc(value);
  return {{"name", n.name}, {"op_type", n.op_type}, {"domain", n.domain}, {"index", n.index},
          {"inputs", n.inputs}, {"outputs", n.outputs}, {"attributes", attrs}};
}

json enc(const CpuOp& op) {
  return {{"kind", cpu_op_name(op.kind)}, {"node_name", op.node_name}, {"operator_index", op.operator_index},
          {"inputs", op.inputs}, {"outputs", op.outputs}, {"scales", op.scales},
          {"zero_points", op.zero_points}, {"axis", op.axis},
          {"round_half_away_from_zero", op.round_half_away_from_zero}, {"channels_last", op.channels_last},
          {"node", op.node ? enc(*op.node) : json(nullptr)}};
}

json enc_model(const CompiledModel& m) {
  json slots = json::array();
  for (const auto& s : m.slots) {
    slots.push_back({{"name", s.name}, {"dtype", dtype_name(s.dtype)}, {"shape", s.shape},
                     {"layout", isa::layout_name(s.layout)}, {"constant", s.constant ? enc(*s.constant) : json(nullptr)},
                     {"format", s.format}});
  }
  json steps = json::array();
  for (const auto& st : m.steps) {
    if (st.kind == Step::Kind::Npu) steps.push_back({{"npu", st.npu}});
    else steps.push_back({{"cpu", enc(st.cpu)}});
  }
  json calls = json::array();
  for (const auto& c : m.npu_calls) {
    if (!c.program) throw Error(ErrorCode::InvalidArgument, "an NPU call has no program");
    calls.push_back({{"program", enc(*c.program)}, {"input_slots", c.input_slots}, {"output_slots", c.output_slots},
                     {"activation_bytes", c.activation_bytes},
                     {"activation_bytes_unplanned", c.activation_bytes_unplanned}});
  }
  json entries = json::array();
  for (const auto& e : m.report.entries) {
    entries.push_back({{"node_name", e.node_name}, {"op", e.op}, {"operator_index", e.operator_index},
                       {"placement", e.placement}, {"target", e.target}, {"reason", e.reason}});
  }
  return {{"slots", slots}, {"input_slots", m.input_slots}, {"output_slots", m.output_slots}, {"steps", steps},
          {"npu_calls", calls}, {"report", {{"entries", entries}, {"notes", m.report.notes}}}};
}

json enc_options(const CompilerOptions& o) {
  json permute = json::object();
  for (const auto& [name, perm] : o.permute_input) permute[name] = perm;
  json shapes = json::object();
  for (const auto& [name, shape] : o.input_shapes) shapes[name] = shape;
  return {{"input_shapes", shapes},
          {"batch_size", o.batch_size},
          {"pe_count", o.pe_count},
          {"without_quantize", o.without_quantize},
          {"normalized_pixel_outputs", o.normalized_pixel_outputs},
          {"permute_input", permute},
          {"remove_lower", o.remove_lower},
          {"remove_unlower", o.remove_unlower}};
}

}  // namespace


json encode_model(const CompiledModel& model) { return enc_model(model); }
json encode_options(const CompilerOptions& options) { return enc_options(options); }

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_le(std::string_view in, std::size_t offset, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t{static_cast<unsigned char>(in[offset + static_cast<std::size_t>(i)])} << (8 * i);
  return v;
}

std::uint32_t crc_of(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib's length is a uInt: feed large blocks in pieces.
  constexpr std::size_t kChunk = 1u << 30;
  for (std::size_t off = 0; off < bytes.size(); off += kChunk) {
    const std::size_t n = std::min(kChunk, bytes.size() - off);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + off), static_cast<uInt>(n));
  }
  return static_cast<std::uint32_t>(crc);
}

}  // namespace detail

std::vector<std::uint8_t> options_cbor(const CompilerOptions& options) {
  return detail::json::to_cbor(detail::encode_options(options));
}

std::string serialize_program(const CompiledModel& model, const CompilerOptions& options, std::string_view writer_version) {
  using namespace detail;
  const json meta_json = {{"compiler_version", writer_version}, {"options", encode_options(options)}};
  const std::vector<std::uint8_t> meta = json::to_cbor(meta_json);
  const std::vector<std::uint8_t> body = json::to_cbor(encode_model(model));
  const std::string_view meta_view(reinterpret_cast<const char*>(meta.data()), meta.size());
  const std::string_view body_view(reinterpret_cast<const char*>(body.data()), body.size());
  std::string out(kMagic.data(), kMagic.size());
  put_le(out, kProgramFormatVersion, 4);
  put_le(out, meta.size(), 4);
  put_le(out, body.size(), 8);
  put_le(out, crc_of(meta_view), 4);
  put_le(out, crc_of(body_view), 4);
  out.append(meta_view);
  out.append(body_view);
  return out;
}

}  // namespace furiosa::program
