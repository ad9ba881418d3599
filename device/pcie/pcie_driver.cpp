// The pcie backend: card discovery from /dev/npu* and /sys/class/npu_mgmt/npuN_mgmt/*.
// Opening is refused: this project has no access to the kernel driver's ioctl ABI.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "furiosa/core/error.h"
#include "furiosa/device/pcie.h"

namespace furiosa::device {

namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxAttributeBytes = 64 * 1024;
constexpr int kMaxPes = 64;     // sanity bound for pe_count and PE indices read from files
constexpr int kWarboyPes = 2;   // a Warboy card has 2 PEs

std::string trim(std::string text) {
  auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!text.empty() && space(static_cast<unsigned char>(text.back()))) text.pop_back();
  std::size_t start = 0;
  while (start < text.size() && space(static_cast<unsigned char>(text[start]))) ++start;
  return text.substr(start);
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Trimmed contents of a regular file, or nullopt when it is missing or unreadable.
std::optional<std::string> read_text(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(kMaxAttributeBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return std::nullopt;
  text.resize(static_cast<std::size_t>(in.gcount()));
  return trim(std::move(text));
}

// Decimal integer in [lo, hi]; nullopt otherwise.
std::optional<int> parse_int(const std::string& text, int lo, int hi) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || value < lo || value > hi) {
    return std::nullopt;
  }
  return static_cast<int>(value);
}

// Consumes 1..6 decimal digits.
bool consume_number(std::string_view& text, int& value) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 6) return false;
  value = std::stoi(std::string(text.substr(0, digits)));
  text.remove_prefix(digits);
  return true;
}

// What a /dev entry name means: a card's management file "npuN" (file == nullopt) or a core
// device file "npuNpeM[-K]".
struct DevEntry {
  int card = 0;
  std::optional<DeviceFile> file;
};

std::optional<DevEntry> parse_dev_name(std::string_view name) {
  std::string_view rest = name;
  if (!rest.starts_with("npu")) return std::nullopt;
  rest.remove_prefix(3);
  DevEntry entry;
  if (!consume_number(rest, entry.card)) return std::nullopt;
  if (rest.empty()) return entry;
  try {
    entry.file = DeviceFile::parse(name);
  } catch (const Error&) {
    return std::nullopt;
  }
  if (entry.file->last_pe >= kMaxPes) return std::nullopt;
  return entry;
}

// "0 1", "0,1", "0-1" -> PE indices (invalid tokens are ignored).
std::set<int> parse_pe_list(const std::string& text) {
  std::set<int> pes;
  std::string normalized = text;
  std::replace(normalized.begin(), normalized.end(), ',', ' ');
  std::istringstream in(normalized);
  std::string token;
  while (in >> token) {
    const std::size_t dash = token.find('-');
    if (dash == std::string::npos) {
      if (auto pe = parse_int(token, 0, kMaxPes - 1)) pes.insert(*pe);
      continue;
    }
    auto first = parse_int(token.substr(0, dash), 0, kMaxPes - 1);
    auto last = parse_int(token.substr(dash + 1), 0, kMaxPes - 1);
    if (!first || !last) continue;
    for (int pe = *first; pe <= *last; ++pe) pes.insert(pe);
  }
  return pes;
}

fs::path mgmt_dir(const PcieConfig& config, int card) {
  return fs::path(config.sysfs_root) / fmt::format("npu{}_mgmt", card);
}

// The card's arch from its device_type attribute ("Warboy", "WarboyB0", ...); "warboy" when
// the attribute is missing, since Warboy is the only card this backend knows.
std::string arch_from_device_type(const std::optional<std::string>& device_type) {
  if (!device_type || device_type->empty()) return "warboy";
  const std::string value = lower(*device_type);
  if (value.find("warboy") != std::string::npos) return "warboy";
  return value;
}

class PcieDriver final : public Driver {
 public:
  explicit PcieDriver(PcieConfig config) : config_(std::move(config)) {}

  std::string_view name() const noexcept override { return "pcie"; }

  std::vector<CardInfo> enumerate() const override { return discover_pcie_cards(config_); }

  bool is_hardware() const noexcept override { return true; }

