// The runtime's entry points from a ModelSource, shared by the public create_* functions
// (runner.cpp, queue.cpp) and the compiler-aware overloads for imported graphs (with_compiler.cpp).
#pragma once

#include <memory>
#include <utility>

#include "furiosa/runtime/queue.h"
#include "furiosa/runtime/runner.h"
#include "model_source.h"

namespace furiosa::runtime::detail {

/// create_runner's work: a session over `source`. Throws like create_runner.
std::unique_ptr<Runner> runner_from(ModelSource source, const RunnerOptions& options);
/// create_queue's work. Throws like create_queue.
std::pair<Submitter, Receiver> queue_from(ModelSource source, const QueueOptions& options);
/// describe_model's work: compiles (or loads) without opening a device.
Model describe_from(ModelSource source, const SessionOptions& options);

}  // namespace furiosa::runtime::detail
