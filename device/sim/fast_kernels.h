// Private: the simulator's fast kernels, used by the kernels of kernels/ when the host CPU has
// them. Every function here computes exactly what the portable kernels in kernels/ compute
// (bit-identical outputs); kernels/ validates the kernels and builds the plans, the fast
// kernels only do arithmetic on already validated tensors.
//
// ISA levels (device::SimIsa, lowest first). x86-64: avx2, avx-vnni and avx512-vnni (one
// source, fast_kernels_avx2_*.inc, compiled three times with the dot-product step swapped) and
// avx512 (fast_kernels_avx512*: AVX-512 VNNI / VBMI). aarch64: neon, neon-dotprod and neon-i8mm
// (one source, fast_kernels_neon_*.inc, compiled three times; its own arithmetic notes there). Only
// the files of the target architecture are built (device/CMakeLists.txt). Each level is a table of
// function pointers (Kernels); a level may leave entries null, which kernels_for() fills from the
// next lower level that has them, and kernels/ runs the portable code where the entry is still
// null. The plans (ConvPlan, MatMulPlan) are the same for every level, so a prepared program runs
// at any level. The 256-bit levels keep the exactness: avx2 multiplies int16-widened operands with
// vpmaddwd (fast_kernels_avx2_base.inc), and they requantize with the same operations.
//
// Integer arithmetic. vpdpbusd multiplies unsigned bytes by signed bytes and adds groups of 4
// products to int32 lanes without saturation. Operands are moved into those domains exactly:
// int8 activations x become x + 128 (the byte XOR 0x80) with zero point x_zp + 128, uint8
// weights w become w - 128 with zero point w_zp - 128, so (x - x_zp) and (w - w_zp) are
// unchanged. The zero points are folded out of the dot product:
//   sum (x - xz)(w - wz) = sum x w - wz sum x - xz sum w + K xz wz,
// where padding taps hold xz (so they contribute nothing) and the K dimension is padded to a
// multiple of 4 with x = 0, w = 0. All of it is computed modulo 2^32, like the reference's
// wrapping int32 accumulator, so the result is the same int32 even when it overflows.
//
// Requantization computes float(acc) * multiplier (qlinear_add: its float expression) in
// float32 lanes with the same operations as isa::requantize / qlinear_add, so the products are
// bit-identical (IEEE 754; -ffp-contract=off keeps the compiler from fusing them into FMAs).
// Rounding uses the current rounding mode like std::nearbyint (half to even); the zero point
// is then added and the result saturated in integer arithmetic, which gives the same value as
// the scalar float addition and clamping (fast_kernels_avx512_base.inc, requant16_f / requant64).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "furiosa/device/sim.h"

namespace furiosa::device::sim::fast {

/// True when the host CPU (and OS) supports the instructions of level `isa` (Portable: always;
/// Auto: false). Checked once per level.
bool cpu_has(SimIsa isa) noexcept;

/// The architecture whose CPUs can have level `isa`: "x86-64" or "aarch64" ("" for Portable);
/// for Auto, the architecture of this build ("" when it has no fast levels).
std::string_view isa_arch(SimIsa isa) noexcept;

/// Output channels per register tile of the convolution GEMM (weights are packed in blocks of
/// this many rows).
inline constexpr std::int64_t kConvMr = 6;

/// A validated QLinearConv with its weights packed (built by kernels/conv.cpp).
struct ConvPlan {
  std::int64_t N = 0, C = 0, H = 0, W = 0, M = 0, OH = 0, OW = 0;
  std::int64_t kH = 1, kW = 1, pt = 0, pl = 0, sh = 1, sw = 1, dh = 1, dw = 1;
  std::int64_t group = 1, Cg = 0, Mg = 0;
  std::int64_t x_pitch = 0, y_pitch = 0;  ///< row pitch (elements) of input / output
  bool x_signed = false;                  ///< int8 input: bytes are flipped to x + 128
  std::uint8_t xz = 0;                    ///< input zero point in the unsigned domain
  std::int32_t yz = 0, qmin = 0, qmax = 255;
  std::vector<float> mult;                ///< [M] requantization multiplier
  std::vector<std::int32_t> c0;           ///< [M] bias - xz sum w + K xz wz (mod 2^32)
  std::vector<std::int32_t> wz;           ///< [M] weight zero point in the signed domain
  bool any_wz = false;                    ///< some wz != 0: the kernel needs sum x

