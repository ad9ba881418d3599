// Writing small ONNX models from a test with ONNX's protobuf (onnx_proto): inputs with fixed or
// symbolic dims, raw-data initializers, nodes with int / ints / string attributes. Shared by the
// model-vs-ONNX Runtime tests of this folder.
#pragma once

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include "furiosa/core/tensor.h"

namespace furiosa::test {

/// An ONNX model under construction (ai.onnx at `opset`, IR version 7; com.microsoft at 1 for
/// the QOperator contrib ops). Not thread-safe; one per model.
struct OnnxModelBuilder {
  /// One dim of a declared value shape: a fixed size or a symbolic name (dim_param).
  using Dim = std::variant<std::int64_t, std::string>;

  onnx::ModelProto m;
  onnx::GraphProto* g;

  explicit OnnxModelBuilder(const std::string& name, int opset = 13) : g(m.mutable_graph()) {
    m.set_ir_version(7);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    auto* ms = m.add_opset_import();
    ms->set_domain("com.microsoft");
    ms->set_version(1);
    g->set_name(name);
  }

  /// Declares a float32 value (graph input or output) `name` in `where`; no shape when `dims` is
  /// null.
  static void value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* where,
                    const std::string& name, const std::vector<Dim>* dims) {
    auto* v = where->Add();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    if (!dims) return;
    auto* s = t->mutable_shape();
    for (const auto& d : *dims) {
      if (const auto* size = std::get_if<std::int64_t>(&d)) s->add_dim()->set_dim_value(*size);
      else s->add_dim()->set_dim_param(std::get<std::string>(d));
    }
  }
  /// A float32 graph input of fixed `shape`.
  void input(const std::string& name, const Shape& shape) {
    const std::vector<Dim> dims(shape.begin(), shape.end());
    value(g->mutable_input(), name, &dims);
  }
  /// A float32 graph output with no declared shape.
  void output(const std::string& name) { value(g->mutable_output(), name, nullptr); }

  /// An initializer of ONNX element type `type` (onnx::TensorProto::FLOAT, INT64, ...) holding
  /// `v` (whose element size must match the type) with dims `dims`.
  template <class T>
  void init(const std::string& name, int type, const std::vector<std::int64_t>& dims,
            const std::vector<T>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (auto d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
  }
  /// Appends node `op` (default domain) named "<op>_<index>"; returns it for attributes.
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in,
                        const std::string& out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(fmt::format("{}_{}", op, g->node_size()));
    for (const auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  }
  /// Appends a com.microsoft node (QLinearAdd, ...).
  onnx::NodeProto* contrib(const std::string& op, const std::vector<std::string>& in,
                           const std::string& out) {
    auto* n = node(op, in, out);
    n->set_domain("com.microsoft");
    return n;
  }
  /// Sets a string attribute.
  static void attr(onnx::NodeProto* n, const std::string& key, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  /// Sets an int attribute.
  static void attr(onnx::NodeProto* n, const std::string& key, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  /// Sets an ints attribute.
  static void attr(onnx::NodeProto* n, const std::string& key, const std::vector<std::int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  /// Writes the model to `p` (creating its folder); fails the test when it cannot.
  void save(const std::filesystem::path& p) const {
    std::filesystem::create_directories(p.parent_path());
    std::ofstream f(p, std::ios::binary);
    REQUIRE(m.SerializeToOstream(&f));
  }
};

}  // namespace furiosa::test
