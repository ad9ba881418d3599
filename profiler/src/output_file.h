// Writing a profiler output file (trace, record table) with one error rule.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string_view>

namespace furiosa::profiler::detail {

/// Lets `write` fill a buffer, then writes it to `path` atomically (core's
/// write_file_atomically: a temporary file renamed over `path`). Throws Error(IoError) naming
/// `what` ("trace file", "record table") and the path, with the OS reason, when the file cannot
/// be written.
void write_output_file(const std::filesystem::path& path, std::string_view what,
                       const std::function<void(std::ostream&)>& write);

}  // namespace furiosa::profiler::detail
