// furiosactl: list NPU cards, their cores and device files, and their attributes, over any
// registered backend (sim, pcie), and per-PE utilisation of the processes holding them (top).
// Output as a text table or JSON (--format json).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>
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
  double interval_s = 1.0;  ///< top: seconds between the two samples of each report
  int count = 1;            ///< top: reports to print
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

// "pe0: pid 4242, pe1: -" (holders in any process), "-" when the backend does not know them.
std::string holders_text(const CardInfo& card) {
  if (card.pe_holder_pid.empty()) return "-";
  std::vector<std::string> parts;
  for (int pe = 0; pe < card.pe_count; ++pe) {
    const PeState s = pe_state(card, pe);
    parts.push_back(s.pid != 0 ? fmt::format("pe{}: pid {}", pe, s.pid) : fmt::format("pe{}: -", pe));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
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
      json holders = json::array();
      for (int pe = 0; pe < card.info.pe_count; ++pe) {
        const PeState st = pe_state(card.info, pe);
        holders.push_back(st.known && st.pid != 0 ? json(st.pid) : json(nullptr));
      }
      entry["pe_holder_pids"] = std::move(holders);
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
      {"BACKEND", "NPU", "ARCH", "FIRMWARE", "DRIVER", "BUSNAME", "SERIAL", "NUMA", "PES", "HOLDERS"}};
  for (const Card& card : cards) {
    rows.push_back({card.backend, fmt::format("npu{}", card.info.index), or_dash(card.info.arch),
                    or_dash(card.info.firmware_version), or_dash(card.info.driver_version),
                    or_dash(card.info.busname), or_dash(card.info.serial),
                    card.info.numa_node < 0 ? "-" : std::to_string(card.info.numa_node),
                    std::to_string(card.info.pe_count), holders_text(card.info)});
  }
  print_table(rows);
  return 0;
}

// One PE's line of a top report.
struct TopRow {
  std::string backend;
  int card = 0, pe = 0;
  long pid = 0;
  bool measured = false;       ///< same holder in both samples, counters published
  double utilisation = 0;      ///< device-busy share of the interval, 0..1
  double executions_per_s = 0;
  std::uint64_t executions = 0, faults = 0, resets = 0;
};

// Per-PE utilisation over the interval: the holders' published busy time and executions, sampled
// before and after. A PE whose holder changed in between, or that publishes nothing, is
// reported without figures.
std::vector<TopRow> top_sample(const Options& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Card> before = collect(options);
  std::this_thread::sleep_for(std::chrono::duration<double>(options.interval_s));
  const std::vector<Card> after = collect(options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::map<std::pair<std::string, int>, const CardInfo*> earlier;
  for (const Card& c : before) earlier[{c.backend, c.info.index}] = &c.info;
  std::vector<TopRow> rows;
  for (const Card& card : after) {
    const auto it = earlier.find({card.backend, card.info.index});
    const CardInfo* prev = it == earlier.end() ? nullptr : it->second;
    for (int pe = 0; pe < card.info.pe_count; ++pe) {
      const auto i = static_cast<std::size_t>(pe);
      TopRow row{card.backend, card.info.index, pe};
      const PeState now = pe_state(card.info, pe);
      row.pid = now.pid;
      row.faults = now.faults;
      row.resets = now.resets;
      const bool published = i < card.info.pe_busy_ns.size() && i < card.info.pe_executions.size();
      if (published) row.executions = card.info.pe_executions[i];
      if (published && now.pid != 0 && prev != nullptr && i < prev->pe_busy_ns.size() &&
          i < prev->pe_executions.size() && i < prev->pe_holder_pid.size() && prev->pe_holder_pid[i] == now.pid) {
        const std::uint64_t b0 = prev->pe_busy_ns[i], b1 = card.info.pe_busy_ns[i];
        const std::uint64_t e0 = prev->pe_executions[i], e1 = card.info.pe_executions[i];
        row.measured = true;
        row.utilisation = std::min(1.0, static_cast<double>(b1 >= b0 ? b1 - b0 : 0) / (seconds * 1e9));
        row.executions_per_s = static_cast<double>(e1 >= e0 ? e1 - e0 : 0) / seconds;
      }
      rows.push_back(row);
    }
  }
  return rows;
}

int top(const Options& options) {
  for (int n = 0; n < options.count; ++n) {
    const std::vector<TopRow> rows = top_sample(options);
    if (options.format == "json") {
      json out = {{"interval_s", options.interval_s}, {"pes", json::array()}};
      for (const TopRow& r : rows) {
        json pe = {{"backend", r.backend}, {"npu", r.card}, {"pe", r.pe},
                   {"name", DeviceFile{r.card, r.pe, r.pe}.name()},
                   {"holder_pid", r.pid != 0 ? json(r.pid) : json(nullptr)}};
        if (r.measured) {
          pe["utilisation"] = r.utilisation;
          pe["executions_per_s"] = r.executions_per_s;
          pe["executions"] = r.executions;
          pe["faults"] = r.faults;
          pe["resets"] = r.resets;
        }
        out["pes"].push_back(std::move(pe));
      }
      std::cout << out.dump(2) << std::endl;
      continue;
    }
    if (rows.empty()) {
      no_cards(options);
      return 0;
    }
    std::vector<std::vector<std::string>> table{
        {"BACKEND", "PE", "PID", "UTIL", "EXEC/S", "EXECUTIONS", "FAULTS", "RESETS"}};
    for (const TopRow& r : rows) {
      const std::string name = DeviceFile{r.card, r.pe, r.pe}.name();
      if (!r.measured) {
        table.push_back({r.backend, name, r.pid != 0 ? std::to_string(r.pid) : "-", "-", "-", "-", "-", "-"});
        continue;
      }
      table.push_back({r.backend, name, std::to_string(r.pid), fmt::format("{:.1f}%", 100 * r.utilisation),
                       fmt::format("{:.1f}", r.executions_per_s), std::to_string(r.executions),
                       std::to_string(r.faults), std::to_string(r.resets)});
    }
    print_table(table);
    std::cout << std::flush;
  }
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
  CLI::App* top_cmd = app.add_subcommand(
      "top", "Per-PE utilisation (device-busy share of the interval), executions/s, faults and resets of "
             "the processes holding the PEs, from two samples --interval apart");
  top_cmd->add_option("--interval", options.interval_s, "Seconds between the two samples of a report")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  top_cmd->add_option("--count", options.count, "Reports to print")->capture_default_str()->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  try {
    if (list_cmd->parsed()) return list(options);
    if (info_cmd->parsed()) return info(options);
    if (top_cmd->parsed()) return top(options);
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
