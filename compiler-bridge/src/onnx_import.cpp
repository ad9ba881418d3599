// ONNX protobuf -> graph IR.
#include "furiosa/compiler/onnx_import.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <cstring>

#include "furiosa/core/error.h"
#include "furiosa/core/file_io.h"
#include "furiosa/core/limits.h"
#include "graph_utils.h"

namespace furiosa::compiler {
namespace {

// Maps an ONNX TensorProto.DataType to ours; nullopt for types the runtime does not handle.
std::optional<DType> dtype_from_onnx(int t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::Float32;
    case onnx::TensorProto::UINT8: return DType::UInt8;
    case onnx::TensorProto::INT8: return DType::Int8;
    case onnx::TensorProto::INT32: return DType::Int32;
    case onnx::TensorProto::INT64: return DType::Int64;
    default: return std::nullopt;
  }
}

std::string onnx_type_name(int t) {
  const auto* desc = onnx::TensorProto::DataType_descriptor();
  const auto* v = desc->FindValueByNumber(t);
  return v ? v->name() : fmt::format("type {}", t);
}

/// Opset versions of the default ONNX domain the importer accepts. ONNX numbers its opsets from 1
/// and publishes about one a year (opset 24 with ONNX 1.19 in 2025); the upper bound leaves room
/// for years of newer exporters while refusing the numbers only a corrupt file carries. Each
/// operator's own version rules are checked where the operator is mapped.
constexpr std::int64_t kMinDefaultOpset = 1;
constexpr std::int64_t kMaxDefaultOpset = 30;

template <class Dst, class Src>
void copy_typed(Tensor& t, const Src& field, std::int64_t n, const std::string& what) {
  if (static_cast<std::int64_t>(field.size()) != n) {
    throw Error(ErrorCode::InvalidInput,
                fmt::format("tensor '{}' holds {} values, its shape needs {}", what, field.size(), n));
  }
  auto out = t.as<Dst>();
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<Dst>(field[static_cast<int>(i)]);
}

// TensorProto -> Tensor. `what` names the tensor (and its file) in errors. The declared size is
// checked against `limits` and against the data present before anything is allocated, so a file
// whose dims claim more than it holds is refused at once instead of allocating it.
Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& what, ErrorCode code,
                         const LoadLimits& limits) {
  auto dtype = dtype_from_onnx(p.data_type());
  if (!dtype) {
    throw Error(code, fmt::format("tensor '{}' has element type {}, which is not supported "
                                  "(float32, uint8, int8, int32, int64)",
                                  what, onnx_type_name(p.data_type())));
  }
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    throw Error(code, fmt::format("tensor '{}' uses external data, which is not supported", what));
  }
  Shape shape(p.dims().begin(), p.dims().end());
  const std::uint64_t expected_bytes = checked_tensor_bytes(*dtype, shape, limits, what, code);
  const auto n = static_cast<std::int64_t>(expected_bytes / dtype_size(*dtype));
  if (p.has_raw_data()) {
    if (p.raw_data().size() != expected_bytes) {
      throw Error(code, fmt::format("tensor '{}' {} {}: raw data is {} bytes, expected {}", what,
                                    dtype_name(*dtype), shape_to_string(shape),
                                    p.raw_data().size(), expected_bytes));
    }
    Tensor t(*dtype, shape);
    if (t.size_bytes() > 0) std::memcpy(t.bytes().data(), p.raw_data().data(), t.size_bytes());
    return t;
  }
  const int typed_values = *dtype == DType::Float32 ? p.float_data_size()
                           : *dtype == DType::Int64 ? p.int64_data_size()
                                                    : p.int32_data_size();
  if (typed_values != n) {
    throw Error(code, fmt::format("tensor '{}' {} {}: holds {} values, its shape needs {}", what, dtype_name(*dtype),
                                  shape_to_string(shape), typed_values, n));
  }
  Tensor t(*dtype, shape);
  switch (*dtype) {
    case DType::Float32: copy_typed<float>(t, p.float_data(), n, what); break;
    case DType::UInt8: copy_typed<std::uint8_t>(t, p.int32_data(), n, what); break;
    case DType::Int8: copy_typed<std::int8_t>(t, p.int32_data(), n, what); break;
    case DType::Int32: copy_typed<std::int32_t>(t, p.int32_data(), n, what); break;
    case DType::Int64: copy_typed<std::int64_t>(t, p.int64_data(), n, what); break;
  }
  return t;
}

