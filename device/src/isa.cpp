// Helpers of the NPU program format.
#include "furiosa/device/isa.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"

namespace furiosa::isa {

std::string_view layout_name(Layout layout) noexcept {
  switch (layout) {
    case Layout::Linear: return "linear";
    case Layout::LoweredNCHW: return "lowered_nchw";
  }
  return "unknown";
}

std::string_view add_formula_name(AddFormula formula) noexcept {
  switch (formula) {
    case AddFormula::Dequantized: return "dequantized";
    case AddFormula::MlasRatios: return "mlas_ratios";
    case AddFormula::MlasRatiosUint8: return "mlas_ratios_u8";
  }
  return "unknown";
}

std::uint64_t TensorRef::size_bytes() const noexcept {
  // A malformed ref (negative dim, lowered but not rank 4) occupies nothing; kernels and the
  // simulator reject such refs with a proper error before using them.
  for (std::int64_t d : shape) {
    if (d < 0) return 0;
  }
  const auto esize = static_cast<std::uint64_t>(dtype_size(dtype));
  switch (layout) {
    case Layout::Linear: return static_cast<std::uint64_t>(element_count(shape)) * esize;
    case Layout::LoweredNCHW: {
      if (shape.size() != 4) return 0;
      const auto rows = static_cast<std::uint64_t>(shape[0] * shape[1] * shape[2]);
      return rows * static_cast<std::uint64_t>(padded_width(shape[3])) * esize;
    }
  }
  return 0;
}

std::string_view kernel_name(KernelKind kind) noexcept {
  switch (kind) {
    case KernelKind::Conv2d: return "LowLevelConv2d";
    case KernelKind::DepthwiseConv2d: return "LowLevelDepthwiseConv2d";
    case KernelKind::MaxPool: return "LowLevelMaxPool";
    case KernelKind::MatMul: return "LowLevelMatMul";
    case KernelKind::Add: return "LowLevelAdd";
    case KernelKind::Reshape: return "LowLevelReshape";
    case KernelKind::Requantize: return "LowLevelRequantize";
    case KernelKind::Concat: return "LowLevelConcat";
    case KernelKind::Transpose: return "LowLevelTranspose";
    case KernelKind::Split: return "LowLevelSplit";
    case KernelKind::GlobalAveragePool: return "LowLevelGlobalAveragePool";
    case KernelKind::Resize: return "LowLevelResize";
    case KernelKind::Slice: return "LowLevelSlice";
    case KernelKind::Pad: return "LowLevelPad";
    case KernelKind::Mul: return "LowLevelMul";
    case KernelKind::Sub: return "LowLevelSub";
  }
  return "LowLevelUnknown";
}

namespace {

// Non-negative dim as unsigned (negative dims count as 0 so malformed kernels cost nothing).
std::uint64_t udim(std::int64_t d) noexcept { return d > 0 ? static_cast<std::uint64_t>(d) : 0; }

// N * M * OH * OW * (C / group) * kH * kW; 0 when the shapes are not those of a convolution.
std::uint64_t conv_macs(const Kernel& kernel) {
  const auto* p = std::get_if<Conv2dParams>(&kernel.params);
  if (p == nullptr || kernel.inputs.empty() || kernel.outputs.empty()) return 0;
  const Shape& x = kernel.inputs[0].shape;
  const Shape& y = kernel.outputs[0].shape;
  const Shape& w = p->weight.shape;
  if (x.size() != 4 || y.size() != 4 || w.size() != 4 || p->group <= 0) return 0;
  const std::uint64_t c_per_group = udim(x[1]) / static_cast<std::uint64_t>(p->group);
  return udim(y[0]) * udim(y[1]) * udim(y[2]) * udim(y[3]) * c_per_group * udim(w[2]) * udim(w[3]);
}

// batch * M * N * K for a [..., M, K] x [K, N] product; 0 when the shapes do not fit.
std::uint64_t matmul_macs(const Kernel& kernel) {
  const auto* p = std::get_if<MatMulParams>(&kernel.params);
  if (p == nullptr || kernel.inputs.empty()) return 0;
  const Shape& a = kernel.inputs[0].shape;
  const Shape& b = p->b.shape;
  if (a.size() < 2 || b.size() != 2) return 0;
  std::uint64_t batch = 1;
  for (std::size_t i = 0; i + 2 < a.size(); ++i) batch *= udim(a[i]);
  return batch * udim(a[a.size() - 2]) * udim(b[1]) * udim(a[a.size() - 1]);
}

// N * C * H * W: one accumulation per input element, as a depthwise H x W convolution with unit
// weights would do; 0 when the input is not of rank 4.
std::uint64_t global_average_pool_macs(const Kernel& kernel) {
  if (kernel.inputs.empty()) return 0;
  const Shape& x = kernel.inputs[0].shape;
  if (x.size() != 4) return 0;
  return udim(x[0]) * udim(x[1]) * udim(x[2]) * udim(x[3]);
}

}  // namespace

std::uint64_t kernel_macs(const Kernel& kernel) {
  switch (kernel.kind) {
    case KernelKind::Conv2d:
    case KernelKind::DepthwiseConv2d: return conv_macs(kernel);
    case KernelKind::MatMul: return matmul_macs(kernel);
    // GlobalAveragePool counts its N*C*H*W accumulations (a depthwise H x W conv with unit
    // weights); the timing model still costs it by the bytes it streams (see sim/timing.cpp).
    case KernelKind::GlobalAveragePool: return global_average_pool_macs(kernel);
    // Data movement and elementwise kernels perform no multiply-accumulates.
    case KernelKind::MaxPool:
    case KernelKind::Add:
    case KernelKind::Reshape:
    case KernelKind::Requantize:
    case KernelKind::Concat:
    case KernelKind::Transpose:
    case KernelKind::Split:
    case KernelKind::Resize:
    case KernelKind::Slice:
    case KernelKind::Pad:
    case KernelKind::Mul:
    case KernelKind::Sub: return 0;
  }
  return 0;
}

KernelArity kernel_arity(KernelKind kind) noexcept {
  switch (kind) {
    case KernelKind::Add:
    case KernelKind::Mul:
    case KernelKind::Sub: return {2, 2, 1, 1};
    case KernelKind::Concat: return {1, 0, 1, 1};
    case KernelKind::Split: return {1, 1, 1, 0};
    default: return {1, 1, 1, 1};
  }
}

std::size_t kernel_params_index(KernelKind kind) noexcept {
  using K = KernelKind;
  switch (kind) {
    case K::Conv2d:
    case K::DepthwiseConv2d: return 0;
    case K::MaxPool: return 1;
    case K::MatMul: return 2;
    case K::Add: return 3;
    case K::Reshape: return 4;
    case K::Requantize: return 5;
    case K::Concat: return 6;
    case K::Transpose: return 7;
    case K::Split: return 8;
    case K::GlobalAveragePool: return 9;
    case K::Resize: return 10;
    case K::Slice: return 11;
    case K::Pad: return 12;
    case K::Mul: return 13;
    case K::Sub: return 14;
  }
  return std::variant_npos;
}

namespace {

/// Bytes of `ref` in its layout, or nullopt when a dim is negative or the size overflows 64 bits.
std::optional<std::uint64_t> checked_size(const TensorRef& ref) {
  std::uint64_t n = dtype_size(ref.dtype);
  for (std::size_t i = 0; i < ref.shape.size(); ++i) {
    const std::int64_t d = ref.shape[i];
    if (d < 0) return std::nullopt;
    const bool padded_row = ref.layout == Layout::LoweredNCHW && i == 3;
    const auto dim = static_cast<std::uint64_t>(padded_row ? padded_width(d) : d);
    if (__builtin_mul_overflow(n, dim, &n)) return std::nullopt;
  }
  return n;
}

/// "" when `ref` lies inside a region of `dram` bytes, else "<where>: <problem>".
std::string check_ref(const TensorRef& ref, std::uint64_t dram, const std::string& where) {
  if (ref.layout == Layout::LoweredNCHW && ref.shape.size() != 4) return where + ": a lowered_nchw tensor must be 4-D";
  const std::optional<std::uint64_t> size = checked_size(ref);
  if (!size) return where + ": its shape " + shape_to_string(ref.shape) + " has a negative dim or too many bytes";
  if (ref.address > dram || *size > dram - ref.address) {
    return fmt::format("{}: bytes [{}, {}) lie outside the program's DRAM region of {} bytes", where, ref.address,
                       ref.address + *size, dram);
  }
  return {};
}

std::string check_refs(const std::vector<TensorRef>& refs, std::uint64_t dram, const std::string& where) {
  for (std::size_t i = 0; i < refs.size(); ++i) {
    if (std::string p = check_ref(refs[i], dram, fmt::format("{}[{}]", where, i)); !p.empty()) return p;
  }
  return {};
}

std::string check_count(std::size_t n, std::size_t lo, std::size_t hi, const std::string& where) {
  if (n >= lo && (hi == 0 || n <= hi)) return {};
  return hi == lo ? fmt::format("{}: expected {} tensor(s), got {}", where, lo, n)
                  : fmt::format("{}: expected {} or more tensor(s), got {}", where, lo, n);
}

std::string check_kernel(const Kernel& k, std::uint64_t dram, const std::string& where) {
  const KernelArity a = kernel_arity(k.kind);
  for (std::string p : {check_count(k.inputs.size(), a.in_min, a.in_max, where + ".inputs"),
                        check_count(k.outputs.size(), a.out_min, a.out_max, where + ".outputs"),
                        check_refs(k.inputs, dram, where + ".inputs"), check_refs(k.outputs, dram, where + ".outputs")}) {
    if (!p.empty()) return p;
  }
  if (k.params.index() != kernel_params_index(k.kind)) {
    return fmt::format("{}.params: not the parameters of a {}", where, kernel_name(k.kind));
  }
  std::string p;
  if (const auto* c = std::get_if<Conv2dParams>(&k.params)) {
    p = check_ref(c->weight, dram, where + ".params.weight");
    if (p.empty() && c->bias) p = check_ref(*c->bias, dram, where + ".params.bias");
  } else if (const auto* m = std::get_if<MatMulParams>(&k.params)) {
    p = check_ref(m->b, dram, where + ".params.b");
    if (p.empty() && m->bias) p = check_ref(*m->bias, dram, where + ".params.bias");
  } else if (const auto* t = std::get_if<TransposeParams>(&k.params); t && t->perm.size() != k.inputs[0].shape.size()) {
    p = fmt::format("{}.params.perm: expected {} axes, got {}", where, k.inputs[0].shape.size(), t->perm.size());
  }
  return p;
}

}  // namespace

std::string verify(const Program& program) {
  const std::uint64_t dram = program.dram_bytes;
  if (program.constants.size() > dram) {
    return fmt::format("constants: {} bytes do not fit the DRAM region of {} bytes", program.constants.size(), dram);
  }
  for (std::size_t i = 0; i < program.kernels.size(); ++i) {
    const Kernel& k = program.kernels[i];
    if (std::string p = check_kernel(k, dram, fmt::format("kernels[{}]", i)); !p.empty()) {
      return fmt::format("{} (in {} '{}')", p, kernel_name(k.kind), escape_text(k.node_name));
    }
  }
  if (std::string p = check_refs(program.inputs, dram, "inputs"); !p.empty()) return p;
  return check_refs(program.outputs, dram, "outputs");
}

}  // namespace furiosa::isa
