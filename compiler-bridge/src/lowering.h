// Lowering (compile() step 3, after passes and the capability check): walks the placed graph in
// order and emits the compiled model's steps: host Quantize/Dequantize/Lower/Unlower and
// external operators, and one NPU program (ISA kernels, constants, activations placed by
// liveness) per contiguous NPU segment.
#pragma once

#include "furiosa/compiler/compiler.h"
#include "furiosa/compiler/graph.h"

namespace furiosa::compiler::detail {

/// Lowers `g` (rewritten by run_passes, every node supported per capability.h) into `out`'s
/// slots, steps and NPU calls, appending to `out.report`. NPU-placed nodes join the open NPU
/// segment; a host node reading a value of the open segment closes it, and values used outside
/// a segment become program outputs. Lower / Unlower run on the host where a lowered tensor's
/// width is not a multiple of isa::kLoweredWidthAlign, on the NPU otherwise (a report note says
/// which); with options.remove_lower / remove_unlower the caller gives / takes such tensors
/// lowered instead (the slot is dense with the padded width and format "lowered_nchw"). Throws Error(IncompatibleModel) naming the node for supported operators used in ways
/// the kernels do not handle (e.g. a non-4-D input of a lowered kernel, bad weight dtypes).
void lower_graph(const Graph& g, const CompilerOptions& options, CompiledModel& out);

}  // namespace furiosa::compiler::detail
