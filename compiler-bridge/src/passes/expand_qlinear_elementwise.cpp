// expand_qlinear_elementwise: com.microsoft QLinearSigmoid / QLinearLeakyRelu (ONNX Runtime's
// contrib ops, QOperator form) become their QDQ meaning, DequantizeLinear -> float op ->
// QuantizeLinear, and QLinearMul the float ops of its documented formula (expand_contrib_mul), so
// fuse_lookup_tables (or, for a product of two independent tensors, the host library) runs them
// with the arithmetic of the contrib-operator documentation.
#include <fmt/format.h>

#include <array>
#include <optional>

#include "capability.h"
#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

// com.microsoft QLinearMul with constant per-tensor parameters as float ops computing the
// formula of its contrib-operator documentation, which ONNX Runtime's kernel (MLAS qlmul.cpp)
// follows: C = (A - A_zp) * (B - B_zp) * (A_scale * B_scale / C_scale) + C_zp, the integer
// product exact, the ratio a float32 constant, then rounded half to even and saturated. It
// differs from dequantize-multiply-quantize in float rounding: one step on some inputs, which
// a deep network with a SiLU per conv (YOLOv8) amplifies to tens of steps.
// DequantizeLinear with scale 1 gives the exact A - A_zp; QuantizeLinear with scale 1 rounds
// and saturates. Returns false (nothing added) when a parameter is not a constant scalar.
bool expand_contrib_mul(PassContext& ctx, const Node& n, const std::vector<std::array<int, 3>>& data,
                        std::array<int, 2> y) {
  Graph& g = ctx.graph;
  const auto sa = ctx.scalar_constant(data[0][1]), sb = ctx.scalar_constant(data[1][1]), sc = ctx.scalar_constant(y[0]);
  const auto zc = y[1] >= 0 ? ctx.scalar_constant(y[1]) : std::optional<float>(0.0f);
  if (!sa || !sb || !sc || !zc || !(*sc > 0)) return false;
  const float ratio = *sa * *sb / *sc;  // float32 arithmetic, as the kernel computes it
  const int one = ctx.float_scalar_value("furiosa_one_f32", 1.0f);
  auto float_value = [&](const std::string& suffix) {
    Value f;
    f.name = n.name + "/" + suffix;
    f.dtype = DType::Float32;
    return ctx.add_value(std::move(f));
  };
  auto add_node = [&](const std::string& op, const std::string& suffix, std::vector<int> inputs, int output) {
    Node m;
    m.name = n.name + "/" + suffix;
    m.op_type = op;
    m.index = n.index;
    m.inputs = std::move(inputs);
    m.outputs = {output};
    g.nodes.push_back(std::move(m));
    return output;
  };
  std::vector<int> centred;
  for (const auto& [x, scale, zp] : data) {
    centred.push_back(add_node("DequantizeLinear", fmt::format("DequantizeLinear_{}", centred.size()),
                               {x, one, zp >= 0 ? zp : ctx.zero_point_value(ctx.value(x).dtype)},
                               float_value(fmt::format("centred_{}", centred.size()))));
  }
  const int product = add_node("Mul", "Mul_integers", {centred[0], centred[1]}, float_value("product"));
  const int scaled =
      add_node("Mul", "Mul_ratio", {product, ctx.float_scalar_value(n.name + "/ratio", ratio)}, float_value("scaled"));
  const int shifted = add_node("Add", "Add_zero_point", {scaled, ctx.float_scalar_value(n.name + "/C_zero_point", *zc)},
                               float_value("shifted"));
  const DType out = y[1] >= 0 ? ctx.value(y[1]).dtype : DType::UInt8;  // C's type is its zero point's
  add_node("QuantizeLinear", "QuantizeLinear", {shifted, one, ctx.zero_point_value(out)}, n.outputs[0]);
  return true;
}

// The quantized tensor that value `v` is an element-wise function of: followed back through
// com.microsoft QLinearSigmoid / QLinearLeakyRelu, furiosa::Requantize, and QuantizeLinear of
// float table ops (is_table_op, one non-constant input) of a DequantizeLinear. `v` itself when
// it is not such a function.
int elementwise_root(const PassContext& ctx, int v) {
  const Graph& g = ctx.graph;
  for (std::size_t guard = 0; guard <= g.nodes.size(); ++guard) {
    const int p = v >= 0 ? g.producer(v) : -1;
    if (p < 0) return v;
    const Node& pn = g.nodes[static_cast<std::size_t>(p)];
    if ((pn.domain == "com.microsoft" && (pn.op_type == "QLinearSigmoid" || pn.op_type == "QLinearLeakyRelu")) ||
        (pn.domain == "furiosa" && pn.op_type == "Requantize")) {
      v = pn.inputs[0];
      continue;
    }
    if (!pn.domain.empty() || pn.op_type != "QuantizeLinear") return v;
    int u = pn.inputs[0];
    for (std::size_t step = 0; step <= g.nodes.size(); ++step) {
      const int pu = u >= 0 ? g.producer(u) : -1;
      if (pu < 0) return v;
      const Node& un = g.nodes[static_cast<std::size_t>(pu)];
      if (un.domain.empty() && un.op_type == "DequantizeLinear") {
        u = -1;
        v = un.inputs[0];
        break;
      }
      if (!is_table_op(un)) return v;
      int next = -1;
      for (int in : un.inputs) {
        if (in < 0 || ctx.value(in).constant) continue;
        if (next >= 0) return v;  // two varying inputs: not a function of one tensor
        next = in;
      }
      if (next < 0) return v;
      u = next;
    }
    if (u >= 0) return v;
  }
  return v;
}

