// The simulator's fast kernels at level avx512: AVX-512 VNNI int8 convolution (im2col-free pointwise GEMM,
// im2col GEMM, depthwise), matmul, add, max pool, global-average-pool sums and the byte copies
// / table lookups of the data-movement kernels. See fast_kernels.h for the arithmetic.
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
// Stores avoid masked byte stores where they can (they are slow on some CPUs): whole 16/32/64
// byte stores whose extra bytes are either rewritten later or are the row padding (zeroed).
#include "fast_kernels.h"

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
#include <cstring>

#define FK_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512dq")))

namespace furiosa::device::sim::fast {

namespace {

// Per-thread scratch: vectors that only grow, so a thread that has run a program once runs it
// again without allocating.
struct Scratch {
  std::vector<std::uint8_t> packed;   // conv B matrix
  std::vector<std::uint8_t> rows;     // im2col rows
  std::vector<std::uint8_t> zero;     // a row of zeros (channel padding)
  std::vector<std::int32_t> colsum;   // conv sum over k of x per position
  std::vector<std::uint8_t> plane;    // depthwise / max pool padded plane
  std::vector<std::uint8_t> arow;     // matmul row of A
};
thread_local Scratch t_scratch;

// A 64-byte aligned pointer to at least `n` elements of `v` (grows it when needed). Contents are
// unspecified unless `zeroed` (then the first n elements are 0).
template <class T>
T* grow(std::vector<T>& v, std::size_t n, bool zeroed = false) {
  const std::size_t need = n + 64 / sizeof(T) + 1;
  if (v.size() < need) v.resize(need);
  auto addr = reinterpret_cast<std::uintptr_t>(v.data());
  T* p = reinterpret_cast<T*>((addr + 63) & ~std::uintptr_t{63});
  if (zeroed) std::memset(static_cast<void*>(p), 0, n * sizeof(T));
  return p;
}

constexpr std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

// Output positions o in [0, out) whose input position o * stride + offset lies in [0, in).
void valid_range(std::int64_t out, std::int64_t stride, std::int64_t offset, std::int64_t in,
                 std::int64_t& lo, std::int64_t& hi) {
  lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  hi = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
}

inline __mmask64 mask64(std::int64_t n) {
  if (n <= 0) return 0;
  return n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
}
inline __mmask16 mask16(std::int64_t n) {
  if (n <= 0) return 0;
  return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// Requantization of 16 int32 lanes with the result of isa::requantize: float(acc) * mult,
// rounded with the current rounding mode (half to even), + zero point, saturated; then narrowed
// to bytes (two's complement for int8).
//
// Instead of rounding, adding and clamping in float, the product is clamped to +-2^30 (far
// outside any 8-bit range, so the clamp cannot change the saturated result), converted to int32
// with the current rounding mode (exact: the rounded value is an integer below 2^30), offset by
// the zero point in int32 (no overflow) and saturated by the narrowing instruction. Where the
// float code's rounded value is below 2^24 in magnitude its float additions are exact and both
// give the same integer; elsewhere both saturate to the same end of the range.
struct Requant {
  __m512i zp, neg_zp;
  __m512 lo, hi;     // -2^30, 2^30
  bool out_signed;
  bool bounded;      // |f| <= 2^29 for every value requantized: no clamp needed before cvt
};

// `bound`: an upper bound of |f| for every f this Requant will see (infinity: unknown).
FK_TARGET inline Requant make_requant(std::int32_t zp, std::int32_t qmin, double bound) {
  return {_mm512_set1_epi32(zp), _mm512_set1_epi32(-zp), _mm512_set1_ps(-1073741824.0f),
          _mm512_set1_ps(1073741824.0f), qmin < 0, bound <= 536870912.0};
}

FK_TARGET inline __m128i requant16_f(__m512 f, const Requant& q) {
  if (q.bounded) {
    // Rounded to an int32 exactly (|f| <= 2^29); i + zp cannot overflow. uint8: max(i, -zp) + zp
    // is max(i + zp, 0), then unsigned saturation; int8: signed saturation.
    const __m512i i = _mm512_cvtps_epi32(f);
    if (q.out_signed) return _mm512_cvtsepi32_epi8(_mm512_add_epi32(i, q.zp));
    return _mm512_cvtusepi32_epi8(_mm512_add_epi32(_mm512_max_epi32(i, q.neg_zp), q.zp));
  }
  f = _mm512_min_ps(_mm512_max_ps(f, q.lo), q.hi);
  const __m512i i = _mm512_add_epi32(_mm512_cvtps_epi32(f), q.zp);
  if (q.out_signed) return _mm512_cvtsepi32_epi8(i);
  return _mm512_cvtusepi32_epi8(_mm512_max_epi32(i, _mm512_setzero_si512()));
}

// Four vectors of 16 products f (float(acc) * mult) requantized into 64 bytes, in order. The
// rounded int32 values are narrowed with signed saturation to int16, offset by the zero point
// with int16 saturation, then narrowed with saturation to the output type; since |zp| <= 255
// every saturation that happens on the way also happens to the exact value (a value beyond
// int16 stays beyond the 8-bit range after adding zp), so the result is saturate(round(f) + zp).
FK_TARGET inline __m512i requant64(__m512 f0, __m512 f1, __m512 f2, __m512 f3, const Requant& q) {
  if (!q.bounded) {
    f0 = _mm512_min_ps(_mm512_max_ps(f0, q.lo), q.hi);
    f1 = _mm512_min_ps(_mm512_max_ps(f1, q.lo), q.hi);
    f2 = _mm512_min_ps(_mm512_max_ps(f2, q.lo), q.hi);
    f3 = _mm512_min_ps(_mm512_max_ps(f3, q.lo), q.hi);
  }
  const __m512i zp16 = _mm512_packs_epi32(q.zp, q.zp);
  // packs work within 128-bit lanes: lane i of the result holds dwords 4i..4i+3 of each input.
  const __m512i a = _mm512_adds_epi16(
      _mm512_packs_epi32(_mm512_cvtps_epi32(f0), _mm512_cvtps_epi32(f1)), zp16);
  const __m512i b = _mm512_adds_epi16(
      _mm512_packs_epi32(_mm512_cvtps_epi32(f2), _mm512_cvtps_epi32(f3)), zp16);
  const __m512i c = q.out_signed ? _mm512_packs_epi16(a, b) : _mm512_packus_epi16(a, b);
  return _mm512_permutexvar_epi32(
      _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0), c);
}

// Bound of |float(acc) * mult| over int32 acc and the given multipliers (float rounding of the
// conversion and the product adds at most a factor 1 + 2^-23).
inline double acc_bound(const std::vector<float>& mult) {
  float mx = 0;
  for (float m : mult) mx = std::max(mx, m);
  return 2147483648.0 * static_cast<double>(mx) * (1.0 + 1.0 / 4194304.0);
}

FK_TARGET inline __m128i requant16(__m512i acc, __m512 mult, const Requant& q) {
  return requant16_f(_mm512_mul_ps(_mm512_cvtepi32_ps(acc), mult), q);
}

// ---------------------------------------------------------------------------------------------
// Convolution: packing.

// vpermb index for interleave4: lane j (128 bits) holds 16 bytes of row j; output byte 4 i + j
// is byte i of lane j.
alignas(64) constexpr std::uint8_t kInterleaveIdx[64] = {
    0, 16, 32, 48, 1, 17, 33, 49, 2,  18, 34, 50, 3,  19, 35, 51, 4,  20, 36, 52, 5,  21,
    37, 53, 6, 22, 38, 54, 7, 23, 39, 55, 8, 24, 40, 56, 9, 25, 41, 57, 10, 26, 42, 58, 11, 27,
    43, 59, 12, 28, 44, 60, 13, 29, 45, 61, 14, 30, 46, 62, 15, 31, 47, 63};

// Interleaves `rows` groups of 4 byte rows into dst: group h covers positions h * step ..
// h * step + len - 1 (step = dst_step, or len when 0), dst[p][j] = src[j][h * pitch + i] XOR
// flip[j]. Reads up to round_up(len, 16) bytes of every row and writes that many positions per
// group (a group's overrun is overwritten by the next group; the last one spills up to 15
// positions).
FK_TARGET void interleave4(std::uint8_t* dst, const std::uint8_t* const src[4],
                           const std::uint8_t flip[4], std::int64_t len, std::int64_t rows = 1,
                           const std::int64_t pitch[4] = nullptr, std::int64_t dst_step = 0) {
  if (dst_step == 0) dst_step = len;
  const __m512i idx = _mm512_load_si512(kInterleaveIdx);
  const __m512i f = _mm512_inserti32x4(
      _mm512_inserti32x4(
          _mm512_inserti32x4(_mm512_zextsi128_si512(_mm_set1_epi8(static_cast<char>(flip[0]))),
                             _mm_set1_epi8(static_cast<char>(flip[1])), 1),
          _mm_set1_epi8(static_cast<char>(flip[2])), 2),
      _mm_set1_epi8(static_cast<char>(flip[3])), 3);
  const std::uint8_t* s0 = src[0];
  const std::uint8_t* s1 = src[1];
  const std::uint8_t* s2 = src[2];
  const std::uint8_t* s3 = src[3];
  for (std::int64_t h = 0; h < rows; ++h, dst += dst_step * 4) {
    for (std::int64_t i = 0; i < len; i += 16) {
      __m512i v = _mm512_zextsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + i)));
      v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s1 + i)), 1);
      v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s2 + i)), 2);
      v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s3 + i)), 3);
      _mm512_storeu_si512(dst + i * 4, _mm512_permutexvar_epi8(idx, _mm512_xor_si512(v, f)));
    }
    if (pitch != nullptr) {
      s0 += pitch[0];
      s1 += pitch[1];
      s2 += pitch[2];
      s3 += pitch[3];
    }
  }
}

