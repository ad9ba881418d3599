// Graph IR -> compiled model: CPU pre-ops, an NPU program, CPU post-ops, and a partition report.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/compiler/graph.h"
#include "furiosa/device/isa.h"

namespace furiosa::compiler {

/// Compiler options, named as in FuriosaAI's SDK compiler config and `furiosa compile` (the
/// performance guide's knobs; docs/compiler-options.md gives each one's exact effect). A knob
/// changes how tensors cross the host boundary, never the values computed.
struct CompilerOptions {
  /// Value bound to a symbolic dim 0 (batch) of graph inputs. Must be >= 1.
  std::int64_t batch_size = 1;
  /// Number of PEs the program will run on: 1 = single PE (`--target-npu warboy`), 2 = fused
  /// PE (`warboy-2pe`). The runtime sets it from the device it opens.
  int pe_count = 2;
  /// Inputs (by name) the caller gives already quantized: uint8/int8 with the scale and zero
  /// point of the model's QuantizeLinear on that input, which is then removed (no host
  /// Quantize). Every reader of the input must be a per-tensor QuantizeLinear with the same
  /// parameters, else compile() raises IncompatibleModel naming the input.
  std::vector<std::string> without_quantize;
  /// Outputs (by name) returned as uint8 pixels instead of floats in [0, 1]: the output's
  /// DequantizeLinear is replaced by a requantization to scale 1/255, zero point 0 on the NPU
  /// (nothing when the output already has those parameters), so the value is exactly
  /// QuantizeLinear(y, 1/255, 0) of the float output y (no host Dequantize).
  std::vector<std::string> normalized_pixel_outputs;
  /// Input name -> permutation: the caller gives the input transposed, and the model input is
  /// Transpose(given, perm) (e.g. {0, 3, 1, 2}: NHWC images for an NCHW model). The transpose
  /// runs after the per-tensor host Quantize and, for {0, 3, 1, 2}, inside the host Lower step;
  /// otherwise on the NPU (quantized) or as a host Transpose.
  std::map<std::string, std::vector<std::int64_t>> permute_input;
  /// The caller gives NPU-program inputs in the NPU's lowered layout (LoweredNCHW: each row
  /// padded to 32 elements; the input's shape then reports the padded width, format
  /// "lowered_nchw"), so no host Lower
  /// runs. Applies to 4-D inputs the NPU reads lowered with no host operator before them
  /// (quantized inputs, e.g. with without_quantize).
  bool remove_lower = false;
  /// The caller takes NPU-program outputs in the lowered layout (the output's shape reports the
  /// padded width), so no host Unlower runs. Applies to 4-D lowered outputs with no host
  /// operator after them.
  bool remove_unlower = false;
};

/// "warboy" for pe_count 1, "warboy-2pe" for 2 (`furiosa compile --target-npu`).
std::string_view target_npu_name(int pe_count) noexcept;
/// pe_count of a `--target-npu` name ("warboy" -> 1, "warboy-2pe" -> 2). Throws
/// Error(InvalidArgument) naming the value for anything else.
int parse_target_npu(std::string_view name);

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
  std::shared_ptr<const Node> node;
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

/// Where a node went and why. One entry per ONNX node.
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

/// Infers dtypes and shapes of every value of `graph` in place (supported operators only).
/// Symbolic dim 0 of inputs is bound to options.batch_size; other symbolic dims are an
/// Error(IncompatibleModel) naming the input. Throws Error(IncompatibleModel) naming the node
/// when shapes do not fit the operator. Outputs of operators it does not know (and everything
/// computed from them) keep has_shape == false; compile() reports those nodes.
void infer_shapes(Graph& graph, const CompilerOptions& options);

/// Compiles a graph: folds constants (Shape/Gather/... subgraphs), rewrites QDQ groups into
/// quantized operators, then partitions the nodes in graph order into NPU segments (each one
/// NPU program) and host operators. Throws Error(UnsupportedOperator) listing every node (name,
/// op type, domain, reason) that neither the NPU nor the host operator library can run, and
/// Error(IncompatibleModel) for supported ops used in ways the compiler does not handle.
CompiledModel compile(Graph graph, const CompilerOptions& options);

/// The operators compile() accepts, for error messages and docs.
std::vector<std::string> supported_operators();

/// Qualified op types ("QLinearConv", "com.microsoft::QLinearAdd", ...) the compiler places on
/// the NPU (data-movement ops only on uint8/int8 tensors) or runs as host Quantize/Dequantize.
/// Together with cpu_op_list() this is the supported-op table the conformance tests run.
std::vector<std::string> npu_operators();

}  // namespace furiosa::compiler
