// CPU operators. Quantize/Dequantize follow the ONNX QuantizeLinear/DequantizeLinear spec:
// y = saturate(round_half_to_even(x / scale) + zero_point), x = (y - zero_point) * scale, with
// per-tensor or per-axis parameters; a Quantize of a TFLite model rounds half away from zero
// instead (TFLite's QUANTIZE uses std::round). Lower/Unlower convert between dense NCHW and the
// lowered layout of isa.h (rows padded to 32 elements); a channels_last Lower reads dense NHWC
// (a TFLite image input) and transposes while lowering.
#include "cpu_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "furiosa/core/error.h"

namespace furiosa::runtime::detail {
namespace {

// Index of the quantization parameter for element i (per-axis when several are given).
struct AxisIndexer {
  std::int64_t inner = 1, dim = 1;
  bool per_axis = false;
  AxisIndexer(const compiler::CpuOp& op, const Shape& shape) {
    per_axis = op.scales.size() > 1;
    if (!per_axis) return;
    dim = shape[static_cast<std::size_t>(op.axis)];
    for (std::size_t d = static_cast<std::size_t>(op.axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  }
  std::size_t operator()(std::int64_t i) const {
    return per_axis ? static_cast<std::size_t>((i / inner) % dim) : 0;
  }
};

// Adding and subtracting 1.5 * 2^23 rounds a float of magnitude below 2^22 to the nearest
// integer, ties to even, in the default rounding mode: the same result as std::nearbyint
// without a libm call per element, so the loop stays branch-free and the compiler can
// vectorize it.
constexpr float kRoundMagic = 12582912.0f;

// Rounds v (|v| < 2^22) to an integer: half to even (ONNX QuantizeLinear, std::nearbyint) by
// kRoundMagic, or half away from zero (TFLite QUANTIZE, std::round) from the exact fraction
// v - trunc(v). Both are branch-free.
template <bool kAwayFromZero>
inline float round_quantized(float v) {
  if constexpr (kAwayFromZero) {
    const float t = std::trunc(v);
    const float frac = v - t;
    return t + (frac >= 0.5f ? 1.0f : 0.0f) - (frac <= -0.5f ? 1.0f : 0.0f);
  } else {
    return (v + kRoundMagic) - kRoundMagic;
  }
}

// Quantizes n contiguous elements with one scale and zero point. Clamping x / scale to the
// integer bounds [lo, hi] before rounding gives the same result as rounding and then
// saturating (the bounds are integers), keeps the value small enough for round_quantized, and
// maps NaN to lo (as std::fmax does in the saturating form).
// Cloned for x86-64-v4 (AVX-512) and AVX2 hosts (picked at load time by the CPU), so the
// division and the clamps run 16 or 8 lanes wide; each clone computes the same IEEE float
// operations.
// Sanitizer builds compile one plain version: the clones' ifunc resolver runs while the dynamic
// loader relocates, before the sanitizer runtime is initialized, and instrumented it crashes.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define FURIOSA_QUANTIZE_CLONES
#else
#define FURIOSA_QUANTIZE_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
template <class Q, bool kAwayFromZero>
FURIOSA_QUANTIZE_CLONES void quantize_block(
    const float* x, Q* y, std::int64_t n, float scale, std::int32_t zero_point,
    const std::array<std::int32_t, 2>& range) {
  const float lo = static_cast<float>(range[0] - zero_point);
  const float hi = static_cast<float>(range[1] - zero_point);
  for (std::int64_t i = 0; i < n; ++i) {
    float v = x[i] / scale;
    v = v > lo ? v : lo;
    v = v < hi ? v : hi;
    y[i] = static_cast<Q>(static_cast<std::int32_t>(round_quantized<kAwayFromZero>(v)) + zero_point);
  }
}

template <class Q>
void quantize(const compiler::CpuOp& op, const Shape& shape, const float* x, Q* y) {
  const auto range = isa::quant_range(std::is_same_v<Q, std::uint8_t> ? DType::UInt8 : DType::Int8);
  const AxisIndexer idx(op, shape);
  const std::int64_t n = element_count(shape);
  const std::int64_t block = idx.per_axis ? idx.inner : n;
  for (std::int64_t i = 0; i < n; i += block) {
    const std::size_t c = idx(i);
    if (op.round_half_away_from_zero) {
      quantize_block<Q, true>(x + i, y + i, std::min(block, n - i), op.scales[c], op.zero_points[c], range);
    } else {
      quantize_block<Q, false>(x + i, y + i, std::min(block, n - i), op.scales[c], op.zero_points[c], range);
    }
  }
}

template <class Q>
void dequantize(const compiler::CpuOp& op, const Shape& shape, const Q* x, float* y) {
  const AxisIndexer idx(op, shape);
  const std::int64_t n = element_count(shape);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::size_t c = idx(i);
    y[i] = static_cast<float>(static_cast<std::int32_t>(x[i]) - op.zero_points[c]) * op.scales[c];
  }
}

// Copies rows of width w between dense (stride w) and lowered (stride padded_width(w)) buffers.
void relayout(const Shape& s, std::size_t es, std::span<const std::byte> in, std::span<std::byte> out,
              bool to_lowered) {
  const std::int64_t rows = s[0] * s[1] * s[2], w = s[3], wp = isa::padded_width(w);
  const std::size_t in_stride = static_cast<std::size_t>(to_lowered ? w : wp) * es;
  const std::size_t out_stride = static_cast<std::size_t>(to_lowered ? wp : w) * es;
  const std::size_t row = static_cast<std::size_t>(w) * es;
  if (to_lowered) std::memset(out.data(), 0, out.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + static_cast<std::size_t>(r) * out_stride,
                in.data() + static_cast<std::size_t>(r) * in_stride, row);
  }
}

// Dense NHWC [N, H, W, C] -> LoweredNCHW [N, C, H, W] (row padding zeroed), elements of `es`
// bytes: a transpose fused into the Lower step.
void lower_nhwc(const Shape& nhwc, std::size_t es, std::span<const std::byte> in, std::span<std::byte> out) {
  const std::int64_t N = nhwc[0], H = nhwc[1], W = nhwc[2], C = nhwc[3], wp = isa::padded_width(W);
  std::memset(out.data(), 0, out.size());
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t c = 0; c < C; ++c) {
      for (std::int64_t h = 0; h < H; ++h) {
        std::byte* dst = out.data() + static_cast<std::size_t>(((n * C + c) * H + h) * wp) * es;
        const std::byte* src = in.data() + static_cast<std::size_t>(((n * H + h) * W) * C + c) * es;
        if (es == 1) {
          for (std::int64_t w = 0; w < W; ++w) dst[w] = src[w * C];
        } else {
          for (std::int64_t w = 0; w < W; ++w) {
            std::memcpy(dst + static_cast<std::size_t>(w) * es, src + static_cast<std::size_t>(w * C) * es, es);
          }
        }
      }
    }
  }
}

}  // namespace

