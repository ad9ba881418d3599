// Private: the simulator's functional kernels (ONNX quantized-operator semantics).
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "furiosa/device/isa.h"
#include "furiosa/device/kernel_kinds.h"
#include "furiosa/device/sim.h"

namespace furiosa::device::sim {

/// One element of LowLevelAdd's isa::AddFormula::Dequantized, next to isa::requantize: both
/// operands are dequantized in float, summed, divided by the output scale, rounded half to even,
/// offset by the output zero point and saturated to [qmin, qmax].
inline std::int32_t qlinear_add(std::int32_t a, const isa::QuantParam& qa, std::int32_t b,
                                const isa::QuantParam& qb, const isa::QuantParam& qy,
                                std::int32_t qmin, std::int32_t qmax) noexcept {
  float va = qa.scale * static_cast<float>(a - qa.zero_point);
  float vb = qb.scale * static_cast<float>(b - qb.zero_point);
  return host::quantize_value((va + vb) / qy.scale, qy.zero_point, qmin, qmax);
}

/// The per-kernel constants of isa::AddFormula::MlasRatios with `v` the operand ONNX Runtime
/// streams and `s` the other (isa.h): the float32 ratios to the output scale and the fixed
/// part float(y.zp) - fma(rv, v.zp, rs * s.zp), as MLAS's AVX2 kernel computes them.
struct MlasAddConsts {
  float rv = 0, rs = 0, fixed = 0;
};
inline MlasAddConsts mlas_add_consts(const isa::QuantParam& v, const isa::QuantParam& s,
                                     const isa::QuantParam& y) noexcept {
  const float rv = v.scale / y.scale, rs = s.scale / y.scale;
  return {rv, rs,
          static_cast<float>(y.zero_point) - std::fma(rv, static_cast<float>(v.zero_point),
                                                      rs * static_cast<float>(s.zero_point))};
}

/// One element of isa::AddFormula::MlasRatios from the raw codes v and s:
/// saturate(nearbyint(fma(v, rv, fma(s, rs, fixed)))).
inline std::int32_t mlas_add(std::int32_t v, std::int32_t s, const MlasAddConsts& k,
                             std::int32_t qmin, std::int32_t qmax) noexcept {
  const float t =
      std::fma(static_cast<float>(v), k.rv, std::fma(static_cast<float>(s), k.rs, k.fixed));
  return host::quantize_value(t, 0, qmin, qmax);
}

namespace fast {
struct AddParamsF;
}  // namespace fast

/// The parameters of LowLevelAdd's float formula `p.formula` (p.fixed_point unset) for the fast
/// kernels (fast::AddParamsF, b_broadcast left false), which compute them bit-identically to the
/// portable loop: the kernels' operand a is the kernel's input 0, or input 1 with `exchange`
/// (MlasRatios*: the operand ONNX Runtime streams, isa::AddFormula). MlasRatiosUint8 becomes
/// MlasRatios on uint8 codes through byte flips; a_signed / b_signed are the dtypes of inputs 0
/// and 1, [qmin, qmax] the output's range.
fast::AddParamsF fast_add_params(const isa::AddParams& p, bool a_signed, bool b_signed,
                                 std::int32_t qmin, std::int32_t qmax, bool exchange);

/// Executes `kernel` on `region`, the program's DRAM region (TensorRef addresses are offsets
/// into it). Runs isa::verify_kernel's checks first (nothing verified this kernel), then the
/// kernel. Throws Error(DeviceFault) describing the problem when the kernel is malformed: with
/// verify's message for what verify checks (a tensor outside the region, operand counts, the
/// params alternative), else the kernel's (an unsupported dtype/layout, shapes or parameters that
/// do not fit). The caller adds the device, instruction index and node name to the message.
void run_kernel(const isa::Kernel& kernel, std::span<std::byte> region);

/// Per-program state of the kernels, built once when a program is loaded (prepare_program):
/// convolution and matmul weights validated and pre-packed for the fast kernels, and the
/// parameters derived from them (weight sums, requantization multipliers). Immutable; shared
/// read-only by every thread that runs the program. Owned by whoever loaded the program (the
/// simulator's LoadedProgram), so it lives exactly as long as the loaded program: there is no
/// global cache to outlive or confuse programs.
class PreparedProgram;

/// Prepares `program` for run_kernel. Runs isa::verify(program) (Device::load already did; it
/// is cheap next to packing): the kernels of a program that passes run without repeating those
/// checks; a program that fails gets nothing prepared, and each kernel is checked when it runs.
/// Never throws for a malformed kernel: a kernel it cannot prepare is left to run_kernel, which
/// reports it when (and if) it runs. The result does not refer to `program` (only compares
/// kernel addresses) and may outlive it; `program` must not change while the result is used
/// (isa::Program is immutable once built).
///
/// Weights and biases are packed from program.constants, i.e. what the region holds right after
/// load. A kernel whose constant operands could change afterwards (some kernel output or program
/// input overlaps them) is not prepared and packs them from the region each time it runs. The
/// region is assumed not to be written otherwise (DMA only writes the program's inputs).
std::shared_ptr<const PreparedProgram> prepare_program(const isa::Program& program);

/// Same as run_kernel(kernel, region) for kernel `index` of the program `prepared` was made
/// from (null `prepared`: nothing prepared). Bit-identical results either way (for a fused pair,
/// see fused_kernels, in the tensors anything reads when the kernels run in order). Skips
/// isa::verify_kernel when the program passed isa::verify. `prepared` is ignored (the kernel is
/// checked as by run_kernel(kernel, region)) when the region's size is not the program's
/// dram_bytes or `kernel` is not kernel `index` of that program. Thread-safe: scratch buffers are
/// per thread and, once a thread has run the program, reused without allocating.
void run_kernel(const isa::Kernel& kernel, std::span<std::byte> region,
                const PreparedProgram* prepared, std::size_t index);

/// How many LowLevelRequantize kernels `prepared` fused into the convolution before them (a
/// convolution whose output only that Requantize reads, detail::fuse_conv_requantize). Such a
/// pair runs as one pass over the output where the ISA level's convolution takes a table
/// (avx512), and the convolution's own output is then never written: run_kernel gives the
/// program's observable results (the tensors later kernels read and the program outputs)
/// bit-identical to unprepared runs, but only when the program's kernels run in order, as an
/// execution runs them.
std::size_t fused_kernels(const PreparedProgram& prepared) noexcept;

/// Test hook: with `false`, every kernel takes the portable path (the reference the fast
/// kernels are checked against); with `true` (default), the fast kernels of the ISA level in use
/// run (FURIOSA_SIM_ISA, or set_fast_kernels_level). Programs prepared while disabled keep no
/// plans.
void set_fast_kernels_enabled(bool enabled) noexcept;
/// Test and benchmark hook: runs the kernels at level `isa` from now on, in the whole process,
/// instead of FURIOSA_SIM_ISA's (Auto: back to FURIOSA_SIM_ISA's). Returns false, changing
/// nothing, for a level this CPU lacks. Plans are level-independent, so programs prepared
/// before keep working.
bool set_fast_kernels_level(SimIsa isa) noexcept;
/// True when the fast kernels are enabled and the level in use is above portable.
bool fast_kernels_active() noexcept;

/// Statistics of one kernel kind over some executions (SimConfig::kernel_stats).
struct KernelKindStats {
  std::uint64_t calls = 0;
  std::uint64_t ns = 0;    ///< host time spent in run_kernel
  std::uint64_t macs = 0;  ///< isa::kernel_macs of the kernels run
};

/// Number of isa::KernelKind values (indices of a per-kind array of KernelKindStats).
inline constexpr std::size_t kKernelKindCount = isa::kKernelKindCount;

}  // namespace furiosa::device::sim
