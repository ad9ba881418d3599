// checked_tensor_bytes (limits.h).
#include "furiosa/core/limits.h"

#include <fmt/format.h>

namespace furiosa {

std::uint64_t checked_tensor_bytes(DType dtype, const Shape& shape, const LoadLimits& limits,
                                   std::string_view what, ErrorCode code, bool allow_unknown) {
  if (shape.size() > limits.max_rank) {
    throw Error(code, fmt::format("tensor '{}' has rank {}, more than the limit of {}", what, shape.size(),
                                  limits.max_rank));
  }
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0 && !(allow_unknown && d == -1)) {
      throw Error(code, fmt::format("tensor '{}' has a negative dim in {}", what, shape_to_string(shape)));
    }
    if (__builtin_mul_overflow(n, d < 0 ? 1 : d, &n) || n > limits.max_elements) {
      throw Error(code, fmt::format("tensor '{}' {}: its dims claim more than {} elements", what,
                                    shape_to_string(shape), limits.max_elements));
    }
  }
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(n), dtype_size(dtype), &bytes) ||
      bytes > limits.max_tensor_bytes) {
    throw Error(code, fmt::format("tensor '{}' {} {} is {} bytes, more than the limit of {}", what,
                                  dtype_name(dtype), shape_to_string(shape), static_cast<std::uint64_t>(n) * dtype_size(dtype),
                                  limits.max_tensor_bytes));
  }
  return bytes;
}

}  // namespace furiosa