// vpermt2b index of the even bytes 0, 2, ..., 126 of two registers.
alignas(64) constexpr std::uint8_t kEvenIdx[64] = {
    0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42,
    44, 46, 48, 50, 52, 54, 56, 58, 60, 62, 64, 66, 68, 70, 72, 74, 76, 78, 80, 82, 84, 86,
    88, 90, 92, 94, 96, 98, 100, 102, 104, 106, 108, 110, 112, 114, 116, 118, 120, 122, 124, 126};

// dst[i] = src[i * stride] for i < n; reads nothing past src[(n - 1) * stride].
FK_TARGET void gather_strided(std::uint8_t* dst, const std::uint8_t* src, std::int64_t n,
                              std::int64_t stride) {
  if (stride == 1) {
    std::memcpy(dst, src, static_cast<std::size_t>(n));
    return;
  }
  if (stride == 2) {
    const __m512i idx = _mm512_load_si512(kEvenIdx);
    std::int64_t i = 0;
    for (; i < n; i += 64) {
      const std::int64_t count = std::min<std::int64_t>(64, n - i);
      const std::int64_t bytes = 2 * (count - 1) + 1;  // readable bytes from src + 2i
      const __m512i lo = _mm512_maskz_loadu_epi8(mask64(bytes), src + 2 * i);
      const __m512i hi = _mm512_maskz_loadu_epi8(mask64(bytes - 64), src + 2 * i + 64);
      _mm512_mask_storeu_epi8(dst + i, mask64(count), _mm512_permutex2var_epi8(lo, idx, hi));
    }
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i * stride];
}

// Row k = (ci, kh, kw) of the im2col matrix of group g for image x: OH * OW bytes in the
// original domain (padding taps hold the original zero point byte).
FK_TARGET void im2col_row(const ConvPlan& p, const std::uint8_t* x, std::int64_t c,
                          std::int64_t kh, std::int64_t kw, std::uint8_t pad_byte,
                          std::uint8_t* dst) {
  const std::int64_t col_off = kw * p.dw - p.pl;
  std::int64_t lo, hi;
  valid_range(p.OW, p.sw, col_off, p.W, lo, hi);
  for (std::int64_t oh = 0; oh < p.OH; ++oh, dst += p.OW) {
    const std::int64_t ih = oh * p.sh + kh * p.dh - p.pt;
    if (ih < 0 || ih >= p.H || lo == hi) {
      std::memset(dst, pad_byte, static_cast<std::size_t>(p.OW));
      continue;
    }
    const std::uint8_t* src = x + (c * p.H + ih) * p.x_pitch;
    if (lo > 0) std::memset(dst, pad_byte, static_cast<std::size_t>(lo));
    gather_strided(dst + lo, src + lo * p.sw + col_off, hi - lo, p.sw);
    if (hi < p.OW) std::memset(dst + hi, pad_byte, static_cast<std::size_t>(p.OW - hi));
  }
}

// Stores bytes [0, n) of v (positions p0 .. p0 + n - 1 of an output plane of OH rows of OW
// elements, `pitch` apart, ending at plane_end) and zeroes the row padding of every row it
// completes.
//
// Masked byte stores are slow, so a 64-byte store may also write bytes past the segment: that
// is harmless while it stays inside the plane, because positions are written in increasing
// order (every later byte of the plane is written again later: by a later segment, or as row
// padding by the segment that completes its row) and the bytes written after a segment that
// completes a row are zeroes from its end on. Only near the end of the plane the stores are
// masked.
FK_TARGET inline void store_positions(__m512i v, std::int64_t p0, std::int64_t n, std::int64_t OW,
                                      std::int64_t pitch, std::uint8_t* plane,
                                      const std::uint8_t* plane_end) {
  const __m512i iota = _mm512_set_epi8(63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49,
                                       48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34,
                                       33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19,
                                       18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2,
                                       1, 0);
  std::int64_t h = p0 / OW, w = p0 - h * OW, done = 0;
  while (done < n) {
    const std::int64_t len = std::min(n - done, OW - w);
    __m512i s = v;
    if (done > 0) {
      s = _mm512_permutexvar_epi8(_mm512_add_epi8(iota, _mm512_set1_epi8(static_cast<char>(done))),
                                  v);
    }
    std::uint8_t* row = plane + h * pitch;
    const bool completes = w + len == OW;
    if (row + w + 64 <= plane_end) {
      if (completes) s = _mm512_maskz_mov_epi8(mask64(len), s);
      _mm512_storeu_si512(row + w, s);
      if (completes && w + 64 < pitch) {  // padding beyond the 64 bytes just stored
        if (row + OW + 64 <= plane_end) {
          _mm512_storeu_si512(row + OW, _mm512_setzero_si512());
        } else {
          _mm512_mask_storeu_epi8(row + OW, mask64(pitch - OW), _mm512_setzero_si512());
        }
      }
    } else {
      _mm512_mask_storeu_epi8(row + w, mask64(len), s);
      if (completes && pitch > OW) {
        _mm512_mask_storeu_epi8(row + OW, mask64(pitch - OW), _mm512_setzero_si512());
      }
    }
    done += len;
    ++h;
    w = 0;
  }
}

// ---------------------------------------------------------------------------------------------
// Convolution: GEMM register tile.

// Row tiles: for outputs of narrow lowered rows (7 <= OW <= 32, the row pitch is 32 bytes), a
// tile holds R = floor(64 / OW) whole output rows, which are R * 32 consecutive bytes of the
// output plane. Its 64 requantized bytes (positions in lanes) are spread onto those rows by
// vpermb with precomputed indexes, zeroing the row padding in the same instruction, and
// written with whole stores: one to three per tile instead of one permute and store per row
// piece (store_positions), which for 7x7 or 14x14 outputs cost as much as the dot products.
struct RowStore {
  std::int64_t R = 0;        // rows per tile
  std::int64_t stores = 0;   // 64-byte stores for R rows: ceil(R * 32 / 64)
  __m512i idx[5];            // (R <= 9) byte b of store s: lane ((64 s + b) / 32) * OW + (64 s + b) % 32
  __mmask64 keep[5];         // ... when (64 s + b) % 32 < OW (else 0: row padding)
};

FK_TARGET inline RowStore make_row_store(std::int64_t OW) {
  RowStore rs;
  rs.R = 64 / OW;
  rs.stores = (rs.R * 32 + 63) / 64;
  for (std::int64_t st = 0; st < rs.stores; ++st) {
    alignas(64) std::uint8_t idx[64];
    __mmask64 keep = 0;
    for (std::int64_t b = 0; b < 64; ++b) {
      const std::int64_t off = 64 * st + b, row = off / 32, col = off % 32;
      idx[b] = static_cast<std::uint8_t>((row * OW + col) & 63);
      if (col < OW && row < rs.R) keep |= __mmask64{1} << b;
    }
    rs.idx[st] = _mm512_load_si512(idx);
    rs.keep[st] = keep;
  }
  return rs;
}

