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

std::string verify_kernel(const Kernel& kernel, std::uint64_t dram_bytes, std::string_view where) {
  if (std::string p = check_kernel(kernel, dram_bytes, std::string(where)); !p.empty()) {
    return fmt::format("{} (in {} '{}')", p, kernel_name(kernel.kind),
                       escape_text(kernel.node_name));
  }
  return {};
}

std::string verify(const Program& program) {
  const std::uint64_t dram = program.dram_bytes;
  if (program.constants.size() > dram) {
    return fmt::format("constants: {} bytes do not fit the DRAM region of {} bytes", program.constants.size(), dram);
  }
  for (std::size_t i = 0; i < program.kernels.size(); ++i) {
    if (std::string p = verify_kernel(program.kernels[i], dram, fmt::format("kernels[{}]", i));
        !p.empty())
      return p;
  }
  if (std::string p = check_refs(program.inputs, dram, "inputs"); !p.empty()) return p;
  return check_refs(program.outputs, dram, "outputs");
}

}  // namespace furiosa::isa
