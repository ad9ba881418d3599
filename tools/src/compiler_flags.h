// The compiler's knobs on the command line, in `furiosa compile`'s names, shared by furiosa-run
// and furiosa-compile so the two spell and parse them the same way.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "furiosa/program/compiler_options.h"

namespace furiosa::tools {

/// The raw flag values, as CLI11 fills them.
struct CompilerFlags {
  std::vector<std::string> without_quantize;          ///< --without-quantize INPUT (repeatable)
  std::vector<std::string> normalized_pixel_outputs;  ///< --normalized-pixel-outputs OUTPUT (repeatable)
  std::vector<std::string> permute_input;             ///< --permute-input INPUT=0,3,1,2 (repeatable)
  std::vector<std::string> input_shapes;  ///< --input-shape INPUT=1,3,640,640 (repeatable)
  bool remove_lower = false;                          ///< --remove-lower
  bool remove_unlower = false;                        ///< --remove-unlower
  std::string target_npu;                             ///< --target-npu warboy|warboy-2pe ("" = the device's)
};

/// Registers the flags above on `app`, writing into `flags` (which must outlive parsing).
void add_compiler_flags(CLI::App& app, CompilerFlags& flags);

/// Applies the parsed flags to `options` (batch size untouched). Throws Error(InvalidArgument)
/// naming the flag and value for a malformed --permute-input / --input-shape or an unknown
/// --target-npu.
void apply_compiler_flags(const CompilerFlags& flags, program::CompilerOptions& options);

}  // namespace furiosa::tools
