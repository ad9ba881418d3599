// ModelSource (model_source.h): something compiled, or a program file.
#include "model_source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "furiosa/core/error.h"

namespace furiosa::runtime::detail {

namespace {

/// The knobs of `o` as text, for messages ("without_quantize=[input], remove_lower").
std::string knobs_text(const program::CompilerOptions& o) {
  std::vector<std::string> parts;
  if (!o.without_quantize.empty()) parts.push_back(fmt::format("without_quantize=[{}]", fmt::join(o.without_quantize, ",")));
  if (!o.normalized_pixel_outputs.empty()) {
    parts.push_back(fmt::format("normalized_pixel_outputs=[{}]", fmt::join(o.normalized_pixel_outputs, ",")));
  }
  for (const auto& [name, perm] : o.permute_input) parts.push_back(fmt::format("permute_input {}={}", name, fmt::join(perm, ",")));
  for (const auto& [name, shape] : o.input_shapes)
    parts.push_back(fmt::format("input_shapes {}={}", name, fmt::join(shape, ",")));
  if (o.remove_lower) parts.push_back("remove_lower");
  if (o.remove_unlower) parts.push_back("remove_unlower");
  return parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", "));
}

bool same_knobs(const program::CompilerOptions& a, const program::CompilerOptions& b) {
  return a.without_quantize == b.without_quantize &&
         a.normalized_pixel_outputs == b.normalized_pixel_outputs &&
         a.permute_input == b.permute_input && a.input_shapes == b.input_shapes &&
         a.remove_lower == b.remove_lower && a.remove_unlower == b.remove_unlower;
}

}  // namespace

ModelSource::ModelSource(CompileFn compile) : source_(std::move(compile)) {}

ModelSource::ModelSource(std::filesystem::path path) {
  if (program::is_program_file(path)) {
    program_path_ = path;
    source_ = program::load_program(path);
  } else {
    source_ = CompileFn([path = std::move(path)](const program::CompilerOptions& options) {
      return compile_model_file(path, options);
    });
  }
}

const program::ProgramFile* ModelSource::program() const noexcept {
  return std::get_if<program::ProgramFile>(&source_);
}

CompileResult ModelSource::compile(const program::CompilerOptions& options, const std::string& device) {
  if (auto* compile = std::get_if<CompileFn>(&source_)) return (*compile)(options);
  auto& file = std::get<program::ProgramFile>(source_);
  const program::CompilerOptions& built = file.options;
  const std::string name = program_path_.string();
  const auto incompatible = [&](const std::string& why) {
    return Error(ErrorCode::IncompatibleModel, fmt::format("program file {}: {}", name, why), ErrorSubject::of_file(name));
  };
  if (!device.empty() && built.pe_count != options.pe_count) {
    throw incompatible(fmt::format("compiled for {} ({} PE{}) but device {} has {} PE{}: use a device of {} PE{} "
                                   "or recompile with --target-npu {}",
                                   program::target_npu_name(built.pe_count), built.pe_count, built.pe_count == 1 ? "" : "s",
                                   device, options.pe_count, options.pe_count == 1 ? "" : "s", built.pe_count,
                                   built.pe_count == 1 ? "" : "s", program::target_npu_name(options.pe_count)));
  }
  if (options.batch_size != 1 && options.batch_size != built.batch_size) {
    throw incompatible(fmt::format("compiled for batch size {}, but batch size {} was requested: recompile with "
                                   "--batch-size {}",
                                   built.batch_size, options.batch_size, options.batch_size));
  }
  if (!same_knobs(options, program::CompilerOptions{}) && !same_knobs(options, built)) {
    throw incompatible(fmt::format("compiled with compiler options {}, but {} were requested: recompile with them",
                                   knobs_text(built), knobs_text(options)));
  }
  return {std::move(file.model), "off"};
}

}  // namespace furiosa::runtime::detail
