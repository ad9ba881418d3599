// Running a model under ONNX Runtime 1.30 (onnxruntime-node, by ort_run.js) from a Catch2 test,
// and the helpers the model-vs-ORT tests share. node and onnxruntime-node are required: a missing
// one fails the calling test (the ort_node_install fixture installs the package).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "furiosa/compiler/compiler.h"
#include "furiosa/core/tensor.h"
#include "furiosa/postprocess/ssd.h"
#include "furiosa/runtime/runner.h"

namespace furiosa::test {

/// Outputs of one ORT run, by output name, as float32 values (row-major).
using OrtOutputs = std::map<std::string, std::vector<float>>;

/// ONNX Runtime's graph optimization level for run_ort: All (its default: QDQ groups fused into
/// integer kernels) or Disabled (the graph as written: QDQ's literal DequantizeLinear -> float
/// op -> QuantizeLinear).
enum class OrtOptimization { All, Disabled };

/// Runs `model` under ONNX Runtime (CPU, one thread, `level`) once per tensor of `inputs`, each
/// fed as the float32 input `input_name`; files go to `work`. Fails the test (REQUIRE) when node,
/// the package or a run fails, or when ORT is not version 1.30.0.
std::vector<OrtOutputs> run_ort(const std::filesystem::path& model, const std::string& input_name,
                                const std::vector<Tensor>& inputs,
                                const std::filesystem::path& work,
                                OrtOptimization level = OrtOptimization::All);

/// The scale of the per-tensor Dequantize step that writes model output `name`: one output step.
/// Fails the test when no such step exists.
float output_step(const compiler::CompiledModel& m, const std::string& name);

/// Host steps of a compiled model counted by kind.
std::map<compiler::CpuOpKind, int> host_step_kinds(const compiler::CompiledModel& m);

/// A float32 tensor of `shape` with values uniform in [lo, hi) from std::mt19937(seed).
Tensor seeded_uniform(const Shape& shape, float lo, float hi, unsigned seed);

/// A Runner on `device` for the model `file` generated into FURIOSA_GENERATED_MODELS_DIR
/// (models/CMakeLists.txt); fails the test when the file is missing.
std::unique_ptr<runtime::Runner> generated_model_runner(const std::string& file, const char* device);

/// Matches `ours` against `ref` one to one: each of ours needs a distinct detection of `ref` of
/// the same class with IoU >= 0.99 (CHECKed per detection). Returns how many matched.
std::size_t match_detections(const std::vector<postprocess::Detection>& ours,
                             const std::vector<postprocess::Detection>& ref);

}  // namespace furiosa::test
