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
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "furiosa/device/tensor.h"

namespace furiosa::isa {

/// Width alignment of the lowered activation layout, in elements. Warboy's tensor units work on
/// 32-element rows (DESIGN.md: "alignment losses when channels or width are not multiples of 32").
inline constexpr std::int64_t kLoweredWidthAlign = 32;

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

/// W rounded up to kLoweredWidthAlign.
inline std::int64_t padded_width(std::int64_t w) noexcept {
  return (w + kLoweredWidthAlign - 1) / kLoweredWidthAlign * kLoweredWidthAlign;
}

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

/// Rounds acc * multiplier half to even, adds zero_point and saturates to [qmin, qmax].
/// This is the requantization step of QLinearConv / QLinearMatMul (ONNX operator spec).
inline std::int32_t requantize(std::int32_t acc, float multiplier, std::int32_t zero_point,
                               std::int32_t qmin, std::int32_t qmax) noexcept {
  float v = std::nearbyint(static_cast<float>(acc) * multiplier);  // FE_TONEAREST: half to even
  float q = v + static_cast<float>(zero_point);
  if (q < static_cast<float>(qmin)) return qmin;
  if (q > static_cast<float>(qmax)) return qmax;
  return static_cast<std::int32_t>(q);
}

/// Saturation range of an 8-bit type: [0, 255] for UInt8, [-128, 127] for Int8.
std::array<std::int32_t, 2> quant_range(DType dtype);

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
};

/// LowLevelAdd (com.microsoft QLinearAdd): y = (a_scale (a - a_zp) + b_scale (b - b_zp)) / y_scale
/// + y_zp, computed in float, rounded half to even, saturated. inputs[0] = a, inputs[1] = b
/// (may be a constant). With LoweredNCHW operands all three shapes are equal; with Linear
/// operands a and b have y's rank and broadcast numpy-style (each dim equal or 1).
struct AddParams {
  QuantParam a;
  QuantParam b;
  QuantParam y;
};

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
};

/// Kinds of LowLevel kernels.
enum class KernelKind : std::uint8_t {
  Conv2d, DepthwiseConv2d, MaxPool, MatMul, Add, Reshape,
  Requantize, Concat, Transpose, Split, GlobalAveragePool
};

/// "LowLevelConv2d", "LowLevelDepthwiseConv2d", "LowLevelMaxPool", "LowLevelMatMul",
/// "LowLevelAdd", "LowLevelReshape", "LowLevelRequantize", "LowLevelConcat", "LowLevelTranspose",
/// "LowLevelSplit", "LowLevelGlobalAveragePool" (the span names of kernels in the trace).
std::string_view kernel_name(KernelKind kind) noexcept;

/// One kernel of a program.
struct Kernel {
  KernelKind kind = KernelKind::Reshape;
  std::string node_name;          ///< the ONNX node it came from
  std::int32_t operator_index = -1;  ///< index of that node in the ONNX graph
  std::vector<TensorRef> inputs;
  std::vector<TensorRef> outputs;
  std::variant<Conv2dParams, MaxPoolParams, MatMulParams, AddParams, ReshapeParams, RequantizeParams,
               ConcatParams, TransposeParams, SplitParams, GlobalAveragePoolParams>
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

/// Multiply-accumulates a kernel performs (0 for data movement kernels).
std::uint64_t kernel_macs(const Kernel& kernel);

}  // namespace furiosa::isa
