// The pooling kernels: LowLevelMaxPool (window maximum) and LowLevelGlobalAveragePool
// (QLinearGlobalAveragePool, or TFLite's integer mean).
#include "kernel_common.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace furiosa::device::sim::detail {

// LowLevelMaxPool: window maximum over the valid (non-pad) positions.
void maxpool(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::MaxPoolParams>(kernel);
  const Act4 x = activation(region, kernel.inputs[0], "input 0");
  const Act4 y = activation(region, kernel.outputs[0], "output 0");
  require_8bit(kernel.inputs[0], "input 0");
  if (y.dtype != x.dtype)
    fault("{} must have the input's dtype", describe("output 0", kernel.outputs[0]));
  if (y.n != x.n || y.c != x.c) {
    fault("output N, C ({}, {}) differ from input N, C ({}, {})", y.n, y.c, x.n, x.c);
  }
  require_window(p.pads, p.strides, p.dilations);
  if (p.kernel[0] < 1 || p.kernel[1] < 1)
    fault("kernel shape [{}, {}] must be >= 1", p.kernel[0], p.kernel[1]);
  const std::int64_t kH = p.kernel[0], kW = p.kernel[1];
  const std::int64_t sh = p.strides[0], sw = p.strides[1];
  const std::int64_t dh = p.dilations[0], dw = p.dilations[1];

  const fast::Kernels* fk = fast_kernels();
  if (fk != nullptr && fk->maxpool_plane != nullptr && x.n > 0 && x.c > 0 && x.h > 0 && x.w > 0 &&
      y.h > 0 && y.w > 0) {
    const fast::PoolGeom g{x.h, x.w, y.h, y.w, kH,      kW,      p.pads[0],    p.pads[1],
                           sh,  sw,  dh,  dw,  x.pitch, y.pitch, x.is_signed()};
    if (fk->maxpool_supported(g)) {
      const std::byte* xb = fast_input(region, kernel.inputs[0], kernel.outputs[0]);
      for (std::int64_t n = 0; n < x.n; ++n) {
        for (std::int64_t c = 0; c < x.c; ++c) {
          fk->maxpool_plane(g, xb + (n * x.c + c) * x.h * x.pitch, y.row(n, c, 0));
        }
      }
      return;
    }
  }

  // Valid window taps per output row / column: tap k is valid for output o when
  // o * stride - pad + k * dilation lies inside the input.
  auto taps = [](std::int64_t out, std::int64_t k, std::int64_t stride, std::int64_t pad,
                 std::int64_t dilation, std::int64_t in) {
    std::vector<std::pair<std::int64_t, std::int64_t>> range(static_cast<std::size_t>(out));
    for (std::int64_t o = 0; o < out; ++o) {
      const auto [lo, hi] = valid_range(k, dilation, o * stride - pad, in);
      range[static_cast<std::size_t>(o)] = {lo, hi};
    }
    return range;
  };
  const auto rows = taps(y.h, kH, sh, p.pads[0], dh, x.h);
  const auto cols = taps(y.w, kW, sw, p.pads[1], dw, x.w);
  const bool is_signed = x.is_signed();
  const std::int32_t lowest = is_signed ? -128 : 0;  // what an all-padding window yields

  for (std::int64_t n = 0; n < x.n; ++n) {
    for (std::int64_t c = 0; c < x.c; ++c) {
      for (std::int64_t oh = 0; oh < y.h; ++oh) {
        std::byte* out = y.row(n, c, oh);
        const auto [kh_lo, kh_hi] = rows[static_cast<std::size_t>(oh)];
        for (std::int64_t ow = 0; ow < y.w; ++ow) {
          const auto [kw_lo, kw_hi] = cols[static_cast<std::size_t>(ow)];
          const std::int64_t iw0 = ow * sw - p.pads[1];
          std::int32_t best = lowest;
          for (std::int64_t kh = kh_lo; kh < kh_hi; ++kh) {
            const std::byte* in = x.row(n, c, oh * sh - p.pads[0] + kh * dh);
            for (std::int64_t kw = kw_lo; kw < kw_hi; ++kw) {
              best = std::max(best, load8(in + iw0 + kw * dw, is_signed));
            }
          }
          store8(out + ow, best);
        }
        y.clear_padding(out);
      }
    }
  }
}

