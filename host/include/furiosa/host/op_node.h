// An operator node as the host operator library sees it (the compiler's graph IR uses the same
// type as compiler::Node): op type, domain, attributes, and input/output value ids.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "furiosa/core/tensor.h"

namespace furiosa::host {

/// An ONNX attribute value (the kinds the supported operators use).
using Attribute = std::variant<std::int64_t, float, std::string, std::vector<std::int64_t>,
                               std::vector<float>, Tensor>;

/// One operator node: what an ONNX node is, with its inputs and outputs as ids of values in the
/// graph that owns it (compiler::Node is this type). The host operator library reads only the
/// op type, domain, attributes, which inputs are present (id >= 0) and how many outputs there are.
///
/// Besides ONNX's own attributes, the compiler understands these (set by the TFLite importer,
/// never by ONNX models): on QLinearConv / QLinearMatMul, `fixed_point_multiplier` and
/// `fixed_point_shift` (ints, one entry or one per output channel) with `output_min` /
/// `output_max` (int) select isa::FixedPointRequant; on com.microsoft::QLinearAdd,
/// `fixed_point_left_shift` (int) and `fixed_point_multiplier` / `fixed_point_shift` (ints [a, b,
/// y]) with `output_min` / `output_max` select isa::FixedPointAdd; on furiosa::Requantize,
/// `table` (256 ints) is isa::RequantizeParams::table; on QuantizeLinear, `rounding` =
/// "half_away_from_zero" replaces ONNX's half-to-even rounding; on Resize, `tflite_arithmetic` = 1
/// (int) selects TFLite's reference resize kernels (cpu_ops.h). QLinearMatMul may have a 9th
/// input, an int32 bias [N] added to the accumulator (TFLite FULLY_CONNECTED).
struct OpNode {
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

}  // namespace furiosa::host
