// The NPU program format: what compiler-bridge produces and what every device backend executes.
//
// A Program is a list of LowLevel kernels over tensors placed in the device DRAM region that the
// program owns. Addresses are byte offsets from the start of that region. The region holds the
// program's constants (weights, biases) at [0, constants.size()) and activations after them.
//
// Arithmetic of every kernel follows the ONNX quantized operators (ONNX operator spec:
// QLinearConv, QLinearMatMul, MaxPool; ONNX Runtime contrib ops: com.microsoft.QLinearAdd):
// products are accumulated in int32 as (x - x_zp) * (w - w_zp), the int32 bias is added, the
// sum is multiplied in float by x_scale * w_scale / y_scale, rounded half to even, offset by y_zp
// and saturated to the output type. See requantize() below.
//
// Kernels that requantize (Conv2d, DepthwiseConv2d, MatMul, Add, Requantize) can instead carry
// the integer-only rule of TFLite's quantization specification: the real multiplier is an int32
// fixed-point significand and a power-of-two shift (QuantizedMultiplier), applied with
// multiply_by_quantized_multiplier() below, and the result is clamped to an output range (the
// fused activation). A kernel uses that rule exactly when its params hold a `fixed_point` value;
// the default is the ONNX float rule. The compiler chooses per model format (docs/operators.md).
#pragma once

#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "furiosa/core/tensor.h"
#include "furiosa/host/fixed_point.h"
#include "furiosa/host/index_map.h"
#include "furiosa/host/layout.h"
#include "furiosa/host/quantize.h"

namespace furiosa::isa {

/// Width alignment of the lowered activation layout, in elements. Warboy's tensor units work on
/// 32-element rows (DESIGN.md: "alignment losses when channels or width are not multiples of 32").
using host::kLoweredWidthAlign;

/// How a tensor's elements are placed in device memory.
enum class Layout : std::uint8_t {
  /// Dense row-major over the logical shape.
  Linear,
  /// 4-D NCHW activation with each row padded: element (n, c, h, w) is at
  /// ((n * C + c) * H + h) * Wp + w with Wp = W rounded up to kLoweredWidthAlign. Padding
  /// elements (w >= W) have unspecified values; kernels never read them.
  LoweredNCHW,
};

/// "linear" / "lowered_nchw".
std::string_view layout_name(Layout layout) noexcept;

/// W rounded up to kLoweredWidthAlign (the one rule, host/layout.h).
using host::padded_width;

/// A tensor in the program's DRAM region.
struct TensorRef {
  std::uint64_t address = 0;  ///< byte offset in the program's DRAM region
  DType dtype = DType::UInt8;
  Shape shape;                ///< logical shape (NCHW for LoweredNCHW)
  Layout layout = Layout::Linear;

