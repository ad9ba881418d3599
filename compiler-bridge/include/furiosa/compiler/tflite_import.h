// TFLite import: .tflite FlatBuffer files (uint8 per-tensor and int8 per-channel quantized
// models) -> graph IR, read through the project's own schema subset
// (compiler-bridge/schema/tflite_subset.fbs, compiled by Debian's flatc).
//
// Mapping (docs/operators.md, "TFLite models"): CONV_2D and DEPTHWISE_CONV_2D become QLinearConv,
// TRANSPOSE_CONV a QLinearConv of flipped weights over the zero-point-spread input (8-bit) or
// furiosa::TFLiteTransposeConv (float32, host),
// FULLY_CONNECTED QLinearMatMul with a bias, ADD com.microsoft::QLinearAdd, MAX_POOL_2D MaxPool,
// AVERAGE_POOL_2D furiosa::QuantizedAveragePool (host), RESHAPE Reshape, SOFTMAX DequantizeLinear ->
// Softmax -> QuantizeLinear (host, float), CONCATENATION Concat, PAD Concat with constant
// zero-point blocks, QUANTIZE QuantizeLinear (float input) or furiosa::Requantize (8-bit input),
// DEQUANTIZE DequantizeLinear, LOGISTIC furiosa::Requantize with TFLite's 256-entry sigmoid table
// (uint8/int8; output scale 1/256 required) or Sigmoid (float32), RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR Resize (host) with
// tflite_arithmetic = 1 (TFLite's reference resize arithmetic, host/cpu_ops.h), ARG_MAX / ARG_MIN
// ArgMax / ArgMin (host; + Cast for int32 outputs), MEAN furiosa::QuantizedMean (uint8/int8,
// TFLite's QuantizedMeanOrSum) or ReduceMean (float32) on the host, the shape operators SHAPE,
// STRIDED_SLICE, PACK, TILE, GATHER, CAST, FILL, RANGE as ONNX Shape/Slice/Concat/Tile/Gather/
// Cast/Expand/Range (folded to constants by the compiler when their inputs are constant), and
// the custom operator TFLite_Detection_PostProcess furiosa::TFLiteDetectionPostProcess (host).
// Every requantizing node carries TFLite's fixed-point multipliers
// and the clamp of its fused activation (NONE, RELU, RELU_N1_TO_1, RELU6) as the attributes of
// graph.h, so the NPU applies TFLite's integer rule (QuantizeMultiplier,
// SaturatingRoundingDoublingHighMul, RoundingDivideByPOT; ADD's left_shift 20) rather than ONNX's
// float scale.
//
// Layout: TFLite images are NHWC. Graph inputs and outputs keep the model's own shapes and are
// marked Value::format "NHWC" (4-D); inside, convolutions and pools work on NCHW views made by
// Transpose nodes (Reshape where the element order is the same), which the compiler turns into
// the host Lower step at the inputs.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "furiosa/compiler/graph.h"
#include "furiosa/core/limits.h"

namespace furiosa::compiler {

/// Reads a .tflite file (subgraph 0). Throws Error naming the file and, where it applies, the
/// operator index and builtin operator name:
///  - ModelLoadFailed: missing/unreadable file, not a TFLite FlatBuffer (identifier "TFL3"),
///    a buffer that fails FlatBuffers verification, a schema version other than 3, or indices
///    out of range;
///  - UnsupportedOperator: builtin operators outside tflite_supported_operators() (all of them
///    listed in one error, each as "operator <index>: <NAME> (builtin code <code>)"), custom
///    operators other than TFLite_Detection_PostProcess, STRIDED_SLICE with ellipsis_mask or
///    new_axis_mask, float variants of the quantized compute operators, unsupported fused
///    activations (TANH, SIGN_BIT);
///  - IncompatibleModel: a tensor whose dims exceed `limits` (rank, elements, bytes; checked before
///    anything is allocated) or whose buffer does not hold exactly the bytes its shape needs,
///    constant data over limits.max_total_bytes, and supported operators used in ways the
///    mapping does not handle (tensor
///    types other than float32/uint8/int8/int32/int64, per-channel activations, sparse or external
///    buffers, shapes that do not fit, ...).
Graph import_tflite(const std::filesystem::path& path, const LoadLimits& limits = {});

/// Same for a model held in memory; `source` names it in error messages.
Graph import_tflite_bytes(const std::string& bytes, const std::string& source, const LoadLimits& limits = {});

/// True when `bytes` start like a TFLite FlatBuffer: at least 8 bytes with the file identifier
/// "TFL3" at offset 4.
bool is_tflite_bytes(const std::string& bytes) noexcept;

/// The builtin operator name of a TFLite builtin code ("CONV_2D" for 3, "QUANTIZE" for 114),
/// or "BUILTIN_<code>" for a code this build does not name.
std::string tflite_builtin_name(int code);

/// Builtin operators import_tflite maps, by name (in builtin-code order of the original set, then
/// the later additions), and last the custom operators as "CUSTOM:<custom_code>".
std::vector<std::string> tflite_supported_operators();

/// A supported TFLite operator and the tensor types with which its mapping runs on the NPU and on
/// the host, as the importer's table declares them (compiler-bridge/src/tflite/importer.cpp;
/// docs/operators.md's generated operator index, tools/operator_index.cpp). Types are those of
/// input `operand` ("uint8, int8"); an empty string means none. The importer refuses an operator
/// whose input `operand` has a type in neither list (Error UnsupportedOperator naming the
/// operator, the tensor and its type), from the same table, so the lists cannot drift from what
/// the import accepts.
struct TfliteOperatorInfo {
  std::string name;  ///< as tflite_supported_operators() names it
  std::string npu;   ///< types placed on the NPU
  std::string host;  ///< types run on the host (or folded to constants)
  int operand = 0;   ///< the input whose types npu and host list; -1: none is checked (SHAPE)
};

/// tflite_supported_operators() with the types of each (TfliteOperatorInfo), in the same order.
std::vector<TfliteOperatorInfo> tflite_operator_table();

/// Reads a model file of either format: TFLite when the file name ends in ".tflite" (any case) or
/// its bytes carry the "TFL3" identifier, ONNX otherwise (compiler/onnx_import.h). Throws like
/// import_tflite / import_onnx.
Graph import_model(const std::filesystem::path& path, const LoadLimits& limits = {});

/// Same for a model file already read into memory (`bytes`); `path` gives the extension rule and
/// names the model in error messages. Throws like import_tflite_bytes / import_onnx_bytes.
Graph import_model_bytes(const std::string& bytes, const std::filesystem::path& path,
                         const LoadLimits& limits = {});

}  // namespace furiosa::compiler
