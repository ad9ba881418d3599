// The simulator's fault spec (FURIOSA_SIM_FAULTS, SimConfig::faults): parsing and formatting.
// Grammar and semantics: docs/devices.md "Fault injection".
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>

#include "furiosa/core/error.h"
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
                 fmt::format("invalid fault spec '{}': item '{}' {}; {}", spec, item, problem, kExpected));
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
      else throw bad(item, fmt::format("has an unknown fault kind '{}'", kind));
      const std::size_t eq = trigger.find('=');
      if (eq == std::string_view::npos) throw bad(item, fmt::format("has a trigger '{}' without '='", trigger));
      const std::string_view key = trigger.substr(0, eq), value = trigger.substr(eq + 1);
      if (key == "every") {
        if (!parse_u64(value, rule.every) || rule.every == 0) {
          throw bad(item, fmt::format("has every='{}', which is not an integer >= 1", value));
        }
      } else if (key == "after") {
        if (!parse_u64(value, rule.after)) {
          throw bad(item, fmt::format("has after='{}', which is not an integer >= 0", value));
        }
        rule.has_after = true;
      } else if (key == "p") {
        if (!parse_probability(value, rule.p)) {
          throw bad(item, fmt::format("has p='{}', which is not a number in [0, 1]", value));
        }
      } else {
        throw bad(item, fmt::format("has an unknown trigger '{}'", key));
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
