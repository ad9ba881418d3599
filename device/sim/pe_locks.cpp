// System-wide ownership of simulated PEs (pe_locks.h): flock'ed lock files, holders found in
// the kernel's lock table.
//
// The lock directory may sit in a shared place (/tmp), and the process opening a device may be
// root, so nothing in it is trusted before it is checked: the directory is opened without
// following a symbolic link and must be ours with no group or other permission bits (only we
// can then create or replace files in it), and each lock file is opened with O_NOFOLLOW and
// must be a regular file of ours with a single link. The checks are made on the open
// descriptors (fstat), so the objects checked are the objects used.
#include "pe_locks.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "furiosa/core/error.h"
#include "furiosa/core/file_io.h"
#include "furiosa/core/text.h"

namespace furiosa::device::sim {

namespace {

std::string lock_name(int card, int pe) { return fmt::format("npu{}pe{}.lock", card, pe); }

/// Closes a descriptor when it goes out of scope (unless released).
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int release() { return std::exchange(fd, -1); }
};

// What is wrong with the directory `st` describes as a lock directory, empty when nothing is.
std::string dir_problem(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (st.st_uid != ::geteuid())
    return fmt::format("it is owned by uid {}, not by us (uid {})", st.st_uid, ::geteuid());
  if ((st.st_mode & 077) != 0) {
    return fmt::format("its mode {:04o} lets other users in (it must be 0700 or narrower)",
                       st.st_mode & 07777);
  }
  return {};
}

// What is wrong with the lock file `st` describes, empty when nothing is.
std::string file_problem(const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return "it is not a regular file";
  if (st.st_uid != ::geteuid())
    return fmt::format("it is owned by uid {}, not by us (uid {})", st.st_uid, ::geteuid());
  if (st.st_nlink != 1) return fmt::format("it has {} hard links (a lock file has 1)", st.st_nlink);
  return {};
}

// The pid holding an flock on the file with device `dev` and inode `ino` according to
// /proc/locks, 0 when none (or when /proc/locks cannot tell: no /proc, another pid namespace).
long flock_holder(dev_t dev, ino_t ino) {
  std::ifstream locks("/proc/locks");
  std::string line;
  const std::string id_wanted = fmt::format("{:02x}:{:02x}:{}", major(dev), minor(dev), ino);
  while (std::getline(locks, line)) {
    // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters have "->" after the number.
    std::istringstream in(line);
    std::string number, type, mode, access, id;
    long pid = 0;
    if (!(in >> number >> type)) continue;
    if (type == "->" || type != "FLOCK") continue;
    if (!(in >> mode >> access >> pid >> id)) continue;
    if (id == id_wanted) return pid;
  }
  return 0;
}

// The holder line read from the open lock file `fd` (fields left default when missing).
PeHolder read_line(int fd) {
  PeHolder h;
  std::array<char, 512> buf{};
  const ssize_t n = ::pread(fd, buf.data(), buf.size(), 0);
  if (n <= 0) return h;
  std::istringstream file(std::string(buf.data(), static_cast<std::size_t>(n)));
  std::string field;
  while (file >> field) {
    const auto eq = field.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    char* end = nullptr;
    if (key == "pid") h.pid = std::strtol(value.c_str(), &end, 10);
    else if (key == "device") h.device_file = value;
    else if (key == "faults") h.faults = std::strtoull(value.c_str(), &end, 10);
    else if (key == "resets") h.resets = std::strtoull(value.c_str(), &end, 10);
    else if (key == "executions") h.executions = std::strtoull(value.c_str(), &end, 10);
    else if (key == "busy_ns") h.busy_ns = std::strtoull(value.c_str(), &end, 10);
  }
  return h;
}

// Who holds the open lock file `fd` whose flock we just failed to take: the kernel's lock table
// first; when it cannot tell (another pid namespace), the holder's line, which the holder
// writes right after taking the lock, so it is waited for a little (never more than 200 ms).
PeHolder busy_holder(int fd) {
  struct stat st {};
  const long pid = ::fstat(fd, &st) == 0 ? flock_holder(st.st_dev, st.st_ino) : 0;
  PeHolder h = read_line(fd);
  if (pid != 0) {
    if (h.pid != pid) {  // the line is not the holder's yet (or stale): trust the kernel
      h = PeHolder{};
      h.pid = pid;
    }
    return h;
  }
  for (int i = 0; i < 20 && h.pid <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    h = read_line(fd);
  }
  return h;
}

}  // namespace

std::string default_lock_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/furiosa-sim";
  return fmt::format("/tmp/furiosa-sim-{}", ::getuid());
}

