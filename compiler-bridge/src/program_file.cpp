// Program files (.enf): the header, and the CompiledModel <-> CBOR encoding (nlohmann_json's CBOR,
// byte arrays as CBOR byte strings) with validation of everything read (program_file.h).
#include "furiosa/compiler/program_file.h"

#include <fmt/format.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <system_error>
#include <unistd.h>

#include "compiler_version.h"  // generated: FURIOSA_COMPILER_VERSION
#include "furiosa/core/error.h"
#include "program_codec.h"


namespace furiosa::compiler {

using json = nlohmann::json;

namespace {

constexpr std::array<char, 8> kMagic = {'\x89', 'F', 'W', 'E', 'N', 'F', '\r', '\n'};
/// Largest element count and dim accepted from a file (guards size arithmetic against overflow).
constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;

// ---- writing ------------------------------------------------------------------------------------

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
  return {{"a", enc(p.a)}, {"b", enc(p.b)}, {"y", enc(p.y)}, {"fixed_point", enc(p.fixed_point)}};
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
json enc_params(const isa::MulParams& p) { return {{"a", enc(p.a)}, {"b", enc(p.b)}, {"y", enc(p.y)}}; }
json enc_params(const isa::SubParams& p) { return {{"a", enc(p.a)}, {"b", enc(p.b)}, {"y", enc(p.y)}}; }

/// The params alternative (index into Kernel::params) a kernel kind carries.
std::size_t params_index(isa::KernelKind kind) {
  using K = isa::KernelKind;
  switch (kind) {
    case K::Conv2d:
    case K::DepthwiseConv2d: return 0;
    case K::MaxPool: return 1;
    case K::MatMul: return 2;
    case K::Add: return 3;
    case K::Reshape: return 4;
    case K::Requantize: return 5;
    case K::Concat: return 6;
    case K::Transpose: return 7;
    case K::Split: return 8;
    case K::GlobalAveragePool: return 9;
    case K::Resize: return 10;
    case K::Slice: return 11;
    case K::Pad: return 12;
    case K::Mul: return 13;
    case K::Sub: return 14;
  }
  return std::variant_npos;
}

json enc_refs(const std::vector<isa::TensorRef>& refs) {
  json a = json::array();
  for (const auto& r : refs) a.push_back(enc(r));
  return a;
}

json enc(const isa::Kernel& k) {
  if (k.params.index() != params_index(k.kind)) {
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

json enc(const CompiledModel& m) {
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

json enc(const CompilerOptions& o) {
  json permute = json::object();
  for (const auto& [name, perm] : o.permute_input) permute[name] = perm;
  return {{"batch_size", o.batch_size}, {"pe_count", o.pe_count}, {"without_quantize", o.without_quantize},
          {"normalized_pixel_outputs", o.normalized_pixel_outputs}, {"permute_input", permute},
          {"remove_lower", o.remove_lower}, {"remove_unlower", o.remove_unlower}};
}

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

// ---- reading ------------------------------------------------------------------------------------

/// A problem found in the file's content; turned into Error(ModelLoadFailed) at the top.
struct Invalid {
  std::string what;
};

/// A node of the decoded CBOR with its path ("npu_calls[0].program.kernels[3].inputs[0]") for
/// messages; every accessor checks the type and range it needs.
class In {
 public:
  In(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  [[noreturn]] void fail(std::string_view what) const { throw Invalid{fmt::format("{}: {}", path_, what)}; }
  const std::string& path() const noexcept { return path_; }

  In operator[](const char* key) const {
    if (!j_.is_object()) fail("expected a map");
    const auto it = j_.find(key);
    if (it == j_.end()) fail(fmt::format("missing field '{}'", key));
    return In(*it, path_.empty() ? key : path_ + "." + key);
  }
  bool is_null() const noexcept { return j_.is_null(); }
  bool has(const char* key) const { return j_.is_object() && j_.contains(key); }

  /// Elements of an array.
  std::vector<In> items() const {
    if (!j_.is_array()) fail("expected an array");
    std::vector<In> out;
    out.reserve(j_.size());
    for (std::size_t i = 0; i < j_.size(); ++i) out.emplace_back(j_[i], fmt::format("{}[{}]", path_, i));
    return out;
  }
  /// Key/value pairs of a map.
  std::vector<std::pair<std::string, In>> entries() const {
    if (!j_.is_object()) fail("expected a map");
    std::vector<std::pair<std::string, In>> out;
    for (auto it = j_.begin(); it != j_.end(); ++it) out.emplace_back(it.key(), In(it.value(), path_ + "." + it.key()));
    return out;
  }

  std::int64_t i64(std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                    std::int64_t hi = std::numeric_limits<std::int64_t>::max()) const {
    if (!j_.is_number_integer()) fail("expected an integer");
    if (j_.is_number_unsigned() && (hi < 0 || j_.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))) {
      fail(fmt::format("{} is out of range [{}, {}]", j_.get<std::uint64_t>(), lo, hi));
    }
    const auto v = j_.get<std::int64_t>();
    if (v < lo || v > hi) fail(fmt::format("{} is out of range [{}, {}]", v, lo, hi));
    return v;
  }
  std::int32_t i32(std::int64_t lo = std::numeric_limits<std::int32_t>::min(),
                   std::int64_t hi = std::numeric_limits<std::int32_t>::max()) const {
    return static_cast<std::int32_t>(i64(lo, hi));
  }
  std::uint64_t u64() const {
    if (!j_.is_number_unsigned()) fail("expected a non-negative integer");
    return j_.get<std::uint64_t>();
  }
  float f32() const {
    if (!j_.is_number_float()) fail("expected a float");
    return static_cast<float>(j_.get<double>());
  }
  bool boolean() const {
    if (!j_.is_boolean()) fail("expected a boolean");
    return j_.get<bool>();
  }
  std::string str() const {
    if (!j_.is_string()) fail("expected a string");
    return j_.get<std::string>();
  }
  const std::vector<std::uint8_t>& bin() const {
    if (!j_.is_binary()) fail("expected a byte string");
    return j_.get_binary();
  }
  std::vector<std::int64_t> i64s() const {
    std::vector<std::int64_t> out;
    for (const In& e : items()) out.push_back(e.i64());
    return out;
  }
  std::vector<int> ints(std::int64_t lo, std::int64_t hi) const {
    std::vector<int> out;
    for (const In& e : items()) out.push_back(static_cast<int>(e.i64(lo, hi)));
    return out;
  }
  std::vector<std::int32_t> i32s() const {
    std::vector<std::int32_t> out;
    for (const In& e : items()) out.push_back(e.i32());
    return out;
  }
  std::vector<float> f32s() const {
    std::vector<float> out;
    for (const In& e : items()) out.push_back(e.f32());
    return out;
  }
  std::vector<std::string> strs() const {
    std::vector<std::string> out;
    for (const In& e : items()) out.push_back(e.str());
    return out;
  }
  template <std::size_t N>
  std::array<std::int64_t, N> fixed_i64s() const {
    const auto v = i64s();
    if (v.size() != N) fail(fmt::format("expected {} integers, got {}", N, v.size()));
    std::array<std::int64_t, N> out{};
    std::copy(v.begin(), v.end(), out.begin());
    return out;
  }

 private:
  const json& j_;
  std::string path_;
};

/// The enum value whose name() is the string at `in`.
template <class E, class NameFn>
E enum_of(const In& in, NameFn name, int count) {
  const std::string s = in.str();
  for (int i = 0; i < count; ++i) {
    if (name(static_cast<E>(i)) == s) return static_cast<E>(i);
  }
  in.fail(fmt::format("unknown value '{}'", s));
}

DType dtype_of(const In& in) { return enum_of<DType>(in, dtype_name, 5); }
isa::Layout layout_of(const In& in) { return enum_of<isa::Layout>(in, isa::layout_name, 2); }

Shape shape_of(const In& in) {
  Shape s = in.i64s();
  std::int64_t count = 1;
  for (std::int64_t d : s) {
    if (d < 0 || d > kMaxElements) in.fail(fmt::format("dim {} is out of range", d));
    if (d != 0 && count > kMaxElements / d) in.fail("too many elements");
    count *= d;
  }
  return s;
}

std::vector<std::byte> bytes_from(const std::vector<std::uint8_t>& b) {
  std::vector<std::byte> out(b.size());
  if (!b.empty()) std::memcpy(out.data(), b.data(), b.size());
  return out;
}

Tensor tensor_of(const In& in) {
  const DType dtype = dtype_of(in["dtype"]);
  Shape shape = shape_of(in["shape"]);
  const auto& data = in["data"].bin();
  const auto expected = static_cast<std::uint64_t>(element_count(shape)) * dtype_size(dtype);
  if (data.size() != expected) {
    in.fail(fmt::format("{} {} needs {} bytes, the file holds {}", dtype_name(dtype), shape_to_string(shape),
                        expected, data.size()));
  }
  return Tensor(dtype, std::move(shape), bytes_from(data));
}

/// Reads a TensorRef and checks it lies inside a DRAM region of `dram_bytes`.
isa::TensorRef ref_of(const In& in, std::uint64_t dram_bytes) {
  isa::TensorRef r;
  r.address = in["address"].u64();
  r.dtype = dtype_of(in["dtype"]);
  r.shape = shape_of(in["shape"]);
  r.layout = layout_of(in["layout"]);
  if (r.layout == isa::Layout::LoweredNCHW && r.shape.size() != 4) in.fail("a lowered_nchw tensor must be 4-D");
  const std::uint64_t size = r.size_bytes();
  if (r.address > dram_bytes || size > dram_bytes - r.address) {
    in.fail(fmt::format("bytes [{}, {}) lie outside the program's DRAM region of {} bytes", r.address,
                        r.address + size, dram_bytes));
  }
  return r;
}

std::optional<isa::TensorRef> opt_ref_of(const In& in, std::uint64_t dram_bytes) {
  if (in.is_null()) return std::nullopt;
  return ref_of(in, dram_bytes);
}

std::vector<isa::TensorRef> refs_of(const In& in, std::uint64_t dram_bytes) {
  std::vector<isa::TensorRef> out;
  for (const In& e : in.items()) out.push_back(ref_of(e, dram_bytes));
  return out;
}

isa::QuantParam quant_of(const In& in) { return {in["scale"].f32(), in["zero_point"].i32()}; }

isa::QuantizedMultiplier mult_of(const In& in) {
  const auto items = in.items();
  if (items.size() != 2) in.fail("expected [multiplier, shift]");
  return {items[0].i32(), items[1].i32(-31, 30)};
}

/// Size 1 (per tensor) or `channels` (per channel), as the kernels index them.
void check_count(const In& in, std::size_t size, std::int64_t channels) {
  if (size != 1 && static_cast<std::int64_t>(size) != channels) {
    in.fail(fmt::format("expected 1 or {} entries, got {}", channels, size));
  }
}

std::optional<isa::FixedPointRequant> fixed_of(const In& in, std::int64_t channels) {
  if (in.is_null()) return std::nullopt;
  isa::FixedPointRequant f;
  for (const In& m : in["multipliers"].items()) f.multipliers.push_back(mult_of(m));
  check_count(in["multipliers"], f.multipliers.size(), channels);
  f.out_min = in["out_min"].i32();
  f.out_max = in["out_max"].i32();
  return f;
}

std::optional<isa::FixedPointAdd> fixed_add_of(const In& in) {
  if (in.is_null()) return std::nullopt;
  return isa::FixedPointAdd{in["left_shift"].i32(0, 31), mult_of(in["a_mult"]), mult_of(in["b_mult"]),
                            mult_of(in["y_mult"]), in["out_min"].i32(), in["out_max"].i32()};
}

decltype(isa::Kernel::params) params_of(const In& in, isa::KernelKind kind, std::uint64_t dram) {
  switch (params_index(kind)) {
    case 0: {
      isa::Conv2dParams p;
      p.weight = ref_of(in["weight"], dram);
      if (p.weight.shape.size() != 4) in["weight"].fail("expected a 4-D weight");
      const std::int64_t m = p.weight.shape[0];
      p.bias = opt_ref_of(in["bias"], dram);
      p.pads = in["pads"].fixed_i64s<4>();
      p.strides = in["strides"].fixed_i64s<2>();
      p.dilations = in["dilations"].fixed_i64s<2>();
      p.group = in["group"].i64(1);
      p.x = quant_of(in["x"]);
      p.w_scale = in["w_scale"].f32s();
      check_count(in["w_scale"], p.w_scale.size(), m);
      p.w_zero_point = in["w_zero_point"].i32s();
      check_count(in["w_zero_point"], p.w_zero_point.size(), m);
      p.y = quant_of(in["y"]);
      p.fixed_point = fixed_of(in["fixed_point"], m);
      return p;
    }
    case 1: {
      isa::MaxPoolParams p;
      p.kernel = in["kernel"].fixed_i64s<2>();
      p.pads = in["pads"].fixed_i64s<4>();
      p.strides = in["strides"].fixed_i64s<2>();
      p.dilations = in["dilations"].fixed_i64s<2>();
      return p;
    }
    case 2: {
      isa::MatMulParams p;
      p.b = ref_of(in["b"], dram);
      if (p.b.shape.size() != 2) in["b"].fail("expected a 2-D B");
      const std::int64_t n = p.b.shape[1];
      p.a = quant_of(in["a"]);
      p.b_scale = in["b_scale"].f32s();
      check_count(in["b_scale"], p.b_scale.size(), n);
      p.b_zero_point = in["b_zero_point"].i32s();
      check_count(in["b_zero_point"], p.b_zero_point.size(), n);
      p.y = quant_of(in["y"]);
      p.bias = opt_ref_of(in["bias"], dram);
      p.fixed_point = fixed_of(in["fixed_point"], n);
      return p;
    }
    case 3:
      return isa::AddParams{quant_of(in["a"]), quant_of(in["b"]), quant_of(in["y"]), fixed_add_of(in["fixed_point"])};
    case 4: return isa::ReshapeParams{};
    case 5: {
      isa::RequantizeParams p{quant_of(in["x"]), quant_of(in["y"]), in["table"].bin()};
      if (!p.table.empty() && p.table.size() != 256) in["table"].fail(fmt::format("expected 0 or 256 entries, got {}", p.table.size()));
      return p;
    }
    case 6: return isa::ConcatParams{in["axis"].i64()};
    case 7: return isa::TransposeParams{in["perm"].i64s()};
    case 8: return isa::SplitParams{in["axis"].i64()};
    case 9: {
      isa::GlobalAveragePoolParams p{quant_of(in["x"]), quant_of(in["y"])};
      if (in.has("integer_mean_clamp")) {  // absent: the float formula (files written before it)
        const auto items = in["integer_mean_clamp"].items();
        if (items.size() != 2) in["integer_mean_clamp"].fail("expected [out_min, out_max]");
        p.integer_mean_clamp = std::array<std::int32_t, 2>{items[0].i32(), items[1].i32()};
      }
      return p;
    }
    case 10: {
      isa::ResizeParams p{.scale_h = in["scale_h"].i64(), .scale_w = in["scale_w"].i64()};
      if (p.scale_h < 1 || p.scale_w < 1) in.fail(fmt::format("expected whole scale factors >= 1, got {}x{}", p.scale_h, p.scale_w));
      if (in.has("mode")) {  // absent: NearestRepeat (files written before the bilinear modes)
        const std::string mode = in["mode"].str();
        if (mode == "tflite_bilinear") {
          p.mode = isa::ResizeParams::Mode::TfliteBilinear;
          p.align_corners = in["align_corners"].boolean();
          p.half_pixel_centers = in["half_pixel_centers"].boolean();
        } else if (mode == "onnx_linear") {
          p.mode = isa::ResizeParams::Mode::OnnxLinear;
          p.coordinate_transformation_mode = in["coordinate_transformation_mode"].str();
          if (!in["scales"].is_null()) {
            const auto s = in["scales"].f32s();
            if (s.size() != 2) in["scales"].fail(fmt::format("expected 2 scales, got {}", s.size()));
            p.scales = std::array<float, 2>{s[0], s[1]};
          }
        } else {
          in["mode"].fail("expected \"tflite_bilinear\" or \"onnx_linear\"");
        }
      }
      return p;
    }
    case 11: {
      isa::SliceParams p{in["starts"].i64s(), in["steps"].i64s()};
      if (p.steps.size() != p.starts.size()) in["steps"].fail(fmt::format("expected {} entries, got {}", p.starts.size(), p.steps.size()));
      return p;
    }
    case 12: {
      const std::int64_t mode = in["mode"].i64();
      if (mode < 0 || mode > static_cast<std::int64_t>(isa::PadParams::Mode::Wrap)) in["mode"].fail("expected 0 (constant) to 3 (wrap)");
      return isa::PadParams{in["begins"].i64s(), static_cast<isa::PadParams::Mode>(mode), in["value"].i32()};
    }
    case 13: return isa::MulParams{quant_of(in["a"]), quant_of(in["b"]), quant_of(in["y"])};
    case 14: return isa::SubParams{quant_of(in["a"]), quant_of(in["b"]), quant_of(in["y"])};
  }
  in.fail("unknown kernel kind");
}

/// Inputs and outputs each kernel kind reads and writes ({min, max}; max 0 = any number >= min).
struct Arity {
  std::size_t in_min, in_max, out_min, out_max;
};
Arity arity_of(isa::KernelKind kind) {
  using K = isa::KernelKind;
  switch (kind) {
    case K::Add:
    case K::Mul:
    case K::Sub: return {2, 2, 1, 1};
    case K::Concat: return {1, 0, 1, 1};
    case K::Split: return {1, 1, 1, 0};
    default: return {1, 1, 1, 1};
  }
}

void check_arity(const In& in, std::size_t n, std::size_t lo, std::size_t hi) {
  if (n < lo || (hi != 0 && n > hi)) {
    in.fail(hi == lo ? fmt::format("expected {} tensor(s), got {}", lo, n)
                     : fmt::format("expected {} or more tensor(s), got {}", lo, n));
  }
}

isa::Kernel kernel_of(const In& in, std::uint64_t dram) {
  isa::Kernel k;
  k.kind = enum_of<isa::KernelKind>(in["kind"], isa::kernel_name, 16);
  k.node_name = in["node_name"].str();
  k.operator_index = in["operator_index"].i32(-1);
  k.inputs = refs_of(in["inputs"], dram);
  k.outputs = refs_of(in["outputs"], dram);
  const Arity a = arity_of(k.kind);
  check_arity(in["inputs"], k.inputs.size(), a.in_min, a.in_max);
  check_arity(in["outputs"], k.outputs.size(), a.out_min, a.out_max);
  k.params = params_of(in["params"], k.kind, dram);
  if (const auto* t = std::get_if<isa::TransposeParams>(&k.params); t && t->perm.size() != k.inputs[0].shape.size()) {
    in["params"]["perm"].fail(fmt::format("expected {} axes, got {}", k.inputs[0].shape.size(), t->perm.size()));
  }
  return k;
}

std::shared_ptr<const isa::Program> program_of(const In& in) {
  auto p = std::make_shared<isa::Program>();
  p->name = in["name"].str();
  p->dram_bytes = in["dram_bytes"].u64();
  p->constants = bytes_from(in["constants"].bin());
  if (p->constants.size() > p->dram_bytes) {
    in["constants"].fail(fmt::format("{} bytes do not fit the DRAM region of {} bytes", p->constants.size(), p->dram_bytes));
  }
  for (const In& k : in["kernels"].items()) p->kernels.push_back(kernel_of(k, p->dram_bytes));
  p->inputs = refs_of(in["inputs"], p->dram_bytes);
  p->outputs = refs_of(in["outputs"], p->dram_bytes);
  return p;
}

Attribute attribute_of(const In& in) {
  const auto e = in.entries();
  if (e.size() != 1) in.fail("expected one of int, float, string, ints, floats, tensor");
  const auto& [kind, v] = e.front();
  if (kind == "int") return v.i64();
  if (kind == "float") return v.f32();
  if (kind == "string") return v.str();
  if (kind == "ints") return v.i64s();
  if (kind == "floats") return v.f32s();
  if (kind == "tensor") return tensor_of(v);
  in.fail(fmt::format("unknown attribute kind '{}'", kind));
}

std::shared_ptr<const Node> node_of(const In& in) {
  auto n = std::make_shared<Node>();
  n->name = in["name"].str();
  n->op_type = in["op_type"].str();
  n->domain = in["domain"].str();
  n->index = in["index"].i32(-1);
  n->inputs = in["inputs"].ints(-1, std::numeric_limits<int>::max());
  n->outputs = in["outputs"].ints(-1, std::numeric_limits<int>::max());
  for (const auto& [key, value] : in["attributes"].entries()) n->attributes.emplace(key, attribute_of(value));
  return n;
}

CpuOp cpu_op_of(const In& in, const std::vector<HostSlot>& slots) {
  CpuOp op;
  op.kind = enum_of<CpuOpKind>(in["kind"], cpu_op_name, 5);
  op.node_name = in["node_name"].str();
  op.operator_index = in["operator_index"].i32(-1);
  const auto last = static_cast<std::int64_t>(slots.size()) - 1;
  const bool external = op.kind == CpuOpKind::External;
  op.inputs = in["inputs"].ints(external ? -1 : 0, last);
  op.outputs = in["outputs"].ints(external ? -1 : 0, last);
  op.scales = in["scales"].f32s();
  op.zero_points = in["zero_points"].i32s();
  op.axis = in["axis"].i64();
  op.round_half_away_from_zero = in["round_half_away_from_zero"].boolean();
  op.channels_last = in["channels_last"].boolean();
  if (!in["node"].is_null()) op.node = node_of(in["node"]);
  if (external) {
    if (!op.node) in["node"].fail("an External operator needs its node");
    return op;
  }
  if (op.inputs.size() != 1 || op.outputs.size() != 1) in.fail(fmt::format("a {} reads and writes one slot", cpu_op_name(op.kind)));
  const HostSlot& x = slots[static_cast<std::size_t>(op.inputs[0])];
  const HostSlot& y = slots[static_cast<std::size_t>(op.outputs[0])];
  if (element_count(x.shape) != element_count(y.shape)) {
    in.fail(fmt::format("slots '{}' {} and '{}' {} differ in element count", x.name, shape_to_string(x.shape), y.name,
                        shape_to_string(y.shape)));
  }
  if (op.kind == CpuOpKind::Quantize || op.kind == CpuOpKind::Dequantize) {
    if (op.scales.empty() || op.zero_points.size() != op.scales.size()) {
      in.fail(fmt::format("{} scales and {} zero points", op.scales.size(), op.zero_points.size()));
    }
    if (op.scales.size() > 1 &&
        (op.axis < 0 || op.axis >= static_cast<std::int64_t>(x.shape.size()) ||
         x.shape[static_cast<std::size_t>(op.axis)] != static_cast<std::int64_t>(op.scales.size()))) {
      in.fail(fmt::format("{} per-axis parameters do not fit axis {} of {}", op.scales.size(), op.axis,
                          shape_to_string(x.shape)));
    }
  }
  return op;
}

CompilerOptions options_of(const In& in) {
  CompilerOptions o;
  o.batch_size = in["batch_size"].i64(1, kMaxElements);
  o.pe_count = in["pe_count"].i32(1, 2);
  o.without_quantize = in["without_quantize"].strs();
  o.normalized_pixel_outputs = in["normalized_pixel_outputs"].strs();
  for (const auto& [name, perm] : in["permute_input"].entries()) o.permute_input[name] = perm.i64s();
  o.remove_lower = in["remove_lower"].boolean();
  o.remove_unlower = in["remove_unlower"].boolean();
  return o;
}

CompiledModel model_of(const In& in) {
  CompiledModel m;
  for (const In& s : in["slots"].items()) {
    HostSlot slot;
    slot.name = s["name"].str();
    slot.dtype = dtype_of(s["dtype"]);
    slot.shape = shape_of(s["shape"]);
    slot.layout = layout_of(s["layout"]);
    if (slot.layout == isa::Layout::LoweredNCHW && slot.shape.size() != 4) s.fail("a lowered_nchw slot must be 4-D");
    if (!s["constant"].is_null()) {
      auto t = std::make_shared<Tensor>(tensor_of(s["constant"]));
      if (t->dtype() != slot.dtype || t->shape() != slot.shape || slot.layout != isa::Layout::Linear) {
        s["constant"].fail("the constant does not match the slot's dtype, shape and dense layout");
      }
      slot.constant = std::move(t);
    }
    slot.format = s["format"].str();
    m.slots.push_back(std::move(slot));
  }
  const auto last_slot = static_cast<std::int64_t>(m.slots.size()) - 1;
  m.input_slots = in["input_slots"].ints(0, last_slot);
  m.output_slots = in["output_slots"].ints(0, last_slot);
  for (const In& c : in["npu_calls"].items()) {
    NpuCall call;
    call.program = program_of(c["program"]);
    call.input_slots = c["input_slots"].ints(0, last_slot);
    call.output_slots = c["output_slots"].ints(0, last_slot);
    call.activation_bytes = c["activation_bytes"].u64();
    call.activation_bytes_unplanned = c["activation_bytes_unplanned"].u64();
    const auto check_io = [&](const char* key, const std::vector<int>& slots, const std::vector<isa::TensorRef>& refs) {
      if (slots.size() != refs.size()) {
        c[key].fail(fmt::format("{} slots for the program's {} tensors", slots.size(), refs.size()));
      }
      for (std::size_t i = 0; i < slots.size(); ++i) {
        const HostSlot& slot = m.slots[static_cast<std::size_t>(slots[i])];
        if (slot.size_bytes() != refs[i].size_bytes()) {
          c[key].fail(fmt::format("slot '{}' holds {} bytes, the program's tensor {} has {}", slot.name,
                                  slot.size_bytes(), i, refs[i].size_bytes()));
        }
      }
    };
    check_io("input_slots", call.input_slots, call.program->inputs);
    check_io("output_slots", call.output_slots, call.program->outputs);
    m.npu_calls.push_back(std::move(call));
  }
  for (const In& s : in["steps"].items()) {
    Step step;
    if (s.has("npu")) {
      step.kind = Step::Kind::Npu;
      step.npu = static_cast<int>(s["npu"].i64(0, static_cast<std::int64_t>(m.npu_calls.size()) - 1));
    } else {
      step.kind = Step::Kind::Cpu;
      step.cpu = cpu_op_of(s["cpu"], m.slots);
    }
    m.steps.push_back(std::move(step));
  }
  const In report = in["report"];
  for (const In& e : report["entries"].items()) {
    m.report.entries.push_back({e["node_name"].str(), e["op"].str(), e["operator_index"].i32(-1),
                                e["placement"].str(), e["target"].str(), e["reason"].str()});
  }
  m.report.notes = report["notes"].strs();
  return m;
}

std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    throw Error(ErrorCode::ModelLoadFailed, fmt::format("{}: cannot open program file", path.string()),
                ErrorSubject::of_file(path.string()));
  }
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) {
    throw Error(ErrorCode::ModelLoadFailed, fmt::format("{}: read error", path.string()),
                ErrorSubject::of_file(path.string()));
  }
  return bytes;
}

}  // namespace

namespace detail {

std::vector<std::uint8_t> options_to_cbor(const CompilerOptions& options) { return json::to_cbor(enc(options)); }

}  // namespace detail

std::string_view compiler_version() noexcept { return FURIOSA_COMPILER_VERSION; }

bool is_program_bytes(std::string_view bytes) noexcept {
  return bytes.size() >= kMagic.size() && std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) == 0;
}

