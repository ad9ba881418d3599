// Graph IR -> CPU pre-ops + NPU program + CPU post-ops, with the partition record.
//
// Placement rules (DESIGN.md "compiler-bridge/"):
// - QuantizeLinear reading a graph input            -> CPU pre-op Quantize
// - DequantizeLinear producing a graph output       -> CPU post-op Dequantize
// - QLinearConv, QLinearMatMul, com.microsoft::QLinearAdd, MaxPool on uint8/int8, Reshape,
//   Flatten                                          -> NPU LowLevel kernels
// - DequantizeLinear -> (MaxPool | Reshape | Flatten)* -> QuantizeLinear with identical
//   quantization parameters is folded into the quantized ops: max and reshape commute with the
//   monotonic affine dequantization, so the integer result is exact.
// - Conv and MaxPool work on the lowered layout (rows padded to 32); host Lower/Unlower are
//   inserted where a program input/output is lowered and its width is not a multiple of 32
//   (otherwise the bytes are identical and the NPU handles it).
// Anything else is reported as unsupported, every such node listed in one error.
#include "furiosa/compiler/compiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "furiosa/device/error.h"
#include "graph_utils.h"

namespace furiosa::compiler {

std::string_view cpu_op_name(CpuOpKind kind) noexcept {
  switch (kind) {
    case CpuOpKind::Quantize: return "Quantize";
    case CpuOpKind::Dequantize: return "Dequantize";
    case CpuOpKind::Lower: return "Lower";
    case CpuOpKind::Unlower: return "Unlower";
  }
  return "?";
}

std::uint64_t HostSlot::size_bytes() const noexcept {
  return isa::TensorRef{.address = 0, .dtype = dtype, .shape = shape, .layout = layout}.size_bytes();
}

std::string PartitionReport::to_string() const {
  std::string out = fmt::format("{:<4} {:<40} {:<28} {:<9} {:<24} {}\n", "idx", "node", "op",
                                "placement", "target", "reason");
  for (const auto& e : entries) {
    out += fmt::format("{:<4} {:<40} {:<28} {:<9} {:<24} {}\n", e.operator_index, e.node_name,
                       e.op, e.placement, e.target, e.reason);
  }
  for (const auto& n : notes) out += "note: " + n + "\n";
  return out;
}

std::vector<std::string> supported_operators() {
  return {"QuantizeLinear (graph input -> CPU Quantize)",
          "DequantizeLinear (-> graph output, CPU Dequantize)",
          "QLinearConv (NPU LowLevelConv2d / LowLevelDepthwiseConv2d)",
          "QLinearMatMul (constant B; NPU LowLevelMatMul)",
          "com.microsoft::QLinearAdd (NPU LowLevelAdd)",
          "MaxPool on uint8/int8 (NPU LowLevelMaxPool)",
          "Reshape, Flatten (NPU LowLevelReshape)",
          "DequantizeLinear -> MaxPool/Reshape/Flatten -> QuantizeLinear with equal parameters "
          "(folded)"};
}

namespace {

using detail::constant_input;
using detail::float_values;
using detail::int_values;
using detail::scalar_quant;

constexpr std::uint64_t kAlign = 64;
constexpr std::uint64_t kActivationFlag = 1ull << 62;  // marks activation addresses until placement

std::uint64_t align_up(std::uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

bool is_float_layout_op(const Node& n) {
  return n.domain.empty() && (n.op_type == "MaxPool" || n.op_type == "Reshape" || n.op_type == "Flatten");
}

// Folds DequantizeLinear -> (MaxPool|Reshape|Flatten)+ -> QuantizeLinear chains with identical
// parameters. Removed nodes are recorded in `report`.
void fold_dq_q_chains(Graph& g, PartitionReport& report) {
  std::set<int> removed;
  std::set<int> graph_outputs(g.outputs.begin(), g.outputs.end());
  for (std::size_t qi = 0; qi < g.nodes.size(); ++qi) {
    Node& q = g.nodes[qi];
    if (q.op_type != "QuantizeLinear" || !q.domain.empty() || removed.count(static_cast<int>(qi))) continue;
    std::vector<int> chain;
    int x = q.inputs[0];
    int cur = g.producer(x);
    while (cur >= 0 && is_float_layout_op(g.nodes[static_cast<std::size_t>(cur)]) &&
           g.consumers(x).size() == 1 && !graph_outputs.count(x)) {
      chain.insert(chain.begin(), cur);
      x = g.nodes[static_cast<std::size_t>(cur)].inputs[0];
      cur = g.producer(x);
    }
    if (chain.empty() || cur < 0) continue;
    Node& dq = g.nodes[static_cast<std::size_t>(cur)];
    if (dq.op_type != "DequantizeLinear" || !dq.domain.empty() || g.consumers(x).size() != 1 ||
        graph_outputs.count(x)) {
      continue;
    }
    detail::ScalarQuant a, b;
    try {
      a = scalar_quant(g, dq, 1, 2);
      b = scalar_quant(g, q, 1, 2);
    } catch (const Error&) {
      continue;  // per-axis or non-constant parameters: not foldable
    }
    if (a.scale != b.scale || a.zero_point != b.zero_point || a.dtype != b.dtype) continue;
    // Rewire: the chain reads the quantized tensor and writes Q's output.
    g.nodes[static_cast<std::size_t>(chain.front())].inputs[0] = dq.inputs[0];
    g.nodes[static_cast<std::size_t>(chain.back())].outputs[0] = q.outputs[0];
    removed.insert(cur);
    removed.insert(static_cast<int>(qi));
    std::string via;
    for (int c : chain) via += (via.empty() ? "" : ", ") + g.nodes[static_cast<std::size_t>(c)].op_type;
    const std::string why = fmt::format(
        "DequantizeLinear -> {} -> QuantizeLinear with equal scale {} and zero point {}: {} run "
        "on the quantized tensor", via, a.scale, a.zero_point, via);
    report.entries.push_back({dq.name, dq.qualified_op(), dq.index, "folded", "-", why});
    report.entries.push_back({q.name, q.qualified_op(), q.index, "folded", "-", why});
  }
  if (removed.empty()) return;
  std::vector<Node> kept;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (!removed.count(static_cast<int>(i))) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
}

// Copies a dense tensor into `layout` (LoweredNCHW pads each row with zeros).
std::vector<std::byte> lay_out(const Tensor& t, isa::Layout layout) {
  if (layout == isa::Layout::Linear) return {t.bytes().begin(), t.bytes().end()};
  const auto& s = t.shape();
  const std::size_t es = dtype_size(t.dtype());
  const std::int64_t rows = s[0] * s[1] * s[2], w = s[3], wp = isa::padded_width(w);
  std::vector<std::byte> out(static_cast<std::size_t>(rows * wp) * es, std::byte{0});
  for (std::int64_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + static_cast<std::size_t>(r * wp) * es,
                t.bytes().data() + static_cast<std::size_t>(r * w) * es, static_cast<std::size_t>(w) * es);
  }
  return out;
}

class Compiler {
 public:
  Compiler(Graph& g, const CompilerOptions& opt) : g_(g), opt_(opt) {}

