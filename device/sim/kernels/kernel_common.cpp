// The validation helpers shared by the simulator's kernel families (kernel_common.h documents
// them): dtypes, layouts, quantization parameters, windows and rank-4 activations, and the
// per-thread input snapshot of the fast kernels.
#include "kernel_common.h"

#include <cmath>
#include <string>
#include <vector>

namespace furiosa::device::sim::detail {

std::string describe(std::string_view role, const TensorRef& ref) {
  return fmt::format("{} {} {} {} at 0x{:x}", role, shape_to_string(ref.shape),
                     dtype_name(ref.dtype), isa::layout_name(ref.layout), ref.address);
}

void require_8bit(const TensorRef& ref, std::string_view role) {
  if (!is_8bit(ref.dtype)) fault("{} must be uint8 or int8", describe(role, ref));
}

void require_linear(const TensorRef& ref, std::string_view role) {
  if (ref.layout != Layout::Linear) fault("{} must be linear", describe(role, ref));
}

void require_scale(float scale, std::string_view what) {
  if (!(scale > 0.0f) || !std::isfinite(scale))
    fault("{} {} is not a positive finite scale", what, scale);
}

void require_zero_point(std::int32_t zero_point, DType dtype, std::string_view what) {
  const auto [lo, hi] = isa::quant_range(dtype);
  if (zero_point < lo || zero_point > hi) {
    fault("{} {} is outside the {} range [{}, {}]", what, zero_point, dtype_name(dtype), lo, hi);
  }
}

void require_per_channel_size(std::size_t size, std::int64_t channels, std::string_view what) {
  if (size != 1 && static_cast<std::int64_t>(size) != channels) {
    fault("{} has {} values; expected 1 or {}", what, size, channels);
  }
}

void require_multiplier(const isa::QuantizedMultiplier& m, std::string_view what) {
  const bool significand_ok = m.multiplier == 0 || m.multiplier >= (std::int32_t{1} << 30);
  if (!significand_ok || m.shift < -31 || m.shift > 30) {
    fault(
        "{} (multiplier {}, shift {}) is not a fixed-point multiplier: multiplier must be 0 or in "
        "[2^30, 2^31), shift in [-31, 30]",
        what, m.multiplier, m.shift);
  }
}

void require_output_range(std::int32_t out_min, std::int32_t out_max, DType dtype) {
  const auto [lo, hi] = isa::quant_range(dtype);
  if (out_min < lo || out_max > hi || out_min > out_max) {
    fault("output range [{}, {}] must be a non-empty range inside the {} range [{}, {}]", out_min,
          out_max, dtype_name(dtype), lo, hi);
  }
}

void require_fixed_point(const isa::FixedPointRequant& f, std::int64_t channels, DType dtype) {
  if (f.multipliers.empty()) fault("fixed-point requantization has no multipliers");
  require_per_channel_size(f.multipliers.size(), channels, "fixed-point multipliers");
  for (std::size_t i = 0; i < f.multipliers.size(); ++i) {
    require_multiplier(f.multipliers[i], fmt::format("fixed-point multiplier {}", i));
  }
  require_output_range(f.out_min, f.out_max, dtype);
}

Act4 activation_shape(const TensorRef& ref, std::string_view role) {
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

Act4 activation(std::span<std::byte> region, const TensorRef& ref, std::string_view role) {
  Act4 a = activation_shape(ref, role);
  a.base = region.data() + ref.address;
  return a;
}

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

void require_same_dtype(const TensorRef& ref, std::string_view role, const TensorRef& other,
                        std::string_view other_role) {
  if (ref.dtype != other.dtype) {
    fault("{} must have the dtype of {}", describe(role, ref), describe(other_role, other));
  }
}

const std::byte* fast_input(std::span<std::byte> region, const TensorRef& in,
                            const TensorRef& out) {
  const std::byte* ptr = region.data() + in.address;
  if (!overlaps(in, out)) return ptr;
  thread_local std::vector<std::byte> snapshot;
  snapshot.assign(ptr, ptr + in.size_bytes());
  return snapshot.data();
}

}  // namespace furiosa::device::sim::detail
