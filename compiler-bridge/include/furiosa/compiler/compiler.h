// Graph IR -> compiled model: CPU pre-ops, an NPU program, CPU post-ops, and a partition report.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "furiosa/compiler/graph.h"
#include "furiosa/device/isa.h"

namespace furiosa::compiler {

/// Compiler options, named as in FuriosaAI's SDK compiler config.
struct CompilerOptions {
  /// Value bound to a symbolic dim 0 (batch) of graph inputs. Must be >= 1.
  std::int64_t batch_size = 1;
  /// Number of PEs the program will run on (1 = single PE, 2 = fused PE, "warboy-2pe").
  int pe_count = 2;
};

/// A host-side buffer of the compiled model (a model input or output, or a program input or
/// output). Buffers are dense; `layout` tells how program buffers are arranged.
struct HostSlot {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  isa::Layout layout = isa::Layout::Linear;

  /// Bytes of the buffer in its layout.
  std::uint64_t size_bytes() const noexcept;
};

/// CPU operators the runtime executes around the NPU program (DESIGN.md "One inference").
enum class CpuOpKind : std::uint8_t {
  Quantize,    ///< float -> uint8/int8, ONNX QuantizeLinear: saturate(rint(x / scale) + zp)
  Dequantize,  ///< uint8/int8 -> float, ONNX DequantizeLinear: (x - zp) * scale
  Lower,       ///< dense NCHW -> LoweredNCHW (rows padded to 32 elements)
  Unlower,     ///< LoweredNCHW -> dense NCHW (padding sliced off)
};

/// "Quantize", "Dequantize", "Lower", "Unlower" (span names).
std::string_view cpu_op_name(CpuOpKind kind) noexcept;

/// One CPU operator: reads slot `input`, writes slot `output`.
struct CpuOp {
  CpuOpKind kind = CpuOpKind::Lower;
  std::string node_name;            ///< ONNX node it implements ("" for Lower/Unlower)
  std::int32_t operator_index = -1; ///< that node's index, or -1
  int input = -1;
  int output = -1;
  /// Quantize/Dequantize parameters: one entry (per tensor) or one per index of `axis`.
  std::vector<float> scales;
  std::vector<std::int32_t> zero_points;
  std::int64_t axis = 1;
};

/// Where a node went and why. One entry per ONNX node.
struct PartitionEntry {
  std::string node_name;
  std::string op;               ///< qualified op type ("com.microsoft::QLinearAdd")
  std::int32_t operator_index = -1;
  std::string placement;        ///< "cpu-pre", "npu", "cpu-post", "folded", "constant"
  std::string target;           ///< what it became: "Quantize", "LowLevelConv2d", ...
  std::string reason;
};

/// The partition record, printed by `furiosa-run --verbose`.
struct PartitionReport {
  std::vector<PartitionEntry> entries;
  /// Notes that are not about one node (e.g. "Lower on host: width 28 is not a multiple of 32").
  std::vector<std::string> notes;
  /// Multi-line table.
  std::string to_string() const;
};

/// A compiled model. Immutable after compile(); shared read-only between threads.
struct CompiledModel {
  std::vector<HostSlot> slots;
  std::vector<int> input_slots;    ///< model inputs, in graph order
  std::vector<int> output_slots;   ///< model outputs, in graph order
  std::vector<CpuOp> pre_ops;      ///< run in order before the NPU program
  /// The NPU program; null when the graph has no NPU work (e.g. a lone QuantizeLinear).
  std::shared_ptr<const isa::Program> program;
  std::vector<int> program_input_slots;   ///< slot of each program input
  std::vector<int> program_output_slots;  ///< slot of each program output
  std::vector<CpuOp> post_ops;     ///< run in order after the NPU program
  PartitionReport report;
};

/// Infers dtypes and shapes of every value of `graph` in place (supported operators only).
/// Symbolic dim 0 of inputs is bound to options.batch_size; other symbolic dims are an
/// Error(IncompatibleModel) naming the input. Throws Error(IncompatibleModel) naming the node
/// when shapes do not fit the operator. Outputs of operators it does not know (and everything
/// computed from them) keep has_shape == false; compile() reports those nodes.
void infer_shapes(Graph& graph, const CompilerOptions& options);

/// Compiles a graph. Throws Error(UnsupportedOperator) listing every node (name, op type, domain,
/// reason) that neither the NPU nor a CPU operator can run, Error(IncompatibleModel) for
/// supported ops used in ways the compiler does not handle (naming the node).
CompiledModel compile(Graph graph, const CompilerOptions& options);

/// The operators compile() accepts, for error messages and docs.
std::vector<std::string> supported_operators();

}  // namespace furiosa::compiler
