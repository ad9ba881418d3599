// Shape and dtype inference for the operators the compiler supports.
#include <fmt/format.h>

#include <algorithm>

#include "furiosa/compiler/compiler.h"
#include "furiosa/host/cpu_ops.h"
#include "furiosa/core/error.h"
#include "graph_utils.h"

namespace furiosa::compiler {
namespace {

[[noreturn]] void fail(const Node& n, const std::string& msg) {
  throw Error(ErrorCode::IncompatibleModel,
              fmt::format("node '{}' ({}): {}", n.name, n.qualified_op(), msg));
}

const Value& in(const Graph& g, const Node& n, std::size_t i) {
  if (i >= n.inputs.size() || n.inputs[i] < 0) fail(n, fmt::format("input {} is missing", i));
  return g.values[static_cast<std::size_t>(n.inputs[i])];
}

void set_out(Graph& g, const Node& n, std::size_t i, DType dtype, Shape shape) {
  if (i >= n.outputs.size() || n.outputs[i] < 0) return;
  Value& v = g.values[static_cast<std::size_t>(n.outputs[i])];
  v.dtype = dtype;
  v.dim_params.assign(shape.size(), "");
  v.shape = std::move(shape);
  v.has_shape = true;
}

// Output dtype given by an optional zero-point input (ONNX default: uint8).
DType zp_dtype(const Graph& g, const Node& n, std::size_t i) {
  if (i < n.inputs.size() && n.inputs[i] >= 0) return g.values[static_cast<std::size_t>(n.inputs[i])].dtype;
  return DType::UInt8;
}

Shape broadcast(const Node& n, const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::int64_t da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const std::int64_t db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (da != db && da != 1 && db != 1) {
      fail(n, fmt::format("shapes {} and {} do not broadcast", shape_to_string(a), shape_to_string(b)));
    }
    out[i] = std::max(da, db);
  }
  return out;
}

void require_rank(const Node& n, const Value& v, std::size_t rank, const char* what) {
  if (v.shape.size() != rank) {
    fail(n, fmt::format("{} '{}' must have rank {}, has shape {}", what, v.name, rank,
                        shape_to_string(v.shape)));
  }
}

// Infers one node; returns false when the operator is unknown.
bool infer_node(Graph& g, const Node& n, bool defer_constants) {
  const std::string op = n.qualified_op();
  if (op == "QuantizeLinear") {
    set_out(g, n, 0, zp_dtype(g, n, 2), in(g, n, 0).shape);
  } else if (op == "DequantizeLinear") {
    set_out(g, n, 0, DType::Float32, in(g, n, 0).shape);
  } else if (op == "QLinearConv") {
    const Value& x = in(g, n, 0);
    const Value& w = in(g, n, 3);
    require_rank(n, x, 4, "input x");
    require_rank(n, w, 4, "weight w");
    const std::int64_t group = n.attr_int("group", 1);
    if (group < 1 || x.shape[1] % group != 0 || w.shape[0] % group != 0 ||
        w.shape[1] * group != x.shape[1]) {
      fail(n, fmt::format("input channels {} do not fit weight {} with group {}", x.shape[1],
                          shape_to_string(w.shape), group));
    }
    auto ks = n.attr_ints("kernel_shape", {w.shape[2], w.shape[3]});
    if (ks.size() != 2 || ks[0] != w.shape[2] || ks[1] != w.shape[3]) {
      fail(n, "kernel_shape does not match the weight's spatial dims");
    }
    auto win = detail::resolve_window(n, {ks[0], ks[1]}, {x.shape[2], x.shape[3]}, false);
    set_out(g, n, 0, zp_dtype(g, n, 7), {x.shape[0], w.shape[0], win.out[0], win.out[1]});
  } else if (op == "MaxPool" && in(g, n, 0).shape.size() == 4) {
    const Value& x = in(g, n, 0);
    require_rank(n, x, 4, "input X");
    auto ks = n.attr_ints("kernel_shape", {});
    if (ks.size() != 2) fail(n, "kernel_shape must have 2 values (2-D pooling only)");
    auto win = detail::resolve_window(n, {ks[0], ks[1]}, {x.shape[2], x.shape[3]},
                                      n.attr_int("ceil_mode", 0) != 0);
    set_out(g, n, 0, x.dtype, {x.shape[0], x.shape[1], win.out[0], win.out[1]});
  } else if (op == "QLinearMatMul") {
    const Value& a = in(g, n, 0);
    const Value& b = in(g, n, 3);
    if (a.shape.size() < 2 || b.shape.size() < 2) fail(n, "MatMul operands must have rank >= 2");
    if (a.shape.back() != b.shape[b.shape.size() - 2]) {
      fail(n, fmt::format("inner dims differ: {} x {}", shape_to_string(a.shape), shape_to_string(b.shape)));
    }
    Shape out = a.shape;
    out.back() = b.shape.back();
    if (b.shape.size() > 2) {
      Shape batch_a(a.shape.begin(), a.shape.end() - 2), batch_b(b.shape.begin(), b.shape.end() - 2);
      out = broadcast(n, batch_a, batch_b);
      out.push_back(a.shape[a.shape.size() - 2]);
      out.push_back(b.shape.back());
    }
    set_out(g, n, 0, zp_dtype(g, n, 7), out);
  } else if (op == "com.microsoft::QLinearGlobalAveragePool") {
    const Value& x = in(g, n, 0);
    require_rank(n, x, 4, "input X");
    if (n.attr_int("channels_last", 0) != 0) fail(n, "channels_last=1 is not supported");
    set_out(g, n, 0, zp_dtype(g, n, 4), {x.shape[0], x.shape[1], 1, 1});
  } else if (op == "com.microsoft::QLinearConcat") {
    if (n.inputs.size() < 5 || (n.inputs.size() - 2) % 3 != 0) fail(n, "expects Y_scale, Y_zero_point, then (X, scale, zero point) triples");
    std::int64_t axis = n.attr_int("axis", 0);
    Shape out = in(g, n, 2).shape;
    if (axis < 0) axis += static_cast<std::int64_t>(out.size());
    if (axis < 0 || axis >= static_cast<std::int64_t>(out.size())) fail(n, "axis out of range");
    for (std::size_t i = 5; i < n.inputs.size(); i += 3) {
      const Shape& s = in(g, n, i).shape;
      if (s.size() != out.size()) fail(n, "inputs differ in rank");
      for (std::size_t d = 0; d < s.size(); ++d) {
        if (static_cast<std::int64_t>(d) == axis) out[d] += s[d];
        else if (s[d] != out[d]) fail(n, "inputs differ outside the concatenation axis");
      }
    }
    set_out(g, n, 0, zp_dtype(g, n, 1), out);
  } else if (op == "furiosa::Requantize") {
    set_out(g, n, 0, static_cast<DType>(n.attr_int("y_dtype", static_cast<int>(DType::UInt8))), in(g, n, 0).shape);
  } else if (op == "com.microsoft::QLinearAdd" || op == "com.microsoft::QLinearMul" || op == "furiosa::QLinearSub") {
    set_out(g, n, 0, zp_dtype(g, n, 7), broadcast(n, in(g, n, 0).shape, in(g, n, 3).shape));
  } else if (op == "Reshape") {
    const Value& x = in(g, n, 0);
    if (!detail::is_constant_input(g, n, 1)) return false;  // shape known only at run time
    const Tensor& st = detail::constant_input(g, n, 1, "shape");
    if (st.dtype() != DType::Int64) fail(n, "shape input must be int64");
    const bool allowzero = n.attr_int("allowzero", 0) != 0;
    Shape out(st.as<std::int64_t>().begin(), st.as<std::int64_t>().end());
    std::int64_t known = 1;
    int infer_at = -1;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i] == 0 && !allowzero) {
        if (i >= x.shape.size()) fail(n, "shape copies a dim the input does not have");
        out[i] = x.shape[i];
      }
      if (out[i] == -1) {
        if (infer_at >= 0) fail(n, "shape has more than one -1");
        infer_at = static_cast<int>(i);
      } else {
        known *= out[i];
      }
    }
    const std::int64_t total = element_count(x.shape);
    if (infer_at >= 0) {
      if (known == 0 || total % known != 0) fail(n, "cannot infer the -1 dim");
      out[static_cast<std::size_t>(infer_at)] = total / known;
    }
    if (element_count(out) != total) {
      fail(n, fmt::format("cannot reshape {} to {}", shape_to_string(x.shape), shape_to_string(out)));
    }
    set_out(g, n, 0, x.dtype, out);
  } else if (op == "Flatten") {
    const Value& x = in(g, n, 0);
    std::int64_t axis = n.attr_int("axis", 1);
    if (axis < 0) axis += static_cast<std::int64_t>(x.shape.size());
    if (axis < 0 || axis > static_cast<std::int64_t>(x.shape.size())) fail(n, "axis out of range");
    std::int64_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < x.shape.size(); ++i) {
      (static_cast<std::int64_t>(i) < axis ? outer : inner) *= x.shape[i];
    }
    set_out(g, n, 0, x.dtype, {outer, inner});
  } else {
    std::vector<DType> dtypes;
    std::vector<host::CpuValueInfo> infos;
    infos.reserve(n.inputs.size());
    for (int i : n.inputs) {
      const Value* v = i >= 0 ? &g.values[static_cast<std::size_t>(i)] : nullptr;
      dtypes.push_back(v ? v->dtype : DType::Float32);
      infos.push_back(v ? host::CpuValueInfo{v->dtype, v->shape, v->constant ? &*v->constant : nullptr} : host::CpuValueInfo{});
    }
    if (!cpu_op_supported(n, dtypes, nullptr)) return false;
    std::vector<const host::CpuValueInfo*> ptrs;
    for (std::size_t i = 0; i < n.inputs.size(); ++i) ptrs.push_back(n.inputs[i] >= 0 ? &infos[i] : nullptr);
    auto outs = [&] {
      if (!defer_constants) return cpu_op_infer(n, ptrs);
      try {
        return cpu_op_infer(n, ptrs);
      } catch (const host::InputNotConstant&) {
        return std::vector<std::pair<DType, Shape>>{};
      }
    }();
    if (outs.empty() && !n.outputs.empty()) return false;
    for (std::size_t o = 0; o < outs.size(); ++o) set_out(g, n, o, outs[o].first, outs[o].second);
  }
  return true;
}

