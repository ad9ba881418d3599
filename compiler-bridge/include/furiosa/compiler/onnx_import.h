// ONNX import: ModelProto / TensorProto files -> graph IR and host tensors, using the protobuf
// classes of Debian's libonnx-dev.
#pragma once

#include <filesystem>
#include <string>

#include "furiosa/compiler/graph.h"
#include "furiosa/core/tensor.h"

namespace furiosa::compiler {

/// Reads an ONNX model file. Throws Error(ModelLoadFailed) naming the file when it is missing,
/// unreadable, truncated or not a ModelProto, and Error(IncompatibleModel) for tensors of an
/// unsupported element type (naming the tensor).
Graph import_onnx(const std::filesystem::path& path);

/// Parses a serialized ModelProto; `source` names it in error messages.
Graph import_onnx_bytes(const std::string& bytes, const std::string& source);

/// A serialized ONNX TensorProto file (the test_data_set_N/*.pb format) as a host tensor.
/// `name_out`, when non-null, receives the tensor's name. Throws Error(InvalidInput) naming the
/// file when it cannot be read or parsed, or holds an unsupported element type.
Tensor load_tensor_pb(const std::filesystem::path& path, std::string* name_out = nullptr);

}  // namespace furiosa::compiler
