// Repository fingerprints and rescan plans (repository_poll.h).
#include "repository_poll.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <system_error>

#include "furiosa/core/error.h"

namespace furiosa::server {
namespace fs = std::filesystem;
namespace {

/// One entry, read with lstat: "relative|type|size|mtime_ns;"; "" when it is gone.
std::string describe_entry(const fs::path& path, const std::string& relative, bool* is_dir) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "";
  const char type = S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : S_ISREG(st.st_mode) ? 'f' : 'o';
  if (is_dir) *is_dir = type == 'd';
  const long long mtime_ns =
      static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000LL + st.st_mtim.tv_nsec;
  return fmt::format("{}|{}|{}|{};", relative, type, static_cast<long long>(st.st_size), mtime_ns);
}

/// The sorted entries of the real folder `dir` (not a link), errors skipped.
std::vector<fs::path> entries_of(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string fingerprint_of(const fs::path& model_dir) {
  bool is_dir = false;
  std::string out = describe_entry(model_dir, ".", &is_dir);
  if (!is_dir) return out;  // a link to a folder: the link alone
  for (const auto& entry : entries_of(model_dir)) {
    const std::string name = entry.filename().string();
    bool sub_dir = false;
    out += describe_entry(entry, name, &sub_dir);
    if (!sub_dir) continue;
    for (const auto& file : entries_of(entry))
      out += describe_entry(file, name + "/" + file.filename().string(), nullptr);
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> repository_fingerprints(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("model repository '{}' is not a folder", dir.string()),
                ErrorSubject::of_file(dir.string()));
  }
  std::map<std::string, std::string> out;
  for (const auto& model_dir : entries_of(dir)) {
    // The folders scan_model_repository() takes (a link to a folder too: stat, not read).
    if (!fs::is_directory(model_dir, ec)) continue;
    out[model_dir.filename().string()] = fingerprint_of(model_dir);
  }
  return out;
}

RescanPlan plan_rescan(const std::map<std::string, std::string>& before,
                       const std::map<std::string, std::string>& now) {
  RescanPlan plan;
  for (const auto& [name, fingerprint] : now) {
    const auto it = before.find(name);
    if (it == before.end()) {
      plan.load.push_back(name);
    } else if (it->second != fingerprint) {
      plan.reload.push_back(name);
    }
  }
  for (const auto& [name, fingerprint] : before) {
    if (!now.count(name)) plan.unload.push_back(name);
  }
  return plan;
}

}  // namespace furiosa::server
