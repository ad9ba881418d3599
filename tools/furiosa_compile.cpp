// furiosa-compile: compile a quantized ONNX or TFLite model ahead of time into a program file
// (.enf) that create_runner, create_queue and furiosa-run load without compiling (like the SDK's
// `furiosa compile MODEL -o OUTPUT.enf --target-npu ...`).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "furiosa/compiler/compile_cache.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/compiler/program_file.h"
#include "furiosa/compiler/tflite_import.h"
#include "furiosa/core/error.h"
#include "src/compiler_flags.h"

namespace fs = std::filesystem;
using namespace furiosa;

int main(int argc, char** argv) {
  CLI::App app{"Compile a quantized ONNX or TFLite model into a Warboy program file (.enf)"};
  std::string model;
  std::string output;
  std::int64_t batch_size = 1;
  tools::CompilerFlags flags;
  app.add_option("model", model, "ONNX (.onnx) or TFLite (.tflite) model file")->required();
  app.add_option("-o,--output", output, "Program file to write (default: MODEL's name with .enf, in the current directory)");
  app.add_option("--batch-size", batch_size, "Batch bound to a symbolic dim 0 of the inputs")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{4096}));
  tools::add_compiler_flags(app, flags);
  CLI11_PARSE(app, argc, argv);
  try {
    compiler::CompilerOptions options;  // target warboy-2pe (fused PE) unless --target-npu says otherwise
    tools::apply_compiler_flags(flags, options);
    options.batch_size = batch_size;
    const fs::path out = output.empty() ? fs::path(model).stem().concat(".enf") : fs::path(output);
    const compiler::CompiledModel compiled = compiler::compile_model_file(model, options, std::nullopt).model;  // errors name the file
    compiler::save_program(compiled, options, out);
    const auto programs = compiled.npu_calls.size();
    fmt::print("wrote {} ({} bytes, {} NPU program{}, target {}, batch {}, compiler {})\n", out.string(),
               fs::file_size(out), programs, programs == 1 ? "" : "s", compiler::target_npu_name(options.pe_count),
               options.batch_size, compiler::compiler_version());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