  CompiledModel run() {
    fold_dq_q_chains(g_, out_.report);
    infer_shapes(g_, opt_);
    check_supported();
    for (int id : g_.inputs) out_.input_slots.push_back(host_slot_of_input(id));
    for (const Node& n : g_.nodes) emit(n);
    for (int id : g_.outputs) out_.output_slots.push_back(finish_output(id));
    place_memory();
    std::sort(out_.report.entries.begin(), out_.report.entries.end(),
              [](const auto& a, const auto& b) { return a.operator_index < b.operator_index; });
    return std::move(out_);
  }

 private:
  // ---- classification -------------------------------------------------------------------
  bool is_graph_input(int id) const {
    return std::find(g_.inputs.begin(), g_.inputs.end(), id) != g_.inputs.end();
  }
  bool is_graph_output(int id) const {
    return std::find(g_.outputs.begin(), g_.outputs.end(), id) != g_.outputs.end();
  }

  // Returns "" when the node can be placed, else the reason it cannot.
  std::string unsupported_reason(const Node& n) const {
    const std::string op = n.qualified_op();
    auto dtype_of = [&](std::size_t i) { return g_.values[static_cast<std::size_t>(n.inputs[i])].dtype; };
    if (op == "QuantizeLinear") {
      if (!is_graph_input(n.inputs[0])) {
        return "QuantizeLinear inside the graph (not on a graph input) needs a CPU fallback "
               "operator, which is not implemented yet";
      }
      if (dtype_of(0) != DType::Float32) return "input must be float32";
      return "";
    }
    if (op == "DequantizeLinear") {
      if (!is_graph_output(n.outputs[0])) {
        return "DequantizeLinear inside the graph (not producing a graph output) needs a CPU "
               "fallback operator, which is not implemented yet";
      }
      return "";
    }
    if (op == "QLinearConv" || op == "QLinearMatMul" || op == "com.microsoft::QLinearAdd") {
      if (op == "QLinearMatMul" && !detail::is_constant_input(g_, n, 3)) {
        return "B must be a constant (initializer)";
      }
      return "";
    }
    if (op == "MaxPool") {
      if (dtype_of(0) == DType::Float32) {
        return "float MaxPool needs a CPU fallback operator, which is not implemented yet";
      }
      if (n.outputs.size() > 1 && n.outputs[1] >= 0) return "the Indices output is not supported";
      if (n.attr_int("storage_order", 0) != 0) return "storage_order=1 is not supported";
      return "";
    }
    if (op == "Reshape" || op == "Flatten") {
      if (dtype_of(0) == DType::Float32) {
        return "float Reshape needs a CPU fallback operator, which is not implemented yet";
      }
      return "";
    }
    return "operator not supported by the NPU and no CPU fallback exists";
  }

