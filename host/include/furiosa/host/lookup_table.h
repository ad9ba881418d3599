// The one builder of 256-entry lookup tables: an element-wise map from one 8-bit quantized tensor
// to another, written out for every possible input byte. The NPU's LowLevelRequantize runs any such
// map by table (isa::RequantizeParams::table, the furiosa::Requantize node's `table` attribute), so
// every rule that is a function of one quantized value becomes a table here:
//  - the ONNX rule, DequantizeLinear then QuantizeLinear in float32 rounded half to even (the
//    simulator's Requantize without a table; QDQ regions and activation tables in the compiler);
//  - TFLite's rules (the importer): QUANTIZE between 8-bit types (fixed-point multiplier),
//    LOGISTIC (float sigmoid rounded half away from zero), CONCATENATION's rescaling and the
//    clamp of a fused activation.
// The table's layout is fixed here and nowhere else: entry b belongs to the input element whose
// stored byte is b, and holds the stored byte of the output.
#pragma once

#include <array>
#include <cstdint>
#include <functional>

#include "furiosa/core/tensor.h"

namespace furiosa::host {

/// A table of an element-wise map between 8-bit tensors: entry b is the output's stored byte for
/// the input element whose stored byte is b (an int8 byte is the value's two's complement, so
/// entry 0x80 belongs to -128 and entry 0xFF to -1).
using LookupTable = std::array<std::uint8_t, 256>;

/// The value an input byte stands for in 8-bit type `dtype`: `byte` for UInt8, the two's
/// complement value (byte - 256 from 128 on) for Int8. The caller passes an 8-bit type.
constexpr std::int32_t lookup_table_input(DType dtype, std::uint8_t byte) noexcept {
  return dtype == DType::Int8 ? std::int32_t{static_cast<std::int8_t>(byte)} : std::int32_t{byte};
}

/// The table of `f`, a map from input values to output values: entry b is
/// f(lookup_table_input(x_dtype, b)) saturated to y_dtype's range ([0, 255] or [-128, 127]) and
/// stored as y_dtype's byte. The builder itself does no rounding and no arithmetic besides that
/// saturation: f applies its rule's rounding (the header comment lists the rules in use) and
/// returns an integer, which may lie outside the output range. f is called once per entry, in
/// byte order 0 to 255. Throws Error(InvalidArgument) naming the dtype when x_dtype or y_dtype
/// is not uint8/int8.
LookupTable build_lookup_table(DType x_dtype, DType y_dtype, const std::function<std::int32_t(std::int32_t)>& f);

}  // namespace furiosa::host
