// The lookup-table builder (host/lookup_table.h).
#include "furiosa/host/lookup_table.h"

#include <algorithm>

#include "furiosa/host/quantize.h"

namespace furiosa::host {

LookupTable build_lookup_table(DType x_dtype, DType y_dtype, const std::function<std::int32_t(std::int32_t)>& f) {
  quant_range(x_dtype);  // refuses a type that is not 8-bit
  const auto [lo, hi] = quant_range(y_dtype);
  LookupTable table{};
  for (unsigned b = 0; b < table.size(); ++b) {
    const std::int32_t y = std::clamp(f(lookup_table_input(x_dtype, static_cast<std::uint8_t>(b))), lo, hi);
    table[b] = static_cast<std::uint8_t>(y);  // an int8 value's two's-complement byte
  }
  return table;
}

}  // namespace furiosa::host
