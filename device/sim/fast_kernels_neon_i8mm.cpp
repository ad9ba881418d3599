// The simulator's fast kernels at level neon-i8mm (Advanced SIMD + the dot product + the int8
// matrix-multiply extension, ARMv8.6 / optional from ARMv8.2: usdot, HWCAP2_I8MM): the kernels of
// fast_kernels_neon_*.inc with usdot as the dot-product step. usdot multiplies unsigned by signed
// bytes, so the plans' unsigned activations are used as they are: no move to the signed domain
// and no 128 x (sum of the weights) correction, which neon-dotprod's sdot needs
// (fast_kernels_neon_base.inc). The instructions are enabled per function (target
// "+dotprod+i8mm"), never for the whole file, so the library still runs on any ARMv8-A CPU. Its
// functions are only reached through kernels_for() (fast_isa.cpp), which checks the CPU.
#include <arm_neon.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "conv_planes.h"
#include "fast_kernels.h"

#define FKN __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))
#define FKN_DOTPROD 1
#define FKN_I8MM 1

namespace furiosa::device::sim::fast {
namespace neon_i8mm {

#include "fast_kernels_neon_base.inc"
#include "fast_kernels_neon_conv.inc"
#include "fast_kernels_neon_ops.inc"

}  // namespace neon_i8mm

Kernels neon_i8mm_kernels() noexcept { return neon_i8mm::level_kernels(SimIsa::NeonI8mm); }

}  // namespace furiosa::device::sim::fast
