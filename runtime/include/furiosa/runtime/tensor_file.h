// Reading and writing tensors: numpy .npy files and ONNX TensorProto .pb files.
#pragma once

#include <filesystem>
#include <string_view>

#include "furiosa/core/limits.h"
#include "furiosa/core/tensor.h"

namespace furiosa::runtime {

/// Reads a .npy file (format 1.0-3.0, C order, little-endian float32/uint8/int8/int32/int64;
/// numpy.lib.format). The header (at most 1 MiB) is parsed without allocating the data, and the
/// declared shape is checked against `limits` and the bytes present first. Throws
/// Error(InvalidInput) naming the file (Error::file()) and what is wrong.
Tensor read_npy(const std::filesystem::path& path, const LoadLimits& limits = {});

/// Same for a .npy file already in memory; `source` names it in errors.
Tensor read_npy_bytes(std::string_view data, const std::string& source, const LoadLimits& limits = {});

/// Writes a .npy file (format 1.0). Throws Error(IoError) naming the file.
void write_npy(const std::filesystem::path& path, const Tensor& tensor);

/// Reads a tensor from a ".npy" file or an ONNX TensorProto ".pb" file (by extension), checking
/// it against `limits` like read_npy / compiler::load_tensor_pb. TensorProto files need the
/// default target furiosa::runtime; furiosa::runtime_core refuses them (Error(InvalidInput)).
Tensor load_tensor_file(const std::filesystem::path& path, const LoadLimits& limits = {});

}  // namespace furiosa::runtime