// Declared type of a graph input/output/value_info.
void read_value_info(const onnx::ValueInfoProto& vi, Value& v, const std::string& source, const LoadLimits& limits) {
  if (!vi.type().has_tensor_type()) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("{}: value '{}' is not a tensor", source, vi.name()));
  }
  const auto& tt = vi.type().tensor_type();
  auto dtype = dtype_from_onnx(tt.elem_type());
  if (!dtype) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("{}: value '{}' has element type {}, which is not supported", source,
                            vi.name(), onnx_type_name(tt.elem_type())));
  }
  v.dtype = *dtype;
  if (tt.has_shape()) {
    v.has_shape = true;
    v.shape.clear();
    v.dim_params.clear();
    for (const auto& d : tt.shape().dim()) {
      v.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
      v.dim_params.push_back(d.has_dim_param() ? d.dim_param() : "");
    }
    // Declared shapes size the runtime's buffers: the same limits as stored tensors, with
    // unknown dims (dim_param, or -1 as some exporters write) counted as 1.
    checked_tensor_bytes(v.dtype, v.shape, limits, fmt::format("{}: value '{}'", source, vi.name()),
                         ErrorCode::IncompatibleModel, /*allow_unknown=*/true);
  }
}

Attribute read_attribute(const onnx::AttributeProto& a, const std::string& node, const LoadLimits& limits) {
  switch (a.type()) {
    case onnx::AttributeProto::INT: return a.i();
    case onnx::AttributeProto::FLOAT: return a.f();
    case onnx::AttributeProto::STRING: return a.s();
    case onnx::AttributeProto::INTS: return std::vector<std::int64_t>(a.ints().begin(), a.ints().end());
    case onnx::AttributeProto::FLOATS: return std::vector<float>(a.floats().begin(), a.floats().end());
    case onnx::AttributeProto::TENSOR:
      return tensor_from_proto(a.t(), node + "." + a.name(), ErrorCode::IncompatibleModel, limits);
    default:
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("node '{}': attribute '{}' has an unsupported kind", node, a.name()));
  }
}

// The value of a Constant node (opsets 1-19): exactly one of the attributes value (a tensor),
// value_float(s), value_int(s); value_string(s) and sparse_value are refused.
Tensor constant_node_value(const onnx::NodeProto& n, const std::string& name, const std::string& source,
                           const LoadLimits& limits) {
  if (n.attribute_size() != 1) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("{}: Constant node '{}' must have exactly one value attribute, has {}", source,
                            name, n.attribute_size()));
  }
  const auto& a = n.attribute(0);
  if (a.name() == "value" && a.type() == onnx::AttributeProto::TENSOR) {
    return tensor_from_proto(a.t(), name + ".value", ErrorCode::IncompatibleModel, limits);
  }
  if (a.name() == "value_float" && a.type() == onnx::AttributeProto::FLOAT) {
    Tensor t(DType::Float32, {});
    t.as<float>()[0] = a.f();
    return t;
  }
  if (a.name() == "value_int" && a.type() == onnx::AttributeProto::INT) {
    Tensor t(DType::Int64, {});
    t.as<std::int64_t>()[0] = a.i();
    return t;
  }
  if (a.name() == "value_floats" && a.type() == onnx::AttributeProto::FLOATS) {
    Tensor t(DType::Float32, {static_cast<std::int64_t>(a.floats_size())});
    std::copy(a.floats().begin(), a.floats().end(), t.as<float>().begin());
    return t;
  }
  if (a.name() == "value_ints" && a.type() == onnx::AttributeProto::INTS) {
    Tensor t(DType::Int64, {static_cast<std::int64_t>(a.ints_size())});
    std::copy(a.ints().begin(), a.ints().end(), t.as<std::int64_t>().begin());
    return t;
  }
  throw Error(ErrorCode::IncompatibleModel,
              fmt::format("{}: Constant node '{}': attribute '{}' is not supported (value, value_float(s) "
                          "and value_int(s) are; strings and sparse tensors are not)",
                          source, name, a.name()));
}

