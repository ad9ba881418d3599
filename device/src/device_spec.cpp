// Device specs: parsing, precedence and resolution to device files (device_spec.h).
#include "furiosa/device/device_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "furiosa/core/error.h"
#include "furiosa/core/file_io.h"
#include "text_scan.h"

namespace furiosa::device {

namespace {

constexpr int kMaxCount = 1024;  // Y of warboy(X)*Y; far above any real machine's PE count

constexpr std::string_view kSyntax =
    "expected warboy(X)*Y, warboy*Y, npu:X:Y, npu:X:Y-Z, npu:X or npuXpeY[-Z], comma-separated";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

using detail::consume;
using detail::consume_number;

// Parses one item of a spec; `spec` is the whole spec for messages.
class ItemParser {
 public:
  ItemParser(std::string_view spec, std::string_view item) : spec_(spec), item_(item) {}

  DeviceSpec::Entry parse() {
    DeviceSpec::Entry entry;
    entry.text = std::string(item_);
    std::string_view rest = item_;
    if (consume(rest, "warboy")) {
      parse_warboy(rest, entry);
    } else if (consume(rest, "npu:")) {
      parse_card_and_pes(rest, ':', entry);
    } else if (!rest.empty() && rest.front() >= '0' && rest.front() <= '9') {
      parse_card_and_pes(rest, ':', entry);  // "X", "X:Y", "X:Y-Z" (device-api's form)
    } else {
      consume(rest, "/dev/");
      if (!consume(rest, "npu")) fail("is not a device spec");
      parse_card_and_pes(rest, 'p', entry);
    }
    return entry;
  }

 private:
  [[noreturn]] void fail(std::string_view problem) const {
    throw Error(ErrorCode::InvalidArgument, fmt::format("invalid device spec '{}': item '{}' {}; {}",
                                                        spec_, item_, problem, kSyntax));
  }

  // After "warboy": "(X)*Y" or "*Y".
  void parse_warboy(std::string_view rest, DeviceSpec::Entry& entry) const {
    entry.kind = DeviceSpec::Entry::Kind::Any;
    entry.fused_pes = 1;
    if (consume(rest, "(")) {
      if (!consume_number(rest, entry.fused_pes) || !consume(rest, ")")) {
        fail("has no PE count in 'warboy(X)' (X = 1 or 2)");
      }
      if (entry.fused_pes < 1 || entry.fused_pes > 2) {
        fail(fmt::format("asks for {} fused PEs; a Warboy card has 2 PEs, so X must be 1 or 2",
                         entry.fused_pes));
      }
    }
    if (!consume(rest, "*")) fail("has no device count (write warboy(X)*Y, e.g. warboy(2)*1)");
    if (!consume_number(rest, entry.count) || !rest.empty()) {
      fail("has no valid device count after '*'");
    }
    if (entry.count < 1 || entry.count > kMaxCount) {
      fail(fmt::format("asks for {} devices; the count must be in 1..{}", entry.count, kMaxCount));
    }
  }

  // "X", "X<sep>Y" or "X<sep>Y-Z" where <sep> is ':' (npu:X:Y) or "pe" (npuXpeY).
  void parse_card_and_pes(std::string_view rest, char sep, DeviceSpec::Entry& entry) const {
    int card = 0;
    if (!consume_number(rest, card)) fail("has no card number");
    entry.card = card;
    if (rest.empty()) {
      entry.kind = DeviceSpec::Entry::Kind::Card;
      return;
    }
    const bool has_sep = sep == ':' ? consume(rest, ":") : consume(rest, "pe");
    if (!has_sep) fail(sep == ':' ? "has no ':' before the PE number" : "has no 'pe' before the PE number");
    entry.kind = DeviceSpec::Entry::Kind::File;
    entry.file.card = card;
    if (!consume_number(rest, entry.file.first_pe)) fail("has no PE number");
    entry.file.last_pe = entry.file.first_pe;
    if (consume(rest, "-")) {
      if (!consume_number(rest, entry.file.last_pe)) fail("has no last PE after '-'");
      if (entry.file.last_pe <= entry.file.first_pe) {
        fail(fmt::format("has PE range {}-{}; a fused range names increasing PEs, e.g. 0-1",
                         entry.file.first_pe, entry.file.last_pe));
      }
    }
    if (!rest.empty()) fail(fmt::format("has unexpected text '{}'", rest));
  }

