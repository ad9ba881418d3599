// Writing a profiler output file (trace, record table) with one error rule.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string_view>

namespace furiosa::profiler::detail {

/// Creates or truncates `path` and lets `write` fill it. Throws Error(IoError) naming `what`
/// ("trace file", "record table") and the path, with the OS reason, when the file cannot be
/// opened or written.
void write_output_file(const std::filesystem::path& path, std::string_view what,
                       const std::function<void(std::ostream&)>& write);

}  // namespace furiosa::profiler::detail