Graph graph_from_model(const onnx::ModelProto& model, const std::string& source, const LoadLimits& limits) {
  if (!model.has_graph()) {
    throw Error(ErrorCode::ModelLoadFailed, fmt::format("{}: the model has no graph", source),
                ErrorSubject::of_file(source));
  }
  const auto& g = model.graph();
  Graph graph;
  graph.name = g.name();
  for (const auto& op : model.opset_import()) {
    const bool default_domain = op.domain().empty() || op.domain() == "ai.onnx";
    if (default_domain && (op.version() < kMinDefaultOpset || op.version() > kMaxDefaultOpset)) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("{}: opset {} of the default ONNX domain is outside {}..{}", source, op.version(),
                              kMinDefaultOpset, kMaxDefaultOpset),
                  ErrorSubject::of_file(source));
    }
    if (!graph.opsets.emplace(default_domain ? "" : op.domain(), op.version()).second) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("{}: domain '{}' is imported twice in opset_import", source, op.domain()),
                  ErrorSubject::of_file(source));
    }
  }
  // Every value is defined once: by an initializer, a graph input or one node output (ONNX IR
  // spec, "Names Within a Graph": SSA form). A second definition is refused naming both.
  std::map<std::string, std::string> defined_by;
  auto define = [&](const std::string& name, std::string by) {
    auto [it, fresh] = defined_by.emplace(name, by);
    if (!fresh) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("{}: value '{}' is defined twice, by {} and by {}", source, name, it->second, by),
                  ErrorSubject{{}, {}, name, source});
    }
  };
  std::uint64_t constant_bytes = 0;
  auto count_constant = [&](const Tensor& t, const std::string& name) {
    constant_bytes += t.size_bytes();
    if (constant_bytes > limits.max_total_bytes) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("{}: constant data passes the limit of {} bytes at '{}'", source,
                              limits.max_total_bytes, name),
                  ErrorSubject{{}, {}, name, source});
    }
  };

  std::unordered_map<std::string, int> value_ids;  // name -> index in graph.values
  auto find_value = [&](const std::string& name) {
    auto it = value_ids.find(name);
    return it == value_ids.end() ? -1 : it->second;
  };
  auto get_or_add = [&](const std::string& name) {
    int id = find_value(name);
    if (id >= 0) return id;
    Value v;
    v.name = name;
    graph.values.push_back(std::move(v));
    id = static_cast<int>(graph.values.size() - 1);
    value_ids.emplace(name, id);
    return id;
  };
  for (const auto& init : g.initializer()) {
    define(init.name(), "an initializer");
    int id = get_or_add(init.name());
    auto& v = graph.values[id];
    try {
      v.constant = tensor_from_proto(init, init.name(), ErrorCode::IncompatibleModel, limits);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{}: {}", source, e.message()), ErrorSubject{{}, {}, init.name(), source});
    }
    count_constant(*v.constant, init.name());
    v.dtype = v.constant->dtype();
    v.shape = v.constant->shape();
    v.dim_params.assign(v.shape.size(), "");
    v.has_shape = true;
  }
  for (const auto& in : g.input()) {
    int id = get_or_add(in.name());
    if (graph.values[id].constant) continue;  // IR < 4: initializers are listed as inputs too
    define(in.name(), "a graph input");
    read_value_info(in, graph.values[id], source, limits);
    graph.inputs.push_back(id);
  }
  int index = 0;
  for (const auto& n : g.node()) {
    Node node;
    node.op_type = n.op_type();
    node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
    node.index = index;
    node.name = n.name().empty() ? fmt::format("{}_{}", n.op_type(), index) : n.name();
    if (n.op_type().empty()) {
      throw Error(ErrorCode::IncompatibleModel, fmt::format("{}: node '{}' has no op_type", source, node.name),
                  ErrorSubject{{}, node.name, {}, source});
    }
    if (n.op_type() == "Constant" && node.domain.empty()) {
      // A Constant node becomes an initializer of its output; the node itself is dropped.
      if (n.output_size() != 1 || n.output(0).empty()) {
        throw Error(ErrorCode::IncompatibleModel,
                    fmt::format("{}: Constant node '{}' must have one output", source, node.name));
      }
      define(n.output(0), fmt::format("node '{}'", node.name));
      Value& v = graph.values[static_cast<std::size_t>(get_or_add(n.output(0)))];
      v.constant = constant_node_value(n, node.name, source, limits);
      count_constant(*v.constant, n.output(0));
      v.dtype = v.constant->dtype();
      v.shape = v.constant->shape();
      v.dim_params.assign(v.shape.size(), "");
      v.has_shape = true;
      ++index;
      continue;
    }
    for (const auto& a : n.attribute()) node.attributes[a.name()] = read_attribute(a, node.name, limits);
    for (const auto& i : n.input()) {
      if (i.empty()) {
        node.inputs.push_back(-1);
        continue;
      }
      int id = find_value(i);
      if (id < 0) {
        throw Error(ErrorCode::IncompatibleModel,
                    fmt::format("{}: node '{}' ({}) reads '{}', which no earlier node, input or "
                                "initializer defines (graph not in topological order?)",
                                source, node.name, node.op_type, i));
      }
      node.inputs.push_back(id);
    }
    for (const auto& o : n.output()) {
      if (!o.empty()) define(o, fmt::format("node '{}' ({})", node.name, node.op_type));
      node.outputs.push_back(o.empty() ? -1 : get_or_add(o));
    }
    graph.nodes.push_back(std::move(node));
    ++index;
  }
  for (const auto& vi : g.value_info()) {
    int id = find_value(vi.name());
    if (id >= 0 && !graph.values[id].constant) read_value_info(vi, graph.values[id], source, limits);
  }
  for (const auto& out : g.output()) {
    int id = find_value(out.name());
    if (id < 0) {
      throw Error(ErrorCode::IncompatibleModel,
                  fmt::format("{}: graph output '{}' is produced by no node", source, out.name()));
    }
    read_value_info(out, graph.values[id], source, limits);
    graph.outputs.push_back(id);
  }
  return graph;
}


}  // namespace

