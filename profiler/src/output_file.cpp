// See output_file.h.
#include "output_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "furiosa/core/error.h"

namespace furiosa::profiler::detail {

void write_output_file(const std::filesystem::path& path, std::string_view what,
                       const std::function<void(std::ostream&)>& write) {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    const int err = errno;
    throw Error(ErrorCode::IoError,
                fmt::format("cannot open {} '{}' for writing{}{}", what, path.string(),
                            err != 0 ? ": " : "", err != 0 ? std::strerror(err) : ""),
                ErrorSubject::of_file(path.string()));
  }
  write(out);
  out.close();
  if (!out) {
    throw Error(ErrorCode::IoError, fmt::format("failed to write {} '{}'", what, path.string()),
                ErrorSubject::of_file(path.string()));
  }
}

}  // namespace furiosa::profiler::detail