void run_cpu_op(const compiler::CpuOp& op, const compiler::HostSlot& in_slot,
                std::span<const std::byte> in, const compiler::HostSlot& out_slot,
                std::span<std::byte> out) {
  const Shape& s = in_slot.shape;
  switch (op.kind) {
    case compiler::CpuOpKind::Quantize: {
      const auto* x = reinterpret_cast<const float*>(in.data());
      if (out_slot.dtype == DType::UInt8) quantize(op, s, x, reinterpret_cast<std::uint8_t*>(out.data()));
      else if (out_slot.dtype == DType::Int8) quantize(op, s, x, reinterpret_cast<std::int8_t*>(out.data()));
      else throw Error(ErrorCode::Internal, "Quantize: output must be uint8 or int8");
      return;
    }
    case compiler::CpuOpKind::Dequantize: {
      auto* y = reinterpret_cast<float*>(out.data());
      switch (in_slot.dtype) {
        case DType::UInt8: dequantize(op, s, reinterpret_cast<const std::uint8_t*>(in.data()), y); return;
        case DType::Int8: dequantize(op, s, reinterpret_cast<const std::int8_t*>(in.data()), y); return;
        case DType::Int32: dequantize(op, s, reinterpret_cast<const std::int32_t*>(in.data()), y); return;
        default: throw Error(ErrorCode::Internal, "Dequantize: input must be uint8, int8 or int32");
      }
    }
    case compiler::CpuOpKind::Lower:
      if (op.channels_last) {
        if (s.size() != 4 || out_slot.shape != Shape{s[0], s[3], s[1], s[2]}) {
          throw Error(ErrorCode::Internal, "Lower: an NHWC input must be 4-D and the output its NCHW transpose");
        }
        lower_nhwc(s, dtype_size(in_slot.dtype), in, out);
        return;
      }
      relayout(s, dtype_size(in_slot.dtype), in, out, true);
      return;
    case compiler::CpuOpKind::Unlower:
      relayout(s, dtype_size(in_slot.dtype), in, out, false);
      return;
    case compiler::CpuOpKind::External:
      throw Error(ErrorCode::Internal, "external operators run through compiler::run_cpu_op");
  }
}

}  // namespace furiosa::runtime::detail
