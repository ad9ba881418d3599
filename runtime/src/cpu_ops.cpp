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
#include "furiosa/host/layout.h"
#include "furiosa/host/quantize.h"

namespace furiosa::runtime::detail {
namespace {

/// The parameter axis of a Quantize/Dequantize step: op.axis when it has one parameter per index
/// of that axis, -1 (per tensor) when it has one.
std::int64_t param_axis(const program::CpuOp& op) { return op.scales.size() > 1 ? op.axis : -1; }

// Quantizes / dequantizes block by block with the project's one rule (host/quantize.h): the
// whole tensor at once for per-tensor parameters, one run per parameter index for per-axis ones.
template <class Q>
void quantize(const program::CpuOp& op, const Shape& shape, const float* x, Q* y) {
  const host::Rounding rounding =
      op.round_half_away_from_zero ? host::Rounding::HalfAwayFromZero : host::Rounding::HalfToEven;
  host::for_each_quant_block(shape, param_axis(op), [&](std::int64_t at, std::int64_t len, std::int64_t k) {
    const auto c = static_cast<std::size_t>(k);
    host::quantize(x + at, y + at, len, op.scales[c], op.zero_points[c], rounding);
  });
}

template <class Q>
void dequantize(const program::CpuOp& op, const Shape& shape, const Q* x, float* y) {
  host::for_each_quant_block(shape, param_axis(op), [&](std::int64_t at, std::int64_t len, std::int64_t k) {
    const auto c = static_cast<std::size_t>(k);
    host::dequantize(x + at, y + at, len, op.scales[c], op.zero_points[c]);
  });
}

}  // namespace

void run_host_step(const program::CpuOp& op, const program::HostSlot& in_slot,
                std::span<const std::byte> in, const program::HostSlot& out_slot,
                std::span<std::byte> out) {
  const Shape& s = in_slot.shape;
  switch (op.kind) {
    case program::CpuOpKind::Quantize: {
      const auto* x = reinterpret_cast<const float*>(in.data());
      if (out_slot.dtype == DType::UInt8) quantize(op, s, x, reinterpret_cast<std::uint8_t*>(out.data()));
      else if (out_slot.dtype == DType::Int8) quantize(op, s, x, reinterpret_cast<std::int8_t*>(out.data()));
      else throw Error(ErrorCode::Internal, "Quantize: output must be uint8 or int8");
      return;
    }
    case program::CpuOpKind::Dequantize: {
      auto* y = reinterpret_cast<float*>(out.data());
      switch (in_slot.dtype) {
        case DType::UInt8: dequantize(op, s, reinterpret_cast<const std::uint8_t*>(in.data()), y); return;
        case DType::Int8: dequantize(op, s, reinterpret_cast<const std::int8_t*>(in.data()), y); return;
        case DType::Int32: dequantize(op, s, reinterpret_cast<const std::int32_t*>(in.data()), y); return;
        default: throw Error(ErrorCode::Internal, "Dequantize: input must be uint8, int8 or int32");
      }
    }
    case program::CpuOpKind::Lower:
      if (op.channels_last) {
        if (s.size() != 4 || out_slot.shape != Shape{s[0], s[3], s[1], s[2]}) {
          throw Error(ErrorCode::Internal, "Lower: an NHWC input must be 4-D and the output its NCHW transpose");
        }
        host::lower_nhwc(s, dtype_size(in_slot.dtype), in, out);
        return;
      }
      host::lower(s, dtype_size(in_slot.dtype), in, out);
      return;
    case program::CpuOpKind::Unlower:
      host::unlower(s, dtype_size(in_slot.dtype), in, out);
      return;
    case program::CpuOpKind::External:
      throw Error(ErrorCode::Internal, "external operators run through host::run_cpu_op");
  }
}

}  // namespace furiosa::runtime::detail
