// The compile cache (compile_cache.h): program files under a cache directory, named by a SHA-256
// key (OpenSSL's EVP digest) of what decides the compiled result.
#include "furiosa/compiler/compile_cache.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "furiosa/compiler/program_file.h"
#include "furiosa/compiler/tflite_import.h"
#include "furiosa/core/error.h"
#include "furiosa/core/file_io.h"
#include "furiosa/core/text.h"
#include "furiosa/program/program_file.h"

namespace furiosa::compiler {

namespace {

/// SHA-256 over the concatenation of `parts`, each preceded by its length (so no two different
/// part lists hash the same input).
std::string sha256_hex(std::initializer_list<std::string_view> parts) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw Error(ErrorCode::Internal, "OpenSSL: cannot start a SHA-256 digest");
  }
  for (std::string_view part : parts) {
    const std::uint64_t n = part.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    EVP_DigestUpdate(ctx.get(), len, sizeof len);
    EVP_DigestUpdate(ctx.get(), part.data(), part.size());
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &size) != 1) throw Error(ErrorCode::Internal, "OpenSSL: SHA-256 failed");
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

/// The file's bytes, or nullopt when it cannot be read (or is not a regular file).
std::optional<std::string> read_bytes(const std::filesystem::path& path) {
  try {
    return read_regular_file(path, ErrorCode::IoError, "cache entry");
  } catch (const Error&) {
    return std::nullopt;
  }
}

/// Whether the cache directory may be trusted with programs this process will load: created
/// with mode 0700 when missing; else (links followed: a link of the user's own to elsewhere is
/// fine) a directory owned by this user that no one else may write to. Another user who could
/// plant an entry there could make this process run a program of their choosing. Empty when
/// trusted, else the reason.
std::string untrusted_cache_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir.parent_path(), ec);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return fmt::format("cannot create it: {}", std::strerror(errno));
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (st.st_uid != ::geteuid())
    return fmt::format("it belongs to uid {}, not to this user (uid {})", st.st_uid, ::geteuid());
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return fmt::format("its mode {:04o} lets other users write to it", st.st_mode & 07777);
  }
  return "";
}

}  // namespace

std::string_view cache_status_name(CacheStatus status) noexcept {
  switch (status) {
    case CacheStatus::Hit: return "hit";
    case CacheStatus::Miss: return "miss";
    case CacheStatus::Off: return "off";
  }
  return "off";
}

std::optional<std::filesystem::path> compile_cache_dir_from_environment() {
  if (const char* dir = std::getenv("FURIOSA_COMPILE_CACHE_DIR")) {
    const std::string_view v(dir);
    if (v.empty() || v == "off") return std::nullopt;
    return std::filesystem::path(v);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::filesystem::path(xdg) / "furiosa" / "compile";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::filesystem::path(home) / ".cache" / "furiosa" / "compile";
  }
  return std::nullopt;
}

std::string compile_cache_key(std::string_view model_bytes, const CompilerOptions& options) {
  const std::vector<std::uint8_t> opts = program::options_cbor(options);
  const std::string format = std::to_string(kProgramFormatVersion);
  return sha256_hex({model_bytes, std::string_view(reinterpret_cast<const char*>(opts.data()), opts.size()),
                     compiler_version(), format});
}

namespace {

CachedCompile compile_file(const std::filesystem::path& path, const CompilerOptions& options,
                           const std::optional<std::filesystem::path>& cache_dir) {
  if (!cache_dir) return {compile(import_model(path), options), CacheStatus::Off};
  if (const std::string why = untrusted_cache_dir(*cache_dir); !why.empty()) {
    spdlog::warn("compile cache: not using {}: {}; compiling without the cache",
                 escape_text(cache_dir->string()), why);
    return {compile(import_model(path), options), CacheStatus::Off};
  }
  const std::optional<std::string> bytes = read_bytes(path);
  if (!bytes) {
    (void)import_model(path);  // throws the importer's own ModelLoadFailed naming the file
    throw Error(ErrorCode::ModelLoadFailed, fmt::format("cannot read model file '{}'", path.string()),
                ErrorSubject::of_file(path.string()));
  }
  const std::filesystem::path entry = *cache_dir / (compile_cache_key(*bytes, options) + ".enf");
  std::error_code ec;
  if (std::filesystem::exists(entry, ec)) {
    try {
      ProgramFile cached = load_program(entry);
      // The key already covers both; a mismatch means a hand-placed or colliding file.
      if (cached.compiler_version == compiler_version() &&
          program::options_cbor(cached.options) == program::options_cbor(options)) {
        return {std::move(cached.model), CacheStatus::Hit};
      }
      spdlog::warn("compile cache: {} was written for other options or compiler {}; replacing it", entry.string(),
                   cached.compiler_version);
    } catch (const std::exception& e) {
      spdlog::warn("compile cache: ignoring unusable entry ({}); replacing it", e.what());
    }
  }
  CompiledModel model = compile(import_model_bytes(*bytes, path), options);
  try {
    std::filesystem::create_directories(*cache_dir);
    save_program(model, options, entry);
  } catch (const std::exception& e) {
    spdlog::warn("compile cache: cannot store {} ({}); continuing without caching", entry.string(), e.what());
  }
  return {std::move(model), CacheStatus::Miss};
}

}  // namespace

CachedCompile compile_model_file(const std::filesystem::path& path, const CompilerOptions& options,
                                 const std::optional<std::filesystem::path>& cache_dir) {
  try {
    return compile_file(path, options, cache_dir);
  } catch (const Error& e) {  // the compiler's messages name the node; this one place adds the file
    throw in_file(e, path.string());
  }
}

}  // namespace furiosa::compiler
