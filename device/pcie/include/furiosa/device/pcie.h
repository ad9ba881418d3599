// The PCIe backend ("pcie"): discovers real Warboy cards from the device files and the sysfs
// attributes FuriosaAI's kernel driver creates. It can list cards but not run anything: command
// submission needs the kernel driver's ioctl ABI, which is not available to this project, so
// open() always throws (see docs/devices.md).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "furiosa/device/driver.h"

namespace furiosa::device {

/// Where the pcie backend looks. Tests point these at a fake tree.
struct PcieConfig {
  std::string dev_root = "/dev";                  ///< holds npuN, npuNpeM, npuNpeM-K
  std::string sysfs_root = "/sys/class/npu_mgmt";  ///< holds npuN_mgmt/<attribute>
  /// PCI devices, for <busname>/numa_node when npuN_mgmt has no numa_node attribute.
  std::string pci_devices_root = "/sys/bus/pci/devices";
};

/// The cards under `config`, sorted by index. A card N exists when `<dev_root>` has a
/// non-directory entry npuN or npuNpeM[-K] (character devices on a real system). Attributes are
/// read from `<sysfs_root>/npuN_mgmt/` as documented in docs/devices.md; a missing or unreadable
/// attribute leaves the field at its default. Cards whose `platform_type` attribute exists and is
/// neither "FuriosaAI" nor "VITIS" are skipped. A missing dev_root gives no cards (no error).
std::vector<CardInfo> discover_pcie_cards(const PcieConfig& config = {});

/// Every readable regular file of `<sysfs_root>/npuN_mgmt/` (name -> trimmed contents), for
/// diagnostics (furiosactl info). Empty when the directory does not exist.
std::map<std::string, std::string> read_npu_mgmt_attributes(const PcieConfig& config, int card);

/// Creates the pcie driver. enumerate() is discover_pcie_cards(config); open() throws
/// Error(DeviceNotFound) naming the device file: when it does not exist, and otherwise because
/// this project cannot submit commands to a real card (no kernel-driver ioctl ABI).
std::unique_ptr<Driver> create_pcie_driver(const PcieConfig& config = {});

/// Registers the "pcie" backend (create_pcie_driver() on the real /dev and sysfs) in `registry`.
/// Called by builtin_registry() (device/backends).
void register_pcie_backend(DriverRegistry& registry);

}  // namespace furiosa::device
