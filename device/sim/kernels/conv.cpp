// LowLevelConv2d / LowLevelDepthwiseConv2d (QLinearConv): validation, the portable
// convolution, and the packing of a convolution for the fast kernels (fast::ConvPlan), per
// program (prepare_conv_plan) or per call.
#include "kernel_common.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <variant>
#include <vector>

namespace furiosa::device::sim::detail {

namespace {

/// Inner-loop block width: fixed-size blocks are unrolled and vectorized by the compiler.
constexpr std::int64_t kBlock = 16;

// A validated LowLevelConv2d / LowLevelDepthwiseConv2d: geometry, the weight bytes, and the
// per-output-channel bias (wrapped into uint32) and requantization multiplier.
struct ConvDesc {
  const isa::Conv2dParams* p = nullptr;
  Act4 x, y;  // bases null
  std::int64_t N = 0, C = 0, H = 0, W = 0, M = 0, OH = 0, OW = 0, Cg = 0, Mg = 0;
  std::int64_t kH = 0, kW = 0, pt = 0, pl = 0, sh = 1, sw = 1, dh = 1, dw = 1;
  const std::byte* wptr = nullptr;
  DType w_dtype = DType::Int8;
  std::vector<std::uint32_t> bias;
  std::vector<float> mult;                      // float rule
  std::vector<isa::QuantizedMultiplier> fixed;  // fixed-point rule: one per output channel
};

// Validates a convolution kernel that passed isa::verify_kernel (every tensor inside the region)
// and whose constant operands are read from `mem`. Throws Error(DeviceFault) when malformed,
// NotResident (only when `mem` is not the whole region) when the weights or bias are not in `mem`.
ConvDesc validate_conv(const isa::Kernel& kernel, bool depthwise, const Readable& mem) {
  ConvDesc d;
  const auto& p = params_of<isa::Conv2dParams>(kernel);
  d.p = &p;
  d.x = activation_shape(kernel.inputs[0], "input 0");
  d.y = activation_shape(kernel.outputs[0], "output 0");
  require_8bit(kernel.inputs[0], "input 0");
  require_8bit(kernel.outputs[0], "output 0");
  const Act4& x = d.x;
  const Act4& y = d.y;
  const std::int64_t N = x.n, C = x.c;
  const std::int64_t M = y.c;
  if (y.n != N) fault("output batch {} differs from input batch {}", y.n, N);
  if (p.group < 1 || C % p.group != 0 || M % p.group != 0) {
    fault("group {} must divide the input channels {} and output channels {}", p.group, C, M);
  }
  if (depthwise && p.group != C)
    fault("depthwise convolution needs group == C, got group {} and C {}", p.group, C);
  const std::int64_t Cg = C / p.group;

  const TensorRef& wref = p.weight;
  require_linear(wref, "weight");
  require_8bit(wref, "weight");
  if (wref.shape.size() != 4 || wref.shape[0] != M || wref.shape[1] != Cg || wref.shape[2] < 1 ||
      wref.shape[3] < 1) {
    fault("{} must have shape [{}, {}, kH, kW]", describe("weight", wref), M, Cg);
  }
  require_window(p.pads, p.strides, p.dilations);

  require_per_channel_size(p.w_scale.size(), M, "w_scale");
  require_per_channel_size(p.w_zero_point.size(), M, "w_zero_point");
  require_scale(p.x.scale, "x_scale");
  require_scale(p.y.scale, "y_scale");
  for (float s : p.w_scale) require_scale(s, "w_scale");
  require_zero_point(p.x.zero_point, x.dtype, "x_zero_point");
  require_zero_point(p.y.zero_point, y.dtype, "y_zero_point");
  for (std::int32_t zp : p.w_zero_point) require_zero_point(zp, wref.dtype, "w_zero_point");

  // Bias (int32, wrapped into the uint32 accumulator) and float multiplier per output channel.
  d.bias.assign(static_cast<std::size_t>(M), 0);
  if (p.bias) {
    require_linear(*p.bias, "bias");
    if (p.bias->dtype != DType::Int32 || p.bias->shape != Shape{M}) {
      fault("{} must be int32 of shape [{}]", describe("bias", *p.bias), M);
    }
    const std::byte* bptr = read_at(mem, *p.bias);
    for (std::int64_t m = 0; m < M; ++m) {
      std::int32_t b;
      std::memcpy(&b, bptr + m * 4, 4);
      d.bias[static_cast<std::size_t>(m)] = static_cast<std::uint32_t>(b);
    }
  }
  if (p.fixed_point) {
    require_fixed_point(*p.fixed_point, M, y.dtype);
    const auto& mults = p.fixed_point->multipliers;
    for (std::int64_t m = 0; m < M; ++m) {
      d.fixed.push_back(mults[mults.size() == 1 ? 0 : static_cast<std::size_t>(m)]);
    }
  } else {
    d.mult.resize(static_cast<std::size_t>(M));
    for (std::int64_t m = 0; m < M; ++m) {
      const float w_scale = p.w_scale[p.w_scale.size() == 1 ? 0 : static_cast<std::size_t>(m)];
      const float value = (p.x.scale * w_scale) / p.y.scale;
      if (!std::isfinite(value)) fault("requantization multiplier of channel {} is not finite", m);
      d.mult[static_cast<std::size_t>(m)] = value;
    }
  }
  d.wptr = read_at(mem, wref);
  d.w_dtype = wref.dtype;
  d.N = N;
  d.C = C;
  d.H = x.h;
  d.W = x.w;
  d.M = M;
  d.OH = y.h;
  d.OW = y.w;
  d.Cg = Cg;
  d.Mg = M / p.group;
  d.kH = wref.shape[2];
  d.kW = wref.shape[3];
  d.pt = p.pads[0];
  d.pl = p.pads[1];
  d.sh = p.strides[0];
  d.sw = p.strides[1];
  d.dh = p.dilations[0];
  d.dw = p.dilations[1];
  return d;
}

// The portable convolution: int16 operands, uint32 accumulators, scalar requantization.
void conv2d_generic(const ConvDesc& d, std::span<std::byte> region, const isa::Kernel& kernel) {
  const auto& p = *d.p;
  Act4 x = d.x, y = d.y;
  x.base = region.data() + kernel.inputs[0].address;
  y.base = region.data() + kernel.outputs[0].address;
  const std::int64_t N = d.N, C = d.C, H = d.H, W = d.W, M = d.M, OH = d.OH, OW = d.OW;
  const std::int64_t Cg = d.Cg, Mg = d.Mg, kH = d.kH, kW = d.kW;
  const std::int64_t pt = d.pt, pl = d.pl, sh = d.sh, sw = d.sw, dh = d.dh, dw = d.dw;
  const std::vector<std::uint32_t>& bias = d.bias;
  const std::vector<float>& mult = d.mult;

  // Weights minus their zero points, [M][Cg][kH][kW].
  const std::int64_t wblock = Cg * kH * kW;
  std::vector<std::int16_t> wq(static_cast<std::size_t>(M * wblock));
  const bool w_signed = d.w_dtype == DType::Int8;
  for (std::int64_t m = 0; m < M; ++m) {
    const std::int32_t zp =
        p.w_zero_point[p.w_zero_point.size() == 1 ? 0 : static_cast<std::size_t>(m)];
    for (std::int64_t i = m * wblock; i < (m + 1) * wblock; ++i) {
      wq[static_cast<std::size_t>(i)] = static_cast<std::int16_t>(load8(d.wptr + i, w_signed) - zp);
    }
  }

  const auto [qmin, qmax] = isa::quant_range(y.dtype);
  std::vector<std::int16_t> xq(static_cast<std::size_t>(C * H * W));  // one image minus x_zp
  std::vector<std::uint32_t> acc(static_cast<std::size_t>(OH * OW));  // one output plane
  for (std::int64_t n = 0; n < N; ++n) {
    // Dense copy of image n minus the zero point; the row padding is never read.
    for (std::int64_t c = 0; c < C; ++c) {
      for (std::int64_t h = 0; h < H; ++h) {
        const std::byte* src = x.row(n, c, h);
        std::int16_t* dst = xq.data() + (c * H + h) * W;
        if (x.is_signed()) {
          for (std::int64_t i = 0; i < W; ++i)
            dst[i] = static_cast<std::int16_t>(load8(src + i, true) - p.x.zero_point);
        } else {
          for (std::int64_t i = 0; i < W; ++i)
            dst[i] = static_cast<std::int16_t>(load8(src + i, false) - p.x.zero_point);
        }
      }
    }
    for (std::int64_t m = 0; m < M; ++m) {
      const std::int64_t g = m / Mg;
      std::fill(acc.begin(), acc.end(), bias[static_cast<std::size_t>(m)]);
      for (std::int64_t ci = 0; ci < Cg; ++ci) {
        const std::int16_t* xc = xq.data() + (g * Cg + ci) * H * W;
        const std::int16_t* wk = wq.data() + (m * Cg + ci) * kH * kW;
        for (std::int64_t kh = 0; kh < kH; ++kh) {
          const std::int64_t row_off = kh * dh - pt;  // ih = oh * sh + row_off
          const auto [oh_lo, oh_hi] = valid_range(OH, sh, row_off, H);
          for (std::int64_t kw = 0; kw < kW; ++kw) {
            const std::int32_t wv = wk[kh * kW + kw];
            if (wv == 0) continue;                      // contributes nothing
            const std::int64_t col_off = kw * dw - pl;  // iw = ow * sw + col_off
            const auto [ow_lo, ow_hi] = valid_range(OW, sw, col_off, W);
            if (ow_lo == ow_hi) continue;  // the tap falls into the padding for every column
            for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
              const std::int16_t* xr = xc + (oh * sh + row_off) * W;
              std::uint32_t* ar = acc.data() + oh * OW;
              if (sw == 1) {
                // Blocks of a fixed width let the compiler vectorize even at -O2.
                const std::int16_t* xs = xr + (ow_lo + col_off);  // in range: ow_lo is valid
                std::uint32_t* as = ar + ow_lo;
                const std::int64_t count = ow_hi - ow_lo;
                std::int64_t i = 0;
                for (; i + kBlock <= count; i += kBlock) {
                  for (std::int64_t j = 0; j < kBlock; ++j) {
                    as[i + j] += static_cast<std::uint32_t>(wv * xs[i + j]);
                  }
                }
                for (; i < count; ++i) as[i] += static_cast<std::uint32_t>(wv * xs[i]);
              } else {
                for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) {
                  ar[ow] += static_cast<std::uint32_t>(wv * xr[ow * sw + col_off]);
                }
              }
            }
          }
        }
      }
      // Requantization epilogue.
      if (p.fixed_point) {
        const isa::QuantizedMultiplier fm = d.fixed[static_cast<std::size_t>(m)];
        const std::int32_t lo = p.fixed_point->out_min, hi = p.fixed_point->out_max;
        for (std::int64_t oh = 0; oh < OH; ++oh) {
          std::byte* out = y.row(n, m, oh);
          const std::uint32_t* ar = acc.data() + oh * OW;
          for (std::int64_t ow = 0; ow < OW; ++ow) {
            store8(out + ow, isa::requantize_fixed_point(static_cast<std::int32_t>(ar[ow]), fm,
                                                         p.y.zero_point, lo, hi));
          }
          y.clear_padding(out);
        }
        continue;
      }
      const float mm = mult[static_cast<std::size_t>(m)];
      for (std::int64_t oh = 0; oh < OH; ++oh) {
        std::byte* out = y.row(n, m, oh);
        const std::uint32_t* ar = acc.data() + oh * OW;
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          store8(out + ow, isa::requantize(static_cast<std::int32_t>(ar[ow]), mm, p.y.zero_point,
                                           qmin, qmax));
        }
        y.clear_padding(out);
      }
    }
  }
}

