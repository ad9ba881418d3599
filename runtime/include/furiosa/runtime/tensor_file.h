// Reading and writing tensors: numpy .npy files and ONNX TensorProto .pb files.
#pragma once

#include <filesystem>

#include "furiosa/core/tensor.h"

namespace furiosa::runtime {

/// Reads a .npy file (format 1.0-3.0, C order, little-endian float32/uint8/int8/int32/int64).
/// Throws Error(InvalidInput) naming the file and what is wrong.
Tensor read_npy(const std::filesystem::path& path);

/// Writes a .npy file (format 1.0). Throws Error(IoError) naming the file.
void write_npy(const std::filesystem::path& path, const Tensor& tensor);

/// Reads a tensor from a ".npy" file or an ONNX TensorProto ".pb" file (by extension).
Tensor load_tensor_file(const std::filesystem::path& path);

}  // namespace furiosa::runtime
