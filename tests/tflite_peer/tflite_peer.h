// Running a .tflite model under the TFLite peer (TensorFlow Lite 2.14's reference kernels, from
// Debian unstable; tests/tflite_peer/install_tflite_peer.sh and tflite_peer_run.cpp) from a
// Catch2 test, and comparing the runtime's outputs with it. The peer is required: when the
// tflite_peer_install fixture could not fetch it, the calling test fails with one line.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "furiosa/core/tensor.h"
#include "furiosa/runtime/runner.h"

namespace furiosa::test {

/// Runs `model` under the TFLite peer with `inputs` (raw bytes in the model's layout and types)
/// and returns the outputs as tensors of the given dtypes and shapes (`like`: one per output).
/// Fails the test (REQUIRE) when the peer is missing or the run fails.
std::vector<Tensor> run_tflite_peer(const std::filesystem::path& model,
                                    const std::vector<Tensor>& inputs,
                                    const std::vector<Tensor>& like);

/// Runner options of the peer tests: one worker on `device` (a single PE by default).
runtime::RunnerOptions peer_runner_options(const char* device = "npu0pe0");

/// Largest |a - b| over the elements of two tensors of one shape (REQUIRE on the shape).
double worst_difference(const Tensor& a, const Tensor& b);

/// Writes `bytes` as a .tflite file `name` into the build tree's peer model folder; returns the
/// path.
std::filesystem::path write_peer_model(const std::string& name, const std::string& bytes);

/// A tensor of `shape` and 8-bit or int32 dtype `d` with values uniform in [lo, hi] from
/// std::mt19937(seed).
Tensor seeded_ints(DType d, const Shape& shape, int lo, int hi, unsigned seed);

/// The number of distinct element values of `t` (guards comparisons against degenerate data: an
/// output clamped to one value would compare equal trivially).
std::size_t distinct(const Tensor& t);

/// The placement ("npu", "fallback", "constant", ...) of every report entry of operator `op`
/// (the IR's op type, "furiosa::Requantize" for a custom domain).
std::vector<std::string> placements(const runtime::Runner& runner, const std::string& op);

}  // namespace furiosa::test