// A 4-byte word of signed bytes b0..b3 (b0 lowest), as vpdpbusd reads a 32-bit lane.
std::int32_t pack4(const std::int32_t b[4]) {
  std::uint32_t w = 0;
  for (int j = 0; j < 4; ++j)
    w |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(b[j])) << (8 * j);
  return static_cast<std::int32_t>(w);
}

// True when the fast convolution handles `d`: the float requantization rule and a non-empty
// output (fixed-point kernels run on the portable code only).
bool fast_conv_fits(const ConvDesc& d) {
  return !d.p->fixed_point && d.N > 0 && d.C > 0 && d.H > 0 && d.W > 0 && d.M > 0 && d.OH > 0 &&
         d.OW > 0;
}

// Packs a validated convolution for the fast kernels (fast_kernels.h describes the domains).
std::shared_ptr<const fast::ConvPlan> make_conv_plan(const ConvDesc& d) {
  auto plan = std::make_shared<fast::ConvPlan>();
  fast::ConvPlan& f = *plan;
  const auto& p = *d.p;
  f.N = d.N;
  f.C = d.C;
  f.H = d.H;
  f.W = d.W;
  f.M = d.M;
  f.OH = d.OH;
  f.OW = d.OW;
  f.kH = d.kH;
  f.kW = d.kW;
  f.pt = d.pt;
  f.pl = d.pl;
  f.sh = d.sh;
  f.sw = d.sw;
  f.dh = d.dh;
  f.dw = d.dw;
  f.group = p.group;
  f.Cg = d.Cg;
  f.Mg = d.Mg;
  f.x_pitch = d.x.pitch;
  f.y_pitch = d.y.pitch;
  f.x_signed = d.x.is_signed();
  const std::int32_t xz = p.x.zero_point + (f.x_signed ? 128 : 0);  // unsigned domain
  f.xz = static_cast<std::uint8_t>(xz);
  f.yz = p.y.zero_point;
  const auto [qmin, qmax] = isa::quant_range(d.y.dtype);
  f.qmin = qmin;
  f.qmax = qmax;
  f.mult = d.mult;
  const bool w_signed = d.w_dtype == DType::Int8;
  const std::int64_t K = d.Cg * d.kH * d.kW;
  f.K = K;
  f.K4 = (K + 3) / 4;
  // Signed-domain weight k of output channel m.
  auto weight = [&](std::int64_t m, std::int64_t k) -> std::int32_t {
    const std::int32_t v = load8(d.wptr + m * K + k, w_signed);
    return w_signed ? v : v - 128;
  };
  f.wz.resize(static_cast<std::size_t>(d.M));
  f.c0.resize(static_cast<std::size_t>(d.M));
  for (std::int64_t m = 0; m < d.M; ++m) {
    const std::int32_t zp =
        p.w_zero_point[p.w_zero_point.size() == 1 ? 0 : static_cast<std::size_t>(m)];
    const std::int32_t wz = w_signed ? zp : zp - 128;
    std::uint32_t wsum = 0;
    for (std::int64_t k = 0; k < K; ++k) wsum += static_cast<std::uint32_t>(weight(m, k));
    // bias - xz sum w + K xz wz, modulo 2^32.
    const std::uint32_t c0 = d.bias[static_cast<std::size_t>(m)] -
                             static_cast<std::uint32_t>(xz) * wsum +
                             static_cast<std::uint32_t>(K) * static_cast<std::uint32_t>(xz) *
                                 static_cast<std::uint32_t>(wz);
    f.wz[static_cast<std::size_t>(m)] = wz;
    f.c0[static_cast<std::size_t>(m)] = static_cast<std::int32_t>(c0);
    f.any_wz = f.any_wz || wz != 0;
  }
  f.depthwise = d.Cg == 1 && 15 * d.sw + 3 * d.dw <= 63;
  if (f.depthwise) {
    f.taps4 = (d.kW + 3) / 4;
    f.dw_words.resize(static_cast<std::size_t>(d.M * d.kH * f.taps4));
    for (std::int64_t m = 0; m < d.M; ++m) {
      for (std::int64_t kh = 0; kh < d.kH; ++kh) {
        for (std::int64_t g = 0; g < f.taps4; ++g) {
          std::int32_t b[4] = {0, 0, 0, 0};
          for (std::int64_t j = 0; j < 4 && 4 * g + j < d.kW; ++j) {
            b[j] = weight(m, kh * d.kW + 4 * g + j);
          }
          f.dw_words[static_cast<std::size_t>((m * d.kH + kh) * f.taps4 + g)] = pack4(b);
        }
      }
    }
    for (std::int64_t g = 0; g < f.taps4; ++g) {
      std::int32_t b[4] = {0, 0, 0, 0};
      for (std::int64_t j = 0; j < 4 && 4 * g + j < d.kW; ++j) b[j] = 1;
      f.dw_ones.push_back(pack4(b));
    }
    return plan;
  }
  f.pointwise = d.kH == 1 && d.kW == 1 && d.sh == 1 && d.sw == 1 && d.pt == 0 && d.pl == 0 &&
                d.OH == d.H && d.OW == d.W;
  constexpr std::int64_t MR = fast::kConvMr;
  f.m_blocks = (d.Mg + MR - 1) / MR;
  f.w_packed.assign(static_cast<std::size_t>(p.group * f.m_blocks * f.K4 * MR), 0);
  for (std::int64_t g = 0; g < p.group; ++g) {
    for (std::int64_t mb = 0; mb < f.m_blocks; ++mb) {
      for (std::int64_t k4 = 0; k4 < f.K4; ++k4) {
        bool wide = false;
        for (std::int64_t r = 0; r < MR; ++r) {
          const std::int64_t ml = mb * MR + r;
          if (ml >= d.Mg) continue;
          std::int32_t b[4] = {0, 0, 0, 0};
          for (std::int64_t j = 0; j < 4 && 4 * k4 + j < K; ++j) {
            b[j] = weight(g * d.Mg + ml, 4 * k4 + j);
          }
          wide = wide || std::abs(b[0]) + std::abs(b[1]) > 128 ||
                 std::abs(b[2]) + std::abs(b[3]) > 128;
          f.w_packed[static_cast<std::size_t>(((g * f.m_blocks + mb) * f.K4 + k4) * MR + r)] =
              pack4(b);
        }
        if (wide) ++f.wide_pair_rows;
      }
    }
  }
  const std::int64_t taps = d.kH * d.kW;
  // (At most 1/8 of the words' channel bytes idle: with 3 input channels a quarter of the
  // products would be on stand-in channels, and YOLOv8n's first layer measured 4% slower.)
  if (!f.any_wz && taps > 1 && d.OW > 32 && 8 * d.Cg >= 28 * ((d.Cg + 3) / 4)) {
    f.C4 = (d.Cg + 3) / 4;
    f.K4t = f.C4 * taps;
    f.w_taps.assign(static_cast<std::size_t>(p.group * f.m_blocks * f.K4t * MR), 0);
    for (std::int64_t g = 0; g < p.group; ++g) {
      for (std::int64_t mb = 0; mb < f.m_blocks; ++mb) {
        for (std::int64_t k4 = 0; k4 < f.K4t; ++k4) {
          const std::int64_t c4 = k4 / taps, tap = k4 % taps;
          for (std::int64_t r = 0; r < MR && mb * MR + r < d.Mg; ++r) {
            std::int32_t b[4] = {0, 0, 0, 0};
            for (std::int64_t j = 0; j < 4 && 4 * c4 + j < d.Cg; ++j) {
              b[j] = weight(g * d.Mg + mb * MR + r, (4 * c4 + j) * taps + tap);
            }
            f.w_taps[static_cast<std::size_t>(((g * f.m_blocks + mb) * f.K4t + k4) * MR + r)] =
                pack4(b);
          }
        }
      }
    }
  }
  return plan;
}

