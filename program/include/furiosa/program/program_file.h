// Program files (.enf): a compiled model saved to disk with the options it was compiled with, so
// that a runtime can load it instead of compiling (`furiosa-compile`, the compile cache). Reading
// one needs no compiler: this module links neither ONNX nor FlatBuffers.
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
#include <vector>

#include "furiosa/program/compiled_model.h"
#include "furiosa/program/compiler_options.h"

namespace furiosa::program {

/// The format version this build writes and reads. Raised whenever the meta or body encoding
/// changes in any way; files of another version are refused (recompile them).
inline constexpr std::uint32_t kProgramFormatVersion = 1;

/// Size in bytes of the fixed header before the meta block.
inline constexpr std::size_t kProgramHeaderBytes = 32;

/// A loaded program file: the compiled model, the options it was compiled with (pe_count is its
/// target: 1 = warboy, 2 = warboy-2pe; batch_size its batch) and the writer's compiler version.
struct ProgramFile {
  CompiledModel model;
  CompilerOptions options;
  std::string compiler_version;
};

/// The bytes of a program file for `model` compiled with `options` by a compiler whose version
/// string is `writer_version` (compiler/program_file.h compiler_version()): header, meta, body.
/// Deterministic: equal arguments give equal bytes. Thread-safe (reads only). Throws
/// Error(InvalidArgument) for a model that cannot be represented (a null program).
std::string serialize_program(const CompiledModel& model, const CompilerOptions& options,
                              std::string_view writer_version);

/// Canonical CBOR bytes of `options`, as the meta block holds them (equal options give equal
/// bytes): the compile cache keys entries by them.
std::vector<std::uint8_t> options_cbor(const CompilerOptions& options);

/// Parses and validates program-file bytes; `source` names them in messages. Everything is
/// checked before it is returned: magic, format version, lengths, both checksums, the CBOR
/// structure (nesting depth at most 64), enum values, sizes (tensor bytes, 256-entry tables,
/// per-channel parameter counts), every slot / NPU-call index, and every tensor of a program
/// inside its DRAM region. Throws Error(ModelLoadFailed) with one line "<source>: <problem>"
/// (file set to `source`).
ProgramFile deserialize_program(std::string_view bytes, const std::string& source);

/// Writes serialize_program(model, options, writer_version) to `path` atomically: to a
/// temporary file in the same directory, then renamed over `path`, so a concurrent reader sees
/// the old file or the whole new one. The temporary file is created with O_EXCL | O_NOFOLLOW
/// under an unpredictable name, so nothing planted in a shared directory (a compile cache) is
/// written through. Throws Error(IoError) naming the path when it cannot be written.
void save_program(const CompiledModel& model, const CompilerOptions& options, std::string_view writer_version,
                  const std::filesystem::path& path);

/// Reads and validates a program file (deserialize_program). Throws Error(ModelLoadFailed)
/// naming the file and the problem (missing, not a regular file, truncated, corrupted, wrong
/// magic, other format version, invalid content).
ProgramFile load_program(const std::filesystem::path& path);

/// True when `bytes` start with the program-file magic.
bool is_program_bytes(std::string_view bytes) noexcept;

/// True when `path` names a program file: its extension is ".enf" (any case) or it is a regular
/// file whose first bytes are the magic. Never blocks on a FIFO or device and never throws (an
/// unreadable file without the extension is not one).
bool is_program_file(const std::filesystem::path& path) noexcept;

}  // namespace furiosa::program