bool is_program_file(const std::filesystem::path& path) noexcept {
  try {
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext == ".enf") return true;
    std::ifstream f(path, std::ios::binary);
    std::string head(kMagic.size(), '\0');
    f.read(head.data(), static_cast<std::streamsize>(head.size()));
    return f.gcount() == static_cast<std::streamsize>(head.size()) && is_program_bytes(head);
  } catch (...) {
    return false;
  }
}

std::string serialize_program(const CompiledModel& model, const CompilerOptions& options) {
  const json meta_json = {{"compiler_version", compiler_version()}, {"options", enc(options)}};
  const std::vector<std::uint8_t> meta = json::to_cbor(meta_json);
  const std::vector<std::uint8_t> body = json::to_cbor(enc(model));
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

namespace {

/// nlohmann's CBOR reader recurses once per nested array or map, so a hostile body of a few
/// hundred thousand nested arrays would overflow the stack (found by fuzz_program_file). This
/// SAX handler builds the same DOM and stops the parse at kMaxDepth levels; the encoding this
/// build writes nests fewer than 12.
class DepthLimitedCbor {
 public:
  static constexpr std::size_t kMaxDepth = 64;
  explicit DepthLimitedCbor(json& out) : dom_(out, /*allow_exceptions=*/false) {}
  bool too_deep() const noexcept { return too_deep_; }

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool key(json::string_t& v) { return dom_.key(v); }
  bool start_object(std::size_t n) { return enter() && dom_.start_object(n); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return enter() && dom_.start_array(n); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    return dom_.parse_error(position, token, e);
  }

 private:
  bool enter() {
    if (++depth_ <= kMaxDepth) return true;
    too_deep_ = true;
    return false;
  }
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::size_t depth_ = 0;
  bool too_deep_ = false;
};

}  // namespace

ProgramFile deserialize_program(std::string_view bytes, const std::string& source) {
  const auto refuse = [&](const std::string& problem) {
    return Error(ErrorCode::ModelLoadFailed, fmt::format("{}: {}", source, problem), ErrorSubject::of_file(source));
  };
  if (!is_program_bytes(bytes)) {
    throw refuse(bytes.size() < kMagic.size() ? fmt::format("not a program file ({} bytes, shorter than the magic)", bytes.size())
                                              : "not a program file (wrong magic; expected a .enf written by furiosa-compile)");
  }
  if (bytes.size() < kProgramHeaderBytes) {
    throw refuse(fmt::format("truncated: {} bytes, shorter than the {}-byte header", bytes.size(), kProgramHeaderBytes));
  }
  const auto version = static_cast<std::uint32_t>(get_le(bytes, 8, 4));
  if (version != kProgramFormatVersion) {
    throw refuse(fmt::format("format version {} is {} this build's version {}: recompile the model with this "
                             "furiosa-compile", version, version > kProgramFormatVersion ? "newer than" : "older than",
                             kProgramFormatVersion));
  }
  const std::uint64_t meta_len = get_le(bytes, 12, 4);
  const std::uint64_t body_len = get_le(bytes, 16, 8);
  const std::uint64_t available = bytes.size() - kProgramHeaderBytes;
  if (meta_len > available || body_len > available - meta_len) {
    throw refuse(fmt::format("truncated: the header announces {} bytes, the file has {}",
                             kProgramHeaderBytes + meta_len + body_len, bytes.size()));
  }
  if (meta_len + body_len != available) {
    throw refuse(fmt::format("{} unexpected bytes after the body", available - meta_len - body_len));
  }
  const std::string_view meta = bytes.substr(kProgramHeaderBytes, meta_len);
  const std::string_view body = bytes.substr(kProgramHeaderBytes + meta_len, body_len);
  if (crc_of(meta) != static_cast<std::uint32_t>(get_le(bytes, 24, 4))) {
    throw refuse("corrupted: the checksum of the meta block does not match");
  }
  if (crc_of(body) != static_cast<std::uint32_t>(get_le(bytes, 28, 4))) {
    throw refuse("corrupted: the checksum of the body does not match");
  }
  const auto parse = [&](std::string_view part, const char* what) {
    json j;
    DepthLimitedCbor sax(j);
    bool ok = false;
    try {
      ok = json::sax_parse(part.begin(), part.end(), &sax, nlohmann::detail::input_format_t::cbor, /*strict=*/true);
    } catch (const json::exception& e) {  // e.g. an array header announcing 2^62 elements (408)
      throw refuse(fmt::format("the {} is not valid CBOR ({})", what, e.what()));
    }
    if (sax.too_deep()) {
      throw refuse(fmt::format("the {} nests deeper than {} levels", what, DepthLimitedCbor::kMaxDepth));
    }
    if (!ok || j.is_discarded()) throw refuse(fmt::format("the {} is not valid CBOR", what));
    return j;
  };
  const json meta_json = parse(meta, "meta block");
  const json body_json = parse(body, "body");
  try {
    ProgramFile out;
    const In m(meta_json, "meta");
    out.compiler_version = m["compiler_version"].str();
    out.options = options_of(m["options"]);
    out.model = model_of(In(body_json, "body"));
    return out;
  } catch (const Invalid& e) {
    throw refuse("invalid content: " + e.what);
  } catch (const json::exception& e) {
    throw refuse(std::string("invalid content: ") + e.what());
  }
}

void save_program(const CompiledModel& model, const CompilerOptions& options, const std::filesystem::path& path) {
  const std::string bytes = serialize_program(model, options);
  static std::atomic<std::uint64_t> counter{0};
  std::filesystem::path tmp = path;
  tmp += fmt::format(".tmp.{}.{}.{}", ::getpid(), counter.fetch_add(1), std::random_device{}());
  const auto fail = [&](const std::string& why) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return Error(ErrorCode::IoError, fmt::format("{}: cannot write the program file: {}", path.string(), why),
                 ErrorSubject::of_file(path.string()));
  };
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw fail(std::error_code(errno, std::generic_category()).message());
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) throw fail("write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw fail(ec.message());
}

ProgramFile load_program(const std::filesystem::path& path) {
  return deserialize_program(read_whole_file(path), path.string());
}

}  // namespace furiosa::compiler
