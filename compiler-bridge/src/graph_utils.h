// Private helpers of compiler-bridge: reading model files and constant operands, resolving
// conv/pool geometry.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/compiler/graph.h"
#include "furiosa/core/error.h"

namespace furiosa::compiler::detail {

/// The constant tensor behind input `i` of `node`. Throws Error(IncompatibleModel) naming the node
/// and the input when the input is missing or not a constant (e.g. a scale fed at run time).
const Tensor& constant_input(const Graph& g, const Node& node, std::size_t i, const char* what);

/// Attribute (int 1) the compiler puts on a com.microsoft QLinearAdd / QLinearMul it fused from a
/// QDQ group that ONNX Runtime runs unfused (int8 on x86-64, fuse_qdq_operators.cpp): the node
/// computes DequantizeLinear, the float op and QuantizeLinear in float32 instead of the contrib
/// kernel's arithmetic (isa::AddFormula::Dequantized, isa::MulParams::dequantized).
inline constexpr std::string_view kDequantizedArithmetic = "furiosa_dequantized_arithmetic";

/// Attribute (int 1) on a com.microsoft QLinearAdd fused from an int8 QDQ group whose three
/// QuantizeLinear -> DequantizeLinear pairs ONNX Runtime moves to uint8 before fusing
/// (fuse_qdq_operators.cpp): lowered with isa::AddFormula::MlasRatiosUint8.
inline constexpr std::string_view kQdqS8ToU8 = "furiosa_qdq_s8_to_u8";

/// True for the 8-bit quantized types (uint8, int8).
inline bool is_quantized(DType d) { return d == DType::UInt8 || d == DType::Int8; }

/// True when input `i` exists and is a constant.
bool is_constant_input(const Graph& g, const Node& node, std::size_t i);

/// Float values of a constant float32 tensor (scale operands).
std::vector<float> float_values(const Tensor& t);
/// Integer values of a constant uint8/int8/int32 tensor (zero-point operands).
std::vector<std::int32_t> int_values(const Tensor& t);

/// A per-tensor (scale, zero point, dtype) triple read from constant inputs `scale_i`, `zp_i`.
/// The zero point input is optional (ONNX: defaults to uint8 0). Throws when either is not a
/// scalar / one-element tensor, naming the node.
struct ScalarQuant {
  float scale = 1.0f;
  std::int32_t zero_point = 0;
  DType dtype = DType::UInt8;
};
ScalarQuant scalar_quant(const Graph& g, const Node& node, std::size_t scale_i, std::size_t zp_i);

/// Resolved 2-D window geometry of a Conv or Pool node.
struct Window2d {
  std::array<std::int64_t, 2> kernel{1, 1};
  std::array<std::int64_t, 2> strides{1, 1};
  std::array<std::int64_t, 2> dilations{1, 1};
  std::array<std::int64_t, 4> pads{};  ///< top, left, bottom, right
  std::array<std::int64_t, 2> out{0, 0};
};

/// Resolves kernel/strides/dilations/pads (including auto_pad SAME_UPPER/SAME_LOWER/VALID and
/// ceil_mode for pools) for input spatial size {h, w}, per the ONNX Conv/MaxPool spec.
Window2d resolve_window(const Node& node, std::array<std::int64_t, 2> kernel,
                        std::array<std::int64_t, 2> in, bool ceil_mode);

}  // namespace furiosa::compiler::detail
