// The simulator backend ("sim"): an in-process Warboy that executes LowLevel kernels with ONNX
// quantized-operator semantics and attaches modelled device timings.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/device/driver.h"

namespace furiosa::device {

/// What the simulator computes for an execution.
enum class SimMode : std::uint8_t {
  /// Kernels are computed on the host (outputs are valid) and timed by the model.
  Functional,
  /// Kernels are only timed by the model, never computed: an execution costs the host almost
  /// nothing, so benchmarks of large models run at the modelled card's speed. Output buffers
  /// are left untouched (their contents are not results).
  Timing,
};

/// Whether loading a program also runs it once on every compute thread of the device
/// (functional mode only), so that nothing is prepared by the first executions (docs/timing.md
/// "Cold start").
enum class SimWarmUp : std::uint8_t {
  Off,          ///< never: the first execution on each thread grows its kernels' scratch
  FastKernels,  ///< when the fast kernels are active (an execution costs milliseconds); default
  Always,       ///< also with the portable kernels (a load then costs one slow execution)
};

/// "functional" / "timing".
std::string_view sim_mode_name(SimMode mode) noexcept;

/// Instruction-set level of the simulator's functional kernels (FURIOSA_SIM_ISA). Every level
/// computes the same bytes as the portable kernels, which define them (docs/simulator-speed.md);
/// a level only changes how fast the host computes them. The levels form a ladder per
/// architecture, lowest first (x86-64: avx2 .. avx512; aarch64: neon .. neon-i8mm; a build has
/// only its own architecture's): a level may implement only some kernels, the others run at the
/// next lower level that has them (ultimately the portable code).
enum class SimIsa : std::uint8_t {
  Auto,         ///< the highest level this CPU supports (default)
  Portable,     ///< the portable C++ kernels only, on any CPU
  Avx2,         ///< AVX2 kernels (Haswell and later, Zen 1-3): exact int8 products via vpmaddwd
  AvxVnni,      ///< AVX2 + AVX-VNNI kernels (Alder Lake and later): vpdpbusd on ymm
  Avx512Vnni,   ///< the avx-vnni kernels with AVX-512 VL + VNNI's vpdpbusd (Cascade Lake)
  Avx512,       ///< AVX-512 F/BW/VL/DQ + VNNI + VBMI kernels (Ice Lake, Sapphire Rapids, Zen 4)
  Neon,         ///< aarch64 NEON kernels (any ARMv8-A): exact int8 products via smull + sadalp
  NeonDotprod,  ///< aarch64 NEON + dot product (ARMv8.2 sdot: Graviton 2+, Apple M, Neoverse)
  /// aarch64 NEON + dot product + int8 matrix multiply (usdot: unsigned x signed bytes;
  /// Graviton 3+, Neoverse V1/N2, Apple M2+, Cortex-A510/A710 and later)
  NeonI8mm,
};

/// "auto", "portable", "avx2", "avx-vnni", "avx512-vnni", "avx512", "neon", "neon-dotprod",
/// "neon-i8mm".
std::string_view sim_isa_name(SimIsa isa) noexcept;

/// Parses a level name (sim_isa_name; "avx512-vnni-vbmi" is accepted as an older name of
/// "avx512"). Throws Error(InvalidArgument) naming the value, with its control and non-ASCII
/// bytes escaped, and the accepted names.
SimIsa parse_sim_isa(std::string_view text);

/// The levels this CPU (and OS) supports, lowest first; always starts with Portable.
std::vector<SimIsa> sim_cpu_isa_levels();

/// The level FURIOSA_SIM_ISA asks for (Auto when unset or empty). The variable is read by the
/// kernels once per process, so it applies to every simulator driver of the process; with
/// `portable` the fast kernels never run (a CPU without them, tested on any machine). Throws
/// Error(InvalidArgument) naming the variable for an unknown name, or a level this CPU lacks
/// (one line; for a level of the other architecture, saying so).
SimIsa sim_isa_from_environment();

/// The level the functional kernels run at in this process now: "portable", "avx2",
/// "avx-vnni", "avx512-vnni", "avx512", "neon", "neon-dotprod" or "neon-i8mm" (never "auto").
std::string_view sim_active_isa() noexcept;

/// A device fault the simulator can inject (docs/devices.md "Fault injection").
enum class SimFaultKind : std::uint8_t {
  Error,  ///< the execution fails: its fence fails with Error(DeviceFault)
  Hang,   ///< the execution never finishes and the device stops taking work until reset()
  Dma,    ///< the Load DMA fails: the fence fails with Error(DeviceFault)
  Lost,   ///< the device disappears: this and every later execution fail with DeviceNotFound
};

/// "error", "hang", "dma", "lost".
std::string_view sim_fault_name(SimFaultKind kind) noexcept;

/// When one fault kind is injected, counted per open device over its executions (1-based, in
/// submission order). Exactly one of the triggers applies: `every` > 0: executions every, 2 x
/// every, ...; `after` set: every execution after the first `after`; else probability `p` per
/// execution, drawn from the device's generator (seeded, so a run repeats).
struct SimFaultRule {
  SimFaultKind kind = SimFaultKind::Error;
  std::uint64_t every = 0;
  bool has_after = false;
  std::uint64_t after = 0;
  double p = 0.0;
};

/// The faults a simulated device injects. Empty (the default) injects none.
struct SimFaultPlan {
  std::vector<SimFaultRule> rules;
  /// Seed of the per-device generators of `p` rules (mixed with the device file's name).
  std::uint64_t seed = 0;
  bool empty() const noexcept { return rules.empty(); }
};

/// Parses a fault spec: comma-separated items `KIND:TRIGGER` with KIND one of error, hang, dma,
/// lost and TRIGGER one of every=N (N >= 1), p=X (0 <= X <= 1), after=N (N >= 0), plus an
/// optional `seed=N`; whitespace around items is ignored and an empty spec means no faults.
/// Example: "error:every=100,hang:p=0.001,dma:every=500,lost:after=2000,seed=7".
/// Throws Error(InvalidArgument) with one line naming the whole spec, the bad item and what is
/// wrong with it.
SimFaultPlan parse_sim_faults(std::string_view spec);

/// The canonical spec of `plan` (parse_sim_faults(format_sim_faults(p)) equals p).
std::string format_sim_faults(const SimFaultPlan& plan);

/// Shape of the simulated machine and its timing model. Every constant is either a Warboy
/// figure (DESIGN.md; FuriosaAI's Warboy page: 64 INT8 TOPS per chip, 2 PEs, 32 MB SRAM,
/// LPDDR4X 66 GB/s, PCIe Gen4 x8), an assumption, or calibrated against MLPerf Inference v2.0
/// (ResNet-50 v1.5, one Warboy); docs/timing.md says which and how.
struct SimConfig {
  int cards = 1;
  int pes_per_card = 2;
  std::uint64_t dram_bytes = 1ull << 30;  ///< simulated DRAM per card (real card: 16 GiB)

