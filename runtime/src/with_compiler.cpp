// The default runtime target's link to the compiler (model_source.h): ONNX and TFLite model files
// compiled through the compile cache, TensorProto input files, and sessions over imported graphs
// (from_graph.h). The programs-only target links programs_only.cpp instead.
#include <memory>

#include "factories.h"
#include "furiosa/compiler/compile_cache.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/compiler/onnx_import.h"
#include "furiosa/runtime/from_graph.h"
#include "model_source.h"

namespace furiosa::runtime {
namespace detail {

CompileResult compile_model_file(const std::filesystem::path& path, const program::CompilerOptions& options) {
  compiler::CachedCompile result =
      compiler::compile_model_file(path, options, compiler::compile_cache_dir_from_environment());
  return {std::move(result.model), std::string(compiler::cache_status_name(result.cache))};
}

Tensor load_tensor_proto_file(const std::filesystem::path& path, const LoadLimits& limits) {
  return compiler::load_tensor_pb(path, nullptr, limits);
}

namespace {

/// A source that compiles `graph` (once) when the session knows its options.
ModelSource graph_source(compiler::Graph graph) {
  auto shared = std::make_shared<compiler::Graph>(std::move(graph));
  return ModelSource(CompileFn([shared](const program::CompilerOptions& options) {
    return CompileResult{compiler::compile(std::move(*shared), options), "off"};
  }));
}

}  // namespace
}  // namespace detail

std::unique_ptr<Runner> create_runner(compiler::Graph graph, const RunnerOptions& options) {
  return detail::runner_from(detail::graph_source(std::move(graph)), options);
}

std::pair<Submitter, Receiver> create_queue(compiler::Graph graph, const QueueOptions& options) {
  return detail::queue_from(detail::graph_source(std::move(graph)), options);
}

Model describe_model(compiler::Graph graph, const SessionOptions& options) {
  return detail::describe_from(detail::graph_source(std::move(graph)), options);
}

}  // namespace furiosa::runtime
