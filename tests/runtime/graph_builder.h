// Builds small compiler::Graph models in tests: values, constants and nodes by hand.
#pragma once

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "furiosa/compiler/graph.h"

namespace furiosa::test {

/// A graph under construction; values get their shape as given (has_shape, no symbolic dims).
struct GraphBuilder {
  compiler::Graph g;
  /// A new value; returns its id.
  int add(const std::string& name, DType dtype, Shape shape) {
    compiler::Value v;
    v.name = name;
    v.dtype = dtype;
    v.shape = shape;
    v.dim_params.assign(shape.size(), "");
    v.has_shape = true;
    g.values.push_back(v);
    return static_cast<int>(g.values.size() - 1);
  }
  /// A new constant value holding `t`; returns its id.
  int scalar(const std::string& name, Tensor t) {
    const int id = add(name, t.dtype(), t.shape());
    g.values[static_cast<std::size_t>(id)].constant = std::move(t);
    return id;
  }
  /// Appends a node of the default domain named "<op>_<index>".
  void node(const std::string& op, std::vector<int> in, std::vector<int> out,
            std::map<std::string, compiler::Attribute> attrs = {}) {
    compiler::Node n;
    n.name = fmt::format("{}_{}", op, g.nodes.size());
    n.op_type = op;
    n.index = static_cast<std::int32_t>(g.nodes.size());
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.attributes = std::move(attrs);
    g.nodes.push_back(std::move(n));
  }
};

/// A rank-0 tensor of `d` holding `v`.
inline Tensor scalar_of(DType d, double v) {
  Tensor t(d, {});
  switch (d) {
    case DType::Float32: t.as<float>()[0] = static_cast<float>(v); break;
    case DType::UInt8: t.as<std::uint8_t>()[0] = static_cast<std::uint8_t>(v); break;
    case DType::Int8: t.as<std::int8_t>()[0] = static_cast<std::int8_t>(v); break;
    case DType::Int32: t.as<std::int32_t>()[0] = static_cast<std::int32_t>(v); break;
    case DType::Int64: t.as<std::int64_t>()[0] = static_cast<std::int64_t>(v); break;
  }
  return t;
}

}  // namespace furiosa::test
