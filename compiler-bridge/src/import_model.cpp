// import_model / import_model_bytes (compiler/tflite_import.h): the one place that decides whether
// a model file is TFLite or ONNX, by the ".tflite" extension (any case) or the FlatBuffer's "TFL3"
// identifier, ONNX otherwise. The import is a span named "import" under the calling thread's open
// span (the runtime's Compile span), like the compiler's passes.
#include <algorithm>
#include <cctype>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/compiler/tflite_import.h"
#include "furiosa/core/file_io.h"
#include "furiosa/profiler/profiler.h"

namespace furiosa::compiler {

namespace {

bool has_tflite_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".tflite";
}

// The span of one import, under the thread's innermost open span; inactive without one.
class ImportSpan {
 public:
  ImportSpan() : parent_(profiler::innermost_open_span()), span_(parent_.profiler, "import", parent_.context) {}

 private:
  profiler::OpenSpan parent_;
  profiler::ScopedSpan span_;
};

}  // namespace

Graph import_model_bytes(const std::string& bytes, const std::filesystem::path& path, const LoadLimits& limits) {
  const ImportSpan span;
  if (has_tflite_extension(path) || is_tflite_bytes(bytes)) return import_tflite_bytes(bytes, path.string(), limits);
  return import_onnx_bytes(bytes, path.string(), limits);
}

Graph import_model(const std::filesystem::path& path, const LoadLimits& limits) {
  const ImportSpan span;
  if (has_tflite_extension(path)) return import_tflite(path, limits);
  // Never blocks: empty for a FIFO or device, which import_onnx then refuses by name.
  const std::string head = read_file_prefix(path, 8);
  if (head.size() == 8 && is_tflite_bytes(head)) return import_tflite(path, limits);
  return import_onnx(path, limits);
}

}  // namespace furiosa::compiler