  double clock_ghz = 2.0;                 ///< NPU clock (Warboy: 2.0 GHz)
  double macs_per_cycle_per_pe = 8192.0;  ///< 32 INT8 TOPS per PE / 2 ops per MAC / 2 GHz
  /// Native size of the MAC array in input channels, output channels and row width: work is
  /// padded up to multiples of it (DESIGN.md: alignment losses below multiples of 32).
  std::int64_t array_align = 32;
  std::uint64_t sram_bytes_per_pe = 16ull << 20;  ///< 32 MB on chip / 2 PEs
  double sram_bytes_per_cycle_per_pe = 128.0;  ///< on-chip bandwidth (assumption)
  double dram_bytes_per_ns = 66.0;        ///< LPDDR4X-4266 per card (66 GB/s), shared by its PEs
  double pcie_bytes_per_ns = 15.75;       ///< PCIe Gen4 x8 per direction (15.75 GB/s)
  std::int64_t dma_latency_ns = 1000;     ///< fixed cost per DMA transfer (assumption)
  std::uint64_t kernel_overhead_cycles = 1000;  ///< per kernel: launch, fill, drain (calibrated)
  /// Fused PE: after each kernel the PEs exchange their halves of the output over this link
  /// (bytes per cycle; calibrated).
  double fused_exchange_bytes_per_cycle = 64.0;

