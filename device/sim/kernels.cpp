// The simulator's functional kernels. Each one validates its kernel description first (every
// tensor inside the region, dtypes, layouts, shapes, parameters) and throws Error(DeviceFault)
// on a malformed kernel, so a bad program fails its fence instead of touching memory it does not
// own. Arithmetic follows the ONNX quantized operators (see isa.h): int32 accumulation of
// (x - x_zp) * (w - w_zp) plus the int32 bias, float multiplier, round half to even, saturation.
//
// The int32 accumulation wraps around on overflow like the hardware's adders; it is done in
// uint32 so that the wrap is well defined C++. Operands minus zero points are widened to int16
// once per kernel so the inner loops are plain int16 x int16 -> int32 multiply-adds.
//
// Fast kernels. At an ISA level above portable (FURIOSA_SIM_ISA, the CPU: fast::kernels_for),
// Conv2d / DepthwiseConv2d, MatMul, Add, MaxPool and the byte copies of the data-movement
// kernels run the level's vectorized kernels (fast_kernels.h) where it has them, with
// bit-identical results (the portable code below stays the reference and the fallback;
// set_fast_kernels_enabled and set_fast_kernels_level switch). Conv and
// matmul weights are packed into the fast kernels' layout by a plan (fast::ConvPlan /
// fast::MatMulPlan): once per program by prepare_program() when the simulator loads it, or per
// call for kernels run without a PreparedProgram. An input that overlaps the kernel's output is
// read from a per-thread snapshot, as if read completely before the output is written.
//
// Kernels with the fixed-point requantization rule (a `fixed_point` value in their params, isa.h;
// TFLite models) and matmuls with a bias run on the portable code only: prepare_program makes no
// plan for them and the per-call fast path is skipped (fast_conv_fits / fast_matmul_fits /
// add()'s fast_add are false for them), so their results never depend on the CPU.
#include "kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "fast_kernels.h"
#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "furiosa/device/sim.h"
#include "furiosa/host/cpu_ops.h"
#include "furiosa/host/lookup_table.h"

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

// Checks that `ref` is well formed and lies inside a region of `region_size` bytes.
void check_located(std::uint64_t region_size, const TensorRef& ref, std::string_view role) {
  for (std::int64_t d : ref.shape) {
    if (d < 0) fault("{} has a negative dimension", describe(role, ref));
  }
  if (ref.layout == Layout::LoweredNCHW && ref.shape.size() != 4) {
    fault("{} is lowered_nchw but not of rank 4", describe(role, ref));
  }
  const std::uint64_t size = ref.size_bytes();
  if (ref.address > region_size || size > region_size - ref.address) {
    fault("{} (+{} bytes) lies outside the program region of {} bytes", describe(role, ref), size,
          region_size);
  }
}

// Checks that `ref` is well formed and lies inside `region`; returns its first byte.
std::byte* locate(std::span<std::byte> region, const TensorRef& ref, std::string_view role) {
  check_located(region.size(), ref, role);
  return region.data() + ref.address;
}

// What a kernel's validation reads constant operands (weights, bias) from: the program's
// region when it runs, or only the program's constants when it is prepared at load. A constant
// operand outside `size` is NotResident (the kernel is then prepared when it runs).
struct Readable {
  const std::byte* data = nullptr;
  std::uint64_t size = 0;
};
struct NotResident {};

