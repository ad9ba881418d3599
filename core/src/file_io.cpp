// read_regular_file, write_file_atomically, process_label and read_file_prefix (file_io.h).
#include "furiosa/core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <system_error>

#include "furiosa/core/text.h"

namespace furiosa {
namespace {

/// An open file descriptor, closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) noexcept : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

/// O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
int open_nonblocking(const std::filesystem::path& path) noexcept {
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
}

std::string_view kind_of(mode_t mode) noexcept {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

}  // namespace

std::string read_regular_file(const std::filesystem::path& path, ErrorCode code, std::string_view what) {
  const std::string shown = escape_text(path.string());
  const auto fail = [&](const std::string& message) {
    return Error(code, message, ErrorSubject::of_file(path.string()));
  };
  const Fd fd(open_nonblocking(path));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) throw fail(fmt::format("{} '{}' does not exist", what, shown));
    throw fail(fmt::format("cannot read {} '{}': {}", what, shown, std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw fail(fmt::format("cannot read {} '{}': {}", what, shown, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw fail(fmt::format("{} '{}' is not a regular file ({})", what, shown, kind_of(st.st_mode)));
  }
  std::string bytes;
  bytes.reserve(static_cast<std::size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw fail(fmt::format("cannot read {} '{}': {}", what, shown, std::strerror(errno)));
    }
    bytes.append(buffer, static_cast<std::size_t>(n));
  }
  return bytes;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes,
                           ErrorCode code, std::string_view what) {
  static std::atomic<std::uint64_t> counter{0};
  std::filesystem::path tmp = path;
  tmp += fmt::format(".tmp.{}.{}.{}", ::getpid(), counter.fetch_add(1), std::random_device{}());
  bool created = false;
  const auto fail = [&](const std::string& why) {
    std::error_code ignored;
    if (created) std::filesystem::remove(tmp, ignored);
    return Error(code,
                 fmt::format("{}: cannot write the {}: {}", escape_text(path.string()), what, why),
                 ErrorSubject::of_file(path.string()));
  };
  {
    const Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666));
    if (fd.get() < 0) throw fail(std::strerror(errno));
    created = true;
    std::size_t written = 0;
    while (written < bytes.size()) {
      const ssize_t n = ::write(fd.get(), bytes.data() + written, bytes.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw fail(n < 0 ? std::strerror(errno) : "write failed");
      written += static_cast<std::size_t>(n);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw fail(ec.message());
}

std::string process_label(long pid) {
  std::string name = read_file_prefix(fmt::format("/proc/{}/comm", pid), 64);
  while (!name.empty() && (name.back() == '\n' || name.back() == '\0')) name.pop_back();
  if (name.empty()) return fmt::format("process {}", pid);
  return fmt::format("process {} '{}'", pid, escape_text(name, 32));
}

std::string read_file_prefix(const std::filesystem::path& path, std::size_t count) noexcept {
  try {
    const Fd fd(open_nonblocking(path));
    struct stat st {};
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
    std::string head(count, '\0');
    std::size_t got = 0;
    while (got < count) {
      const ssize_t n = ::read(fd.get(), head.data() + got, count - got);
      if (n == 0) break;
      if (n < 0) {
        if (errno == EINTR) continue;
        return {};
      }
      got += static_cast<std::size_t>(n);
    }
    head.resize(got);
    return head;
  } catch (...) {
    return {};
  }
}

}  // namespace furiosa
