// Private: the padded phase planes from which the fast kernels' convolution GEMM reads its
// im2col matrix (every level's conv_gemm, fast_kernels_*_conv.inc), so that no level gathers the
// matrix output row by output row.
//
// A channel's input plane, padded with the zero point (pads pt, pl; as many rows and columns
// past the end as the taps reach), is split by the strides into sh x sw phases: phase (a, b)
// holds the padded rows a, a + sh, a + 2 sh, ... and the padded columns b, b + sw, ... Tap
// (kh, kw) of output (oh, ow) reads padded row oh sh + kh dh, which is row oh + (kh dh) / sh of
// the phases (kh dh) % sh, and likewise for the column. So im2col row k = (ci, kh, kw) is, for
// each output row oh, OW consecutive bytes of one phase plane, and consecutive output rows are
// one plane row apart: a 2-D view that interleave4 reads directly (rows `pitch` apart). The
// planes hold each input byte once per phase that a tap reads (once for a stride-1 convolution),
// where the im2col matrix held it once per tap (9 times for 3 x 3), and they are built with one
// copy per input row instead of one per output row and tap.
#pragma once

#include <cstdint>

#include "fast_kernels.h"

namespace furiosa::device::sim::fast {

/// Geometry of one group's phase planes (phase_planes()). The planes of input channel ci of the
/// group come in phase order (a, b), each `plane` bytes: rows of `pitch` bytes. Only the phases
/// that taps read are kept: with dilation 1 they are a < min(kH, sh) and b < min(kW, sw) (a
/// 1 x 1 kernel with stride 2 reads one phase of four), with a dilation all of them.
struct PhasePlanes {
  std::int64_t rows = 0;        ///< rows per plane: OH + (kH - 1) dh / sh
  std::int64_t pitch = 0;       ///< bytes per row: when every tap starts at column 0 (kW == 1,
                                ///< say), OW, so that the rows are one run of OH OW bytes;
                                ///< otherwise a multiple of 16, the furthest tap column
                                ///< (kW - 1) dw / sw plus round_up(OW, 16)
  std::int64_t plane = 0;       ///< bytes per plane: rows * pitch, plus 16 when pitch == OW
                                ///< so that a read of round_up(OW, 16) bytes (or of
                                ///< round_up(OH OW, 16)) from any row stays inside the plane
  std::int64_t row_phases = 0;  ///< phases a kept: min(kH, sh) (dh == 1) or sh
  std::int64_t col_phases = 0;  ///< phases b kept: min(kW, sw) (dw == 1) or sw
  std::int64_t phases = 0;      ///< planes per channel: row_phases * col_phases

  /// Bytes of the planes of `channels` input channels.
  [[nodiscard]] std::int64_t bytes(std::int64_t channels) const {
    return channels * phases * plane;
  }
};

/// The phase-plane geometry of convolution `p` (any kernel size, stride, dilation, padding).
PhasePlanes phase_planes(const ConvPlan& p);

/// Byte offsets, from the start of a group's planes, of the K im2col rows (k < Cg kH kW, in the
/// weights' order ci, kh, kw) at output row 0; output row oh starts `oh * pitch` bytes later,
/// and its OW bytes are the taps of outputs (oh, 0 .. OW - 1). The array is per thread and valid
/// until the thread's next call.
const std::int64_t* phase_row_offsets(const ConvPlan& p, const PhasePlanes& pp);

/// A level's strided byte gather: dst[i] = src[i * stride] for i < n, reading nothing past
/// src[(n - 1) * stride].
using GatherFn = void (*)(std::uint8_t* dst, const std::uint8_t* src, std::int64_t n,
                          std::int64_t stride);

/// Writes the phase planes of group g's Cg input channels of image `x` (channel planes of H
/// rows, `p.x_pitch` bytes apart) into `planes` (pp.bytes(p.Cg) bytes): input bytes unchanged,
/// padding as `pad_byte` (the zero point in the input's own domain). `gather` copies the input
/// rows (memcpy for stride 1).
void fill_phase_planes(const ConvPlan& p, const PhasePlanes& pp, const std::uint8_t* x,
                       std::int64_t g, std::uint8_t pad_byte, std::uint8_t* planes,
                       GatherFn gather);

}  // namespace furiosa::device::sim::fast
