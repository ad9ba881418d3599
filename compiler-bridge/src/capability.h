// What the NPU claims (the compiler's counterpart of ONNX Runtime's GetCapability): one op table
// read by placement, by the unsupported-operator check and by the supported-operator listing.
// Everything the table does not claim goes to the host operator library (host/cpu_ops.h) when
// that library runs it, and is refused otherwise.
#pragma once

#include <array>
#include <initializer_list>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/compiler/graph.h"
#include "furiosa/device/isa.h"

namespace furiosa::compiler::detail {

/// The lowering routine an NPU-claimed node takes (lowering.cpp switches on it).
enum class NpuOp {
  Conv,               ///< QLinearConv -> LowLevelConv2d / LowLevelDepthwiseConv2d
  MatMul,             ///< QLinearMatMul with a constant 2-D B -> LowLevelMatMul
  Add,                ///< com.microsoft::QLinearAdd -> LowLevelAdd
  GlobalAveragePool,  ///< com.microsoft::QLinearGlobalAveragePool (NCHW) -> LowLevelGlobalAveragePool
  QLinearConcat,      ///< com.microsoft::QLinearConcat -> LowLevelRequantize + LowLevelConcat
  Requantize,         ///< furiosa::Requantize (QDQ regions, TFLite tables) -> LowLevelRequantize
  MaxPool,            ///< MaxPool on uint8/int8 -> LowLevelMaxPool
  Concat,             ///< Concat on uint8/int8 -> LowLevelConcat
  Split,              ///< Split on uint8/int8 -> LowLevelSplit
  Transpose,          ///< Transpose on uint8/int8 -> LowLevelTranspose
  Reshape,            ///< Reshape, Flatten, Squeeze, Unsqueeze, Identity on uint8/int8 -> LowLevelReshape
  Resize,             ///< Resize on uint8/int8 (nearest repeats, TFLite and ONNX bilinear) -> LowLevelResize
  Slice,              ///< Slice with constant starts/ends/axes/steps on uint8/int8 -> LowLevelSlice
  Pad,                ///< Pad with constant pads and value on uint8/int8 -> LowLevelPad
  Mul,                ///< com.microsoft::QLinearMul of two tensors -> LowLevelMul
  Sub,                ///< furiosa::QLinearSub (fused QDQ Sub) -> LowLevelSub
};

/// Where a node runs.
enum class Where {
  Npu,          ///< in an NPU program (Placement::npu says how)
  Host,         ///< QuantizeLinear / DequantizeLinear: the runtime's Quantize / Dequantize steps
  External,     ///< the host operator library (a fallback "external operator")
  Unsupported,  ///< neither: compile() refuses the model
};

/// A placement decision.
struct Placement {
  Where where = Where::Unsupported;
  NpuOp npu = NpuOp::Reshape;  ///< meaningful when where == Npu
};

/// Decides where node `n` of `g` runs (shapes must be inferred). When the node is unsupported
/// and `why` is non-null, `why` receives the reason (the host library's, or "no NPU kernel and no
/// host operator for it"). Never throws for an unknown op.
Placement place(const Graph& g, const Node& n, std::string* why);

/// Throws Error(UnsupportedOperator) listing every node of `g` that place() calls unsupported
/// (name, op type, domain, reason) followed by supported_operators(); returns otherwise.
void check_supported(const Graph& g);

/// True for ops that only move elements, and MaxPool (which commutes with monotonic maps): the
/// ops a DequantizeLinear -> ... -> QuantizeLinear region may contain.
bool is_data_movement(const Node& n);

/// Indices of the inputs of a data-movement node that carry data (not shapes, axes or sizes).
std::vector<std::size_t> data_inputs(const Node& n);

/// The whole upsampling factors {scale_h, scale_w} of an ONNX Resize of a 4-D tensor when its
/// index map, as the ONNX Resize spec defines it for the node's mode, coordinate transformation,
/// rounding and constant roi/scales/sizes, is exactly y[n, c, h, w] = x[n, c, h / scale_h,
/// w / scale_w] (isa::ResizeParams); nullopt otherwise. The map is taken from the host library's
/// Resize run on an index ramp, so the two can never disagree.
std::optional<std::array<std::int64_t, 2>> nearest_repeat(const Graph& g, const Node& n);

/// TFLite's RESIZE_BILINEAR as the TFLite importer writes it (Resize with tflite_arithmetic = 1,
/// mode linear, axes [2, 3] of a 4-D NCHW uint8/int8 tensor, N and C kept, shapes known): its
/// {align_corners, half_pixel_centers} flags for LowLevelResize's TfliteBilinear mode, or
/// nullopt for any other node.
std::optional<std::array<bool, 2>> tflite_bilinear_flags(const Graph& g, const Node& n);

/// LowLevelResize's OnnxLinear params for an ONNX Resize (opset 11+) with mode linear of a 4-D
/// uint8/int8 tensor that the host library runs (host/cpu_ops.h: ONNX Runtime's 8-bit
/// arithmetic), with constant scales (N and C scales 1) or sizes (N and C kept), no `axes` and no
/// roi-based coordinate mode; nullopt for any other node.
std::optional<isa::ResizeParams> onnx_linear_resize(const Graph& g, const Node& n);

/// LowLevelSlice's per-dim starts and steps for an ONNX Slice (opset 1 attributes or opset 10+
/// constant inputs; host::slice_dim's clamping) of an 8-bit tensor of known shape, or nullopt
/// when an operand is not a constant or the node is malformed (the host library then reports it).
std::optional<isa::SliceParams> slice_params(const Graph& g, const Node& n);

/// LowLevelPad's params for an ONNX Pad (opset 11+: constant pads, constant_value and axes) of an
/// 8-bit tensor of known shape, or nullopt when an operand is not a constant, a mode is not an
/// ONNX one, or an edge/reflect/wrap pad would read an empty dim.
std::optional<isa::PadParams> pad_params(const Graph& g, const Node& n);

/// True when the per-tensor scales and zero points of inputs `quant_inputs` (scale, zero point
/// index pairs) of `n` are constant scalars, its data inputs `data` are 8-bit, and each data
/// input has at most the output's rank and broadcasts to it numpy-style (LowLevelAdd/Mul/Sub).
bool binary_claim(const Graph& g, const Node& n, std::initializer_list<std::size_t> data,
                  std::initializer_list<std::array<std::size_t, 2>> quant_inputs);

}  // namespace furiosa::compiler::detail