// Output dtypes of a node that does not depend on its input shapes, for nodes whose shapes are
// not known (an input of unknown shape, or an operator shape inference does not cover): keeps
// the dtypes right downstream, so that e.g. DynamicQuantizeLinear -> ConvInteger is placed by
// its real dtypes (uint8) rather than the float32 default of an uninferred value.
void infer_dtypes_only(Graph& g, const Node& n) {
  auto set_dtype = [&](std::size_t i, DType d) {
    if (i < n.outputs.size() && n.outputs[i] >= 0) g.values[static_cast<std::size_t>(n.outputs[i])].dtype = d;
  };
  const std::string op = n.qualified_op();
  if (op == "DynamicQuantizeLinear") {
    set_dtype(0, DType::UInt8);
    set_dtype(1, DType::Float32);
    set_dtype(2, DType::UInt8);
  } else if (op == "QuantizeLinear") {
    set_dtype(0, zp_dtype(g, n, 2));
  } else if (op == "DequantizeLinear") {
    set_dtype(0, DType::Float32);
  } else if (op == "ConvInteger" || op == "MatMulInteger") {
    set_dtype(0, DType::Int32);
  } else if (op == "Shape" || op == "NonMaxSuppression" || op == "ArgMax" || op == "ArgMin") {
    set_dtype(0, DType::Int64);
  } else if (op == "Cast") {
    switch (n.attr_int("to", 0)) {
      case 1: set_dtype(0, DType::Float32); break;
      case 2: set_dtype(0, DType::UInt8); break;
      case 3: set_dtype(0, DType::Int8); break;
      case 6: set_dtype(0, DType::Int32); break;
      case 7: set_dtype(0, DType::Int64); break;
      default: break;
    }
  }
}

}  // namespace

