// The simulator's fast kernels at level neon (ARMv8-A Advanced SIMD, which every aarch64 CPU
// has: exact int8 products with smull + sadalp): the kernels of fast_kernels_neon_*.inc built
// for the baseline with this level's dot-product step. Its functions are only reached through
// kernels_for() (fast_isa.cpp), which checks the CPU.
#include <arm_neon.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "conv_planes.h"
#include "fast_kernels.h"

#define FKN
#define FKN_DOTPROD 0
#define FKN_I8MM 0

namespace furiosa::device::sim::fast {
namespace neon {

#include "fast_kernels_neon_base.inc"
#include "fast_kernels_neon_conv.inc"
#include "fast_kernels_neon_ops.inc"

}  // namespace neon

Kernels neon_kernels() noexcept { return neon::level_kernels(SimIsa::Neon); }

}  // namespace furiosa::device::sim::fast
