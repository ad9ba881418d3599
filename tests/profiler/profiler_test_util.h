// Helpers shared by the profiler tests: scratch files and reading back JSON.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include <nlohmann/json.hpp>

namespace furiosa::profiler::testing {

/// A path in the temp directory, unique per process and call, ending in `extension`; the file is
/// removed on scope exit.
class TempFile {
 public:
  explicit TempFile(std::string_view stem, std::string_view extension = ".json") {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            (std::string("furiosa-profiler-test-") + std::string(stem) + "-" +
             std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)) + std::string(extension));
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

/// Parses the JSON file at `path`; throws when it is missing or malformed.
inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return nlohmann::json::parse(in);
}

}  // namespace furiosa::profiler::testing
