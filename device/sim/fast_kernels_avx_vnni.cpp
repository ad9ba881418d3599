// The simulator's fast kernels at level avx-vnni (AVX2 + AVX-VNNI: vpdpbusd on ymm): the
// 256-bit kernels of fast_kernels_avx2_*.inc built with this level's target and dot-product
// step. Its functions are only reached through kernels_for() (fast_isa.cpp), which checks the
// CPU.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "conv_planes.h"
#include "fast_kernels.h"
#include "fork_join.h"

#define FK2 __attribute__((target("avx2,fma,avxvnni")))
#define FK2_VNNI 1
#define FK2_DPBUSD _mm256_dpbusd_avx_epi32

namespace furiosa::device::sim::fast {
namespace avx_vnni {

#include "fast_kernels_avx2_base.inc"
#include "fast_kernels_avx2_conv.inc"
#include "fast_kernels_avx2_depthwise.inc"
#include "fast_kernels_avx2_ops.inc"

}  // namespace avx_vnni

Kernels avx_vnni_kernels() noexcept { return avx_vnni::level_kernels(SimIsa::AvxVnni); }

}  // namespace furiosa::device::sim::fast
