// Size limits every loader (ONNX, TFLite, .npy, .pb, program files) checks a declared tensor
// against before it allocates anything, so that a file claiming more than it holds is refused
// with one line instead of exhausting memory.
#pragma once

#include <cstdint>
#include <string_view>

#include "furiosa/core/error.h"
#include "furiosa/core/tensor.h"

namespace furiosa {

/// Limits on what a loaded file may declare. The defaults admit every model a Warboy card can
/// hold (16 GiB of DRAM, Warboy datasheet) while refusing sizes no valid file can back: protobuf
/// and FlatBuffers both cap a serialized message at 2 GiB, so a single inline tensor larger than
/// that cannot be real. Copyable value type; no shared state.
struct LoadLimits {
  /// Most dimensions of any tensor (ONNX sets no limit; TFLite's kernels stop at 6; 8 covers both).
  std::size_t max_rank = 8;
  /// Most elements of any tensor, declared or stored (2^32).
  std::int64_t max_elements = std::int64_t{1} << 32;
  /// Most bytes of one tensor, declared or stored (4 GiB: a batch of large float images fits).
  std::uint64_t max_tensor_bytes = std::uint64_t{1} << 32;
  /// Most bytes of all constant data of one model together (2 GiB: protobuf's message cap).
  std::uint64_t max_total_bytes = std::uint64_t{1} << 31;
};

/// Checks a declared shape against `limits`, with overflow-checked arithmetic, and returns its
/// byte size (elements x dtype_size). Dims of -1 (unknown, ONNX dim_param) are allowed when
/// `allow_unknown` and count as 1. Throws Error(code) naming `what` (a tensor, and its file when
/// the caller puts it there) when a dim is negative, the rank, element count or byte size is
/// over its limit, or the product overflows 64 bits. Thread-safe (pure).
std::uint64_t checked_tensor_bytes(DType dtype, const Shape& shape, const LoadLimits& limits,
                                   std::string_view what, ErrorCode code, bool allow_unknown = false);

}  // namespace furiosa
