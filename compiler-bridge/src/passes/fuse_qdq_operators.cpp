// fuse_qdq_operators: the QDQ encoding DequantizeLinear inputs -> Conv / MatMul / Add / Mul / Sub /
// GlobalAveragePool / Softmax -> QuantizeLinear becomes the QOperator node with the same
// parameters (QLinearConv, QLinearMatMul, QLinearAdd, QLinearMul, furiosa::QLinearSub,
// QLinearGlobalAveragePool, furiosa::QLinearSoftmax), as ONNX Runtime's QDQ transformer does;
// com.microsoft QLinearSoftmax of QOperator models becomes furiosa::QLinearSoftmax. Groups that
// do not fit stay float and run as host operators.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <set>

#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

// The live DequantizeLinear node producing value `id`, or -1.
int dq_producer(const PassContext& ctx, int id, const std::vector<bool>& dead) {
  const Graph& g = ctx.graph;
  const int p = id >= 0 ? g.producer(id) : -1;
  if (p < 0 || dead[static_cast<std::size_t>(p)]) return -1;
  const Node& n = g.nodes[static_cast<std::size_t>(p)];
  return n.op_type == "DequantizeLinear" && n.domain.empty() ? p : -1;
}

// (quantized value, scale, zero point) read by DequantizeLinear node `dq`.
std::array<int, 3> dq_operands(PassContext& ctx, const Node& dq) {
  const int zp =
      dq.inputs.size() > 2 && dq.inputs[2] >= 0 ? dq.inputs[2] : ctx.zero_point_value(ctx.value(dq.inputs[0]).dtype);
  return {dq.inputs[0], dq.inputs[1], zp};
}

// True when bias DequantizeLinear `db` has scale x_scale * w_scale[c] (float32) and zero point
// 0, i.e. its int32 values are exactly what QLinearConv's B means.
bool bias_scale_matches(const PassContext& ctx, const Node& db, const Node& dx, const Node& dw) {
  const Graph& g = ctx.graph;
  if (!is_constant_input(g, db, 1) || !is_constant_input(g, dx, 1) || !is_constant_input(g, dw, 1)) return false;
  const auto bs = float_values(constant_input(g, db, 1, "scale"));
  const auto xs = float_values(constant_input(g, dx, 1, "scale"));
  const auto ws = float_values(constant_input(g, dw, 1, "scale"));
  if (xs.size() != 1) return false;
  if (is_constant_input(g, db, 2)) {
    for (auto z : int_values(constant_input(g, db, 2, "zero point"))) {
      if (z != 0) return false;
    }
  }
  for (std::size_t c = 0; c < bs.size(); ++c) {
    const float want = xs[0] * ws[ws.size() == 1 ? 0 : std::min(c, ws.size() - 1)];
    if (std::abs(bs[c] - want) > 1e-6f * std::abs(want)) return false;
  }
  return bs.size() == 1 || bs.size() == ws.size();
}

// The values written by the int8 QuantizeLinear -> DequantizeLinear pairs ONNX Runtime 1.30 moves
// to uint8 on x86-64 before fusing (QDQS8ToU8Transformer,
// onnxruntime/core/optimizer/qdq_transformer/qdq_s8_to_u8.cc): a Q with explicit zero point
// whose output is not a graph output and feeds exactly one node, a DQ with explicit zero point,
// both zero points constant one-element int8 of equal value. ORT first gives every consumer of
// a DequantizeLinear its own copy (EnsureUniqueDQForNodeUnit), so a DQ read by more than one
// node leaves its Q with several consumers: such a pair stays int8 (a DQ that is a graph output
// and read by no node still moves).
// Read before any fusion.
std::set<int> s8_to_u8_pairs(const PassContext& ctx) {
  const Graph& g = ctx.graph;
  std::set<int> out;
  auto int8_zp = [&](int id) -> std::optional<float> {
    if (id < 0 || ctx.value(id).dtype != DType::Int8 || !ctx.value(id).constant)
      return std::nullopt;
    return ctx.scalar_constant(id);
  };
  for (const Node& q : g.nodes) {
    if (q.op_type != "QuantizeLinear" || !q.domain.empty() || q.inputs.size() != 3 ||
        q.outputs.size() != 1)
      continue;
    const auto cons = g.consumers(q.outputs[0]);
    if (cons.size() != 1 || ctx.is_graph_output(q.outputs[0])) continue;
    const Node& dq = g.nodes[static_cast<std::size_t>(cons[0])];
    if (dq.op_type != "DequantizeLinear" || !dq.domain.empty() || dq.inputs.size() != 3) continue;
    if (dq.outputs.size() != 1 || g.consumers(dq.outputs[0]).size() > 1) continue;
    const auto zq = int8_zp(q.inputs[2]), zd = int8_zp(dq.inputs[2]);
    if (zq && zd && *zq == *zd) out.insert(q.outputs[0]);
  }
  return out;
}

