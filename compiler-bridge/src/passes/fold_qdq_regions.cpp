// fold_qdq_regions: DequantizeLinear -> data-movement ops (and Pad) -> QuantizeLinear runs on the
// quantized tensors, with a furiosa::Requantize where an input's parameters differ from the
// target's (exactly DequantizeLinear then QuantizeLinear in float32), so the result equals the
// float graph's: max and data movement commute with the per-tensor affine maps.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "capability.h"
#include "furiosa/host/quantize.h"
#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

// An ONNX Pad of a float tensor that a QDQ region may contain: constant pads (and axes), and a
// constant_value that is absent or a constant scalar (it is requantized with the region).
bool is_float_pad(const PassContext& ctx, const Node& n) {
  if (n.op_type != "Pad" || !n.domain.empty() || n.inputs.size() < 2 || n.inputs[1] < 0 ||
      !ctx.value(n.inputs[1]).constant || n.attributes.count("pads")) {
    return false;
  }
  if (n.inputs.size() > 3 && n.inputs[3] >= 0 && !ctx.value(n.inputs[3]).constant) return false;
  return n.inputs.size() < 3 || n.inputs[2] < 0 || ctx.scalar_constant(n.inputs[2]).has_value();
}

void run(PassContext& ctx) {
  Graph& g = ctx.graph;
  const int original_count = static_cast<int>(g.nodes.size());
  std::vector<bool> dead(g.nodes.size(), false);
  for (int qi = 0; qi < original_count; ++qi) {
    const Node& q = g.nodes[static_cast<std::size_t>(qi)];
    if (dead[static_cast<std::size_t>(qi)] || q.op_type != "QuantizeLinear" || !q.domain.empty()) continue;
    // A QuantizeLinear with TFLite's rounding (graph.h) keeps its own rule on the host.
    if (q.attr_string("rounding", "half_to_even") != "half_to_even") continue;
    auto target = ctx.qdq_params(q);
    if (!target) continue;
    // Grow the region backwards from the QuantizeLinear's input.
    std::set<int> region;
    std::vector<std::pair<int, int>> boundary;  // (value read by the region, DQ node)
    std::vector<int> frontier{q.inputs[0]};
    bool ok = true;
    while (ok && !frontier.empty()) {
      const int v = frontier.back();
      frontier.pop_back();
      const int p = g.producer(v);
      if (p < 0 || dead[static_cast<std::size_t>(p)]) { ok = false; break; }
      const Node& pn = g.nodes[static_cast<std::size_t>(p)];
      if (pn.op_type == "DequantizeLinear" && pn.domain.empty()) {
        auto dqp = ctx.qdq_params(pn);
        if (!dqp || ctx.value(pn.inputs[0]).constant || !is_quantized(ctx.value(pn.inputs[0]).dtype)) {
          ok = false;
          break;
        }
        if (std::find(boundary.begin(), boundary.end(), std::make_pair(v, p)) == boundary.end()) {
          boundary.emplace_back(v, p);
        }
      } else if ((is_data_movement(pn) || is_float_pad(ctx, pn)) && ctx.value(v).dtype == DType::Float32) {
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
      for (int o : g.nodes[static_cast<std::size_t>(r)].outputs) {
        if (o < 0) continue;
        if (ctx.is_graph_output(o)) ok = false;
        for (int c : g.consumers(o)) {
          if (region.count(c)) continue;
          const Node& cn = g.nodes[static_cast<std::size_t>(c)];
          auto cp = cn.op_type == "QuantizeLinear" && cn.domain.empty() ? ctx.qdq_params(cn) : std::nullopt;
          if (cp && ctx.same(*cp, *target) && !ctx.is_graph_output(cn.outputs[0])) qs.insert(c);
          else if (cp && ctx.same(*cp, *target) && g.consumers(o).size() == 1) qs.insert(c);
          else ok = false;
        }
      }
    }
    if (!ok) continue;
    // Rewrite the boundary: read the quantized tensor, requantized where parameters differ.
    for (const auto& [v, dqi] : boundary) {
      const Node dq = g.nodes[static_cast<std::size_t>(dqi)];
      const auto dqp = *ctx.qdq_params(dq);
      int replacement = dq.inputs[0];
      if (!ctx.same(dqp, *target)) {
        Value rv;
        rv.name = dq.name + "/requantized";
        rv.dtype = target->dtype;
        rv.shape = ctx.value(dq.inputs[0]).shape;
        rv.has_shape = ctx.value(dq.inputs[0]).has_shape;
        rv.dim_params.assign(rv.shape.size(), "");
        g.values.push_back(std::move(rv));
        replacement = static_cast<int>(g.values.size() - 1);
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
        g.nodes.push_back(std::move(rq));
        dead.push_back(false);
      }
      for (int r : region) {
        for (int& in : g.nodes[static_cast<std::size_t>(r)].inputs) {
          if (in == v) in = replacement;
        }
      }
      if (g.consumers(v).empty() && !ctx.is_graph_output(v)) {
        dead[static_cast<std::size_t>(dqi)] = true;
        ctx.note_entry(dq, "folded", ctx.same(dqp, *target) ? "-" : "LowLevelRequantize",
                       ctx.same(dqp, *target)
                           ? "DequantizeLinear -> data movement -> QuantizeLinear with equal "
                             "parameters: runs on the quantized tensor"
                           : fmt::format("DequantizeLinear (scale {}, zero point {}) -> data movement "
                                         "-> QuantizeLinear (scale {}, zero point {}): requantized "
                                         "on the NPU",
                                         dqp.scale, dqp.zero_point, target->scale, target->zero_point));
      }
    }
    // A Pad's constant_value becomes the target quantization of it (0 when absent): inside the
    // region every tensor carries the target parameters, so Q(Pad(x, c)) = Pad(Q(x), Q(c)).
    for (int r : region) {
      Node& rn = g.nodes[static_cast<std::size_t>(r)];
      if (rn.op_type != "Pad") continue;
      const float c = rn.inputs.size() > 2 && rn.inputs[2] >= 0 ? *ctx.scalar_constant(rn.inputs[2]) : 0.0f;
      const auto range = host::quant_range(target->dtype);
      Value qv;
      qv.name = rn.name + "/constant_value_quantized";
      qv.dtype = target->dtype;
      qv.has_shape = true;
      qv.constant = Tensor(target->dtype, {});
      const std::int32_t q = host::quantize_value(c / target->scale, target->zero_point, std::get<0>(range),
                                                  std::get<1>(range));
      qv.constant->bytes()[0] = static_cast<std::byte>(static_cast<std::uint8_t>(q & 0xff));
      if (rn.inputs.size() < 3) rn.inputs.resize(3, -1);
      rn.inputs[2] = ctx.add_value(std::move(qv));
    }
    // The QuantizeLinear nodes disappear: their outputs become the region's outputs.
    for (int c : qs) {
      const Node& cn = g.nodes[static_cast<std::size_t>(c)];
      const int o = cn.inputs[0];
      const int qout = cn.outputs[0];
      if (g.consumers(o).size() == 1) {
        for (int r : region) {
          for (int& out : g.nodes[static_cast<std::size_t>(r)].outputs) {
            if (out == o) out = qout;
          }
        }
      } else {
        for (auto& n : g.nodes) {
          for (int& in : n.inputs) {
            if (in == qout) in = o;
          }
        }
      }
      dead[static_cast<std::size_t>(c)] = true;
      ctx.note_entry(cn, "folded", "-", "QuantizeLinear after data movement on quantized tensors");
    }
  }
  ctx.compact(dead);
}

}  // namespace

const Pass kFoldQdqRegions{"fold_qdq_regions", run};

}  // namespace furiosa::compiler::detail