  std::string_view spec_;
  std::string_view item_;
};

// "pe0-1" style description of a card's PEs.
std::string describe_cards(const std::vector<const CardInfo*>& cards) {
  if (cards.empty()) return "no NPU cards were found";
  std::vector<std::string> parts;
  for (const CardInfo* card : cards) {
    if (card->pe_count <= 0) {
      parts.push_back(fmt::format("npu{} (no PEs)", card->index));
    } else if (card->pe_count == 1) {
      parts.push_back(fmt::format("npu{} (pe0)", card->index));
    } else {
      parts.push_back(fmt::format("npu{} (pe0-{})", card->index, card->pe_count - 1));
    }
  }
  return fmt::format("the machine has {}", fmt::join(parts, ", "));
}

bool pe_busy(const CardInfo& card, int pe) {
  return pe >= 0 && static_cast<std::size_t>(pe) < card.pe_busy.size() &&
         card.pe_busy[static_cast<std::size_t>(pe)];
}

// The id of the process holding PE `pe` of `card`, 0 when unknown (or free).
long holder_pid(const CardInfo& card, int pe) {
  return pe >= 0 && static_cast<std::size_t>(pe) < card.pe_holder_pid.size()
             ? card.pe_holder_pid[static_cast<std::size_t>(pe)]
             : 0;
}

// Held cores of `file` on `card`, as device file names ("npu0pe1"), each followed by its
// holder when the backend knows it ("npu0pe1 (process 4242)") when `with_holders`.
std::vector<std::string> held_cores(const CardInfo& card, const DeviceFile& file,
                                    bool with_holders = true) {
  std::vector<std::string> held;
  for (int pe = file.first_pe; pe <= file.last_pe; ++pe) {
    if (!pe_busy(card, pe)) continue;
    const std::string name = DeviceFile{card.index, pe, pe}.name();
    const long pid = holder_pid(card, pe);
    held.push_back(with_holders && pid > 0 ? fmt::format("{} ({})", name, process_label(pid))
                                           : name);
  }
  return held;
}

// Who holds the busy cores of `file` on `card`: "process 4242", "processes 4242, 4243", or
// "another session" when the backend does not know.
std::string holders(const CardInfo& card, const DeviceFile& file) {
  std::vector<long> pids;
  for (int pe = file.first_pe; pe <= file.last_pe; ++pe) {
    const long pid = pe_busy(card, pe) ? holder_pid(card, pe) : 0;
    if (pid > 0 && std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
  }
  if (pids.empty()) return "another session";
  std::vector<std::string> labels;
  for (long pid : pids) labels.push_back(process_label(pid));
  return fmt::format("{}", fmt::join(labels, ", "));
}

std::vector<std::string> names(const std::vector<DeviceFile>& files) {
  std::vector<std::string> result;
  result.reserve(files.size());
  for (const DeviceFile& file : files) result.push_back(file.name());
  return result;
}

bool is_warboy(const CardInfo& card) {
  std::string arch = card.arch;
  std::transform(arch.begin(), arch.end(), arch.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return arch == "warboy";
}

}  // namespace

DeviceSpec parse_device_spec(std::string_view text) {
  DeviceSpec spec;
  const std::string_view whole = trim(text);
  spec.text = std::string(whole);
  if (whole.empty()) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("invalid device spec '{}': it is empty; {}", text, kSyntax));
  }
  std::size_t start = 0;
  int position = 1;
  while (true) {
    const std::size_t comma = whole.find(',', start);
    const std::string_view item =
        trim(whole.substr(start, comma == std::string_view::npos ? whole.size() - start
                                                                 : comma - start));
    if (item.empty()) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("invalid device spec '{}': item {} is empty; {}", whole, position,
                              kSyntax));
    }
    spec.entries.push_back(ItemParser(whole, item).parse());
    if (comma == std::string_view::npos) break;
    start = comma + 1;
    ++position;
  }
  return spec;
}

