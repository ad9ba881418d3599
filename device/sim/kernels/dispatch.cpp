// Runs a kernel by its kind: the dispatch to the family files and the per-program plans
// (PreparedProgram, prepare_program).
#include "kernel_common.h"

#include <memory>
#include <vector>

namespace furiosa::device::sim {

namespace {

void dispatch(const isa::Kernel& kernel, std::span<std::byte> region,
              const detail::KernelPlan* plan) {
  switch (kernel.kind) {
    case isa::KernelKind::Conv2d: return detail::conv2d(kernel, region, false, plan);
    case isa::KernelKind::DepthwiseConv2d: return detail::conv2d(kernel, region, true, plan);
    case isa::KernelKind::MaxPool: return detail::maxpool(kernel, region);
    case isa::KernelKind::MatMul: return detail::matmul(kernel, region, plan);
    case isa::KernelKind::Add: return detail::add(kernel, region);
    case isa::KernelKind::Reshape: return detail::reshape(kernel, region);
    case isa::KernelKind::Requantize: return detail::requantize(kernel, region);
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

// [address, address + size) ranges.
bool range_overlaps(std::uint64_t a, std::uint64_t sa, std::uint64_t b, std::uint64_t sb) {
  return sa > 0 && sb > 0 && a < b + sb && b < a + sa;
}

}  // namespace

// The plans of a program's kernels, by kernel index (null: nothing prepared, the kernel is
// validated and packed when it runs).
class PreparedProgram {
 public:
  std::uint64_t dram_bytes = 0;
  std::vector<std::unique_ptr<detail::KernelPlan>> plans;
};

std::shared_ptr<const PreparedProgram> prepare_program(const isa::Program& program) {
  auto prepared = std::make_shared<PreparedProgram>();
  prepared->dram_bytes = program.dram_bytes;
  prepared->plans.resize(program.kernels.size());
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
      plan->kernel = &kernel;
      if (kernel.kind == isa::KernelKind::Conv2d ||
          kernel.kind == isa::KernelKind::DepthwiseConv2d) {
        plan->conv = detail::prepare_conv_plan(kernel, program.dram_bytes, constants, frozen);
        if (!plan->conv) continue;
      } else if (kernel.kind == isa::KernelKind::MatMul) {
        plan->matmul = detail::prepare_matmul_plan(kernel, program.dram_bytes, constants, frozen);
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
  return prepared;
}

void run_kernel(const isa::Kernel& kernel, std::span<std::byte> region,
                const PreparedProgram* prepared, std::size_t index) {
  const detail::KernelPlan* plan = nullptr;
  if (prepared != nullptr && index < prepared->plans.size() &&
      region.size() == prepared->dram_bytes) {
    plan = prepared->plans[index].get();
    if (plan != nullptr && plan->kernel != &kernel) plan = nullptr;  // not this program's kernel
  }
  dispatch(kernel, region, plan);
}

void run_kernel(const isa::Kernel& kernel, std::span<std::byte> region) {
  dispatch(kernel, region, nullptr);
}

}  // namespace furiosa::device::sim