  void check_supported() {
    std::vector<std::string> bad;
    for (const Node& n : g_.nodes) {
      std::string why = unsupported_reason(n);
      if (!why.empty()) {
        bad.push_back(fmt::format("  node '{}' (op {}, domain '{}'): {}", n.name, n.op_type,
                                  n.domain.empty() ? "ai.onnx" : n.domain, why));
      }
    }
    if (bad.empty()) return;
    std::string msg = fmt::format("{} node(s) cannot run:\n", bad.size());
    for (const auto& b : bad) msg += b + "\n";
    msg += "supported operators:";
    for (const auto& s : supported_operators()) msg += "\n  " + s;
    throw Error(ErrorCode::UnsupportedOperator, msg);
  }

  // ---- host slots -------------------------------------------------------------------------
  int add_slot(std::string name, DType dtype, Shape shape, isa::Layout layout) {
    out_.slots.push_back({std::move(name), dtype, std::move(shape), layout});
    return static_cast<int>(out_.slots.size() - 1);
  }

  int host_slot_of_input(int id) {
    const Value& v = g_.values[static_cast<std::size_t>(id)];
    int s = add_slot(v.name, v.dtype, v.shape, isa::Layout::Linear);
    host_[id] = s;
    return s;
  }

  // ---- device tensors ---------------------------------------------------------------------
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