  /// Bytes the tensor occupies in its layout (including row padding).
  std::uint64_t size_bytes() const noexcept;
};

/// Quantization parameters of a per-tensor quantized tensor: real = scale * (q - zero_point).
struct QuantParam {
  float scale = 1.0f;
  std::int32_t zero_point = 0;
};

/// The requantization step of QLinearConv / QLinearMatMul and the 8-bit saturation ranges: the
/// project's one quantization rule (host/quantize.h, ONNX operator spec).
using host::quant_range;
using host::requantize;

// ---- The fixed-point requantization rule -----------------------------------------------------
// TFLite's integer-only rule (host/fixed_point.h): a real multiplier as an int32 significand and
// a power-of-two shift, applied with multiply_by_quantized_multiplier().
using host::multiply_by_quantized_multiplier;
using host::quantize_multiplier;
using host::QuantizedMultiplier;
using host::rounding_divide_by_pot;
using host::saturating_rounding_doubling_high_mul;

/// Fixed-point requantization of one accumulator: clamp(multiply_by_quantized_multiplier(acc, m)
/// + zero_point, out_min, out_max), as TFLite's quantized Conv / DepthwiseConv / FullyConnected
/// reference kernels end.
inline std::int32_t requantize_fixed_point(std::int32_t acc, QuantizedMultiplier m,
                                           std::int32_t zero_point, std::int32_t out_min,
                                           std::int32_t out_max) noexcept {
  const std::int32_t v = multiply_by_quantized_multiplier(acc, m) + zero_point;
  return v < out_min ? out_min : (v > out_max ? out_max : v);
}

/// The fixed-point rule of a Conv2d / DepthwiseConv2d / MatMul kernel: the accumulator (bias
/// included) of output channel c becomes requantize_fixed_point(acc, multipliers[c or 0],
/// y.zero_point, out_min, out_max). The float scales of the params are then not used.
struct FixedPointRequant {
  std::vector<QuantizedMultiplier> multipliers;  ///< size 1 (per tensor) or one per channel
  /// Output clamp, inside the output type's range: the saturation range narrowed by a fused
  /// activation (TFLite CalculateActivationRangeQuantized, e.g. RELU6 -> [zp, zp + 6 / scale]).
  std::int32_t out_min = 0;
  std::int32_t out_max = 255;
};

/// LowLevelConv2d / LowLevelDepthwiseConv2d (QLinearConv with group == C).
/// inputs[0] = x [N, C, H, W] LoweredNCHW (uint8 or int8); outputs[0] = y [N, M, OH, OW]
/// LoweredNCHW. OH/OW are already computed by the compiler (including auto_pad).
struct Conv2dParams {
  TensorRef weight;                   ///< [M, C/group, kH, kW] Linear, int8 or uint8
  std::optional<TensorRef> bias;      ///< [M] Linear int32
  std::array<std::int64_t, 4> pads{};       ///< top, left, bottom, right
  std::array<std::int64_t, 2> strides{1, 1};
  std::array<std::int64_t, 2> dilations{1, 1};
  std::int64_t group = 1;
  QuantParam x;                       ///< input quantization
  std::vector<float> w_scale;         ///< size 1 (per-tensor) or M (per output channel)
  std::vector<std::int32_t> w_zero_point;  ///< size 1 or M
  QuantParam y;                       ///< output quantization
  /// Set: the fixed-point rule (multipliers of size 1 or M) instead of the float scales.
  std::optional<FixedPointRequant> fixed_point = std::nullopt;
};

/// LowLevelMaxPool (MaxPool on quantized data; max commutes with the monotonic dequantization
/// so no requantization is needed). inputs[0] = x LoweredNCHW; outputs[0] = y LoweredNCHW of the
/// same dtype. Padded positions never win (ONNX MaxPool pads with -inf).
struct MaxPoolParams {
  std::array<std::int64_t, 2> kernel{1, 1};
  std::array<std::int64_t, 4> pads{};  ///< top, left, bottom, right
  std::array<std::int64_t, 2> strides{1, 1};
  std::array<std::int64_t, 2> dilations{1, 1};
};

/// LowLevelMatMul (QLinearMatMul with a constant B). inputs[0] = a [..., M, K] Linear;
/// outputs[0] = y [..., M, N] Linear. B is [K, N] Linear in constants.
struct MatMulParams {
  TensorRef b;
  QuantParam a;
  std::vector<float> b_scale;               ///< size 1 or N (per column)
  std::vector<std::int32_t> b_zero_point;   ///< size 1 or N
  QuantParam y;
  /// [N] Linear int32 in constants, added to the int32 accumulator of each column before
  /// requantization (TFLite FULLY_CONNECTED's bias; ONNX QLinearMatMul has none).
  std::optional<TensorRef> bias = std::nullopt;
  /// Set: the fixed-point rule (multipliers of size 1 or N) instead of the float scales.
  std::optional<FixedPointRequant> fixed_point = std::nullopt;
};

/// The fixed-point rule of LowLevelAdd (TFLite's quantized ADD, reference_ops AddElementwise):
/// both operands are widened by 2^left_shift, scaled to a common scale, summed, and scaled to the
/// output:  sa = mbqm((a - a.zp) * 2^left_shift, a_mult), sb likewise,
/// y = clamp(mbqm(sa + sb, y_mult) + y.zp, out_min, out_max) with mbqm =
/// multiply_by_quantized_multiplier. TFLite uses left_shift 20 for 8-bit operands.
struct FixedPointAdd {
  std::int32_t left_shift = 20;
  QuantizedMultiplier a_mult;
  QuantizedMultiplier b_mult;
  QuantizedMultiplier y_mult;
  std::int32_t out_min = 0;  ///< output clamp inside the output type's range (fused activation)
  std::int32_t out_max = 255;
};

/// Which float32 arithmetic a LowLevelAdd without a fixed-point rule computes. The two round
/// differently in about one element in 10^5 (ties of the final rounding), so each model gets the
/// one its reference runtime runs.
enum class AddFormula : std::uint8_t {
  /// DequantizeLinear, Add, QuantizeLinear in float32: y = saturate(nearbyint((a.scale (a - a.zp)
  /// + b.scale (b - b.zp)) / y.scale) + y.zp). What ONNX Runtime 1.30 runs for a QDQ group it
  /// does not fuse (int8 DequantizeLinear x2 -> Add -> QuantizeLinear on x86-64).
  Dequantized,
  /// ONNX Runtime 1.30's QLinearAdd on x86-64 (onnxruntime/core/mlas/lib/qladd_avx2.cpp,
  /// MlasQLinearAddKernelAvx2Helper, compiled with FMA contraction), for com.microsoft
  /// QLinearAdd and the uint8 QDQ groups ORT fuses into it: with the float32 ratios
  /// rA = a.scale / y.scale, rB = b.scale / y.scale and the raw 8-bit codes, V the operand ORT
  /// streams and S the other, fixed = float(y.zp) - fma(rV, V.zp, rS * S.zp) and
  /// y = saturate(nearbyint(fma(v, rV, fma(s, rS, fixed)))). V is a, except where a is the operand
  /// broadcast along the innermost dim of the output (ORT's "input0 scalar" spans, which call
  /// the kernel with the operands swapped), or a has a single element.
  MlasRatios,
  /// MlasRatios on int8 operands and output moved to uint8: every code and zero point + 128, the
  /// result's uint8 code - 128. ONNX Runtime 1.30 runs an int8 QDQ Add group so on x86-64: its
  /// QDQS8ToU8Transformer turns each int8 QuantizeLinear -> DequantizeLinear pair whose Q feeds
  /// only that DQ into uint8 (onnxruntime/core/optimizer/qdq_transformer/qdq_s8_to_u8.cc)
  /// before the group is fused into a uint8 QLinearAdd.
  MlasRatiosUint8,
};

/// LowLevelAdd (com.microsoft QLinearAdd; QDQ DequantizeLinear x2 -> Add -> QuantizeLinear): the
/// float32 formula `formula` (AddFormula), rounded half to even, saturated; or TFLite's
/// fixed-point rule. inputs[0] = a, inputs[1] = b (may be a constant). With LoweredNCHW operands
/// all three shapes are equal; with Linear operands a and b have y's rank and broadcast
/// numpy-style (each dim equal or 1).
struct AddParams {
  QuantParam a;
  QuantParam b;
  QuantParam y;
  /// Set: the fixed-point rule of FixedPointAdd instead of the float formula.
  std::optional<FixedPointAdd> fixed_point = std::nullopt;
  /// The float32 formula (ignored with fixed_point). Dequantized is the default of program files
  /// written before 2026-11-28, which carry no formula.
  AddFormula formula = AddFormula::Dequantized;
};

/// "dequantized" / "mlas_ratios" / "mlas_ratios_u8" (program files, docs).
std::string_view add_formula_name(AddFormula formula) noexcept;

/// LowLevelReshape: copies inputs[0] (any layout) to outputs[0] (any layout) in logical row-major
/// order. Element counts are equal. Used for Reshape/Flatten/Squeeze/Unsqueeze and to change
/// layout (enter or leave the lowered layout on the NPU).
struct ReshapeParams {};

/// LowLevelRequantize: moves inputs[0] from quantization `x` to `y` (same shape, any layouts,
/// uint8/int8 each), exactly as DequantizeLinear then QuantizeLinear in float32 would:
/// f = float(x - x.zero_point) * x.scale; y = saturate(nearbyint(f / y.scale) + y.zero_point).
struct RequantizeParams {
  QuantParam x;
  QuantParam y;
  /// Empty, or 256 entries: then y = table[byte of x] (the input's raw byte, int8 read as its
  /// two's-complement byte) replaces the float formula. The compiler fills it when a model format
  /// defines another per-element rule (TFLite's fixed-point QUANTIZE, an activation clamp, ...);
  /// every 8-bit element map is such a table.
  std::vector<std::uint8_t> table = {};
};

/// LowLevelConcat: outputs[0] = inputs concatenated along `axis` (all the same dtype and rank;
/// any layouts). No arithmetic (inputs share the output's quantization).
struct ConcatParams {
  std::int64_t axis = 0;
};

/// LowLevelTranspose: outputs[0][i_perm[0], ..., i_perm[r-1]] = inputs[0][i_0, ..., i_{r-1}],
/// i.e. output dim d is input dim perm[d] (ONNX Transpose). Any layouts.
struct TransposeParams {
  std::vector<std::int64_t> perm;
};

/// LowLevelSplit: inputs[0] split along `axis` into outputs (sizes given by the outputs' shapes,
/// in order). Any layouts.
struct SplitParams {
  std::int64_t axis = 0;
};

/// LowLevelGlobalAveragePool (com.microsoft QLinearGlobalAveragePool, NCHW): inputs[0] = x
/// [N, C, H, W] (any layout), outputs[0] = y [N, C, 1, 1]. sum = sum over H*W of (x - x.zp) in
/// int32; mult = x.scale / (y.scale * float(H * W)) in float32; y = requantize(sum, mult, y.zp).
struct GlobalAveragePoolParams {
  QuantParam x;
  QuantParam y;
  /// Set {out_min, out_max}: TFLite's quantized AVERAGE_POOL_2D with one window over the whole
  /// input instead of the formula above (x and y share their quantization, as TFLite requires;
  /// `x` and `y` are unused): count = H * W, sum = the stored values summed in int32,
  /// y = clamp((sum + count / 2) / count, out_min, out_max) for sum >= 0 and
  /// (sum - count / 2) / count otherwise (integer division: rounding half away from zero), the
  /// reference kernels' integer mean (tensorflow/lite/kernels/internal/reference/pooling.h and
  /// integer_ops/pooling.h); out_min/out_max are the fused activation's clamp.
  std::optional<std::array<std::int32_t, 2>> integer_mean_clamp = std::nullopt;
};

/// LowLevelResize on a 4-D [N, C, H, W] tensor, same dtype in and out (any layouts), in one of
/// two modes:
/// - NearestRepeat: nearest-neighbour upsampling by whole factors,
///   y[n, c, h, w] = x[n, c, floor(h / scale_h), floor(w / scale_w)], y [N, C, H * scale_h,
///   W * scale_w] (no arithmetic). The compiler maps an ONNX Resize onto it only when the Resize's
///   own index map (its mode, coordinate transformation and rounding) is exactly this repeat,
///   e.g. YOLO's and FPN's x2 nearest upsampling.
/// - TfliteBilinear: TFLite's RESIZE_BILINEAR on uint8 or int8 stored values to y [N, C, OH, OW]
///   (any sizes), bit-exact with TFLite's reference kernels (uint8: float32 weights, the sum
///   plus 0.5 truncated, i.e. rounded half up; int8: 10-bit fixed point rounded half away from zero) with its align_corners and
///   half_pixel_centers flags; the arithmetic is the host operator library's (host/cpu_ops.h,
///   Resize with tflite_arithmetic = 1), so the NPU and host paths agree by construction.
///   Quantization parameters pass through unchanged, as in TFLite.
/// - OnnxLinear: ONNX Resize, mode linear, on uint8 or int8 stored values to y [N, C, OH, OW]
///   with ONNX Runtime's 8-bit arithmetic (10-bit fixed-point weights, truncated, as ONNX Runtime
///   computes a Resize between QLinearConvs); the arithmetic is the host operator library's
///   Resize on the same node (host/cpu_ops.h), so the NPU and host paths agree by construction.
///   `coordinate_transformation_mode` is the node's; `scales` the node's H and W scales when it
///   gave scales (N and C scales 1), unset when it gave sizes (then y's shape is the sizes).
struct ResizeParams {
  enum class Mode : std::uint8_t { NearestRepeat, TfliteBilinear, OnnxLinear };
  std::int64_t scale_h = 1;  ///< NearestRepeat: whole factors >= 1
  std::int64_t scale_w = 1;
  Mode mode = Mode::NearestRepeat;
  bool align_corners = false;       ///< TfliteBilinear: TFLite's align_corners option
  bool half_pixel_centers = false;  ///< TfliteBilinear: TFLite's half_pixel_centers option
  std::string coordinate_transformation_mode = {};      ///< OnnxLinear
  std::optional<std::array<float, 2>> scales = std::nullopt;  ///< OnnxLinear: {scale_h, scale_w}
};

/// LowLevelSlice (ONNX Slice, TFLite STRIDED_SLICE without shrink): outputs[0][i_0, ..., i_{r-1}]
/// = inputs[0][starts[0] + i_0 * steps[0], ..., starts[r-1] + i_{r-1} * steps[r-1]], one entry
/// per dim of the input, starts already resolved by the compiler (ONNX Slice's clamping applied:
/// every selected index lies inside the input), steps non-zero (negative: backwards). Same dtype
/// and rank in and out, any layouts, no arithmetic.
struct SliceParams {
  std::vector<std::int64_t> starts;
  std::vector<std::int64_t> steps;
};

/// LowLevelPad (ONNX Pad on 8-bit data): output dim d holds input dim d shifted by begins[d]
/// (negative: the input is cropped); the end amounts follow from the shapes. Positions outside
/// the input get, by `mode` (ONNX Pad, opset 19): Constant the stored byte `value` (the quantized
/// constant_value, e.g. the zero point for a real 0); Edge the nearest edge element; Reflect the
/// mirror image without repeating the edge (numpy 'reflect', repeated for long pads); Wrap the
/// periodic continuation. The index rule is host::pad_source (host/index_map.h), shared with the
/// host operator library. Same dtype and rank in and out, any layouts.
struct PadParams {
  using Mode = host::PadMode;
  std::vector<std::int64_t> begins;
  Mode mode = Mode::Constant;
  std::int32_t value = 0;  ///< Constant: the stored value, in the range of the dtype
};

/// LowLevelMul (com.microsoft QLinearMul, and QDQ DequantizeLinear x2 -> Mul -> QuantizeLinear):
/// the formula of the contrib operator's documentation, which ONNX Runtime's kernel computes:
/// y = saturate(nearbyint(float32((a - a.zp) * (b - b.zp)) * ratio + float32(y.zp))) with
/// ratio = a.scale * b.scale / y.scale in float32 (that order), the integer product exact.
/// inputs[0] = a, inputs[1] = b, outputs[0] = y; 8-bit each; a and b have y's rank and broadcast
/// numpy-style (each dim equal or 1); any layouts (LoweredNCHW only with equal shapes).
struct MulParams {
  QuantParam a;
  QuantParam b;
  QuantParam y;
  /// True: instead of the formula above, DequantizeLinear, Mul and QuantizeLinear in float32,
  /// y = saturate(nearbyint((float32(a - a.zp) * a.scale) * (float32(b - b.zp) * b.scale) /
  /// y.scale) + y.zp): what ONNX Runtime 1.30 runs for the int8 QDQ groups it does not fuse on
  /// x86-64. False (the default, and that of program files without the key): the formula above.
  bool dequantized = false;
};

/// LowLevelSub (QDQ DequantizeLinear x2 -> Sub -> QuantizeLinear, as ONNX Runtime runs it unfused):
/// fa = float32(a - a.zp) * a.scale, fb likewise, y = saturate(nearbyint((fa - fb) / y.scale) +
/// y.zp), every step in float32, i.e. exactly DequantizeLinear, Sub and QuantizeLinear in float32.
/// Operands and layouts as LowLevelMul.
struct SubParams {
  QuantParam a;
  QuantParam b;
  QuantParam y;
};

/// Kinds of LowLevel kernels. Each has one row in the descriptor table of kernel_kinds.h (name,
/// arity, params alternative, MACs, timing unit); that header lists what adding a kind takes.
/// The last enumerator is kernel_kinds.h's kLastKernelKind.
enum class KernelKind : std::uint8_t {
  Conv2d, DepthwiseConv2d, MaxPool, MatMul, Add, Reshape,
  Requantize, Concat, Transpose, Split, GlobalAveragePool, Resize,
  Slice, Pad, Mul, Sub
};

/// "LowLevelConv2d", "LowLevelDepthwiseConv2d", "LowLevelMaxPool", "LowLevelMatMul",
/// "LowLevelAdd", "LowLevelReshape", "LowLevelRequantize", "LowLevelConcat", "LowLevelTranspose",
/// "LowLevelSplit", "LowLevelGlobalAveragePool", "LowLevelResize", "LowLevelSlice", "LowLevelPad",
/// "LowLevelMul", "LowLevelSub" (the span names of kernels in the trace); "LowLevelUnknown" for a
/// value outside the enum. A lookup into kernel_kinds.h's table. Thread-safe.
std::string_view kernel_name(KernelKind kind) noexcept;

/// One kernel of a program.
struct Kernel {
  KernelKind kind = KernelKind::Reshape;
  std::string node_name;          ///< the ONNX node it came from
  std::int32_t operator_index = -1;  ///< index of that node in the ONNX graph
  std::vector<TensorRef> inputs;
  std::vector<TensorRef> outputs;
  std::variant<Conv2dParams, MaxPoolParams, MatMulParams, AddParams, ReshapeParams, RequantizeParams,
               ConcatParams, TransposeParams, SplitParams, GlobalAveragePoolParams, ResizeParams, SliceParams,
               PadParams, MulParams, SubParams>
      params;
};

/// A compiled NPU program. Immutable once built; shared read-only between threads.
struct Program {
  std::string name;
  std::vector<Kernel> kernels;          ///< executed in order
  std::vector<std::byte> constants;     ///< placed at address 0 of the program's DRAM region
  std::uint64_t dram_bytes = 0;         ///< total DRAM region size (constants + activations)
  std::vector<TensorRef> inputs;        ///< written by Load (DMA host->device) before execution
  std::vector<TensorRef> outputs;       ///< read by Store (DMA device->host) after execution
};

/// Multiply-accumulates a kernel performs (0 for data movement kernels and malformed kernels).
/// A lookup into kernel_kinds.h's table. Thread-safe.
std::uint64_t kernel_macs(const Kernel& kernel);

/// How many inputs and outputs a kernel kind reads and writes: [in_min, in_max] and
/// [out_min, out_max], a max of 0 meaning any number >= min (Concat inputs, Split outputs).
struct KernelArity {
  std::size_t in_min, in_max, out_min, out_max;
};
/// The arity of `kind` ({1, 1, 1, 1} for a value outside the enum). A lookup into
/// kernel_kinds.h's table. Thread-safe.
KernelArity kernel_arity(KernelKind kind) noexcept;

/// Index of the Kernel::params alternative that kernels of `kind` carry (std::variant_npos for a
/// value outside the enum). A lookup into kernel_kinds.h's table. Thread-safe.
std::size_t kernel_params_index(KernelKind kind) noexcept;

/// Checks that `program` runs without touching memory outside its own DRAM region: the
/// constants fit it; every TensorRef (kernel inputs and outputs, weights and biases, program
/// inputs and outputs) lies inside [0, dram_bytes) with overflow-checked sizes; lowered tensors
/// are 4-D; each kernel carries the params of its kind and an operand count its kind allows;
/// a Transpose's perm has one axis per input dim. Returns the first problem as
/// "<where>: <what>" (where = "kernels[3].inputs[0]", "constants", ...; a kernel's problem ends
/// with " (in <kernel name> '<node>')", the node escaped), or "" when there is none. The one check every path into a device takes: the program-file loader and every
/// backend's Device::load() call it (a compiler bug must not become a wild write). Thread-safe.
std::string verify(const Program& program);

/// The kernel part of verify(): checks `kernel` as verify() checks each kernel of a program whose
/// DRAM region has `dram_bytes` bytes (operand counts, params alternative, every TensorRef inside
/// the region, a Transpose's perm), naming it `where` ("kernels[3]"). Returns verify()'s message
/// for it ("<where>.inputs[0]: ... (in <kernel name> '<node>')") or "" when there is no problem.
/// The simulator runs it before a kernel that comes from no verified program. Thread-safe.
std::string verify_kernel(const Kernel& kernel, std::uint64_t dram_bytes,
                          std::string_view where = "kernel");

}  // namespace furiosa::isa
