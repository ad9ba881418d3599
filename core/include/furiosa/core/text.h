// Text from users' files and arguments, made safe to print in a one-line message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace furiosa {

/// `text` as it may appear inside a one-line message: control bytes (0x00-0x1f, 0x7f),
/// backslashes and bytes that are not part of valid UTF-8 become "\xNN" escapes, so a name
/// from a model file or an environment variable can neither start a new line, move the cursor
/// (ESC), cut the message (NUL) nor break a UTF-8 terminal; valid UTF-8 (e.g. non-Latin node
/// names) is kept. At most `max_bytes` input bytes are shown, then "..." (the cut never splits
/// a character). Thread-safe, never throws beyond std::bad_alloc.
std::string escape_text(std::string_view text, std::size_t max_bytes = 256);

/// `text` made one line for a terminal, whatever it holds: control bytes and bytes that are not
/// part of valid UTF-8 become "\xNN" as in escape_text, but backslashes are kept and nothing is
/// cut, so text that is already escaped (or has no control bytes) comes back unchanged. The last
/// line of defence for whole messages (furiosa::Error applies it to every message); names taken
/// from files should still go through escape_text, which also makes a literal "\x0a" in a name
/// distinguishable from a newline. Thread-safe, never throws beyond std::bad_alloc.
std::string one_line(std::string_view text);

}  // namespace furiosa
