// furiosactl: list NPU cards, their cores and device files, and their attributes, over any
// registered backend (sim, pcie). Output as a text table or JSON (--format json).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "furiosa/device/backends.h"
#include "furiosa/device/driver.h"
#include "furiosa/core/error.h"
#include "furiosa/device/pcie.h"

using namespace furiosa;
using namespace furiosa::device;
using json = nlohmann::ordered_json;  // keys in the order written

namespace {

struct Options {
  std::string backend = "auto";
  std::string format = "text";
  PcieConfig pcie;
};

struct Card {
  std::string backend;
  CardInfo info;
};

// The cards of the chosen backend(s). "auto": device::select_backend's rule (FURIOSA_BACKEND, else
// a hardware backend with a card, else sim), the same as a session's.
std::vector<Card> collect(const Options& options) {
  DriverRegistry& registry = builtin_registry();
  // Before any use of the pcie driver, so that --dev-root/--sysfs-root/--pci-root apply.
  const PcieConfig pcie = options.pcie;
  registry.register_factory("pcie", [pcie] { return create_pcie_driver(pcie); });

  std::vector<std::string> backends;
  if (options.backend == "all") {
    backends = registry.names();
  } else if (options.backend == "auto") {
    backends = {select_backend(registry, "").name};
  } else {
    backends = {options.backend};
  }
  std::vector<Card> cards;
  for (const std::string& backend : backends) {
    for (CardInfo& info : registry.driver(backend).enumerate()) {
      cards.push_back({backend, std::move(info)});
    }
  }
  return cards;
}

bool busy(const CardInfo& card, int pe) {
  return static_cast<std::size_t>(pe) < card.pe_busy.size() &&
         card.pe_busy[static_cast<std::size_t>(pe)];
}

// Holder pid and fault counters of PE `pe`, when the backend reports them (sim with system-wide
// ownership); pid 0 = free.
struct PeState {
  bool known = false;
  long pid = 0;
  std::uint64_t faults = 0, resets = 0;
};

PeState pe_state(const CardInfo& card, int pe) {
  const auto i = static_cast<std::size_t>(pe);
  PeState s;
  if (i >= card.pe_holder_pid.size()) return s;
  s.known = true;
  s.pid = card.pe_holder_pid[i];
  if (i < card.pe_faults.size()) s.faults = card.pe_faults[i];
  if (i < card.pe_resets.size()) s.resets = card.pe_resets[i];
  return s;
}

// "0 (available)", "1 (busy)", or with a known holder "1 (busy: pid 4242, faults 3, resets 1)".
std::string core_text(const CardInfo& card, int pe) {
  const PeState s = pe_state(card, pe);
  if (!busy(card, pe)) return fmt::format("{} (available)", pe);
  if (!s.known || s.pid == 0) return fmt::format("{} (busy)", pe);
  return fmt::format("{} (busy: pid {}, faults {}, resets {})", pe, s.pid, s.faults, s.resets);
}

std::vector<std::string> file_names(const CardInfo& card) {
  std::vector<std::string> names;
  for (const DeviceFile& file : card.device_files) names.push_back(file.name());
  return names;
}

std::string or_dash(const std::string& text) { return text.empty() ? "-" : text; }

// Prints rows as a left-aligned table; the first row is the header.
void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += i + 1 == row.size() ? row[i] : fmt::format("{:<{}}  ", row[i], widths[i]);
    }
    std::cout << line << "\n";
  }
}

void no_cards(const Options& options) {
  std::cout << fmt::format("no NPU cards found (backend: {})\n", options.backend);
}

