// The graph passes that run before placement (compile() step 1), as one pipeline: the passes are
// in passes/ (one per file), their order in passes/pipeline.cpp.
#pragma once

#include <span>
#include <string>

#include "furiosa/compiler/compiler.h"
#include "furiosa/compiler/graph.h"

namespace furiosa::compiler::detail {

class Pass;

/// The pipeline: every pass run of compile() step 1, in order (a pass may appear more than
/// once, infer_shapes does). What the order does:
/// 1. bind_batch: a fixed dim 0 of 1 on the inputs becomes options.batch_size (and the leading 1
///    of constant Reshape shapes); infer_shapes binds symbolic batch dims;
/// 2. the performance guide's knobs: without_quantize, permute_input, normalized_pixel_outputs;
/// 3. fold_constants: Shape of a statically shaped value, and any node whose inputs are all
///    constants and that the host operator library runs. DequantizeLinear is never folded (QDQ
///    weights stay visible to step 4); a QuantizeLinear of constant float weights is (the weights
///    are quantized at compile time with the ONNX rule);
/// 4. fuse_qdq_operators: DequantizeLinear -> Conv / MatMul / Add / ... -> QuantizeLinear becomes
///    QLinearConv / QLinearMatMul / QLinearAdd / ... (ONNX Runtime's QDQ transformer);
/// 5. expand_qlinear_elementwise, then fuse_lookup_tables: element-wise functions of one
///    quantized tensor become 256-entry tables (furiosa::Requantize);
/// 6. fold_qdq_regions: DequantizeLinear -> data-movement ops -> QuantizeLinear runs on the
///    quantized tensors, with a furiosa::Requantize where parameters differ (exactly
///    DequantizeLinear then QuantizeLinear in float32);
/// 7. remove_dead_nodes (also before step 5: the fused groups' DequantizeLinear nodes would
///    otherwise count as outside readers and keep a QDQ SiLU's inner Q/DQ pair out of its table),
///    and infer_shapes last, so the graph leaves the pipeline topologically sorted with shapes.
std::span<const Pass* const> pass_pipeline();

/// Runs pass_pipeline() on `g` in place. Every node folded, fused or removed gets an entry in
/// `report` (placement "constant", "folded" or "removed"); the knobs and batch binding add notes.
/// Each pass run is a span named after the pass, a child of the calling thread's innermost open
/// span (profiler::innermost_open_span(): the runtime's Compile span), and costs nothing more
/// than a thread_local read when no profiler is recording.
/// Throws Error(IncompatibleModel) naming the input or node for a batch size the graph cannot
/// take, shapes that do not fit an operator, or a graph with a cycle / a read of an undefined
/// value; Error(InvalidArgument) for a permute_input that is no permutation.
void run_passes(Graph& g, const CompilerOptions& options, PartitionReport& report);

/// Appends the partition entry of node `n` to `report`.
void note_entry(PartitionReport& report, const Node& n, const char* placement, std::string target,
                std::string reason);

}  // namespace furiosa::compiler::detail
