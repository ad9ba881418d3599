// TFLite's QuantizeMultiplier (host/fixed_point.h).
#include "furiosa/host/fixed_point.h"

#include <fmt/format.h>

#include <cmath>

#include "furiosa/core/error.h"

namespace furiosa::host {

QuantizedMultiplier quantize_multiplier(double real_multiplier) {
  if (!std::isfinite(real_multiplier) || real_multiplier < 0.0) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("requantization multiplier {} must be finite and >= 0", real_multiplier));
  }
  if (real_multiplier == 0.0) return {};
  int exponent = 0;
  const double significand = std::frexp(real_multiplier, &exponent);  // in [0.5, 1)
  auto fixed = static_cast<std::int64_t>(std::round(significand * static_cast<double>(std::int64_t{1} << 31)));
  if (fixed == (std::int64_t{1} << 31)) {
    fixed /= 2;
    ++exponent;
  }
  if (exponent < -31) return {};  // every product would shift out: flushed to zero
  if (exponent > 30) return {INT32_MAX, 30};
  return {static_cast<std::int32_t>(fixed), exponent};
}

}  // namespace furiosa::host