// Runs a fast convolution plan on the kernel's tensors with `fk`'s conv; false (nothing
// written) when that level does not handle the plan's shape.
bool conv2d_fast(const fast::Kernels& fk, const fast::ConvPlan& plan, const isa::Kernel& kernel,
                 std::span<std::byte> region) {
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  return fk.conv(plan, fast_input(region, xref, yref), region.data() + yref.address, nullptr);
}

// The convolution into its own output (kernel.outputs[0]).
void conv2d_unfused(const isa::Kernel& kernel, std::span<std::byte> region, bool depthwise,
                    const KernelPlan* prepared) {
  const fast::Kernels* fk = fast_kernels();
  bool try_fast = fk != nullptr && fk->conv != nullptr;
  if (prepared != nullptr && prepared->conv && try_fast) {
    if (conv2d_fast(*fk, *prepared->conv, kernel, region)) return;
    try_fast = false;  // a new plan would be refused too
  }
  const ConvDesc d = validate_conv(kernel, depthwise, Readable{region.data(), region.size()});
  if (try_fast && fast_conv_fits(d) && conv2d_fast(*fk, *make_conv_plan(d), kernel, region)) {
    return;
  }
  conv2d_generic(d, region, kernel);
}

// Whether the bytes of `t` are never read after kernel `skip` (the one reader that is fused):
// walking the later kernels in order, no input reads a byte of `t` that no output of an earlier
// one has written since, and no program output holds such a byte at the end.
bool dead_after(const isa::Program& program, std::size_t skip, const TensorRef& t) {
  struct Range {
    std::uint64_t begin, end;
  };
  std::vector<Range> live{{t.address, t.address + t.size_bytes()}};  // bytes still holding t
  const auto read = [&](const TensorRef& ref) {
    const std::uint64_t b = ref.address, e = ref.address + ref.size_bytes();
    return std::any_of(live.begin(), live.end(),
                       [&](const Range& r) { return b < r.end && r.begin < e && b < e; });
  };
  for (std::size_t k = skip + 1; k < program.kernels.size() && !live.empty(); ++k) {
    const isa::Kernel& kernel = program.kernels[k];
    if (std::any_of(kernel.inputs.begin(), kernel.inputs.end(), read)) return false;
    // The operands in the params (isa.h: a convolution's weight and bias, a matmul's b and bias).
    if (const auto* c = std::get_if<isa::Conv2dParams>(&kernel.params)) {
      if (read(c->weight) || (c->bias && read(*c->bias))) return false;
    } else if (const auto* m = std::get_if<isa::MatMulParams>(&kernel.params)) {
      if (read(m->b) || (m->bias && read(*m->bias))) return false;
    }
    for (const TensorRef& out : kernel.outputs) {  // written over: no longer t's bytes
      const std::uint64_t b = out.address, e = out.address + out.size_bytes();
      std::vector<Range> rest;
      for (const Range& r : live) {
        if (e <= r.begin || r.end <= b) {
          rest.push_back(r);
          continue;
        }
        if (r.begin < b) rest.push_back({r.begin, b});
        if (e < r.end) rest.push_back({e, r.end});
      }
      live = std::move(rest);
    }
  }
  return std::none_of(program.outputs.begin(), program.outputs.end(), read);
}

}  // namespace