int list(const Options& options) {
  const std::vector<Card> cards = collect(options);
  if (options.format == "json") {
    json out = {{"cards", json::array()}};
    for (const Card& card : cards) {
      json cores = json::array();
      for (int pe = 0; pe < card.info.pe_count; ++pe) {
        json core = {{"index", pe},
                     {"name", DeviceFile{card.info.index, pe, pe}.name()},
                     {"status", busy(card.info, pe) ? "busy" : "available"}};
        const PeState s = pe_state(card.info, pe);
        if (s.known && s.pid != 0) {
          core["holder_pid"] = s.pid;
          core["faults"] = s.faults;
          core["resets"] = s.resets;
        }
        cores.push_back(std::move(core));
      }
      out["cards"].push_back({{"backend", card.backend},
                              {"index", card.info.index},
                              {"name", fmt::format("npu{}", card.info.index)},
                              {"arch", card.info.arch},
                              {"busname", card.info.busname},
                              {"cores", std::move(cores)},
                              {"device_files", file_names(card.info)}});
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  if (cards.empty()) {
    no_cards(options);
    return 0;
  }
  std::vector<std::vector<std::string>> rows{
      {"BACKEND", "NPU", "ARCH", "BUSNAME", "CORES", "DEVICE FILES"}};
  for (const Card& card : cards) {
    std::vector<std::string> cores;
    for (int pe = 0; pe < card.info.pe_count; ++pe) {
      cores.push_back(core_text(card.info, pe));
    }
    const auto files = file_names(card.info);
    rows.push_back({card.backend, fmt::format("npu{}", card.info.index), or_dash(card.info.arch),
                    or_dash(card.info.busname), fmt::format("{}", fmt::join(cores, ", ")),
                    files.empty() ? "-" : fmt::format("{}", fmt::join(files, ", "))});
  }
  print_table(rows);
  return 0;
}

int info(const Options& options) {
  const std::vector<Card> cards = collect(options);
  if (options.format == "json") {
    json out = {{"cards", json::array()}};
    for (const Card& card : cards) {
      json entry = {{"backend", card.backend},
                    {"index", card.info.index},
                    {"name", fmt::format("npu{}", card.info.index)},
                    {"arch", card.info.arch},
                    {"firmware_version", card.info.firmware_version},
                    {"driver_version", card.info.driver_version},
                    {"busname", card.info.busname},
                    {"serial", card.info.serial},
                    {"numa_node", card.info.numa_node},
                    {"pe_count", card.info.pe_count}};
      if (card.backend == "pcie") {
        // Every attribute file the kernel driver exposes, raw, for diagnostics.
        entry["attributes"] = read_npu_mgmt_attributes(options.pcie, card.info.index);
      }
      out["cards"].push_back(std::move(entry));
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  if (cards.empty()) {
    no_cards(options);
    return 0;
  }
  std::vector<std::vector<std::string>> rows{
      {"BACKEND", "NPU", "ARCH", "FIRMWARE", "DRIVER", "BUSNAME", "SERIAL", "NUMA", "PES"}};
  for (const Card& card : cards) {
    rows.push_back({card.backend, fmt::format("npu{}", card.info.index), or_dash(card.info.arch),
                    or_dash(card.info.firmware_version), or_dash(card.info.driver_version),
                    or_dash(card.info.busname), or_dash(card.info.serial),
                    card.info.numa_node < 0 ? "-" : std::to_string(card.info.numa_node),
                    std::to_string(card.info.pe_count)});
  }
  print_table(rows);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"List FuriosaAI Warboy NPU cards (real or simulated), their cores and attributes"};
  app.require_subcommand(1);
  // Options may be given before or after the subcommand.
  app.fallthrough();
  Options options;
  app.add_option("--backend", options.backend,
                 "Backend: auto (pcie when it finds a card, else sim), sim, pcie or all")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "all", "sim", "pcie"}));
  app.add_option("--format", options.format, "Output format")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--dev-root", options.pcie.dev_root, "pcie: folder with the npu* device files")
      ->capture_default_str();
  app.add_option("--sysfs-root", options.pcie.sysfs_root,
                 "pcie: folder with the npuN_mgmt attribute folders")
      ->capture_default_str();
  app.add_option("--pci-root", options.pcie.pci_devices_root,
                 "pcie: folder with PCI devices (for <busname>/numa_node)")
      ->capture_default_str();
  CLI::App* list_cmd = app.add_subcommand("list", "Cards with their cores (availability) and device files");
  CLI::App* info_cmd =
      app.add_subcommand("info", "Cards with arch, firmware and driver version, busname, serial, "
                                 "NUMA node and PE count");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  try {
    if (list_cmd->parsed()) return list(options);
    if (info_cmd->parsed()) return info(options);
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
