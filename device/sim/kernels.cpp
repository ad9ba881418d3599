// The simulator's functional kernels. Each one validates its kernel description first (every
// tensor inside the region, dtypes, layouts, shapes, parameters) and throws Error(DeviceFault)
// on a malformed kernel, so a bad program fails its fence instead of touching memory it does not
// own. Arithmetic follows the ONNX quantized operators (see isa.h): int32 accumulation of
// (x - x_zp) * (w - w_zp) plus the int32 bias, float multiplier, round half to even, saturation.
//
// The int32 accumulation wraps around on overflow like the hardware's adders; it is done in
// uint32 so that the wrap is well defined C++. Operands minus zero points are widened to int16
// once per kernel so the inner loops are plain int16 x int16 -> int32 multiply-adds.
#include "kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "furiosa/device/error.h"

namespace furiosa::device::sim {

namespace {

using isa::Layout;
using isa::TensorRef;

// Throws Error(DeviceFault) with a formatted message.
template <class... Args>
[[noreturn]] void fault(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(ErrorCode::DeviceFault, fmt::format(format, std::forward<Args>(args)...));
}

// "input 0 [1, 3, 8, 8] uint8 lowered_nchw at 0x40", for messages.
std::string describe(std::string_view role, const TensorRef& ref) {
  return fmt::format("{} {} {} {} at 0x{:x}", role, shape_to_string(ref.shape),
                     dtype_name(ref.dtype), isa::layout_name(ref.layout), ref.address);
}

// Checks that `ref` is well formed and lies inside `region`; returns its first byte.
std::byte* locate(std::span<std::byte> region, const TensorRef& ref, std::string_view role) {
  for (std::int64_t d : ref.shape) {
    if (d < 0) fault("{} has a negative dimension", describe(role, ref));
  }
  if (ref.layout == Layout::LoweredNCHW && ref.shape.size() != 4) {
    fault("{} is lowered_nchw but not of rank 4", describe(role, ref));
  }
  const std::uint64_t size = ref.size_bytes();
  if (ref.address > region.size() || size > region.size() - ref.address) {
    fault("{} (+{} bytes) lies outside the program region of {} bytes", describe(role, ref), size,
          region.size());
  }
  return region.data() + ref.address;
}

bool is_8bit(DType dtype) { return dtype == DType::UInt8 || dtype == DType::Int8; }

// Throws unless `ref` holds uint8 or int8 elements.
void require_8bit(const TensorRef& ref, std::string_view role) {
  if (!is_8bit(ref.dtype)) fault("{} must be uint8 or int8", describe(role, ref));
}

// Throws unless `ref` is in the Linear layout.
void require_linear(const TensorRef& ref, std::string_view role) {
  if (ref.layout != Layout::Linear) fault("{} must be linear", describe(role, ref));
}

// Throws unless the kernel has exactly the given numbers of inputs and outputs.
void require_arity(const isa::Kernel& kernel, std::size_t inputs, std::size_t outputs) {
  if (kernel.inputs.size() != inputs || kernel.outputs.size() != outputs) {
    fault("expects {} input(s) and {} output(s) but has {} and {}", inputs, outputs,
          kernel.inputs.size(), kernel.outputs.size());
  }
}

// The kernel's parameters as P; throws when the kernel carries another kind's parameters.
template <class P>
const P& params_of(const isa::Kernel& kernel) {
  const P* p = std::get_if<P>(&kernel.params);
  if (p == nullptr)
    fault("parameters (variant index {}) do not match the kernel kind", kernel.params.index());
  return *p;
}

// Throws unless `scale` is a usable quantization scale (finite and > 0).
void require_scale(float scale, std::string_view what) {
  if (!(scale > 0.0f) || !std::isfinite(scale))
    fault("{} {} is not a positive finite scale", what, scale);
}

// Throws unless `zero_point` lies in the range of `dtype`.
void require_zero_point(std::int32_t zero_point, DType dtype, std::string_view what) {
  const auto [lo, hi] = isa::quant_range(dtype);
  if (zero_point < lo || zero_point > hi) {
    fault("{} {} is outside the {} range [{}, {}]", what, zero_point, dtype_name(dtype), lo, hi);
  }
}

// Throws unless a per-tensor / per-channel vector has size 1 or `channels`.
void require_per_channel_size(std::size_t size, std::int64_t channels, std::string_view what) {
  if (size != 1 && static_cast<std::int64_t>(size) != channels) {
    fault("{} has {} values; expected 1 or {}", what, size, channels);
  }
}

// Reads one uint8 (or int8 when `is_signed`) element as int32. Storage is read as unsigned char
// and converted, which is well defined for any byte value.
inline std::int32_t load8(const std::byte* p, bool is_signed) {
  const auto u = std::to_integer<std::uint8_t>(*p);
  return is_signed ? static_cast<std::int32_t>(static_cast<std::int8_t>(u))
                   : static_cast<std::int32_t>(u);
}

// Writes an int32 already saturated to the 8-bit range (two's complement for int8).
inline void store8(std::byte* p, std::int32_t v) {
  *p = static_cast<std::byte>(static_cast<std::uint8_t>(v));
}

// A rank-4 NCHW tensor in the region, Linear or LoweredNCHW: rows of `w` elements `pitch`
// elements apart (pitch == w for Linear, padded_width(w) for LoweredNCHW).
struct Act4 {
  std::byte* base = nullptr;
  DType dtype = DType::UInt8;
  std::int64_t n = 0, c = 0, h = 0, w = 0, pitch = 0;
  std::size_t esize = 1;