static void infer_all(Graph& graph, const CompilerOptions& options, bool defer_constants) {
  if (options.batch_size < 1) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("batch size must be >= 1, got {}", options.batch_size));
  }
  for (int id : graph.inputs) {
    Value& v = graph.values[static_cast<std::size_t>(id)];
    if (!v.has_shape) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("graph input '{}' has no declared shape", v.name));
    }
    for (std::size_t d = 0; d < v.shape.size(); ++d) {
      if (v.shape[d] >= 0) continue;
      if (d == 0) {
        v.shape[d] = options.batch_size;
      } else {
        throw Error(ErrorCode::IncompatibleModel,
                    fmt::format("graph input '{}' has symbolic dim {} ('{}'); only dim 0 (batch) "
                                "may stay symbolic: pin the others with input_shapes (furiosa-run "
                                "--input-shape {}=D0,D1,...)",
                                v.name, d, v.dim_params[d], v.name));
      }
    }
  }
  for (const Node& n : graph.nodes) {
    bool inputs_known = true;
    for (int i : n.inputs) {
      if (i >= 0 && !graph.values[static_cast<std::size_t>(i)].has_shape) inputs_known = false;
    }
    bool done = inputs_known && infer_node(graph, n, defer_constants);
    if (!done) {
      for (int o : n.outputs) {
        if (o >= 0) graph.values[static_cast<std::size_t>(o)].has_shape = false;
      }
      infer_dtypes_only(graph, n);
    }
  }
}

void infer_shapes(Graph& graph, const CompilerOptions& options) {
  infer_all(graph, options, false);
}

void infer_shapes_deferring_constants(Graph& graph, const CompilerOptions& options) {
  infer_all(graph, options, true);
}

}  // namespace furiosa::compiler
