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
#include "furiosa/program/compiled_model.h"
#include "furiosa/program/compiler_options.h"
#include "furiosa/program/placement.h"

namespace furiosa::compiler {

/// The compiler's output types live in program/ (the runtime reads them without the compiler);
/// these names keep the compiler's code and its users reading as before.
using program::CompilerOptions;
using program::target_npu_name;
using program::parse_target_npu;
using program::HostSlot;
using program::CpuOpKind;
using program::cpu_op_name;
using program::CpuOp;
using program::NpuCall;
using program::Step;
using program::PartitionEntry;
using program::PartitionReport;
using program::CompiledModel;
using program::PlacementSummary;
using program::summarize_placement;

/// Infers dtypes and shapes of every value of `graph` in place (supported operators only).
/// Symbolic dim 0 of inputs is bound to options.batch_size; other symbolic dims are an
/// Error(IncompatibleModel) naming the input. Throws Error(IncompatibleModel) naming the node
/// when shapes do not fit the operator. Outputs of operators it does not know (and everything
/// computed from them) keep has_shape == false; compile() reports those nodes.
void infer_shapes(Graph& graph, const CompilerOptions& options);

/// infer_shapes, except that a node whose output shape depends on an input that is not yet a
/// constant (host::InputNotConstant: Resize sizes, Tile repeats, ... computed by a shape
/// subgraph) gets outputs of unknown shape instead of an error, so constant folding can run
/// first; the compiler's last inference is the strict one, which names such a node.
void infer_shapes_deferring_constants(Graph& graph, const CompilerOptions& options);

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

/// One row of the compiler's NPU table (compiler-bridge/src/capability.cpp, the table place()
/// reads): the qualified op type, the condition under which the NPU takes a node of it, and
/// whether it is a runtime host step instead (QuantizeLinear / DequantizeLinear).
struct NpuOperatorInfo {
  std::string op;          ///< "QLinearConv", "com.microsoft::QLinearAdd", ...
  std::string condition;   ///< what the NPU requires of the node
  bool host_step = false;  ///< a runtime host step (Quantize / Dequantize), not an NPU kernel
};

/// The NPU table's rows in order (docs/operators.md's generated operator index,
/// tools/operator_index.cpp).
std::vector<NpuOperatorInfo> npu_operator_table();

}  // namespace furiosa::compiler