// Writes rows h0 .. h0 + rows - 1 (rows <= R) of an output plane of pitch 32 from the tile's
// requantized bytes `v` (position h * OW + w of the tile in lane (h - h0) * OW + w).
FK_TARGET inline void store_rows(const RowStore& rs, __m512i v, std::uint8_t* dst,
                                 std::int64_t rows) {
  const std::int64_t bytes = rows * 32;
  for (std::int64_t st = 0; st < rs.stores && 64 * st < bytes; ++st) {
    const __m512i out = _mm512_maskz_permutexvar_epi8(rs.keep[st], rs.idx[st], v);
    if (bytes - 64 * st >= 64) {
      _mm512_storeu_si512(dst + 64 * st, out);
    } else {  // an odd row count ends with half a store
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 64 * st), _mm512_castsi512_si256(out));
    }
  }
}

// How the tiles of a convolution map onto output positions (conv_gemm):
//  - Dense: tile t is positions 64 t .. 64 t + 63, stored piecewise (store_positions);
//  - Rows (7 <= OW <= 32, see RowStore): R whole rows per tile;
//  - Segments (OW > 32, lowered rows): each output row is ceil(OW / 64) tiles of at most 64
//    positions, each stored with one whole store (its padding zeroed by the mask): no permutes,
//    and for OW = 112 no idle lanes either (64 + 48).
// In the last two modes every tile takes 64 slots of B.
enum class TileMode { Dense, Rows, Segments };

// Where tile t's outputs go: rows from h0 (Rows, Segments), from column col0 (Segments).
struct TilePlace {
  std::int64_t h0 = 0, col0 = 0;
};

// One tile: output channels m0 .. m0 + mr - 1 (packed weights `wb`, [K4][kConvMr][4]) times
// np <= 16 * NV positions of B (rows of PB slots) starting at slot s0, requantized into the
// output image `y` as `mode` says (Dense: positions s0 .. s0 + np - 1).
template <int NV>
FK_TARGET void gemm_tile(const ConvPlan& p, const std::uint8_t* B, std::int64_t PB,
                         const std::int32_t* colsum, const std::int32_t* wb, std::int64_t m0,
                         int mr, std::int64_t s0, std::int64_t np, std::uint8_t* y,
                         const Requant& rq, TileMode mode, const RowStore& rs, TilePlace at) {
  const std::int64_t p0 = s0;
  constexpr int MR = static_cast<int>(kConvMr);
  __m512i acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    // Rows past mr belong to no channel (zero weights); they start from c0 of row 0.
    const __m512i c0 = _mm512_set1_epi32(p.c0[static_cast<std::size_t>(m0 + (r < mr ? r : 0))]);
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[r][j] = c0;
  }
  const std::uint8_t* b = B + p0 * 4;
  const std::int32_t* w = wb;
  const std::int64_t bstep = PB * 4;
  for (std::int64_t k4 = 0; k4 < p.K4; ++k4) {
    __m512i bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) bv[j] = _mm512_load_si512(b + 64 * j);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512i wv = _mm512_set1_epi32(w[r]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], bv[j], wv);
    }
    b += bstep;
    w += MR;
  }
  const std::int64_t plane_bytes = p.OH * p.y_pitch;
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    if (r >= mr) break;
    const std::int64_t m = m0 + r;
    const __m512 mult = _mm512_set1_ps(p.mult[static_cast<std::size_t>(m)]);
    __m512 f[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      if (j >= NV) {
        f[j] = _mm512_setzero_ps();
        continue;
      }
      __m512i v = acc[r][j < NV ? j : 0];
      if (p.any_wz) {
        const __m512i s = _mm512_load_si512(colsum + p0 + 16 * j);
        v = _mm512_sub_epi32(
            v, _mm512_mullo_epi32(s, _mm512_set1_epi32(p.wz[static_cast<std::size_t>(m)])));
      }
      f[j] = _mm512_mul_ps(_mm512_cvtepi32_ps(v), mult);
    }
    const __m512i out = requant64(f[0], f[1], f[2], f[3], rq);
    std::uint8_t* plane = y + m * plane_bytes;
    if (mode == TileMode::Rows) {
      store_rows(rs, out, plane + at.h0 * 32, np / p.OW);
    } else if (mode == TileMode::Segments) {
      // The segment and, after the row's last one, its zero padding: 64 bytes, or 32 when
      // the padded row ends there (the pitch is a multiple of 32).
      std::uint8_t* dst = plane + at.h0 * p.y_pitch + at.col0;
      const __m512i q = _mm512_maskz_mov_epi8(mask64(np), out);
      if (p.y_pitch - at.col0 >= 64) {
        _mm512_storeu_si512(dst, q);
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_castsi512_si256(q));
      }
    } else {
      store_positions(out, p0, np, p.OW, p.y_pitch, plane, plane + plane_bytes);
    }
  }
}

