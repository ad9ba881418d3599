// The pcie backend against a fake /dev + sysfs tree made here, and furiosactl's output on it.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "furiosa/device/backends.h"
#include "furiosa/device/driver.h"
#include "furiosa/core/error.h"
#include "furiosa/device/pcie.h"
#include "fake_pcie_tree.h"
#include "test_support.h"

using namespace furiosa;
using namespace furiosa::device;
namespace fs = std::filesystem;
using nlohmann::json;
using furiosa::device::pcie_test::FakeTree;
using furiosa::device::pcie_test::write_file;

namespace {

std::vector<std::string> names(const std::vector<DeviceFile>& files) {
  std::vector<std::string> result;
  for (const DeviceFile& f : files) result.push_back(f.name());
  return result;
}

using Run = test::CommandResult;

Run run(const std::string& command) { return test::run_command(command); }

std::string furiosactl(const FakeTree& tree, const std::string& args) {
  return std::string("FURIOSA_SIM_CARDS=2 FURIOSA_SIM_PES_PER_CARD=2 ") + FURIOSACTL_BINARY +
         " --dev-root '" + tree.config.dev_root + "' --sysfs-root '" + tree.config.sysfs_root +
         "' --pci-root '" + tree.config.pci_devices_root + "' " + args;
}

}  // namespace

TEST_CASE("pcie: discovers cards and attributes from a fake tree", "[device][pcie]") {
  FakeTree tree;
  const std::vector<CardInfo> cards = discover_pcie_cards(tree.config);
  REQUIRE(cards.size() == 3);

  const CardInfo& c0 = cards[0];
  CHECK(c0.index == 0);
  CHECK(c0.arch == "warboy");
  CHECK(c0.busname == "0000:6d:00.0");
  CHECK(c0.serial == "WBYB0123456789");
  CHECK(c0.firmware_version == "1.6.0, 3c10fd3");
  CHECK(c0.driver_version == "1.9.2");
  CHECK(c0.numa_node == 1);
  CHECK(c0.pe_count == 2);
  CHECK(c0.pe_busy == std::vector<bool>{false, true});
  CHECK(names(c0.device_files) == std::vector<std::string>{"npu0pe0", "npu0pe1", "npu0pe0-1"});

  // Missing attributes: defaults; NUMA node from the PCI device; PE count from the PE files.
  const CardInfo& c1 = cards[1];
  CHECK(c1.index == 1);
  CHECK(c1.arch == "warboy");
  CHECK(c1.busname == "0000:6e:00.0");
  CHECK(c1.serial.empty());
  CHECK(c1.firmware_version.empty());
  CHECK(c1.driver_version.empty());
  CHECK(c1.numa_node == 0);
  CHECK(c1.pe_count == 2);
  CHECK(c1.pe_busy == std::vector<bool>{false, false});
  CHECK(names(c1.device_files) == std::vector<std::string>{"npu1pe0", "npu1pe1", "npu1pe0-1"});

  // Only /dev/npu2: a Warboy with its 2 PEs, no device files, unknown NUMA node.
  const CardInfo& c2 = cards[2];
  CHECK(c2.index == 2);
  CHECK(c2.arch == "warboy");
  CHECK(c2.busname.empty());
  CHECK(c2.numa_node == -1);
  CHECK(c2.pe_count == 2);
  CHECK(c2.pe_busy == std::vector<bool>{false, false});
  CHECK(c2.device_files.empty());

  // Raw attributes for diagnostics.
  const auto attributes = read_npu_mgmt_attributes(tree.config, 0);
  CHECK(attributes.at("device_sn") == "WBYB0123456789");
  CHECK(attributes.at("platform_type") == "FuriosaAI");
  CHECK(attributes.size() == 9);
  CHECK(read_npu_mgmt_attributes(tree.config, 2).empty());
}

TEST_CASE("pcie: tolerant reader", "[device][pcie]") {
  FakeTree tree;
  const fs::path m0 = fs::path(tree.config.sysfs_root) / "npu0_mgmt";
  // Garbage numbers fall back to defaults; an unknown device_type is reported as is.
  write_file(m0 / "numa_node", "lots\n");
  write_file(m0 / "pe_count", "-3\n");
  write_file(m0 / "busy_pes", "0-1, 7, x\n");
  write_file(m0 / "device_type", "Renegade\n");
  fs::remove(m0 / "device_sn");
  write_file(m0 / "serial", "S-1\n");
  auto cards = discover_pcie_cards(tree.config);
  REQUIRE(cards.size() == 3);
  CHECK(cards[0].arch == "renegade");
  CHECK(cards[0].numa_node == 0);  // from the PCI folder
  CHECK(cards[0].pe_count == 2);   // from the PE files
  CHECK(cards[0].pe_busy == std::vector<bool>{true, true});
  CHECK(cards[0].serial == "S-1");

  // No sysfs at all, or no /dev at all.
  PcieConfig no_sysfs = tree.config;
  no_sysfs.sysfs_root = (tree.root / "nowhere").string();
  cards = discover_pcie_cards(no_sysfs);
  REQUIRE(cards.size() == 4);  // npu4's platform_type cannot be read any more: listed
  CHECK(cards[0].busname.empty());
  CHECK(cards[3].index == 4);
  CHECK(cards[3].pe_count == 1);
  PcieConfig no_dev = tree.config;
  no_dev.dev_root = (tree.root / "nowhere").string();
  CHECK(discover_pcie_cards(no_dev).empty());
}

