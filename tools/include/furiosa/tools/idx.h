// IDX files (the MNIST / Fashion-MNIST container format, optionally gzip-compressed) and the
// Fashion-MNIST test set.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/core/tensor.h"

namespace furiosa::tools {

/// An unsigned-byte IDX array: dims as stored (e.g. {10000, 28, 28} for images, {10000} for
/// labels) and the bytes in row-major order.
struct IdxArray {
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> data;
};

/// Reads an IDX file of unsigned bytes (type code 0x08), plain or gzip-compressed (".gz").
/// Throws Error(InvalidInput) naming the file when it is missing, truncated, or of another type.
IdxArray read_idx(const std::filesystem::path& path);

/// The Fashion-MNIST test split: 10,000 images of 28x28 pixels and their labels.
struct FashionMnist {
  IdxArray images;  ///< {10000, 28, 28}
  IdxArray labels;  ///< {10000}
  std::size_t size() const noexcept { return labels.data.size(); }
  /// Image i as a model input: float32 [1, 1, 28, 28] = pixel / 255, or uint8 raw pixels when
  /// `dtype` is UInt8.
  Tensor image(std::size_t i, DType dtype = DType::Float32) const;
};

/// Default folder of Debian's dataset-fashion-mnist package.
inline constexpr std::string_view kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// Reads t10k-images-idx3-ubyte(.gz) and t10k-labels-idx1-ubyte(.gz) from `dir`.
FashionMnist load_fashion_mnist_test(const std::filesystem::path& dir);

/// Fashion-MNIST class names: "T-shirt/top", "Trouser", ..., "Ankle boot" (index = label).
const std::vector<std::string>& fashion_mnist_classes();

}  // namespace furiosa::tools
