// Helpers of the data-movement kernel tests (test_data_movement.cpp, test_resize_kernel.cpp):
// dense values to and from a tensor's layout, the zero-padding check, index arithmetic, and a
// one-program run whose outputs start as garbage.
#pragma once

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "device_test_util.h"

namespace furiosa::device::test {

/// Dense row-major values -> bytes of `ref` in its layout (row padding = kGarbage).
inline std::vector<std::byte> pack(const std::vector<std::int32_t>& dense,
                                   const isa::TensorRef& ref) {
  REQUIRE(dense.size() == static_cast<std::size_t>(element_count(ref.shape)));
  if (ref.layout == isa::Layout::LoweredNCHW) return lower(dense, ref.shape, ref.dtype);
  return to_bytes(dense, ref.dtype);
}

/// Bytes of `ref` in its layout -> dense row-major values (8-bit or int32).
inline std::vector<std::int32_t> unpack(std::span<const std::byte> bytes,
                                        const isa::TensorRef& ref) {
  REQUIRE(bytes.size() == ref.size_bytes());
  if (ref.layout == isa::Layout::LoweredNCHW) return unlower(bytes, ref.shape, ref.dtype);
  if (ref.dtype == DType::Int32) {
    std::vector<std::int32_t> values(bytes.size() / 4);
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
  }
  return from_bytes(bytes, ref.dtype);
}

/// Every row-padding byte of a lowered output is zero.
inline void check_padding_zero(std::span<const std::byte> bytes, const isa::TensorRef& ref) {
  if (ref.layout != isa::Layout::LoweredNCHW) return;
  const std::int64_t w = ref.shape[3], wp = isa::padded_width(w);
  const std::int64_t rows = ref.shape[0] * ref.shape[1] * ref.shape[2];
  std::size_t nonzero = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t i = w; i < wp; ++i) {
      if (bytes[static_cast<std::size_t>(r * wp + i)] != std::byte{0}) ++nonzero;
    }
  }
  CHECK(nonzero == 0);
}

/// Row-major multi-index of linear position `pos` in `shape`.
inline std::vector<std::int64_t> unravel(std::int64_t pos, const Shape& shape) {
  std::vector<std::int64_t> index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = pos % shape[d];
    pos /= shape[d];
  }
  return index;
}

/// Row-major linear position of `index` in `shape`.
inline std::int64_t ravel(const std::vector<std::int64_t>& index, const Shape& shape) {
  std::int64_t pos = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) pos = pos * shape[d] + index[d];
  return pos;
}

/// Finishes `b` and runs it: `inputs` are loaded with `data`, every output is also loaded with
/// garbage first (so bytes the kernels leave unwritten show up). Returns the outputs' bytes.
inline std::vector<std::vector<std::byte>> run_dirty(
    ProgramBuilder& b, const std::vector<isa::TensorRef>& inputs,
    const std::vector<std::vector<std::byte>>& data, const std::vector<isa::TensorRef>& outputs,
    ExecutionTiming* timing = nullptr) {
  std::vector<isa::TensorRef> loads = inputs;
  std::vector<std::vector<std::byte>> load_data = data;
  for (const auto& out : outputs) {
    loads.push_back(out);
    load_data.emplace_back(out.size_bytes(), std::byte{kGarbage});
  }
  auto program = b.finish(loads, outputs);
  auto s = open_sim();
  return run_program(*s.device, program, load_data, timing);
}

}  // namespace furiosa::device::test
