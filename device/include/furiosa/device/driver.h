// Driver registry: each backend ("sim", "pcie") registers a factory; a Driver enumerates cards
// and opens device files exclusively. This interface target names no backend: the backends are
// their own targets (device/sim, device/pcie) with a register_<name>_backend() function, and
// device/backends builds the process's registry from the configured list (builtin_registry()).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/device/device.h"

namespace furiosa::device {

/// One card as enumerated by a driver.
struct CardInfo {
  int index = 0;               ///< N of /dev/npuN
  std::string arch;            ///< "warboy"
  std::string busname;         ///< PCI bus id, e.g. "0000:6d:00.0"
  std::string serial;
  std::string firmware_version;
  std::string driver_version;
  int numa_node = -1;
  int pe_count = 0;
  std::vector<bool> pe_busy;   ///< per PE: held by an open Device
  /// Per PE: id of the process holding it, 0 when free or unknown (empty when the backend
  /// does not know holders).
  std::vector<long> pe_holder_pid;
  /// Per PE: faults seen and resets done on it by its holder, as the holder published them
  /// (empty when the backend does not publish them; 0 for a free PE).
  std::vector<std::uint64_t> pe_faults;
  std::vector<std::uint64_t> pe_resets;
  /// Per PE: executions completed and device-busy time in ns (the sum of each execution's NPU
  /// Total, Load start to Store end) since its holder opened it, as the holder last published
  /// them (at most 100 ms old; empty when the backend does not publish them). Two samples give
  /// utilisation = delta busy_ns / delta wall time (`furiosactl top`).
  std::vector<std::uint64_t> pe_executions;
  std::vector<std::uint64_t> pe_busy_ns;
  std::vector<DeviceFile> device_files;  ///< npuNpe0, npuNpe1, npuNpe0-1 ...
};

/// A backend. Thread-safe. The driver keeps track of which cores are held so that overlapping
/// opens fail; a Device must not outlive the Driver that opened it.
class Driver {
 public:
  virtual ~Driver() = default;
  /// The backend's registry name ("sim", "pcie").
  virtual std::string_view name() const noexcept = 0;
  /// Cards this backend can see, with per-core availability.
  virtual std::vector<CardInfo> enumerate() const = 0;
  /// Opens a device file exclusively. Throws Error(DeviceNotFound) when the card or PE range does
  /// not exist and Error(DeviceBusy) when any of its cores is already held; both name the file.
  virtual std::unique_ptr<Device> open(const DeviceFile& file) = 0;
  /// True for a backend that drives real hardware (pcie): automatic selection prefers it when it
  /// enumerates a card. False for a reference backend (sim).
  virtual bool is_hardware() const noexcept { return false; }
};

/// Factory of a backend's driver.
using DriverFactory = std::function<std::unique_ptr<Driver>()>;

/// Maps backend names to driver factories and keeps one Driver instance per name once created.
/// Thread-safe.
class DriverRegistry {
 public:
  DriverRegistry() = default;
  DriverRegistry(const DriverRegistry&) = delete;
  DriverRegistry& operator=(const DriverRegistry&) = delete;

  /// Registers `factory` under `name`; replaces an earlier factory of that name.
  void register_factory(std::string name, DriverFactory factory);
  /// Names of registered backends, sorted.
  std::vector<std::string> names() const;
  /// The driver for `name`, created on first use. Throws Error(DeviceNotFound) for an unknown
  /// backend name.
  Driver& driver(std::string_view name);

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, DriverFactory>> factories_;
  std::vector<std::pair<std::string, std::unique_ptr<Driver>>> drivers_;
};

/// The backend a session runs on, and why it was chosen (for the user: furiosa-run prints it).
struct BackendChoice {
  Driver* driver = nullptr;  ///< owned by the registry
  std::string name;          ///< "sim", "pcie"
  std::string reason;        ///< e.g. "FURIOSA_BACKEND=pcie", "no Warboy card found by pcie"
};

/// Picks a backend of `registry`: `requested` when not empty and not "auto"; else the
/// FURIOSA_BACKEND environment variable when set and not "auto"; else automatically, the first
/// hardware backend (Driver::is_hardware(), in name order) that enumerates a card, else the first
/// reference backend. Throws Error(DeviceNotFound) naming the known backends for an unknown name,
/// or when the registry has no usable backend.
BackendChoice select_backend(DriverRegistry& registry, std::string_view requested);

}  // namespace furiosa::device
