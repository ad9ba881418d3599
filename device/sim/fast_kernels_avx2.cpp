// The simulator's fast kernels at level avx2 (exact int8 products as int16 pairs with vpmaddwd):
// the 256-bit kernels of fast_kernels_avx2_*.inc built with this level's target and
// dot-product step. Its functions are only reached through kernels_for() (fast_isa.cpp), which
// checks the CPU.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "conv_planes.h"
#include "fast_kernels.h"
#include "fork_join.h"

#define FK2 __attribute__((target("avx2,fma")))
#define FK2_VNNI 0
#define FK2_DPBUSD unused

namespace furiosa::device::sim::fast {
namespace avx2 {

#include "fast_kernels_avx2_base.inc"
#include "fast_kernels_avx2_conv.inc"
#include "fast_kernels_avx2_depthwise.inc"
#include "fast_kernels_avx2_ops.inc"

}  // namespace avx2

Kernels avx2_kernels() noexcept { return avx2::level_kernels(SimIsa::Avx2); }

}  // namespace furiosa::device::sim::fast