  std::size_t queue_capacity = 64;        ///< bounded per-device execution queue
  /// When true (default), a fence is signalled no earlier than the modelled end of its Store,
  /// so host-side latency is never below the modelled device time.
  bool pacing = true;
  SimMode mode = SimMode::Functional;
  /// Host threads per device file that run executions. Executions of one device never overlap
  /// on the modelled timeline, but their functional computation may overlap on the host.
  int compute_threads = 2;
  /// Intra-op parallelism (functional mode): a kernel computed on one compute thread splits its
  /// work (convolutions by output channels, depthwise convolutions by channels, additions by
  /// rows) with the
  /// device's compute threads that are idle at that moment, so one inference at a time uses
  /// up to compute_threads cores, as ONNX Runtime's intra_op_num_threads does; several
  /// inferences at once use one thread each. Outputs are the same bytes either way
  /// (device/sim/fork_join.h). Environment: FURIOSA_SIM_INTRA_OP=0|1.
  bool intra_op = true;
  /// Per-kernel-kind host counters (functional mode; sim-bench): each device counts, per kernel
  /// kind, the kernels it ran, the host time spent computing them and their MACs, in
  /// DeviceCounters::backend_counters as `sim.kernels.<kernel name>.calls`, `.host_ns` and
  /// `.macs` (e.g. `sim.kernels.LowLevelConv2d.host_ns`). Off by default: two clock reads per
  /// kernel. Each device counts its own (nothing process-wide).
  bool kernel_stats = false;
  /// Load-time warm-up (functional mode): regions are always made at load; this says whether
  /// load() also runs the program once per compute thread (off the timeline, no counters).
  SimWarmUp warm_up = SimWarmUp::FastKernels;
  /// Faults to inject into every device opened from this driver (docs/devices.md).
  SimFaultPlan faults;
  /// Test and what-if knob: every execution takes at least this long on the host, from the
  /// moment a compute thread takes it to its fence (the modelled timeline is not changed). Like
  /// a slower card or host; FURIOSA_SIM_MIN_EXECUTION_US. Zero (default): no floor.
  std::chrono::microseconds min_execution_time{0};
  /// Test gate (FURIOSA_SIM_GATE): when not empty, executions are taken from the queue only
  /// while a file (of any type) exists at this path, checked every millisecond; until then they
  /// stay queued and in flight, so a test holds requests in flight without racing the machine.
  /// A device that is closing ignores the gate and drains its queue.
  std::string gate_path;
  /// System-wide PE ownership: when not empty, an open also locks one file per PE in this
  /// directory (flock; released on close and on process death), so opens in other processes
  /// (and other drivers) see the PE as busy, naming the holder's pid. Empty (the default for
  /// create_sim_driver) keeps ownership within this driver.
  std::string lock_dir;
};

/// SimConfig defaults, overridden by FURIOSA_SIM_CARDS (0..256), FURIOSA_SIM_PES_PER_CARD
/// (1..64), FURIOSA_SIM_FAULTS (a fault spec, parse_sim_faults), FURIOSA_SIM_MIN_EXECUTION_US
/// (0..600000000) and FURIOSA_SIM_GATE (a path) when set and non-empty, and checks
/// FURIOSA_SIM_ISA (sim_isa_from_environment); this
/// is the configuration of the built-in "sim" driver. Its lock_dir is FURIOSA_SIM_LOCK_DIR
/// ("off" = none), else sim_default_lock_dir(): the built-in simulated cards are owned
/// system-wide, as real cards are. Throws Error(InvalidArgument) naming the
/// variable for a value that is not an integer in range, not a valid fault spec or not an ISA
/// level this CPU has.
SimConfig sim_config_from_environment();

/// $XDG_RUNTIME_DIR/furiosa-sim when XDG_RUNTIME_DIR is an absolute path, else
/// /tmp/furiosa-sim-<uid>.
std::string sim_default_lock_dir();

/// Creates a simulator driver. Each driver instance is an independent set of simulated cards.
std::unique_ptr<Driver> create_sim_driver(const SimConfig& config = {});

/// Registers the "sim" backend in `registry`: its driver is create_sim_driver() with
/// sim_config_from_environment(), read when the driver is first used. Called by
/// builtin_registry() (device/backends); tests may call it on a registry of their own.
void register_sim_backend(DriverRegistry& registry);

}  // namespace furiosa::device