FK_TARGET void conv_gemm(const ConvPlan& p, const std::uint8_t* x, std::uint8_t* y) {
  Scratch& s = t_scratch;
  const std::int64_t P = p.OH * p.OW;
  // The tile mode (TileMode). Rows and segments may need more vector lanes than dense tiles
  // (14 x 14: 224 lanes instead of 208; 56 x 56: 64 per row of 56); they are used when they
  // do not, or when K is small enough that dense tiles' piecewise stores cost more than the
  // extra dot products. Measured on MobileNetV2 (in-process A/B): rows, K <= 160 gain 15-24%
  // and K >= 192 at 28 x 28 loses 10%; segments of 56-wide rows, K = 24 gains 14% and K = 144
  // loses 8%; 112-wide rows (no idle lanes) gain 9-20%.
  const auto dense_lanes = (P / 64) * 64 + round_up(P % 64, 16);
  const std::int64_t segs = (p.OW + 63) / 64;  // segments per row
  const TileMode mode = [&] {
    if (p.OH < 2) return TileMode::Dense;
    if (p.OW >= 7 && p.OW <= 32 && p.y_pitch == 32) {
      // (OW >= 7: at most 9 rows, 5 stores, per tile; narrower rows would leave lanes idle.)
      const std::int64_t tp = (64 / p.OW) * p.OW;
      const std::int64_t lanes = (P / tp) * round_up(tp, 16) + round_up(P % tp, 16);
      if (p.K <= 160 || lanes <= dense_lanes) return TileMode::Rows;
    }
    if (p.OW > 32 && p.y_pitch == round_up(p.OW, 32)) {
      const std::int64_t lanes = p.OH * ((segs - 1) * 64 + round_up(p.OW - (segs - 1) * 64, 16));
      if (p.K <= 64 || lanes <= dense_lanes) return TileMode::Segments;
    }
    return TileMode::Dense;
  }();
  const RowStore rs = mode == TileMode::Rows ? make_row_store(p.OW) : RowStore{};
  // Positions per tile (Segments: per row) and tiles.
  const std::int64_t TP = mode == TileMode::Rows ? rs.R * p.OW : 64;
  const std::int64_t tiles = mode == TileMode::Segments ? p.OH * segs : (P + TP - 1) / TP;
  const std::int64_t slots = mode == TileMode::Dense ? P : tiles * 64;
  const std::int64_t PB = round_up(slots, 16) + 16;  // B row length in slots (with overrun)
  std::uint8_t* B = grow(s.packed, static_cast<std::size_t>(p.K4 * PB * 4));
  const std::uint8_t flip = p.x_signed ? 0x80 : 0x00;
  const std::uint8_t pad_byte = static_cast<std::uint8_t>(p.xz ^ flip);  // original domain
  const bool direct = p.pointwise && p.x_pitch >= round_up(p.W, 16);
  std::uint8_t* zero = grow(s.zero, static_cast<std::size_t>(std::max(P, p.W) + 16), true);
  std::uint8_t* rows = direct ? nullptr : grow(s.rows, static_cast<std::size_t>(4 * (P + 16)));
  std::int32_t* colsum = p.any_wz ? grow(s.colsum, static_cast<std::size_t>(PB)) : nullptr;
  const Requant rq = make_requant(p.yz, p.qmin, acc_bound(p.mult));
  const std::int64_t KK = p.kH * p.kW;

  for (std::int64_t g = 0; g < p.group; ++g) {
    // B for group g.
    for (std::int64_t k4 = 0; k4 < p.K4; ++k4) {
      const std::uint8_t* src[4];
      std::uint8_t flips[4];
      std::uint8_t* dst = B + k4 * PB * 4;
      if (direct) {
        for (int j = 0; j < 4; ++j) {
          const std::int64_t ci = 4 * k4 + j;
          src[j] = ci < p.Cg ? x + (g * p.Cg + ci) * p.H * p.x_pitch : zero;
          flips[j] = ci < p.Cg ? flip : 0;
        }
        std::int64_t pitch[4];
        for (int j = 0; j < 4; ++j) pitch[j] = src[j] == zero ? 0 : p.x_pitch;
        if (mode == TileMode::Rows) {  // W == OW: R input rows per 64 slots
          for (std::int64_t t = 0; t < tiles; ++t) {
            const std::uint8_t* st[4];
            for (int j = 0; j < 4; ++j) st[j] = src[j] + t * rs.R * pitch[j];
            interleave4(dst + t * 256, st, flips, p.W, std::min(rs.R, p.H - t * rs.R), pitch);
          }
        } else if (mode == TileMode::Segments) {  // each row in segs * 64 slots
          interleave4(dst, src, flips, p.W, p.H, pitch, segs * 64);
        } else {
          interleave4(dst, src, flips, p.W, p.H, pitch);
        }
      } else {
        for (int j = 0; j < 4; ++j) {
          const std::int64_t k = 4 * k4 + j;
          if (k < p.K) {
            std::uint8_t* row = rows + j * (P + 16);
            const std::int64_t ci = k / KK, kh = (k % KK) / p.kW, kw = k % p.kW;
            im2col_row(p, x, g * p.Cg + ci, kh, kw, pad_byte, row);
            src[j] = row;
            flips[j] = flip;
          } else {
            src[j] = zero;
            flips[j] = 0;
          }
        }
        if (mode == TileMode::Rows) {
          for (std::int64_t t = 0; t < tiles; ++t) {
            const std::uint8_t* st[4];
            for (int j = 0; j < 4; ++j) st[j] = src[j] + (src[j] == zero ? 0 : t * TP);
            interleave4(dst + t * 256, st, flips, std::min(TP, P - t * TP));
          }
        } else if (mode == TileMode::Segments) {
          std::int64_t pitch[4];
          for (int j = 0; j < 4; ++j) pitch[j] = src[j] == zero ? 0 : p.OW;
          interleave4(dst, src, flips, p.OW, p.OH, pitch, segs * 64);
        } else {
          interleave4(dst, src, flips, P);
        }
      }
    }
    if (p.any_wz) {
      const __m512i ones = _mm512_set1_epi8(1);
      for (std::int64_t v = 0; v < (slots + 15) / 16; ++v) {
        __m512i sum = _mm512_setzero_si512();
        const std::uint8_t* b = B + v * 64;
        for (std::int64_t k4 = 0; k4 < p.K4; ++k4, b += PB * 4) {
          sum = _mm512_dpbusd_epi32(sum, _mm512_load_si512(b), ones);
        }
        _mm512_store_si512(colsum + v * 16, sum);
      }
    }
    // Tiles. Positions are taken in chunks whose part of B (K4 x 256 bytes per 64 positions)
    // stays in L2; within a chunk, each block of output channels sweeps the positions, so its
    // output rows are written sequentially.
    const std::int32_t* wg = p.w_packed.data() + g * p.m_blocks * p.K4 * kConvMr;
    const std::int64_t chunk = std::max<std::int64_t>(1, (256 << 10) / (p.K4 * 256));  // tiles
    for (std::int64_t t0 = 0; t0 < tiles; t0 += chunk) {
      const std::int64_t t1 = std::min(tiles, t0 + chunk);
      for (std::int64_t mb = 0; mb < p.m_blocks; ++mb) {
        const std::int32_t* wb = wg + mb * p.K4 * kConvMr;
        const std::int64_t m0 = g * p.Mg + mb * kConvMr;
        const int mr = static_cast<int>(std::min<std::int64_t>(kConvMr, p.Mg - mb * kConvMr));
        for (std::int64_t t = t0; t < t1; ++t) {
          const std::int64_t s0 = t * 64;
          std::int64_t np;
          TilePlace at;
          if (mode == TileMode::Segments) {
            at.h0 = t / segs;
            at.col0 = (t % segs) * 64;
            np = std::min<std::int64_t>(64, p.OW - at.col0);
          } else {
            np = std::min(TP, P - t * TP);
            at.h0 = t * rs.R;
          }
          switch ((np + 15) / 16) {
            case 4: gemm_tile<4>(p, B, PB, colsum, wb, m0, mr, s0, np, y, rq, mode, rs, at); break;
            case 3: gemm_tile<3>(p, B, PB, colsum, wb, m0, mr, s0, np, y, rq, mode, rs, at); break;
            case 2: gemm_tile<2>(p, B, PB, colsum, wb, m0, mr, s0, np, y, rq, mode, rs, at); break;
            default: gemm_tile<1>(p, B, PB, colsum, wb, m0, mr, s0, np, y, rq, mode, rs, at); break;
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Convolution: depthwise.

// A padded plane holds `rows` rows of S bytes (S a multiple of 64, at least
// pl + round_up(W, 64)): row r, column j hold x[r - pt][j - pl] XOR flip, or `pad` outside the
// input. pad_plane() writes `pad` everywhere; copy_plane() then writes the input rows, each as
// whole 64-byte stores from column pl whose bytes past W are `pad` again, so the bytes outside
// the input are never changed by it and one pad_plane() serves every channel of a layer (the
// same pad value). Masked stores are slow; whole stores are used.
FK_TARGET void pad_plane(std::uint8_t* plane, std::int64_t rows, std::int64_t S, std::uint8_t pad) {
  const __m512i padv = _mm512_set1_epi8(static_cast<char>(pad));
  for (std::int64_t i = 0; i < rows * S; i += 64) _mm512_store_si512(plane + i, padv);
}

FK_TARGET void copy_plane(std::uint8_t* plane, std::int64_t rows, std::int64_t S, const std::uint8_t* x, std::int64_t H,
                          std::int64_t W, std::int64_t pitch, std::int64_t pt, std::int64_t pl,
                          std::uint8_t flip, std::uint8_t pad) {
  const __m512i f = _mm512_set1_epi8(static_cast<char>(flip));
  const __m512i padv = _mm512_set1_epi8(static_cast<char>(pad));
  // Input rows that land inside the plane (rows past it are never read).
  const std::int64_t last = std::min(H, rows - pt);
  for (std::int64_t ih = 0; ih < last; ++ih) {
    std::uint8_t* row = plane + (ih + pt) * S;
    const std::uint8_t* src = x + ih * pitch;
    for (std::int64_t i = 0; i < W; i += 64) {
      const __mmask64 m = mask64(W - i);
      const __m512i v = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + i), f);
      _mm512_storeu_si512(row + pl + i, _mm512_mask_mov_epi8(padv, m, v));
    }
  }
}

FK_TARGET void fill_plane(std::uint8_t* plane, std::int64_t rows, std::int64_t S,
                          const std::uint8_t* x, std::int64_t H, std::int64_t W,
                          std::int64_t pitch, std::int64_t pt, std::int64_t pl, std::uint8_t flip,
                          std::uint8_t pad) {
  pad_plane(plane, rows, S, pad);
  copy_plane(plane, rows, S, x, H, W, pitch, pt, pl, flip, pad);
}

// One vector of 16 depthwise outputs (acc, zero point terms included) whose windows start at
// `base` in the padded plane (rows `row_step` apart). KH > 0: KH kernel rows of at most 4
// columns (one tap group, weights in wk); KH == 0: any kernel (weights in `words`).
template <int KH, bool WZ>
FK_TARGET inline __m512i dw_acc(const ConvPlan& p, const std::uint8_t* base,
                                std::int64_t row_step, __m512i idx, const __m512i* wk,
                                const std::int32_t* words, __m512i c0, __m512i ones0,
                                __m512i wzv) {
  __m512i acc = c0;
  __m512i sum = _mm512_setzero_si512();
  if constexpr (KH > 0) {
#pragma GCC unroll 8
    for (int kh = 0; kh < KH; ++kh) {
      const __m512i v = _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(base + kh * row_step));
      acc = _mm512_dpbusd_epi32(acc, v, wk[kh]);
      if constexpr (WZ) sum = _mm512_dpbusd_epi32(sum, v, ones0);
    }
  } else {
    const std::int64_t G = p.taps4;
    for (std::int64_t kh = 0; kh < p.kH; ++kh) {
      for (std::int64_t g = 0; g < G; ++g) {
        const __m512i v = _mm512_permutexvar_epi8(
            idx, _mm512_loadu_si512(base + kh * row_step + 4 * g * p.dw));
        acc = _mm512_dpbusd_epi32(acc, v, _mm512_set1_epi32(words[kh * G + g]));
        if constexpr (WZ) {
          sum = _mm512_dpbusd_epi32(sum, v,
                                    _mm512_set1_epi32(p.dw_ones[static_cast<std::size_t>(g)]));
        }
      }
    }
  }
  if constexpr (WZ) acc = _mm512_sub_epi32(acc, _mm512_mullo_epi32(sum, wzv));
  (void)ones0;
  (void)wzv;
  (void)wk;
  (void)words;
  return acc;
}

// c0 + the dot products of the permuted windows of 3 kernel rows (v0, v1, v2) with their
// weight words, with the weight zero point term taken off when WZ.
template <bool WZ>
FK_TARGET inline __m512i dw_dot3(__m512i v0, __m512i v1, __m512i v2, const __m512i* wk,
                                 __m512i c0, __m512i ones, __m512i wzv) {
  __m512i a = _mm512_dpbusd_epi32(c0, v0, wk[0]);
  a = _mm512_dpbusd_epi32(a, v1, wk[1]);
  a = _mm512_dpbusd_epi32(a, v2, wk[2]);
  if constexpr (WZ) {
    __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v0, ones);
    sum = _mm512_dpbusd_epi32(sum, v1, ones);
    sum = _mm512_dpbusd_epi32(sum, v2, ones);
    a = _mm512_sub_epi32(a, _mm512_mullo_epi32(sum, wzv));
  }
  (void)ones;
  (void)wzv;
  return a;
}

// Accumulators of NJ output rows j = 0 .. NJ - 1 at the same columns, whose kernel rows start
// at plane rows j * SH (relative to `base`, rows S bytes apart, no row dilation), for a kernel
// of 3 rows of at most 4 taps: each plane row is loaded and permuted once and serves every
// output row that reads it (with stride 1, 4 output rows need 6 permutes instead of 12).
template <int NJ, int SH, bool WZ>
FK_TARGET inline void dw_acc3_rows(const std::uint8_t* base, std::int64_t S, __m512i idx,
                                   const __m512i* wk, __m512i c0, __m512i ones0, __m512i wzv,
                                   __m512i* acc) {
  constexpr int kRows = (NJ - 1) * SH + 3;
  __m512i v[kRows];
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) {
    v[r] = _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(base + r * S));
  }
#pragma GCC unroll 4
  for (int j = 0; j < NJ; ++j) {
    acc[j] = dw_dot3<WZ>(v[j * SH], v[j * SH + 1], v[j * SH + 2], wk, c0, ones0, wzv);
  }
}

