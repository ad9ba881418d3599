// Placed graph -> host steps and NPU programs (lowering.h).
#include "lowering.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "capability.h"
#include "furiosa/core/error.h"
#include "furiosa/host/layout.h"
#include "graph_utils.h"
#include "memory_plan.h"
#include "passes.h"

namespace furiosa::compiler::detail {
namespace {

constexpr std::uint64_t kAlign = 64;
constexpr std::uint64_t kActivationFlag = 1ull << 62;  // marks activation addresses until placement

std::uint64_t align_up(std::uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// The fixed-point requantization a node carries (graph.h: fixed_point_multiplier /
// fixed_point_shift / output_min / output_max), or nullopt for the ONNX float rule. `channels`
// is the number of output channels (per-channel multipliers), `out` the output dtype.
std::optional<isa::FixedPointRequant> fixed_point_requant(const Node& n, std::size_t channels, DType out) {
  if (!n.attributes.count("fixed_point_multiplier")) return std::nullopt;
  const auto mult = n.attr_ints("fixed_point_multiplier", {});
  const auto shift = n.attr_ints("fixed_point_shift", {});
  if (mult.size() != shift.size() || (mult.size() != 1 && mult.size() != channels)) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("node '{}' ({}): fixed_point_multiplier/fixed_point_shift must both have 1 or "
                            "{} values, have {} and {}", n.name, n.qualified_op(), channels, mult.size(),
                            shift.size()));
  }
  isa::FixedPointRequant f;
  for (std::size_t i = 0; i < mult.size(); ++i) {
    f.multipliers.push_back({static_cast<std::int32_t>(mult[i]), static_cast<std::int32_t>(shift[i])});
  }
  const auto range = isa::quant_range(out);
  f.out_min = static_cast<std::int32_t>(n.attr_int("output_min", range[0]));
  f.out_max = static_cast<std::int32_t>(n.attr_int("output_max", range[1]));
  return f;
}

// The fixed-point addition a QLinearAdd node carries (graph.h), or nullopt.
std::optional<isa::FixedPointAdd> fixed_point_add(const Node& n, DType out) {
  if (!n.attributes.count("fixed_point_multiplier")) return std::nullopt;
  const auto mult = n.attr_ints("fixed_point_multiplier", {});
  const auto shift = n.attr_ints("fixed_point_shift", {});
  if (mult.size() != 3 || shift.size() != 3) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("node '{}' ({}): fixed_point_multiplier/fixed_point_shift must have 3 values (a, b, y)",
                            n.name, n.qualified_op()));
  }
  auto qm = [&](std::size_t i) {
    return isa::QuantizedMultiplier{static_cast<std::int32_t>(mult[i]), static_cast<std::int32_t>(shift[i])};
  };
  const auto range = isa::quant_range(out);
  return isa::FixedPointAdd{.left_shift = static_cast<std::int32_t>(n.attr_int("fixed_point_left_shift", 20)),
                            .a_mult = qm(0),
                            .b_mult = qm(1),
                            .y_mult = qm(2),
                            .out_min = static_cast<std::int32_t>(n.attr_int("output_min", range[0])),
                            .out_max = static_cast<std::int32_t>(n.attr_int("output_max", range[1]))};
}

// Copies a dense tensor into `layout` (LoweredNCHW pads each row with zeros).
std::vector<std::byte> lay_out(const Tensor& t, isa::Layout layout) {
  if (layout == isa::Layout::Linear) return {t.bytes().begin(), t.bytes().end()};
  const std::size_t es = dtype_size(t.dtype());
  std::vector<std::byte> out(host::lowered_size(t.shape(), es));
  host::lower(t.shape(), es, t.bytes(), out);
  return out;
}

class Lowering {
 public:
  Lowering(const Graph& g, const CompilerOptions& opt, CompiledModel& out) : g_(g), opt_(opt), out_(out) {}

  void run() {
    for (std::size_t n = 0; n < g_.nodes.size(); ++n) {
      for (int i : g_.nodes[n].inputs) {
        if (i >= 0) consumers_[i].push_back(static_cast<int>(n));
      }
    }
    for (int id : g_.inputs) {
      const Value& v = value(id);
      int s = add_slot(v.name, v.dtype, v.shape, isa::Layout::Linear);
      out_.slots[static_cast<std::size_t>(s)].format = v.format;
      host_[id] = s;
      out_.input_slots.push_back(s);
    }
    for (int n : schedule()) emit(n);
    close_segment();
    for (int id : g_.outputs) {
      const int s = host_value(id);
      if (!value(id).format.empty()) out_.slots[static_cast<std::size_t>(s)].format = value(id).format;
      out_.output_slots.push_back(s);
    }
  }

 private:
  const Value& value(int id) const { return g_.values[static_cast<std::size_t>(id)]; }

