// Placed graph -> host steps and NPU programs (lowering.h): the walk, host slots, NPU segments
// and the dispatch of each node to its emitter (lowering_impl.h lists the files).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "furiosa/core/error.h"
#include "furiosa/host/layout.h"
#include "graph_utils.h"
#include "lowering_impl.h"
#include "memory_plan.h"
#include "passes.h"

namespace furiosa::compiler::detail {
namespace {

constexpr std::uint64_t kAlign = 64;
constexpr std::uint64_t kActivationFlag = 1ull << 62;  // marks activation addresses until placement

std::uint64_t align_up(std::uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Copies a dense tensor into `layout` (LoweredNCHW pads each row with zeros).
std::vector<std::byte> lay_out(const Tensor& t, isa::Layout layout) {
  if (layout == isa::Layout::Linear) return {t.bytes().begin(), t.bytes().end()};
  const std::size_t es = dtype_size(t.dtype());
  std::vector<std::byte> out(host::lowered_size(t.shape(), es));
  host::lower(t.shape(), es, t.bytes(), out);
  return out;
}

}  // namespace

void Lowering::run() {
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
    if (!value(id).format.empty())
      out_.slots[static_cast<std::size_t>(s)].format = value(id).format;
    out_.output_slots.push_back(s);
  }
}

// The emission order: graph order, except that a node placed off the NPU waits until a later
// NPU node reads one of its outputs (directly or through other waiting nodes), or until the
// end. Host work that only feeds model outputs (an output's DequantizeLinear, a host
// post-process) then no longer closes the open NPU segment, so NPU nodes after it in graph
// order join the same program instead of a second one fed from the first through the host
// (SSD's box and score concatenations, each followed by its output's Dequantize). Waiting
// nodes keep their relative order, and a node never runs before its producers.
std::vector<int> Lowering::schedule() const {
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
    if (std::any_of(n.inputs.begin(), n.inputs.end(),
                    [&](int v) { return waiting_values.count(v) > 0; }))
      flush();
    order.push_back(static_cast<int>(i));
  }
  flush();
  return order;
}

bool Lowering::is_graph_output(int id) const {
  return std::find(g_.outputs.begin(), g_.outputs.end(), id) != g_.outputs.end();
}

void Lowering::note_entry(const Node& n, const char* placement, std::string target,
                          std::string reason) {
  detail::note_entry(out_.report, n, placement, std::move(target), std::move(reason));
}

int Lowering::add_slot(std::string name, DType dtype, Shape shape, isa::Layout layout) {
  out_.slots.push_back({std::move(name), dtype, std::move(shape), layout, nullptr});
  return static_cast<int>(out_.slots.size() - 1);
}

void Lowering::add_cpu_step(CpuOp op) {
  Step s;
  s.kind = Step::Kind::Cpu;
  s.cpu = std::move(op);
  out_.steps.push_back(std::move(s));
}

// The host slot of value `id`: closes the open NPU segment when it produces the value, and
// makes constant slots for initializers.
int Lowering::host_value(int id) {
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
  throw Error(ErrorCode::Internal,
              fmt::format("value '{}' is neither on the host nor on the NPU", v.name));
}

isa::TensorRef Lowering::alloc_activation(DType dtype, const Shape& shape, isa::Layout layout) {
  isa::TensorRef r{
      .address = kActivationFlag | act_end_, .dtype = dtype, .shape = shape, .layout = layout};
  act_end_ = align_up(act_end_ + r.size_bytes());
  return r;
}

isa::TensorRef Lowering::add_constant(const Tensor& t, isa::Layout layout) {
  auto bytes = lay_out(t, layout);
  isa::TensorRef r{
      .address = constants_.size(), .dtype = t.dtype(), .shape = t.shape(), .layout = layout};
  constants_.insert(constants_.end(), bytes.begin(), bytes.end());
  constants_.resize(align_up(constants_.size()), std::byte{0});
  return r;
}

void Lowering::push_kernel(isa::Kernel k) { prog_.kernels.push_back(std::move(k)); }

// Value `id` on the device in any layout (the one it has; program inputs come in dense).
isa::TensorRef Lowering::device_any(int id, const Node& consumer) {
  if (auto it = dev_.find({id, isa::Layout::Linear}); it != dev_.end()) return it->second;
  if (auto it = dev_.find({id, isa::Layout::LoweredNCHW}); it != dev_.end()) return it->second;
  if (host_lowered(id)) return device_value(id, isa::Layout::LoweredNCHW, consumer);
  return device_value(id, isa::Layout::Linear, consumer);
}

// True when value `id` is held on the host in the lowered layout (an NHWC Lower's result).
bool Lowering::host_lowered(int id) const {
  auto it = host_.find(id);
  return it != host_.end() &&
         out_.slots[static_cast<std::size_t>(it->second)].layout == isa::Layout::LoweredNCHW;
}