// The QuantizeLinear (per tensor) that is the only reader of `op`'s output, or -1: the Q end of
// a DequantizeLinear -> op -> QuantizeLinear group.
int sole_quantize_consumer(const PassContext& ctx, const Node& op) {
  const Graph& g = ctx.graph;
  const auto cons = g.consumers(op.outputs[0]);
  if (cons.size() != 1 || ctx.is_graph_output(op.outputs[0])) return -1;
  const Node& q = g.nodes[static_cast<std::size_t>(cons[0])];
  return q.op_type == "QuantizeLinear" && q.domain.empty() && ctx.qdq_params(q) ? cons[0] : -1;
}

// QuantizeLinear `q`'s zero point, or a uint8 0 where the input is omitted (the spec's default).
int quantize_zero_point(PassContext& ctx, const Node& q) {
  return q.inputs.size() > 2 && q.inputs[2] >= 0 ? q.inputs[2] : ctx.zero_point_value(DType::UInt8);
}

// DequantizeLinear (8-bit activation, per tensor) -> Softmax -> QuantizeLinear of the same type
// becomes furiosa::QLinearSoftmax, as ONNX Runtime fuses it (its unary QDQ selector and
// QLinearSoftmax): its lookup table and summation round differently from the float Softmax. An
// int8 group runs as ORT runs it: uint8 when both of its pairs moved (s8_to_u8_pairs), int8 when
// neither did, and literally (not fused) when one did.
void fuse_softmax(PassContext& ctx, std::size_t i, const std::set<int>& to_u8, std::int64_t opset,
                  std::vector<bool>& dead) {
  Graph& g = ctx.graph;
  const Node op = g.nodes[i];
  const int qi = op.inputs.empty() ? -1 : sole_quantize_consumer(ctx, op);
  if (qi < 0) return;
  const Node& q = g.nodes[static_cast<std::size_t>(qi)];
  // The TFLite importer's SOFTMAX (a QuantizeLinear rounding half away from zero) is TFLite's
  // float kernel, not ORT's QLinearSoftmax.
  if (q.attributes.count("rounding") != 0) return;
  const int dqi = dq_producer(ctx, op.inputs[0], dead);
  if (dqi < 0) return;
  const Node& dx = g.nodes[static_cast<std::size_t>(dqi)];
  if (!ctx.qdq_params(dx) || ctx.value(dx.inputs[0]).constant.has_value()) return;
  const DType xt = ctx.value(dx.inputs[0]).dtype, yt = ctx.value(q.outputs[0]).dtype;
  if (xt != yt || (xt != DType::UInt8 && xt != DType::Int8)) return;
  const auto x = dq_operands(ctx, dx);
  const int moved = static_cast<int>(to_u8.count(x[0]) + to_u8.count(q.outputs[0]));
  if (xt == DType::Int8 && moved == 1) return;  // ORT: types differ after the move, float32
  Node fused;
  fused.name = op.name;
  fused.index = op.index;
  fused.op_type = "QLinearSoftmax";
  fused.domain = "furiosa";
  fused.outputs = {q.outputs[0]};
  fused.inputs = {x[0], x[1], x[2], q.inputs[1], quantize_zero_point(ctx, q)};
  const auto axis = op.attributes.find("axis");
  fused.attributes["axis"] =
      axis != op.attributes.end() ? axis->second : Attribute{std::int64_t{opset < 13 ? 1 : -1}};
  fused.attributes["opset"] = opset;
  if (xt == DType::Int8 && moved == 2) fused.attributes[std::string(kQdqS8ToU8)] = std::int64_t{1};
  g.nodes[i] = std::move(fused);
  dead[static_cast<std::size_t>(qi)] = true;
  ctx.note_entry(q, "folded", g.nodes[i].op_type,
                 "QDQ group fused into " + g.nodes[i].qualified_op());
}

