// The ISA level the simulator's kernels run at: FURIOSA_SIM_ISA's, or the one the test hooks
// force (kernels.h: set_fast_kernels_enabled, set_fast_kernels_level), as the fast-kernel table
// the family files ask for (fast_kernels()); and the level names and checks of
// furiosa/device/sim.h (sim_isa_name, parse_sim_isa, sim_cpu_isa_levels,
// sim_isa_from_environment, sim_active_isa).
#include "kernel_common.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "furiosa/core/text.h"
#include "furiosa/device/sim.h"

namespace furiosa::device::sim {

namespace {

// Switch of the fast kernels (kernels.h: set_fast_kernels_enabled).
std::atomic<bool> g_fast_enabled{true};
// The level forced by set_fast_kernels_level (Auto: none, the environment's applies).
std::atomic<SimIsa> g_forced_level{SimIsa::Auto};

// The kernel table of FURIOSA_SIM_ISA's level, read once (null: portable). A value that does
// not parse, or names a level this CPU lacks, keeps the portable kernels here;
// sim_config_from_environment reports it as an error.
const fast::Kernels* environment_kernels() noexcept {
  static const fast::Kernels* const table = []() -> const fast::Kernels* {
    try {
      return fast::kernels_for(sim_isa_from_environment());
    } catch (...) {
      return nullptr;
    }
  }();
  return table;
}

}  // namespace

namespace detail {

const fast::Kernels* fast_kernels() noexcept {
  if (!g_fast_enabled.load(std::memory_order_relaxed)) return nullptr;
  const SimIsa forced = g_forced_level.load(std::memory_order_relaxed);
  if (forced != SimIsa::Auto) return fast::kernels_for(forced);
  return environment_kernels();
}

}  // namespace detail

void set_fast_kernels_enabled(bool enabled) noexcept {
  g_fast_enabled.store(enabled, std::memory_order_relaxed);
}

bool fast_kernels_active() noexcept { return detail::fast_kernels() != nullptr; }

bool set_fast_kernels_level(SimIsa isa) noexcept {
  if (isa != SimIsa::Auto && isa != SimIsa::Portable && !fast::cpu_has(isa)) return false;
  g_forced_level.store(isa, std::memory_order_relaxed);
  return true;
}

}  // namespace furiosa::device::sim

namespace furiosa::device {

std::string_view sim_isa_name(SimIsa isa) noexcept {
  switch (isa) {
    case SimIsa::Auto: return "auto";
    case SimIsa::Portable: return "portable";
    case SimIsa::Avx2: return "avx2";
    case SimIsa::AvxVnni: return "avx-vnni";
    case SimIsa::Avx512Vnni: return "avx512-vnni";
    case SimIsa::Avx512: return "avx512";
    case SimIsa::Neon: return "neon";
    case SimIsa::NeonDotprod: return "neon-dotprod";
    case SimIsa::NeonI8mm: return "neon-i8mm";
  }
  return "?";
}

SimIsa parse_sim_isa(std::string_view text) {
  for (SimIsa isa :
       {SimIsa::Auto, SimIsa::Portable, SimIsa::Avx2, SimIsa::AvxVnni, SimIsa::Avx512Vnni,
        SimIsa::Avx512, SimIsa::Neon, SimIsa::NeonDotprod, SimIsa::NeonI8mm}) {
    if (text == sim_isa_name(isa)) return isa;
  }
  if (text == "avx512-vnni-vbmi") return SimIsa::Avx512;  // the name before the ladder
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("'{}' is not a simulator ISA level (auto, portable, avx2, avx-vnni, "
                          "avx512-vnni, avx512, neon, neon-dotprod, neon-i8mm)",
                          escape_text(text, 64)));
}

std::vector<SimIsa> sim_cpu_isa_levels() {
  std::vector<SimIsa> levels;
  for (SimIsa isa : {SimIsa::Portable, SimIsa::Avx2, SimIsa::AvxVnni, SimIsa::Avx512Vnni,
                     SimIsa::Avx512, SimIsa::Neon, SimIsa::NeonDotprod, SimIsa::NeonI8mm}) {
    if (sim::fast::cpu_has(isa)) levels.push_back(isa);
  }
  return levels;
}

SimIsa sim_isa_from_environment() {
  const char* text = std::getenv("FURIOSA_SIM_ISA");
  if (text == nullptr || *text == '\0') return SimIsa::Auto;
  SimIsa isa = SimIsa::Auto;
  try {
    isa = parse_sim_isa(text);
  } catch (const Error& e) {
    throw Error(ErrorCode::InvalidArgument, fmt::format("FURIOSA_SIM_ISA: {}", e.message()));
  }
  if (isa != SimIsa::Auto && !sim::fast::cpu_has(isa)) {
    std::string has;
    for (SimIsa level : sim_cpu_isa_levels()) {
      has += has.empty() ? "" : ", ";
      has += sim_isa_name(level);
    }
    // A level of the other architecture says so (x86-64 levels on aarch64 and vice versa).
    const std::string_view arch = sim::fast::isa_arch(isa);
    const std::string_view host = sim::fast::isa_arch(SimIsa::Auto);
    const std::string why = arch != host ? fmt::format("an {} level, and this is an {} build", arch,
                                                       host.empty() ? "other" : host)
                                         : std::string("this CPU lacks that level");
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("FURIOSA_SIM_ISA={}: {} (it has: {})", sim_isa_name(isa), why, has));
  }
  return isa;
}

std::string_view sim_active_isa() noexcept {
  const sim::fast::Kernels* fk = sim::detail::fast_kernels();
  return sim_isa_name(fk != nullptr ? fk->isa : SimIsa::Portable);
}

}  // namespace furiosa::device