  /// Depthwise path (group == C, one input channel per output channel, taps fit one 64-byte
  /// window per group of 4): per output channel, kH rows of `taps4` words of 4 signed weights.
  bool depthwise = false;
  std::int64_t taps4 = 0;                 ///< ceil(kW / 4)
  std::vector<std::int32_t> dw_words;     ///< [M][kH][taps4]
  std::vector<std::int32_t> dw_ones;      ///< [taps4] words of 1 bytes for the real taps

  /// GEMM path: per group, K = Cg * kH * kW rounded up to K4 groups of 4; weights packed as
  /// words of 4 signed bytes (k = 4 k4 .. 4 k4 + 3, little endian), laid out
  /// [group][ceil(Mg / kConvMr)][K4][kConvMr] (zero bytes as padding).
  std::int64_t K = 0, K4 = 0, m_blocks = 0;
  /// k4 rows of the packed blocks (of group * m_blocks * K4) holding a pair of weights (bytes
  /// 0-1 or 2-3 of a word) with |w1| + |w2| > 128, whose 16-bit products can saturate
  /// `vpmaddubsw`: the avx2 GEMM uses it only when few rows have such a pair, and takes the
  /// weights as they are, without looking for such pairs, when this is 0 (so it must be exact).
  std::int64_t wide_pair_rows = 0;
  bool pointwise = false;                 ///< 1x1, stride 1, no padding: no im2col needed
  std::vector<std::int32_t> w_packed;
  /// Direct taps (the avx512 GEMM's Segments tiles; empty: not packed): the weights again, as
  /// K4t = C4 kH kW words of 4 input channels at one tap, k4 = c4 kH kW + kh kW + kw (channels
  /// 4 c4 .. 4 c4 + 3, zero past Cg), laid out [group][m_blocks][K4t][kConvMr]. The GEMM then
  /// reads B straight from the phase planes interleaved by 4 channels instead of an im2col
  /// matrix that holds each input byte once per tap. Packed for kernels of several taps with
  /// output rows over 32, no weight zero points and at most 1/8 of the channel bytes of the
  /// words idle (8 Cg >= 7 * 4 C4) (the only ones that take this path).
  std::int64_t C4 = 0, K4t = 0;
  std::vector<std::int32_t> w_taps;
};

/// Runs `plan` on image data `x` (the input tensor) into `y` (the output tensor); both in their
/// layouts (rows `x_pitch` / `y_pitch` apart). Output row padding is zeroed. `x` and `y` must not
/// overlap. Uses per-thread scratch buffers that grow to the largest kernel run and are reused.
/// `post_lut` (null: none): a 256-entry table every output byte goes through before it is
/// stored (entry b replaces byte b; the padding stays zero), so that a LowLevelRequantize that
/// only reads this output is computed in the same pass (prepare_program's fusion). Only the
/// avx512 level's GEMM convolution takes a table: the other levels, and avx512's depthwise
/// path, return false for one (the caller then runs the two kernels apart). With a table,
/// plan.group == 1 and plan.N == 1, `x` may overlap `y`: the GEMM path packs the whole input
/// before it writes the first output byte.
void conv(const ConvPlan& plan, const std::byte* x, std::byte* y, const std::uint8_t* post_lut);

/// Output columns per MatMul panel: B is packed in panels of this many columns (the last
/// columns in panels of 16), each panel's K4 rows contiguous, so a panel is one sequential
/// stream (a [K4][Npad][4] layout jumps Npad * 4 bytes per k4, a new page per step for wide B,
/// which defeats the hardware prefetcher).
inline constexpr std::int64_t kMatMulPanel = 128;

/// A validated QLinearMatMul with B packed in column panels (matmul_b_offset) of signed bytes.
struct MatMulPlan {
  std::int64_t rows = 0, K = 0, N = 0, K4 = 0, Npad = 0;
  bool a_signed = false;
  std::uint8_t az = 0;                    ///< a zero point in the unsigned domain
  std::int32_t yz = 0, qmin = 0, qmax = 255;
  std::vector<float> mult;                ///< [Npad]
  std::vector<std::int32_t> c0;           ///< [Npad] K az bz - az sum_k b (mod 2^32)
  std::vector<std::int32_t> bz;           ///< [Npad] b zero point in the signed domain
  bool any_bz = false;
  std::vector<std::int8_t> b_packed;
};

/// Byte offset of B[k][n] in MatMulPlan::b_packed: column n lies in a panel of kMatMulPanel
/// columns starting at n0 (or, past the last whole panel, of 16), stored [K4][width][4]
/// from byte n0 * K4 * 4.
inline std::int64_t matmul_b_offset(std::int64_t K4, std::int64_t Npad, std::int64_t k,
                                    std::int64_t n) {
  const std::int64_t wide = Npad / kMatMulPanel * kMatMulPanel;
  const std::int64_t width = n < wide ? kMatMulPanel : 16;
  const std::int64_t n0 = n / width * width;
  return n0 * K4 * 4 + (k / 4) * width * 4 + (n - n0) * 4 + k % 4;
}

/// Runs `plan`: `a` is [rows, K] dense, `y` is [rows, N] dense. `a` and `y` must not overlap.
void matmul(const MatMulPlan& plan, const std::byte* a, std::byte* y);

/// Elementwise QLinearAdd of `n` contiguous elements: qlinear_add in kernels.h, or with `mlas`
/// mlas_add with a as the streamed operand (v) and the constants `ratios` (isa::AddFormula).
/// Built by sim::fast_add_params (kernels.h), which also maps MlasRatiosUint8 and ONNX Runtime's
/// swapped operands onto these fields, so every level computes every formula the same way:
/// the bytes of a and b are XORed with a_flip / b_flip when loaded (0x80: an int8 code + 128,
/// read as uint8), then widened as int8 when *_signed; the result bytes (saturated to the type
/// qmin says) are XORed with y_flip when stored (0x80: a uint8 code - 128 as int8), before any
/// row padding is written (padding stays zero).
struct AddParamsF {
  float a_scale, b_scale, y_scale;
  std::int32_t a_zp, b_zp, y_zp, qmin, qmax;
  bool a_signed, b_signed;
  bool mlas = false;
  float ra = 0, rb = 0, fixed = 0;  ///< mlas: MlasAddConsts{rv = ra, rs = rb, fixed}
  std::uint8_t a_flip = 0, b_flip = 0, y_flip = 0;  ///< XORed into loaded / stored bytes
  /// b is one element per run (per row in add_rows, b_pitch apart), broadcast over the run.
  bool b_broadcast = false;
};
/// With p.mlas: a bound of |fma(a, ra, fma(b, rb, fixed))| over all 8-bit codes, for the
/// requantization's range check (|a|, |b| <= 255, plus slack for the roundings).
inline double mlas_add_bound(const AddParamsF& p) {
  return 510.0 * (std::fabs(static_cast<double>(p.ra)) + std::fabs(static_cast<double>(p.rb))) +
         std::fabs(static_cast<double>(p.fixed)) + 1.0;
}
void add_run(const AddParamsF& p, const std::byte* a, const std::byte* b, std::byte* y,
             std::int64_t n);
/// add_run over `rows` rows of `width` elements, each operand's rows `*_pitch` bytes apart.
/// With `y_pad` > 0 (a lowered output, width + y_pad a multiple of 16) the row padding of y is
/// zeroed too. y may be exactly a or b (same address and pitch), not a partial overlap.
void add_rows(const AddParamsF& p, const std::byte* a, std::int64_t a_pitch, const std::byte* b,
              std::int64_t b_pitch, std::byte* y, std::int64_t y_pitch, std::int64_t rows,
              std::int64_t width, std::int64_t y_pad);

/// Sum of `rows` rows of `width` 8-bit elements (`pitch` bytes apart) as int32 values of the
/// dtype (int8 when `is_signed`), modulo 2^32.
std::uint32_t sum_rows(const std::byte* x, std::int64_t pitch, std::int64_t rows,
                       std::int64_t width, bool is_signed);

/// Copies `rows` runs of `width` bytes: run r from src + r * src_step to dst + r * dst_step,
/// through the 256-entry table `lut` when not null. With `pad` > 0 every run is a row of a
/// lowered tensor followed by `pad` bytes of row padding (width + pad a multiple of 32), which
/// are zeroed too. Source and destination must not overlap.
void copy_rows(std::byte* dst, std::int64_t dst_step, const std::byte* src, std::int64_t src_step,
               std::int64_t rows, std::int64_t width, std::int64_t pad, const std::uint8_t* lut);

/// MaxPool of one [H, W] plane (rows `x_pitch` apart) into [OH, OW] (rows `y_pitch` apart,
/// padding zeroed). Returns false (and does nothing) when the window shape is not supported
/// (strides other than 1 and 2).
struct PoolGeom {
  std::int64_t H, W, OH, OW, kH, kW, pt, pl, sh, sw, dh, dw, x_pitch, y_pitch;
  bool is_signed;
};
bool maxpool_supported(const PoolGeom& g) noexcept;
void maxpool_plane(const PoolGeom& g, const std::byte* x, std::byte* y);

/// The kernels of one ISA level, with the signatures of the functions above (which are the
/// avx512 level's). A null entry: the level lacks that kernel. `conv` returns false, having done
/// nothing, for a plan whose shape the level does not handle (the caller runs it elsewhere).
struct Kernels {
  SimIsa isa = SimIsa::Portable;
  bool (*conv)(const ConvPlan&, const std::byte*, std::byte*, const std::uint8_t*) = nullptr;
  void (*matmul)(const MatMulPlan&, const std::byte*, std::byte*) = nullptr;
  void (*add_run)(const AddParamsF&, const std::byte*, const std::byte*, std::byte*,
                  std::int64_t) = nullptr;
  void (*add_rows)(const AddParamsF&, const std::byte*, std::int64_t, const std::byte*,
                   std::int64_t, std::byte*, std::int64_t, std::int64_t, std::int64_t,
                   std::int64_t) = nullptr;
  std::uint32_t (*sum_rows)(const std::byte*, std::int64_t, std::int64_t, std::int64_t,
                            bool) = nullptr;
  void (*copy_rows)(std::byte*, std::int64_t, const std::byte*, std::int64_t, std::int64_t,
                    std::int64_t, std::int64_t, const std::uint8_t*) = nullptr;
  bool (*maxpool_supported)(const PoolGeom&) noexcept = nullptr;  ///< with maxpool_plane
  void (*maxpool_plane)(const PoolGeom&, const std::byte*, std::byte*) = nullptr;
};

/// The kernels of each level as implemented by its own file (entries it lacks are null).
/// Only to be called through kernels_for(), which checks the CPU. Defined only in a build for
/// the level's architecture (x86-64: the avx ones, aarch64: the neon ones).
Kernels avx512_kernels() noexcept;    // fast_kernels_avx512.cpp
Kernels avx2_kernels() noexcept;      // fast_kernels_avx2.cpp
Kernels avx_vnni_kernels() noexcept;  // fast_kernels_avx_vnni.cpp, the AVX-VNNI build
Kernels avx512_vnni_kernels() noexcept;  // fast_kernels_avx512_vnni.cpp, the same with EVEX
Kernels neon_kernels() noexcept;         // fast_kernels_neon.cpp: ARMv8-A Advanced SIMD
Kernels neon_dotprod_kernels() noexcept;  // fast_kernels_neon_dotprod.cpp: + sdot (ARMv8.2)
/// fast_kernels_neon_i8mm.cpp: + usdot (i8mm), unsigned activations without the 128 correction.
Kernels neon_i8mm_kernels() noexcept;

/// The kernels to run at level `isa`: its own, the entries it lacks taken from the next lower
/// level that has them (still null where only the portable code has them). Auto: the highest
/// level this CPU has. Null for Portable and for a level this CPU lacks. Built once; the
/// pointer stays valid for the process.
const Kernels* kernels_for(SimIsa isa) noexcept;

}  // namespace furiosa::device::sim::fast
