// Program files (.enf) as the compiler writes them: the codec lives in program/ (the runtime
// reads programs without the compiler); the compiler stamps its own version into each file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "furiosa/compiler/compiler.h"
#include "furiosa/program/program_file.h"

namespace furiosa::compiler {

using program::deserialize_program;
using program::is_program_bytes;
using program::is_program_file;
using program::kProgramFormatVersion;
using program::kProgramHeaderBytes;
using program::load_program;
using program::ProgramFile;

/// The compiler's version string, e.g. "0.1.0+src.3f9a12c4d5e6b7a8": the project version and a
/// hash of the sources that decide what compile() produces (compiler-bridge, host, the ISA),
/// computed at build time. Written into every program file and part of the compile cache key,
/// so a changed compiler never reuses another's programs.
std::string_view compiler_version() noexcept;

/// program::serialize_program stamped with compiler_version().
std::string serialize_program(const CompiledModel& model, const CompilerOptions& options);

/// program::save_program stamped with compiler_version(). Throws Error(IoError) naming the path.
void save_program(const CompiledModel& model, const CompilerOptions& options, const std::filesystem::path& path);

}  // namespace furiosa::compiler