void run(PassContext& ctx) {
  Graph& g = ctx.graph;
  const std::set<int> to_u8 = s8_to_u8_pairs(ctx);
  std::vector<bool> dead(g.nodes.size(), false);
  const std::size_t count = g.nodes.size();
  const auto opset = g.opsets.count("") ? g.opsets.at("") : std::int64_t{13};
  for (std::size_t i = 0; i < count; ++i) {
    const Node op = g.nodes[i];
    if (op.domain == "com.microsoft" && op.op_type == "QLinearSoftmax") {
      // QOperator models: the host library's furiosa::QLinearSoftmax is ORT's kernel.
      g.nodes[i].domain = "furiosa";
      continue;
    }
    if (!op.domain.empty() || op.outputs.size() != 1) continue;
    const std::string t = op.op_type;
    if (t == "Softmax") {
      fuse_softmax(ctx, i, to_u8, opset, dead);
      continue;
    }
    if (t != "Conv" && t != "MatMul" && t != "Add" && t != "Mul" && t != "Sub" && t != "GlobalAveragePool") continue;
    const int qi = sole_quantize_consumer(ctx, op);
    if (qi < 0) continue;
    const Node& q = g.nodes[static_cast<std::size_t>(qi)];
    const bool binary = t == "Add" || t == "Mul" || t == "Sub";
    const std::size_t data_inputs = t == "Conv" || t == "MatMul" || binary ? 2 : 1;
    std::vector<int> dqs;
    for (std::size_t k = 0; k < data_inputs && k < op.inputs.size(); ++k)
      dqs.push_back(dq_producer(ctx, op.inputs[k], dead));
    if (dqs.size() != data_inputs || std::count(dqs.begin(), dqs.end(), -1)) continue;
    const Node& dx = g.nodes[static_cast<std::size_t>(dqs[0])];
    if (!ctx.qdq_params(dx)) continue;  // per-tensor
    // The data input is an activation (run time); a binary op may take a quantized constant on
    // either side (ONNX Runtime's QDQ selectors do not ask which one is constant, e.g. YOLO's
    // Add(anchor_points, rb) in a quantized decode head).
    const bool x_constant = ctx.value(dx.inputs[0]).constant.has_value();
    if (x_constant &&
        (!binary ||
         ctx.value(g.nodes[static_cast<std::size_t>(dqs[1])].inputs[0]).constant.has_value()))
      continue;
    const int yzp = quantize_zero_point(ctx, q);
    Node fused;
    fused.name = op.name;
    fused.index = op.index;
    fused.attributes = op.attributes;
    fused.outputs = {q.outputs[0]};
    auto x = dq_operands(ctx, dx);
    if (t == "GlobalAveragePool") {
      fused.op_type = "QLinearGlobalAveragePool";
      fused.domain = "com.microsoft";
      fused.attributes["channels_last"] = std::int64_t{0};
      fused.inputs = {x[0], x[1], x[2], q.inputs[1], yzp};
    } else {
      const Node& dw = g.nodes[static_cast<std::size_t>(dqs[1])];
      auto w = dq_operands(ctx, dw);
      if (binary) {
        // DQ, DQ -> Mul -> Q is what ONNX Runtime runs as QLinearMul (its QDQ fusion), with the
        // contrib formula of expand_qlinear_elementwise(). ONNX Runtime does not fuse Sub: it
        // runs DQ, Sub and Q in float32, which furiosa::QLinearSub (LowLevelSub) computes
        // exactly, in the QLinearAdd operand layout.
        if (!ctx.qdq_params(dw)) continue;
        fused.op_type = t == "Add" ? "QLinearAdd" : t == "Mul" ? "QLinearMul" : "QLinearSub";
        fused.domain = t == "Sub" ? "furiosa" : "com.microsoft";
        fused.inputs = {x[0], x[1], x[2], w[0], w[1], w[2], q.inputs[1], yzp};
        // An int8 group as ONNX Runtime 1.30 runs it on x86-64: when all three of its Q -> DQ
        // pairs move to uint8 (s8_to_u8_pairs) it is fused as a uint8 QLinearAdd / QLinearMul
        // (AddFormula::MlasRatiosUint8; the contrib Mul formula does not change under the
        // shift); when none does, as an int8 one; when only some do, the types no longer match
        // and ORT runs DequantizeLinear, the float op and QuantizeLinear in float32, which round
        // differently (kDequantizedArithmetic: AddFormula::Dequantized, MulParams::dequantized,
        // expand_qlinear_elementwise's literal Mul).
        if (t != "Sub" && ctx.value(q.outputs[0]).dtype == DType::Int8) {
          const int moved =
              static_cast<int>(to_u8.count(x[0]) + to_u8.count(w[0]) + to_u8.count(q.outputs[0]));
          if (moved == 3 && t == "Add") fused.attributes[std::string(kQdqS8ToU8)] = std::int64_t{1};
          if (moved != 0 && moved != 3)
            fused.attributes[std::string(kDequantizedArithmetic)] = std::int64_t{1};
        }
      } else {
        if (!ctx.value(dw.inputs[0]).constant) continue;  // weights must be constants
        fused.op_type = t == "Conv" ? "QLinearConv" : "QLinearMatMul";
        fused.inputs = {x[0], x[1], x[2], w[0], w[1], w[2], q.inputs[1], yzp};
        if (t == "Conv" && op.inputs.size() > 2 && op.inputs[2] >= 0) {
          // The bias must be DequantizeLinear(int32 B, x_scale * w_scale, 0).
          const int db = dq_producer(ctx, op.inputs[2], dead);
          if (db < 0 || ctx.value(g.nodes[static_cast<std::size_t>(db)].inputs[0]).dtype != DType::Int32) continue;
          if (!bias_scale_matches(ctx, g.nodes[static_cast<std::size_t>(db)], dx, dw)) continue;
          fused.inputs.push_back(g.nodes[static_cast<std::size_t>(db)].inputs[0]);
        }
      }
    }
    g.nodes[i] = std::move(fused);
    dead[static_cast<std::size_t>(qi)] = true;
    ctx.note_entry(q, "folded", g.nodes[i].op_type, "QDQ group fused into " + g.nodes[i].qualified_op());
  }
  ctx.compact(dead);
}

}  // namespace

const Pass kFuseQdqOperators{"fuse_qdq_operators", run};

}  // namespace furiosa::compiler::detail
