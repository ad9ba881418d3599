// What a session or describe_model() is made from: an imported graph, a model file (ONNX or
// TFLite, compiled through the compile cache) or a program file (.enf, loaded, not compiled). One
// place for the three, so create_runner, create_queue and describe_model treat them alike.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <variant>

#include "furiosa/compiler/compile_cache.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/compiler/program_file.h"

namespace furiosa::runtime::detail {

/// Not thread-safe; used once, by the thread creating a session.
class ModelSource {
 public:
  /// An imported graph (compiled without the cache: there are no model bytes to key it by).
  explicit ModelSource(compiler::Graph graph);
  /// A model file. A program file (compiler::is_program_file) is loaded and validated now
  /// (Error(ModelLoadFailed) naming the file and the problem); other files are imported when
  /// compiled.
  explicit ModelSource(std::filesystem::path path);

  /// The loaded program file, or null when this source is compiled.
  const compiler::ProgramFile* program() const noexcept;

  /// The compiled model for `options` (batch_size and pe_count as the session wants them):
  /// - a graph: compile(); cache Off;
  /// - a model file: compiler::compile_model_file through the environment's cache directory;
  /// - a program file: its model, after checking it fits: pe_count equal to options.pe_count
  ///   unless `device` is empty (describe_model opens no device), else Error(IncompatibleModel)
  ///   naming the file, its target and `device` with its PE count; options.batch_size either 1
  ///   (the default: the file's batch) or the file's batch, else Error(IncompatibleModel) naming
  ///   both; the compiler knobs either all at their defaults (the file's apply) or equal to the
  ///   file's, else Error(IncompatibleModel) naming the difference. Cache Off.
  /// Consumes the source (call once).
  compiler::CachedCompile compile(const compiler::CompilerOptions& options, const std::string& device);

 private:
  std::variant<compiler::Graph, std::filesystem::path, compiler::ProgramFile> source_;
  std::filesystem::path program_path_;  ///< set for a program file
};

}  // namespace furiosa::runtime::detail
