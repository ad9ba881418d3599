// One descriptor per NPU kernel kind: what the ISA, the timing model, the counters and the tools
// need to know about a kind, in one table (kernel_kinds.cpp) instead of a switch per question.
//
// The table has one row per isa::KernelKind enumerator, in enum order (checked at compile time
// in kernel_kinds.cpp and by tests/device/test_kernel_kinds.cpp). isa::kernel_name,
// isa::kernel_arity, isa::kernel_params_index and isa::kernel_macs are lookups into it.
//
// Adding a kind (docs/devices.md, "Kernel kinds"):
//   1. the enumerator in isa::KernelKind (isa.h; keep kLastKernelKind the last one) and its row
//      here, in enum order;
//   2. its params struct in isa.h, appended to Kernel::params (a new alternative), unless it
//      shares one;
//   3. encode/decode of that struct (program/src/program_encode.cpp, program_decode.cpp);
//   4. the simulator kernel (device/sim/kernels/<family>.cpp, called from dispatch.cpp);
//   5. lowering (compiler-bridge/src/lowering_*.cpp) and the capability row that places it.
// The switches that do per-kind work (the simulator's dispatch, the decoder, lowering) have no
// `default:`, so -Wswitch (an error with -Werror) names each one a new kind still lacks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "furiosa/device/isa.h"

namespace furiosa::isa {

/// The unit of a Warboy PE that runs a kernel kind, as the timing model costs it
/// (device/sim/timing.cpp, docs/timing.md).
enum class KernelUnit : std::uint8_t {
  /// The MAC array: costed by aligned multiply-accumulates (and by traffic, whichever is larger).
  MacArray,
  /// The vector engine: element-wise arithmetic and reductions, bound by SRAM traffic.
  Vector,
  /// Data movement: copies without arithmetic, bound by SRAM traffic.
  DataMovement,
};

/// "mac_array" / "vector" / "data_movement".
std::string_view kernel_unit_name(KernelUnit unit) noexcept;

/// What is known about one kernel kind. Rows are immutable and live for the whole program.
struct KernelKindInfo {
  KernelKind kind;
  /// The kind's name: the span name of its kernels in the trace ("LowLevelConv2d"), the "kind"
  /// of a kernel in a program file, the key of the simulator's per-kind counters.
  std::string_view name;
  /// Inputs and outputs a kernel of this kind reads and writes (isa.h KernelArity).
  KernelArity arity;
  /// Index of the Kernel::params alternative its kernels carry.
  std::size_t params_index;
  /// Multiply-accumulates a kernel of this kind performs (0 for a malformed kernel); never null.
  std::uint64_t (*macs)(const Kernel& kernel);
  /// The unit that runs it in the timing model.
  KernelUnit unit;
  /// On a fused PE the two PEs split the kernel's output channels and exchange their halves
  /// afterwards (timing model: exchange cycles). False for channel-local kinds.
  bool fused_exchange;
  /// Element-wise: its output may overwrite an input read for the last time (the SRAM plan's
  /// in-place reuse, device/sim/sram_plan.cpp).
  bool in_place;
  /// Computes an output row band from a band of input rows, so it can be tiled right behind the
  /// kernel producing its input (the SRAM plan's depth-first tiling).
  bool row_local;
};

/// The last KernelKind enumerator; kinds are 0 .. kLastKernelKind.
inline constexpr KernelKind kLastKernelKind = KernelKind::Sub;

/// Number of KernelKind enumerators (rows of the table; indices of per-kind arrays).
inline constexpr std::size_t kKernelKindCount = static_cast<std::size_t>(kLastKernelKind) + 1;

/// The row of `kind`. A value outside the enum (a corrupt kernel) gets a row named
/// "LowLevelUnknown" whose params_index is std::variant_npos, so verify() refuses it. Thread-safe.
const KernelKindInfo& kernel_kind_info(KernelKind kind) noexcept;

/// All rows, in enum order (row i describes KernelKind(i)). Thread-safe.
std::span<const KernelKindInfo, kKernelKindCount> all_kernel_kinds() noexcept;

}  // namespace furiosa::isa
