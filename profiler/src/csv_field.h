// One CSV field, for the profiler's CSV writers (record table, operator analysis).
#pragma once

#include <string>
#include <string_view>

namespace furiosa::profiler::detail {

/// Appends `field` to `line` as one CSV field: as is, or quoted with its quotes doubled when it
/// holds a comma, quote or line break (RFC 4180).
inline void append_csv_field(std::string& line, std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    line += field;
    return;
  }
  line += '"';
  for (const char c : field) {
    if (c == '"') line += '"';
    line += c;
  }
  line += '"';
}

}  // namespace furiosa::profiler::detail