Graph import_onnx_bytes(const std::string& bytes, const std::string& source, const LoadLimits& limits) {
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes)) {
    throw Error(ErrorCode::ModelLoadFailed,
                fmt::format("'{}' is not a valid ONNX model (truncated or not a ModelProto)", source),
                ErrorSubject::of_file(source));
  }
  if (!model.has_graph() || model.graph().node_size() == 0) {
    throw Error(ErrorCode::ModelLoadFailed,
                fmt::format("'{}' is not a valid ONNX model (no graph nodes)", source),
                ErrorSubject::of_file(source));
  }
  return graph_from_model(model, source, limits);
}

Graph import_onnx(const std::filesystem::path& path, const LoadLimits& limits) {
  return import_onnx_bytes(read_regular_file(path, ErrorCode::ModelLoadFailed, "model file"), path.string(), limits);
}

Tensor load_tensor_pb(const std::filesystem::path& path, std::string* name_out, const LoadLimits& limits) {
  return load_tensor_pb_bytes(read_regular_file(path, ErrorCode::InvalidInput, "tensor file"), path.string(), name_out,
                              limits);
}

Tensor load_tensor_pb_bytes(const std::string& bytes, const std::string& source, std::string* name_out,
                            const LoadLimits& limits) {
  onnx::TensorProto p;
  if (!p.ParseFromString(bytes)) {
    throw Error(ErrorCode::InvalidInput,
                fmt::format("'{}' is not a serialized ONNX TensorProto", source), ErrorSubject::of_file(source));
  }
  if (name_out) *name_out = p.name();
  try {
    return tensor_from_proto(p, source, ErrorCode::InvalidInput, limits);
  } catch (const Error& e) {
    throw Error(e.code(), e.message(), ErrorSubject::of_file(source));
  }
}

}  // namespace furiosa::compiler
