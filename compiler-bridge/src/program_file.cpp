// The compiler's side of program files: its version, stamped into every file it writes.
#include "furiosa/compiler/program_file.h"

#include "compiler_version.h"  // generated: FURIOSA_COMPILER_VERSION

namespace furiosa::compiler {

std::string_view compiler_version() noexcept { return FURIOSA_COMPILER_VERSION; }

std::string serialize_program(const CompiledModel& model, const CompilerOptions& options) {
  return program::serialize_program(model, options, compiler_version());
}

void save_program(const CompiledModel& model, const CompilerOptions& options, const std::filesystem::path& path) {
  program::save_program(model, options, compiler_version(), path);
}

}  // namespace furiosa::compiler
