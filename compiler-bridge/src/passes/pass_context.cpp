// The helpers the passes share (pass.h), and note_entry (passes.h).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>

#include "furiosa/core/error.h"
#include "pass.h"
#include "passes.h"

namespace furiosa::compiler::detail {

void note_entry(PartitionReport& report, const Node& n, const char* placement, std::string target,
                std::string reason) {
  report.entries.push_back({n.name, n.qualified_op(), n.index, placement, std::move(target), std::move(reason)});
}

bool PassContext::is_graph_output(int id) const {
  return std::find(graph.outputs.begin(), graph.outputs.end(), id) != graph.outputs.end();
}

void PassContext::note_entry(const Node& n, const char* placement, std::string target, std::string reason) {
  detail::note_entry(report, n, placement, std::move(target), std::move(reason));
}

int PassContext::add_value(Value v) {
  graph.values.push_back(std::move(v));
  return static_cast<int>(graph.values.size() - 1);
}

void PassContext::compact(const std::vector<bool>& dead) {
  std::vector<Node> live;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!dead[i]) live.push_back(std::move(graph.nodes[i]));
  }
  std::set<int> available;
  for (int id : graph.inputs) available.insert(id);
  for (std::size_t i = 0; i < graph.values.size(); ++i) {
    if (graph.values[i].constant) available.insert(static_cast<int>(i));
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
    if (!progress)
      throw Error(ErrorCode::IncompatibleModel, "the graph has a cycle or a node reads an undefined value");
  }
  graph.nodes = std::move(sorted);
}

void PassContext::replace_uses(int from, int to) {
  for (Node& n : graph.nodes) {
    for (int& in : n.inputs) {
      if (in == from) in = to;
    }
  }
  for (int& o : graph.outputs) {
    if (o == from) o = to;
  }
}

int PassContext::graph_input(const std::string& name, const char* knob) const {
  for (int id : graph.inputs) {
    if (value(id).name == name) return id;
  }
  std::string names;
  for (int id : graph.inputs) names += (names.empty() ? "" : ", ") + value(id).name;
  throw Error(ErrorCode::IncompatibleModel,
              fmt::format("{}: the model has no input named '{}' (inputs: {})", knob, name, names),
              ErrorSubject::of_tensor(name));
}

std::optional<ScalarQuant> PassContext::qdq_params(const Node& n) const {
  try {
    auto q = scalar_quant(graph, n, 1, 2);
    if (!(n.inputs.size() > 2 && n.inputs[2] >= 0)) q.dtype = DType::UInt8;
    return q;
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::optional<float> PassContext::scalar_constant(int id) const {
  if (id < 0 || !value(id).constant || value(id).constant->elements() != 1) return std::nullopt;
  const Tensor& t = *value(id).constant;
  switch (t.dtype()) {
    case DType::Float32: return t.as<float>()[0];
    case DType::UInt8: return static_cast<float>(t.as<std::uint8_t>()[0]);
    case DType::Int8: return static_cast<float>(t.as<std::int8_t>()[0]);
    default: return std::nullopt;
  }
}

int PassContext::float_scalar_value(const std::string& name, float v) {
  if (int id = graph.find_value(name); id >= 0) return id;
  Value c;
  c.name = name;
  c.dtype = DType::Float32;
  c.has_shape = true;
  c.constant = Tensor(DType::Float32, {});
  c.constant->as<float>()[0] = v;
  return add_value(std::move(c));
}

int PassContext::zero_point_value(DType dtype) {
  Value v;
  v.name = fmt::format("furiosa_zero_point_{}", dtype_name(dtype));
  if (int id = graph.find_value(v.name); id >= 0) return id;
  v.dtype = dtype;
  v.has_shape = true;
  v.constant = Tensor(dtype, {});
  return add_value(std::move(v));
}

bool is_table_op(const Node& n) {
  static constexpr std::array<std::string_view, 19> ops = {
      "Sigmoid", "Tanh", "Exp", "Relu", "LeakyRelu", "HardSigmoid", "HardSwish", "Clip", "Mul", "Add",
      "Sub", "Div", "Neg", "Abs", "Min", "Max", "Pow", "Sqrt", "Log"};
  return n.domain.empty() && std::find(ops.begin(), ops.end(), n.op_type) != ops.end();
}

}  // namespace furiosa::compiler::detail
