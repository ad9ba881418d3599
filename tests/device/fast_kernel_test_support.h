// Helpers shared by the fast-kernel tests (test_fast_conv.cpp, test_fast_other_kernels.cpp):
// random programs and data, expected bytes in either layout, and the run in three ways.
//
// Every case runs three ways at every ISA level this CPU has (avx2, avx-vnni, avx512-vnni,
// avx512 on x86-64; neon, neon-dotprod, neon-i8mm on aarch64: each forced in turn) and must match
// the reference byte for byte (row padding of lowered outputs included, which must be zero):
// run_kernel without preparation (packed per call), with a PreparedProgram (packed once), and with
// the fast kernels disabled (the portable kernels). A CPU without any fast level runs the portable
// kernels three times. Under qemu-x86_64 -cpu Haswell (tests/device/CMakeLists.txt) the avx2 level
// is the only one; in the aarch64 cross build the tests run under qemu-aarch64 -cpu max (neon,
// neon-dotprod, neon-i8mm) and -cpu cortex-a57 (neon only).
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "device_test_util.h"
#include "fast_switch.h"
#include "kernels.h"

namespace furiosa::device::test {

// The fast levels this CPU has, lowest first (none: the portable kernels only).
inline std::vector<SimIsa> fast_levels() {
  std::vector<SimIsa> levels = sim_cpu_isa_levels();
  levels.erase(std::remove(levels.begin(), levels.end(), SimIsa::Portable), levels.end());
  return levels;
}

inline std::int32_t value_of(const std::byte* p, DType dtype) {
  const auto u = std::to_integer<std::uint8_t>(*p);
  return dtype == DType::Int8 ? static_cast<std::int8_t>(u) : static_cast<std::int32_t>(u);
}

// Element (n, c, h, w) of a rank-4 tensor stored in `region` (either layout).
inline std::int64_t offset4(const isa::TensorRef& ref, std::int64_t n, std::int64_t c,
                            std::int64_t h, std::int64_t w) {
  const auto& s = ref.shape;
  const std::int64_t pitch =
      ref.layout == isa::Layout::LoweredNCHW ? isa::padded_width(s[3]) : s[3];
  return static_cast<std::int64_t>(ref.address) + ((n * s[1] + c) * s[2] + h) * pitch + w;
}

// Writes the expected bytes of a rank-4 output: values at their positions, zero row padding.
inline void put4(std::vector<std::byte>& out, const isa::TensorRef& ref, std::int64_t n,
                 std::int64_t c, std::int64_t h, std::int64_t w, std::int32_t v) {
  out[static_cast<std::size_t>(offset4(ref, n, c, h, w) - static_cast<std::int64_t>(ref.address))] =
      static_cast<std::byte>(static_cast<std::uint8_t>(v));
}

// A random byte image of the whole region: constants at 0, random bytes everywhere else.
inline std::vector<std::byte> make_region(const isa::Program& prog, std::mt19937& rng) {
  std::vector<std::byte> region(static_cast<std::size_t>(prog.dram_bytes));
  for (auto& b : region) b = static_cast<std::byte>(rng());
  if (!prog.constants.empty()) {
    std::memcpy(region.data(), prog.constants.data(), prog.constants.size());
  }
  return region;
}

// Runs kernel 0 of `prog` on a copy of `region` in the three ways and checks that the bytes of
// `out` equal `expected` each time.
inline void check_three_ways(const isa::Program& prog, const std::vector<std::byte>& region,
                             const isa::TensorRef& out, const std::vector<std::byte>& expected) {
  FastSwitch restore;
  const auto slice = [&](const std::vector<std::byte>& r) {
    return std::vector<std::byte>(
        r.begin() + static_cast<std::ptrdiff_t>(out.address),
        r.begin() + static_cast<std::ptrdiff_t>(out.address + out.size_bytes()));
  };
  for (SimIsa level : fast_levels()) {
    REQUIRE(sim::set_fast_kernels_level(level));
    INFO("level " << sim_active_isa());
    {
      auto r = region;
      sim::run_kernel(prog.kernels[0], r);
      INFO("unprepared");
      CHECK(slice(r) == expected);
    }
    {
      auto prepared = sim::prepare_program(prog);
      auto r = region;
      sim::run_kernel(prog.kernels[0], r, prepared.get(), 0);
      INFO("prepared");
      CHECK(slice(r) == expected);
      r = region;  // a second run reuses the packed weights and the scratch buffers
      sim::run_kernel(prog.kernels[0], r, prepared.get(), 0);
      CHECK(slice(r) == expected);
    }
  }
  sim::set_fast_kernels_level(SimIsa::Auto);
  {
    sim::set_fast_kernels_enabled(false);
    auto r = region;
    sim::run_kernel(prog.kernels[0], r);
    INFO("portable kernels");
    CHECK(slice(r) == expected);
  }
}

// Uniform in [0, n).
inline std::int64_t rnd(std::mt19937& rng, std::int64_t n) {
  return static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(n));
}

inline DType pick_8bit(std::mt19937& rng) { return rnd(rng, 2) ? DType::Int8 : DType::UInt8; }

inline std::int32_t random_in(std::mt19937& rng, std::int32_t lo, std::int32_t hi) {
  return std::uniform_int_distribution<std::int32_t>(lo, hi)(rng);
}

inline std::int64_t out_dim(std::int64_t in, std::int64_t k, std::int64_t p0, std::int64_t p1,
                            std::int64_t s, std::int64_t d) {
  return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

}  // namespace furiosa::device::test
