// The programs-only runtime target's answers where the default one calls the compiler
// (model_source.h): such a build loads program files (.enf) and reads .npy inputs only.
#include <fmt/format.h>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "model_source.h"

namespace furiosa::runtime::detail {

CompileResult compile_model_file(const std::filesystem::path& path, const program::CompilerOptions&) {
  throw Error(ErrorCode::ModelLoadFailed,
              fmt::format("model file '{}' is not a program file (.enf): this build of the runtime "
                          "(furiosa::runtime_core) loads compiled programs only; compile the model with "
                          "furiosa-compile, or link furiosa::runtime to compile ONNX and TFLite models",
                          escape_text(path.string())),
              ErrorSubject::of_file(path.string()));
}

Tensor load_tensor_proto_file(const std::filesystem::path& path, const LoadLimits&) {
  throw Error(ErrorCode::InvalidInput,
              fmt::format("input file '{}': ONNX TensorProto (.pb) files need the ONNX importer, which this "
                          "build of the runtime (furiosa::runtime_core) does not link; give a .npy file",
                          escape_text(path.string())),
              ErrorSubject::of_file(path.string()));
}

}  // namespace furiosa::runtime::detail
