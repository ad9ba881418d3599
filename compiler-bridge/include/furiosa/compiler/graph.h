// The compiler's graph IR: values (tensors) and nodes imported from ONNX, with inferred shapes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "furiosa/core/tensor.h"

namespace furiosa::compiler {

/// An ONNX attribute value (the kinds the supported operators use).
using Attribute = std::variant<std::int64_t, float, std::string, std::vector<std::int64_t>,
                               std::vector<float>, Tensor>;

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

/// One operator node.
///
/// Besides ONNX's own attributes, the compiler understands these (set by the TFLite importer,
/// never by ONNX models): on QLinearConv / QLinearMatMul, `fixed_point_multiplier` and
/// `fixed_point_shift` (ints, one entry or one per output channel) with `output_min` /
/// `output_max` (int) select isa::FixedPointRequant; on com.microsoft::QLinearAdd,
/// `fixed_point_left_shift` (int) and `fixed_point_multiplier` / `fixed_point_shift` (ints [a, b,
/// y]) with `output_min` / `output_max` select isa::FixedPointAdd; on furiosa::Requantize,
/// `table` (256 ints) is isa::RequantizeParams::table; on QuantizeLinear, `rounding` =
/// "half_away_from_zero" replaces ONNX's half-to-even rounding. QLinearMatMul may have a 9th
/// input, an int32 bias [N] added to the accumulator (TFLite FULLY_CONNECTED).
struct Node {
  std::string name;      ///< ONNX node name, or "<op_type>_<index>" when the model has none
  std::string op_type;   ///< e.g. "QLinearConv"
  std::string domain;    ///< "" for ai.onnx, "com.microsoft", ...
  std::int32_t index = -1;        ///< position in the ONNX graph (operator_index)
  std::vector<int> inputs;        ///< value ids; -1 for an omitted optional input
  std::vector<int> outputs;       ///< value ids
  std::map<std::string, Attribute> attributes;

  /// Attribute accessors; return `fallback` when absent, throw Error(IncompatibleModel) naming
  /// the node when present with another type.
  std::int64_t attr_int(const std::string& key, std::int64_t fallback) const;
  std::vector<std::int64_t> attr_ints(const std::string& key,
                                      std::vector<std::int64_t> fallback) const;
  std::string attr_string(const std::string& key, std::string fallback) const;
  /// "domain::op_type" or just op_type for the default domain.
  std::string qualified_op() const;
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
