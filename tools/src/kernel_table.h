// The device kernels of a run as the timing model sees them (furiosa-run --verbose): per kernel
// its modelled cycles, bound and DRAM traffic, read from the NPU kernel spans of a trace.
#pragma once

#include <string>
#include <vector>

#include "furiosa/profiler/span.h"

namespace furiosa::tools {

/// A table of the kernels of the first Execution span of each NPU program in `spans` (one
/// execution per program is enough: the timing model depends on shapes only), with the totals:
/// kernels per bound, cycles spent loading weights, DRAM bytes per execution and how many of them
/// are spilled activations. Reads the kernel spans' `cycles` and their attributes "bound",
/// "weight_load_cycles", "dram_bytes" and "spill_bytes" (profiler/device_execution.h). Says so in
/// one line when `spans` holds no kernel span (the trace categories left them out) or the backend
/// does not model them.
std::string format_device_kernels(const std::vector<profiler::SpanRecord>& spans);

}  // namespace furiosa::tools
