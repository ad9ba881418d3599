// A compiled model: host buffers, the steps of one inference (host operators and NPU calls), the
// NPU programs and the partition report. What the compiler produces, a program file (.enf)
// holds, and the runtime executes; no compiler is needed to read or run one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/core/tensor.h"
#include "furiosa/device/isa.h"
#include "furiosa/host/op_node.h"

namespace furiosa::program {

/// A host-side buffer of the compiled model (a model input or output, a value crossing between
/// host and NPU, or a constant operand of a host operator). Buffers are dense unless `layout`
/// says lowered.
struct HostSlot {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  isa::Layout layout = isa::Layout::Linear;
  /// Set for constant operands of host operators; the runtime reads it in place.
  std::shared_ptr<const Tensor> constant;
  /// Axis naming of a model input or output whose dims are not NCHW ("NHWC" for TFLite image
  /// tensors; Value::format); empty for the default naming by rank.
  std::string format = {};

  /// Bytes of the buffer in its layout.
  std::uint64_t size_bytes() const noexcept;
};

/// Host (CPU) operators the runtime executes around NPU calls (DESIGN.md "One inference").
enum class CpuOpKind : std::uint8_t {
  Quantize,    ///< float -> uint8/int8, ONNX QuantizeLinear: saturate(rint(x / scale) + zp)
  Dequantize,  ///< uint8/int8/int32 -> float, ONNX DequantizeLinear: (x - zp) * scale
  Lower,       ///< dense NCHW (or NHWC, see CpuOp::channels_last) -> LoweredNCHW (rows padded to 32 elements)
  Unlower,     ///< LoweredNCHW -> dense NCHW (padding sliced off)
  External,    ///< an ONNX node the NPU cannot run, executed by the host operator library
};

/// "Quantize", "Dequantize", "Lower", "Unlower", "External" (External spans use the op type).
std::string_view cpu_op_name(CpuOpKind kind) noexcept;

/// One host operator: reads slots `inputs`, writes slots `outputs` (one each except External).
struct CpuOp {
  CpuOpKind kind = CpuOpKind::Lower;
  std::string node_name;            ///< ONNX node it implements ("" for Lower/Unlower)
  std::int32_t operator_index = -1; ///< that node's index, or -1
  std::vector<int> inputs;          ///< slot per node input; -1 for an omitted optional input
  std::vector<int> outputs;
  /// Quantize/Dequantize parameters: one entry (per tensor) or one per index of `axis`.
  std::vector<float> scales;
  std::vector<std::int32_t> zero_points;
  std::int64_t axis = 1;
  /// Quantize: round x / scale half away from zero (TFLite's QUANTIZE, std::round) instead of
  /// half to even (ONNX QuantizeLinear).
  bool round_half_away_from_zero = false;
  /// Lower: the input slot is dense NHWC [N, H, W, C] (the model's layout, e.g. a TFLite image)
  /// and the output slot LoweredNCHW [N, C, H, W]: the transpose happens while lowering.
  bool channels_last = false;
  /// External: the node (op type, attributes) for the host operator library.
  std::shared_ptr<const host::OpNode> node;
};

/// One execution of an NPU program: Load `input_slots`, run, Store to `output_slots`.
struct NpuCall {
  std::shared_ptr<const isa::Program> program;
  std::vector<int> input_slots;
  std::vector<int> output_slots;
  /// The program's DRAM region: constants, then activations placed by liveness (buffers live at
  /// different times share bytes). Bytes of the activation area as planned, and as it would be
  /// with every activation in its own bytes (the partition report prints both).
  std::uint64_t activation_bytes = 0;
  std::uint64_t activation_bytes_unplanned = 0;
};

/// One step of an inference, executed in order.
struct Step {
  enum class Kind : std::uint8_t { Cpu, Npu } kind = Kind::Cpu;
  CpuOp cpu;     ///< when kind == Cpu
  int npu = -1;  ///< index into CompiledModel::npu_calls when kind == Npu
};

/// Where a node went and why. One entry per node of the source model (ONNX or TFLite).
struct PartitionEntry {
  std::string node_name;
  std::string op;               ///< qualified op type ("com.microsoft::QLinearAdd")
  std::int32_t operator_index = -1;
  /// "npu", "cpu" (Quantize/Dequantize on the host), "fallback" (external operator on the host),
  /// "folded" (absorbed by a rewrite), "constant" (evaluated at compile time), "removed" (dead).
  std::string placement;
  std::string target;           ///< what it became: "Quantize", "LowLevelConv2d", "Softmax", ...
  std::string reason;
};

/// The partition record, printed by `furiosa-run --verbose`.
struct PartitionReport {
  std::vector<PartitionEntry> entries;
  /// Notes that are not about one node (e.g. "Lower on host: width 28 is not a multiple of 32").
  std::vector<std::string> notes;
  /// Multi-line table.
  std::string to_string() const;
  /// Number of entries with the given placement.
  std::size_t count(std::string_view placement) const;
};

/// A compiled model. Immutable after compile(); shared read-only between threads.
struct CompiledModel {
  std::vector<HostSlot> slots;
  std::vector<int> input_slots;    ///< model inputs, in graph order
  std::vector<int> output_slots;   ///< model outputs, in graph order
  std::vector<Step> steps;         ///< one inference = these steps in order
  std::vector<NpuCall> npu_calls;  ///< NPU programs (one per contiguous NPU segment)
  PartitionReport report;
};

}  // namespace furiosa::program
