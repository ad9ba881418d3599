// The simulator's fault spec (FURIOSA_SIM_FAULTS, SimConfig::faults): parsing and formatting,
// and which executions of a device fault (sim_faults.h). Grammar and semantics: docs/devices.md
// "Fault injection".
#include "sim_faults.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "furiosa/device/sim.h"

namespace furiosa::device {

std::string_view sim_fault_name(SimFaultKind kind) noexcept {
  switch (kind) {
    case SimFaultKind::Error: return "error";
    case SimFaultKind::Hang: return "hang";
    case SimFaultKind::Dma: return "dma";
    case SimFaultKind::Lost: return "lost";
  }
  return "unknown";
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The whole of `text` as an unsigned integer; false when it is not one (or overflows).
bool parse_u64(std::string_view text, std::uint64_t& value) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

// The whole of `text` as a decimal probability in [0, 1].
bool parse_probability(std::string_view text, double& value) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && std::isfinite(value) && value >= 0.0 &&
         value <= 1.0;
}

constexpr std::string_view kExpected =
    "expected KIND:every=N, KIND:p=X or KIND:after=N with KIND one of error, hang, dma, lost, "
    "or seed=N";

}  // namespace

SimFaultPlan parse_sim_faults(std::string_view spec) {
  SimFaultPlan plan;
  auto bad = [&](std::string_view item, std::string_view problem) {
    return Error(ErrorCode::InvalidArgument,
                 fmt::format("invalid fault spec '{}': item '{}' {}; {}", escape_text(spec, 128),
                             escape_text(item, 64), problem, kExpected));
  };
  if (trim(spec).empty()) return plan;
  bool seen_seed = false;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = spec.find(',', start);
    const std::string_view item =
        trim(spec.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (item.empty()) throw bad(item, "is empty");
    if (item.starts_with("seed=")) {
      if (seen_seed) throw bad(item, "repeats the seed");
      if (!parse_u64(item.substr(5), plan.seed)) throw bad(item, "has a seed that is not an unsigned integer");
      seen_seed = true;
    } else {
      const std::size_t colon = item.find(':');
      if (colon == std::string_view::npos) throw bad(item, "has no ':' between the kind and the trigger");
      const std::string_view kind = item.substr(0, colon);
      const std::string_view trigger = item.substr(colon + 1);
      SimFaultRule rule;
      if (kind == "error") rule.kind = SimFaultKind::Error;
      else if (kind == "hang") rule.kind = SimFaultKind::Hang;
      else if (kind == "dma") rule.kind = SimFaultKind::Dma;
      else if (kind == "lost") rule.kind = SimFaultKind::Lost;
      else throw bad(item, fmt::format("has an unknown fault kind '{}'", escape_text(kind, 64)));
      const std::size_t eq = trigger.find('=');
      if (eq == std::string_view::npos)
        throw bad(item, fmt::format("has a trigger '{}' without '='", escape_text(trigger, 64)));
      const std::string_view key = trigger.substr(0, eq), value = trigger.substr(eq + 1);
      if (key == "every") {
        if (!parse_u64(value, rule.every) || rule.every == 0) {
          throw bad(item, fmt::format("has every='{}', which is not an integer >= 1",
                                      escape_text(value, 64)));
        }
      } else if (key == "after") {
        if (!parse_u64(value, rule.after)) {
          throw bad(item, fmt::format("has after='{}', which is not an integer >= 0",
                                      escape_text(value, 64)));
        }
        rule.has_after = true;
      } else if (key == "p") {
        if (!parse_probability(value, rule.p)) {
          throw bad(item, fmt::format("has p='{}', which is not a number in [0, 1]",
                                      escape_text(value, 64)));
        }
      } else {
        throw bad(item, fmt::format("has an unknown trigger '{}'", escape_text(key, 64)));
      }
      plan.rules.push_back(rule);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return plan;
}

std::string format_sim_faults(const SimFaultPlan& plan) {
  std::string out;
  for (const SimFaultRule& r : plan.rules) {
    if (!out.empty()) out += ',';
    if (r.every > 0) out += fmt::format("{}:every={}", sim_fault_name(r.kind), r.every);
    else if (r.has_after) out += fmt::format("{}:after={}", sim_fault_name(r.kind), r.after);
    else out += fmt::format("{}:p={}", sim_fault_name(r.kind), r.p);
  }
  if (plan.seed != 0) out += fmt::format("{}seed={}", out.empty() ? "" : ",", plan.seed);
  return out;
}

}  // namespace furiosa::device

namespace furiosa::device::sim {

namespace {

// Seed of a device's fault generator: the plan's seed mixed with the device file's name (FNV-1a).
std::uint64_t fault_seed(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 1469598103934665603ull ^ seed;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// Precedence when several rules fire on one execution: lost, hang, dma, error.
int rank(SimFaultKind kind) {
  switch (kind) {
    case SimFaultKind::Lost: return 3;
    case SimFaultKind::Hang: return 2;
    case SimFaultKind::Dma: return 1;
    case SimFaultKind::Error: return 0;
  }
  return 0;
}

}  // namespace

FaultInjector::FaultInjector(const SimFaultPlan& plan, std::string_view device_name)
    : plan_(plan), rng_(fault_seed(plan.seed, device_name)) {}

std::optional<SimFaultKind> FaultInjector::next() {
  if (plan_.empty()) return std::nullopt;
  const std::uint64_t n = ++taken_;
  std::optional<SimFaultKind> chosen;
  for (const SimFaultRule& r : plan_.rules) {
    bool fire = false;
    if (r.every > 0) fire = n % r.every == 0;
    else if (r.has_after) fire = n > r.after;
    else fire = std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < r.p;
    if (fire && (!chosen || rank(r.kind) > rank(*chosen))) chosen = r.kind;
  }
  if (chosen == SimFaultKind::Lost) lost_ = true;
  return chosen;
}

Error device_lost_error(std::string_view device_name) {
  return Error(
      ErrorCode::DeviceNotFound,
      fmt::format("{}: device lost (injected fault); close and open it again", device_name),
      ErrorSubject::of_device(std::string(device_name)));
}

}  // namespace furiosa::device::sim
