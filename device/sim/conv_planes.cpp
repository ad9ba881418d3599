// The padded phase planes of the fast convolution GEMM (conv_planes.h). Plain C++: the copies
// are memset and the level's gather, so this file needs no instruction set of its own.
#include "conv_planes.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace furiosa::device::sim::fast {
namespace {

constexpr std::int64_t round_up16(std::int64_t v) { return (v + 15) / 16 * 16; }

// Positions o in [0, out) whose input position o * stride + offset lies in [0, in).
void valid_span(std::int64_t out, std::int64_t stride, std::int64_t offset, std::int64_t in,
                std::int64_t& lo, std::int64_t& hi) {
  lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  hi = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
}

}  // namespace

PhasePlanes phase_planes(const ConvPlan& p) {
  PhasePlanes pp;
  pp.rows = p.OH + (p.kH - 1) * p.dh / p.sh;
  const std::int64_t last_col = (p.kW - 1) * p.dw / p.sw;  // the furthest tap's first column
  pp.pitch = last_col == 0 ? p.OW : round_up16(last_col + round_up16(p.OW));
  pp.plane = pp.rows * pp.pitch + (last_col == 0 ? 16 : 0);
  pp.row_phases = p.dh == 1 ? std::min(p.kH, p.sh) : p.sh;
  pp.col_phases = p.dw == 1 ? std::min(p.kW, p.sw) : p.sw;
  pp.phases = pp.row_phases * pp.col_phases;
  return pp;
}

const std::int64_t* phase_row_offsets(const ConvPlan& p, const PhasePlanes& pp) {
  thread_local std::vector<std::int64_t> offsets;
  if (offsets.size() < static_cast<std::size_t>(p.K)) offsets.resize(static_cast<std::size_t>(p.K));
  // Counted up in (ci, kh, kw) order: no divisions per row.
  std::int64_t k = 0;
  for (std::int64_t ci = 0; ci < p.Cg; ++ci) {
    for (std::int64_t kh = 0; kh < p.kH; ++kh) {
      const std::int64_t a = kh * p.dh % p.sh, row = kh * p.dh / p.sh;
      const std::int64_t base =
          (ci * pp.row_phases + a) * pp.col_phases * pp.plane + row * pp.pitch;
      for (std::int64_t kw = 0; kw < p.kW; ++kw, ++k) {
        offsets[static_cast<std::size_t>(k)] =
            base + (kw * p.dw % p.sw) * pp.plane + kw * p.dw / p.sw;
      }
    }
  }
  return offsets.data();
}

void fill_phase_planes(const ConvPlan& p, const PhasePlanes& pp, const std::uint8_t* x,
                       std::int64_t g, std::uint8_t pad_byte, std::uint8_t* planes,
                       GatherFn gather) {
  const auto pad = [&](std::uint8_t* dst, std::int64_t n) {
    if (n > 0) std::memset(dst, pad_byte, static_cast<std::size_t>(n));
  };
  for (std::int64_t ci = 0; ci < p.Cg; ++ci) {
    const std::uint8_t* channel = x + (g * p.Cg + ci) * p.H * p.x_pitch;
    for (std::int64_t a = 0; a < pp.row_phases; ++a) {
      for (std::int64_t b = 0; b < pp.col_phases; ++b) {
        std::uint8_t* dst = planes + ((ci * pp.row_phases + a) * pp.col_phases + b) * pp.plane;
        // Plane column j is input column j sw + b - pl.
        std::int64_t lo, hi;
        valid_span(pp.pitch, p.sw, b - p.pl, p.W, lo, hi);
        for (std::int64_t i = 0; i < pp.rows; ++i, dst += pp.pitch) {
          const std::int64_t ih = i * p.sh + a - p.pt;
          if (ih < 0 || ih >= p.H || lo == hi) {
            pad(dst, pp.pitch);
            continue;
          }
          pad(dst, lo);
          gather(dst + lo, channel + ih * p.x_pitch + lo * p.sw + b - p.pl, hi - lo, p.sw);
          pad(dst + hi, pp.pitch - hi);
        }
      }
    }
  }
}

}  // namespace furiosa::device::sim::fast