std::shared_ptr<const fast::ConvPlan> prepare_conv_plan(
    const isa::Kernel& kernel, const Readable& constants,
    const std::function<bool(const TensorRef&)>& frozen) {
  const ConvDesc d =
      validate_conv(kernel, kernel.kind == isa::KernelKind::DepthwiseConv2d, constants);
  if (!frozen(d.p->weight) || (d.p->bias && !frozen(*d.p->bias)) || !fast_conv_fits(d))
    return nullptr;
  return make_conv_plan(d);
}

std::size_t fuse_conv_requantize(const isa::Program& program,
                                 std::vector<std::unique_ptr<KernelPlan>>& plans) {
  std::size_t fused = 0;
  const auto& kernels = program.kernels;
  for (std::size_t i = 0; i + 1 < kernels.size() && i + 1 < plans.size(); ++i) {
    KernelPlan* plan = plans[i].get();
    const isa::Kernel& conv = kernels[i];
    const isa::Kernel& rq = kernels[i + 1];
    if (plan == nullptr || !plan->conv || plan->conv->depthwise || plans[i + 1] != nullptr ||
        rq.kind != isa::KernelKind::Requantize || conv.outputs.size() != 1 ||
        rq.inputs.size() != 1 || rq.outputs.size() != 1) {
      continue;
    }
    const TensorRef& t = conv.outputs[0];
    const TensorRef& x = rq.inputs[0];
    const TensorRef& y = rq.outputs[0];
    if (x.address != t.address || x.dtype != t.dtype || x.shape != t.shape ||
        x.layout != t.layout || y.shape != t.shape || y.layout != t.layout ||
        !dead_after(program, i + 1, t)) {
      continue;
    }
    host::LookupTable table;
    try {
      table = requantize_table(rq);
    } catch (const Error&) {
      continue;  // malformed: the Requantize reports it when it runs
    }
    plan->post_table = table;
    plan->fused_output = y;
    plans[i + 1] = std::make_unique<KernelPlan>();
    plans[i + 1]->fused_away = true;
    ++fused;
  }
  return fused;
}

