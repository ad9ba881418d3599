// DRAM planning of one NPU program's activations: buffers whose live ranges do not overlap share
// addresses (the compiler used to give every activation its own bytes).
#pragma once

#include <cstdint>
#include <vector>

namespace furiosa::compiler::detail {

/// One activation buffer to place. Live over kernels [first, last] inclusive: first = the kernel
/// that writes it (0 for a program input, loaded before the first kernel), last = the last
/// kernel that reads it (the kernel count for a program output, stored after the last kernel).
struct BufferUse {
  std::uint64_t size = 0;  ///< bytes
  std::int64_t first = 0;
  std::int64_t last = 0;
};

/// Offsets (multiples of `alignment`, relative to the start of the activation area) for every
/// buffer, such that two buffers whose live ranges intersect never share a byte. Greedy: largest
/// buffers first, each at the lowest offset that fits between the buffers already placed that
/// are live at the same time (deterministic). Returns the offsets in input order; `peak` receives
/// the activation area's size in bytes.
std::vector<std::uint64_t> plan_buffers(const std::vector<BufferUse>& buffers, std::uint64_t alignment,
                                        std::uint64_t& peak);

}  // namespace furiosa::compiler::detail
