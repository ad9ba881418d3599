// What a session or describe_model() is made from: something compiled once the device is known
// (an imported graph, or an ONNX/TFLite model file through the compile cache) or a program file
// (.enf, loaded, not compiled). One place for them, so create_runner, create_queue and
// describe_model treat them alike.
//
// The runtime reaches the compiler only through compile_model_file() and load_tensor_proto_file()
// below: the default target (furiosa::runtime) defines them with the compiler (with_compiler.cpp),
// the programs-only target (furiosa::runtime_core) without it (programs_only.cpp), so a binary
// linking only the latter links no compiler, ONNX or FlatBuffers.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <variant>

#include "furiosa/core/limits.h"
#include "furiosa/core/tensor.h"
#include "furiosa/program/compiled_model.h"
#include "furiosa/program/compiler_options.h"
#include "furiosa/program/program_file.h"

namespace furiosa::runtime::detail {

/// A compiled model and what the compile cache did: "hit", "miss" or "off" (the Compile span's
/// `cache` attribute; "off" also for program files and imported graphs).
struct CompileResult {
  program::CompiledModel model;
  std::string cache = "off";
};

/// Compiles for the given options (batch_size and pe_count as the session wants them).
using CompileFn = std::function<CompileResult(const program::CompilerOptions&)>;

/// Not thread-safe; used once, by the thread creating a session.
class ModelSource {
 public:
  /// Something compiled when the session knows its device; called once.
  explicit ModelSource(CompileFn compile);
  /// A model file. A program file (program::is_program_file) is loaded and validated now
  /// (Error(ModelLoadFailed) naming the file and the problem); any other file is compiled by
  /// compile_model_file() when the session knows its device.
  explicit ModelSource(std::filesystem::path path);

  /// The loaded program file, or null when this source is compiled.
  const program::ProgramFile* program() const noexcept;

  /// The compiled model for `options` (batch_size and pe_count as the session wants them):
  /// - a compiled source: its CompileFn;
  /// - a program file: its model, after checking it fits: pe_count equal to options.pe_count
  ///   unless `device` is empty (describe_model opens no device), else Error(IncompatibleModel)
  ///   naming the file, its target and `device` with its PE count; options.batch_size either 1
  ///   (the default: the file's batch) or the file's batch, else Error(IncompatibleModel) naming
  ///   both; the compiler knobs either all at their defaults (the file's apply) or equal to the
  ///   file's, else Error(IncompatibleModel) naming the difference. Cache "off".
  /// Consumes the source (call once).
  CompileResult compile(const program::CompilerOptions& options, const std::string& device);

 private:
  std::variant<CompileFn, program::ProgramFile> source_;
  std::filesystem::path program_path_;  ///< set for a program file
};

/// Compiles the ONNX or TFLite model at `path` through the environment's compile cache
/// (FURIOSA_COMPILE_CACHE_DIR). In the programs-only runtime: Error(ModelLoadFailed) naming the
/// file and saying that this build loads program files (.enf) only.
CompileResult compile_model_file(const std::filesystem::path& path, const program::CompilerOptions& options);

/// Reads an ONNX TensorProto file (.pb) with the ONNX importer's reader. In the programs-only
/// runtime: Error(InvalidInput) naming the file and saying to use .npy.
Tensor load_tensor_proto_file(const std::filesystem::path& path, const LoadLimits& limits);

}  // namespace furiosa::runtime::detail
