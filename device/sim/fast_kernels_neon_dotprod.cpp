// The simulator's fast kernels at level neon-dotprod (Advanced SIMD + the dot-product extension,
// ARMv8.2 sdot, HWCAP_ASIMDDP): the kernels of fast_kernels_neon_*.inc with sdot as the
// dot-product step, enabled per function (target "+dotprod"), never for the whole file, so the
// library still runs on any ARMv8-A CPU. Its functions are only reached through kernels_for()
// (fast_isa.cpp), which checks the CPU.
#include <arm_neon.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "conv_planes.h"
#include "fast_kernels.h"

#define FKN __attribute__((target("arch=armv8.2-a+dotprod")))
#define FKN_DOTPROD 1
#define FKN_I8MM 0

namespace furiosa::device::sim::fast {
namespace neon_dotprod {

#include "fast_kernels_neon_base.inc"
#include "fast_kernels_neon_conv.inc"
#include "fast_kernels_neon_ops.inc"

}  // namespace neon_dotprod

Kernels neon_dotprod_kernels() noexcept { return neon_dotprod::level_kernels(SimIsa::NeonDotprod); }

}  // namespace furiosa::device::sim::fast
