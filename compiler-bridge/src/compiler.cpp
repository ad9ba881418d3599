// Graph IR -> steps of host operators and NPU programs, with the partition record.
//
// Passes (DESIGN.md "compiler-bridge/"):
// 1. infer shapes; fold constants: Shape of a statically shaped value, and any node whose inputs
//    are all constants and that the host operator library runs (Gather/Unsqueeze/Concat of
//    shapes, ...). QuantizeLinear/DequantizeLinear are never folded (QDQ weights stay visible).
// 2. QDQ regions: DequantizeLinear -> data-movement ops (MaxPool, Reshape, Flatten, Concat,
//    Transpose, Split, Squeeze, Unsqueeze) -> QuantizeLinear groups run on the quantized tensors;
//    inputs whose parameters differ from the QuantizeLinear's get a Requantize computing exactly
//    what DequantizeLinear then QuantizeLinear compute in float32 (max and data movement commute
//    with the monotonic per-tensor maps, so results are identical to the float graph).
// 3. dead nodes are removed.
// 4. partition in graph order: NPU-capable nodes join the open NPU segment (one NPU program);
//    a host node that reads a value of the open segment closes it. QuantizeLinear /
//    DequantizeLinear run on the host as Quantize / Dequantize; other float ops run on the host
//    as external operators (cpu_ops.h). Lower/Unlower are inserted at segment boundaries where a
//    lowered tensor's width is not a multiple of 32.
// Anything else is reported as unsupported, every such node listed in one error.
//
// Requantization rule per kernel: the ONNX float rule unless the node carries the fixed-point
// attributes of graph.h (TFLite models), which become the kernel's `fixed_point` params. A
// Transpose [0, 3, 1, 2] of an "NHWC" value held on the host (a TFLite image input, or its host
// Quantize) whose consumers all run on the NPU becomes the host Lower step reading NHWC.
#include "furiosa/compiler/compiler.h"
#include "furiosa/host/layout.h"
#include "memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "furiosa/host/cpu_ops.h"
#include "furiosa/core/error.h"
#include "graph_utils.h"