// Depthwise rows of output channel m from its padded input plane. Outputs are requantized 64
// at a time: up to 4 vectors along a row when OW > 16, else one vector from each of up to 4
// rows. Stores are whole 32/64-byte stores of data and zero padding where the row pitch allows
// (lowered outputs), masked stores otherwise.
template <int KH, bool WZ>
FK_TARGET void depthwise_channel(const ConvPlan& p, const std::uint8_t* plane, std::int64_t S,
                                 std::int64_t m, __m512i idx, const Requant& rq,
                                 std::uint8_t* out) {
  const std::int64_t G = p.taps4;
  const std::int32_t* words = p.dw_words.data() + m * p.kH * G;
  const __m512i c0 = _mm512_set1_epi32(p.c0[static_cast<std::size_t>(m)]);
  const __m512 mult = _mm512_set1_ps(p.mult[static_cast<std::size_t>(m)]);
  const __m512i wzv = _mm512_set1_epi32(p.wz[static_cast<std::size_t>(m)]);
  const __m512i ones0 = _mm512_set1_epi32(p.dw_ones[0]);
  __m512i wk[KH > 0 ? KH : 1];
  if constexpr (KH > 0) {
#pragma GCC unroll 8
    for (int kh = 0; kh < KH; ++kh) wk[kh] = _mm512_set1_epi32(words[kh]);
  } else {
    wk[0] = _mm512_setzero_si512();
  }
  const std::int64_t OW = p.OW, OH = p.OH, sw = p.sw, pitch = p.y_pitch, row_step = p.dh * S;
  const __m512 zero_f = _mm512_setzero_ps();
  if (OW > 16) {
    for (std::int64_t oh = 0; oh < OH; ++oh, out += pitch) {
      const std::uint8_t* base_row = plane + oh * p.sh * S;
      for (std::int64_t ow0 = 0; ow0 < OW; ow0 += 64) {
        const std::int64_t valid = OW - ow0;
        __m512 f[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          f[j] = 16 * j < valid
                     ? _mm512_mul_ps(_mm512_cvtepi32_ps(dw_acc<KH, WZ>(
                                         p, base_row + (ow0 + 16 * j) * sw, row_step, idx, wk,
                                         words, c0, ones0, wzv)),
                                     mult)
                     : zero_f;
        }
        __m512i q = requant64(f[0], f[1], f[2], f[3], rq);
        if (valid > 64) {
          _mm512_storeu_si512(out + ow0, q);
          continue;
        }
        q = _mm512_maskz_mov_epi8(mask64(valid), q);  // zeroes from OW on: the row padding
        const std::int64_t rem = pitch - ow0;          // bytes of this row from ow0 on
        if (rem >= 64) {
          _mm512_storeu_si512(out + ow0, q);
          if (rem > 64) {
            _mm512_mask_storeu_epi8(out + ow0 + 64, mask64(rem - 64), _mm512_setzero_si512());
          }
        } else {
          _mm512_mask_storeu_epi8(out + ow0, mask64(rem), q);
        }
      }
    }
    return;
  }
  const __mmask16 valid16 = mask16(OW);
  // Kernels of 3 rows: the rows of a group share their permuted plane rows (dw_acc3_rows),
  // measured 6-8% faster on MobileNetV2's 14 x 14 and 7 x 7 layers. (Sharing between two
  // rows of more than 16 outputs measured 5-9% slower: the extra live registers cost more.)
  const bool shared = KH == 3 && p.dh == 1 && (p.sh == 1 || p.sh == 2);
  for (std::int64_t oh0 = 0; oh0 < OH; oh0 += 4) {
    const std::int64_t rows = std::min<std::int64_t>(4, OH - oh0);
    __m512 f[4];
    if (shared && rows >= 2) {
      __m512i acc[4];
      const std::uint8_t* base = plane + oh0 * p.sh * S;
      const bool s1 = p.sh == 1;
      switch (rows) {
        case 4:
          s1 ? dw_acc3_rows<4, 1, WZ>(base, S, idx, wk, c0, ones0, wzv, acc)
             : dw_acc3_rows<4, 2, WZ>(base, S, idx, wk, c0, ones0, wzv, acc);
          break;
        case 3:
          s1 ? dw_acc3_rows<3, 1, WZ>(base, S, idx, wk, c0, ones0, wzv, acc)
             : dw_acc3_rows<3, 2, WZ>(base, S, idx, wk, c0, ones0, wzv, acc);
          break;
        default:
          s1 ? dw_acc3_rows<2, 1, WZ>(base, S, idx, wk, c0, ones0, wzv, acc)
             : dw_acc3_rows<2, 2, WZ>(base, S, idx, wk, c0, ones0, wzv, acc);
          break;
      }
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        f[j] = j < rows ? _mm512_mul_ps(_mm512_cvtepi32_ps(acc[j]), mult) : zero_f;
      }
    } else {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        f[j] = j < rows ? _mm512_mul_ps(_mm512_cvtepi32_ps(dw_acc<KH, WZ>(
                                            p, plane + (oh0 + j) * p.sh * S, row_step, idx, wk,
                                            words, c0, ones0, wzv)),
                                        mult)
                        : zero_f;
      }
    }
    const __m512i q = requant64(f[0], f[1], f[2], f[3], rq);
    __m128i part[4] = {_mm512_castsi512_si128(q), _mm512_extracti32x4_epi32(q, 1),
                       _mm512_extracti32x4_epi32(q, 2), _mm512_extracti32x4_epi32(q, 3)};
    for (std::int64_t j = 0; j < rows; ++j) {
      std::uint8_t* row = out + (oh0 + j) * pitch;
      const __m128i v = _mm_maskz_mov_epi8(valid16, part[j]);
      if (pitch == 32) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row), _mm256_zextsi128_si256(v));
      } else {
        _mm_mask_storeu_epi8(row, mask16(std::min<std::int64_t>(pitch, 16)), v);
        if (pitch > 16) {
          _mm512_mask_storeu_epi8(row + 16, mask64(pitch - 16), _mm512_setzero_si512());
        }
      }
    }
  }
}

