// ONNX import: ModelProto / TensorProto files -> graph IR and host tensors, using the protobuf
// classes of Debian's libonnx-dev.
#pragma once

#include <filesystem>
#include <string>

#include "furiosa/compiler/graph.h"
#include "furiosa/core/limits.h"
#include "furiosa/core/tensor.h"

namespace furiosa::compiler {

/// Reads an ONNX model file. Throws Error(ModelLoadFailed) naming the file when it is missing,
/// unreadable, truncated or not a ModelProto, and Error(IncompatibleModel), one line naming the
/// file and the tensor, node or value, when the model breaks a rule checked before anything is
/// allocated: a tensor of an unsupported element type; stored or declared dims over `limits`
/// (rank, elements, bytes; overflow-checked) or not matching the data present; constant data
/// over limits.max_total_bytes; an opset of the default domain outside 1..30 or a domain
/// imported twice; a value defined twice (SSA, ONNX IR spec); a node without
/// op_type or reading a value no earlier node defines (which also refuses cycles); a graph
/// output nothing produces.
Graph import_onnx(const std::filesystem::path& path, const LoadLimits& limits = {});

/// Parses a serialized ModelProto; `source` names it in error messages. Same checks and errors.
Graph import_onnx_bytes(const std::string& bytes, const std::string& source, const LoadLimits& limits = {});

/// A serialized ONNX TensorProto file (the test_data_set_N/*.pb format) as a host tensor.
/// `name_out`, when non-null, receives the tensor's name. Throws Error(InvalidInput) naming the
/// file when it cannot be read or parsed, or holds an unsupported element type.
/// Dims are checked against `limits` and the data present before allocating.
Tensor load_tensor_pb(const std::filesystem::path& path, std::string* name_out = nullptr,
                      const LoadLimits& limits = {});

/// Same for a serialized TensorProto held in memory; `source` names it in errors (Error::file()).
Tensor load_tensor_pb_bytes(const std::string& bytes, const std::string& source, std::string* name_out = nullptr,
                            const LoadLimits& limits = {});

}  // namespace furiosa::compiler
