// The compile cache: compiled models kept on disk as program files (.enf), keyed by the model's
// bytes, the compiler options and the compiler version, so a model compiled once is loaded the
// next time (FuriosaAI's FC_CACHE_* counterpart; docs/design.md "Program files and the compile
// cache").
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "furiosa/compiler/compiler.h"

namespace furiosa::compiler {

/// What the cache did for one compile: "hit" (loaded), "miss" (compiled, entry written), "off"
/// (no cache: disabled, or a model given as a graph).
enum class CacheStatus : std::uint8_t { Hit, Miss, Off };

/// "hit", "miss", "off" (the Compile span's `cache` attribute).
std::string_view cache_status_name(CacheStatus status) noexcept;

/// The cache directory the environment selects, or nullopt when the cache is off:
/// FURIOSA_COMPILE_CACHE_DIR when set (the empty string or "off" turn the cache off), else
/// $XDG_CACHE_HOME/furiosa/compile, else $HOME/.cache/furiosa/compile, else off. Reads the
/// environment on every call (thread-safe as long as nobody changes the environment meanwhile).
std::optional<std::filesystem::path> compile_cache_dir_from_environment();

/// The cache key of a model: 64 lowercase hex digits of SHA-256 over the model bytes, the
/// canonical encoding of `options`, compiler_version() and the program format version.
std::string compile_cache_key(std::string_view model_bytes, const CompilerOptions& options);

/// A compiled model and what the cache did.
struct CachedCompile {
  CompiledModel model;
  CacheStatus cache = CacheStatus::Off;
};

/// Compiles the ONNX or TFLite model at `path` (compiler/tflite_import.h import_model rules) with
/// `options`, through the cache in `cache_dir` (nullopt: no cache). The directory is created
/// with mode 0700 when missing; one that belongs to another user or that others may write to is
/// not used (logged; the model is compiled without the cache, CacheStatus::Off), since its
/// entries are loaded as trusted programs. A hit loads
/// `<cache_dir>/<key>.enf`; an entry that cannot be loaded (corrupt, truncated, other version) is
/// logged and ignored, then replaced. A miss compiles and writes the entry atomically (temporary
/// file + rename, so concurrent processes never see a partial entry); a failure to write (read-only
/// directory, full disk) is logged, never fatal. Thread-safe. Throws what import_model and
/// compile() throw, each message naming the file once (furiosa::in_file: "<file>: node ...").
CachedCompile compile_model_file(const std::filesystem::path& path, const CompilerOptions& options,
                                 const std::optional<std::filesystem::path>& cache_dir);

}  // namespace furiosa::compiler
