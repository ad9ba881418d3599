// Element types, shapes and the owning host tensor.
#include "furiosa/core/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

#include "furiosa/core/error.h"

namespace furiosa {

std::size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::UInt8: return 1;
    case DType::Int8: return 1;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
  }
  return "unknown";
}

std::int64_t element_count(const Shape& shape) noexcept {
  std::int64_t count = 1;
  for (std::int64_t d : shape) count *= d;
  return count;
}

std::string shape_to_string(const Shape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::vector<std::int64_t> contiguous_strides(const Shape& shape) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

namespace {

// Byte size of a dense tensor; throws Error(InvalidInput) on a negative dimension or a size that
// overflows.
std::size_t checked_byte_size(DType dtype, const Shape& shape) {
  for (std::int64_t d : shape) {
    if (d < 0) {
      throw Error(ErrorCode::InvalidInput,
                  fmt::format("tensor shape {} has a negative dimension", shape_to_string(shape)));
    }
  }
  std::int64_t n = 1;
  std::size_t bytes = 0;
  for (std::int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) n = -1;
    if (n < 0) break;
  }
  if (n < 0 || __builtin_mul_overflow(static_cast<std::size_t>(n), dtype_size(dtype), &bytes)) {
    throw Error(ErrorCode::InvalidInput,
                fmt::format("tensor shape {} has more elements than memory can address", shape_to_string(shape)));
  }
  return bytes;
}

}  // namespace

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype),
      shape_(std::move(shape)),
      data_(checked_byte_size(dtype_, shape_), std::byte{0}) {}

Tensor Tensor::uninitialized(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_.resize(checked_byte_size(t.dtype_, t.shape_));  // default-initialized: left as they are
  return t;
}

Tensor::Tensor(DType dtype, Shape shape, std::vector<std::byte> data)
    : dtype_(dtype), shape_(std::move(shape)) {
  std::size_t expected = checked_byte_size(dtype_, shape_);
  if (data.size() != expected) {
    throw Error(ErrorCode::InvalidInput,
                fmt::format("a {} tensor of shape {} needs {} bytes but {} bytes were given",
                            dtype_name(dtype_), shape_to_string(shape_), expected, data.size()));
  }
  data_.assign(data.begin(), data.end());
}

}  // namespace furiosa