  bool is_signed() const { return dtype == DType::Int8; }
  // First byte of row (in, ic, ih).
  std::byte* row(std::int64_t in, std::int64_t ic, std::int64_t ih) const {
    return base + static_cast<std::size_t>(((in * c + ic) * h + ih) * pitch) * esize;
  }
  // Zeroes the padding after the `w` elements of a row, so lowered outputs are fully defined.
  void clear_padding(std::byte* row_start) const {
    if (pitch > w) {
      std::memset(row_start + static_cast<std::size_t>(w) * esize, 0,
                  static_cast<std::size_t>(pitch - w) * esize);
    }
  }
};

// Locates a rank-4 activation (either layout).
Act4 activation(std::span<std::byte> region, const TensorRef& ref, std::string_view role) {
  std::byte* base = locate(region, ref, role);
  if (ref.shape.size() != 4) fault("{} must be of rank 4 (NCHW)", describe(role, ref));
  Act4 a;
  a.base = base;
  a.dtype = ref.dtype;
  a.n = ref.shape[0];
  a.c = ref.shape[1];
  a.h = ref.shape[2];
  a.w = ref.shape[3];
  a.pitch = ref.layout == Layout::LoweredNCHW ? isa::padded_width(a.w) : a.w;
  a.esize = dtype_size(ref.dtype);
  return a;
}

// Output positions o in [0, out) whose input position o * stride + offset lies in [0, in),
// as a half-open range [lo, hi) (empty when lo == hi). stride >= 1.
std::pair<std::int64_t, std::int64_t> valid_range(std::int64_t out, std::int64_t stride,
                                                  std::int64_t offset, std::int64_t in) {
  std::int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  std::int64_t hi = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
  return {lo, hi};
}

// Throws unless window parameters are usable: strides and dilations >= 1, pads >= 0.
void require_window(const std::array<std::int64_t, 4>& pads,
                    const std::array<std::int64_t, 2>& strides,
                    const std::array<std::int64_t, 2>& dilations) {
  for (std::int64_t s : strides) {
    if (s < 1) fault("stride {} must be >= 1", s);
  }
  for (std::int64_t d : dilations) {
    if (d < 1) fault("dilation {} must be >= 1", d);
  }
  for (std::int64_t p : pads) {
    if (p < 0) fault("pad {} must be >= 0", p);
  }
}

/// Inner-loop block width: fixed-size blocks are unrolled and vectorized by the compiler.
constexpr std::int64_t kBlock = 16;

// LowLevelConv2d / LowLevelDepthwiseConv2d (QLinearConv).
void conv2d(const isa::Kernel& kernel, std::span<std::byte> region, bool depthwise) {
  const auto& p = params_of<isa::Conv2dParams>(kernel);
  require_arity(kernel, 1, 1);
  const Act4 x = activation(region, kernel.inputs[0], "input 0");
  const Act4 y = activation(region, kernel.outputs[0], "output 0");
  require_8bit(kernel.inputs[0], "input 0");
  require_8bit(kernel.outputs[0], "output 0");
  const std::int64_t N = x.n, C = x.c, H = x.h, W = x.w;
  const std::int64_t M = y.c, OH = y.h, OW = y.w;
  if (y.n != N) fault("output batch {} differs from input batch {}", y.n, N);
  if (p.group < 1 || C % p.group != 0 || M % p.group != 0) {
    fault("group {} must divide the input channels {} and output channels {}", p.group, C, M);
  }
  if (depthwise && p.group != C)
    fault("depthwise convolution needs group == C, got group {} and C {}", p.group, C);
  const std::int64_t Cg = C / p.group, Mg = M / p.group;

  const TensorRef& wref = p.weight;
  const std::byte* wptr = locate(region, wref, "weight");
  require_linear(wref, "weight");
  require_8bit(wref, "weight");
  if (wref.shape.size() != 4 || wref.shape[0] != M || wref.shape[1] != Cg || wref.shape[2] < 1 ||
      wref.shape[3] < 1) {
    fault("{} must have shape [{}, {}, kH, kW]", describe("weight", wref), M, Cg);
  }
  const std::int64_t kH = wref.shape[2], kW = wref.shape[3];
  require_window(p.pads, p.strides, p.dilations);
  const std::int64_t pt = p.pads[0], pl = p.pads[1];
  const std::int64_t sh = p.strides[0], sw = p.strides[1];
  const std::int64_t dh = p.dilations[0], dw = p.dilations[1];

  require_per_channel_size(p.w_scale.size(), M, "w_scale");
  require_per_channel_size(p.w_zero_point.size(), M, "w_zero_point");
  require_scale(p.x.scale, "x_scale");
  require_scale(p.y.scale, "y_scale");
  for (float s : p.w_scale) require_scale(s, "w_scale");
  require_zero_point(p.x.zero_point, x.dtype, "x_zero_point");
  require_zero_point(p.y.zero_point, y.dtype, "y_zero_point");
  for (std::int32_t zp : p.w_zero_point) require_zero_point(zp, wref.dtype, "w_zero_point");

  // Bias (int32, wrapped into the uint32 accumulator) and float multiplier per output channel.
  std::vector<std::uint32_t> bias(static_cast<std::size_t>(M), 0);
  if (p.bias) {
    const std::byte* bptr = locate(region, *p.bias, "bias");
    require_linear(*p.bias, "bias");
    if (p.bias->dtype != DType::Int32 || p.bias->shape != Shape{M}) {
      fault("{} must be int32 of shape [{}]", describe("bias", *p.bias), M);
    }
    for (std::int64_t m = 0; m < M; ++m) {
      std::int32_t b;
      std::memcpy(&b, bptr + m * 4, 4);
      bias[static_cast<std::size_t>(m)] = static_cast<std::uint32_t>(b);
    }
  }
  std::vector<float> mult(static_cast<std::size_t>(M));
  for (std::int64_t m = 0; m < M; ++m) {
    const float w_scale = p.w_scale[p.w_scale.size() == 1 ? 0 : static_cast<std::size_t>(m)];
    const float value = (p.x.scale * w_scale) / p.y.scale;
    if (!std::isfinite(value)) fault("requantization multiplier of channel {} is not finite", m);
    mult[static_cast<std::size_t>(m)] = value;
  }

  // Weights minus their zero points, [M][Cg][kH][kW].
  const std::int64_t wblock = Cg * kH * kW;
  std::vector<std::int16_t> wq(static_cast<std::size_t>(M * wblock));
  const bool w_signed = wref.dtype == DType::Int8;
  for (std::int64_t m = 0; m < M; ++m) {
    const std::int32_t zp =
        p.w_zero_point[p.w_zero_point.size() == 1 ? 0 : static_cast<std::size_t>(m)];
    for (std::int64_t i = m * wblock; i < (m + 1) * wblock; ++i) {
      wq[static_cast<std::size_t>(i)] = static_cast<std::int16_t>(load8(wptr + i, w_signed) - zp);
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

// LowLevelMaxPool: window maximum over the valid (non-pad) positions.
void maxpool(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::MaxPoolParams>(kernel);
  require_arity(kernel, 1, 1);
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

// LowLevelMatMul (QLinearMatMul with constant B, per-column quantization of B).
void matmul(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::MatMulParams>(kernel);
  require_arity(kernel, 1, 1);
  const TensorRef& aref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  const std::byte* aptr = locate(region, aref, "input 0");
  std::byte* yptr = locate(region, yref, "output 0");
  const std::byte* bptr = locate(region, p.b, "b");
  for (const auto& [ref, role] :
       {std::pair{&aref, "input 0"}, std::pair{&yref, "output 0"}, std::pair{&p.b, "b"}}) {
    require_linear(*ref, role);
    require_8bit(*ref, role);
  }
  const std::size_t rank = aref.shape.size();
  if (rank < 2) fault("{} must be of rank >= 2", describe("input 0", aref));
  if (p.b.shape.size() != 2) fault("{} must be of rank 2", describe("b", p.b));
  const std::int64_t M = aref.shape[rank - 2], K = aref.shape[rank - 1], N = p.b.shape[1];
  if (p.b.shape[0] != K) fault("{} must have {} rows (K of input 0)", describe("b", p.b), K);
  Shape expected(aref.shape.begin(), aref.shape.end() - 1);
  expected.push_back(N);
  if (yref.shape != expected) {
    fault("{} must have shape {}", describe("output 0", yref), shape_to_string(expected));
  }
  require_per_channel_size(p.b_scale.size(), N, "b_scale");
  require_per_channel_size(p.b_zero_point.size(), N, "b_zero_point");
  require_scale(p.a.scale, "a_scale");
  require_scale(p.y.scale, "y_scale");
  for (float s : p.b_scale) require_scale(s, "b_scale");
  require_zero_point(p.a.zero_point, aref.dtype, "a_zero_point");
  require_zero_point(p.y.zero_point, yref.dtype, "y_zero_point");
  for (std::int32_t zp : p.b_zero_point) require_zero_point(zp, p.b.dtype, "b_zero_point");

  // B minus its zero points, transposed to [N][K] so the dot products run over contiguous K.
  std::vector<std::int16_t> bq(static_cast<std::size_t>(N * K));
  std::vector<float> mult(static_cast<std::size_t>(N));
  const bool b_signed = p.b.dtype == DType::Int8;
  for (std::int64_t n = 0; n < N; ++n) {
    const std::size_t pick = p.b_zero_point.size() == 1 ? 0 : static_cast<std::size_t>(n);
    const std::int32_t zp = p.b_zero_point[pick];
    for (std::int64_t k = 0; k < K; ++k) {
      bq[static_cast<std::size_t>(n * K + k)] =
          static_cast<std::int16_t>(load8(bptr + k * N + n, b_signed) - zp);
    }
    const float b_scale = p.b_scale[p.b_scale.size() == 1 ? 0 : static_cast<std::size_t>(n)];
    const float value = (p.a.scale * b_scale) / p.y.scale;
    if (!std::isfinite(value)) fault("requantization multiplier of column {} is not finite", n);
    mult[static_cast<std::size_t>(n)] = value;
  }

  std::int64_t batch = 1;
  for (std::size_t i = 0; i + 2 < rank; ++i) batch *= aref.shape[i];
  const bool a_signed = aref.dtype == DType::Int8;
  const auto [qmin, qmax] = isa::quant_range(yref.dtype);
  std::vector<std::int16_t> aq(static_cast<std::size_t>(K));
  for (std::int64_t row = 0; row < batch * M; ++row) {
    const std::byte* arow = aptr + row * K;
    for (std::int64_t k = 0; k < K; ++k) {
      aq[static_cast<std::size_t>(k)] =
          static_cast<std::int16_t>(load8(arow + k, a_signed) - p.a.zero_point);
    }
    std::byte* yrow = yptr + row * N;
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int16_t* bn = bq.data() + n * K;
      std::uint32_t acc = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        acc += static_cast<std::uint32_t>(std::int32_t{aq[static_cast<std::size_t>(k)]} * bn[k]);
      }
      store8(yrow + n,
             isa::requantize(static_cast<std::int32_t>(acc), mult[static_cast<std::size_t>(n)],
                             p.y.zero_point, qmin, qmax));
    }
  }
}

// Element strides of `ref` in its layout; broadcast dims (1 where `out` is larger) get 0.
std::vector<std::int64_t> broadcast_strides(const TensorRef& ref, const Shape& out) {
  std::vector<std::int64_t> strides;
  if (ref.layout == Layout::LoweredNCHW) {
    const std::int64_t wp = isa::padded_width(ref.shape[3]);
    strides = {ref.shape[1] * ref.shape[2] * wp, ref.shape[2] * wp, wp, 1};
  } else {
    strides = contiguous_strides(ref.shape);
  }
  for (std::size_t d = 0; d < out.size(); ++d) {
    if (ref.shape[d] != out[d]) strides[d] = 0;  // a broadcast dim of size 1
  }
  return strides;
}

// LowLevelAdd (com.microsoft QLinearAdd) with numpy-style broadcasting of equal-rank operands.
void add(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::AddParams>(kernel);
  require_arity(kernel, 2, 1);
  const TensorRef& aref = kernel.inputs[0];
  const TensorRef& bref = kernel.inputs[1];
  const TensorRef& yref = kernel.outputs[0];
  const std::byte* aptr = locate(region, aref, "input 0");
  const std::byte* bptr = locate(region, bref, "input 1");
  std::byte* yptr = locate(region, yref, "output 0");
  require_8bit(aref, "input 0");
  require_8bit(bref, "input 1");
  require_8bit(yref, "output 0");
  const Shape& out = yref.shape;
  for (const auto& [ref, role] : {std::pair{&aref, "input 0"}, std::pair{&bref, "input 1"}}) {
    bool ok = ref->shape.size() == out.size();
    for (std::size_t d = 0; ok && d < out.size(); ++d) {
      ok = ref->shape[d] == out[d] || ref->shape[d] == 1;
    }
    if (!ok) {
      fault("{} does not broadcast to the output shape {}", describe(role, *ref),
            shape_to_string(out));
    }
  }
  require_scale(p.a.scale, "a_scale");
  require_scale(p.b.scale, "b_scale");
  require_scale(p.y.scale, "y_scale");
  require_zero_point(p.a.zero_point, aref.dtype, "a_zero_point");
  require_zero_point(p.b.zero_point, bref.dtype, "b_zero_point");
  require_zero_point(p.y.zero_point, yref.dtype, "y_zero_point");
  if (element_count(out) == 0) return;

  std::vector<std::int64_t> sa = broadcast_strides(aref, out);
  std::vector<std::int64_t> sb = broadcast_strides(bref, out);
  std::vector<std::int64_t> sy = broadcast_strides(yref, out);
  Shape dims = out;
  if (dims.empty()) {  // a scalar: one element
    dims = {1};
    sa = sb = sy = {0};
  }
  const std::size_t outer_rank = dims.size() - 1;
  const std::int64_t inner = dims.back();
  const std::int64_t ia = sa.back(), ib = sb.back(), iy = sy.back();
  const bool a_signed = aref.dtype == DType::Int8, b_signed = bref.dtype == DType::Int8;
  const bool y_lowered = yref.layout == Layout::LoweredNCHW;
  const std::int64_t y_pad = y_lowered ? isa::padded_width(inner) - inner : 0;
  const auto [qmin, qmax] = isa::quant_range(yref.dtype);

  std::vector<std::int64_t> index(outer_rank, 0);  // odometer over all dims but the last
  for (;;) {
    std::int64_t oa = 0, ob = 0, oy = 0;
    for (std::size_t d = 0; d < outer_rank; ++d) {
      oa += index[d] * sa[d];
      ob += index[d] * sb[d];
      oy += index[d] * sy[d];
    }
    const std::byte* pa = aptr + oa;
    const std::byte* pb = bptr + ob;
    std::byte* py = yptr + oy;
    for (std::int64_t i = 0; i < inner; ++i) {
      store8(py + i * iy, qlinear_add(load8(pa + i * ia, a_signed), p.a,
                                      load8(pb + i * ib, b_signed), p.b, p.y, qmin, qmax));
    }
    if (y_pad > 0) std::memset(py + inner, 0, static_cast<std::size_t>(y_pad));
    std::size_t d = outer_rank;
    while (d > 0 && ++index[d - 1] == dims[d - 1]) index[--d] = 0;
    if (d == 0) break;
  }
}

// LowLevelReshape: logical row-major copy from any layout into a Linear output.
void reshape(const isa::Kernel& kernel, std::span<std::byte> region) {
  params_of<isa::ReshapeParams>(kernel);
  require_arity(kernel, 1, 1);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  const std::byte* xptr = locate(region, xref, "input 0");
  std::byte* yptr = locate(region, yref, "output 0");
  require_linear(yref, "output 0");
  if (xref.dtype != yref.dtype) fault("{} must have the input's dtype", describe("output 0", yref));
  if (element_count(xref.shape) != element_count(yref.shape)) {
    fault("{} and {} hold different element counts", describe("input 0", xref),
          describe("output 0", yref));
  }
  const std::size_t esize = dtype_size(xref.dtype);
  if (xref.layout == Layout::Linear) {
    std::memmove(yptr, xptr, static_cast<std::size_t>(xref.size_bytes()));
    return;
  }
  // Lowered rows are W elements Wp apart; output rows are packed. Copying rows in increasing
  // order is safe even in place, because output row r never starts after input row r.
  const std::int64_t rows = xref.shape[0] * xref.shape[1] * xref.shape[2];
  const auto row_bytes = static_cast<std::size_t>(xref.shape[3]) * esize;
  const auto pitch_bytes = static_cast<std::size_t>(isa::padded_width(xref.shape[3])) * esize;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::memmove(yptr + static_cast<std::size_t>(r) * row_bytes,
                 xptr + static_cast<std::size_t>(r) * pitch_bytes, row_bytes);
  }
}

}  // namespace

void run_kernel(const isa::Kernel& kernel, std::span<std::byte> region) {
  switch (kernel.kind) {
    case isa::KernelKind::Conv2d: return conv2d(kernel, region, false);
    case isa::KernelKind::DepthwiseConv2d: return conv2d(kernel, region, true);
    case isa::KernelKind::MaxPool: return maxpool(kernel, region);
    case isa::KernelKind::MatMul: return matmul(kernel, region);
    case isa::KernelKind::Add: return add(kernel, region);
    case isa::KernelKind::Reshape: return reshape(kernel, region);
  }
  fault("unknown kernel kind {}", static_cast<int>(kernel.kind));
}

}  // namespace furiosa::device::sim