// Value `id` on the device in `layout`: creates program inputs (with host Lower), constants,
// and layout-changing LowLevelReshape kernels as needed.
isa::TensorRef Lowering::device_value(int id, isa::Layout layout, const Node& consumer) {
  const auto key = std::make_pair(id, layout);
  if (auto it = dev_.find(key); it != dev_.end()) return it->second;
  const Value& v = value(id);
  if (layout == isa::Layout::LoweredNCHW && v.shape.size() != 4) {
    throw Error(
        ErrorCode::IncompatibleModel,
        fmt::format("node '{}' ({}): input '{}' must be 4-D NCHW, has shape {}", consumer.name,
                    consumer.qualified_op(), v.name, shape_to_string(v.shape)));
  }
  if (v.constant) {
    auto r = add_constant(*v.constant, layout);
    dev_[key] = r;
    return r;
  }
  const auto other_layout =
      layout == isa::Layout::Linear ? isa::Layout::LoweredNCHW : isa::Layout::Linear;
  if (auto other = dev_.find({id, other_layout}); other != dev_.end()) {
    auto r = alloc_activation(v.dtype, v.shape, layout);
    push_kernel({.kind = isa::KernelKind::Reshape,
                 .node_name = consumer.name,
                 .operator_index = consumer.index,
                 .inputs = {other->second},
                 .outputs = {r},
                 .params = isa::ReshapeParams{}});
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
          "the lowered layout",
          v.name, v.shape[3], isa::kLoweredWidthAlign));
    } else if (opt_.remove_lower && caller_lowered_input(id, slot)) {
      out_.report.notes.push_back(
          fmt::format("remove_lower: input '{}' is given in the lowered layout {} (no host Lower)",
                      v.name, shape_to_string(out_.slots[static_cast<std::size_t>(slot)].shape)));
    } else {
      if (opt_.remove_lower) {
        out_.report.notes.push_back(fmt::format(
            "remove_lower does not apply to '{}': it is not a model input read only by the NPU",
            v.name));
      }
      int lowered = add_slot(v.name + ".lowered", v.dtype, v.shape, isa::Layout::LoweredNCHW);
      CpuOp op;
      op.kind = CpuOpKind::Lower;
      op.inputs = {slot};
      op.outputs = {lowered};
      add_cpu_step(std::move(op));
      out_.report.notes.push_back(
          fmt::format("Lower of '{}' on the host (Pad/Lower): width {} is not a multiple of {}",
                      v.name, v.shape[3], isa::kLoweredWidthAlign));
      slot = lowered;
    }
  }
  prog_.inputs.push_back(r);
  call_.input_slots.push_back(slot);
  dev_[key] = r;
  return r;
}

// [N, C, H, W] with W rounded up to the lowered layout's row of isa::kLoweredWidthAlign.
Shape Lowering::padded_shape(Shape s) {
  s[3] = (s[3] + isa::kLoweredWidthAlign - 1) / isa::kLoweredWidthAlign * isa::kLoweredWidthAlign;
  return s;
}

// remove_lower: true when model input `id` (host slot `slot`) is read only by NPU nodes, so
// the caller can give it lowered; the slot then becomes dense [N, C, H, padded W] with format
// "lowered_nchw" (its bytes are exactly the lowered layout).
bool Lowering::caller_lowered_input(int id, int slot) {
  if (std::find(out_.input_slots.begin(), out_.input_slots.end(), slot) == out_.input_slots.end())
    return false;
  for (int c : consumers_[id]) {
    if (place(g_, g_.nodes[static_cast<std::size_t>(c)], nullptr).where != Where::Npu) return false;
  }
  HostSlot& s = out_.slots[static_cast<std::size_t>(slot)];
  s.shape = padded_shape(s.shape);
  s.format = std::string(isa::layout_name(isa::Layout::LoweredNCHW));
  return true;
}

void Lowering::produce(int id, const isa::TensorRef& r) {
  dev_[std::make_pair(id, r.layout)] = r;
  seg_values_.insert(id);
}

// Ends the open NPU segment: values used later (by other nodes or as graph outputs) become
// program outputs, with a host Unlower where needed; appends the NPU call step.
void Lowering::close_segment() {
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
    const bool lowered =
        r.layout == isa::Layout::LoweredNCHW && v.shape[3] % isa::kLoweredWidthAlign != 0;
    if (lowered && opt_.remove_unlower && is_graph_output(id) &&
        std::all_of(consumers_[id].begin(), consumers_[id].end(),
                    [&](int c) { return seg_nodes_.count(c) > 0; })) {
      // The caller takes the lowered bytes: a dense slot with the padded width.
      const int slot = add_slot(v.name, v.dtype, padded_shape(v.shape), isa::Layout::Linear);
      out_.slots[static_cast<std::size_t>(slot)].format =
          std::string(isa::layout_name(isa::Layout::LoweredNCHW));
      prog_.outputs.push_back(r);
      call_.output_slots.push_back(slot);
      host_[id] = slot;
      out_.report.notes.push_back(
          fmt::format("remove_unlower: output '{}' is returned in the lowered layout {}", v.name,
                      shape_to_string(padded_shape(v.shape))));
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
          "Unlower of '{}' on the host (Unlower/Slice): width {} is not a multiple of {}", v.name,
          v.shape[3], isa::kLoweredWidthAlign));
      slot = dense;
    } else if (r.layout == isa::Layout::LoweredNCHW) {
      out_.report.notes.push_back(
          fmt::format("Unlower of '{}' on the NPU: width {} is a multiple of {}", v.name,
                      v.shape[3], isa::kLoweredWidthAlign));
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

void Lowering::emit(int ni) {
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

void Lowering::emit_npu(const Node& n, NpuOp op) {
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

bool Lowering::lowered_on_device(int id) const {
  return dev_.count({id, isa::Layout::LoweredNCHW}) && !dev_.count({id, isa::Layout::Linear});
}

void lower_graph(const Graph& g, const CompilerOptions& options, CompiledModel& out) {
  Lowering(g, options, out).run();
}

}  // namespace furiosa::compiler::detail
