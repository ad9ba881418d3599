// furiosa-run's benchmark mode (like furiosa-bench): sync or async load, QPS and latency
// percentiles; and the random inputs the tools feed models.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "furiosa/core/tensor.h"
#include "furiosa/runtime/runner.h"

namespace furiosa::tools {

/// What to run. The session fields (device spec, worker_num, batch size, compiler options,
/// profiler, driver) are the runtime's SessionOptions, shared with create_runner/create_queue.
struct BenchOptions {
  std::filesystem::path model;
  std::string mode = "sync";     ///< "sync": worker_num threads call Runner::run; "async": a queue
  std::uint64_t queries = 0;     ///< stop after this many queries (0: use duration, default 100)
  double duration_s = 0;         ///< stop after this many seconds (0: use queries)
  std::filesystem::path json;    ///< write the figures as JSON here when set
  bool progress = true;          ///< a progress line on stderr for runs longer than a second
  bool print = true;             ///< print the figures to stdout
  runtime::SessionOptions session;
};

/// Makes the benchmark's inputs (model input order) once the model is loaded, from its
/// descriptions.
using InputMaker = std::function<std::vector<Tensor>(const runtime::Model& model)>;

/// Figures of a run. Latency of a query = submit to result, in microseconds.
struct BenchResult {
  std::uint64_t queries = 0;
  std::uint64_t errors = 0;
  double seconds = 0;
  double qps = 0;
  double min_us = 0, mean_us = 0, p50_us = 0, p90_us = 0, p95_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
  std::string devices;
};

/// A tensor of `desc`'s dtype and shape filled from `rng`: floats uniform in [0, 1), 8-bit
/// integers over the type's range, int32 and int64 uniform in [-1000, 1000].
Tensor random_tensor(const runtime::TensorDesc& desc, std::mt19937_64& rng);

/// random_tensor() for each of the model's inputs in order, from one generator seeded `seed`.
std::vector<Tensor> random_inputs(const runtime::Model& model, std::uint64_t seed);

/// Loads the model once (a Runner in sync mode, a queue in async mode), asks `make_inputs` for
/// the inputs, runs the benchmark and prints the figures to stdout (unless options.print is
/// false). Throws furiosa::Error on setup failures; per-query failures are counted in `errors`.
BenchResult run_bench(const BenchOptions& options, const InputMaker& make_inputs);

}  // namespace furiosa::tools
