// See output_file.h.
#include "output_file.h"

#include <fmt/format.h>

#include <sstream>

#include "furiosa/core/error.h"
#include "furiosa/core/file_io.h"

namespace furiosa::profiler::detail {

void write_output_file(const std::filesystem::path& path, std::string_view what,
                       const std::function<void(std::ostream&)>& write) {
  // Written whole, then renamed into place (write_file_atomically): a reader such as a viewer
  // polling the file never sees half a trace, and a link planted at the temporary name in a
  // shared directory is never written through.
  std::ostringstream out;
  write(out);
  write_file_atomically(path, out.view(), ErrorCode::IoError, what);
}

}  // namespace furiosa::profiler::detail