// Narrow depthwise layers (3-row kernels of at most 4 taps, stride 1, no dilation, OW <= 8,
// lowered outputs): two output rows per vector. The padded plane has rows of 16 bytes, so one
// 64-byte window holds 4 plane rows and lane l of a vector reads row l / 8, column l % 8: a
// vector computes rows oh, oh + 1 (7 of 8 lanes each for 7 x 7) instead of one row in 16 lanes,
// and four row pairs share their 9 windows. Their 64 requantized bytes go onto the 32-byte
// padded output rows through one vpermb per pair of rows.
bool dw_narrow_supported(const ConvPlan& p) {
  return p.kH == 3 && p.taps4 == 1 && p.sh == 1 && p.sw == 1 && p.dh == 1 && p.dw == 1 &&
         p.OW <= 8 && p.OW + p.kW - 1 <= 16 && p.pl + p.W <= 16 && p.y_pitch == 32 && p.OH >= 2;
}

template <bool WZ>
FK_TARGET void dw_narrow_channel(const ConvPlan& p, const std::uint8_t* plane, std::int64_t m,
                                 __m512i idx, const __m512i* out_idx, __mmask64 keep,
                                 const Requant& rq, std::uint8_t* out) {
  const std::int32_t* words = p.dw_words.data() + m * 3;
  const __m512i wk[3] = {_mm512_set1_epi32(words[0]), _mm512_set1_epi32(words[1]),
                         _mm512_set1_epi32(words[2])};
  const __m512i c0 = _mm512_set1_epi32(p.c0[static_cast<std::size_t>(m)]);
  const __m512 mult = _mm512_set1_ps(p.mult[static_cast<std::size_t>(m)]);
  const __m512i wzv = _mm512_set1_epi32(p.wz[static_cast<std::size_t>(m)]);
  const __m512i ones = _mm512_set1_epi32(p.dw_ones[0]);
  for (std::int64_t h0 = 0; h0 < p.OH; h0 += 8) {
    const std::int64_t rows = std::min<std::int64_t>(8, p.OH - h0);
    const int pairs = static_cast<int>((rows + 1) / 2);
    __m512i v[9];  // windows from plane rows h0 .. h0 + 8
#pragma GCC unroll 9
    for (int r = 0; r < 9; ++r) {
      if (r < 2 * pairs + 1) v[r] = _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(plane + (h0 + r) * 16));
    }
    __m512 f[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      if (q >= pairs) {
        f[q] = _mm512_setzero_ps();
        continue;
      }
      const __m512i a = dw_dot3<WZ>(v[2 * q], v[2 * q + 1], v[2 * q + 2], wk, c0, ones, wzv);
      f[q] = _mm512_mul_ps(_mm512_cvtepi32_ps(a), mult);
    }
    const __m512i qv = requant64(f[0], f[1], f[2], f[3], rq);
    std::uint8_t* dst = out + h0 * 32;
    for (int q = 0; q < pairs; ++q) {
      const __m512i o = _mm512_maskz_permutexvar_epi8(keep, out_idx[q], qv);
      if (2 * q + 1 < rows) {
        _mm512_storeu_si512(dst + 64 * q, o);
      } else {  // an odd last row: half a store
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 64 * q), _mm512_castsi512_si256(o));
      }
    }
  }
}

FK_TARGET void conv_depthwise_narrow(const ConvPlan& p, const std::uint8_t* x, std::uint8_t* y) {
  Scratch& s = t_scratch;
  const std::int64_t rows = p.OH + 2;                 // padded rows read
  const std::int64_t alloc_rows = round_up(rows, 8) + 4;  // windows read 4 rows past the last group
  std::uint8_t* plane = grow(s.plane, static_cast<std::size_t>(alloc_rows * 16));
  const std::uint8_t flip = p.x_signed ? 0x80 : 0x00;
  const Requant rq = make_requant(p.yz, p.qmin, acc_bound(p.mult));
  // Lane l: output row l / 8 of the pair, column l % 8; byte t: tap t.
  alignas(64) std::uint8_t bytes[64];
  for (int l = 0; l < 16; ++l) {
    for (int t = 0; t < 4; ++t) bytes[4 * l + t] = static_cast<std::uint8_t>((l / 8) * 16 + l % 8 + t);
  }
  const __m512i idx = _mm512_load_si512(bytes);
  // Store q writes output rows 2q, 2q + 1 (64 bytes); byte b: row b / 32, column b % 32, from
  // byte 16 q + (b / 32) * 8 + column of the requantized vector; columns >= OW are padding.
  __m512i out_idx[4];
  __mmask64 keep = 0;
  for (int b = 0; b < 64; ++b) {
    if (b % 32 < p.OW) keep |= __mmask64{1} << b;
  }
  for (int q = 0; q < 4; ++q) {
    for (int b = 0; b < 64; ++b) bytes[b] = static_cast<std::uint8_t>((16 * q + (b / 32) * 8 + b % 32) & 63);
    out_idx[q] = _mm512_load_si512(bytes);
  }
  const __m128i padv = _mm_set1_epi8(static_cast<char>(p.xz));
  const __m128i flipv = _mm_set1_epi8(static_cast<char>(flip));
  for (std::int64_t i = 0; i < alloc_rows; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(plane + i * 16), padv);
  const __mmask16 wmask = mask16(p.W);
  const std::int64_t last = std::min(p.H, rows - p.pt);  // input rows inside the plane
  const std::int64_t y_plane = p.OH * p.y_pitch;
  for (std::int64_t c = 0; c < p.C; ++c) {
    // The channel's rows at column pl; the 16-byte stores' bytes past W are the pad byte, so
    // the padding around the input (left, right, and the next row's left) is never changed.
    const std::uint8_t* xc = x + c * p.H * p.x_pitch;
    for (std::int64_t ih = 0; ih < last; ++ih) {
      const __m128i v = _mm_xor_si128(_mm_maskz_loadu_epi8(wmask, xc + ih * p.x_pitch), flipv);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(plane + (ih + p.pt) * 16 + p.pl),
                       _mm_mask_mov_epi8(padv, wmask, v));
    }
    for (std::int64_t m = c * p.Mg; m < (c + 1) * p.Mg; ++m) {
      std::uint8_t* out = y + m * y_plane;
      if (p.wz[static_cast<std::size_t>(m)] != 0) {
        dw_narrow_channel<true>(p, plane, m, idx, out_idx, keep, rq, out);
      } else {
        dw_narrow_channel<false>(p, plane, m, idx, out_idx, keep, rq, out);
      }
    }
  }
}

