// A fake /dev + sysfs tree for the pcie backend's tests (discovery, furiosactl, conformance).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "furiosa/device/pcie.h"

namespace furiosa::device::pcie_test {

namespace fs = std::filesystem;

inline void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A fake machine:
//  npu0: every attribute, PE 1 marked busy, numa_node in the mgmt folder;
//  npu1: only busname (NUMA node from the PCI folder), no npu1 management file;
//  npu2: only /dev/npu2 (no PE files, no sysfs folder);
//  npu4: a non-FuriosaAI platform_type (skipped); plus unrelated /dev entries.
struct FakeTree {
  fs::path root;
  PcieConfig config;

  FakeTree() {
    static int counter = 0;
    root = fs::temp_directory_path() /
           ("furiosa-pcie-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(root);
    const fs::path dev = root / "dev", sys = root / "sys" / "class" / "npu_mgmt",
                   pci = root / "sys" / "bus" / "pci" / "devices";
    config.dev_root = dev.string();
    config.sysfs_root = sys.string();
    config.pci_devices_root = pci.string();
    for (const char* name : {"npu0", "npu0pe0", "npu0pe1", "npu0pe0-1", "npu1pe1", "npu1pe0",
                             "npu1pe0-1", "npu2", "npu4pe0", "null", "npux", "npu0mgmt"}) {
      write_file(dev / name, "");
    }
    fs::create_directories(dev / "npu3");  // a directory is not a device file
    const fs::path m0 = sys / "npu0_mgmt";
    write_file(m0 / "busname", "0000:6d:00.0\n");
    write_file(m0 / "device_sn", "WBYB0123456789\n");
    write_file(m0 / "fw_version", "1.6.0, 3c10fd3\n");
    write_file(m0 / "version", "1.9.2\n");
    write_file(m0 / "device_type", "Warboy\n");
    write_file(m0 / "platform_type", "FuriosaAI\n");
    write_file(m0 / "numa_node", "1\n");
    write_file(m0 / "pe_count", "2\n");
    write_file(m0 / "busy_pes", "1\n");
    write_file(pci / "0000:6d:00.0" / "numa_node", "0\n");  // the mgmt attribute wins
    write_file(sys / "npu1_mgmt" / "busname", "0000:6e:00.0");
    write_file(pci / "0000:6e:00.0" / "numa_node", "0\n");
    write_file(sys / "npu4_mgmt" / "platform_type", "SomethingElse\n");
  }
  ~FakeTree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

}  // namespace furiosa::device::pcie_test
