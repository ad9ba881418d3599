// The simulator's fast kernels at level avx512-vnni (AVX-512 F/BW/VL + VNNI without VBMI:
// Cascade Lake, Cooper Lake): the 256-bit kernels of fast_kernels_avx2_*.inc with vpdpbusd in
// its EVEX form on ymm, the same code as avx-vnni (which such CPUs lack). Its functions are
// only reached through kernels_for() (fast_isa.cpp), which checks the CPU.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "conv_planes.h"
#include "fast_kernels.h"
#include "fork_join.h"

#define FK2 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")))
#define FK2_VNNI 1
#define FK2_DPBUSD _mm256_dpbusd_epi32

namespace furiosa::device::sim::fast {
namespace avx512_vnni {

#include "fast_kernels_avx2_base.inc"
#include "fast_kernels_avx2_conv.inc"
#include "fast_kernels_avx2_depthwise.inc"
#include "fast_kernels_avx2_ops.inc"

}  // namespace avx512_vnni

Kernels avx512_vnni_kernels() noexcept { return avx512_vnni::level_kernels(SimIsa::Avx512Vnni); }

}  // namespace furiosa::device::sim::fast