FK_TARGET void conv_depthwise(const ConvPlan& p, const std::uint8_t* x, std::uint8_t* y) {
  if (dw_narrow_supported(p)) return conv_depthwise_narrow(p, x, y);
  Scratch& s = t_scratch;
  const std::int64_t rows = (p.OH - 1) * p.sh + (p.kH - 1) * p.dh + 1;
  const std::int64_t ow_vecs = (p.OW + 15) / 16;
  const std::int64_t last_load = (ow_vecs - 1) * 16 * p.sw + (p.taps4 - 1) * 4 * p.dw + 64;
  const std::int64_t S = round_up(std::max(last_load, p.pl + round_up(p.W, 64)), 64);
  std::uint8_t* plane = grow(s.plane, static_cast<std::size_t>(rows * S));
  const std::uint8_t flip = p.x_signed ? 0x80 : 0x00;
  const Requant rq = make_requant(p.yz, p.qmin, acc_bound(p.mult));
  // Lane l (output ow0 + l), byte j: tap j of a group of 4, at l * sw + j * dw.
  alignas(64) std::uint8_t idx_bytes[64];
  for (int l = 0; l < 16; ++l) {
    for (int j = 0; j < 4; ++j) {
      idx_bytes[4 * l + j] = static_cast<std::uint8_t>((l * p.sw + j * p.dw) & 63);
    }
  }
  const __m512i idx = _mm512_load_si512(idx_bytes);
  const std::int64_t y_plane = p.OH * p.y_pitch;
  pad_plane(plane, rows, S, p.xz);
  for (std::int64_t c = 0; c < p.C; ++c) {
    copy_plane(plane, rows, S, x + c * p.H * p.x_pitch, p.H, p.W, p.x_pitch, p.pt, p.pl, flip, p.xz);
    for (std::int64_t m = c * p.Mg; m < (c + 1) * p.Mg; ++m) {
      const bool wz = p.wz[static_cast<std::size_t>(m)] != 0;
      std::uint8_t* out = y + m * y_plane;
      if (p.taps4 == 1 && p.kH == 3) {
        if (wz) {
          depthwise_channel<3, true>(p, plane, S, m, idx, rq, out);
        } else {
          depthwise_channel<3, false>(p, plane, S, m, idx, rq, out);
        }
      } else if (wz) {
        depthwise_channel<0, true>(p, plane, S, m, idx, rq, out);
      } else {
        depthwise_channel<0, false>(p, plane, S, m, idx, rq, out);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// MatMul.

template <int NV>
FK_TARGET void matmul_chunk(const MatMulPlan& p, const std::uint8_t* arow, std::int32_t suma,
                            std::int64_t n0, std::uint8_t* yrow, const Requant& rq) {
  __m512i acc[NV];
#pragma GCC unroll 16
  for (int j = 0; j < NV; ++j) acc[j] = _mm512_setzero_si512();
  // The panel of columns n0 .. n0 + 16 NV - 1: K4 rows of 64 NV bytes, one after the other.
  const std::int8_t* b = p.b_packed.data() + n0 * p.K4 * 4;
  for (std::int64_t k4 = 0; k4 < p.K4; ++k4, b += 64 * NV) {
    std::int32_t a4;
    std::memcpy(&a4, arow + 4 * k4, 4);
    const __m512i av = _mm512_set1_epi32(a4);
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) {
      acc[j] = _mm512_dpbusd_epi32(acc[j], av, _mm512_loadu_si512(b + 64 * j));
    }
  }
  const __m512i sa = _mm512_set1_epi32(suma);
#pragma GCC unroll 16
  for (int j = 0; j < NV; ++j) {
    const std::int64_t n = n0 + 16 * j;
    __m512i v = _mm512_add_epi32(acc[j], _mm512_loadu_si512(p.c0.data() + n));
    if (p.any_bz) v = _mm512_sub_epi32(v, _mm512_mullo_epi32(sa, _mm512_loadu_si512(p.bz.data() + n)));
    const __m128i q = requant16(v, _mm512_loadu_ps(p.mult.data() + n), rq);
    _mm_mask_storeu_epi8(yrow + n, mask16(p.N - n), q);
  }
}

FK_TARGET void matmul_impl(const MatMulPlan& p, const std::uint8_t* a, std::uint8_t* y) {
  std::uint8_t* arow = grow(t_scratch.arow, static_cast<std::size_t>(p.K4 * 4));
  const std::uint8_t flip = p.a_signed ? 0x80 : 0x00;
  const Requant rq = make_requant(p.yz, p.qmin, acc_bound(p.mult));
  for (std::int64_t r = 0; r < p.rows; ++r) {
    const std::uint8_t* src = a + r * p.K;
    std::uint32_t suma = 0;
    for (std::int64_t k = 0; k < p.K; ++k) {
      arow[k] = static_cast<std::uint8_t>(src[k] ^ flip);
      suma += arow[k];
    }
    for (std::int64_t k = p.K; k < p.K4 * 4; ++k) arow[k] = 0;
    std::uint8_t* yrow = y + r * p.N;
    std::int64_t n0 = 0;
    static_assert(kMatMulPanel == 128);
    for (; n0 + 128 <= p.Npad; n0 += 128) matmul_chunk<8>(p, arow, static_cast<std::int32_t>(suma), n0, yrow, rq);
    for (; n0 < p.Npad; n0 += 16) matmul_chunk<1>(p, arow, static_cast<std::int32_t>(suma), n0, yrow, rq);
  }
}

// ---------------------------------------------------------------------------------------------
// Add.

FK_TARGET inline __m512 dequant16(__m128i bytes, bool is_signed, __m512i zp, __m512 scale) {
  const __m512i v = is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
  return _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_sub_epi32(v, zp)));
}

FK_TARGET void add_rows_impl(const AddParamsF& p, const std::uint8_t* a, std::int64_t a_pitch,
                             const std::uint8_t* b, std::int64_t b_pitch, std::uint8_t* y,
                             std::int64_t y_pitch, std::int64_t rows, std::int64_t width,
                             std::int64_t y_pad) {
  const __m512i az = _mm512_set1_epi32(p.a_zp), bz = _mm512_set1_epi32(p.b_zp);
  const __m512 as = _mm512_set1_ps(p.a_scale), bs = _mm512_set1_ps(p.b_scale);
  const __m512 ys = _mm512_set1_ps(p.y_scale);
  const double bound = (255.0 * p.a_scale + 255.0 * p.b_scale) / p.y_scale * 1.001;
  const Requant rq = make_requant(p.y_zp, p.qmin, bound);
  const std::int64_t total = width + y_pad;
  const std::int64_t computed = (width + 15) / 16 * 16;  // <= total when y_pad > 0
  for (std::int64_t r = 0; r < rows; ++r, a += a_pitch, b += b_pitch, y += y_pitch) {
    for (std::int64_t i = 0; i < computed; i += 16) {
      const __mmask16 m = mask16(width - i);
      const __m512 va = dequant16(_mm_maskz_loadu_epi8(m, a + i), p.a_signed, az, as);
      const __m512 vb = dequant16(_mm_maskz_loadu_epi8(m, b + i), p.b_signed, bz, bs);
      const __m128i q = requant16_f(_mm512_div_ps(_mm512_add_ps(va, vb), ys), rq);
      if (y_pad > 0) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm_maskz_mov_epi8(m, q));
      } else {
        _mm_mask_storeu_epi8(y + i, m, q);
      }
    }
    for (std::int64_t i = computed; i < total; i += 16) {  // the rest of the row padding
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm_setzero_si128());
    }
  }
}

FK_TARGET std::uint32_t sum_rows_impl(const std::uint8_t* x, std::int64_t pitch,
                                      std::int64_t rows, std::int64_t width, bool is_signed) {
  // vpsadbw against zero sums bytes into 64-bit lanes; int8 bytes are summed as x + 128 and
  // the 128s taken off at the end.
  const __m512i flip = _mm512_set1_epi8(is_signed ? static_cast<char>(0x80) : 0);
  __m512i acc = _mm512_setzero_si512();
  for (std::int64_t r = 0; r < rows; ++r, x += pitch) {
    for (std::int64_t i = 0; i < width; i += 64) {
      const __mmask64 m = mask64(width - i);
      const __m512i v = _mm512_maskz_mov_epi8(m, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, x + i), flip));
      acc = _mm512_add_epi64(acc, _mm512_sad_epu8(v, _mm512_setzero_si512()));
    }
  }
  alignas(64) std::uint64_t lanes[8];
  _mm512_store_si512(lanes, acc);
  std::uint64_t sum = 0;
  for (std::uint64_t l : lanes) sum += l;
  if (is_signed) sum -= 128u * static_cast<std::uint64_t>(rows * width);
  return static_cast<std::uint32_t>(sum);
}

FK_TARGET void add_impl(const AddParamsF& p, const std::uint8_t* a, const std::uint8_t* b,
                        std::uint8_t* y, std::int64_t n) {
  const __m512i az = _mm512_set1_epi32(p.a_zp), bz = _mm512_set1_epi32(p.b_zp);
  const __m512 as = _mm512_set1_ps(p.a_scale), bs = _mm512_set1_ps(p.b_scale);
  const __m512 ys = _mm512_set1_ps(p.y_scale);
  // |a - a_zp|, |b - b_zp| <= 255; the float operations add a few ulps at most.
  const double bound = (255.0 * p.a_scale + 255.0 * p.b_scale) / p.y_scale * 1.001;
  const Requant rq = make_requant(p.y_zp, p.qmin, bound);
  for (std::int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
    const __m512 va = dequant16(_mm_maskz_loadu_epi8(m, a + i), p.a_signed, az, as);
    const __m512 vb = dequant16(_mm_maskz_loadu_epi8(m, b + i), p.b_signed, bz, bs);
    // (va + vb) / y_scale, then as requant16 (multiplier 1 is exact).
    const __m512 f = _mm512_div_ps(_mm512_add_ps(va, vb), ys);
    _mm_mask_storeu_epi8(y + i, m, requant16_f(f, rq));
  }
}