const std::byte* read_at(const Readable& mem, const TensorRef& ref) {
  const std::uint64_t size = ref.size_bytes();
  if (ref.address > mem.size || size > mem.size - ref.address) throw NotResident{};
  return mem.data + ref.address;
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

// Throws unless `m` is a valid fixed-point multiplier (isa::QuantizedMultiplier's domain).
void require_multiplier(const isa::QuantizedMultiplier& m, std::string_view what) {
  const bool significand_ok = m.multiplier == 0 || m.multiplier >= (std::int32_t{1} << 30);
  if (!significand_ok || m.shift < -31 || m.shift > 30) {
    fault("{} (multiplier {}, shift {}) is not a fixed-point multiplier: multiplier must be 0 or in "
          "[2^30, 2^31), shift in [-31, 30]", what, m.multiplier, m.shift);
  }
}

// Throws unless [out_min, out_max] is a non-empty range inside `dtype`'s range.
void require_output_range(std::int32_t out_min, std::int32_t out_max, DType dtype) {
  const auto [lo, hi] = isa::quant_range(dtype);
  if (out_min < lo || out_max > hi || out_min > out_max) {
    fault("output range [{}, {}] must be a non-empty range inside the {} range [{}, {}]", out_min,
          out_max, dtype_name(dtype), lo, hi);
  }
}

// Validates a FixedPointRequant of a kernel with `channels` output channels and output `dtype`.
void require_fixed_point(const isa::FixedPointRequant& f, std::int64_t channels, DType dtype) {
  if (f.multipliers.empty()) fault("fixed-point requantization has no multipliers");
  require_per_channel_size(f.multipliers.size(), channels, "fixed-point multipliers");
  for (std::size_t i = 0; i < f.multipliers.size(); ++i) {
    require_multiplier(f.multipliers[i], fmt::format("fixed-point multiplier {}", i));
  }
  require_output_range(f.out_min, f.out_max, dtype);
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

// Checks a rank-4 activation (either layout) inside a region of `region_size` bytes; the
// result's base is null.
Act4 activation_shape(std::uint64_t region_size, const TensorRef& ref, std::string_view role) {
  check_located(region_size, ref, role);
  if (ref.shape.size() != 4) fault("{} must be of rank 4 (NCHW)", describe(role, ref));
  Act4 a;
  a.dtype = ref.dtype;
  a.n = ref.shape[0];
  a.c = ref.shape[1];
  a.h = ref.shape[2];
  a.w = ref.shape[3];
  a.pitch = ref.layout == Layout::LoweredNCHW ? isa::padded_width(a.w) : a.w;
  a.esize = dtype_size(ref.dtype);
  return a;
}

// Locates a rank-4 activation (either layout).
Act4 activation(std::span<std::byte> region, const TensorRef& ref, std::string_view role) {
  Act4 a = activation_shape(region.size(), ref, role);
  a.base = region.data() + ref.address;
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

// True when the bytes of the two (located) tensors overlap.
bool overlaps(const TensorRef& a, const TensorRef& b) {
  const std::uint64_t sa = a.size_bytes(), sb = b.size_bytes();
  return sa > 0 && sb > 0 && a.address < b.address + sb && b.address < a.address + sa;
}

// Switch of the fast kernels (kernels.h: set_fast_kernels_enabled).
std::atomic<bool> g_fast_enabled{true};
// The level forced by set_fast_kernels_level (Auto: none, the environment's applies).
std::atomic<SimIsa> g_forced_level{SimIsa::Auto};

// The kernel table of FURIOSA_SIM_ISA's level, read once (null: portable). A value that does
// not parse, or names a level this CPU lacks, keeps the portable kernels here;
// sim_config_from_environment reports it as an error.
const fast::Kernels* environment_kernels() noexcept {
  static const fast::Kernels* const table = []() -> const fast::Kernels* {
    try {
      return fast::kernels_for(sim_isa_from_environment());
    } catch (...) {
      return nullptr;
    }
  }();
  return table;
}

// The fast kernels in use now; null: the portable kernels only.
const fast::Kernels* fast_kernels() noexcept {
  if (!g_fast_enabled.load(std::memory_order_relaxed)) return nullptr;
  const SimIsa forced = g_forced_level.load(std::memory_order_relaxed);
  if (forced != SimIsa::Auto) return fast::kernels_for(forced);
  return environment_kernels();
}

bool use_fast() noexcept { return fast_kernels() != nullptr; }

// Where a fast kernel reads input `in` from: the region, or (when `in` overlaps the output
// `out`, which is written while `in` is read) a per-thread copy of its bytes.
const std::byte* fast_input(std::span<std::byte> region, const TensorRef& in,
                            const TensorRef& out) {
  const std::byte* ptr = region.data() + in.address;
  if (!overlaps(in, out)) return ptr;
  thread_local std::vector<std::byte> snapshot;
  snapshot.assign(ptr, ptr + in.size_bytes());
  return snapshot.data();
}

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
  std::vector<float> mult;                         // float rule
  std::vector<isa::QuantizedMultiplier> fixed;     // fixed-point rule: one per output channel
};

// Validates a convolution kernel in a region of `region_size` bytes whose constant operands are
// read from `mem`. Throws Error(DeviceFault) when malformed, NotResident (only when `mem` is not
// the whole region) when the weights or bias are not in `mem`.
ConvDesc validate_conv(const isa::Kernel& kernel, bool depthwise, std::uint64_t region_size,
                       const Readable& mem) {
  ConvDesc d;
  const auto& p = params_of<isa::Conv2dParams>(kernel);
  d.p = &p;
  require_arity(kernel, 1, 1);
  d.x = activation_shape(region_size, kernel.inputs[0], "input 0");
  d.y = activation_shape(region_size, kernel.outputs[0], "output 0");
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
  check_located(region_size, wref, "weight");
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
    check_located(region_size, *p.bias, "bias");
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
      wq[static_cast<std::size_t>(i)] =
          static_cast<std::int16_t>(load8(d.wptr + i, w_signed) - zp);
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
  for (int j = 0; j < 4; ++j) w |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(b[j])) << (8 * j);
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
  f.N = d.N; f.C = d.C; f.H = d.H; f.W = d.W; f.M = d.M; f.OH = d.OH; f.OW = d.OW;
  f.kH = d.kH; f.kW = d.kW; f.pt = d.pt; f.pl = d.pl; f.sh = d.sh; f.sw = d.sw;
  f.dh = d.dh; f.dw = d.dw; f.group = p.group; f.Cg = d.Cg; f.Mg = d.Mg;
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
        for (std::int64_t r = 0; r < MR; ++r) {
          const std::int64_t ml = mb * MR + r;
          if (ml >= d.Mg) continue;
          std::int32_t b[4] = {0, 0, 0, 0};
          for (std::int64_t j = 0; j < 4 && 4 * k4 + j < K; ++j) {
            b[j] = weight(g * d.Mg + ml, 4 * k4 + j);
          }
          f.w_packed[static_cast<std::size_t>(((g * f.m_blocks + mb) * f.K4 + k4) * MR + r)] =
              pack4(b);
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
  return fk.conv(plan, fast_input(region, xref, yref), region.data() + yref.address);
}

// Per-kernel state prepared at program load (PreparedProgram).
struct KernelPlan {
  const isa::Kernel* kernel = nullptr;  // identity check only, never dereferenced
  std::shared_ptr<const fast::ConvPlan> conv;
  std::shared_ptr<const fast::MatMulPlan> matmul;
};

// LowLevelConv2d / LowLevelDepthwiseConv2d (QLinearConv).
void conv2d(const isa::Kernel& kernel, std::span<std::byte> region, bool depthwise,
            const KernelPlan* prepared) {
  const fast::Kernels* fk = fast_kernels();
  bool try_fast = fk != nullptr && fk->conv != nullptr;
  if (prepared != nullptr && prepared->conv && try_fast) {
    if (conv2d_fast(*fk, *prepared->conv, kernel, region)) return;
    try_fast = false;  // a new plan would be refused too
  }
  const ConvDesc d =
      validate_conv(kernel, depthwise, region.size(), Readable{region.data(), region.size()});
  if (try_fast && fast_conv_fits(d) && conv2d_fast(*fk, *make_conv_plan(d), kernel, region)) {
    return;
  }
  conv2d_generic(d, region, kernel);
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

  const fast::Kernels* fk = fast_kernels();
  if (fk != nullptr && fk->maxpool_plane != nullptr && x.n > 0 && x.c > 0 && x.h > 0 &&
      x.w > 0 && y.h > 0 && y.w > 0) {
    const fast::PoolGeom g{x.h,         x.w, y.h, y.w, kH,      kW,      p.pads[0],
                           p.pads[1],   sh,  sw,  dh,  dw,      x.pitch, y.pitch,
                           x.is_signed()};
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

// A validated LowLevelMatMul: sizes, the bytes of B and the per-column multiplier.
struct MatMulDesc {
  const isa::MatMulParams* p = nullptr;
  std::int64_t batch = 1, M = 0, K = 0, N = 0;
  const std::byte* bptr = nullptr;
  std::vector<float> mult;                      // float rule
  std::vector<isa::QuantizedMultiplier> fixed;  // fixed-point rule: one per column
  std::vector<std::uint32_t> bias;              // per column (zeros without a bias), wrapped
};

// Validates a matmul kernel (see validate_conv for `region_size` and `mem`).
MatMulDesc validate_matmul(const isa::Kernel& kernel, std::uint64_t region_size,
                           const Readable& mem) {
  MatMulDesc d;
  const auto& p = params_of<isa::MatMulParams>(kernel);
  d.p = &p;
  require_arity(kernel, 1, 1);
  const TensorRef& aref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  check_located(region_size, aref, "input 0");
  check_located(region_size, yref, "output 0");
  check_located(region_size, p.b, "b");
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
  if (p.fixed_point) {
    require_fixed_point(*p.fixed_point, N, yref.dtype);
    const auto& mults = p.fixed_point->multipliers;
    for (std::int64_t n = 0; n < N; ++n) {
      d.fixed.push_back(mults[mults.size() == 1 ? 0 : static_cast<std::size_t>(n)]);
    }
  } else {
    d.mult.resize(static_cast<std::size_t>(N));
    for (std::int64_t n = 0; n < N; ++n) {
      const float b_scale = p.b_scale[p.b_scale.size() == 1 ? 0 : static_cast<std::size_t>(n)];
      const float value = (p.a.scale * b_scale) / p.y.scale;
      if (!std::isfinite(value)) fault("requantization multiplier of column {} is not finite", n);
      d.mult[static_cast<std::size_t>(n)] = value;
    }
  }
  d.bias.assign(static_cast<std::size_t>(N), 0);
  if (p.bias) {
    check_located(region_size, *p.bias, "bias");
    require_linear(*p.bias, "bias");
    if (p.bias->dtype != DType::Int32 || p.bias->shape != Shape{N}) {
      fault("{} must be int32 of shape [{}]", describe("bias", *p.bias), N);
    }
    const std::byte* bias_ptr = read_at(mem, *p.bias);
    for (std::int64_t n = 0; n < N; ++n) {
      std::int32_t b;
      std::memcpy(&b, bias_ptr + n * 4, 4);
      d.bias[static_cast<std::size_t>(n)] = static_cast<std::uint32_t>(b);
    }
  }
  d.bptr = read_at(mem, p.b);
  for (std::size_t i = 0; i + 2 < rank; ++i) d.batch *= aref.shape[i];
  d.M = M;
  d.K = K;
  d.N = N;
  return d;
}

// The portable matmul: int16 operands, uint32 accumulators, scalar requantization.
void matmul_generic(const MatMulDesc& d, const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = *d.p;
  const TensorRef& aref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  const std::byte* aptr = region.data() + aref.address;
  std::byte* yptr = region.data() + yref.address;
  const std::int64_t M = d.M, K = d.K, N = d.N;
  // B minus its zero points, transposed to [N][K] so the dot products run over contiguous K.
  std::vector<std::int16_t> bq(static_cast<std::size_t>(N * K));
  const bool b_signed = p.b.dtype == DType::Int8;
  for (std::int64_t n = 0; n < N; ++n) {
    const std::size_t pick = p.b_zero_point.size() == 1 ? 0 : static_cast<std::size_t>(n);
    const std::int32_t zp = p.b_zero_point[pick];
    for (std::int64_t k = 0; k < K; ++k) {
      bq[static_cast<std::size_t>(n * K + k)] =
          static_cast<std::int16_t>(load8(d.bptr + k * N + n, b_signed) - zp);
    }
  }
  const bool a_signed = aref.dtype == DType::Int8;
  const auto [qmin, qmax] = isa::quant_range(yref.dtype);
  std::vector<std::int16_t> aq(static_cast<std::size_t>(K));
  for (std::int64_t row = 0; row < d.batch * M; ++row) {
    const std::byte* arow = aptr + row * K;
    for (std::int64_t k = 0; k < K; ++k) {
      aq[static_cast<std::size_t>(k)] =
          static_cast<std::int16_t>(load8(arow + k, a_signed) - p.a.zero_point);
    }
    std::byte* yrow = yptr + row * N;
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int16_t* bn = bq.data() + n * K;
      std::uint32_t acc = d.bias[static_cast<std::size_t>(n)];
      for (std::int64_t k = 0; k < K; ++k) {
        acc += static_cast<std::uint32_t>(std::int32_t{aq[static_cast<std::size_t>(k)]} * bn[k]);
      }
      if (p.fixed_point) {
        store8(yrow + n, isa::requantize_fixed_point(
                             static_cast<std::int32_t>(acc), d.fixed[static_cast<std::size_t>(n)],
                             p.y.zero_point, p.fixed_point->out_min, p.fixed_point->out_max));
      } else {
        store8(yrow + n,
               isa::requantize(static_cast<std::int32_t>(acc), d.mult[static_cast<std::size_t>(n)],
                               p.y.zero_point, qmin, qmax));
      }
    }
  }
}

// True when the fast matmul handles `d`: the float rule without a bias and a non-empty output.
bool fast_matmul_fits(const MatMulDesc& d) {
  return !d.p->fixed_point && !d.p->bias && d.batch * d.M > 0 && d.N > 0;
}

// Packs a validated matmul for the fast kernel.
std::shared_ptr<const fast::MatMulPlan> make_matmul_plan(const MatMulDesc& d,
                                                         const isa::Kernel& kernel) {
  auto plan = std::make_shared<fast::MatMulPlan>();
  fast::MatMulPlan& f = *plan;
  const auto& p = *d.p;
  const TensorRef& aref = kernel.inputs[0];
  f.rows = d.batch * d.M;
  f.K = d.K;
  f.N = d.N;
  f.K4 = (d.K + 3) / 4;
  f.Npad = (d.N + 15) / 16 * 16;
  f.a_signed = aref.dtype == DType::Int8;
  const std::int32_t az = p.a.zero_point + (f.a_signed ? 128 : 0);
  f.az = static_cast<std::uint8_t>(az);
  f.yz = p.y.zero_point;
  const auto [qmin, qmax] = isa::quant_range(kernel.outputs[0].dtype);
  f.qmin = qmin;
  f.qmax = qmax;
  const bool b_signed = p.b.dtype == DType::Int8;
  f.mult.assign(static_cast<std::size_t>(f.Npad), 0.0f);
  f.c0.assign(static_cast<std::size_t>(f.Npad), 0);
  f.bz.assign(static_cast<std::size_t>(f.Npad), 0);
  f.b_packed.assign(static_cast<std::size_t>(f.K4 * f.Npad * 4), 0);
  for (std::int64_t n = 0; n < d.N; ++n) {
    const std::int32_t zp =
        p.b_zero_point[p.b_zero_point.size() == 1 ? 0 : static_cast<std::size_t>(n)];
    const std::int32_t bz = b_signed ? zp : zp - 128;
    std::uint32_t bsum = 0;
    for (std::int64_t k = 0; k < d.K; ++k) {
      const std::int32_t v = load8(d.bptr + k * d.N + n, b_signed) - (b_signed ? 0 : 128);
      bsum += static_cast<std::uint32_t>(v);
      f.b_packed[static_cast<std::size_t>(fast::matmul_b_offset(f.K4, f.Npad, k, n))] =
          static_cast<std::int8_t>(v);
    }
    // K az bz - az sum b, modulo 2^32.
    const std::uint32_t c0 = static_cast<std::uint32_t>(d.K) * static_cast<std::uint32_t>(az) *
                                 static_cast<std::uint32_t>(bz) -
                             static_cast<std::uint32_t>(az) * bsum;
    f.mult[static_cast<std::size_t>(n)] = d.mult[static_cast<std::size_t>(n)];
    f.c0[static_cast<std::size_t>(n)] = static_cast<std::int32_t>(c0);
    f.bz[static_cast<std::size_t>(n)] = bz;
    f.any_bz = f.any_bz || bz != 0;
  }
  return plan;
}

void matmul_fast(const fast::Kernels& fk, const fast::MatMulPlan& plan,
                 const isa::Kernel& kernel, std::span<std::byte> region) {
  const TensorRef& aref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  fk.matmul(plan, fast_input(region, aref, yref), region.data() + yref.address);
}

// LowLevelMatMul (QLinearMatMul with constant B, per-column quantization of B).
void matmul(const isa::Kernel& kernel, std::span<std::byte> region, const KernelPlan* prepared) {
  const fast::Kernels* fk = fast_kernels();
  const bool fast = fk != nullptr && fk->matmul != nullptr;
  if (prepared != nullptr && prepared->matmul && fast) {
    return matmul_fast(*fk, *prepared->matmul, kernel, region);
  }
  const MatMulDesc d = validate_matmul(kernel, region.size(), Readable{region.data(), region.size()});
  if (fast && fast_matmul_fits(d)) {
    return matmul_fast(*fk, *make_matmul_plan(d, kernel), kernel, region);
  }
  matmul_generic(d, kernel, region);
}

// Element strides of `ref`'s logical shape in its layout: row-major for Linear; for LoweredNCHW
// the H stride is padded_width(W) (isa.h). Only for refs that passed locate().
std::vector<std::int64_t> layout_strides(const TensorRef& ref) {
  if (ref.layout == Layout::LoweredNCHW) {
    const std::int64_t wp = isa::padded_width(ref.shape[3]);
    return {ref.shape[1] * ref.shape[2] * wp, ref.shape[2] * wp, wp, 1};
  }
  return contiguous_strides(ref.shape);
}

// Element strides of `ref` in its layout; broadcast dims (1 where `out` is larger) get 0.
std::vector<std::int64_t> broadcast_strides(const TensorRef& ref, const Shape& out) {
  std::vector<std::int64_t> strides = layout_strides(ref);
  for (std::size_t d = 0; d < out.size(); ++d) {
    if (ref.shape[d] != out[d]) strides[d] = 0;  // a broadcast dim of size 1
  }
  return strides;
}

// One element of the fixed-point LowLevelAdd (isa::FixedPointAdd; TFLite AddElementwise).
inline std::int32_t fixed_point_add(std::int32_t a, std::int32_t b, const isa::AddParams& p,
                                    const isa::FixedPointAdd& f) {
  const std::int32_t sa = isa::multiply_by_quantized_multiplier(
      (a - p.a.zero_point) * (std::int32_t{1} << f.left_shift), f.a_mult);
  const std::int32_t sb = isa::multiply_by_quantized_multiplier(
      (b - p.b.zero_point) * (std::int32_t{1} << f.left_shift), f.b_mult);
  const std::int32_t v = isa::multiply_by_quantized_multiplier(sa + sb, f.y_mult) + p.y.zero_point;
  return std::clamp(v, f.out_min, f.out_max);
}

// The located, validated operands of a two-input element-wise kernel (LowLevelAdd / Mul / Sub):
// 8-bit a, b and y, a and b broadcasting numpy-style to y's shape (equal ranks), usable
// quantization parameters; strides are layout strides over y's shape (0 along broadcast dims).
struct BinaryOperands {
  const std::byte* a = nullptr;
  const std::byte* b = nullptr;
  std::byte* y = nullptr;
  Shape dims;  ///< y's shape ({1} for a scalar)
  std::vector<std::int64_t> sa, sb, sy;
  bool a_signed = false, b_signed = false;
  std::int32_t qmin = 0, qmax = 255;
  std::int64_t y_pad = 0;  ///< row padding elements after each innermost run of a lowered y
  bool empty = false;      ///< y has no elements
};

BinaryOperands binary_operands(const isa::Kernel& kernel, std::span<std::byte> region,
                               const isa::QuantParam& a, const isa::QuantParam& b,
                               const isa::QuantParam& y) {
  require_arity(kernel, 2, 1);
  const TensorRef& aref = kernel.inputs[0];
  const TensorRef& bref = kernel.inputs[1];
  const TensorRef& yref = kernel.outputs[0];
  BinaryOperands o;
  o.a = locate(region, aref, "input 0");
  o.b = locate(region, bref, "input 1");
  o.y = locate(region, yref, "output 0");
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
  require_scale(a.scale, "a_scale");
  require_scale(b.scale, "b_scale");
  require_scale(y.scale, "y_scale");
  require_zero_point(a.zero_point, aref.dtype, "a_zero_point");
  require_zero_point(b.zero_point, bref.dtype, "b_zero_point");
  require_zero_point(y.zero_point, yref.dtype, "y_zero_point");
  o.empty = element_count(out) == 0;
  o.sa = broadcast_strides(aref, out);
  o.sb = broadcast_strides(bref, out);
  o.sy = broadcast_strides(yref, out);
  o.dims = out;
  if (o.dims.empty()) {  // a scalar: one element
    o.dims = {1};
    o.sa = o.sb = o.sy = {0};
  }
  o.a_signed = aref.dtype == DType::Int8;
  o.b_signed = bref.dtype == DType::Int8;
  o.y_pad = yref.layout == Layout::LoweredNCHW ? isa::padded_width(o.dims.back()) - o.dims.back() : 0;
  const auto range = isa::quant_range(yref.dtype);
  o.qmin = std::get<0>(range);
  o.qmax = std::get<1>(range);
  return o;
}

// Calls run(pa, pb, py) for every innermost run of the output (dims.back() elements, strides
// sa/sb/sy.back() apart) and zeroes the row padding after each run of a lowered output.
// Element y[i] depends only on a[i] and b[i], and each run reads its elements before writing
// them, so an output placed exactly over an input is fine.
template <class RunFn>
void for_each_binary_run(const BinaryOperands& o, RunFn&& run) {
  const std::size_t outer_rank = o.dims.size() - 1;
  const std::int64_t inner = o.dims.back();
  std::vector<std::int64_t> index(outer_rank, 0);  // odometer over all dims but the last
  for (;;) {
    std::int64_t oa = 0, ob = 0, oy = 0;
    for (std::size_t d = 0; d < outer_rank; ++d) {
      oa += index[d] * o.sa[d];
      ob += index[d] * o.sb[d];
      oy += index[d] * o.sy[d];
    }
    std::byte* py = o.y + oy;
    run(o.a + oa, o.b + ob, py);
    if (o.y_pad > 0) std::memset(py + inner, 0, static_cast<std::size_t>(o.y_pad));
    std::size_t d = outer_rank;
    while (d > 0 && ++index[d - 1] == o.dims[d - 1]) index[--d] = 0;
    if (d == 0) break;
  }
}

// Runs elem(a, b) -> stored y over every element (8-bit values as int32).
template <class ElemFn>
void binary_elementwise(const BinaryOperands& o, ElemFn&& elem) {
  if (o.empty) return;
  const std::int64_t inner = o.dims.back();
  const std::int64_t ia = o.sa.back(), ib = o.sb.back(), iy = o.sy.back();
  for_each_binary_run(o, [&](const std::byte* pa, const std::byte* pb, std::byte* py) {
    for (std::int64_t i = 0; i < inner; ++i) {
      store8(py + i * iy, elem(load8(pa + i * ia, o.a_signed), load8(pb + i * ib, o.b_signed)));
    }
  });
}

// LowLevelAdd (com.microsoft QLinearAdd) with numpy-style broadcasting of equal-rank operands.
void add(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::AddParams>(kernel);
  const BinaryOperands o = binary_operands(kernel, region, p.a, p.b, p.y);
  const TensorRef& aref = kernel.inputs[0];
  const TensorRef& bref = kernel.inputs[1];
  const TensorRef& yref = kernel.outputs[0];
  if (p.fixed_point) {
    const isa::FixedPointAdd& f = *p.fixed_point;
    if (f.left_shift < 0 || f.left_shift > 22) {
      fault("fixed-point left_shift {} must be in [0, 22] (8-bit operands times 2^left_shift "
            "must fit int32)", f.left_shift);
    }
    require_multiplier(f.a_mult, "fixed-point multiplier of a");
    require_multiplier(f.b_mult, "fixed-point multiplier of b");
    require_multiplier(f.y_mult, "fixed-point multiplier of y");
    require_output_range(f.out_min, f.out_max, yref.dtype);
    return binary_elementwise(o, [&](std::int32_t a, std::int32_t b) { return fixed_point_add(a, b, p, f); });
  }
  if (o.empty) return;
  const std::size_t outer_rank = o.dims.size() - 1;
  const std::int64_t inner = o.dims.back();
  // Contiguous innermost runs on all three sides go through the vectorized kernel. Each element
  // of y depends only on the same element of a and b, so an output that is exactly one of the
  // inputs is fine; partial overlaps take the scalar loop, which reads before it writes.
  const bool same_or_disjoint = (!overlaps(aref, yref) || (aref.address == yref.address &&
                                                           o.sa == o.sy)) &&
                                (!overlaps(bref, yref) || (bref.address == yref.address &&
                                                           o.sb == o.sy));
  const fast::Kernels* fk = fast_kernels();
  const bool fast_add = fk != nullptr && fk->add_rows != nullptr && fk->add_run != nullptr &&
                        o.sa.back() == 1 && o.sb.back() == 1 && o.sy.back() == 1 &&
                        same_or_disjoint;
  if (!fast_add) {
    return binary_elementwise(o, [&](std::int32_t a, std::int32_t b) {
      return qlinear_add(a, p.a, b, p.b, p.y, o.qmin, o.qmax);
    });
  }
  const fast::AddParamsF fast_params{p.a.scale,      p.b.scale,      p.y.scale, p.a.zero_point,
                                     p.b.zero_point, p.y.zero_point, o.qmin,    o.qmax,
                                     o.a_signed,     o.b_signed};
  // Without broadcasting, the runs of every operand are evenly spaced rows: one call.
  if (outer_rank > 0) {
    auto even = [&](const std::vector<std::int64_t>& st) {
      for (std::size_t d = 0; d + 1 < outer_rank; ++d) {
        if (st[d] != st[d + 1] * o.dims[d + 1]) return false;
      }
      return st[outer_rank - 1] != 0 || o.dims[outer_rank - 1] == 1;
    };
    if (even(o.sa) && even(o.sb) && even(o.sy)) {
      std::int64_t rows = 1;
      for (std::size_t d = 0; d < outer_rank; ++d) rows *= o.dims[d];
      fk->add_rows(fast_params, o.a, o.sa[outer_rank - 1], o.b, o.sb[outer_rank - 1], o.y,
                     o.sy[outer_rank - 1], rows, inner, o.y_pad);
      return;
    }
  }
  for_each_binary_run(o, [&](const std::byte* pa, const std::byte* pb, std::byte* py) {
    fk->add_run(fast_params, pa, pb, py, inner);
  });
}

// LowLevelMul (isa::MulParams): com.microsoft QLinearMul's documented formula, the integer
// product exact and one float32 ratio.
void mul(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::MulParams>(kernel);
  const BinaryOperands o = binary_operands(kernel, region, p.a, p.b, p.y);
  const float ratio = p.a.scale * p.b.scale / p.y.scale;  // float32, in this order
  if (!std::isfinite(ratio)) fault("a_scale * b_scale / y_scale = {} is not finite", ratio);
  const auto yzp = static_cast<float>(p.y.zero_point);
  binary_elementwise(o, [&](std::int32_t a, std::int32_t b) {
    const float product = static_cast<float>((a - p.a.zero_point) * (b - p.b.zero_point));
    const float scaled = product * ratio;
    return host::quantize_value(scaled + yzp, 0, o.qmin, o.qmax);
  });
}

// LowLevelSub (isa::SubParams): DequantizeLinear of both operands, Sub, QuantizeLinear, in
// float32.
void sub(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::SubParams>(kernel);
  const BinaryOperands o = binary_operands(kernel, region, p.a, p.b, p.y);
  binary_elementwise(o, [&](std::int32_t a, std::int32_t b) {
    const float fa = static_cast<float>(a - p.a.zero_point) * p.a.scale;
    const float fb = static_cast<float>(b - p.b.zero_point) * p.b.scale;
    const float diff = fa - fb;
    return host::quantize_value(diff / p.y.scale, p.y.zero_point, o.qmin, o.qmax);
  });
}

// ---------------------------------------------------------------------------------------------
// Data movement (Reshape, Concat, Split, Transpose) and the other layout-agnostic kernels
// (Requantize, GlobalAveragePool).
//
// Every tensor, in either layout, is addressed through element strides over its logical shape
// (layout_strides). A copy walks a logical block with one stride vector per side; dims that are
// contiguous on both sides are merged first (coalesce), so the innermost loop is a single memcpy
// whenever both sides are contiguous along it: whole W-element rows of lowered tensors, whole
// dense blocks of linear ones (e.g. Concat/Split along C of lowered tensors copy whole rows;
// linear -> linear Reshape is one memcpy). The row padding of lowered inputs is never read and
// the row padding of lowered outputs is zeroed. An input whose bytes overlap an output's is
// copied aside first, so in-place programs (output placed over an input) get the right result.

// A logical block copied element for element: extents and element strides of both sides.
struct Block {
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> dst_strides;
  std::vector<std::int64_t> src_strides;
};

// Drops extent-1 dims and merges each dim into the next inner one when both sides are
// contiguous across the two. Leaves at least one dim. Extents must be >= 1.
void coalesce(Block& b) {
  Block out;
  for (std::size_t d = 0; d < b.dims.size(); ++d) {
    const std::int64_t n = b.dims[d], ds = b.dst_strides[d], ss = b.src_strides[d];
    if (n == 1) continue;
    if (!out.dims.empty() && out.dst_strides.back() == ds * n && out.src_strides.back() == ss * n) {
      out.dims.back() *= n;
      out.dst_strides.back() = ds;
      out.src_strides.back() = ss;
    } else {
      out.dims.push_back(n);
      out.dst_strides.push_back(ds);
      out.src_strides.push_back(ss);
    }
  }
  if (out.dims.empty()) out = Block{{1}, {1}, {1}};
  b = std::move(out);
}

// Copies `n` bytes between non-overlapping buffers. Short runs (lowered rows are often 7 to 56
// bytes) use fixed-size, possibly overlapping head and tail moves the compiler inlines, which
// is several times faster than a library call per row.
inline void copy_bytes(std::byte* dst, const std::byte* src, std::size_t n) {
  if (n >= 64) {
    std::memcpy(dst, src, n);
  } else if (n >= 32) {
    std::memcpy(dst, src, 32);
    std::memcpy(dst + n - 32, src + n - 32, 32);
  } else if (n >= 16) {
    std::memcpy(dst, src, 16);
    std::memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(dst, src, 8);
    std::memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(dst, src, 4);
    std::memcpy(dst + n - 4, src + n - 4, 4);
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

// Zeroes `n` bytes; short runs (row padding is 1 to 31 elements) inline like copy_bytes.
inline void zero_bytes(std::byte* dst, std::size_t n) {
  if (n >= 64) {
    std::memset(dst, 0, n);
  } else if (n >= 32) {
    std::memset(dst, 0, 32);
    std::memset(dst + n - 32, 0, 32);
  } else if (n >= 16) {
    std::memset(dst, 0, 16);
    std::memset(dst + n - 16, 0, 16);
  } else if (n >= 8) {
    std::memset(dst, 0, 8);
    std::memset(dst + n - 8, 0, 8);
  } else if (n >= 4) {
    std::memset(dst, 0, 4);
    std::memset(dst + n - 4, 0, 4);
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = std::byte{0};
  }
}

// Copies `count` elements of `E` bytes, `ds` / `ss` elements apart.
template <std::size_t E>
void strided_copy(std::byte* dst, std::int64_t ds, const std::byte* src, std::int64_t ss,
                  std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    std::memcpy(dst + static_cast<std::size_t>(i * ds) * E,
                src + static_cast<std::size_t>(i * ss) * E, E);
  }
}

// One innermost run of a block copy: `count` elements, `ds` / `ss` elements apart. With `lut`
// (8-bit elements only) every element is mapped through the 256-entry table.
void copy_run(std::byte* dst, std::int64_t ds, const std::byte* src, std::int64_t ss,
              std::int64_t count, std::size_t esize, const std::uint8_t* lut) {
  if (lut != nullptr) {
    const auto* s = reinterpret_cast<const unsigned char*>(src);
    auto* d = reinterpret_cast<unsigned char*>(dst);
    if (ds == 1 && ss == 1) {
      for (std::int64_t i = 0; i < count; ++i) d[i] = lut[s[i]];
    } else {
      for (std::int64_t i = 0; i < count; ++i) d[i * ds] = lut[s[i * ss]];
    }
    return;
  }
  if (ds == 1 && ss == 1) {
    copy_bytes(dst, src, static_cast<std::size_t>(count) * esize);
    return;
  }
  switch (esize) {
    case 1: {
      const auto* s = reinterpret_cast<const unsigned char*>(src);
      auto* d = reinterpret_cast<unsigned char*>(dst);
      for (std::int64_t i = 0; i < count; ++i) d[i * ds] = s[i * ss];
      return;
    }
    case 2: return strided_copy<2>(dst, ds, src, ss, count);
    case 4: return strided_copy<4>(dst, ds, src, ss, count);
    case 8: return strided_copy<8>(dst, ds, src, ss, count);
    default:
      for (std::int64_t i = 0; i < count; ++i) {
        std::memcpy(dst + static_cast<std::size_t>(i * ds) * esize,
                    src + static_cast<std::size_t>(i * ss) * esize, esize);
      }
  }
}

// The rows of a lowered destination: `w` elements, `pitch` apart (pitch 0: not lowered).
struct DstRows {
  std::int64_t w = 0, pitch = 0;
};

// The DstRows of `ref`.
DstRows dst_rows(const TensorRef& ref) {
  if (ref.layout != Layout::LoweredNCHW) return {};
  return {ref.shape[3], isa::padded_width(ref.shape[3])};
}

// Copies block `b` (element size `esize`) from `src` to `dst`, optionally through `lut`. The
// two innermost (coalesced) dims are tight loops; outer dims run on an odometer. Returns true
// when every innermost run was a whole row of the lowered destination `rows` and its padding
// was zeroed on the way (so clear_row_padding is not needed for the bytes written).
bool copy_block(std::byte* dst, const std::byte* src, Block b, std::size_t esize,
                const std::uint8_t* lut = nullptr, DstRows rows = {}) {
  for (std::int64_t n : b.dims) {
    if (n == 0) return false;
  }
  coalesce(b);
  const std::size_t rank = b.dims.size();
  const std::int64_t inner = b.dims[rank - 1];
  const std::int64_t di = b.dst_strides[rank - 1], si = b.src_strides[rank - 1];
  const std::int64_t mid = rank >= 2 ? b.dims[rank - 2] : 1;
  const std::int64_t dm = rank >= 2 ? b.dst_strides[rank - 2] : 0;
  const std::int64_t sm = rank >= 2 ? b.src_strides[rank - 2] : 0;
  const std::size_t outer_rank = rank >= 2 ? rank - 2 : 0;
  // Byte runs go through the vectorized row copier; a run that is a whole destination row
  // (inner == rows.w, consecutive runs rows.pitch apart) also gets its padding zeroed there.
  const fast::Kernels* fk = fast_kernels();
  const bool fast_rows =
      esize == 1 && di == 1 && si == 1 && fk != nullptr && fk->copy_rows != nullptr;
  const bool whole_rows =
      fast_rows && rows.pitch > rows.w && inner == rows.w && (mid == 1 || dm == rows.pitch);
  std::vector<std::int64_t> index(outer_rank, 0);
  for (;;) {
    std::int64_t doff = 0, soff = 0;
    for (std::size_t d = 0; d < outer_rank; ++d) {
      doff += index[d] * b.dst_strides[d];
      soff += index[d] * b.src_strides[d];
    }
    if (fast_rows) {
      fk->copy_rows(dst + doff, dm, src + soff, sm, mid, inner,
                      whole_rows ? rows.pitch - rows.w : 0, lut);
    } else {
      for (std::int64_t m = 0; m < mid; ++m) {
        copy_run(dst + static_cast<std::size_t>(doff + m * dm) * esize, di,
                 src + static_cast<std::size_t>(soff + m * sm) * esize, si, inner, esize, lut);
      }
    }
    std::size_t d = outer_rank;
    while (d > 0 && ++index[d - 1] == b.dims[d - 1]) index[--d] = 0;
    if (d == 0) break;
  }
  return whole_rows;
}

// Walks the elements of a tensor in logical row-major order as runs of contiguous elements
// (whole rows of a lowered tensor, the whole of a linear one).
class RunCursor {
 public:
  // `shape` with its layout strides; element_count(shape) must be > 0.
  RunCursor(const Shape& shape, const std::vector<std::int64_t>& strides) {
    Block b{shape, strides, strides};
    coalesce(b);
    if (b.dst_strides.back() == 1) {  // innermost dim contiguous: runs of its extent
      run_ = b.dims.back();
      b.dims.pop_back();
      b.dst_strides.pop_back();
    }
    dims_ = std::move(b.dims);
    strides_ = std::move(b.dst_strides);
    index_.assign(dims_.size(), 0);
  }
  std::int64_t offset() const { return offset_; }  ///< first element of the current run
  std::int64_t run() const { return run_; }        ///< elements in every run
  void advance() {
    std::size_t d = dims_.size();
    while (d > 0) {
      --d;
      offset_ += strides_[d];
      if (++index_[d] < dims_[d]) return;
      offset_ -= strides_[d] * dims_[d];
      index_[d] = 0;
    }
  }

 private:
  std::vector<std::int64_t> dims_, strides_, index_;
  std::int64_t run_ = 1;
  std::int64_t offset_ = 0;
};

// Copies all elements of `xref` (at src) to `yref` (at dst) in logical row-major order; both hold
// the same number of elements. A linear side is row-major whatever its shape, so it can take the
// other side's shape and the copy becomes one block copy; only lowered -> lowered between
// different shapes walks the two sides' runs separately. Returns true when the row padding of a
// lowered destination was zeroed on the way (see copy_block).
bool copy_row_major(std::byte* dst, const TensorRef& yref, const std::byte* src,
                    const TensorRef& xref) {
  const std::size_t esize = dtype_size(xref.dtype);
  std::int64_t remaining = element_count(xref.shape);
  if (remaining == 0) return false;
  if (xref.shape == yref.shape) {  // a layout change only
    return copy_block(dst, src, Block{yref.shape, layout_strides(yref), layout_strides(xref)},
                      esize, nullptr, dst_rows(yref));
  }
  if (yref.layout == Layout::Linear) {
    return copy_block(dst, src,
                      Block{xref.shape, contiguous_strides(xref.shape), layout_strides(xref)},
                      esize);
  }
  if (xref.layout == Layout::Linear) {
    return copy_block(dst, src,
                      Block{yref.shape, layout_strides(yref), contiguous_strides(yref.shape)},
                      esize, nullptr, dst_rows(yref));
  }
  const Shape& ss = xref.shape;
  const Shape& ds = yref.shape;
  const std::vector<std::int64_t> sst = layout_strides(xref), dst_st = layout_strides(yref);
  RunCursor s(ss, sst), d(ds, dst_st);
  std::int64_t s_used = 0, d_used = 0;
  while (remaining > 0) {
    const std::int64_t n = std::min(s.run() - s_used, d.run() - d_used);
    copy_bytes(dst + static_cast<std::size_t>(d.offset() + d_used) * esize,
               src + static_cast<std::size_t>(s.offset() + s_used) * esize,
               static_cast<std::size_t>(n) * esize);
    remaining -= n;
    if ((s_used += n) == s.run()) {
      s.advance();
      s_used = 0;
    }
    if ((d_used += n) == d.run()) {
      d.advance();
      d_used = 0;
    }
  }
  return false;
}

// Zeroes the row padding of a lowered tensor (nothing for Linear), so outputs are fully defined.
void clear_row_padding(std::byte* base, const TensorRef& ref) {
  if (ref.layout != Layout::LoweredNCHW) return;
  const std::int64_t w = ref.shape[3], wp = isa::padded_width(w);
  if (wp == w) return;
  const std::size_t esize = dtype_size(ref.dtype);
  const std::int64_t rows = ref.shape[0] * ref.shape[1] * ref.shape[2];
  const auto pad = static_cast<std::size_t>(wp - w) * esize;
  for (std::int64_t r = 0; r < rows; ++r) {
    zero_bytes(base + static_cast<std::size_t>(r * wp + w) * esize, pad);
  }
}


// Where to read a located input from: the region, or a copy in `scratch` when the input's bytes
// overlap one of the kernel's outputs (which are written while the input is read).
const std::byte* readable(std::span<std::byte> region, const TensorRef& input,
                          const std::vector<TensorRef>& outputs, std::vector<std::byte>& scratch) {
  const std::byte* ptr = region.data() + input.address;
  for (const TensorRef& out : outputs) {
    if (overlaps(input, out)) {
      scratch.assign(ptr, ptr + input.size_bytes());
      return scratch.data();
    }
  }
  return ptr;
}

// Throws when two outputs of the kernel share bytes.
void require_disjoint_outputs(const isa::Kernel& kernel) {
  for (std::size_t i = 0; i < kernel.outputs.size(); ++i) {
    for (std::size_t j = i + 1; j < kernel.outputs.size(); ++j) {
      if (overlaps(kernel.outputs[i], kernel.outputs[j])) {
        fault("{} overlaps {}", describe(fmt::format("output {}", i), kernel.outputs[i]),
              describe(fmt::format("output {}", j), kernel.outputs[j]));
      }
    }
  }
}

// Throws unless `other` has `ref`'s dtype (data movement never converts).
void require_same_dtype(const TensorRef& ref, std::string_view role, const TensorRef& other,
                        std::string_view other_role) {
  if (ref.dtype != other.dtype) {
    fault("{} must have the dtype of {}", describe(role, ref), describe(other_role, other));
  }
}

// An ONNX-style axis in [-rank, rank) as an index in [0, rank); throws when out of range.
std::size_t normalize_axis(std::int64_t axis, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) fault("axis {} is out of range for rank {}", axis, rank);
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

// LowLevelReshape: logical row-major copy between any layouts (equal element counts).
void reshape(const isa::Kernel& kernel, std::span<std::byte> region) {
  params_of<isa::ReshapeParams>(kernel);
  require_arity(kernel, 1, 1);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  locate(region, xref, "input 0");
  std::byte* yptr = locate(region, yref, "output 0");
  require_same_dtype(yref, "output 0", xref, "input 0");
  if (element_count(xref.shape) != element_count(yref.shape)) {
    fault("{} and {} hold different element counts", describe("input 0", xref),
          describe("output 0", yref));
  }
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  if (!copy_row_major(yptr, yref, xptr, xref)) clear_row_padding(yptr, yref);
}

// Checks the pieces of a Concat (inputs) or Split (outputs) against the whole tensor: same
// dtype and rank, equal extents except along `axis`, where they sum to the whole's extent.
// Returns the normalized axis.
std::size_t require_pieces(const TensorRef& whole, std::string_view whole_role,
                           const std::vector<TensorRef>& pieces, std::string_view piece_role,
                           std::int64_t axis_param) {
  const std::size_t rank = whole.shape.size();
  if (rank == 0) fault("{} must be of rank >= 1", describe(whole_role, whole));
  const std::size_t axis = normalize_axis(axis_param, rank);
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const TensorRef& piece = pieces[i];
    const std::string role = fmt::format("{} {}", piece_role, i);
    require_same_dtype(piece, role, whole, whole_role);
    bool ok = piece.shape.size() == rank;
    for (std::size_t d = 0; ok && d < rank; ++d) ok = d == axis || piece.shape[d] == whole.shape[d];
    if (!ok) {
      fault("{} must match {} in every dim but axis {}", describe(role, piece),
            describe(whole_role, whole), axis);
    }
    sum += piece.shape[axis];
  }
  if (sum != whole.shape[axis]) {
    fault("the {}s' extents along axis {} sum to {}, but {} has {}", piece_role, axis, sum,
          describe(whole_role, whole), whole.shape[axis]);
  }
  return axis;
}

// LowLevelConcat: inputs placed one after the other along the axis of the output.
void concat(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::ConcatParams>(kernel);
  if (kernel.inputs.empty() || kernel.outputs.size() != 1) {
    fault("expects at least 1 input and 1 output but has {} and {}", kernel.inputs.size(),
          kernel.outputs.size());
  }
  const TensorRef& yref = kernel.outputs[0];
  std::byte* yptr = locate(region, yref, "output 0");
  for (std::size_t i = 0; i < kernel.inputs.size(); ++i) {
    locate(region, kernel.inputs[i], fmt::format("input {}", i));
  }
  const std::size_t axis = require_pieces(yref, "output 0", kernel.inputs, "input", p.axis);
  const std::vector<std::int64_t> ys = layout_strides(yref);
  const std::size_t esize = dtype_size(yref.dtype);
  // Read every overlapping input before writing anything.
  std::vector<std::vector<std::byte>> scratch(kernel.inputs.size());
  std::vector<const std::byte*> sources;
  for (std::size_t i = 0; i < kernel.inputs.size(); ++i) {
    sources.push_back(readable(region, kernel.inputs[i], kernel.outputs, scratch[i]));
  }
  std::int64_t start = 0;  // position of the current input along the axis
  bool padded = true;      // every input's copy zeroed the row padding of its rows
  for (std::size_t i = 0; i < kernel.inputs.size(); ++i) {
    const TensorRef& xref = kernel.inputs[i];
    padded = copy_block(yptr + static_cast<std::size_t>(start * ys[axis]) * esize, sources[i],
                        Block{xref.shape, ys, layout_strides(xref)}, esize, nullptr,
                        dst_rows(yref)) &&
             padded;
    start += xref.shape[axis];
  }
  if (!padded) clear_row_padding(yptr, yref);
}

// LowLevelSplit: consecutive slices of the input along the axis, one per output.
void split(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::SplitParams>(kernel);
  if (kernel.inputs.size() != 1 || kernel.outputs.empty()) {
    fault("expects 1 input and at least 1 output but has {} and {}", kernel.inputs.size(),
          kernel.outputs.size());
  }
  const TensorRef& xref = kernel.inputs[0];
  locate(region, xref, "input 0");
  std::vector<std::byte*> targets;
  for (std::size_t i = 0; i < kernel.outputs.size(); ++i) {
    targets.push_back(locate(region, kernel.outputs[i], fmt::format("output {}", i)));
  }
  const std::size_t axis = require_pieces(xref, "input 0", kernel.outputs, "output", p.axis);
  require_disjoint_outputs(kernel);
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  const std::vector<std::int64_t> xs = layout_strides(xref);
  const std::size_t esize = dtype_size(xref.dtype);
  std::int64_t start = 0;  // position of the current output along the axis
  for (std::size_t i = 0; i < kernel.outputs.size(); ++i) {
    const TensorRef& yref = kernel.outputs[i];
    if (!copy_block(targets[i], xptr + static_cast<std::size_t>(start * xs[axis]) * esize,
                    Block{yref.shape, layout_strides(yref), xs}, esize, nullptr,
                    dst_rows(yref))) {
      clear_row_padding(targets[i], yref);
    }
    start += yref.shape[axis];
  }
}

// LowLevelResize, modes TfliteBilinear and OnnxLinear: the input gathered into a dense NCHW
// tensor, resized by the host operator library's Resize on the equivalent node (the one
// arithmetic of each mode in the project), the result copied into the output's layout.
void resize_on_host_arithmetic(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::ResizeParams>(kernel);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  std::byte* yptr = locate(region, yref, "output 0");
  if (xref.dtype != DType::UInt8 && xref.dtype != DType::Int8) {
    fault("bilinear resize takes uint8 or int8, {} is {}", describe("input 0", xref), dtype_name(xref.dtype));
  }
  if (xref.shape.size() != 4 || yref.shape.size() != 4 || yref.shape[0] != xref.shape[0] ||
      yref.shape[1] != xref.shape[1]) {
    fault("{} and {} must be 4-D with equal N and C", describe("input 0", xref), describe("output 0", yref));
  }
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  const std::size_t esize = dtype_size(xref.dtype);
  Tensor x(xref.dtype, xref.shape);
  copy_block(reinterpret_cast<std::byte*>(x.bytes().data()), xptr,
             Block{xref.shape, contiguous_strides(xref.shape), layout_strides(xref)}, esize);
  host::OpNode node;
  node.name = kernel.node_name;
  node.op_type = "Resize";
  node.outputs = {0};
  node.attributes["mode"] = std::string("linear");
  Tensor sizes(DType::Int64, {4});
  Tensor scales(DType::Float32, {4});
  std::vector<const Tensor*> inputs{&x, nullptr, nullptr, &sizes};
  if (p.mode == isa::ResizeParams::Mode::TfliteBilinear) {
    node.attributes["tflite_arithmetic"] = std::int64_t{1};
    node.attributes["axes"] = std::vector<std::int64_t>{2, 3};
    node.attributes["coordinate_transformation_mode"] =
        std::string(p.align_corners ? "align_corners" : p.half_pixel_centers ? "half_pixel" : "asymmetric");
    sizes = Tensor(DType::Int64, {2});
    sizes.as<std::int64_t>()[0] = yref.shape[2];
    sizes.as<std::int64_t>()[1] = yref.shape[3];
  } else {
    node.attributes["coordinate_transformation_mode"] = p.coordinate_transformation_mode;
    if (p.scales) {
      const float values[4] = {1.0f, 1.0f, (*p.scales)[0], (*p.scales)[1]};
      std::copy(values, values + 4, scales.as<float>().begin());
      inputs = {&x, nullptr, &scales};
    } else {
      std::copy(yref.shape.begin(), yref.shape.end(), sizes.as<std::int64_t>().begin());
    }
  }
  node.inputs.clear();
  for (std::size_t i = 0; i < inputs.size(); ++i) node.inputs.push_back(inputs[i] ? static_cast<int>(i) : -1);
  Tensor y;
  try {
    y = std::move(host::run_cpu_op(node, inputs).at(0));
  } catch (const Error& e) {
    fault("the resize cannot run: {}", e.message());
  }
  if (y.shape() != yref.shape) {
    fault("the resize gives {}, not the shape of {}", shape_to_string(y.shape()), describe("output 0", yref));
  }
  if (!copy_block(yptr, reinterpret_cast<const std::byte*>(y.bytes().data()),
                  Block{yref.shape, layout_strides(yref), contiguous_strides(yref.shape)}, esize, nullptr,
                  dst_rows(yref))) {
    clear_row_padding(yptr, yref);
  }
}

// LowLevelResize: nearest upsampling by whole factors. The output is walked as
// [N, C, H, scale_h, W, scale_w] with source strides 0 along the two repeat dims, so each
// output row is one gather of its source row (a copy per element only along W).
void resize(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::ResizeParams>(kernel);
  require_arity(kernel, 1, 1);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  locate(region, xref, "input 0");
  require_same_dtype(yref, "output 0", xref, "input 0");
  if (p.mode != isa::ResizeParams::Mode::NearestRepeat) return resize_on_host_arithmetic(kernel, region);
  std::byte* yptr = locate(region, yref, "output 0");
  if (xref.shape.size() != 4 || p.scale_h < 1 || p.scale_w < 1) {
    fault("{} must be 4-D and the scales >= 1 (scale_h {}, scale_w {})", describe("input 0", xref), p.scale_h,
          p.scale_w);
  }
  const Shape expected{xref.shape[0], xref.shape[1], xref.shape[2] * p.scale_h, xref.shape[3] * p.scale_w};
  if (yref.shape != expected) {
    fault("{} must have shape {} (input 0 upsampled by {} x {})", describe("output 0", yref),
          shape_to_string(expected), p.scale_h, p.scale_w);
  }
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  const std::vector<std::int64_t> xs = layout_strides(xref), ys = layout_strides(yref);
  const Block block{{xref.shape[0], xref.shape[1], xref.shape[2], p.scale_h, xref.shape[3], p.scale_w},
                    {ys[0], ys[1], ys[2] * p.scale_h, ys[2], ys[3] * p.scale_w, ys[3]},
                    {xs[0], xs[1], xs[2], 0, xs[3], 0}};
  if (!copy_block(yptr, xptr, block, dtype_size(xref.dtype), nullptr, dst_rows(yref))) {
    clear_row_padding(yptr, yref);
  }
}

// Gathers outputs[0] from inputs[0] by one index table per dim: output index o along dim d
// reads input index tables[d][o], or `fill` (one element of the dtype) when any dim's entry is
// -1. Both tensors have the same dtype and rank, any layouts; tables[d] has y.shape[d] entries
// in [-1, x.shape[d]). The shared walk of LowLevelSlice and LowLevelPad.
void gather_by_tables(const isa::Kernel& kernel, std::span<std::byte> region,
                      const std::vector<std::vector<std::int64_t>>& tables, const std::byte* fill) {
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  std::byte* yptr = locate(region, yref, "output 0");
  const std::size_t rank = yref.shape.size();
  if (element_count(yref.shape) == 0) return;
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  const std::size_t esize = dtype_size(xref.dtype);
  const std::vector<std::int64_t> xs = layout_strides(xref), ys = layout_strides(yref);
  if (rank == 0) {
    std::memcpy(yptr, xptr, esize);
    return;
  }
  // The innermost dim as one copy when it reads consecutive input elements with stride 1 on both
  // sides (a Slice with step 1, the interior rows of a Pad are not: they mix fill and data).
  const std::vector<std::int64_t>& last = tables[rank - 1];
  const std::int64_t inner = yref.shape[rank - 1];
  bool consecutive = xs[rank - 1] == 1 && ys[rank - 1] == 1 && last[0] >= 0;
  for (std::int64_t i = 1; consecutive && i < inner; ++i) {
    consecutive = last[static_cast<std::size_t>(i)] == last[0] + i;
  }
  std::vector<std::int64_t> index(rank - 1, 0);
  for (;;) {
    std::int64_t xo = 0, yo = 0;
    bool outside = false;
    for (std::size_t d = 0; d + 1 < rank; ++d) {
      const std::int64_t src = tables[d][static_cast<std::size_t>(index[d])];
      outside = outside || src < 0;
      xo += src * xs[d];
      yo += index[d] * ys[d];
    }
    std::byte* row = yptr + static_cast<std::size_t>(yo) * esize;
    if (outside) {
      for (std::int64_t i = 0; i < inner; ++i) {
        std::memcpy(row + static_cast<std::size_t>(i * ys[rank - 1]) * esize, fill, esize);
      }
    } else if (consecutive) {
      copy_bytes(row, xptr + static_cast<std::size_t>(xo + last[0]) * esize,
                 static_cast<std::size_t>(inner) * esize);
    } else {
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t src = last[static_cast<std::size_t>(i)];
        std::memcpy(row + static_cast<std::size_t>(i * ys[rank - 1]) * esize,
                    src < 0 ? fill : xptr + static_cast<std::size_t>(xo + src * xs[rank - 1]) * esize,
                    esize);
      }
    }
    std::size_t d = rank - 1;
    while (d > 0 && ++index[d - 1] == yref.shape[d - 1]) index[--d] = 0;
    if (d == 0) break;
  }
  clear_row_padding(yptr, yref);
}

// Checks the operands of LowLevelSlice / LowLevelPad: one input and one output of the same
// dtype and rank, and a per-dim parameter vector `what` of that rank.
void require_index_map_operands(const isa::Kernel& kernel, std::span<std::byte> region,
                                std::size_t param_size, std::string_view what) {
  require_arity(kernel, 1, 1);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  locate(region, xref, "input 0");
  locate(region, yref, "output 0");
  require_same_dtype(yref, "output 0", xref, "input 0");
  if (yref.shape.size() != xref.shape.size()) {
    fault("{} must have the rank of {}", describe("output 0", yref), describe("input 0", xref));
  }
  if (param_size != xref.shape.size()) {
    fault("{} has {} entries but {} has rank {}", what, param_size, describe("input 0", xref),
          xref.shape.size());
  }
}

// LowLevelSlice: output index o of dim d reads input index starts[d] + o * steps[d].
void slice(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::SliceParams>(kernel);
  require_index_map_operands(kernel, region, p.starts.size(), "starts");
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  if (p.steps.size() != p.starts.size()) {
    fault("steps has {} entries and starts {}", p.steps.size(), p.starts.size());
  }
  std::vector<std::vector<std::int64_t>> tables(p.starts.size());
  for (std::size_t d = 0; d < tables.size(); ++d) {
    const std::int64_t n = yref.shape[d], start = p.starts[d], step = p.steps[d];
    if (step == 0) fault("steps[{}] is 0", d);
    if (n == 0) continue;
    if (n > 1 && (step > xref.shape[d] || step < -xref.shape[d])) {
      fault("steps[{}] = {} is larger than dim {} of {}", d, step, d, describe("input 0", xref));
    }
    const std::int64_t end = start + (n - 1) * step;  // last index read (no overflow: checked dims)
    if (start < 0 || start >= xref.shape[d] || end < 0 || end >= xref.shape[d]) {
      fault("dim {}: {} elements from {} by step {} leave {}", d, n, start, step,
            describe("input 0", xref));
    }
    for (std::int64_t o = 0; o < n; ++o) tables[d].push_back(start + o * step);
  }
  gather_by_tables(kernel, region, tables, nullptr);
}

// LowLevelPad: host::pad_source per dim, the constant `value` elsewhere.
void pad(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::PadParams>(kernel);
  require_index_map_operands(kernel, region, p.begins.size(), "begins");
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  require_8bit(xref, "input 0");
  if (p.mode == isa::PadParams::Mode::Constant) require_zero_point(p.value, xref.dtype, "constant value");
  if (p.mode != isa::PadParams::Mode::Constant && p.mode != isa::PadParams::Mode::Edge &&
      p.mode != isa::PadParams::Mode::Reflect && p.mode != isa::PadParams::Mode::Wrap) {
    fault("unknown pad mode {}", static_cast<int>(p.mode));
  }
  std::vector<std::vector<std::int64_t>> tables(p.begins.size());
  for (std::size_t d = 0; d < tables.size(); ++d) {
    const std::int64_t n = xref.shape[d];
    if (p.mode != isa::PadParams::Mode::Constant && n == 0 && yref.shape[d] > 0) {
      fault("dim {} of {} is empty: only the constant mode can pad it", d, describe("input 0", xref));
    }
    if (p.begins[d] < -n || p.begins[d] > yref.shape[d]) {
      fault("begins[{}] = {} does not fit {} and {}", d, p.begins[d], describe("input 0", xref),
            describe("output 0", yref));
    }
    for (std::int64_t o = 0; o < yref.shape[d]; ++o) tables[d].push_back(host::pad_source(p.mode, o, p.begins[d], n));
  }
  const auto fill = static_cast<std::byte>(static_cast<std::uint8_t>(p.value & 0xff));
  gather_by_tables(kernel, region, tables, &fill);
}

// LowLevelTranspose: output dim d is input dim perm[d].
void transpose(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::TransposeParams>(kernel);
  require_arity(kernel, 1, 1);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  locate(region, xref, "input 0");
  std::byte* yptr = locate(region, yref, "output 0");
  require_same_dtype(yref, "output 0", xref, "input 0");
  const std::size_t rank = xref.shape.size();
  if (p.perm.size() != rank) {
    fault("perm has {} entries but {} has rank {}", p.perm.size(), describe("input 0", xref), rank);
  }
  std::vector<bool> seen(rank, false);
  Shape expected(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    const std::int64_t axis = p.perm[d];
    if (axis < 0 || axis >= static_cast<std::int64_t>(rank) ||
        seen[static_cast<std::size_t>(axis)]) {
      fault("perm {} is not a permutation of 0..{}", shape_to_string(p.perm), rank - 1);
    }
    seen[static_cast<std::size_t>(axis)] = true;
    expected[d] = xref.shape[static_cast<std::size_t>(axis)];
  }
  if (yref.shape != expected) {
    fault("{} must have shape {} (input 0 permuted by {})", describe("output 0", yref),
          shape_to_string(expected), shape_to_string(p.perm));
  }
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  const std::vector<std::int64_t> xs = layout_strides(xref);
  std::vector<std::int64_t> src_strides(rank);
  for (std::size_t d = 0; d < rank; ++d) src_strides[d] = xs[static_cast<std::size_t>(p.perm[d])];
  // Walks the output in its own order: writes are sequential, reads gather.
  if (!copy_block(yptr, xptr, Block{yref.shape, layout_strides(yref), src_strides},
                  dtype_size(xref.dtype), nullptr, dst_rows(yref))) {
    clear_row_padding(yptr, yref);
  }
}

// LowLevelRequantize: DequantizeLinear then QuantizeLinear in float32, element for element, or
// the 256-entry table the compiler computed (RequantizeParams::table).
// Every 8-bit input value maps to one output value, so the formula is evaluated once per
// possible input value into a table and the copy maps elements through it.
void requantize(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::RequantizeParams>(kernel);
  require_arity(kernel, 1, 1);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  locate(region, xref, "input 0");
  std::byte* yptr = locate(region, yref, "output 0");
  require_8bit(xref, "input 0");
  require_8bit(yref, "output 0");
  if (xref.shape != yref.shape) {
    fault("{} must have the shape of {}", describe("output 0", yref), describe("input 0", xref));
  }
  require_scale(p.x.scale, "x_scale");
  require_scale(p.y.scale, "y_scale");
  require_zero_point(p.x.zero_point, xref.dtype, "x_zero_point");
  require_zero_point(p.y.zero_point, yref.dtype, "y_zero_point");

  if (!p.table.empty() && p.table.size() != 256) {
    fault("requantization table has {} entries; expected 0 or 256", p.table.size());
  }
  // Without a table: DequantizeLinear then QuantizeLinear in float32 (isa.h), as a table.
  host::LookupTable lut{};
  if (!p.table.empty()) {
    std::copy(p.table.begin(), p.table.end(), lut.begin());
  } else {
    // Copies, not structured bindings: clang 14 (the fuzz and tidy trees) cannot capture those.
    const auto range = isa::quant_range(yref.dtype);
    const std::int32_t qmin = range[0], qmax = range[1];
    lut = host::build_lookup_table(xref.dtype, yref.dtype, [&](std::int32_t x) {
      const float f = static_cast<float>(x - p.x.zero_point) * p.x.scale;
      return host::quantize_value(f / p.y.scale, p.y.zero_point, qmin, qmax);
    });
  }
  std::vector<std::byte> scratch;
  const std::byte* xptr = readable(region, xref, kernel.outputs, scratch);
  if (!copy_block(yptr, xptr, Block{yref.shape, layout_strides(yref), layout_strides(xref)}, 1,
                  lut.data(), dst_rows(yref))) {
    clear_row_padding(yptr, yref);
  }
}

// LowLevelGlobalAveragePool (com.microsoft QLinearGlobalAveragePool, NCHW).
void global_average_pool(const isa::Kernel& kernel, std::span<std::byte> region) {
  const auto& p = params_of<isa::GlobalAveragePoolParams>(kernel);
  require_arity(kernel, 1, 1);
  const TensorRef& xref = kernel.inputs[0];
  const TensorRef& yref = kernel.outputs[0];
  locate(region, xref, "input 0");
  std::byte* yptr = locate(region, yref, "output 0");
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
  const auto range = isa::quant_range(yref.dtype);  // (no structured binding: clang 14 cannot capture one)
  // The stored (sum of values - zero point terms) as the output byte: the float requantization,
  // or TFLite's integer mean of the raw sum.
  auto result = [&](std::int32_t sum) -> std::int32_t {
    if (!integer_mean) return isa::requantize(sum, mult, p.y.zero_point, std::get<0>(range), std::get<1>(range));
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
      integer_mean ? 0u : static_cast<std::uint32_t>(p.x.zero_point) * static_cast<std::uint32_t>(H * W);
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

}  // namespace

namespace {

// sim-bench's per-kind counters (kernels.h: set_kernel_stats_enabled).
struct AtomicKindStats {
  std::atomic<std::uint64_t> calls{0}, ns{0}, macs{0};
};
std::atomic<bool> g_stats_enabled{false};
std::array<AtomicKindStats, kKernelKindCount> g_stats;

void dispatch(const isa::Kernel& kernel, std::span<std::byte> region, const KernelPlan* plan) {
  switch (kernel.kind) {
    case isa::KernelKind::Conv2d: return conv2d(kernel, region, false, plan);
    case isa::KernelKind::DepthwiseConv2d: return conv2d(kernel, region, true, plan);
    case isa::KernelKind::MaxPool: return maxpool(kernel, region);
    case isa::KernelKind::MatMul: return matmul(kernel, region, plan);
    case isa::KernelKind::Add: return add(kernel, region);
    case isa::KernelKind::Reshape: return reshape(kernel, region);
    case isa::KernelKind::Requantize: return requantize(kernel, region);
    case isa::KernelKind::Concat: return concat(kernel, region);
    case isa::KernelKind::Transpose: return transpose(kernel, region);
    case isa::KernelKind::Split: return split(kernel, region);
    case isa::KernelKind::GlobalAveragePool: return global_average_pool(kernel, region);
    case isa::KernelKind::Resize: return resize(kernel, region);
    case isa::KernelKind::Slice: return slice(kernel, region);
    case isa::KernelKind::Pad: return pad(kernel, region);
    case isa::KernelKind::Mul: return mul(kernel, region);
    case isa::KernelKind::Sub: return sub(kernel, region);
  }
  fault("unknown kernel kind {}", static_cast<int>(kernel.kind));
}

void timed_dispatch(const isa::Kernel& kernel, std::span<std::byte> region,
                    const KernelPlan* plan) {
  if (!g_stats_enabled.load(std::memory_order_relaxed)) return dispatch(kernel, region, plan);
  const auto start = std::chrono::steady_clock::now();
  dispatch(kernel, region, plan);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  const auto kind = static_cast<std::size_t>(kernel.kind);
  if (kind < kKernelKindCount) {
    g_stats[kind].calls.fetch_add(1, std::memory_order_relaxed);
    g_stats[kind].ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
    g_stats[kind].macs.fetch_add(isa::kernel_macs(kernel), std::memory_order_relaxed);
  }
}

// [address, address + size) ranges.
bool range_overlaps(std::uint64_t a, std::uint64_t sa, std::uint64_t b, std::uint64_t sb) {
  return sa > 0 && sb > 0 && a < b + sb && b < a + sa;
}

}  // namespace

// The plans of a program's kernels, by kernel index (null: nothing prepared, the kernel is
// validated and packed when it runs).
class PreparedProgram {
 public:
  std::uint64_t dram_bytes = 0;
  std::vector<std::unique_ptr<KernelPlan>> plans;
};

std::shared_ptr<const PreparedProgram> prepare_program(const isa::Program& program) {
  auto prepared = std::make_shared<PreparedProgram>();
  prepared->dram_bytes = program.dram_bytes;
  prepared->plans.resize(program.kernels.size());
  // Plans are the same for every level: made when the level in use runs conv or matmul fast.
  const fast::Kernels* fk = fast_kernels();
  if (fk == nullptr || (fk->conv == nullptr && fk->matmul == nullptr)) return prepared;
  // Constant operands are packed from program.constants, which is what the region holds at
  // load. That stays true while nothing writes over them: no kernel output and no program input
  // (written by Load) may touch a packed operand's bytes, otherwise that kernel is left to be
  // packed when it runs.
  struct Range {
    std::uint64_t address, size;
  };
  std::vector<Range> written;
  for (const auto& k : program.kernels) {
    for (const auto& out : k.outputs) written.push_back({out.address, out.size_bytes()});
  }
  for (const auto& in : program.inputs) written.push_back({in.address, in.size_bytes()});
  auto frozen = [&](const TensorRef& ref) {
    const std::uint64_t size = ref.size_bytes();
    for (const Range& w : written) {
      if (range_overlaps(ref.address, size, w.address, w.size)) return false;
    }
    return true;
  };
  const Readable constants{program.constants.data(), program.constants.size()};
  for (std::size_t i = 0; i < program.kernels.size(); ++i) {
    const isa::Kernel& kernel = program.kernels[i];
    try {
      auto plan = std::make_unique<KernelPlan>();
      plan->kernel = &kernel;
      if (kernel.kind == isa::KernelKind::Conv2d ||
          kernel.kind == isa::KernelKind::DepthwiseConv2d) {
        const ConvDesc d = validate_conv(kernel, kernel.kind == isa::KernelKind::DepthwiseConv2d,
                                         program.dram_bytes, constants);
        if (!frozen(d.p->weight) || (d.p->bias && !frozen(*d.p->bias)) || !fast_conv_fits(d))
          continue;
        plan->conv = make_conv_plan(d);
      } else if (kernel.kind == isa::KernelKind::MatMul) {
        const MatMulDesc d = validate_matmul(kernel, program.dram_bytes, constants);
        if (!frozen(d.p->b) || !fast_matmul_fits(d)) continue;
        plan->matmul = make_matmul_plan(d, kernel);
      } else {
        continue;
      }
      prepared->plans[i] = std::move(plan);
    } catch (const Error&) {
      // Malformed: run_kernel reports it when the kernel runs.
    } catch (const NotResident&) {
      // Operands outside the constants: packed when the kernel runs.
    }
  }
  return prepared;
}

void run_kernel(const isa::Kernel& kernel, std::span<std::byte> region,
                const PreparedProgram* prepared, std::size_t index) {
  const KernelPlan* plan = nullptr;
  if (prepared != nullptr && index < prepared->plans.size() &&
      region.size() == prepared->dram_bytes) {
    plan = prepared->plans[index].get();
    if (plan != nullptr && plan->kernel != &kernel) plan = nullptr;  // not this program's kernel
  }
  timed_dispatch(kernel, region, plan);
}

void run_kernel(const isa::Kernel& kernel, std::span<std::byte> region) {
  timed_dispatch(kernel, region, nullptr);
}

void set_fast_kernels_enabled(bool enabled) noexcept {
  g_fast_enabled.store(enabled, std::memory_order_relaxed);
}

bool fast_kernels_active() noexcept { return use_fast(); }

bool set_fast_kernels_level(SimIsa isa) noexcept {
  if (isa != SimIsa::Auto && isa != SimIsa::Portable && !fast::cpu_has(isa)) return false;
  g_forced_level.store(isa, std::memory_order_relaxed);
  return true;
}

}  // namespace furiosa::device::sim

namespace furiosa::device {

std::string_view sim_isa_name(SimIsa isa) noexcept {
  switch (isa) {
    case SimIsa::Auto: return "auto";
    case SimIsa::Portable: return "portable";
    case SimIsa::Avx2: return "avx2";
    case SimIsa::AvxVnni: return "avx-vnni";
    case SimIsa::Avx512Vnni: return "avx512-vnni";
    case SimIsa::Avx512: return "avx512";
    case SimIsa::Neon: return "neon";
    case SimIsa::NeonDotprod: return "neon-dotprod";
  }
  return "?";
}

SimIsa parse_sim_isa(std::string_view text) {
  for (SimIsa isa : {SimIsa::Auto, SimIsa::Portable, SimIsa::Avx2, SimIsa::AvxVnni,
                     SimIsa::Avx512Vnni, SimIsa::Avx512, SimIsa::Neon, SimIsa::NeonDotprod}) {
    if (text == sim_isa_name(isa)) return isa;
  }
  if (text == "avx512-vnni-vbmi") return SimIsa::Avx512;  // the name before the ladder
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("'{}' is not a simulator ISA level (auto, portable, avx2, avx-vnni, "
                          "avx512-vnni, avx512, neon, neon-dotprod)",
                          escape_text(text, 64)));
}

std::vector<SimIsa> sim_cpu_isa_levels() {
  std::vector<SimIsa> levels;
  for (SimIsa isa : {SimIsa::Portable, SimIsa::Avx2, SimIsa::AvxVnni, SimIsa::Avx512Vnni,
                     SimIsa::Avx512, SimIsa::Neon, SimIsa::NeonDotprod}) {
    if (sim::fast::cpu_has(isa)) levels.push_back(isa);
  }
  return levels;
}

SimIsa sim_isa_from_environment() {
  const char* text = std::getenv("FURIOSA_SIM_ISA");
  if (text == nullptr || *text == '\0') return SimIsa::Auto;
  SimIsa isa = SimIsa::Auto;
  try {
    isa = parse_sim_isa(text);
  } catch (const Error& e) {
    throw Error(ErrorCode::InvalidArgument, fmt::format("FURIOSA_SIM_ISA: {}", e.message()));
  }
  if (isa != SimIsa::Auto && !sim::fast::cpu_has(isa)) {
    std::string has;
    for (SimIsa level : sim_cpu_isa_levels()) {
      has += has.empty() ? "" : ", ";
      has += sim_isa_name(level);
    }
    // A level of the other architecture says so (x86-64 levels on aarch64 and vice versa).
    const std::string_view arch = sim::fast::isa_arch(isa);
    const std::string_view host = sim::fast::isa_arch(SimIsa::Auto);
    const std::string why = arch != host ? fmt::format("an {} level, and this is an {} build", arch,
                                                       host.empty() ? "other" : host)
                                         : std::string("this CPU lacks that level");
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("FURIOSA_SIM_ISA={}: {} (it has: {})", sim_isa_name(isa), why, has));
  }
  return isa;
}

std::string_view sim_active_isa() noexcept {
  const sim::fast::Kernels* fk = sim::fast_kernels();
  return sim_isa_name(fk != nullptr ? fk->isa : SimIsa::Portable);
}

}  // namespace furiosa::device

namespace furiosa::device::sim {

void set_kernel_stats_enabled(bool enabled) noexcept {
  g_stats_enabled.store(enabled, std::memory_order_relaxed);
}

std::array<KernelKindStats, kKernelKindCount> kernel_stats() noexcept {
  std::array<KernelKindStats, kKernelKindCount> out{};
  for (std::size_t i = 0; i < kKernelKindCount; ++i) {
    out[i].calls = g_stats[i].calls.load(std::memory_order_relaxed);
    out[i].ns = g_stats[i].ns.load(std::memory_order_relaxed);
    out[i].macs = g_stats[i].macs.load(std::memory_order_relaxed);
  }
  return out;
}

void reset_kernel_stats() noexcept {
  for (auto& s : g_stats) {
    s.calls.store(0, std::memory_order_relaxed);
    s.ns.store(0, std::memory_order_relaxed);
    s.macs.store(0, std::memory_order_relaxed);
  }
}

}  // namespace furiosa::device::sim