// LowLevelGlobalAveragePool (com.microsoft QLinearGlobalAveragePool, NCHW).
void global_average_pool(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::GlobalAveragePoolParams>(kernel);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  std::byte* yptr = at(region, yref);
  require_8bit(xref, "input 0");
  require_8bit(yref, "output 0");
  if (xref.shape.size() != 4) fault("{} must be of rank 4 (NCHW)", describe("input 0", xref));
  const std::int64_t N = xref.shape[0], C = xref.shape[1], H = xref.shape[2], W = xref.shape[3];
  if (yref.shape != Shape{N, C, 1, 1}) {
    fault("{} must have shape {}", describe("output 0", yref), shape_to_string({N, C, 1, 1}));
  }
  const bool integer_mean = p.integer_mean_clamp.has_value();
  if (!integer_mean) {
    require_scale(p.x.scale, "x_scale");
    require_scale(p.y.scale, "y_scale");
    require_zero_point(p.x.zero_point, xref.dtype, "x_zero_point");
    require_zero_point(p.y.zero_point, yref.dtype, "y_zero_point");
  }
  if (N * C == 0) return;
  if (H * W == 0) fault("{} has no spatial elements to average", describe("input 0", xref));
  const float mult = integer_mean ? 0.0f : p.x.scale / (p.y.scale * static_cast<float>(H * W));
  if (!std::isfinite(mult)) fault("requantization multiplier {} is not finite", mult);
  const std::int32_t count = static_cast<std::int32_t>(H * W);
  const auto range =
      isa::quant_range(yref.dtype);  // (no structured binding: clang 14 cannot capture one)
  // The stored (sum of values - zero point terms) as the output byte: the float requantization,
  // or TFLite's integer mean of the raw sum.
  auto result = [&](std::int32_t sum) -> std::int32_t {
    if (!integer_mean)
      return isa::requantize(sum, mult, p.y.zero_point, std::get<0>(range), std::get<1>(range));
    const std::int32_t mean = sum >= 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
    return std::clamp(mean, (*p.integer_mean_clamp)[0], (*p.integer_mean_clamp)[1]);
  };

  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  const std::vector<std::int64_t> xs = layout_strides(xref), ys = layout_strides(yref);
  const bool x_signed = xref.dtype == DType::Int8;
  // sum(x - zp) = sum(x) - zp * H * W, in wrapping 32-bit arithmetic like the int32 adders (the
  // integer mean sums the raw values).
  const fast::Kernels* fk = fast_kernels();
  const std::uint32_t zp_total =
      integer_mean ? 0u
                   : static_cast<std::uint32_t>(p.x.zero_point) * static_cast<std::uint32_t>(H * W);
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t c = 0; c < C; ++c) {
      std::uint32_t acc = 0;
      if (fk != nullptr && fk->sum_rows != nullptr) {
        acc = fk->sum_rows(xptr + (n * xs[0] + c * xs[1]), xs[2], H, W, x_signed);
        store8(yptr + (n * ys[0] + c * ys[1]), result(static_cast<std::int32_t>(acc - zp_total)));
        continue;
      }
      for (std::int64_t h = 0; h < H; ++h) {
        const auto* row =
            reinterpret_cast<const unsigned char*>(xptr) + (n * xs[0] + c * xs[1] + h * xs[2]);
        if (x_signed) {
          for (std::int64_t w = 0; w < W; ++w) {
            acc += static_cast<std::uint32_t>(
                static_cast<std::int32_t>(static_cast<std::int8_t>(row[w])));
          }
        } else {
          for (std::int64_t w = 0; w < W; ++w) acc += row[w];
        }
      }
      store8(yptr + (n * ys[0] + c * ys[1]), result(static_cast<std::int32_t>(acc - zp_total)));
    }
  }
  clear_row_padding(yptr, yref);
}

}  // namespace furiosa::device::sim::detail