  std::unique_ptr<Device> open(const DeviceFile& file) override {
    const fs::path path = fs::path(config_.dev_root) / file.name();
    const std::vector<CardInfo> cards = discover_pcie_cards(config_);
    const auto card = std::find_if(cards.begin(), cards.end(),
                                   [&](const CardInfo& c) { return c.index == file.card; });
    const bool listed = card != cards.end() &&
                        std::find(card->device_files.begin(), card->device_files.end(), file) !=
                            card->device_files.end();
    if (!listed) {
      std::string found;
      if (cards.empty()) {
        found = fmt::format("no Warboy card was found under {}; the sim backend (--backend sim or "
                            "FURIOSA_BACKEND=sim) runs without one",
                            config_.dev_root);
      } else {
        std::vector<std::string> files;
        for (const CardInfo& c : cards) {
          for (const DeviceFile& f : c.device_files) files.push_back(f.name());
        }
        found = fmt::format("device files found: {}",
                            files.empty() ? std::string("none") : fmt::format("{}", fmt::join(files, ", ")));
      }
      throw Error(ErrorCode::DeviceNotFound,
                  fmt::format("pcie: {}: no such device file ({})", path.string(), found),
                  ErrorSubject::of_device(file.name()));
    }
    throw Error(ErrorCode::DeviceNotFound,
                fmt::format("{}: the pcie backend cannot open real Warboy cards: submitting work "
                            "to a card needs the FuriosaAI kernel driver's ioctl interface, which "
                            "is not available to this project; use the sim backend (see "
                            "docs/devices.md)",
                            path.string()),
                ErrorSubject::of_device(file.name()));
  }

 private:
  PcieConfig config_;
};

}  // namespace

std::map<std::string, std::string> read_npu_mgmt_attributes(const PcieConfig& config, int card) {
  std::map<std::string, std::string> attributes;
  std::error_code ec;
  fs::directory_iterator it(mgmt_dir(config, card), ec);
  if (ec) return attributes;
  for (const fs::directory_entry& entry : it) {
    if (auto text = read_text(entry.path())) {
      attributes.emplace(entry.path().filename().string(), std::move(*text));
    }
  }
  return attributes;
}

std::vector<CardInfo> discover_pcie_cards(const PcieConfig& config) {
  // Cards and their core device files from the /dev entries.
  std::map<int, std::vector<DeviceFile>> found;
  std::error_code ec;
  fs::directory_iterator it(config.dev_root, ec);
  if (ec) {
    spdlog::debug("pcie: cannot list {}: {}", config.dev_root, ec.message());
    return {};
  }
  for (const fs::directory_entry& entry : it) {
    std::error_code type_ec;
    if (entry.is_directory(type_ec)) continue;
    const auto parsed = parse_dev_name(entry.path().filename().string());
    if (!parsed) continue;
    auto& files = found[parsed->card];
    if (parsed->file) files.push_back(*parsed->file);
  }

  std::vector<CardInfo> cards;
  for (auto& [index, files] : found) {
    const fs::path dir = mgmt_dir(config, index);
    auto attribute = [&](const char* name) { return read_text(dir / name); };
    if (auto platform = attribute("platform_type")) {
      if (*platform != "FuriosaAI" && *platform != "VITIS") {
        spdlog::debug("pcie: skipping npu{}: platform_type '{}'", index, *platform);
        continue;
      }
    }
    CardInfo card;
    card.index = index;
    card.arch = arch_from_device_type(attribute("device_type"));
    card.busname = attribute("busname").value_or("");
    card.serial = attribute("device_sn").value_or(attribute("serial").value_or(""));
    card.firmware_version = attribute("fw_version").value_or("");
    card.driver_version = attribute("version").value_or("");
    std::optional<int> numa;
    if (auto text = attribute("numa_node")) numa = parse_int(*text, -1, 1 << 16);
    if (!numa && !card.busname.empty()) {
      if (auto text = read_text(fs::path(config.pci_devices_root) / card.busname / "numa_node")) {
        numa = parse_int(*text, -1, 1 << 16);
      }
    }
    card.numa_node = numa.value_or(-1);

    int from_files = 0;
    for (const DeviceFile& f : files) from_files = std::max(from_files, f.last_pe + 1);
    std::optional<int> pe_count;
    if (auto text = attribute("pe_count")) pe_count = parse_int(*text, 1, kMaxPes);
    card.pe_count = pe_count.value_or(from_files > 0 ? from_files
                                                     : (card.arch == "warboy" ? kWarboyPes : 0));

    card.pe_busy.assign(static_cast<std::size_t>(card.pe_count), false);
    if (auto text = attribute("busy_pes")) {
      for (int pe : parse_pe_list(*text)) {
        if (pe < card.pe_count) card.pe_busy[static_cast<std::size_t>(pe)] = true;
      }
    }

    std::sort(files.begin(), files.end(), [](const DeviceFile& a, const DeviceFile& b) {
      if (a.pe_count() != b.pe_count()) return a.pe_count() < b.pe_count();
      return a.first_pe < b.first_pe;
    });
    files.erase(std::unique(files.begin(), files.end()), files.end());
    card.device_files = std::move(files);
    cards.push_back(std::move(card));
  }
  return cards;
}

std::unique_ptr<Driver> create_pcie_driver(const PcieConfig& config) {
  return std::make_unique<PcieDriver>(config);
}

void register_pcie_backend(DriverRegistry& registry) {
  registry.register_factory("pcie", [] { return create_pcie_driver(); });
}

}  // namespace furiosa::device
