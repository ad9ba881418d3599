// The simulator's configuration: SimConfig from the environment (the built-in "sim" driver) and
// its validation (every driver).
//
// Environment, read by builtin_registry() when its "sim" driver is first used (drivers
// made with create_sim_driver() take only the SimConfig they are given):
//   FURIOSA_SIM_CARDS              number of simulated cards      (default 1, allowed 0..256)
//   FURIOSA_SIM_PES_PER_CARD       PEs per simulated card         (default 2, allowed 1..64)
//   FURIOSA_SIM_FAULTS             faults to inject (parse_sim_faults; default none)
//   FURIOSA_SIM_MIN_EXECUTION_US   host-side floor of each execution (0..600000000, default 0)
//   FURIOSA_SIM_GATE               test gate: executions are taken only while this path exists
//   FURIOSA_SIM_ISA                kernel level (checked here, read by the kernels)
//   FURIOSA_SIM_COMPUTE_THREADS    host threads per device (default 2, allowed 1..64)
//   FURIOSA_SIM_INTRA_OP           1: kernels share idle compute threads (default), 0: not
//   FURIOSA_SIM_LOCK_DIR           directory of the system-wide PE locks ("off": none; default
//                                  sim_default_lock_dir())
// An empty variable counts as unset; any other value that is not an integer in range makes the
// driver creation throw Error(InvalidArgument) naming the variable.

#include "sim_config.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "furiosa/core/error.h"
#include "pe_locks.h"

namespace furiosa::device {

namespace {

// Integer value of environment variable `name` in [lo, hi], or `fallback` when unset or empty.
int env_int(const char* name, int fallback, int lo, int hi) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < lo || value > hi) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}='{}' is not an integer in [{}, {}]", name, text, lo, hi));
  }
  return static_cast<int>(value);
}

}  // namespace

SimConfig sim_config_from_environment() {
  SimConfig config;
  config.cards = env_int("FURIOSA_SIM_CARDS", config.cards, 0, 256);
  config.pes_per_card = env_int("FURIOSA_SIM_PES_PER_CARD", config.pes_per_card, 1, 64);
  config.compute_threads =
      env_int("FURIOSA_SIM_COMPUTE_THREADS", config.compute_threads, 1, 64);
  config.intra_op = env_int("FURIOSA_SIM_INTRA_OP", config.intra_op ? 1 : 0, 0, 1) == 1;
  if (const char* faults = std::getenv("FURIOSA_SIM_FAULTS");
      faults != nullptr && *faults != '\0') {
    try {
      config.faults = parse_sim_faults(faults);
    } catch (const Error& e) {
      throw Error(ErrorCode::InvalidArgument, fmt::format("FURIOSA_SIM_FAULTS: {}", e.message()));
    }
  }
  config.min_execution_time =
      std::chrono::microseconds(env_int("FURIOSA_SIM_MIN_EXECUTION_US", 0, 0, 600'000'000));
  if (const char* gate = std::getenv("FURIOSA_SIM_GATE"); gate != nullptr) config.gate_path = gate;
  (void)sim_isa_from_environment();  // throws for a bad FURIOSA_SIM_ISA
  const char* lock_dir = std::getenv("FURIOSA_SIM_LOCK_DIR");
  if (lock_dir == nullptr || *lock_dir == '\0') config.lock_dir = sim::default_lock_dir();
  else if (std::string_view(lock_dir) == "off") config.lock_dir.clear();
  else config.lock_dir = lock_dir;
  return config;
}

std::string sim_default_lock_dir() { return sim::default_lock_dir(); }

std::string_view sim_mode_name(SimMode mode) noexcept {
  return mode == SimMode::Timing ? "timing" : "functional";
}

namespace sim {

void validate_config(const SimConfig& config) {
  auto bad = [](std::string_view what) {
    return Error(ErrorCode::InvalidArgument, fmt::format("invalid SimConfig: {}", what));
  };
  if (config.cards < 0) throw bad(fmt::format("cards = {} must be >= 0", config.cards));
  if (config.pes_per_card < 1)
    throw bad(fmt::format("pes_per_card = {} must be >= 1", config.pes_per_card));
  if (!(config.clock_ghz > 0)) throw bad("clock_ghz must be > 0");
  if (!(config.macs_per_cycle_per_pe > 0)) throw bad("macs_per_cycle_per_pe must be > 0");
  if (!(config.pcie_bytes_per_ns > 0)) throw bad("pcie_bytes_per_ns must be > 0");
  if (config.dma_latency_ns < 0) throw bad("dma_latency_ns must be >= 0");
  if (config.array_align < 1) throw bad("array_align must be >= 1");
  if (!(config.sram_bytes_per_cycle_per_pe > 0))
    throw bad("sram_bytes_per_cycle_per_pe must be > 0");
  if (!(config.dram_bytes_per_ns > 0)) throw bad("dram_bytes_per_ns must be > 0");
  if (!(config.fused_exchange_bytes_per_cycle > 0))
    throw bad("fused_exchange_bytes_per_cycle must be > 0");
  if (config.compute_threads < 1 || config.compute_threads > 64)
    throw bad(fmt::format("compute_threads = {} must be in 1..64", config.compute_threads));
}

}  // namespace sim

}  // namespace furiosa::device