PeLocks::PeLocks(const std::string& dir, const DeviceFile& file) : device_file_(file.name()) {
  const std::string name = file.name();
  auto release_all = [&] {
    for (int fd : fds_) ::close(fd);
    fds_.clear();
  };
  // "<file>: cannot use the PE lock directory '<dir>': <what>[: <strerror>]" (one line).
  auto refuse = [&](const std::string& what, int err) {
    release_all();
    return Error(
        ErrorCode::DeviceFault,
        fmt::format("{}: cannot use the PE lock directory '{}': {}{}{}", name, escape_text(dir),
                    what, err != 0 ? ": " : "", err != 0 ? std::strerror(err) : ""),
        ErrorSubject::of_device(name));
  };
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) throw refuse("mkdir", errno);
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir_fd.fd < 0) {
    const int err = errno;
    struct stat st {};
    if ((err == ELOOP || err == ENOTDIR) && ::lstat(dir.c_str(), &st) == 0)
      throw refuse(dir_problem(st), 0);
    throw refuse("open", err);
  }
  struct stat st {};
  if (::fstat(dir_fd.fd, &st) != 0) throw refuse("fstat", errno);
  if (const std::string problem = dir_problem(st); !problem.empty()) {
    throw refuse(problem + "; remove it or choose another with FURIOSA_SIM_LOCK_DIR", 0);
  }
  for (int pe = file.first_pe; pe <= file.last_pe; ++pe) {
    const std::string lock = lock_name(file.card, pe);
    // No O_TRUNC: the file is only written once it is verified and locked.
    Fd fd(::openat(dir_fd.fd, lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                   0600));
    if (fd.fd < 0) {
      const int err = errno;
      struct stat lst {};
      if (err == ELOOP && ::fstatat(dir_fd.fd, lock.c_str(), &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(lst.st_mode)) {
        throw refuse(lock + " is a symbolic link", 0);
      }
      throw refuse("open " + lock, err);
    }
    struct stat fst {};
    if (::fstat(fd.fd, &fst) != 0) throw refuse("fstat " + lock, errno);
    if (const std::string problem = file_problem(fst); !problem.empty()) {
      throw refuse(fmt::format("{}: {}", lock, problem), 0);
    }
    if (::flock(fd.fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err != EWOULDBLOCK) throw refuse("flock " + lock, err);
      const PeHolder holder = busy_holder(fd.fd);
      release_all();
      const std::string pe_name = fmt::format("npu{}pe{}", file.card, pe);
      const std::string who =
          holder.pid > 0
              ? fmt::format("{}{}", process_label(holder.pid),
                            holder.device_file.empty()
                                ? ""
                                : fmt::format(" ({})", escape_text(holder.device_file, 64)))
              : std::string("another process");
      throw Error(ErrorCode::DeviceBusy,
                  fmt::format("{}: device busy: {} is held by {}", name, pe_name, who),
                  ErrorSubject::of_device(name));
    }
    fds_.push_back(fd.release());
  }
  publish(PeHolder{});
}
PeLocks::~PeLocks() {
  for (int fd : fds_) {
    if (::ftruncate(fd, 0) != 0) {  // a stale line would only be cosmetic: the lock is what counts
    }
    ::close(fd);  // releases the flock
  }
}

PeLocks::PeLocks(PeLocks&& other) noexcept : fds_(std::move(other.fds_)), device_file_(std::move(other.device_file_)) {
  other.fds_.clear();
}

PeLocks& PeLocks::operator=(PeLocks&& other) noexcept {
  if (this != &other) {
    for (int fd : fds_) ::close(fd);
    fds_ = std::move(other.fds_);
    other.fds_.clear();
    device_file_ = std::move(other.device_file_);
  }
  return *this;
}

void PeLocks::publish(const PeHolder& c) const noexcept {
  try {
    // Padded to a fixed width so that each rewrite covers the previous line entirely.
    const std::string line = fmt::format("{:<255}\n", fmt::format("pid={} device={} faults={} resets={} executions={} busy_ns={}",
                                                              ::getpid(), device_file_, c.faults, c.resets,
                                                              c.executions, c.busy_ns));
    for (int fd : fds_) {
      if (::pwrite(fd, line.data(), line.size(), 0) < 0) continue;
    }
  } catch (...) {  // formatting failed (out of memory): the line is informational only
  }
}

PeHolder probe_pe(const std::string& dir, int card, int pe) {
  // Read-only and never blocking: a FIFO or a link planted here is not read.
  const std::string path = fmt::format("{}/{}", dir, lock_name(card, pe));
  Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.fd < 0) return {};
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) return {};
  const long pid = flock_holder(st.st_dev, st.st_ino);
  if (pid == 0) return {};
  PeHolder h = read_line(fd.fd);
  if (h.pid != pid) {  // the line is not the holder's yet (or stale): trust the kernel
    h = PeHolder{};
    h.pid = pid;
  }
  return h;
}

}  // namespace furiosa::device::sim
