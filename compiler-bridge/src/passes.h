// Graph rewrites that run before placement (compile() step 1): batch binding, constant folding,
// QDQ fusion into QOperator nodes, QDQ regions on quantized tensors, dead-node removal.
#pragma once

#include "furiosa/compiler/compiler.h"
#include "furiosa/compiler/graph.h"

namespace furiosa::compiler::detail {

/// Runs every rewrite on `g` in place, in this order, and leaves `g` topologically sorted with
/// shapes inferred:
/// 1. batch: a fixed dim 0 of 1 on the inputs becomes options.batch_size (and the leading 1 of
///    constant Reshape shapes); symbolic batch dims are bound by infer_shapes;
/// 2. constant folding: Shape of a statically shaped value, and any node whose inputs are all
///    constants and that the host operator library runs. DequantizeLinear is never folded (QDQ
///    weights stay visible to step 3); a QuantizeLinear of constant float weights is (the
///    weights are quantized at compile time with the ONNX rule);
/// 3. QDQ fusion: DequantizeLinear -> Conv / MatMul / Add / GlobalAveragePool -> QuantizeLinear
///    becomes QLinearConv / QLinearMatMul / QLinearAdd / QLinearGlobalAveragePool (ONNX Runtime's
///    QDQ transformer);
/// 4. QDQ regions: DequantizeLinear -> data-movement ops -> QuantizeLinear runs on the quantized
///    tensors, with a furiosa::Requantize where parameters differ (exactly DequantizeLinear then
///    QuantizeLinear in float32);
/// 5. nodes whose outputs nobody reads are removed.
/// Every node folded, fused or removed gets an entry in `report` (placement "constant", "folded"
/// or "removed"); batch binding adds a note.
/// Throws Error(IncompatibleModel) naming the input or node for a batch size the graph cannot
/// take, shapes that do not fit an operator, or a graph with a cycle / a read of an undefined
/// value.
void run_passes(Graph& g, const CompilerOptions& options, PartitionReport& report);

/// Appends the partition entry of node `n` to `report`.
void note_entry(PartitionReport& report, const Node& n, const char* placement, std::string target,
                std::string reason);

}  // namespace furiosa::compiler::detail