// ---------------------------------------------------------------------------------------------
// MaxPool.

FK_TARGET void maxpool_impl(const PoolGeom& g, const std::uint8_t* x, std::uint8_t* y) {
  const std::int64_t rows = (g.OH - 1) * g.sh + (g.kH - 1) * g.dh + 1;
  const std::int64_t ow_vecs = (g.OW + 63) / 64;
  const std::int64_t last_load = (ow_vecs - 1) * 64 * g.sw + (g.kW - 1) * g.dw + 64 * g.sw;
  const std::int64_t S = round_up(std::max(last_load, g.pl + round_up(g.W, 64)), 64);
  std::uint8_t* plane = grow(t_scratch.plane, static_cast<std::size_t>(rows * S));
  const std::uint8_t flip = g.is_signed ? 0x80 : 0x00;
  // Padding is the lowest value (0 once int8 is flipped), so it never wins.
  fill_plane(plane, rows, S, x, g.H, g.W, g.x_pitch, g.pt, g.pl, flip, 0);
  const __m512i idx2 = _mm512_load_si512(kEvenIdx);
  const __m512i f = _mm512_set1_epi8(static_cast<char>(flip));
  for (std::int64_t oh = 0; oh < g.OH; ++oh) {
    std::uint8_t* out = y + oh * g.y_pitch;
    for (std::int64_t ow0 = 0; ow0 < g.OW; ow0 += 64) {
      __m512i best = _mm512_setzero_si512();
      for (std::int64_t kh = 0; kh < g.kH; ++kh) {
        const std::uint8_t* row = plane + (oh * g.sh + kh * g.dh) * S + ow0 * g.sw;
        for (std::int64_t kw = 0; kw < g.kW; ++kw) {
          const std::uint8_t* src = row + kw * g.dw;
          __m512i v;
          if (g.sw == 1) {
            v = _mm512_loadu_si512(src);
          } else {
            v = _mm512_permutex2var_epi8(_mm512_loadu_si512(src), idx2,
                                         _mm512_loadu_si512(src + 64));
          }
          best = _mm512_max_epu8(best, v);
        }
      }
      _mm512_mask_storeu_epi8(out + ow0, mask64(g.OW - ow0), _mm512_xor_si512(best, f));
    }
    if (g.y_pitch > g.OW) std::memset(out + g.OW, 0, static_cast<std::size_t>(g.y_pitch - g.OW));
  }
}

// ---------------------------------------------------------------------------------------------
// Data movement.

// 64 bytes mapped through a 256-byte table held in four registers.
FK_TARGET inline __m512i lut64(__m512i v, const __m512i t[4]) {
  const __m512i lo = _mm512_permutex2var_epi8(t[0], v, t[1]);  // index bits 0-6
  const __m512i hi = _mm512_permutex2var_epi8(t[2], v, t[3]);
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi);  // bit 7 picks the half
}

FK_TARGET void copy_rows_impl(std::uint8_t* dst, std::int64_t dst_step, const std::uint8_t* src,
                              std::int64_t src_step, std::int64_t rows, std::int64_t width,
                              std::int64_t pad, const std::uint8_t* lut) {
  __m512i t[4];
  if (lut != nullptr) {
    for (int i = 0; i < 4; ++i) t[i] = _mm512_loadu_si512(lut + 64 * i);
  }
  const std::int64_t total = width + pad;  // bytes written per run
  for (std::int64_t r = 0; r < rows; ++r, dst += dst_step, src += src_step) {
    for (std::int64_t i = 0; i < total; i += 64) {
      const std::int64_t n = std::min<std::int64_t>(64, width - i);  // may be <= 0 in the padding
      __m512i v = _mm512_maskz_loadu_epi8(mask64(n), src + i);
      if (lut != nullptr) v = _mm512_maskz_mov_epi8(mask64(n), lut64(v, t));
      if (pad > 0) {
        // Rows of a lowered tensor: total is a multiple of 32, so whole 32 / 64 byte stores
        // write the row and its zero padding exactly.
        if (total - i >= 64) {
          _mm512_storeu_si512(dst + i, v);
        } else {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_castsi512_si256(v));
        }
      } else if (n == 64) {
        _mm512_storeu_si512(dst + i, v);
      } else {
        _mm512_mask_storeu_epi8(dst + i, mask64(n), v);
      }
    }
  }
}

}  // namespace

void copy_rows(std::byte* dst, std::int64_t dst_step, const std::byte* src, std::int64_t src_step,
               std::int64_t rows, std::int64_t width, std::int64_t pad, const std::uint8_t* lut) {
  copy_rows_impl(reinterpret_cast<std::uint8_t*>(dst), dst_step,
                 reinterpret_cast<const std::uint8_t*>(src), src_step, rows, width, pad, lut);
}

void conv(const ConvPlan& plan, const std::byte* x, std::byte* y) {
  const std::int64_t x_image = plan.C * plan.H * plan.x_pitch;
  const std::int64_t y_image = plan.M * plan.OH * plan.y_pitch;
  for (std::int64_t n = 0; n < plan.N; ++n) {
    const auto* xn = reinterpret_cast<const std::uint8_t*>(x) + n * x_image;
    auto* yn = reinterpret_cast<std::uint8_t*>(y) + n * y_image;
    if (plan.depthwise) {
      conv_depthwise(plan, xn, yn);
    } else {
      conv_gemm(plan, xn, yn);
    }
  }
}

void matmul(const MatMulPlan& plan, const std::byte* a, std::byte* y) {
  matmul_impl(plan, reinterpret_cast<const std::uint8_t*>(a), reinterpret_cast<std::uint8_t*>(y));
}

void add_run(const AddParamsF& p, const std::byte* a, const std::byte* b, std::byte* y,
             std::int64_t n) {
  add_impl(p, reinterpret_cast<const std::uint8_t*>(a), reinterpret_cast<const std::uint8_t*>(b),
           reinterpret_cast<std::uint8_t*>(y), n);
}

void add_rows(const AddParamsF& p, const std::byte* a, std::int64_t a_pitch, const std::byte* b,
              std::int64_t b_pitch, std::byte* y, std::int64_t y_pitch, std::int64_t rows,
              std::int64_t width, std::int64_t y_pad) {
  add_rows_impl(p, reinterpret_cast<const std::uint8_t*>(a), a_pitch,
                reinterpret_cast<const std::uint8_t*>(b), b_pitch,
                reinterpret_cast<std::uint8_t*>(y), y_pitch, rows, width, y_pad);
}

std::uint32_t sum_rows(const std::byte* x, std::int64_t pitch, std::int64_t rows,
                       std::int64_t width, bool is_signed) {
  return sum_rows_impl(reinterpret_cast<const std::uint8_t*>(x), pitch, rows, width, is_signed);
}

bool maxpool_supported(const PoolGeom& g) noexcept {
  return (g.sw == 1 || g.sw == 2) && g.OH > 0 && g.OW > 0 && g.kH >= 1 && g.kW >= 1;
}

void maxpool_plane(const PoolGeom& g, const std::byte* x, std::byte* y) {
  maxpool_impl(g, reinterpret_cast<const std::uint8_t*>(x), reinterpret_cast<std::uint8_t*>(y));
}

Kernels avx512_kernels() noexcept {
  Kernels k;
  k.isa = SimIsa::Avx512;
  k.conv = [](const ConvPlan& plan, const std::byte* x, std::byte* y) {
    conv(plan, x, y);
    return true;
  };
  k.matmul = &matmul;
  k.add_run = &add_run;
  k.add_rows = &add_rows;
  k.sum_rows = &sum_rows;
  k.copy_rows = &copy_rows;
  k.maxpool_supported = &maxpool_supported;
  k.maxpool_plane = &maxpool_plane;
  return k;
}

}  // namespace furiosa::device::sim::fast
