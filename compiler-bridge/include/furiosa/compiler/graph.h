// The compiler's graph IR: values (tensors) and nodes imported from ONNX, with inferred shapes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "furiosa/core/tensor.h"
#include "furiosa/host/op_node.h"

namespace furiosa::compiler {

/// An ONNX attribute value and an operator node: the host module's types (host/op_node.h), so
/// the host operator library can run a node without depending on the compiler.
using Attribute = host::Attribute;
using Node = host::OpNode;

/// A tensor of the graph: a graph input, an initializer (constant) or a node output.
struct Value {
  std::string name;
  DType dtype = DType::Float32;
  /// Dims; -1 for a symbolic or unknown dim until shapes are inferred.
  Shape shape;
  /// Symbolic dim names as in the model (same size as shape; empty for fixed dims).
  std::vector<std::string> dim_params;
  bool has_shape = false;             ///< false when the rank itself is unknown
  std::optional<Tensor> constant;     ///< set for initializers and folded constants
  /// Axis naming of a 4-D value whose dims are not NCHW: "NHWC" for the TFLite importer's
  /// image tensors (graph inputs/outputs and every value kept in the model's own layout). Empty
  /// means the default naming by rank (NCHW, NC, C). The compiler turns a Transpose
  /// [0, 3, 1, 2] of an "NHWC" value held on the host into the host Lower step (NHWC -> lowered
  /// NCHW), and reports the naming as the format of model inputs and outputs.
  std::string format;
};

/// A graph in topological order. Thread-compatible.
struct Graph {
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;   ///< non-constant graph inputs (initializers excluded)
  std::vector<int> outputs;
  std::map<std::string, std::int64_t> opsets;  ///< domain -> version

  /// Value id by name, or -1.
  int find_value(const std::string& name) const;
  /// Replaces graph input `name` by a constant (used by conformance tests that pass weights as
  /// inputs). Throws Error(InvalidInput) when there is no such input or the tensor's dtype or
  /// shape does not match the declared one.
  void bind_constant(const std::string& name, Tensor tensor);
  /// Ids of the nodes consuming value `id`.
  std::vector<int> consumers(int id) const;
  /// Id of the node producing value `id`, or -1 (graph input / constant).
  int producer(int id) const;
};

}  // namespace furiosa::compiler
