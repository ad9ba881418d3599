// System-wide ownership of simulated PEs (pe_locks.h): flock'ed lock files, holders found in
// the kernel's lock table.
#include "pe_locks.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "furiosa/core/error.h"

namespace furiosa::device::sim {

namespace {

std::string lock_path(const std::string& dir, int card, int pe) {
  return fmt::format("{}/npu{}pe{}.lock", dir, card, pe);
}

// The pid holding an flock on the file `path` according to /proc/locks, 0 when none.
long flock_holder(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  std::ifstream locks("/proc/locks");
  std::string line;
  const std::string dev = fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev), st.st_ino);
  while (std::getline(locks, line)) {
    // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters have "->" after the number.
    std::istringstream in(line);
    std::string number, type, mode, access, id;
    long pid = 0;
    if (!(in >> number >> type)) continue;
    if (type == "->" || type != "FLOCK") continue;
    if (!(in >> mode >> access >> pid >> id)) continue;
    if (id == dev) return pid;
  }
  return 0;
}

// The holder line of the lock file at `path` (fields left default when missing).
PeHolder read_line(const std::string& path) {
  PeHolder h;
  std::ifstream file(path);
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

}  // namespace

std::string default_lock_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/furiosa-sim";
  return fmt::format("/tmp/furiosa-sim-{}", ::getuid());
}

PeLocks::PeLocks(const std::string& dir, const DeviceFile& file) : device_file_(file.name()) {
  const std::string name = file.name();
  auto fault = [&](const std::string& what) {
    const int err = errno;
    for (int fd : fds_) ::close(fd);
    fds_.clear();
    return Error(ErrorCode::DeviceFault,
                 fmt::format("{}: cannot use the PE lock files in {}: {}: {}", name, dir, what, std::strerror(err)),
                 ErrorSubject::of_device(name));
  };
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) throw fault("mkdir");
  for (int pe = file.first_pe; pe <= file.last_pe; ++pe) {
    const std::string path = lock_path(dir, file.card, pe);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) throw fault("open " + path);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      if (err != EWOULDBLOCK) {
        errno = err;
        throw fault("flock " + path);
      }
      for (int held : fds_) ::close(held);
      fds_.clear();
      const PeHolder holder = probe_pe(dir, file.card, pe);
      const std::string pe_name = fmt::format("npu{}pe{}", file.card, pe);
      const std::string who =
          holder.pid > 0 ? fmt::format("process {}{}", holder.pid,
                                       holder.device_file.empty() ? "" : fmt::format(" ({})", holder.device_file))
                         : std::string("another process");
      throw Error(ErrorCode::DeviceBusy,
                  fmt::format("{}: device busy: {} is held by {}", name, pe_name, who),
                  ErrorSubject::of_device(name));
    }
    fds_.push_back(fd);
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
  const std::string path = lock_path(dir, card, pe);
  const long pid = flock_holder(path);
  if (pid == 0) return {};
  PeHolder h = read_line(path);
  if (h.pid != pid) {  // the line is not the holder's yet (or stale): trust the kernel
    h = PeHolder{};
    h.pid = pid;
  }
  return h;
}

}  // namespace furiosa::device::sim
