// Private to the device module: the small scanners DeviceFile::parse (device.cpp) and the
// device-spec parser (device_spec.cpp) share.
#pragma once

#include <charconv>
#include <cstddef>
#include <string_view>

namespace furiosa::device::detail {

/// Consumes `prefix` from the front of `text`; false (text unchanged) when it is not there.
inline bool consume(std::string_view& text, std::string_view prefix) {
  if (!text.starts_with(prefix)) return false;
  text.remove_prefix(prefix.size());
  return true;
}

/// Consumes a run of 1..6 decimal digits (no sign, so never negative) into `value`; false when
/// there is none or it is longer, which no real card or PE index needs and which keeps the
/// value far from int overflow.
inline bool consume_number(std::string_view& text, int& value) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 6) return false;
  std::from_chars(text.data(), text.data() + digits, value);
  text.remove_prefix(digits);
  return true;
}

}  // namespace furiosa::device::detail