std::optional<std::string> process_env(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

DeviceSpecChoice choose_device_spec(std::string_view explicit_spec, const EnvGetter& env) {
  if (!trim(explicit_spec).empty()) return {std::string(trim(explicit_spec)), "argument"};
  for (std::string_view name : {"FURIOSA_DEVICES", "NPU_DEVNAME"}) {
    if (!env) break;
    const std::optional<std::string> value = env(name);
    if (value && !trim(*value).empty()) return {std::string(trim(*value)), std::string(name)};
  }
  return {std::string(kDefaultDeviceSpec), "default"};
}

std::string effective_device_spec(std::string_view explicit_spec, const EnvGetter& env) {
  return choose_device_spec(explicit_spec, env).text;
}

std::vector<DeviceFile> resolve_device_spec(const DeviceSpec& spec,
                                            const std::vector<CardInfo>& cards_in) {
  using Kind = DeviceSpec::Entry::Kind;
  std::vector<const CardInfo*> cards;
  for (const CardInfo& card : cards_in) cards.push_back(&card);
  std::stable_sort(cards.begin(), cards.end(),
                   [](const CardInfo* a, const CardInfo* b) { return a->index < b->index; });
  auto find_card = [&](int index) -> const CardInfo* {
    for (const CardInfo* card : cards) {
      if (card->index == index) return card;
    }
    return nullptr;
  };

  std::vector<std::vector<DeviceFile>> chosen(spec.entries.size());
  struct Taken {
    DeviceFile file;
    const DeviceSpec::Entry* entry;
  };
  std::vector<Taken> taken;

  // Explicit items first, so that warboy(X)*Y items never take cores an explicit item names.
  for (std::size_t i = 0; i < spec.entries.size(); ++i) {
    const DeviceSpec::Entry& entry = spec.entries[i];
    if (entry.kind == Kind::Any) continue;
    const CardInfo* card = find_card(entry.card);
    DeviceFile file = entry.file;
    if (entry.kind == Kind::Card && card != nullptr) {
      file = DeviceFile{entry.card, 0, std::max(card->pe_count - 1, 0)};
    }
    if (card == nullptr || card->pe_count <= 0 || file.last_pe >= card->pe_count) {
      const std::string what = entry.kind == Kind::Card ? fmt::format("card npu{}", entry.card)
                                                        : file.name();
      throw Error(ErrorCode::DeviceNotFound,
                  fmt::format("device spec '{}': item '{}' names {}, which does not exist; {}",
                              spec.text, entry.text, what, describe_cards(cards)));
    }
    for (const Taken& other : taken) {
      if (other.file.overlaps(file)) {
        throw Error(ErrorCode::InvalidArgument,
                    fmt::format("device spec '{}': items '{}' ({}) and '{}' ({}) overlap; each "
                                "core can be used by one item only",
                                spec.text, other.entry->text, other.file.name(), entry.text,
                                file.name()));
      }
    }
    const std::vector<std::string> held = held_cores(*card, file, false);
    if (!held.empty()) {
      throw Error(
          ErrorCode::DeviceBusy,
          fmt::format("device spec '{}': item '{}' names {}, but its cores {} are held by {}",
                      spec.text, entry.text, file.name(), fmt::join(held, ", "),
                      holders(*card, file)));
    }
    chosen[i].push_back(file);
    taken.push_back({file, &entry});
  }

  // Then warboy(X)*Y items, each taking the first free aligned X-PE ranges in card order.
  for (std::size_t i = 0; i < spec.entries.size(); ++i) {
    const DeviceSpec::Entry& entry = spec.entries[i];
    if (entry.kind != Kind::Any) continue;
    const int x = entry.fused_pes;
    std::vector<DeviceFile> existing, usable, free;
    std::vector<std::string> excluded;  // "npu0pe0-1 (overlaps 'npu0pe0')"
    std::vector<std::string> held;
    for (const CardInfo* card : cards) {
      if (!is_warboy(*card)) continue;
      for (int first = 0; first + x <= card->pe_count; first += x) {
        const DeviceFile file{card->index, first, first + x - 1};
        existing.push_back(file);
        const auto clash = std::find_if(taken.begin(), taken.end(),
                                        [&](const Taken& t) { return t.file.overlaps(file); });
        if (clash != taken.end()) {
          excluded.push_back(fmt::format("{} (overlaps '{}')", file.name(), clash->entry->text));
          continue;
        }
        usable.push_back(file);
        const std::vector<std::string> busy = held_cores(*card, file);
        if (busy.empty()) {
          free.push_back(file);
        } else {
          held.insert(held.end(), busy.begin(), busy.end());
        }
      }
    }
    const std::string wanted =
        fmt::format("{} device{} of {} fused PE{}", entry.count, entry.count == 1 ? "" : "s", x,
                    x == 1 ? "" : "s");
    if (static_cast<int>(usable.size()) < entry.count) {
      std::string message =
          existing.empty()
              ? fmt::format("device spec '{}': item '{}' needs {}, but none exists", spec.text,
                            entry.text, wanted)
              : fmt::format("device spec '{}': item '{}' needs {}, but only {} exist{} ({})",
                            spec.text, entry.text, wanted, existing.size(),
                            existing.size() == 1 ? "s" : "", fmt::join(names(existing), ", "));
      if (!excluded.empty()) {
        message += fmt::format(" and other items of the spec use some: {}",
                               fmt::join(excluded, ", "));
      }
      message += fmt::format("; {}", describe_cards(cards));
      throw Error(ErrorCode::DeviceNotFound, message);
    }
    if (static_cast<int>(free.size()) < entry.count) {
      throw Error(ErrorCode::DeviceBusy,
                  fmt::format("device spec '{}': item '{}' needs {}, but only {} of {} ({}) {} "
                              "free; held cores: {}",
                              spec.text, entry.text, wanted, free.size(), usable.size(),
                              fmt::join(names(usable), ", "), free.size() == 1 ? "is" : "are",
                              fmt::join(held, ", ")));
    }
    for (int k = 0; k < entry.count; ++k) {
      const DeviceFile file = free[static_cast<std::size_t>(k)];
      chosen[i].push_back(file);
      taken.push_back({file, &entry});
    }
  }

  std::vector<DeviceFile> result;
  for (const auto& files : chosen) result.insert(result.end(), files.begin(), files.end());
  return result;
}

}  // namespace furiosa::device
