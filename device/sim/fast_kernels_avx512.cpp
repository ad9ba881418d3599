// The simulator's fast kernels at level avx512: AVX-512 VNNI int8 convolution (im2col-free
// pointwise GEMM, im2col GEMM, depthwise), matmul, add, max pool, global-average-pool sums and the
// byte copies / table lookups of the data-movement kernels. See fast_kernels.h for the arithmetic.
//
// Every function that uses AVX-512 carries FK_TARGET and is only reached through kernels_for()
// (fast_isa.cpp), which checks the CPU; the rest of the project is compiled for the baseline
// x86-64 ISA.
//
// Layouts. The convolution GEMM computes Y[m][p] = sum_k W[m][k] X[k][p] with output positions
// p = oh * OW + ow in 32-bit lanes (16 per register), so results come out along output rows,
// which is the NCHW layout. X is packed as B[k4][p][4] (4 consecutive k per lane, as vpdpbusd
// wants them); for a 1x1 stride-1 unpadded convolution that is an interleave of 4 input rows,
// otherwise the rows are gathered first (im2col). Weights are pre-packed at program load as
// [block of 6 output channels][k4][6][4] and broadcast 4 bytes at a time. A register tile is
// 6 output channels x 64 positions (24 zmm accumulators), started from the constant term c0.
//
// Depthwise convolutions keep positions in lanes too: each output row reads its windows from a
// padded copy of the input plane, vpermb gathers the (up to 4) taps of a kernel row into the 4
// bytes of every lane, and one vpdpbusd per kernel row accumulates them.
//
// The code is in four parts, included in this order into this one translation unit, like the
// 256-bit levels' fast_kernels_avx2_*.inc: fast_kernels_avx512_base.inc (scratch, masks,
// requantization), fast_kernels_avx512_conv.inc (packing, GEMM convolution),
// fast_kernels_avx512_depthwise.inc (depthwise convolution) and fast_kernels_avx512_ops.inc
// (matmul, add, max pool, data movement and the level's entry points).
//
// Stores avoid masked byte stores where they can (they are slow on some CPUs): whole 16/32/64
// byte stores whose extra bytes are either rewritten later or are the row padding (zeroed).
#include "conv_planes.h"
#include "fast_kernels.h"
#include "fork_join.h"

// GCC 12's AVX-512 headers build masked-off operands with _mm512_undefined_*(), a
// self-initialised variable that -Wmaybe-uninitialized reports wherever such an intrinsic is
// inlined (GCC bug 105593); the values are never used.
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wuninitialized"
#else
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#define FK_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512dq")))

namespace furiosa::device::sim::fast {

#include "fast_kernels_avx512_base.inc"
#include "fast_kernels_avx512_conv.inc"
#include "fast_kernels_avx512_depthwise.inc"
#include "fast_kernels_avx512_ops.inc"

}  // namespace furiosa::device::sim::fast
