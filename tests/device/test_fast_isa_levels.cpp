// Fast kernels: the ISA levels' names and ladder, forcing a level, and FURIOSA_SIM_ISA's refusals.
// The levels: avx2, avx-vnni, avx512-vnni, avx512 on x86-64; neon, neon-dotprod, neon-i8mm on
// aarch64. Under qemu-x86_64 -cpu Haswell (tests/device/CMakeLists.txt) the avx2 level is the
// only one; in the aarch64 cross build the tests run under qemu-aarch64 -cpu max (neon,
// neon-dotprod, neon-i8mm) and -cpu cortex-a57 (neon only).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fmt/format.h>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "device_test_util.h"
#include "fast_kernels.h"
#include "fast_switch.h"
#include "kernels.h"

using namespace furiosa;
using namespace furiosa::device;
using namespace furiosa::device::test;
using isa::Layout;

namespace {

TEST_CASE("ISA levels: names, the ladder and forcing a level", "[device][kernels][fast][isa]") {
  CHECK(parse_sim_isa("avx2") == SimIsa::Avx2);
  CHECK(parse_sim_isa("avx-vnni") == SimIsa::AvxVnni);
  CHECK(parse_sim_isa("avx512-vnni") == SimIsa::Avx512Vnni);
  CHECK(parse_sim_isa("avx512") == SimIsa::Avx512);
  CHECK(parse_sim_isa("avx512-vnni-vbmi") == SimIsa::Avx512);  // the older name
  CHECK(parse_sim_isa("neon") == SimIsa::Neon);
  CHECK(parse_sim_isa("neon-dotprod") == SimIsa::NeonDotprod);
  CHECK(parse_sim_isa("neon-i8mm") == SimIsa::NeonI8mm);
  CHECK_THROWS_WITH(parse_sim_isa("sse9"), Catch::Contains("avx2, avx-vnni, avx512-vnni, avx512"));
  CHECK_THROWS_WITH(parse_sim_isa("sse9"), Catch::Contains("neon, neon-dotprod, neon-i8mm"));
  const std::vector<SimIsa> levels = sim_cpu_isa_levels();
  REQUIRE(!levels.empty());
  CHECK(levels.front() == SimIsa::Portable);
  CHECK(std::is_sorted(levels.begin(), levels.end()));
  FastSwitch restore;
  for (SimIsa level : levels) {
    REQUIRE(sim::set_fast_kernels_level(level));
    CHECK(sim_active_isa() == sim_isa_name(level));
  }
  for (SimIsa level : {SimIsa::Avx2, SimIsa::AvxVnni, SimIsa::Avx512Vnni, SimIsa::Avx512,
                       SimIsa::Neon, SimIsa::NeonDotprod, SimIsa::NeonI8mm}) {
    if (std::find(levels.begin(), levels.end(), level) == levels.end()) {
      CHECK_FALSE(sim::set_fast_kernels_level(level));  // refused, level unchanged
    }
  }
  // What this process runs without a forced level (FURIOSA_SIM_ISA, else the best level).
  sim::set_fast_kernels_level(SimIsa::Auto);
  const SimIsa env = sim_isa_from_environment();
  CHECK(sim_active_isa() == sim_isa_name(env == SimIsa::Auto ? levels.back() : env));
  // FURIOSA_SIM_ISA_EXPECT (set by the qemu test) names the level auto must pick.
  if (const char* expect = std::getenv("FURIOSA_SIM_ISA_EXPECT")) {
    CHECK(sim_active_isa() == std::string_view(expect));
  }
}

TEST_CASE("FURIOSA_SIM_ISA naming a level of the other architecture is refused in one line",
          "[device][kernels][fast][isa]") {
  const char* old = std::getenv("FURIOSA_SIM_ISA");
  const std::string saved = old != nullptr ? old : "";
  const std::vector<SimIsa> levels = sim_cpu_isa_levels();
  const bool x86 = std::find(levels.begin(), levels.end(), SimIsa::Avx2) != levels.end();
  const bool arm = std::find(levels.begin(), levels.end(), SimIsa::Neon) != levels.end();
  // An x86-64 level on aarch64 names both architectures; on x86-64 a NEON level likewise.
  for (const auto& [name, arch] : {std::pair<const char*, const char*>{"avx2", "x86-64"},
                                   {"avx512", "x86-64"},
                                   {"neon", "aarch64"},
                                   {"neon-dotprod", "aarch64"},
                                   {"neon-i8mm", "aarch64"}}) {
    const bool foreign = std::string_view(arch) == "x86-64" ? arm : x86;
    if (!foreign) continue;
    INFO(name);
    ::setenv("FURIOSA_SIM_ISA", name, 1);
    try {
      (void)sim_isa_from_environment();
      FAIL("accepted");
    } catch (const Error& e) {
      const std::string msg = e.message();
      CHECK(msg.find(fmt::format("FURIOSA_SIM_ISA={}: an {} level", name, arch)) == 0);
      CHECK(msg.find('\n') == std::string::npos);
    }
  }
  if (old != nullptr) {
    ::setenv("FURIOSA_SIM_ISA", saved.c_str(), 1);
  } else {
    ::unsetenv("FURIOSA_SIM_ISA");
  }
}

}  // namespace
