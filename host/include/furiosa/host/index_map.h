// Index rules of the data-movement operators that the host operator library and the NPU
// kernels share (ONNX operator spec: Pad), so the two paths cannot disagree.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>

namespace furiosa::host {

/// ONNX Pad's `mode` attribute (opset 19 adds wrap).
enum class PadMode : std::uint8_t { Constant, Edge, Reflect, Wrap };

/// The PadMode named `name` ("constant", "edge", "reflect", "wrap"), or nullopt.
inline std::optional<PadMode> pad_mode(std::string_view name) noexcept {
  if (name == "constant") return PadMode::Constant;
  if (name == "edge") return PadMode::Edge;
  if (name == "reflect") return PadMode::Reflect;
  if (name == "wrap") return PadMode::Wrap;
  return std::nullopt;
}

/// The input index that output index `o` of a padded dim reads, for an input dim of `n` elements
/// with `begin` leading pads (negative: cropped), or -1 for the constant value: Constant gives -1
/// outside [0, n); Edge repeats the edge element; Reflect mirrors without repeating the edge
/// (numpy 'reflect', repeated for pads longer than the dim); Wrap is periodic. An empty dim
/// (n == 0) gives -1 in every mode. Pure, thread-safe.
inline std::int64_t pad_source(PadMode mode, std::int64_t o, std::int64_t begin, std::int64_t n) noexcept {
  std::int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  if (mode == PadMode::Constant || n == 0) return -1;
  if (mode == PadMode::Edge) return std::clamp<std::int64_t>(i, 0, n - 1);
  if (mode == PadMode::Wrap) return ((i % n) + n) % n;
  if (n == 1) return 0;
  const std::int64_t period = 2 * (n - 1);
  i = ((i % period) + period) % period;
  return i < n ? i : period - i;
}

/// One sliced dim of ONNX Slice (operator spec, opset 13): the first input index read and the
/// number of elements read with the (non-zero) step.
struct SliceDim {
  std::int64_t start = 0;
  std::int64_t length = 0;
};

/// ONNX Slice's rule for one dim of `dim` elements: negative start/end count from the end, then
/// both are clamped to [0, dim] (step > 0) or [0, dim - 1] and [-1, dim - 1] (step < 0), and
/// the length is the number of steps from start that stay before end. `step` must not be 0.
inline SliceDim slice_dim(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step) noexcept {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<std::int64_t>(start, 0, dim);
    end = std::clamp<std::int64_t>(end, 0, dim);
    return {start, end > start ? (end - start + step - 1) / step : 0};
  }
  if (dim <= 0) return {0, 0};
  start = std::clamp<std::int64_t>(start, 0, dim - 1);
  end = std::clamp<std::int64_t>(end, -1, dim - 1);
  return {start, start > end ? (start - end - step - 1) / -step : 0};
}

}  // namespace furiosa::host