  // The emission order: graph order, except that a node placed off the NPU waits until a later
  // NPU node reads one of its outputs (directly or through other waiting nodes), or until the
  // end. Host work that only feeds model outputs (an output's DequantizeLinear, a host
  // post-process) then no longer closes the open NPU segment, so NPU nodes after it in graph
  // order join the same program instead of a second one fed from the first through the host
  // (SSD's box and score concatenations, each followed by its output's Dequantize). Waiting
  // nodes keep their relative order, and a node never runs before its producers.
  std::vector<int> schedule() const {
    std::vector<int> order, waiting;
    std::set<int> waiting_values;  // outputs of waiting nodes
    auto flush = [&] {
      order.insert(order.end(), waiting.begin(), waiting.end());
      waiting.clear();
      waiting_values.clear();
    };
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (place(g_, n, nullptr).where != Where::Npu) {
        waiting.push_back(static_cast<int>(i));
        for (int o : n.outputs) {
          if (o >= 0) waiting_values.insert(o);
        }
        continue;
      }
      if (std::any_of(n.inputs.begin(), n.inputs.end(), [&](int v) { return waiting_values.count(v) > 0; })) flush();
      order.push_back(static_cast<int>(i));
    }
    flush();
    return order;
  }
  bool is_graph_output(int id) const {
    return std::find(g_.outputs.begin(), g_.outputs.end(), id) != g_.outputs.end();
  }
  void note_entry(const Node& n, const char* placement, std::string target, std::string reason) {
    detail::note_entry(out_.report, n, placement, std::move(target), std::move(reason));
  }

  // ---- host slots -------------------------------------------------------------------------------
  int add_slot(std::string name, DType dtype, Shape shape, isa::Layout layout) {
    out_.slots.push_back({std::move(name), dtype, std::move(shape), layout, nullptr});
    return static_cast<int>(out_.slots.size() - 1);
  }

  void add_cpu_step(CpuOp op) {
    Step s;
    s.kind = Step::Kind::Cpu;
    s.cpu = std::move(op);
    out_.steps.push_back(std::move(s));
  }

  // The host slot of value `id`: closes the open NPU segment when it produces the value, and
  // makes constant slots for initializers.
  int host_value(int id) {
    if (auto it = host_.find(id); it != host_.end()) return it->second;
    const Value& v = value(id);
    if (v.constant) {
      int s = add_slot(v.name, v.dtype, v.shape, isa::Layout::Linear);
      out_.slots[static_cast<std::size_t>(s)].constant = std::make_shared<const Tensor>(*v.constant);
      host_[id] = s;
      return s;
    }
    if (seg_values_.count(id)) {
      close_segment();
      if (auto it = host_.find(id); it != host_.end()) return it->second;
    }
    throw Error(ErrorCode::Internal, fmt::format("value '{}' is neither on the host nor on the NPU", v.name));
  }

  // ---- NPU segments -----------------------------------------------------------------------------
  isa::TensorRef alloc_activation(DType dtype, const Shape& shape, isa::Layout layout) {
    isa::TensorRef r{.address = kActivationFlag | act_end_, .dtype = dtype, .shape = shape, .layout = layout};
    act_end_ = align_up(act_end_ + r.size_bytes());
    return r;
  }

  isa::TensorRef add_constant(const Tensor& t, isa::Layout layout) {
    auto bytes = lay_out(t, layout);
    isa::TensorRef r{.address = constants_.size(), .dtype = t.dtype(), .shape = t.shape(), .layout = layout};
    constants_.insert(constants_.end(), bytes.begin(), bytes.end());
    constants_.resize(align_up(constants_.size()), std::byte{0});
    return r;
  }

  void push_kernel(isa::Kernel k) {
    prog_.kernels.push_back(std::move(k));
  }

  // Value `id` on the device in any layout (the one it has; program inputs come in dense).
  isa::TensorRef device_any(int id, const Node& consumer) {
    if (auto it = dev_.find({id, isa::Layout::Linear}); it != dev_.end()) return it->second;
    if (auto it = dev_.find({id, isa::Layout::LoweredNCHW}); it != dev_.end()) return it->second;
    if (host_lowered(id)) return device_value(id, isa::Layout::LoweredNCHW, consumer);
    return device_value(id, isa::Layout::Linear, consumer);
  }

  // True when value `id` is held on the host in the lowered layout (an NHWC Lower's result).
  bool host_lowered(int id) const {
    auto it = host_.find(id);
    return it != host_.end() && out_.slots[static_cast<std::size_t>(it->second)].layout == isa::Layout::LoweredNCHW;
  }

  // Value `id` on the device in `layout`: creates program inputs (with host Lower), constants,
  // and layout-changing LowLevelReshape kernels as needed.
  isa::TensorRef device_value(int id, isa::Layout layout, const Node& consumer) {
    const auto key = std::make_pair(id, layout);
    if (auto it = dev_.find(key); it != dev_.end()) return it->second;
    const Value& v = value(id);
    if (layout == isa::Layout::LoweredNCHW && v.shape.size() != 4) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' ({}): input '{}' must be 4-D NCHW, has shape {}",
                              consumer.name, consumer.qualified_op(), v.name, shape_to_string(v.shape)));
    }
    if (v.constant) {
      auto r = add_constant(*v.constant, layout);
      dev_[key] = r;
      return r;
    }
    const auto other_layout = layout == isa::Layout::Linear ? isa::Layout::LoweredNCHW : isa::Layout::Linear;
    if (auto other = dev_.find({id, other_layout}); other != dev_.end()) {
      auto r = alloc_activation(v.dtype, v.shape, layout);
      push_kernel({.kind = isa::KernelKind::Reshape, .node_name = consumer.name, .operator_index = consumer.index,
                   .inputs = {other->second}, .outputs = {r}, .params = isa::ReshapeParams{}});
      dev_[key] = r;
      return r;
    }
    // A new program input fed from the host.
    int slot = host_value(id);
    open_segment_if_needed();
    if (host_lowered(id)) {
      // Already lowered on the host (NHWC Lower): load it as is, relayout on the NPU if needed.
      auto r = alloc_activation(v.dtype, v.shape, isa::Layout::LoweredNCHW);
      prog_.inputs.push_back(r);
      call_.input_slots.push_back(slot);
      dev_[{id, isa::Layout::LoweredNCHW}] = r;
      return layout == isa::Layout::LoweredNCHW ? r : device_value(id, layout, consumer);
    }
    auto r = alloc_activation(v.dtype, v.shape, layout);
    if (layout == isa::Layout::LoweredNCHW) {
      if (v.shape[3] % isa::kLoweredWidthAlign == 0) {
        out_.report.notes.push_back(fmt::format(
            "Lower of '{}' on the NPU: width {} is a multiple of {}, the dense bytes are already "
            "the lowered layout", v.name, v.shape[3], isa::kLoweredWidthAlign));
      } else if (opt_.remove_lower && caller_lowered_input(id, slot)) {
        out_.report.notes.push_back(fmt::format(
            "remove_lower: input '{}' is given in the lowered layout {} (no host Lower)", v.name,
            shape_to_string(out_.slots[static_cast<std::size_t>(slot)].shape)));
      } else {
        if (opt_.remove_lower) {
          out_.report.notes.push_back(fmt::format(
              "remove_lower does not apply to '{}': it is not a model input read only by the NPU", v.name));
        }
        int lowered = add_slot(v.name + ".lowered", v.dtype, v.shape, isa::Layout::LoweredNCHW);
        CpuOp op;
        op.kind = CpuOpKind::Lower;
        op.inputs = {slot};
        op.outputs = {lowered};
        add_cpu_step(std::move(op));
        out_.report.notes.push_back(fmt::format(
            "Lower of '{}' on the host (Pad/Lower): width {} is not a multiple of {}", v.name,
            v.shape[3], isa::kLoweredWidthAlign));
        slot = lowered;
      }
    }
    prog_.inputs.push_back(r);
    call_.input_slots.push_back(slot);
    dev_[key] = r;
    return r;
  }

  // [N, C, H, W] with W rounded up to the lowered layout's row of isa::kLoweredWidthAlign.
  static Shape padded_shape(Shape s) {
    s[3] = (s[3] + isa::kLoweredWidthAlign - 1) / isa::kLoweredWidthAlign * isa::kLoweredWidthAlign;
    return s;
  }

  // remove_lower: true when model input `id` (host slot `slot`) is read only by NPU nodes, so
  // the caller can give it lowered; the slot then becomes dense [N, C, H, padded W] with format
  // "lowered_nchw" (its bytes are exactly the lowered layout).
  bool caller_lowered_input(int id, int slot) {
    if (std::find(out_.input_slots.begin(), out_.input_slots.end(), slot) == out_.input_slots.end()) return false;
    for (int c : consumers_[id]) {
      if (place(g_, g_.nodes[static_cast<std::size_t>(c)], nullptr).where != Where::Npu) return false;
    }
    HostSlot& s = out_.slots[static_cast<std::size_t>(slot)];
    s.shape = padded_shape(s.shape);
    s.format = std::string(isa::layout_name(isa::Layout::LoweredNCHW));
    return true;
  }

  void open_segment_if_needed() { segment_open_ = true; }

  void produce(int id, const isa::TensorRef& r) {
    dev_[std::make_pair(id, r.layout)] = r;
    seg_values_.insert(id);
  }

  // Ends the open NPU segment: values used later (by other nodes or as graph outputs) become
  // program outputs, with a host Unlower where needed; appends the NPU call step.
  void close_segment() {
    if (!segment_open_) return;
    segment_open_ = false;
    std::vector<std::pair<int, int>> unlowers;  // (lowered slot, dense slot)
    for (int id : seg_values_) {
      bool needed = is_graph_output(id);
      for (int c : consumers_[id]) needed = needed || !seg_nodes_.count(c);
      if (!needed) continue;
      const Value& v = value(id);
      isa::TensorRef r;
      if (auto it = dev_.find({id, isa::Layout::Linear}); it != dev_.end()) r = it->second;
      else r = dev_.at({id, isa::Layout::LoweredNCHW});
      const bool lowered = r.layout == isa::Layout::LoweredNCHW && v.shape[3] % isa::kLoweredWidthAlign != 0;
      if (lowered && opt_.remove_unlower && is_graph_output(id) &&
          std::all_of(consumers_[id].begin(), consumers_[id].end(), [&](int c) { return seg_nodes_.count(c) > 0; })) {
        // The caller takes the lowered bytes: a dense slot with the padded width.
        const int slot = add_slot(v.name, v.dtype, padded_shape(v.shape), isa::Layout::Linear);
        out_.slots[static_cast<std::size_t>(slot)].format = std::string(isa::layout_name(isa::Layout::LoweredNCHW));
        prog_.outputs.push_back(r);
        call_.output_slots.push_back(slot);
        host_[id] = slot;
        out_.report.notes.push_back(fmt::format("remove_unlower: output '{}' is returned in the lowered layout {}",
                                                v.name, shape_to_string(padded_shape(v.shape))));
        continue;
      }
      int slot = add_slot(v.name + (lowered ? ".lowered" : ""), v.dtype, v.shape,
                          lowered ? isa::Layout::LoweredNCHW : isa::Layout::Linear);
      prog_.outputs.push_back(r);
      call_.output_slots.push_back(slot);
      if (lowered) {
        int dense = add_slot(v.name, v.dtype, v.shape, isa::Layout::Linear);
        unlowers.emplace_back(slot, dense);
        out_.report.notes.push_back(fmt::format(
            "Unlower of '{}' on the host (Unlower/Slice): width {} is not a multiple of {}",
            v.name, v.shape[3], isa::kLoweredWidthAlign));
        slot = dense;
      } else if (r.layout == isa::Layout::LoweredNCHW) {
        out_.report.notes.push_back(fmt::format("Unlower of '{}' on the NPU: width {} is a multiple of {}",
                                                v.name, v.shape[3], isa::kLoweredWidthAlign));
      }
      host_[id] = slot;
    }
    // Place activations after the constants, reusing DRAM by liveness (memory_plan.h): each
    // placeholder address is one buffer, live from the kernel writing it (0 for a program input)
    // to the last kernel reading it (past the last kernel for a program output).
    const std::uint64_t base = align_up(constants_.size());
    std::map<std::uint64_t, std::size_t> buffer_of;  // placeholder -> index into uses
    std::vector<detail::BufferUse> uses;
    const auto kernel_count = static_cast<std::int64_t>(prog_.kernels.size());
    auto note_use = [&](const isa::TensorRef& r, std::int64_t at) {
      if (!(r.address & kActivationFlag)) return;
      auto [it, added] = buffer_of.emplace(r.address, uses.size());
      if (added) uses.push_back({r.size_bytes(), at, at});
      detail::BufferUse& u = uses[it->second];
      u.size = std::max(u.size, r.size_bytes());
      u.first = std::min(u.first, at);
      u.last = std::max(u.last, at);
    };
    for (const auto& r : prog_.inputs) note_use(r, 0);
    for (std::int64_t k = 0; k < kernel_count; ++k) {
      const isa::Kernel& kernel = prog_.kernels[static_cast<std::size_t>(k)];
      for (const auto& r : kernel.inputs) note_use(r, k);
      for (const auto& r : kernel.outputs) note_use(r, k);
      if (const auto* c = std::get_if<isa::Conv2dParams>(&kernel.params)) {
        note_use(c->weight, k);
        if (c->bias) note_use(*c->bias, k);
      }
      if (const auto* m = std::get_if<isa::MatMulParams>(&kernel.params)) {
        note_use(m->b, k);
        if (m->bias) note_use(*m->bias, k);
      }
    }
    for (const auto& r : prog_.outputs) note_use(r, kernel_count);
    std::uint64_t planned = 0;
    const std::vector<std::uint64_t> offsets = detail::plan_buffers(uses, kAlign, planned);
    call_.activation_bytes = planned;
    call_.activation_bytes_unplanned = act_end_;
    auto fix = [&](isa::TensorRef& r) {
      if (r.address & kActivationFlag) r.address = base + offsets[buffer_of.at(r.address)];
    };
    for (auto& k : prog_.kernels) {
      for (auto& r : k.inputs) fix(r);
      for (auto& r : k.outputs) fix(r);
      if (auto* c = std::get_if<isa::Conv2dParams>(&k.params)) {
        fix(c->weight);
        if (c->bias) fix(*c->bias);
      }
      if (auto* m = std::get_if<isa::MatMulParams>(&k.params)) {
        fix(m->b);
        if (m->bias) fix(*m->bias);
      }
    }
    for (auto& r : prog_.inputs) fix(r);
    for (auto& r : prog_.outputs) fix(r);
    prog_.name = fmt::format("{}#{}", g_.name, out_.npu_calls.size());
    prog_.constants = std::move(constants_);
    prog_.dram_bytes = base + planned;
    out_.report.notes.push_back(fmt::format(
        "program {}: constants {} B, activations {} B with buffer reuse by liveness ({} B without)",
        out_.npu_calls.size(), base, planned, act_end_));
    call_.program = std::make_shared<isa::Program>(std::move(prog_));
    Step s;
    s.kind = Step::Kind::Npu;
    s.npu = static_cast<int>(out_.npu_calls.size());
    out_.npu_calls.push_back(std::move(call_));
    out_.steps.push_back(std::move(s));
    for (auto [lowered, dense] : unlowers) {
      CpuOp op;
      op.kind = CpuOpKind::Unlower;
      op.inputs = {lowered};
      op.outputs = {dense};
      add_cpu_step(std::move(op));
    }
    prog_ = isa::Program{};
    call_ = NpuCall{};
    constants_.clear();
    act_end_ = 0;
    dev_.clear();
    seg_values_.clear();
    seg_nodes_.clear();
  }

  // ---- emission ---------------------------------------------------------------------------------
  void emit(int ni) {
    const Node& n = g_.nodes[static_cast<std::size_t>(ni)];
    const Placement placement = place(g_, n, nullptr);
    if (placement.where == Where::Npu && is_nhwc_lower(n)) return emit_nhwc_lower(n);
    if (placement.where == Where::Npu) {
      segment_open_ = true;
      seg_nodes_.insert(ni);
      emit_npu(n, placement.npu);
      return;
    }
    if (placement.where == Where::Host) return emit_qdq(n);
    return emit_external(n);
  }

  // A Transpose [0, 3, 1, 2] of an "NHWC" value held on the host (not produced by the open NPU
  // segment) whose result only NPU nodes read: done by the host Lower step reading NHWC.
  bool is_nhwc_lower(const Node& n) const {
    if (n.op_type != "Transpose" || !n.domain.empty() || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
    const int in = n.inputs[0], out = n.outputs[0];
    const Value& xv = value(in);
    if (xv.format != "NHWC" || xv.shape.size() != 4 || n.attr_ints("perm", {}) != std::vector<std::int64_t>{0, 3, 1, 2}) {
      return false;
    }
    if (!host_.count(in) || seg_values_.count(in) || host_lowered(in) || is_graph_output(out)) return false;
    auto it = consumers_.find(out);
    if (it == consumers_.end() || it->second.empty()) return false;
    for (int c : it->second) {
      if (place(g_, g_.nodes[static_cast<std::size_t>(c)], nullptr).where != Where::Npu) return false;
    }
    return true;
  }

  void emit_nhwc_lower(const Node& n) {
    const Value& yv = value(n.outputs[0]);
    const int lowered = add_slot(yv.name + ".lowered", yv.dtype, yv.shape, isa::Layout::LoweredNCHW);
    CpuOp op;
    op.kind = CpuOpKind::Lower;
    op.node_name = n.name;
    op.operator_index = n.index;
    op.inputs = {host_.at(n.inputs[0])};
    op.outputs = {lowered};
    op.channels_last = true;
    add_cpu_step(std::move(op));
    host_[n.outputs[0]] = lowered;
    note_entry(n, "cpu", "Lower", "NHWC -> NCHW transpose done by the host Lower step (NHWC -> lowered NCHW)");
    out_.report.notes.push_back(fmt::format("Lower of '{}' on the host: NHWC input '{}' is transposed while "
                                            "lowering", yv.name, value(n.inputs[0]).name));
  }

  CpuOp qdq_op(const Node& n, CpuOpKind kind) {
    CpuOp op;
    op.kind = kind;
    op.node_name = n.name;
    op.operator_index = n.index;
    op.scales = float_values(constant_input(g_, n, 1, "scale"));
    if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
      op.zero_points = int_values(constant_input(g_, n, 2, "zero point"));
    } else {
      op.zero_points.assign(op.scales.size(), 0);
    }
    const Shape& xs = value(n.inputs[0]).shape;
    op.axis = n.attr_int("axis", 1);
    if (op.axis < 0) op.axis += static_cast<std::int64_t>(xs.size());
    const std::string rounding = n.attr_string("rounding", "half_to_even");
    if (rounding != "half_to_even" && rounding != "half_away_from_zero") {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' ({}): unknown rounding '{}'", n.name, n.op_type, rounding));
    }
    op.round_half_away_from_zero = kind == CpuOpKind::Quantize && rounding == "half_away_from_zero";
    if (op.scales.size() != op.zero_points.size() ||
        (op.scales.size() > 1 && (op.axis < 0 || op.axis >= static_cast<std::int64_t>(xs.size()) ||
                                  xs[static_cast<std::size_t>(op.axis)] != static_cast<std::int64_t>(op.scales.size())))) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' ({}): scale/zero point sizes do not fit axis {} of {}",
                              n.name, n.op_type, op.axis, shape_to_string(xs)));
    }
    return op;
  }

  void emit_qdq(const Node& n) {
    const bool quantize = n.op_type == "QuantizeLinear";
    CpuOp op = qdq_op(n, quantize ? CpuOpKind::Quantize : CpuOpKind::Dequantize);
    op.inputs = {host_value(n.inputs[0])};
    const Value& y = value(n.outputs[0]);
    op.outputs = {add_slot(y.name, y.dtype, y.shape, isa::Layout::Linear)};
    host_[n.outputs[0]] = op.outputs[0];
    add_cpu_step(std::move(op));
    note_entry(n, "cpu", quantize ? "Quantize" : "Dequantize",
               quantize ? "QuantizeLinear runs on the host" : "DequantizeLinear runs on the host");
  }

  void emit_external(const Node& n) {
    CpuOp op;
    op.kind = CpuOpKind::External;
    op.node_name = n.name;
    op.operator_index = n.index;
    for (int i : n.inputs) op.inputs.push_back(i >= 0 ? host_value(i) : -1);
    for (int o : n.outputs) {
      if (o < 0) {
        op.outputs.push_back(-1);
        continue;
      }
      const Value& v = value(o);
      int s = add_slot(v.name, v.dtype, v.shape, isa::Layout::Linear);
      host_[o] = s;
      op.outputs.push_back(s);
    }
    op.node = std::make_shared<const Node>(n);
    add_cpu_step(std::move(op));
    note_entry(n, "fallback", n.op_type, "no NPU kernel: runs on the host as an external operator");
  }

  void emit_npu(const Node& n, NpuOp op) {
    switch (op) {
      case NpuOp::Conv: return emit_conv(n);
      case NpuOp::MatMul: return emit_matmul(n);
      case NpuOp::Add: return emit_binary(n, isa::KernelKind::Add);
      case NpuOp::GlobalAveragePool: return emit_gap(n);
      case NpuOp::QLinearConcat: return emit_qconcat(n);
      case NpuOp::Requantize: return emit_requantize(n);
      case NpuOp::MaxPool: return emit_maxpool(n);
      case NpuOp::Concat: return emit_concat(n);
      case NpuOp::Split: return emit_split(n);
      case NpuOp::Transpose: return emit_transpose(n);
      case NpuOp::Reshape: return emit_reshape(n);
      case NpuOp::Resize: return emit_resize(n);
      case NpuOp::Slice: return emit_slice(n);
      case NpuOp::Pad: return emit_pad(n);
      case NpuOp::Mul: return emit_binary(n, isa::KernelKind::Mul);
      case NpuOp::Sub: return emit_binary(n, isa::KernelKind::Sub);
    }
  }

  // The operands QLinearConv and QLinearMatMul share (ONNX operator spec: inputs 1-2 x/a
  // quantization, 4-5 weight scale and zero point with 1 or `channels` values, 6-7 y
  // quantization, optional 8 an int32 bias of `channels` values, added to the bias area).
  struct WeightedOperands {
    isa::QuantParam x, y;
    std::vector<float> w_scale;
    std::vector<std::int32_t> w_zero_point;
    std::optional<isa::TensorRef> bias;
  };
  WeightedOperands weighted_operands(const Node& n, std::size_t channels) {
    WeightedOperands o;
    const auto xq = scalar_quant(g_, n, 1, 2);
    const auto yq = scalar_quant(g_, n, 6, 7);
    o.x = {xq.scale, xq.zero_point};
    o.y = {yq.scale, yq.zero_point};
    o.w_scale = float_values(constant_input(g_, n, 4, "weight scale"));
    o.w_zero_point = int_values(constant_input(g_, n, 5, "weight zero point"));
    if ((o.w_scale.size() != 1 && o.w_scale.size() != channels) ||
        (o.w_zero_point.size() != 1 && o.w_zero_point.size() != channels)) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' ({}): the weight scale and zero point must have 1 or {} values", n.name,
                              n.op_type, channels));
    }
    if (n.inputs.size() > 8 && n.inputs[8] >= 0) {
      const Tensor& b = constant_input(g_, n, 8, "bias");
      if (b.dtype() != DType::Int32 || b.elements() != static_cast<std::int64_t>(channels)) {
        throw Error(ErrorCode::IncompatibleModel,
                    fmt::format("node '{}' ({}): bias must be int32 [{}]", n.name, n.op_type, channels));
      }
      o.bias = add_constant(b, isa::Layout::Linear);
    }
    return o;
  }

  void emit_conv(const Node& n) {
    const Value& xv = value(n.inputs[0]);
    const Value& yv = value(n.outputs[0]);
    const Tensor& w = constant_input(g_, n, 3, "w");
    if (w.dtype() != DType::Int8 && w.dtype() != DType::UInt8) {
      throw Error(ErrorCode::IncompatibleModel, fmt::format("node '{}' (QLinearConv): weight must be int8 or uint8", n.name));
    }
    const auto m = static_cast<std::size_t>(w.shape()[0]);
    isa::Conv2dParams p;
    p.weight = add_constant(w, isa::Layout::Linear);
    auto o = weighted_operands(n, m);
    p.x = o.x;
    p.y = o.y;
    p.w_scale = std::move(o.w_scale);
    p.w_zero_point = std::move(o.w_zero_point);
    p.bias = o.bias;
    auto win = detail::resolve_window(n, {w.shape()[2], w.shape()[3]}, {xv.shape[2], xv.shape[3]}, false);
    p.pads = win.pads;
    p.strides = win.strides;
    p.dilations = win.dilations;
    p.group = n.attr_int("group", 1);
    p.fixed_point = fixed_point_requant(n, m, yv.dtype);
    const bool depthwise = p.group > 1 && p.group == xv.shape[1];
    auto x = device_value(n.inputs[0], isa::Layout::LoweredNCHW, n);
    auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::LoweredNCHW);
    const auto kind = depthwise ? isa::KernelKind::DepthwiseConv2d : isa::KernelKind::Conv2d;
    note_entry(n, "npu", std::string(isa::kernel_name(kind)),
               fmt::format("{}quantized convolution{}", depthwise ? "depthwise " : "",
                           p.fixed_point ? " (fixed-point requantization)" : ""));
    push_kernel({.kind = kind, .node_name = n.name, .operator_index = n.index, .inputs = {x}, .outputs = {y},
                 .params = std::move(p)});
    produce(n.outputs[0], y);
  }

  void emit_maxpool(const Node& n) {
    const Value& xv = value(n.inputs[0]);
    const Value& yv = value(n.outputs[0]);
    auto ks = n.attr_ints("kernel_shape", {});
    auto win = detail::resolve_window(n, {ks[0], ks[1]}, {xv.shape[2], xv.shape[3]}, n.attr_int("ceil_mode", 0) != 0);
    isa::MaxPoolParams p{.kernel = win.kernel, .pads = win.pads, .strides = win.strides, .dilations = win.dilations};
    auto x = device_value(n.inputs[0], isa::Layout::LoweredNCHW, n);
    auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::LoweredNCHW);
    push_kernel({.kind = isa::KernelKind::MaxPool, .node_name = n.name, .operator_index = n.index,
                 .inputs = {x}, .outputs = {y}, .params = p});
    note_entry(n, "npu", "LowLevelMaxPool", fmt::format("MaxPool on {} data", dtype_name(xv.dtype)));
    produce(n.outputs[0], y);
  }

  void emit_matmul(const Node& n) {
    const Value& yv = value(n.outputs[0]);
    const Tensor& b = constant_input(g_, n, 3, "b");
    const auto cols = static_cast<std::size_t>(b.shape()[1]);
    isa::MatMulParams p;
    p.b = add_constant(b, isa::Layout::Linear);
    auto o = weighted_operands(n, cols);
    p.a = o.x;
    p.y = o.y;
    p.b_scale = std::move(o.w_scale);
    p.b_zero_point = std::move(o.w_zero_point);
    p.bias = o.bias;
    p.fixed_point = fixed_point_requant(n, cols, yv.dtype);
    auto a = device_value(n.inputs[0], isa::Layout::Linear, n);
    auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::Linear);
    push_kernel({.kind = isa::KernelKind::MatMul, .node_name = n.name, .operator_index = n.index,
                 .inputs = {a}, .outputs = {y}, .params = std::move(p)});
    note_entry(n, "npu", "LowLevelMatMul",
               fmt::format("quantized matrix multiplication with constant B{}{}", p.bias ? " and bias" : "",
                           p.fixed_point ? " (fixed-point requantization)" : ""));
    produce(n.outputs[0], y);
  }

  bool lowered_on_device(int id) const {
    return dev_.count({id, isa::Layout::LoweredNCHW}) && !dev_.count({id, isa::Layout::Linear});
  }

  // LowLevelAdd / LowLevelMul / LowLevelSub of a QLinearAdd / QLinearMul / furiosa::QLinearSub node
  // (operands A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp): lowered operands when all three
  // shapes are equal and one operand is already lowered, else Linear operands of y's rank
  // broadcasting to it.
  void emit_binary(const Node& n, isa::KernelKind kind) {
    const Value& av = value(n.inputs[0]);
    const Value& bv = value(n.inputs[3]);
    const Value& yv = value(n.outputs[0]);
    const auto aq = scalar_quant(g_, n, 1, 2);
    const auto bq = scalar_quant(g_, n, 4, 5);
    const auto yq = scalar_quant(g_, n, 6, 7);
    const isa::QuantParam a_q{aq.scale, aq.zero_point}, b_q{bq.scale, bq.zero_point}, y_q{yq.scale, yq.zero_point};
    const bool lowered = yv.shape.size() == 4 && av.shape == yv.shape && bv.shape == yv.shape &&
                         (lowered_on_device(n.inputs[0]) || lowered_on_device(n.inputs[3]));
    const auto layout = lowered ? isa::Layout::LoweredNCHW : isa::Layout::Linear;
    auto a = device_value(n.inputs[0], layout, n);
    auto b = device_value(n.inputs[3], layout, n);
    for (auto* r : {&a, &b}) {
      while (r->shape.size() < yv.shape.size()) r->shape.insert(r->shape.begin(), 1);
    }
    auto y = alloc_activation(yv.dtype, yv.shape, layout);
    decltype(isa::Kernel::params) params = isa::SubParams{a_q, b_q, y_q};
    std::string what = "subtraction of two tensors";
    // A QDQ group ONNX Runtime runs unfused keeps DequantizeLinear -> op -> QuantizeLinear's
    // float32 arithmetic (kDequantizedArithmetic); com.microsoft QLinearAdd otherwise computes
    // ORT's kernel (isa::AddFormula::MlasRatios).
    const bool dequantized = n.attr_int(std::string(kDequantizedArithmetic), 0) != 0;
    if (kind == isa::KernelKind::Mul) {
      params = isa::MulParams{.a = a_q, .b = b_q, .y = y_q, .dequantized = dequantized};
      what = dequantized ? "multiplication of two tensors, as DequantizeLinear, Mul, QuantizeLinear"
                         : "multiplication of two tensors";
    } else if (kind == isa::KernelKind::Add) {
      auto fixed = fixed_point_add(n, yv.dtype);
      what = fixed         ? "addition, fixed-point requantization"
             : dequantized ? "addition, as DequantizeLinear, Add, QuantizeLinear"
                           : "addition";
      params = isa::AddParams{.a = a_q,
                              .b = b_q,
                              .y = y_q,
                              .fixed_point = std::move(fixed),
                              .formula = dequantized ? isa::AddFormula::Dequantized
                                         : n.attr_int(std::string(kQdqS8ToU8), 0) != 0
                                             ? isa::AddFormula::MlasRatiosUint8
                                             : isa::AddFormula::MlasRatios};
    }
    push_kernel({.kind = kind, .node_name = n.name, .operator_index = n.index, .inputs = {a, b}, .outputs = {y},
                 .params = std::move(params)});
    note_entry(n, "npu", std::string(isa::kernel_name(kind)),
               fmt::format("quantized {} ({} layout)", what, isa::layout_name(layout)));
    produce(n.outputs[0], y);
  }

  void emit_gap(const Node& n) {
    const Value& yv = value(n.outputs[0]);
    if (n.op_type == "QuantizedAveragePool") {  // furiosa domain: TFLite's integer mean (capability.cpp)
      const auto range = host::quant_range(yv.dtype);
      const std::array<std::int32_t, 2> clamp{static_cast<std::int32_t>(n.attr_int("output_min", std::get<0>(range))),
                                              static_cast<std::int32_t>(n.attr_int("output_max", std::get<1>(range)))};
      auto x = device_any(n.inputs[0], n);
      auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::Linear);
      push_kernel({.kind = isa::KernelKind::GlobalAveragePool, .node_name = n.name, .operator_index = n.index,
                   .inputs = {x}, .outputs = {y}, .params = isa::GlobalAveragePoolParams{.x = {}, .y = {}, .integer_mean_clamp = clamp}});
      note_entry(n, "npu", "LowLevelGlobalAveragePool",
                 "TFLite average pooling over the whole input (integer mean, rounded half away from zero)");
      produce(n.outputs[0], y);
      return;
    }
    auto xq = scalar_quant(g_, n, 1, 2);
    auto yq = scalar_quant(g_, n, 3, 4);
    auto x = device_any(n.inputs[0], n);
    auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::Linear);
    push_kernel({.kind = isa::KernelKind::GlobalAveragePool, .node_name = n.name, .operator_index = n.index,
                 .inputs = {x}, .outputs = {y},
                 .params = isa::GlobalAveragePoolParams{.x = {xq.scale, xq.zero_point}, .y = {yq.scale, yq.zero_point}}});
    note_entry(n, "npu", "LowLevelGlobalAveragePool", "quantized global average pooling");
    produce(n.outputs[0], y);
  }

  // Output layout of a data-movement op: lowered when 4-D and its first input is lowered.
  isa::Layout movement_layout(int in, const Shape& out_shape) const {
    return out_shape.size() == 4 && lowered_on_device(in) ? isa::Layout::LoweredNCHW : isa::Layout::Linear;
  }

  void emit_requantize(const Node& n) {
    const Value& yv = value(n.outputs[0]);
    auto x = device_any(n.inputs[0], n);
    auto y = alloc_activation(yv.dtype, yv.shape, x.layout);
    isa::RequantizeParams p;
    p.x = {std::get<float>(n.attributes.at("x_scale")), static_cast<std::int32_t>(n.attr_int("x_zero_point", 0))};
    p.y = {std::get<float>(n.attributes.at("y_scale")), static_cast<std::int32_t>(n.attr_int("y_zero_point", 0))};
    const auto table = n.attr_ints("table", {});
    if (!table.empty() && table.size() != 256) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' (furiosa::Requantize): table has {} entries, expected 256", n.name, table.size()));
    }
    for (auto v : table) p.table.push_back(static_cast<std::uint8_t>(v));
    push_kernel({.kind = isa::KernelKind::Requantize, .node_name = n.name, .operator_index = n.index,
                 .inputs = {x}, .outputs = {y}, .params = p});
    note_entry(n, "npu", "LowLevelRequantize",
               table.empty() ? "aligns quantization parameters inside a QDQ region"
                             : "8-bit element map computed at compile time (requantization or activation clamp)");
    produce(n.outputs[0], y);
  }

  void emit_concat(const Node& n) {
    const Value& yv = value(n.outputs[0]);
    std::int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += static_cast<std::int64_t>(yv.shape.size());
    const auto layout = movement_layout(n.inputs[0], yv.shape);
    std::vector<isa::TensorRef> ins;
    for (int i : n.inputs) ins.push_back(layout == isa::Layout::LoweredNCHW ? device_value(i, layout, n) : device_value(i, isa::Layout::Linear, n));
    auto y = alloc_activation(yv.dtype, yv.shape, layout);
    push_kernel({.kind = isa::KernelKind::Concat, .node_name = n.name, .operator_index = n.index,
                 .inputs = std::move(ins), .outputs = {y}, .params = isa::ConcatParams{axis}});
    note_entry(n, "npu", "LowLevelConcat", fmt::format("concatenation of {} tensors", dtype_name(yv.dtype)));
    produce(n.outputs[0], y);
  }

  void emit_qconcat(const Node& n) {
    // Inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per tensor.
    const Value& yv = value(n.outputs[0]);
    auto yq = scalar_quant(g_, n, 0, 1);
    std::int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += static_cast<std::int64_t>(yv.shape.size());
    std::vector<isa::TensorRef> ins;
    for (std::size_t i = 2; i + 2 < n.inputs.size(); i += 3) {
      auto xq = scalar_quant(g_, n, i + 1, i + 2);
      auto x = device_value(n.inputs[i], isa::Layout::Linear, n);
      if (xq.scale != yq.scale || xq.zero_point != yq.zero_point) {
        auto r = alloc_activation(yv.dtype, x.shape, isa::Layout::Linear);
        push_kernel({.kind = isa::KernelKind::Requantize, .node_name = n.name, .operator_index = n.index,
                     .inputs = {x}, .outputs = {r},
                     .params = isa::RequantizeParams{.x = {xq.scale, xq.zero_point}, .y = {yq.scale, yq.zero_point}}});
        x = r;
      }
      ins.push_back(x);
    }
    auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::Linear);
    push_kernel({.kind = isa::KernelKind::Concat, .node_name = n.name, .operator_index = n.index,
                 .inputs = std::move(ins), .outputs = {y}, .params = isa::ConcatParams{axis}});
    note_entry(n, "npu", "LowLevelRequantize+LowLevelConcat", "quantized concatenation");
    produce(n.outputs[0], y);
  }

  void emit_split(const Node& n) {
    const Value& xv = value(n.inputs[0]);
    std::int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += static_cast<std::int64_t>(xv.shape.size());
    auto x = device_any(n.inputs[0], n);
    const auto layout = xv.shape.size() == 4 && x.layout == isa::Layout::LoweredNCHW ? x.layout : isa::Layout::Linear;
    std::vector<isa::TensorRef> outs;
    for (int o : n.outputs) outs.push_back(alloc_activation(value(o).dtype, value(o).shape, layout));
    push_kernel({.kind = isa::KernelKind::Split, .node_name = n.name, .operator_index = n.index,
                 .inputs = {x}, .outputs = outs, .params = isa::SplitParams{axis}});
    for (std::size_t i = 0; i < n.outputs.size(); ++i) produce(n.outputs[i], outs[i]);
    note_entry(n, "npu", "LowLevelSplit", fmt::format("split of a {} tensor", dtype_name(xv.dtype)));
  }

  void emit_transpose(const Node& n) {
    const Value& xv = value(n.inputs[0]);
    const Value& yv = value(n.outputs[0]);
    std::vector<std::int64_t> perm = n.attr_ints("perm", {});
    if (perm.empty()) {
      for (std::size_t i = xv.shape.size(); i-- > 0;) perm.push_back(static_cast<std::int64_t>(i));
    }
    auto x = device_any(n.inputs[0], n);
    auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::Linear);
    push_kernel({.kind = isa::KernelKind::Transpose, .node_name = n.name, .operator_index = n.index,
                 .inputs = {x}, .outputs = {y}, .params = isa::TransposeParams{perm}});
    note_entry(n, "npu", "LowLevelTranspose", fmt::format("transpose of a {} tensor", dtype_name(xv.dtype)));
    produce(n.outputs[0], y);
  }

  void emit_resize(const Node& n) {
    const Value& yv = value(n.outputs[0]);
    const auto factors = nearest_repeat(g_, n);
    if (!factors) {
      if (const auto flags = tflite_bilinear_flags(g_, n)) {
        auto x = device_any(n.inputs[0], n);
        auto y = alloc_activation(yv.dtype, yv.shape, x.layout);
        push_kernel({.kind = isa::KernelKind::Resize, .node_name = n.name, .operator_index = n.index,
                     .inputs = {x}, .outputs = {y},
                     .params = isa::ResizeParams{.mode = isa::ResizeParams::Mode::TfliteBilinear,
                                                 .align_corners = (*flags)[0],
                                                 .half_pixel_centers = (*flags)[1]}});
        note_entry(n, "npu", "LowLevelResize",
                   fmt::format("TFLite bilinear resize {}x{} -> {}x{} of a {} tensor (TFLite's arithmetic)", x.shape[2],
                               x.shape[3], yv.shape[2], yv.shape[3], dtype_name(yv.dtype)));
        produce(n.outputs[0], y);
        return;
      }
      if (auto linear = onnx_linear_resize(g_, n)) {
        auto x = device_any(n.inputs[0], n);
        auto y = alloc_activation(yv.dtype, yv.shape, x.layout);
        note_entry(n, "npu", "LowLevelResize",
                   fmt::format("linear resize {}x{} -> {}x{} of a {} tensor ({}, ONNX Runtime's 8-bit arithmetic)",
                               x.shape[2], x.shape[3], yv.shape[2], yv.shape[3], dtype_name(yv.dtype),
                               linear->coordinate_transformation_mode));
        push_kernel({.kind = isa::KernelKind::Resize, .node_name = n.name, .operator_index = n.index,
                     .inputs = {x}, .outputs = {y}, .params = std::move(*linear)});
        produce(n.outputs[0], y);
        return;
      }
      throw Error(ErrorCode::Internal, fmt::format("node '{}' (Resize): placed on the NPU without a whole-factor "
                                                   "nearest index map", n.name));
    }
    auto x = device_any(n.inputs[0], n);
    auto y = alloc_activation(yv.dtype, yv.shape, x.layout);
    push_kernel({.kind = isa::KernelKind::Resize, .node_name = n.name, .operator_index = n.index,
                 .inputs = {x}, .outputs = {y},
                 .params = isa::ResizeParams{.scale_h = (*factors)[0], .scale_w = (*factors)[1]}});
    note_entry(n, "npu", "LowLevelResize",
               fmt::format("nearest upsampling x{} x{} of a {} tensor", (*factors)[0], (*factors)[1],
                           dtype_name(yv.dtype)));
    produce(n.outputs[0], y);
  }

  void emit_slice(const Node& n) {
    const Value& yv = value(n.outputs[0]);
    auto params = slice_params(g_, n);
    if (!params) throw Error(ErrorCode::Internal, fmt::format("node '{}' (Slice): placed on the NPU without constant operands", n.name));
    auto x = device_any(n.inputs[0], n);
    auto y = alloc_activation(yv.dtype, yv.shape, movement_layout(n.inputs[0], yv.shape));
    push_kernel({.kind = isa::KernelKind::Slice, .node_name = n.name, .operator_index = n.index,
                 .inputs = {x}, .outputs = {y}, .params = std::move(*params)});
    note_entry(n, "npu", "LowLevelSlice", fmt::format("slice of a {} tensor", dtype_name(yv.dtype)));
    produce(n.outputs[0], y);
  }

  void emit_pad(const Node& n) {
    const Value& yv = value(n.outputs[0]);
    auto params = pad_params(g_, n);
    if (!params) throw Error(ErrorCode::Internal, fmt::format("node '{}' (Pad): placed on the NPU without constant operands", n.name));
    auto x = device_any(n.inputs[0], n);
    auto y = alloc_activation(yv.dtype, yv.shape, movement_layout(n.inputs[0], yv.shape));
    note_entry(n, "npu", "LowLevelPad",
               fmt::format("{} padding of a {} tensor", n.attr_string("mode", "constant"), dtype_name(yv.dtype)));
    push_kernel({.kind = isa::KernelKind::Pad, .node_name = n.name, .operator_index = n.index,
                 .inputs = {x}, .outputs = {y}, .params = std::move(*params)});
    produce(n.outputs[0], y);
  }

  void emit_reshape(const Node& n) {
    const Value& yv = value(n.outputs[0]);
    auto x = device_any(n.inputs[0], n);
    // 4-D results that a lowered consumer will read are produced lowered directly.
    bool lowered_consumer = false;
    for (int c : consumers_[n.outputs[0]]) {
      const Node& cn = g_.nodes[static_cast<std::size_t>(c)];
      lowered_consumer = lowered_consumer || cn.op_type == "QLinearConv" || cn.op_type == "MaxPool";
    }
    const auto layout = yv.shape.size() == 4 && lowered_consumer ? isa::Layout::LoweredNCHW : isa::Layout::Linear;
    auto y = alloc_activation(yv.dtype, yv.shape, layout);
    push_kernel({.kind = isa::KernelKind::Reshape, .node_name = n.name, .operator_index = n.index,
                 .inputs = {x}, .outputs = {y}, .params = isa::ReshapeParams{}});
    note_entry(n, "npu", "LowLevelReshape",
               x.layout == isa::Layout::LoweredNCHW ? "reshape leaving the lowered layout" : "reshape");
    produce(n.outputs[0], y);
  }

  const Graph& g_;
  const CompilerOptions& opt_;
  CompiledModel& out_;
  std::map<int, std::vector<int>> consumers_;  // value -> consumer nodes (after rewrites)
  std::map<int, int> host_;                    // value -> host slot
  // The open NPU segment.
  bool segment_open_ = false;
  isa::Program prog_;
  NpuCall call_;
  std::vector<std::byte> constants_;
  std::uint64_t act_end_ = 0;
  std::map<std::pair<int, isa::Layout>, isa::TensorRef> dev_;  // (value, layout) -> device tensor
  std::set<int> seg_values_;  // values produced in the open segment
  std::set<int> seg_nodes_;   // nodes emitted in the open segment
};

}  // namespace

void lower_graph(const Graph& g, const CompilerOptions& options, CompiledModel& out) {
  Lowering(g, options, out).run();
}

}  // namespace furiosa::compiler::detail