void run(PassContext& ctx) {
  Graph& g = ctx.graph;
  const std::size_t count = g.nodes.size();
  std::vector<bool> dead(count, false);
  for (std::size_t i = 0; i < count; ++i) {
    const Node n = g.nodes[i];
    if (n.domain != "com.microsoft") continue;
    // (data, scale, zero point) input triples, then the output's scale and zero point.
    std::vector<std::array<int, 3>> data;
    std::array<int, 2> y{};
    std::string float_op;
    if (n.op_type == "QLinearSigmoid" || n.op_type == "QLinearLeakyRelu") {
      if (n.inputs.size() < 4) continue;
      data.push_back({n.inputs[0], n.inputs[1], n.inputs.size() > 2 ? n.inputs[2] : -1});
      y = {n.inputs[3], n.inputs.size() > 4 ? n.inputs[4] : -1};
      float_op = n.op_type == "QLinearSigmoid" ? "Sigmoid" : "LeakyRelu";
    } else if (n.op_type == "QLinearMul") {
      if (n.inputs.size() < 7) continue;
      // A product of two independent tensors stays one node for LowLevelMul; a tensor times a
      // function of itself (SiLU's x * sigmoid(x)) is expanded for the table fusion.
      if (elementwise_root(ctx, n.inputs[0]) != elementwise_root(ctx, n.inputs[3]) &&
          binary_claim(g, n, {0, 3}, {{1, 2}, {4, 5}, {6, 7}})) {
        continue;
      }
      data.push_back({n.inputs[0], n.inputs[1], n.inputs[2]});
      data.push_back({n.inputs[3], n.inputs[4], n.inputs[5]});
      y = {n.inputs[6], n.inputs.size() > 7 ? n.inputs[7] : -1};
      float_op = "Mul";
    } else {
      continue;
    }
    // A QDQ int8 Mul that ONNX Runtime runs unfused keeps the literal DequantizeLinear -> Mul ->
    // QuantizeLinear below instead of the contrib formula (kDequantizedArithmetic).
    const bool dequantized = n.attr_int(std::string(kDequantizedArithmetic), 0) != 0;
    if (float_op == "Mul" && !dequantized && expand_contrib_mul(ctx, n, data, y)) {
      dead[i] = true;
      dead.resize(g.nodes.size(), false);
      continue;
    }
    Node op;
    op.name = n.name;
    op.op_type = float_op;
    op.index = n.index;
    if (float_op == "LeakyRelu") {
      op.attributes["alpha"] = n.attributes.count("alpha") ? n.attributes.at("alpha") : Attribute{0.01f};
    }
    for (const auto& [x, scale, zp] : data) {
      Value f;
      f.name = fmt::format("{}/{}_dequantized", n.name, ctx.value(x).name);
      f.dtype = DType::Float32;
      const int fid = ctx.add_value(std::move(f));
      Node dq;
      dq.name = fmt::format("{}/DequantizeLinear_{}", n.name, op.inputs.size());
      dq.op_type = "DequantizeLinear";
      dq.index = n.index;
      dq.inputs = {x, scale, zp >= 0 ? zp : ctx.zero_point_value(ctx.value(x).dtype)};
      dq.outputs = {fid};
      g.nodes.push_back(std::move(dq));
      op.inputs.push_back(fid);
    }
    Value f;
    f.name = n.name + "/float";
    f.dtype = DType::Float32;
    op.outputs = {ctx.add_value(std::move(f))};
    Node q;
    q.name = n.name + "/QuantizeLinear";
    q.op_type = "QuantizeLinear";
    q.index = n.index;
    q.inputs = {op.outputs[0], y[0], y[1] >= 0 ? y[1] : ctx.zero_point_value(DType::UInt8)};
    q.outputs = {n.outputs[0]};
    g.nodes.push_back(std::move(op));
    g.nodes.push_back(std::move(q));
    dead[i] = true;
    dead.resize(g.nodes.size(), false);
  }
  ctx.compact(dead);
}

}  // namespace

const Pass kExpandQlinearElementwise{"expand_qlinear_elementwise", run};

}  // namespace furiosa::compiler::detail
