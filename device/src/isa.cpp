// Helpers of the NPU program format.
#include "furiosa/device/isa.h"

#include <fmt/format.h>

#include <cmath>

#include "furiosa/core/error.h"

namespace furiosa::isa {

std::string_view layout_name(Layout layout) noexcept {
  switch (layout) {
    case Layout::Linear: return "linear";
    case Layout::LoweredNCHW: return "lowered_nchw";
  }
  return "unknown";
}

std::uint64_t TensorRef::size_bytes() const noexcept {
  // A malformed ref (negative dim, lowered but not rank 4) occupies nothing; kernels and the
  // simulator reject such refs with a proper error before using them.
  for (std::int64_t d : shape) {
    if (d < 0) return 0;
  }
  const auto esize = static_cast<std::uint64_t>(dtype_size(dtype));
  switch (layout) {
    case Layout::Linear: return static_cast<std::uint64_t>(element_count(shape)) * esize;
    case Layout::LoweredNCHW: {
      if (shape.size() != 4) return 0;
      const auto rows = static_cast<std::uint64_t>(shape[0] * shape[1] * shape[2]);
      return rows * static_cast<std::uint64_t>(padded_width(shape[3])) * esize;
    }
  }
  return 0;
}

std::string_view kernel_name(KernelKind kind) noexcept {
  switch (kind) {
    case KernelKind::Conv2d: return "LowLevelConv2d";
    case KernelKind::DepthwiseConv2d: return "LowLevelDepthwiseConv2d";
    case KernelKind::MaxPool: return "LowLevelMaxPool";
    case KernelKind::MatMul: return "LowLevelMatMul";
    case KernelKind::Add: return "LowLevelAdd";
    case KernelKind::Reshape: return "LowLevelReshape";
    case KernelKind::Requantize: return "LowLevelRequantize";
    case KernelKind::Concat: return "LowLevelConcat";
    case KernelKind::Transpose: return "LowLevelTranspose";
    case KernelKind::Split: return "LowLevelSplit";
    case KernelKind::GlobalAveragePool: return "LowLevelGlobalAveragePool";
    case KernelKind::Resize: return "LowLevelResize";
    case KernelKind::Slice: return "LowLevelSlice";
    case KernelKind::Pad: return "LowLevelPad";
    case KernelKind::Mul: return "LowLevelMul";
    case KernelKind::Sub: return "LowLevelSub";
  }
  return "LowLevelUnknown";
}

namespace {

// Non-negative dim as unsigned (negative dims count as 0 so malformed kernels cost nothing).
std::uint64_t udim(std::int64_t d) noexcept { return d > 0 ? static_cast<std::uint64_t>(d) : 0; }

// N * M * OH * OW * (C / group) * kH * kW; 0 when the shapes are not those of a convolution.
std::uint64_t conv_macs(const Kernel& kernel) {
  const auto* p = std::get_if<Conv2dParams>(&kernel.params);
  if (p == nullptr || kernel.inputs.empty() || kernel.outputs.empty()) return 0;
  const Shape& x = kernel.inputs[0].shape;
  const Shape& y = kernel.outputs[0].shape;
  const Shape& w = p->weight.shape;
  if (x.size() != 4 || y.size() != 4 || w.size() != 4 || p->group <= 0) return 0;
  const std::uint64_t c_per_group = udim(x[1]) / static_cast<std::uint64_t>(p->group);
  return udim(y[0]) * udim(y[1]) * udim(y[2]) * udim(y[3]) * c_per_group * udim(w[2]) * udim(w[3]);
}

// batch * M * N * K for a [..., M, K] x [K, N] product; 0 when the shapes do not fit.
std::uint64_t matmul_macs(const Kernel& kernel) {
  const auto* p = std::get_if<MatMulParams>(&kernel.params);
  if (p == nullptr || kernel.inputs.empty()) return 0;
  const Shape& a = kernel.inputs[0].shape;
  const Shape& b = p->b.shape;
  if (a.size() < 2 || b.size() != 2) return 0;
  std::uint64_t batch = 1;
  for (std::size_t i = 0; i + 2 < a.size(); ++i) batch *= udim(a[i]);
  return batch * udim(a[a.size() - 2]) * udim(b[1]) * udim(a[a.size() - 1]);
}

// N * C * H * W: one accumulation per input element, as a depthwise H x W convolution with unit
// weights would do; 0 when the input is not of rank 4.
std::uint64_t global_average_pool_macs(const Kernel& kernel) {
  if (kernel.inputs.empty()) return 0;
  const Shape& x = kernel.inputs[0].shape;
  if (x.size() != 4) return 0;
  return udim(x[0]) * udim(x[1]) * udim(x[2]) * udim(x[3]);
}

}  // namespace

std::uint64_t kernel_macs(const Kernel& kernel) {
  switch (kernel.kind) {
    case KernelKind::Conv2d:
    case KernelKind::DepthwiseConv2d: return conv_macs(kernel);
    case KernelKind::MatMul: return matmul_macs(kernel);
    // GlobalAveragePool counts its N*C*H*W accumulations (a depthwise H x W conv with unit
    // weights); the timing model still costs it by the bytes it streams (see sim/timing.cpp).
    case KernelKind::GlobalAveragePool: return global_average_pool_macs(kernel);
    // Data movement and elementwise kernels perform no multiply-accumulates.
    case KernelKind::MaxPool:
    case KernelKind::Add:
    case KernelKind::Reshape:
    case KernelKind::Requantize:
    case KernelKind::Concat:
    case KernelKind::Transpose:
    case KernelKind::Split:
    case KernelKind::Resize:
    case KernelKind::Slice:
    case KernelKind::Pad:
    case KernelKind::Mul:
    case KernelKind::Sub: return 0;
  }
  return 0;
}

}  // namespace furiosa::isa
