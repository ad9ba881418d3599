// The reader of program files: CBOR -> CompiledModel and CompilerOptions, checking every field's
// type and range, every index, and every tensor of a program inside its DRAM region
// (program_file.h deserialize_program).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <variant>

#include "codec.h"
#include "furiosa/core/error.h"
#include "furiosa/device/kernel_kinds.h"

namespace furiosa::program::detail {
namespace {


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
  /// Fails with `problem` = "<relative path>: <what>" below this node.
  [[noreturn]] void fail_at(std::string_view problem) const { throw Invalid{fmt::format("{}.{}", path_, problem)}; }
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
  Tensor t = Tensor::uninitialized(dtype, std::move(shape));  // `expected` bytes, all copied
  if (!data.empty()) std::memcpy(t.bytes().data(), data.data(), data.size());
  return t;
}

/// Reads a TensorRef (its bounds are checked by isa::verify, program_of).
isa::TensorRef ref_of(const In& in) {
  isa::TensorRef r;
  r.address = in["address"].u64();
  r.dtype = dtype_of(in["dtype"]);
  r.shape = shape_of(in["shape"]);
  r.layout = layout_of(in["layout"]);
  if (r.layout == isa::Layout::LoweredNCHW && r.shape.size() != 4) in.fail("a lowered_nchw tensor must be 4-D");
  return r;
}

std::optional<isa::TensorRef> opt_ref_of(const In& in) {
  if (in.is_null()) return std::nullopt;
  return ref_of(in);
}

std::vector<isa::TensorRef> refs_of(const In& in) {
  std::vector<isa::TensorRef> out;
  for (const In& e : in.items()) out.push_back(ref_of(e));
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

// One case per Kernel::params alternative (kernel_kinds.h: adding a kind).
decltype(isa::Kernel::params) params_of(const In& in, isa::KernelKind kind) {
  static_assert(std::variant_size_v<decltype(isa::Kernel::params)> == 15,
                "a new Kernel::params alternative needs its case here and its enc_params overload");
  switch (isa::kernel_params_index(kind)) {
    case 0: {
      isa::Conv2dParams p;
      p.weight = ref_of(in["weight"]);
      if (p.weight.shape.size() != 4) in["weight"].fail("expected a 4-D weight");
      const std::int64_t m = p.weight.shape[0];
      p.bias = opt_ref_of(in["bias"]);
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
      p.b = ref_of(in["b"]);
      if (p.b.shape.size() != 2) in["b"].fail("expected a 2-D B");
      const std::int64_t n = p.b.shape[1];
      p.a = quant_of(in["a"]);
      p.b_scale = in["b_scale"].f32s();
      check_count(in["b_scale"], p.b_scale.size(), n);
      p.b_zero_point = in["b_zero_point"].i32s();
      check_count(in["b_zero_point"], p.b_zero_point.size(), n);
      p.y = quant_of(in["y"]);
      p.bias = opt_ref_of(in["bias"]);
      p.fixed_point = fixed_of(in["fixed_point"], n);
      return p;
    }
    case 3: {
      isa::AddParams p{quant_of(in["a"]), quant_of(in["b"]), quant_of(in["y"]),
                       fixed_add_of(in["fixed_point"])};
      if (in.has("formula")) {  // absent: Dequantized (files written before 2026-11-28)
        const std::string f = in["formula"].str();
        if (f == isa::add_formula_name(isa::AddFormula::MlasRatios)) {
          p.formula = isa::AddFormula::MlasRatios;
        } else if (f == isa::add_formula_name(isa::AddFormula::MlasRatiosUint8)) {
          p.formula = isa::AddFormula::MlasRatiosUint8;
        } else if (f != isa::add_formula_name(isa::AddFormula::Dequantized)) {
          in["formula"].fail("expected \"dequantized\", \"mlas_ratios\" or \"mlas_ratios_u8\"");
        }
      }
      return p;
    }
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
    case 13: {
      isa::MulParams p{quant_of(in["a"]), quant_of(in["b"]), quant_of(in["y"])};
      if (in.has("dequantized")) p.dequantized = in["dequantized"].boolean();  // absent: false
      return p;
    }
    case 14: return isa::SubParams{quant_of(in["a"]), quant_of(in["b"]), quant_of(in["y"])};
  }
  in.fail("unknown kernel kind");
}

void check_arity(const In& in, std::size_t n, std::size_t lo, std::size_t hi) {
  if (n < lo || (hi != 0 && n > hi)) {
    in.fail(hi == lo ? fmt::format("expected {} tensor(s), got {}", lo, n)
                     : fmt::format("expected {} or more tensor(s), got {}", lo, n));
  }
}

isa::Kernel kernel_of(const In& in) {
  isa::Kernel k;
  k.kind = enum_of<isa::KernelKind>(in["kind"], isa::kernel_name,
                                    static_cast<int>(isa::kKernelKindCount));
  k.node_name = in["node_name"].str();
  k.operator_index = in["operator_index"].i32(-1);
  k.inputs = refs_of(in["inputs"]);
  k.outputs = refs_of(in["outputs"]);
  const isa::KernelArity a = isa::kernel_arity(k.kind);
  check_arity(in["inputs"], k.inputs.size(), a.in_min, a.in_max);
  check_arity(in["outputs"], k.outputs.size(), a.out_min, a.out_max);
  k.params = params_of(in["params"], k.kind);
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
  for (const In& k : in["kernels"].items()) p->kernels.push_back(kernel_of(k));
  p->inputs = refs_of(in["inputs"]);
  p->outputs = refs_of(in["outputs"]);
  if (const std::string problem = isa::verify(*p); !problem.empty()) in.fail_at(problem);
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
  if (in.has("input_shapes")) {
    for (const auto& [name, shape] : in["input_shapes"].entries())
      o.input_shapes[name] = shape.i64s();
  }
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

[[noreturn]] void refuse_content(const std::string& source, const std::string& what) {
  throw Error(ErrorCode::ModelLoadFailed, fmt::format("{}: invalid content: {}", source, what),
              ErrorSubject::of_file(source));
}

}  // namespace

CompiledModel decode_model(const json& body, const std::string& source) {
  try {
    return model_of(In(body, "body"));
  } catch (const Invalid& e) {
    refuse_content(source, e.what);
  } catch (const json::exception& e) {
    refuse_content(source, e.what());
  }
}

CompilerOptions decode_options(const json& options, const std::string& source) {
  try {
    return options_of(In(options, "meta.options"));
  } catch (const Invalid& e) {
    refuse_content(source, e.what);
  } catch (const json::exception& e) {
    refuse_content(source, e.what());
  }
}

}  // namespace furiosa::program::detail
