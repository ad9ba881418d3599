// Where a compiled model's work runs: the NPU's share of MACs and every host step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "furiosa/program/compiled_model.h"

namespace furiosa::program {

/// Where a compiled model's work runs, as `furiosa-run --verbose` prints it (issue 15: "the
/// share of MACs on the NPU and every host step with its reason").
struct PlacementSummary {
  /// Multiply-accumulates of the NPU programs' kernels (isa::kernel_macs: conv, matmul, global
  /// average pool), per inference.
  std::uint64_t npu_macs = 0;
  /// Multiply-accumulates of host external operators with weights (Conv, ConvInteger,
  /// QLinearConv, MatMul, MatMulInteger, QLinearMatMul, Gemm), from their slot shapes; other
  /// host operators count 0.
  std::uint64_t host_macs = 0;
  std::size_t npu_programs = 0;  ///< NPU calls per inference (one per contiguous NPU segment)
  /// One line per host step in execution order: "<kind> <node or slot>: <reason>".
  std::vector<std::string> host_steps;
  /// npu_macs / (npu_macs + host_macs) in percent; 100 when the model has no MACs.
  double npu_mac_share_percent() const noexcept;
  /// "NPU share of MACs: X% (...)", the NPU program count and the host steps, multi-line.
  std::string to_string() const;
};

/// Computes the PlacementSummary of a compiled model (steps, programs and host slot shapes).
PlacementSummary summarize_placement(const CompiledModel& model);

}  // namespace furiosa::program
