// Runs a kernel by its kind: the dispatch to the family files, the per-program plans
// (PreparedProgram, prepare_program) and the one place that makes sure a kernel passed
// isa::verify's checks before it runs (the kernels rely on them, kernel_common.h).
#include "kernel_common.h"

#include <memory>
#include <string>
#include <vector>

namespace furiosa::device::sim {

namespace {

// One case per kind, no default: -Wswitch names a kind added without its kernel. `kernel` has
// passed isa::verify_kernel for a region of region.size() bytes.
void dispatch(const isa::Kernel& kernel, std::span<std::byte> region,
              const detail::KernelPlan* plan) {
  switch (kernel.kind) {
    case isa::KernelKind::Conv2d: return detail::conv2d(kernel, region, false, plan);
    case isa::KernelKind::DepthwiseConv2d: return detail::conv2d(kernel, region, true, plan);
    case isa::KernelKind::MaxPool: return detail::maxpool(kernel, region);
    case isa::KernelKind::MatMul: return detail::matmul(kernel, region, plan);
    case isa::KernelKind::Add: return detail::add(kernel, region);
    case isa::KernelKind::Reshape: return detail::reshape(kernel, region);
    case isa::KernelKind::Requantize:
      if (plan != nullptr && plan->fused_away) return;  // computed by the convolution before it
      return detail::requantize(kernel, region);
    case isa::KernelKind::Concat: return detail::concat(kernel, region);
    case isa::KernelKind::Transpose: return detail::transpose(kernel, region);
    case isa::KernelKind::Split: return detail::split(kernel, region);
    case isa::KernelKind::GlobalAveragePool: return detail::global_average_pool(kernel, region);
    case isa::KernelKind::Resize: return detail::resize(kernel, region);
    case isa::KernelKind::Slice: return detail::slice(kernel, region);
    case isa::KernelKind::Pad: return detail::pad(kernel, region);
    case isa::KernelKind::Mul: return detail::mul(kernel, region);
    case isa::KernelKind::Sub: return detail::sub(kernel, region);
  }
  detail::fault("unknown kernel kind {}", static_cast<int>(kernel.kind));
}

// The load-time checks (isa::verify_kernel) for a kernel that comes from no verified program:
// throws Error(DeviceFault) with verify's message.
void verify_unprepared(const isa::Kernel& kernel, std::uint64_t region_size) {
  if (std::string problem = isa::verify_kernel(kernel, region_size); !problem.empty()) {
    detail::fault("{}", problem);
  }
}

// [address, address + size) ranges.
bool range_overlaps(std::uint64_t a, std::uint64_t sa, std::uint64_t b, std::uint64_t sb) {
  return sa > 0 && sb > 0 && a < b + sb && b < a + sa;
}

}  // namespace

// What prepare_program made of a program: whether it passed isa::verify (then its kernels run
// without repeating those checks), the kernels' identities and their plans, by kernel index
// (null: nothing prepared, the kernel is validated and packed when it runs).
class PreparedProgram {
 public:
  std::uint64_t dram_bytes = 0;
  bool verified = false;
  std::vector<const isa::Kernel*> kernels;  // identity checks only, never dereferenced
  std::vector<std::unique_ptr<detail::KernelPlan>> plans;
  std::size_t fused = 0;  // Requantize kernels fused into their convolution
};

std::shared_ptr<const PreparedProgram> prepare_program(const isa::Program& program) {
  auto prepared = std::make_shared<PreparedProgram>();
  prepared->dram_bytes = program.dram_bytes;
  prepared->plans.resize(program.kernels.size());
  // The same check as Device::load's (cheap next to packing): a program that fails it gets no
  // plans, and its kernels are checked each time they run.
  prepared->verified = isa::verify(program).empty();
  if (!prepared->verified) return prepared;
  for (const auto& k : program.kernels) prepared->kernels.push_back(&k);
  // Plans are the same for every level: made when the level in use runs conv or matmul fast.
  const fast::Kernels* fk = detail::fast_kernels();
  if (fk == nullptr || (fk->conv == nullptr && fk->matmul == nullptr)) return prepared;
  // Constant operands are packed from program.constants, which is what the region holds at
  // load. That stays true while nothing writes over them: no kernel output and no program input
  // (written by Load) may touch a packed operand's bytes, otherwise that kernel is left to be
  // packed when it runs.
  struct Range {
    std::uint64_t address, size;
  };
  std::vector<Range> written;
  for (const auto& k : program.kernels) {
    for (const auto& out : k.outputs) written.push_back({out.address, out.size_bytes()});
  }
  for (const auto& in : program.inputs) written.push_back({in.address, in.size_bytes()});
  auto frozen = [&](const isa::TensorRef& ref) {
    const std::uint64_t size = ref.size_bytes();
    for (const Range& w : written) {
      if (range_overlaps(ref.address, size, w.address, w.size)) return false;
    }
    return true;
  };
  const detail::Readable constants{program.constants.data(), program.constants.size()};
  for (std::size_t i = 0; i < program.kernels.size(); ++i) {
    const isa::Kernel& kernel = program.kernels[i];
    try {
      auto plan = std::make_unique<detail::KernelPlan>();
      if (kernel.kind == isa::KernelKind::Conv2d ||
          kernel.kind == isa::KernelKind::DepthwiseConv2d) {
        plan->conv = detail::prepare_conv_plan(kernel, constants, frozen);
        if (!plan->conv) continue;
      } else if (kernel.kind == isa::KernelKind::MatMul) {
        plan->matmul = detail::prepare_matmul_plan(kernel, constants, frozen);
        if (!plan->matmul) continue;
      } else {
        continue;
      }
      prepared->plans[i] = std::move(plan);
    } catch (const Error&) {
      // Malformed: run_kernel reports it when the kernel runs.
    } catch (const detail::NotResident&) {
      // Operands outside the constants: packed when the kernel runs.
    }
  }
  prepared->fused = detail::fuse_conv_requantize(program, prepared->plans);
  return prepared;
}

std::size_t fused_kernels(const PreparedProgram& prepared) noexcept { return prepared.fused; }

void run_kernel(const isa::Kernel& kernel, std::span<std::byte> region,
                const PreparedProgram* prepared, std::size_t index) {
  // Kernel `index` of the verified program, run on a region of that program's size: verify's
  // checks hold (the program is immutable), so they are not repeated.
  const bool verified = prepared != nullptr && prepared->verified &&
                        index < prepared->kernels.size() && prepared->kernels[index] == &kernel &&
                        region.size() == prepared->dram_bytes;
  if (!verified) return run_kernel(kernel, region);
  dispatch(kernel, region, prepared->plans[index].get());
}

void run_kernel(const isa::Kernel& kernel, std::span<std::byte> region) {
  verify_unprepared(kernel, region.size());
  dispatch(kernel, region, nullptr);
}

}  // namespace furiosa::device::sim