TEST_CASE("pcie: open() refuses, naming the device file", "[device][pcie]") {
  FakeTree tree;
  auto driver = create_pcie_driver(tree.config);
  CHECK(driver->name() == "pcie");
  CHECK(driver->enumerate().size() == 3);
  try {
    driver->open(DeviceFile::parse("npu0pe0-1"));
    FAIL("opened");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::DeviceNotFound);
    CHECK_THAT(e.message(), Catch::Contains(tree.config.dev_root + "/npu0pe0-1") &&
                                Catch::Contains("ioctl") &&
                                Catch::Contains("not available to this project"));
  }
  try {
    driver->open(DeviceFile::parse("npu5pe0"));
    FAIL("opened");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::DeviceNotFound);
    CHECK_THAT(e.message(), Catch::Contains("npu5pe0: no such device file") &&
                                Catch::Contains("npu0pe0, npu0pe1, npu0pe0-1"));
  }
  // npu2 has no PE files.
  CHECK_THROWS_WITH(driver->open(DeviceFile::parse("npu2pe0")),
                    Catch::Contains("no such device file"));

  // The builtin registry has the backend.
  const auto backends = builtin_registry().names();
  CHECK(std::find(backends.begin(), backends.end(), "pcie") != backends.end());
}

TEST_CASE("furiosactl: list and info on the fake tree", "[device][pcie][furiosactl]") {
  FakeTree tree;
  Run r = run(furiosactl(tree, "--backend pcie list --format json"));
  REQUIRE(r.exit_code == 0);
  json list = json::parse(r.out);
  REQUIRE(list["cards"].size() == 3);
  const json& c0 = list["cards"][0];
  CHECK(c0["backend"] == "pcie");
  CHECK(c0["index"] == 0);
  CHECK(c0["name"] == "npu0");
  CHECK(c0["arch"] == "warboy");
  CHECK(c0["busname"] == "0000:6d:00.0");
  REQUIRE(c0["cores"].size() == 2);
  CHECK(c0["cores"][0] == json{{"index", 0}, {"name", "npu0pe0"}, {"status", "available"}});
  CHECK(c0["cores"][1] == json{{"index", 1}, {"name", "npu0pe1"}, {"status", "busy"}});
  CHECK(c0["device_files"] == json{"npu0pe0", "npu0pe1", "npu0pe0-1"});
  CHECK(list["cards"][2]["device_files"] == json::array());

  r = run(furiosactl(tree, "info --backend pcie --format json"));  // options after the command
  REQUIRE(r.exit_code == 0);
  json info = json::parse(r.out);
  REQUIRE(info["cards"].size() == 3);
  const json& i0 = info["cards"][0];
  CHECK(i0["arch"] == "warboy");
  CHECK(i0["firmware_version"] == "1.6.0, 3c10fd3");
  CHECK(i0["driver_version"] == "1.9.2");
  CHECK(i0["busname"] == "0000:6d:00.0");
  CHECK(i0["serial"] == "WBYB0123456789");
  CHECK(i0["numa_node"] == 1);
  CHECK(i0["pe_count"] == 2);
  CHECK(i0["attributes"]["fw_version"] == "1.6.0, 3c10fd3");
  CHECK(info["cards"][1]["serial"] == "");
  CHECK(info["cards"][2]["numa_node"] == -1);

  // Text output.
  r = run(furiosactl(tree, "--backend pcie list"));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("npu0") && Catch::Contains("0 (available), 1 (busy)") &&
                        Catch::Contains("npu0pe0, npu0pe1, npu0pe0-1") &&
                        Catch::Contains("0000:6e:00.0"));
  r = run(furiosactl(tree, "--backend pcie info"));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("FIRMWARE") && Catch::Contains("1.6.0, 3c10fd3") &&
                        Catch::Contains("WBYB0123456789"));

  // Every backend: 2 simulated cards (from the environment) and the 3 fake ones.
  r = run(furiosactl(tree, "--backend all list --format json"));
  REQUIRE(r.exit_code == 0);
  list = json::parse(r.out);
  REQUIRE(list["cards"].size() == 5);
  int sim = 0, pcie = 0;
  for (const json& c : list["cards"]) (c["backend"] == "sim" ? sim : pcie)++;
  CHECK(sim == 2);
  CHECK(pcie == 3);

  // auto: pcie when it finds cards, else sim.
  r = run(furiosactl(tree, "list --format json"));
  REQUIRE(r.exit_code == 0);
  CHECK(json::parse(r.out)["cards"][0]["backend"] == "pcie");
  fs::remove_all(tree.config.dev_root);
  r = run(furiosactl(tree, "info --format json"));
  REQUIRE(r.exit_code == 0);
  info = json::parse(r.out);
  REQUIRE(info["cards"].size() == 2);
  CHECK(info["cards"][0]["backend"] == "sim");
  CHECK(info["cards"][0]["arch"] == "warboy");
  r = run(furiosactl(tree, "--backend pcie list"));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("no NPU cards found (backend: pcie)"));
  r = run(furiosactl(tree, "--backend pcie list --format json"));
  CHECK(json::parse(r.out)["cards"] == json::array());

  // Bad usage.
  CHECK(run(furiosactl(tree, "--backend gpu list 2>/dev/null")).exit_code != 0);
  CHECK(run(furiosactl(tree, "list --format yaml 2>/dev/null")).exit_code != 0);
  CHECK(run(furiosactl(tree, "2>/dev/null")).exit_code != 0);
  CHECK(run(std::string("FURIOSA_SIM_CARDS=x ") + FURIOSACTL_BINARY +
            " --backend sim list 2>/dev/null")
            .exit_code == 1);
}
