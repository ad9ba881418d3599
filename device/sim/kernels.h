// Private: the simulator's functional kernels (ONNX quantized-operator semantics).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "furiosa/device/isa.h"

namespace furiosa::device::sim {

/// One element of com.microsoft QLinearAdd, next to isa::requantize: both operands are
/// dequantized in float, summed, divided by the output scale, rounded half to even, offset by
/// the output zero point and saturated to [qmin, qmax].
inline std::int32_t qlinear_add(std::int32_t a, const isa::QuantParam& qa, std::int32_t b,
                                const isa::QuantParam& qb, const isa::QuantParam& qy,
                                std::int32_t qmin, std::int32_t qmax) noexcept {
  float va = qa.scale * static_cast<float>(a - qa.zero_point);
  float vb = qb.scale * static_cast<float>(b - qb.zero_point);
  float v = (va + vb) / qy.scale;
  float q = std::nearbyint(v) + static_cast<float>(qy.zero_point);  // half to even
  if (q < static_cast<float>(qmin)) return qmin;
  if (q > static_cast<float>(qmax)) return qmax;
  return static_cast<std::int32_t>(q);
}

/// Executes `kernel` on `region`, the program's DRAM region (TensorRef addresses are offsets
/// into it). Throws Error(DeviceFault) describing the problem when the kernel is malformed: a
/// tensor outside the region, an unsupported dtype/layout, shapes or parameters that do not fit.
/// The caller adds the device, instruction index and node name to the message.
void run_kernel(const isa::Kernel& kernel, std::span<std::byte> region);

}  // namespace furiosa::device::sim
