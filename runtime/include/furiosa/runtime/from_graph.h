// Sessions over a graph the caller imported (compiler/onnx_import.h, tflite_import.h), e.g. one
// whose inputs were bound as constants. Needs the default target furiosa::runtime (it links the
// compiler); runner.h and queue.h themselves name no compiler type.
#pragma once

#include <memory>
#include <utility>

#include "furiosa/compiler/graph.h"
#include "furiosa/runtime/queue.h"
#include "furiosa/runtime/runner.h"

namespace furiosa::runtime {

/// create_runner(path, options) for an imported graph: compiled (without the compile cache:
/// there are no model bytes to key it by) once the device's PE count is known. Throws like
/// create_runner.
std::unique_ptr<Runner> create_runner(compiler::Graph graph, const RunnerOptions& options = {});

/// create_queue(path, options) for an imported graph. Throws like create_queue.
std::pair<Submitter, Receiver> create_queue(compiler::Graph graph, const QueueOptions& options = {});

/// describe_model(path, options) for an imported graph: compiles it without opening a device.
Model describe_model(compiler::Graph graph, const SessionOptions& options = {});

}  // namespace furiosa::runtime