// LowLevelConv2d / LowLevelDepthwiseConv2d (QLinearConv).
void conv2d(const isa::Kernel& kernel, std::span<std::byte> region, bool depthwise,
            const KernelPlan* prepared) {
  if (prepared == nullptr || !prepared->post_table) {
    return conv2d_unfused(kernel, region, depthwise, prepared);
  }
  // Fused with the Requantize after it: one pass where the level's kernel takes the table,
  // else the two kernels one after the other (the same bytes either way).
  // With one group and one image the input may lie under the output (fast::conv): no snapshot.
  const TensorRef& y = *prepared->fused_output;
  const fast::Kernels* fk = fast_kernels();
  if (fk != nullptr && fk->conv != nullptr && prepared->conv) {
    const TensorRef& x = kernel.inputs[0];
    const bool whole_input_first = prepared->conv->group == 1 && prepared->conv->N == 1;
    const std::byte* xp = whole_input_first ? region.data() + x.address : fast_input(region, x, y);
    if (fk->conv(*prepared->conv, xp, region.data() + y.address, prepared->post_table->data())) {
      return;
    }
  }
  conv2d_unfused(kernel, region, depthwise, prepared);
  map_through_table(region, kernel.outputs[0], y, *prepared->post_table);
}

}  // namespace furiosa::device::sim::detail
