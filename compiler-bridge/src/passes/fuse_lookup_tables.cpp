// fuse_lookup_tables: a QuantizeLinear whose input is a float function of ONE quantized tensor x,
// computed by element-wise ops (Sigmoid, Mul, Clip, ...) with scalar constants, DequantizeLinear of
// x, and QuantizeLinear -> DequantizeLinear pairs in between (as in a QDQ SiLU x * sigmoid(x)),
// becomes one furiosa::Requantize with a 256-entry table (host/lookup_table.h): the region is
// evaluated once, by the host operator library, on all 256 values of x, so the table equals the
// float graph's result for every input, rounded exactly as its QuantizeLinear rounds (the usual
// NPU technique for activations).
#include <fmt/format.h>

#include <map>
#include <set>

#include "furiosa/host/cpu_ops.h"
#include "furiosa/host/lookup_table.h"
#include "pass.h"

namespace furiosa::compiler::detail {
namespace {

void run(PassContext& ctx) {
  Graph& g = ctx.graph;
  std::vector<bool> dead(g.nodes.size(), false);
  // Last QuantizeLinear first, so a function with inner Q/DQ pairs (SiLU's quantized sigmoid)
  // becomes one table rather than a table for its first part.
  for (std::size_t qi = g.nodes.size(); qi-- > 0;) {
    if (dead[qi]) continue;
    const Node& q = g.nodes[qi];
    if (q.op_type != "QuantizeLinear" || !q.domain.empty() || !ctx.qdq_params(q)) continue;
    if (q.attr_string("rounding", "half_to_even") != "half_to_even") continue;
    // Grow the region backwards from the QuantizeLinear.
    std::set<int> region;  // node ids, evaluated in graph order
    int source = -1;       // the quantized tensor x
    bool ok = true, has_function = false;
    std::vector<int> frontier{q.inputs[0]};
    while (ok && !frontier.empty()) {
      const int v = frontier.back();
      frontier.pop_back();
      const int p = g.producer(v);
      if (p < 0 || dead[static_cast<std::size_t>(p)] || region.count(p)) {
        ok = p >= 0 && region.count(p);
        continue;
      }
      const Node& pn = g.nodes[static_cast<std::size_t>(p)];
      if (pn.domain.empty() && pn.op_type == "DequantizeLinear") {
        const auto params = ctx.qdq_params(pn);
        const int x = pn.inputs[0];
        const Value& xv = ctx.value(x);
        if (!params || xv.constant || !is_quantized(xv.dtype)) { ok = false; break; }
        const int xp = g.producer(x);
        const bool inner_pair = xp >= 0 && g.nodes[static_cast<std::size_t>(xp)].op_type == "QuantizeLinear" &&
                                g.nodes[static_cast<std::size_t>(xp)].domain.empty() && !ctx.is_graph_output(x) &&
                                ctx.value(g.nodes[static_cast<std::size_t>(xp)].inputs[0]).dtype == DType::Float32;
        region.insert(p);
        if (inner_pair && x != source) {
          region.insert(xp);  // Q -> DQ inside the function: evaluated as written
          frontier.push_back(g.nodes[static_cast<std::size_t>(xp)].inputs[0]);
        } else if (source < 0 || source == x) {
          source = x;
        } else {
          ok = false;
        }
      } else if (is_table_op(pn) && pn.outputs.size() == 1) {
        region.insert(p);
        has_function = true;
        for (int in : pn.inputs) {
          if (in < 0) continue;
          const Value& iv = ctx.value(in);
          if (iv.constant) {
            if (iv.constant->elements() != 1) ok = false;  // per-channel constants: no single table
          } else if (iv.dtype != DType::Float32) {
            ok = false;
          } else {
            frontier.push_back(in);
          }
        }
      } else {
        ok = false;
      }
    }
    if (!ok || !has_function || source < 0) continue;
    // Closure: values made inside the region are read only inside it (DequantizeLinear nodes
    // of x may have other readers: they stay for those).
    for (int r : region) {
      const Node& rn = g.nodes[static_cast<std::size_t>(r)];
      if (rn.op_type == "DequantizeLinear" && rn.inputs[0] == source) continue;
      for (int o : rn.outputs) {
        if (o < 0) continue;
        if (ctx.is_graph_output(o)) ok = false;
        for (int c : g.consumers(o)) ok = ok && (region.count(c) || c == static_cast<int>(qi));
      }
    }
    if (!ok) continue;
    // Evaluate the region on all 256 values of x (the byte pattern = the table's index).
    const DType xd = ctx.value(source).dtype;
    Tensor all(xd, {256});
    for (int b = 0; b < 256; ++b) all.bytes()[static_cast<std::size_t>(b)] = static_cast<std::byte>(b);
    std::map<int, Tensor> known;
    known.emplace(source, all);
    std::vector<int> order(region.begin(), region.end());
    order.push_back(static_cast<int>(qi));
    bool evaluated = true;
    for (int r : order) {  // node ids are in topological order
      const Node& rn = g.nodes[static_cast<std::size_t>(r)];
      std::vector<const Tensor*> ins;
      for (int in : rn.inputs) {
        if (in < 0) ins.push_back(nullptr);
        else if (ctx.value(in).constant) ins.push_back(&*ctx.value(in).constant);
        else if (auto it = known.find(in); it != known.end()) ins.push_back(&it->second);
        else evaluated = false;
      }
      if (!evaluated) break;
      // Scalar constants of any rank broadcast against [256]; a constant of rank > 1 would make
      // the result rank > 1 with the same 256 elements, which is still the table.
      auto outs = run_cpu_op(rn, ins);
      known.insert_or_assign(rn.outputs[0], std::move(outs.at(0)));
    }
    if (!evaluated) continue;
    const Tensor& y = known.at(q.outputs[0]);
    if (y.elements() != 256) continue;
    // Element b of y is the result for the input byte b (the table's own order).
    const host::LookupTable table = host::build_lookup_table(xd, y.dtype(), [&](std::int32_t x) {
      const auto b = static_cast<std::uint8_t>(x);
      return host::lookup_table_input(y.dtype(), static_cast<std::uint8_t>(y.bytes()[b]));
    });
    const Node& first_dq = [&]() -> const Node& {
      for (int r : region) {
        const Node& rn = g.nodes[static_cast<std::size_t>(r)];
        if (rn.op_type == "DequantizeLinear" && rn.inputs[0] == source) return rn;
      }
      return g.nodes[static_cast<std::size_t>(*region.begin())];
    }();
    const auto xq = *ctx.qdq_params(first_dq);
    const auto yq = *ctx.qdq_params(q);
    std::string ops;
    for (int r : region) {
      const Node& rn = g.nodes[static_cast<std::size_t>(r)];
      if (rn.op_type != "DequantizeLinear" && rn.op_type != "QuantizeLinear") {
        ops += (ops.empty() ? "" : ", ") + rn.op_type;
      }
    }
    Node rq;
    rq.name = q.name + "/LookupTable";
    rq.op_type = "Requantize";
    rq.domain = "furiosa";
    rq.index = q.index;
    rq.inputs = {source};
    rq.outputs = {q.outputs[0]};
    rq.attributes["x_scale"] = xq.scale;
    rq.attributes["x_zero_point"] = std::int64_t{xq.zero_point};
    rq.attributes["y_scale"] = yq.scale;
    rq.attributes["y_zero_point"] = std::int64_t{yq.zero_point};
    rq.attributes["y_dtype"] = std::int64_t{static_cast<int>(yq.dtype)};
    rq.attributes["table"] = std::vector<std::int64_t>(table.begin(), table.end());
    for (int r : region) {
      const Node& rn = g.nodes[static_cast<std::size_t>(r)];
      if (rn.op_type == "DequantizeLinear" && rn.inputs[0] == source) continue;  // may have other readers
      dead[static_cast<std::size_t>(r)] = true;
      ctx.note_entry(rn, "folded", "LowLevelRequantize", fmt::format("part of the 256-entry table of {}", ops));
    }
    ctx.note_entry(
        q, "folded", "LowLevelRequantize",
        fmt::format("element-wise {} on {} computed at compile time as a 256-entry table", ops, dtype_name(xd)));
    g.nodes[qi] = std::move(rq);
  }
  ctx.compact(dead);
}

}  // namespace

const Pass kFuseLookupTables{"fuse_lookup_tables", run};

}  // namespace furiosa::compiler::detail