namespace furiosa::compiler {

std::string_view cpu_op_name(CpuOpKind kind) noexcept {
  switch (kind) {
    case CpuOpKind::Quantize: return "Quantize";
    case CpuOpKind::Dequantize: return "Dequantize";
    case CpuOpKind::Lower: return "Lower";
    case CpuOpKind::Unlower: return "Unlower";
    case CpuOpKind::External: return "External";
  }
  return "?";
}

std::uint64_t HostSlot::size_bytes() const noexcept {
  return isa::TensorRef{.address = 0, .dtype = dtype, .shape = shape, .layout = layout}.size_bytes();
}

std::string PartitionReport::to_string() const {
  std::string out = fmt::format("{:<4} {:<40} {:<34} {:<9} {:<26} {}\n", "idx", "node", "op",
                                "placement", "target", "reason");
  for (const auto& e : entries) {
    out += fmt::format("{:<4} {:<40} {:<34} {:<9} {:<26} {}\n", e.operator_index, e.node_name,
                       e.op, e.placement, e.target, e.reason);
  }
  for (const auto& n : notes) out += "note: " + n + "\n";
  return out;
}

std::size_t PartitionReport::count(std::string_view placement) const {
  return static_cast<std::size_t>(std::count_if(entries.begin(), entries.end(),
                                                [&](const auto& e) { return e.placement == placement; }));
}

std::vector<std::string> supported_operators() {
  std::vector<std::string> out = {
      "NPU: QLinearConv (LowLevelConv2d / LowLevelDepthwiseConv2d), QLinearMatMul with constant B, "
      "com.microsoft::QLinearAdd, com.microsoft::QLinearGlobalAveragePool, "
      "com.microsoft::QLinearConcat, and MaxPool/Reshape/Flatten/Concat/Transpose/Split/Squeeze/"
      "Unsqueeze on uint8/int8 tensors",
      "QDQ: DequantizeLinear -> data-movement ops -> QuantizeLinear groups run on the NPU",
      "host: QuantizeLinear, DequantizeLinear (per-tensor and per-axis)",
      "TFLite models: the operators of compiler::tflite_supported_operators() map onto the above "
      "(AVERAGE_POOL_2D runs on the host as furiosa::QuantizedAveragePool)"};
  std::string host = "host external operators:";
  for (const auto& op : host::cpu_op_list()) host += " " + op;
  out.push_back(host);
  return out;
}

std::vector<std::string> npu_operators() {
  return {"QLinearConv", "QLinearMatMul", "com.microsoft::QLinearAdd",
          "com.microsoft::QLinearGlobalAveragePool", "com.microsoft::QLinearConcat", "MaxPool",
          "Reshape", "Flatten", "Concat", "Transpose", "Split", "Squeeze", "Unsqueeze", "Identity",
          "QuantizeLinear", "DequantizeLinear"};
}

namespace {

using detail::constant_input;
using detail::float_values;
using detail::int_values;
using detail::scalar_quant;

constexpr std::uint64_t kAlign = 64;
constexpr std::uint64_t kActivationFlag = 1ull << 62;  // marks activation addresses until placement

std::uint64_t align_up(std::uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

bool is_quantized(DType d) { return d == DType::UInt8 || d == DType::Int8; }

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

// Ops that only move elements (and MaxPool, which commutes with monotonic maps).
bool is_data_movement(const Node& n) {
  static const std::set<std::string> ops = {"MaxPool", "Reshape", "Flatten", "Concat", "Transpose",
                                            "Split", "Squeeze", "Unsqueeze", "Identity"};
  return n.domain.empty() && ops.count(n.op_type);
}

// Inputs of a data-movement node that carry data (not shapes/axes/sizes).
std::vector<std::size_t> data_inputs(const Node& n) {
  if (n.op_type == "Concat") {
    std::vector<std::size_t> all(n.inputs.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    return all;
  }
  return {0};
}

// Copies a dense tensor into `layout` (LoweredNCHW pads each row with zeros).
std::vector<std::byte> lay_out(const Tensor& t, isa::Layout layout) {
  if (layout == isa::Layout::Linear) return {t.bytes().begin(), t.bytes().end()};
  const std::size_t es = dtype_size(t.dtype());
  std::vector<std::byte> out(host::lowered_size(t.shape(), es));
  host::lower(t.shape(), es, t.bytes(), out);
  return out;
}

class Compiler {
 public:
  Compiler(Graph& g, const CompilerOptions& opt) : g_(g), opt_(opt) {}

  CompiledModel run() {
    batch_fixed_inputs();
    infer_shapes(g_, opt_);
    fold_constants();
    fuse_qdq_operators();
    fold_qdq_regions();
    remove_dead_nodes();
    infer_shapes(g_, opt_);
    check_supported();
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
    for (std::size_t n = 0; n < g_.nodes.size(); ++n) emit(static_cast<int>(n));
    close_segment();
    for (int id : g_.outputs) {
      const int s = host_value(id);
      if (!value(id).format.empty()) out_.slots[static_cast<std::size_t>(s)].format = value(id).format;
      out_.output_slots.push_back(s);
    }
    std::stable_sort(out_.report.entries.begin(), out_.report.entries.end(),
                     [](const auto& a, const auto& b) { return a.operator_index < b.operator_index; });
    return std::move(out_);
  }

 private:
  // ---- graph rewrites -------------------------------------------------------------------------
  const Value& value(int id) const { return g_.values[static_cast<std::size_t>(id)]; }
  Value& value(int id) { return g_.values[static_cast<std::size_t>(id)]; }
  bool is_graph_output(int id) const {
    return std::find(g_.outputs.begin(), g_.outputs.end(), id) != g_.outputs.end();
  }
  void note_entry(const Node& n, const char* placement, std::string target, std::string reason) {
    out_.report.entries.push_back({n.name, n.qualified_op(), n.index, placement, std::move(target), std::move(reason)});
  }

  // Drops nodes flagged in `dead` and sorts the rest topologically (keeping graph order where
  // possible).
  void compact(const std::vector<bool>& dead) {
    std::vector<Node> live;
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      if (!dead[i]) live.push_back(std::move(g_.nodes[i]));
    }
    std::set<int> available;
    for (int id : g_.inputs) available.insert(id);
    for (std::size_t i = 0; i < g_.values.size(); ++i) {
      if (g_.values[i].constant) available.insert(static_cast<int>(i));
    }
    std::vector<Node> sorted;
    std::vector<bool> done(live.size(), false);
    while (sorted.size() < live.size()) {
      bool progress = false;
      for (std::size_t i = 0; i < live.size(); ++i) {
        if (done[i]) continue;
        bool ready = std::all_of(live[i].inputs.begin(), live[i].inputs.end(),
                                 [&](int in) { return in < 0 || available.count(in); });
        if (!ready) continue;
        for (int o : live[i].outputs) available.insert(o);
        sorted.push_back(std::move(live[i]));
        done[i] = true;
        progress = true;
        break;  // restart from the front to keep the original order
      }
      if (!progress) throw Error(ErrorCode::IncompatibleModel, "the graph has a cycle or a node reads an undefined value");
    }
    g_.nodes = std::move(sorted);
  }

  void fold_constants() {
    std::vector<bool> dead(g_.nodes.size(), false);
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (n.domain.empty() && (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear")) continue;
      std::vector<Tensor> outs;
      if (n.op_type == "Shape" && n.domain.empty() && n.inputs.size() == 1 && value(n.inputs[0]).has_shape &&
          std::all_of(value(n.inputs[0]).shape.begin(), value(n.inputs[0]).shape.end(), [](auto d) { return d >= 0; }) &&
          n.attributes.empty()) {
        const Shape& s = value(n.inputs[0]).shape;
        Tensor t(DType::Int64, {static_cast<std::int64_t>(s.size())});
        std::copy(s.begin(), s.end(), t.as<std::int64_t>().begin());
        outs.push_back(std::move(t));
      } else {
        if (n.inputs.empty()) continue;
        std::vector<const Tensor*> ins;
        std::vector<DType> dtypes;
        bool all_const = true;
        for (int in : n.inputs) {
          if (in < 0) {
            ins.push_back(nullptr);
            dtypes.push_back(DType::Float32);
            continue;
          }
          all_const = all_const && value(in).constant.has_value();
          ins.push_back(value(in).constant ? &*value(in).constant : nullptr);
          dtypes.push_back(value(in).dtype);
        }
        if (!all_const || !cpu_op_supported(n, dtypes, nullptr)) continue;
        outs = run_cpu_op(n, ins);
      }
      for (std::size_t o = 0; o < n.outputs.size() && o < outs.size(); ++o) {
        if (n.outputs[o] < 0) continue;
        Value& v = value(n.outputs[o]);
        v.dtype = outs[o].dtype();
        v.shape = outs[o].shape();
        v.dim_params.assign(v.shape.size(), "");
        v.has_shape = true;
        v.constant = std::move(outs[o]);
      }
      dead[i] = true;
      note_entry(n, "constant", "-", "all inputs are known at compile time: evaluated once");
    }
    compact(dead);
    infer_shapes(g_, opt_);
  }

  // Per-tensor quantization of a Q/DQ node, or nullopt (per-axis or non-constant parameters).
  std::optional<detail::ScalarQuant> qdq_params(const Node& n) const {
    try {
      auto q = scalar_quant(g_, n, 1, 2);
      if (!(n.inputs.size() > 2 && n.inputs[2] >= 0)) q.dtype = DType::UInt8;
      return q;
    } catch (const Error&) {
      return std::nullopt;
    }
  }

  static bool same(const detail::ScalarQuant& a, const detail::ScalarQuant& b) {
    return a.scale == b.scale && a.zero_point == b.zero_point && a.dtype == b.dtype;
  }

  // Model-level batch for graphs whose inputs have a fixed dim 0 of 1: dim 0 of every input
  // becomes batch_size, and so does a leading 1 of constant Reshape shapes (the batch axis kept
  // through reshapes, as in MNIST's [1, 256] and ShuffleNet's [1, 2, 58, 28, 28]). Symbolic batch
  // dims are bound by infer_shapes instead.
  void batch_fixed_inputs() {
    const std::int64_t n = opt_.batch_size;
    if (n == 1) return;
    bool fixed = false;
    for (int id : g_.inputs) {
      Value& v = value(id);
      if (v.shape.empty() || v.shape[0] < 0) continue;
      if (v.shape[0] != 1) {
        throw Error(ErrorCode::IncompatibleModel,
                    fmt::format("batch size {}: graph input '{}' has a fixed dim 0 of {}, only 1 or a symbolic dim "
                                "can be batched", n, v.name, v.shape[0]));
      }
      v.shape[0] = n;
      fixed = true;
    }
    if (!fixed) return;
    for (Node& node : g_.nodes) {
      if (node.op_type != "Reshape" || !node.domain.empty() || !detail::is_constant_input(g_, node, 1)) continue;
      const Tensor& shape = *value(node.inputs[1]).constant;
      if (shape.dtype() != DType::Int64 || shape.elements() < 1 || shape.as<std::int64_t>()[0] != 1) continue;
      Tensor batched = shape;
      batched.as<std::int64_t>()[0] = n;
      Value bv;
      bv.name = value(node.inputs[1]).name + fmt::format("/batch{}", n);
      bv.dtype = DType::Int64;
      bv.shape = shape.shape();
      bv.dim_params.assign(bv.shape.size(), "");
      bv.has_shape = true;
      bv.constant = std::move(batched);
      g_.values.push_back(std::move(bv));
      node.inputs[1] = static_cast<int>(g_.values.size() - 1);
    }
    out_.report.notes.push_back(fmt::format("batch size {}: dim 0 of the inputs and the leading 1 of constant "
                                            "Reshape shapes were multiplied", n));
  }

  // A constant zero point of `dtype` (for DequantizeLinear nodes that omit theirs).
  int zero_point_value(DType dtype) {
    Value v;
    v.name = fmt::format("furiosa_zero_point_{}", dtype_name(dtype));
    if (int id = g_.find_value(v.name); id >= 0) return id;
    v.dtype = dtype;
    v.has_shape = true;
    v.constant = Tensor(dtype, {});
    g_.values.push_back(std::move(v));
    return static_cast<int>(g_.values.size() - 1);
  }

  // The live DequantizeLinear node producing value `id`, or -1.
  int dq_producer(int id, const std::vector<bool>& dead) const {
    const int p = id >= 0 ? g_.producer(id) : -1;
    if (p < 0 || dead[static_cast<std::size_t>(p)]) return -1;
    const Node& n = g_.nodes[static_cast<std::size_t>(p)];
    return n.op_type == "DequantizeLinear" && n.domain.empty() ? p : -1;
  }

  // (quantized value, scale, zero point) read by DequantizeLinear node `dq`.
  std::array<int, 3> dq_operands(const Node& dq) {
    const int zp = dq.inputs.size() > 2 && dq.inputs[2] >= 0 ? dq.inputs[2] : zero_point_value(value(dq.inputs[0]).dtype);
    return {dq.inputs[0], dq.inputs[1], zp};
  }

  // True when bias DequantizeLinear `db` has scale x_scale * w_scale[c] (float32) and zero point
  // 0, i.e. its int32 values are exactly what QLinearConv's B means.
  bool bias_scale_matches(const Node& db, const Node& dx, const Node& dw) const {
    if (!detail::is_constant_input(g_, db, 1) || !detail::is_constant_input(g_, dx, 1) || !detail::is_constant_input(g_, dw, 1)) return false;
    const auto bs = float_values(constant_input(g_, db, 1, "scale"));
    const auto xs = float_values(constant_input(g_, dx, 1, "scale"));
    const auto ws = float_values(constant_input(g_, dw, 1, "scale"));
    if (xs.size() != 1) return false;
    if (detail::is_constant_input(g_, db, 2)) {
      for (auto z : int_values(constant_input(g_, db, 2, "zero point"))) {
        if (z != 0) return false;
      }
    }
    for (std::size_t c = 0; c < bs.size(); ++c) {
      const float want = xs[0] * ws[ws.size() == 1 ? 0 : std::min(c, ws.size() - 1)];
      if (std::abs(bs[c] - want) > 1e-6f * std::abs(want)) return false;
    }
    return bs.size() == 1 || bs.size() == ws.size();
  }

  // QDQ encoding: DequantizeLinear inputs -> Conv / MatMul / Add / GlobalAveragePool ->
  // QuantizeLinear becomes the QOperator node with the same parameters (QLinearConv,
  // QLinearMatMul, QLinearAdd, QLinearGlobalAveragePool), as ONNX Runtime's QDQ transformer does.
  // Groups that do not fit stay float and run as host operators.
  void fuse_qdq_operators() {
    std::vector<bool> dead(g_.nodes.size(), false);
    const std::size_t count = g_.nodes.size();
    for (std::size_t i = 0; i < count; ++i) {
      const Node op = g_.nodes[i];
      if (!op.domain.empty() || op.outputs.size() != 1) continue;
      const std::string t = op.op_type;
      if (t != "Conv" && t != "MatMul" && t != "Add" && t != "GlobalAveragePool") continue;
      const auto cons = g_.consumers(op.outputs[0]);
      if (cons.size() != 1 || is_graph_output(op.outputs[0])) continue;
      const Node& q = g_.nodes[static_cast<std::size_t>(cons[0])];
      if (q.op_type != "QuantizeLinear" || !q.domain.empty() || !qdq_params(q)) continue;
      const std::size_t data_inputs = t == "Conv" || t == "MatMul" || t == "Add" ? 2 : 1;
      std::vector<int> dqs;
      for (std::size_t k = 0; k < data_inputs && k < op.inputs.size(); ++k) dqs.push_back(dq_producer(op.inputs[k], dead));
      if (dqs.size() != data_inputs || std::count(dqs.begin(), dqs.end(), -1)) continue;
      const Node& dx = g_.nodes[static_cast<std::size_t>(dqs[0])];
      if (!qdq_params(dx) || value(dx.inputs[0]).constant) continue;  // activation: per-tensor, run time
      const int yzp = q.inputs.size() > 2 && q.inputs[2] >= 0 ? q.inputs[2] : zero_point_value(DType::UInt8);
      Node fused;
      fused.name = op.name;
      fused.index = op.index;
      fused.attributes = op.attributes;
      fused.outputs = {q.outputs[0]};
      auto x = dq_operands(dx);
      if (t == "GlobalAveragePool") {
        fused.op_type = "QLinearGlobalAveragePool";
        fused.domain = "com.microsoft";
        fused.attributes["channels_last"] = std::int64_t{0};
        fused.inputs = {x[0], x[1], x[2], q.inputs[1], yzp};
      } else {
        const Node& dw = g_.nodes[static_cast<std::size_t>(dqs[1])];
        auto w = dq_operands(dw);
        if (t == "Add") {
          if (!qdq_params(dw)) continue;
          fused.op_type = "QLinearAdd";
          fused.domain = "com.microsoft";
          fused.inputs = {x[0], x[1], x[2], w[0], w[1], w[2], q.inputs[1], yzp};
        } else {
          if (!value(dw.inputs[0]).constant) continue;  // weights must be constants
          fused.op_type = t == "Conv" ? "QLinearConv" : "QLinearMatMul";
          fused.inputs = {x[0], x[1], x[2], w[0], w[1], w[2], q.inputs[1], yzp};
          if (t == "Conv" && op.inputs.size() > 2 && op.inputs[2] >= 0) {
            // The bias must be DequantizeLinear(int32 B, x_scale * w_scale, 0).
            const int db = dq_producer(op.inputs[2], dead);
            if (db < 0 || value(g_.nodes[static_cast<std::size_t>(db)].inputs[0]).dtype != DType::Int32) continue;
            if (!bias_scale_matches(g_.nodes[static_cast<std::size_t>(db)], dx, dw)) continue;
            fused.inputs.push_back(g_.nodes[static_cast<std::size_t>(db)].inputs[0]);
          }
        }
      }
      g_.nodes[i] = std::move(fused);
      dead[static_cast<std::size_t>(cons[0])] = true;
      note_entry(q, "folded", g_.nodes[i].op_type, "QDQ group fused into " + g_.nodes[i].qualified_op());
    }
    compact(dead);
  }

  void fold_qdq_regions() {
    const int original_count = static_cast<int>(g_.nodes.size());
    std::vector<bool> dead(g_.nodes.size(), false);
    for (int qi = 0; qi < original_count; ++qi) {
      const Node& q = g_.nodes[static_cast<std::size_t>(qi)];
      if (dead[static_cast<std::size_t>(qi)] || q.op_type != "QuantizeLinear" || !q.domain.empty()) continue;
      // A QuantizeLinear with TFLite's rounding (graph.h) keeps its own rule on the host.
      if (q.attr_string("rounding", "half_to_even") != "half_to_even") continue;
      auto target = qdq_params(q);
      if (!target) continue;
      // Grow the region backwards from the QuantizeLinear's input.
      std::set<int> region;
      std::vector<std::pair<int, int>> boundary;  // (value read by the region, DQ node)
      std::vector<int> frontier{q.inputs[0]};
      bool ok = true;
      while (ok && !frontier.empty()) {
        const int v = frontier.back();
        frontier.pop_back();
        const int p = g_.producer(v);
        if (p < 0 || dead[static_cast<std::size_t>(p)]) { ok = false; break; }
        const Node& pn = g_.nodes[static_cast<std::size_t>(p)];
        if (pn.op_type == "DequantizeLinear" && pn.domain.empty()) {
          auto dqp = qdq_params(pn);
          if (!dqp || value(pn.inputs[0]).constant || !is_quantized(value(pn.inputs[0]).dtype)) { ok = false; break; }
          if (std::find(boundary.begin(), boundary.end(), std::make_pair(v, p)) == boundary.end()) boundary.emplace_back(v, p);
        } else if (is_data_movement(pn) && value(v).dtype == DType::Float32) {
          if (region.insert(p).second) {
            for (std::size_t i : data_inputs(pn)) frontier.push_back(pn.inputs[i]);
          }
        } else {
          ok = false;
        }
      }
      if (!ok || region.empty()) continue;
      // Closure: region outputs feed only the region or QuantizeLinear nodes with the target
      // parameters.
      std::set<int> qs;
      for (int r : region) {
        for (int o : g_.nodes[static_cast<std::size_t>(r)].outputs) {
          if (o < 0) continue;
          if (is_graph_output(o)) ok = false;
          for (int c : g_.consumers(o)) {
            if (region.count(c)) continue;
            const Node& cn = g_.nodes[static_cast<std::size_t>(c)];
            auto cp = cn.op_type == "QuantizeLinear" && cn.domain.empty() ? qdq_params(cn) : std::nullopt;
            if (cp && same(*cp, *target) && !is_graph_output(cn.outputs[0])) qs.insert(c);
            else if (cp && same(*cp, *target) && g_.consumers(o).size() == 1) qs.insert(c);
            else ok = false;
          }
        }
      }
      if (!ok) continue;
      // Rewrite the boundary: read the quantized tensor, requantized where parameters differ.
      for (const auto& [v, dqi] : boundary) {
        const Node dq = g_.nodes[static_cast<std::size_t>(dqi)];
        const auto dqp = *qdq_params(dq);
        int replacement = dq.inputs[0];
        if (!same(dqp, *target)) {
          Value rv;
          rv.name = dq.name + "/requantized";
          rv.dtype = target->dtype;
          rv.shape = value(dq.inputs[0]).shape;
          rv.has_shape = value(dq.inputs[0]).has_shape;
          rv.dim_params.assign(rv.shape.size(), "");
          g_.values.push_back(std::move(rv));
          replacement = static_cast<int>(g_.values.size() - 1);
          Node rq;
          rq.name = dq.name + "/Requantize";
          rq.op_type = "Requantize";
          rq.domain = "furiosa";
          rq.index = dq.index;
          rq.inputs = {dq.inputs[0]};
          rq.outputs = {replacement};
          rq.attributes["x_scale"] = dqp.scale;
          rq.attributes["x_zero_point"] = std::int64_t{dqp.zero_point};
          rq.attributes["y_scale"] = target->scale;
          rq.attributes["y_zero_point"] = std::int64_t{target->zero_point};
          rq.attributes["y_dtype"] = std::int64_t{static_cast<int>(target->dtype)};
          g_.nodes.push_back(std::move(rq));
          dead.push_back(false);
        }
        for (int r : region) {
          for (int& in : g_.nodes[static_cast<std::size_t>(r)].inputs) {
            if (in == v) in = replacement;
          }
        }
        if (g_.consumers(v).empty() && !is_graph_output(v)) {
          dead[static_cast<std::size_t>(dqi)] = true;
          note_entry(dq, "folded", same(dqp, *target) ? "-" : "LowLevelRequantize",
                     same(dqp, *target) ? "DequantizeLinear -> data movement -> QuantizeLinear with equal "
                                          "parameters: runs on the quantized tensor"
                                        : fmt::format("DequantizeLinear (scale {}, zero point {}) -> data movement "
                                                      "-> QuantizeLinear (scale {}, zero point {}): requantized "
                                                      "on the NPU", dqp.scale, dqp.zero_point, target->scale,
                                                      target->zero_point));
        }
      }
      // The QuantizeLinear nodes disappear: their outputs become the region's outputs.
      for (int c : qs) {
        const Node& cn = g_.nodes[static_cast<std::size_t>(c)];
        const int o = cn.inputs[0];
        const int qout = cn.outputs[0];
        if (g_.consumers(o).size() == 1) {
          for (int r : region) {
            for (int& out : g_.nodes[static_cast<std::size_t>(r)].outputs) {
              if (out == o) out = qout;
            }
          }
        } else {
          for (auto& n : g_.nodes) {
            for (int& in : n.inputs) {
              if (in == qout) in = o;
            }
          }
        }
        dead[static_cast<std::size_t>(c)] = true;
        note_entry(cn, "folded", "-", "QuantizeLinear after data movement on quantized tensors");
      }
    }
    compact(dead);
  }

  void remove_dead_nodes() {
    bool changed = true;
    std::vector<bool> dead(g_.nodes.size(), false);
    while (changed) {
      changed = false;
      for (std::size_t i = g_.nodes.size(); i-- > 0;) {
        if (dead[i]) continue;
        bool used = false;
        for (int o : g_.nodes[i].outputs) {
          if (o < 0) continue;
          if (is_graph_output(o)) used = true;
          for (int c : g_.consumers(o)) used = used || !dead[static_cast<std::size_t>(c)];
        }
        if (!used) {
          dead[i] = true;
          changed = true;
          note_entry(g_.nodes[i], "removed", "-", "its outputs are not used");
        }
      }
    }
    compact(dead);
  }

  // ---- classification -------------------------------------------------------------------------
  enum class Where { Npu, Host, External, Unsupported };

  Where place(const Node& n, std::string* why) const {
    const std::string op = n.qualified_op();
    auto in_dtype = [&](std::size_t i) { return value(n.inputs[i]).dtype; };
    if (op == "QuantizeLinear" || op == "DequantizeLinear") return Where::Host;
    if (op == "QLinearConv" || op == "com.microsoft::QLinearAdd" || op == "furiosa::Requantize" ||
        op == "com.microsoft::QLinearConcat") {
      return Where::Npu;
    }
    if (op == "QLinearMatMul") {
      if (detail::is_constant_input(g_, n, 3) && value(n.inputs[3]).shape.size() == 2) return Where::Npu;
    } else if (op == "com.microsoft::QLinearGlobalAveragePool") {
      if (n.attr_int("channels_last", 0) == 0 && value(n.inputs[0]).shape.size() == 4) return Where::Npu;
    } else if (is_data_movement(n) && is_quantized(in_dtype(0))) {
      const bool ok = n.op_type != "MaxPool" ||
                      ((n.outputs.size() < 2 || n.outputs[1] < 0) && n.attr_int("storage_order", 0) == 0 &&
                       value(n.inputs[0]).shape.size() == 4);
      if (ok) return Where::Npu;
    }
    std::vector<DType> dtypes;
    for (int i : n.inputs) dtypes.push_back(i >= 0 ? value(i).dtype : DType::Float32);
    std::string reason;
    if (cpu_op_supported(n, dtypes, &reason)) return Where::External;
    if (why) *why = reason.empty() ? "no NPU kernel and no host operator for it" : reason;
    return Where::Unsupported;
  }

  void check_supported() {
    std::vector<std::string> bad;
    for (const Node& n : g_.nodes) {
      std::string why;
      if (place(n, &why) == Where::Unsupported) {
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
      } else {
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
    const Where where = place(n, nullptr);
    if (where == Where::Npu && is_nhwc_lower(n)) return emit_nhwc_lower(n);
    if (where == Where::Npu) {
      segment_open_ = true;
      seg_nodes_.insert(ni);
      emit_npu(n);
      return;
    }
    if (where == Where::Host) return emit_qdq(n);
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
      if (place(g_.nodes[static_cast<std::size_t>(c)], nullptr) != Where::Npu) return false;
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

  void emit_npu(const Node& n) {
    const std::string op = n.qualified_op();
    if (op == "QLinearConv") return emit_conv(n);
    if (op == "QLinearMatMul") return emit_matmul(n);
    if (op == "com.microsoft::QLinearAdd") return emit_add(n);
    if (op == "com.microsoft::QLinearGlobalAveragePool") return emit_gap(n);
    if (op == "com.microsoft::QLinearConcat") return emit_qconcat(n);
    if (op == "furiosa::Requantize") return emit_requantize(n);
    if (n.op_type == "MaxPool") return emit_maxpool(n);
    if (n.op_type == "Concat") return emit_concat(n);
    if (n.op_type == "Split") return emit_split(n);
    if (n.op_type == "Transpose") return emit_transpose(n);
    return emit_reshape(n);  // Reshape, Flatten, Squeeze, Unsqueeze, Identity
  }

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
    if (n.inputs.size() > 8 && n.inputs[8] >= 0) {
      const Tensor& bias = constant_input(g_, n, 8, "bias");
      if (bias.dtype() != DType::Int32 || bias.elements() != static_cast<std::int64_t>(cols)) {
        throw Error(ErrorCode::IncompatibleModel,
                    fmt::format("node '{}' (QLinearMatMul): bias must be int32 [{}]", n.name, cols));
      }
      p.bias = add_constant(bias, isa::Layout::Linear);
    }
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

  void emit_add(const Node& n) {
    const Value& av = value(n.inputs[0]);
    const Value& bv = value(n.inputs[3]);
    const Value& yv = value(n.outputs[0]);
    auto aq = scalar_quant(g_, n, 1, 2);
    auto bq = scalar_quant(g_, n, 4, 5);
    auto yq = scalar_quant(g_, n, 6, 7);
    isa::AddParams p{.a = {aq.scale, aq.zero_point}, .b = {bq.scale, bq.zero_point}, .y = {yq.scale, yq.zero_point},
                     .fixed_point = fixed_point_add(n, yv.dtype)};
    const bool lowered = yv.shape.size() == 4 && av.shape == yv.shape && bv.shape == yv.shape &&
                         (lowered_on_device(n.inputs[0]) || lowered_on_device(n.inputs[3]));
    const auto layout = lowered ? isa::Layout::LoweredNCHW : isa::Layout::Linear;
    auto a = device_value(n.inputs[0], layout, n);
    auto b = device_value(n.inputs[3], layout, n);
    for (auto* r : {&a, &b}) {
      while (r->shape.size() < yv.shape.size()) r->shape.insert(r->shape.begin(), 1);
    }
    auto y = alloc_activation(yv.dtype, yv.shape, layout);
    push_kernel({.kind = isa::KernelKind::Add, .node_name = n.name, .operator_index = n.index,
                 .inputs = {a, b}, .outputs = {y}, .params = p});
    note_entry(n, "npu", "LowLevelAdd",
               fmt::format("quantized addition ({} layout{})", isa::layout_name(layout),
                           p.fixed_point ? ", fixed-point requantization" : ""));
    produce(n.outputs[0], y);
  }

  void emit_gap(const Node& n) {
    const Value& yv = value(n.outputs[0]);
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

  Graph& g_;
  CompilerOptions opt_;
  CompiledModel out_;
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

CompiledModel compile(Graph graph, const CompilerOptions& options) {
  return Compiler(graph, options).run();
}

}  // namespace furiosa::compiler
