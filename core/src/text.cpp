// escape_text and one_line (text.h).
#include "furiosa/core/text.h"

namespace furiosa {
namespace {

/// Length of the valid UTF-8 sequence starting at text[i] (2-4), or 0 when there is none
/// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
std::size_t utf8_sequence(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (lead >= 0xc2 && lead <= 0xdf) len = 2;
  else if (lead >= 0xe0 && lead <= 0xef) {
    len = 3;
    if (lead == 0xe0) lo = 0xa0;
    if (lead == 0xed) hi = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    len = 4;
    if (lead == 0xf0) lo = 0x90;
    if (lead == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  }
  return len;
}

// escape_text and one_line: `keep_backslash` leaves '\\' as it is (one_line, which must not
// escape again what escape_text escaped).
std::string escape(std::string_view text, std::size_t max_bytes, bool keep_backslash) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() < max_bytes ? text.size() : max_bytes);
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = 1;
    if (c >= 0x80) len = utf8_sequence(text, i);
    if (i + (len == 0 ? 1 : len) > max_bytes) break;
    if (c >= 0x20 && c < 0x7f && (c != '\\' || keep_backslash)) {
      out += static_cast<char>(c);
    } else if (len >= 2) {
      out.append(text.substr(i, len));
    } else {
      len = 1;
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
    i += len;
  }
  if (i < text.size()) out += "...";
  return out;
}

}  // namespace

std::string escape_text(std::string_view text, std::size_t max_bytes) {
  return escape(text, max_bytes, false);
}

std::string one_line(std::string_view text) { return escape(text, text.size(), true); }

}  // namespace furiosa
