// Program files (.enf): a compiled model saved to disk with the options it was compiled with, so
// that a runtime can load it instead of compiling (`furiosa-compile`, the compile cache).
//
// Layout (all integers little-endian; docs/design.md "Program files and the compile cache"):
//   offset  0  magic           8 bytes  "\x89" "FWENF" "\r\n" (binary-transfer damage is caught)
//   offset  8  format version  uint32   kProgramFormatVersion
//   offset 12  meta length     uint32   bytes of the meta block
//   offset 16  body length     uint64   bytes of the body
//   offset 24  meta crc32      uint32   zlib crc32 of the meta block
//   offset 28  body crc32      uint32   zlib crc32 of the body
//   offset 32  meta            CBOR map {compiler_version, options}
//   then       body            CBOR map of the CompiledModel (slots, steps, npu_calls, report)
// The file ends exactly after the body. A reader accepts exactly its own format version.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "furiosa/compiler/compiler.h"

namespace furiosa::compiler {

/// The format version this build writes and reads. Raised whenever the meta or body encoding
/// changes in any way; files of another version are refused (recompile them).
inline constexpr std::uint32_t kProgramFormatVersion = 1;

/// Size in bytes of the fixed header before the meta block.
inline constexpr std::size_t kProgramHeaderBytes = 32;

/// The compiler's version string, e.g. "0.1.0+src.3f9a12c4d5e6b7a8": the project version and a
/// hash of the sources that decide what compile() produces (compiler-bridge, host, the ISA),
/// computed at build time. Written into every program file and part of the compile cache key,
/// so a changed compiler never reuses another's programs.
std::string_view compiler_version() noexcept;

/// A loaded program file: the compiled model, the options it was compiled with (pe_count is its
/// target: 1 = warboy, 2 = warboy-2pe; batch_size its batch) and the writer's compiler version.
struct ProgramFile {
  CompiledModel model;
  CompilerOptions options;
  std::string compiler_version;
};

/// The bytes of a program file for `model` compiled with `options` (header, meta, body).
/// Deterministic: equal models and options give equal bytes. Thread-safe (reads only).
/// Throws Error(InvalidArgument) for a model that cannot be represented (a null program).
std::string serialize_program(const CompiledModel& model, const CompilerOptions& options);

/// Parses and validates program-file bytes; `source` names them in messages. Everything is
/// checked before it is returned: magic, format version, lengths, both checksums, the CBOR
/// structure, enum values, sizes (tensor bytes, 256-entry tables, per-channel parameter counts),
/// every slot / NPU-call index, and every tensor of a program inside its DRAM region.
/// Throws Error(ModelLoadFailed) with one line "<source>: <problem>" (file set to `source`).
ProgramFile deserialize_program(std::string_view bytes, const std::string& source);

/// Writes serialize_program(model, options) to `path` atomically: to a temporary file in the
/// same directory, then renamed over `path`, so a concurrent reader sees the old file or the
/// whole new one. Throws Error(IoError) naming the path when it cannot be written.
void save_program(const CompiledModel& model, const CompilerOptions& options,
                  const std::filesystem::path& path);

/// Reads and validates a program file (deserialize_program). Throws Error(ModelLoadFailed)
/// naming the file and the problem (missing, truncated, corrupted, wrong magic, other format
/// version, invalid content).
ProgramFile load_program(const std::filesystem::path& path);

/// True when `bytes` start with the program-file magic.
bool is_program_bytes(std::string_view bytes) noexcept;

/// True when `path` names a program file: its extension is ".enf" (any case) or its first bytes
/// are the magic. Never throws (an unreadable file without the extension is not one).
bool is_program_file(const std::filesystem::path& path) noexcept;

}  // namespace furiosa::compiler