  // The device tensor holding value `id` in `layout`, creating program inputs, host Lower ops
  // and layout-changing kernels as needed.
  isa::TensorRef device_value(int id, isa::Layout layout, const Node& consumer) {
    auto key = std::make_pair(id, layout);
    if (auto it = dev_.find(key); it != dev_.end()) return it->second;
    const Value& v = g_.values[static_cast<std::size_t>(id)];
    if (v.constant) {
      auto r = add_constant(*v.constant, layout);
      dev_[key] = r;
      return r;
    }
    if (layout == isa::Layout::LoweredNCHW && v.shape.size() != 4) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' ({}): input '{}' must be 4-D NCHW, has shape {}",
                              consumer.name, consumer.qualified_op(), v.name, shape_to_string(v.shape)));
    }
    // Already on the device in another layout?
    auto other = dev_.find(std::make_pair(id, layout == isa::Layout::Linear ? isa::Layout::LoweredNCHW
                                                                           : isa::Layout::Linear));
    if (other != dev_.end()) {
      if (layout == isa::Layout::Linear) {
        // Leave the lowered layout with a LowLevelReshape of the same shape.
        auto r = alloc_activation(v.dtype, v.shape, isa::Layout::Linear);
        isa::Kernel k{.kind = isa::KernelKind::Reshape, .node_name = consumer.name,
                      .operator_index = consumer.index, .inputs = {other->second}, .outputs = {r},
                      .params = isa::ReshapeParams{}};
        prog_.kernels.push_back(std::move(k));
        dev_[key] = r;
        return r;
      }
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' ({}): input '{}' is produced in the linear layout on the "
                              "NPU but must be lowered; converting on the NPU is not supported yet",
                              consumer.name, consumer.qualified_op(), v.name));
    }
    auto hs = host_.find(id);
    if (hs == host_.end()) {
      throw Error(ErrorCode::Internal, fmt::format("value '{}' has no producer", v.name));
    }
    // A new program input, fed from the host slot.
    auto r = alloc_activation(v.dtype, v.shape, layout);
    int slot = hs->second;
    if (layout == isa::Layout::LoweredNCHW) {
      if (v.shape[3] % isa::kLoweredWidthAlign == 0) {
        out_.report.notes.push_back(fmt::format(
            "Lower of '{}' on the NPU: width {} is a multiple of {}, the dense bytes are already "
            "the lowered layout", v.name, v.shape[3], isa::kLoweredWidthAlign));
      } else {
        int lowered = add_slot(v.name + ".lowered", v.dtype, v.shape, isa::Layout::LoweredNCHW);
        out_.pre_ops.push_back({.kind = CpuOpKind::Lower, .node_name = "", .operator_index = -1,
                                .input = slot, .output = lowered, .scales = {}, .zero_points = {}, .axis = 1});
        out_.report.notes.push_back(fmt::format(
            "Lower of '{}' on the host (Pad/Lower): width {} is not a multiple of {}", v.name,
            v.shape[3], isa::kLoweredWidthAlign));
        slot = lowered;
      }
    }
    prog_.inputs.push_back(r);
    out_.program_input_slots.push_back(slot);
    dev_[key] = r;
    return r;
  }

  void set_device_output(int id, const isa::TensorRef& r) { dev_[std::make_pair(id, r.layout)] = r; }

  const Value& value(int id) const { return g_.values[static_cast<std::size_t>(id)]; }

  void report(const Node& n, const char* placement, std::string target, std::string reason) {
    out_.report.entries.push_back({n.name, n.qualified_op(), n.index, placement, std::move(target), std::move(reason)});
  }

  // ---- emission ---------------------------------------------------------------------------
  void emit(const Node& n) {
    const std::string op = n.qualified_op();
    if (op == "QuantizeLinear") return emit_quantize(n);
    if (op == "DequantizeLinear") return emit_dequantize(n);
    if (op == "QLinearConv") return emit_conv(n);
    if (op == "MaxPool") return emit_maxpool(n);
    if (op == "QLinearMatMul") return emit_matmul(n);
    if (op == "com.microsoft::QLinearAdd") return emit_add(n);
    if (op == "Reshape" || op == "Flatten") return emit_reshape(n);
    throw Error(ErrorCode::Internal, fmt::format("node '{}': no emitter for {}", n.name, op));
  }

  // Per-tensor or per-axis parameters of a Quantize/DequantizeLinear node.
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
    if (op.scales.size() != op.zero_points.size() ||
        (op.scales.size() > 1 && (op.axis < 0 || op.axis >= static_cast<std::int64_t>(xs.size()) ||
                                  xs[static_cast<std::size_t>(op.axis)] != static_cast<std::int64_t>(op.scales.size())))) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' ({}): scale/zero point sizes do not fit axis {} of {}",
                              n.name, n.op_type, op.axis, shape_to_string(xs)));
    }
    return op;
  }

  void emit_quantize(const Node& n) {
    CpuOp op = qdq_op(n, CpuOpKind::Quantize);
    const Value& y = value(n.outputs[0]);
    op.input = host_.at(n.inputs[0]);
    op.output = add_slot(y.name, y.dtype, y.shape, isa::Layout::Linear);
    host_[n.outputs[0]] = op.output;
    out_.pre_ops.push_back(op);
    report(n, "cpu-pre", "Quantize", "QuantizeLinear of a graph input runs on the host before the NPU");
  }

  // The host slot holding value `id` after the program: a program output (+ host Unlower).
  int host_value_after_program(int id) {
    if (auto it = host_.find(id); it != host_.end()) return it->second;
    const Value& v = value(id);
    isa::TensorRef r;
    if (auto it = dev_.find({id, isa::Layout::Linear}); it != dev_.end()) {
      r = it->second;
    } else if (auto it2 = dev_.find({id, isa::Layout::LoweredNCHW}); it2 != dev_.end()) {
      r = it2->second;
    } else {
      throw Error(ErrorCode::Internal, fmt::format("value '{}' is neither on host nor device", v.name));
    }
    int slot = add_slot(v.name + (r.layout == isa::Layout::LoweredNCHW ? ".lowered" : ""), v.dtype,
                        v.shape, r.layout);
    prog_.outputs.push_back(r);
    out_.program_output_slots.push_back(slot);
    if (r.layout == isa::Layout::LoweredNCHW) {
      if (v.shape[3] % isa::kLoweredWidthAlign == 0) {
        out_.slots[static_cast<std::size_t>(slot)].layout = isa::Layout::Linear;  // same bytes
        out_.slots[static_cast<std::size_t>(slot)].name = v.name;
        out_.report.notes.push_back(fmt::format(
            "Unlower of '{}' on the NPU: width {} is a multiple of {}", v.name, v.shape[3],
            isa::kLoweredWidthAlign));
      } else {
        int dense = add_slot(v.name, v.dtype, v.shape, isa::Layout::Linear);
        out_.post_ops.push_back({.kind = CpuOpKind::Unlower, .node_name = "", .operator_index = -1,
                                 .input = slot, .output = dense, .scales = {}, .zero_points = {}, .axis = 1});
        out_.report.notes.push_back(fmt::format(
            "Unlower of '{}' on the host (Unlower/Slice): width {} is not a multiple of {}",
            v.name, v.shape[3], isa::kLoweredWidthAlign));
        slot = dense;
      }
    }
    host_[id] = slot;
    return slot;
  }

  void emit_dequantize(const Node& n) {
    CpuOp op = qdq_op(n, CpuOpKind::Dequantize);
    // Deferred: the program's outputs are only known once every kernel is emitted, but the
    // order of post-ops follows the graph, so resolve the input now.
    op.input = host_value_after_program(n.inputs[0]);
    const Value& y = value(n.outputs[0]);
    op.output = add_slot(y.name, y.dtype, y.shape, isa::Layout::Linear);
    host_[n.outputs[0]] = op.output;
    out_.post_ops.push_back(op);
    report(n, "cpu-post", "Dequantize",
           "DequantizeLinear producing a graph output runs on the host after the NPU");
  }

  int finish_output(int id) { return host_value_after_program(id); }

  void emit_conv(const Node& n) {
    const Value& xv = value(n.inputs[0]);
    const Value& yv = value(n.outputs[0]);
    const Tensor& w = constant_input(g_, n, 3, "w");
    isa::Conv2dParams p;
    auto xq = scalar_quant(g_, n, 1, 2);
    auto yq = scalar_quant(g_, n, 6, 7);
    p.x = {xq.scale, xq.zero_point};
    p.y = {yq.scale, yq.zero_point};
    p.w_scale = float_values(constant_input(g_, n, 4, "w_scale"));
    p.w_zero_point = int_values(constant_input(g_, n, 5, "w_zero_point"));
    const auto m = static_cast<std::size_t>(w.shape()[0]);
    if ((p.w_scale.size() != 1 && p.w_scale.size() != m) ||
        (p.w_zero_point.size() != 1 && p.w_zero_point.size() != m)) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' (QLinearConv): w_scale/w_zero_point must have 1 or {} values", n.name, m));
    }
    if (w.dtype() != DType::Int8 && w.dtype() != DType::UInt8) {
      throw Error(ErrorCode::IncompatibleModel, fmt::format("node '{}' (QLinearConv): weight must be int8 or uint8", n.name));
    }
    p.weight = add_constant(w, isa::Layout::Linear);
    if (n.inputs.size() > 8 && n.inputs[8] >= 0) {
      const Tensor& b = constant_input(g_, n, 8, "B");
      if (b.dtype() != DType::Int32 || b.elements() != static_cast<std::int64_t>(m)) {
        throw Error(ErrorCode::IncompatibleModel, fmt::format("node '{}' (QLinearConv): bias must be int32 [{}]", n.name, m));
      }
      p.bias = add_constant(b, isa::Layout::Linear);
    }
    auto win = detail::resolve_window(n, {w.shape()[2], w.shape()[3]}, {xv.shape[2], xv.shape[3]}, false);
    p.pads = win.pads;
    p.strides = win.strides;
    p.dilations = win.dilations;
    p.group = n.attr_int("group", 1);
    const bool depthwise = p.group > 1 && p.group == xv.shape[1];
    auto x = device_value(n.inputs[0], isa::Layout::LoweredNCHW, n);
    auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::LoweredNCHW);
    isa::Kernel k{.kind = depthwise ? isa::KernelKind::DepthwiseConv2d : isa::KernelKind::Conv2d,
                  .node_name = n.name, .operator_index = n.index, .inputs = {x}, .outputs = {y},
                  .params = std::move(p)};
    report(n, "npu", std::string(isa::kernel_name(k.kind)), "quantized convolution");
    prog_.kernels.push_back(std::move(k));
    set_device_output(n.outputs[0], y);
  }

  void emit_maxpool(const Node& n) {
    const Value& xv = value(n.inputs[0]);
    const Value& yv = value(n.outputs[0]);
    auto ks = n.attr_ints("kernel_shape", {});
    auto win = detail::resolve_window(n, {ks[0], ks[1]}, {xv.shape[2], xv.shape[3]},
                                      n.attr_int("ceil_mode", 0) != 0);
    isa::MaxPoolParams p{.kernel = win.kernel, .pads = win.pads, .strides = win.strides, .dilations = win.dilations};
    auto x = device_value(n.inputs[0], isa::Layout::LoweredNCHW, n);
    auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::LoweredNCHW);
    prog_.kernels.push_back({.kind = isa::KernelKind::MaxPool, .node_name = n.name, .operator_index = n.index,
                             .inputs = {x}, .outputs = {y}, .params = p});
    report(n, "npu", "LowLevelMaxPool", fmt::format("MaxPool on {} data", dtype_name(xv.dtype)));
    set_device_output(n.outputs[0], y);
  }

  void emit_matmul(const Node& n) {
    const Value& yv = value(n.outputs[0]);
    const Tensor& b = constant_input(g_, n, 3, "b");
    if (b.shape().size() != 2) {
      throw Error(ErrorCode::IncompatibleModel, fmt::format("node '{}' (QLinearMatMul): B must be 2-D", n.name));
    }
    isa::MatMulParams p;
    auto aq = scalar_quant(g_, n, 1, 2);
    auto yq = scalar_quant(g_, n, 6, 7);
    p.a = {aq.scale, aq.zero_point};
    p.y = {yq.scale, yq.zero_point};
    p.b_scale = float_values(constant_input(g_, n, 4, "b_scale"));
    p.b_zero_point = int_values(constant_input(g_, n, 5, "b_zero_point"));
    const auto cols = static_cast<std::size_t>(b.shape()[1]);
    if ((p.b_scale.size() != 1 && p.b_scale.size() != cols) ||
        (p.b_zero_point.size() != 1 && p.b_zero_point.size() != cols)) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}' (QLinearMatMul): b_scale/b_zero_point must have 1 or {} values", n.name, cols));
    }
    p.b = add_constant(b, isa::Layout::Linear);
    auto a = device_value(n.inputs[0], isa::Layout::Linear, n);
    auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::Linear);
    prog_.kernels.push_back({.kind = isa::KernelKind::MatMul, .node_name = n.name, .operator_index = n.index,
                             .inputs = {a}, .outputs = {y}, .params = std::move(p)});
    report(n, "npu", "LowLevelMatMul", "quantized matrix multiplication with constant B");
    set_device_output(n.outputs[0], y);
  }

  void emit_add(const Node& n) {
    const Value& av = value(n.inputs[0]);
    const Value& bv = value(n.inputs[3]);
    const Value& yv = value(n.outputs[0]);
    auto aq = scalar_quant(g_, n, 1, 2);
    auto bq = scalar_quant(g_, n, 4, 5);
    auto yq = scalar_quant(g_, n, 6, 7);
    isa::AddParams p{.a = {aq.scale, aq.zero_point}, .b = {bq.scale, bq.zero_point}, .y = {yq.scale, yq.zero_point}};
    auto lowered_now = [&](int id) {
      return dev_.count({id, isa::Layout::LoweredNCHW}) && !dev_.count({id, isa::Layout::Linear});
    };
    const bool lowered = yv.shape.size() == 4 && av.shape == yv.shape && bv.shape == yv.shape &&
                         (lowered_now(n.inputs[0]) || lowered_now(n.inputs[3]));
    const auto layout = lowered ? isa::Layout::LoweredNCHW : isa::Layout::Linear;
    auto a = device_value(n.inputs[0], layout, n);
    auto b = device_value(n.inputs[3], layout, n);
    // Linear operands broadcast with equal rank: prepend 1s.
    for (auto* r : {&a, &b}) {
      while (r->shape.size() < yv.shape.size()) r->shape.insert(r->shape.begin(), 1);
    }
    auto y = alloc_activation(yv.dtype, yv.shape, layout);
    prog_.kernels.push_back({.kind = isa::KernelKind::Add, .node_name = n.name, .operator_index = n.index,
                             .inputs = {a, b}, .outputs = {y}, .params = p});
    report(n, "npu", "LowLevelAdd", fmt::format("quantized addition ({} layout)", isa::layout_name(layout)));
    set_device_output(n.outputs[0], y);
  }

  void emit_reshape(const Node& n) {
    const Value& yv = value(n.outputs[0]);
    const int xid = n.inputs[0];
    const bool lowered = dev_.count({xid, isa::Layout::LoweredNCHW}) && !dev_.count({xid, isa::Layout::Linear});
    auto x = device_value(xid, lowered ? isa::Layout::LoweredNCHW : isa::Layout::Linear, n);
    auto y = alloc_activation(yv.dtype, yv.shape, isa::Layout::Linear);
    prog_.kernels.push_back({.kind = isa::KernelKind::Reshape, .node_name = n.name, .operator_index = n.index,
                             .inputs = {x}, .outputs = {y}, .params = isa::ReshapeParams{}});
    report(n, "npu", "LowLevelReshape", lowered ? "reshape leaving the lowered layout" : "reshape");
    set_device_output(n.outputs[0], y);
  }

  // ---- memory placement -------------------------------------------------------------------
  void place_memory() {
    if (prog_.kernels.empty() && prog_.inputs.empty()) return;  // no NPU work
    const std::uint64_t base = align_up(constants_.size());
    auto fix = [&](isa::TensorRef& r) {
      if (r.address & kActivationFlag) r.address = (r.address & ~kActivationFlag) + base;
    };
    for (auto& k : prog_.kernels) {
      for (auto& r : k.inputs) fix(r);
      for (auto& r : k.outputs) fix(r);
    }
    for (auto& r : prog_.inputs) fix(r);
    for (auto& r : prog_.outputs) fix(r);
    prog_.name = g_.name;
    prog_.constants = std::move(constants_);
    prog_.dram_bytes = base + act_end_;
    out_.program = std::make_shared<isa::Program>(std::move(prog_));
  }

  Graph& g_;
  CompilerOptions opt_;
  CompiledModel out_;
  isa::Program prog_;
  std::vector<std::byte> constants_;
  std::uint64_t act_end_ = 0;
  std::map<int, int> host_;                                 // value -> host slot
  std::map<std::pair<int, isa::Layout>, isa::TensorRef> dev_;  // (value, layout) -> device tensor
};

}  // namespace

CompiledModel compile(Graph graph, const CompilerOptions& options) {
  return Compiler(graph, options).run();
}

}  // namespace furiosa::compiler
