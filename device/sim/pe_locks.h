// Private to the simulator: system-wide ownership of simulated PEs, as FuriosaAI's kernel
// driver gives it for real cards. One lock file per PE, `<dir>/npu<card>pe<pe>.lock`, held with
// flock(LOCK_EX) while a device file covering the PE is open; the kernel releases it when the
// descriptor closes or the process dies (SIGKILL included). The holder writes one line into it,
// `pid=<pid> device=<file> faults=<n> resets=<n> executions=<n> busy_ns=<n>`, so other processes
// (furiosactl list, top) can show who holds a PE, its fault counters and its utilisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "furiosa/device/device.h"

namespace furiosa::device::sim {

/// $XDG_RUNTIME_DIR/furiosa-sim when XDG_RUNTIME_DIR is set and absolute, else
/// /tmp/furiosa-sim-<uid>.
std::string default_lock_dir();

/// What the lock file of one PE says about its holder.
struct PeHolder {
  long pid = 0;               ///< 0: free (or unknown)
  std::string device_file;    ///< the holder's device file, e.g. "npu0pe0-1"
  std::uint64_t faults = 0;
  std::uint64_t resets = 0;
  std::uint64_t executions = 0;  ///< executions completed since the open
  std::uint64_t busy_ns = 0;     ///< sum of their NPU Total (Load start to Store end), ns
};

/// The locks of one open device file (its PEs). Movable, not copyable; unlocks on destruction.
/// Thread-compatible (one owner: the SimDevice).
class PeLocks {
 public:
  PeLocks() = default;
  /// Locks every PE of `file` in `dir` (created 0700 when missing), without blocking. Throws
  /// Error(DeviceBusy) naming the device file, the held PE and the holder's pid when another
  /// open (in any process) holds one, and Error(DeviceFault) naming the directory when the lock
  /// files cannot be used. Nothing in `dir` is trusted unchecked: the directory must be a real
  /// directory (not a symbolic link) owned by our euid with no group/other permission bits, and
  /// each lock file a regular file owned by us with one link, opened with O_NOFOLLOW; anything
  /// else is refused (DeviceFault, one line saying what is wrong) before a byte is written.
  PeLocks(const std::string& dir, const DeviceFile& file);
  ~PeLocks();
  PeLocks(PeLocks&& other) noexcept;
  PeLocks& operator=(PeLocks&& other) noexcept;
  PeLocks(const PeLocks&) = delete;
  PeLocks& operator=(const PeLocks&) = delete;

  /// Rewrites the holder line of every PE with these counters (errors are ignored). The line is
  /// written in place at a fixed width, never truncated first, so a concurrent reader sees the
  /// previous line or this one rather than an empty file.
  void publish(const PeHolder& counters) const noexcept;

 private:
  std::vector<int> fds_;
  std::string device_file_;
};

/// Who holds PE `pe` of card `card` under `dir`, from the kernel's lock table (/proc/locks) and
/// the holder's line; pid 0 when nobody does. Never takes the lock, so it cannot disturb an open;
/// never follows a symbolic link nor reads anything but a regular file, so it cannot block.
PeHolder probe_pe(const std::string& dir, int card, int pe);

}  // namespace furiosa::device::sim
