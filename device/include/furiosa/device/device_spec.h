// Device specs: the strings FuriosaAI's SDK uses to say which NPU cores a session may use
// ("warboy(2)*1", "npu:0:0-1", "npu0pe0,npu0pe1", ...), their precedence (explicit argument,
// FURIOSA_DEVICES, NPU_DEVNAME, default) and their resolution to concrete device files.
//
// Everything here is a pure function over text and CardInfo (as Driver::enumerate() returns it),
// so it can be tested without a driver. Opening the chosen files is the caller's job; note that
// another opener may win between resolve_device_spec() and Driver::open(), which then still
// throws DeviceBusy.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/device/device.h"
#include "furiosa/device/driver.h"

namespace furiosa::device {

/// A parsed device spec: one entry per comma-separated item, in the order written.
struct DeviceSpec {
  struct Entry {
    enum class Kind {
      Any,   ///< "warboy(X)*Y" / "warboy*Y": `count` free devices of `fused_pes` fused PEs each
      File,  ///< "npu:X:Y", "npu:X:Y-Z", "npuXpeY[-Z]", "X:Y[-Z]": exactly `file`
      Card,  ///< "npu:X", "npuX", "X": all PEs of card `card`, fused
    };
    Kind kind = Kind::Any;
    std::string text;   ///< the item as written (surrounding whitespace removed)
    int fused_pes = 0;  ///< Kind::Any: X (1 or 2)
    int count = 0;      ///< Kind::Any: Y (>= 1)
    DeviceFile file;    ///< Kind::File
    int card = -1;      ///< Kind::Card and Kind::File: the card index

    bool operator==(const Entry&) const = default;
  };

  std::vector<Entry> entries;
  std::string text;  ///< the whole spec as given (surrounding whitespace removed)
};

/// The spec used when neither an argument nor the environment names one: one device of two
/// fused PEs, as in FuriosaAI's SDK.
inline constexpr std::string_view kDefaultDeviceSpec = "warboy(2)*1";

/// Parses a spec: a comma-separated list (whitespace around items is ignored) of
///   warboy(X)*Y   Y devices of X fused PEs each, X in {1, 2}, Y in 1..1024
///   warboy*Y      = warboy(1)*Y
///   npu:X:Y       PE Y of card X           (also "X:Y", as FuriosaAI's device-api accepts)
///   npu:X:Y-Z     PEs Y..Z of card X fused (Z > Y; also "X:Y-Z")
///   npu:X         every PE of card X fused (also "X" and legacy "npuX")
///   npuXpeY[-Z]   legacy device file name, optionally with a "/dev/" prefix.
/// Throws Error(InvalidArgument) naming the whole spec and the offending item.
DeviceSpec parse_device_spec(std::string_view text);

/// Looks up an environment variable; std::nullopt when unset.
using EnvGetter = std::function<std::optional<std::string>(std::string_view name)>;

/// EnvGetter over the process environment (std::getenv).
std::optional<std::string> process_env(std::string_view name);

/// Where an effective spec came from.
struct DeviceSpecChoice {
  std::string text;    ///< the spec text, trimmed
  std::string source;  ///< "argument", "FURIOSA_DEVICES", "NPU_DEVNAME" or "default"
};

/// Applies the precedence explicit argument > FURIOSA_DEVICES > NPU_DEVNAME > "warboy(2)*1".
/// A value that is empty or only whitespace counts as not given. Does not parse the text.
DeviceSpecChoice choose_device_spec(std::string_view explicit_spec,
                                    const EnvGetter& env = process_env);

/// choose_device_spec(...).text.
std::string effective_device_spec(std::string_view explicit_spec,
                                  const EnvGetter& env = process_env);

/// Chooses concrete device files for `spec` on `cards` (Driver::enumerate(); CardInfo::pe_busy
/// tells which PEs are held). The result has one file per File/Card entry and Y files per
/// "warboy(X)*Y" entry, in the order of the entries; no two files overlap.
///
/// - File and Card entries are placed first: their PE range must exist on the card (else
///   Error(DeviceNotFound) naming the spec, the item and the cards that exist) and be free (else
///   Error(DeviceBusy) naming the spec, the item, the held cores and, where CardInfo::pe_holder_pid
///   knows them, the holders: "... are held by process 4242").
/// - "warboy(X)*Y" then takes, in card order and PE order, the first Y free X-PE ranges aligned
///   to X (pe0, pe1, ... for X = 1; pe0-1, pe2-3, ... for X = 2) on cards whose arch is "warboy"
///   that do not overlap files already chosen for the spec. Error(DeviceNotFound) when the
///   machine has fewer than Y such ranges at all, Error(DeviceBusy) when it has enough but too
///   few are free; both name the spec, the item and the ranges/cores concerned (held cores
///   with their holder when known: "npu0pe0 (process 4242)").
/// - Two explicit items that overlap (e.g. "npu0pe0,npu:0:0-1") are Error(InvalidArgument).
std::vector<DeviceFile> resolve_device_spec(const DeviceSpec& spec,
                                            const std::vector<CardInfo>& cards);

}  // namespace furiosa::device
