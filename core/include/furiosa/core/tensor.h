// Element types, shapes and the host tensor shared by every module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace furiosa {

/// Element type of a tensor. The subset of ONNX TensorProto.DataType the runtime handles.
enum class DType : std::uint8_t { Float32, UInt8, Int8, Int32, Int64 };

/// Size of one element in bytes.
std::size_t dtype_size(DType dtype) noexcept;
/// numpy-style name: "float32", "uint8", "int8", "int32", "int64".
std::string_view dtype_name(DType dtype) noexcept;

/// Dimensions, outermost first (NCHW for images). All dims are >= 0 once a model is compiled.
using Shape = std::vector<std::int64_t>;

/// Product of the dims (1 for a scalar shape {}).
std::int64_t element_count(const Shape& shape) noexcept;
/// "[1, 1, 28, 28]".
std::string shape_to_string(const Shape& shape);
/// Row-major (C order) strides in elements, e.g. {784, 784, 28, 1} for {1, 1, 28, 28}.
std::vector<std::int64_t> contiguous_strides(const Shape& shape);

namespace detail {
/// std::allocator whose construct() without arguments default-initializes (leaves a byte as it
/// is) instead of value-initializing (zeroing): a vector of it can be sized without a fill, for
/// Tensor::uninitialized. (Boost's noinit_adaptor does the same; core is also built in trees
/// without Boost, such as the cross-compiled kernel tests.)
template <class T>
struct NoInitAllocator : std::allocator<T> {
  using value_type = T;
  NoInitAllocator() noexcept = default;
  template <class U>
  NoInitAllocator(const NoInitAllocator<U>& /*other*/) noexcept {}  // NOLINT: rebinding converts
  template <class U>
  struct rebind {
    using other = NoInitAllocator<U>;
  };
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
}  // namespace detail

/// A dense row-major host tensor that owns its bytes. Thread-compatible (no internal locking).
/// The byte buffer comes from operator new, so it is aligned for every DType.
class Tensor {
 public:
  Tensor() = default;
  /// Zero-filled tensor of the given type and shape.
  Tensor(DType dtype, Shape shape);
  /// A copy of `data`; throws Error(InvalidInput) if its size is not
  /// element_count(shape) * dtype_size(dtype).
  Tensor(DType dtype, Shape shape, std::vector<std::byte> data);
  /// A tensor whose bytes are unspecified (not zeroed: no pass over fresh memory), for a writer
  /// that sets every byte before anything reads them: a host step or operator writing its whole
  /// output, a copy from a file or an array. Same errors as Tensor(dtype, shape).
  static Tensor uninitialized(DType dtype, Shape shape);

  DType dtype() const noexcept { return dtype_; }
  const Shape& shape() const noexcept { return shape_; }
  std::int64_t elements() const noexcept { return element_count(shape_); }
  std::size_t size_bytes() const noexcept { return data_.size(); }
  std::span<std::byte> bytes() noexcept { return data_; }
  std::span<const std::byte> bytes() const noexcept { return data_; }

  /// Typed view. The caller must ask for the C++ type matching dtype().
  template <class T>
  std::span<T> as() noexcept {
    return {reinterpret_cast<T*>(data_.data()), data_.size() / sizeof(T)};
  }
  template <class T>
  std::span<const T> as() const noexcept {
    return {reinterpret_cast<const T*>(data_.data()), data_.size() / sizeof(T)};
  }

 private:
  DType dtype_ = DType::Float32;
  Shape shape_;
  std::vector<std::byte, detail::NoInitAllocator<std::byte>> data_;
};

}  // namespace furiosa
