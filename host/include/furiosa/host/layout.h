// The one relayout between dense tensors and the NPU's lowered layout (isa::Layout::LoweredNCHW:
// 4-D NCHW with every row of W elements padded to a multiple of 32 elements). Used by the
// runtime's Lower/Unlower steps, the compiler's constant layout and the tests' references.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "furiosa/core/tensor.h"

namespace furiosa::host {

/// Row alignment of the lowered layout, in elements (the MAC array's width; DESIGN.md).
inline constexpr std::int64_t kLoweredWidthAlign = 32;

/// W rounded up to kLoweredWidthAlign.
constexpr std::int64_t padded_width(std::int64_t w) noexcept {
  return (w + kLoweredWidthAlign - 1) / kLoweredWidthAlign * kLoweredWidthAlign;
}

/// Bytes of a lowered tensor of 4-D `nchw` with elements of `element_size` bytes.
std::size_t lowered_size(const Shape& nchw, std::size_t element_size) noexcept;

/// Dense NCHW `in` -> lowered `out` (lowered_size bytes); row padding is zeroed.
void lower(const Shape& nchw, std::size_t element_size, std::span<const std::byte> in,
           std::span<std::byte> out);
/// Lowered `in` -> dense NCHW `out` (padding dropped).
void unlower(const Shape& nchw, std::size_t element_size, std::span<const std::byte> in,
             std::span<std::byte> out);
/// Dense NHWC [N, H, W, C] `in` -> lowered NCHW [N, C, H, W] `out` (a transpose fused into the
/// lowering; row padding zeroed), as a TFLite image input is lowered.
void lower_nhwc(const Shape& nhwc, std::size_t element_size, std::span<const std::byte> in,
                std::span<std::byte> out);

}  // namespace furiosa::host
