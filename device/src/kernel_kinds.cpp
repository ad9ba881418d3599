// The kernel-kind table (kernel_kinds.h) and the isa.h lookups that read it.
#include "furiosa/device/kernel_kinds.h"

#include <array>
#include <type_traits>
#include <variant>

namespace furiosa::isa {

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
// weights would do; 0 when the input is not of rank 4. The timing model still costs the kind by
// the bytes it streams (it is not a MAC-array kind).
std::uint64_t gap_macs(const Kernel& kernel) {
  if (kernel.inputs.empty()) return 0;
  const Shape& x = kernel.inputs[0].shape;
  if (x.size() != 4) return 0;
  return udim(x[0]) * udim(x[1]) * udim(x[2]) * udim(x[3]);
}

// Data movement and element-wise kinds perform no multiply-accumulates.
std::uint64_t no_macs(const Kernel&) { return 0; }

using Params = decltype(Kernel::params);

// Index of alternative P in Kernel::params (a compile error when P is not one).
template <class P, std::size_t I = 0>
constexpr std::size_t params_index_of() {
  static_assert(I < std::variant_size_v<Params>, "not an alternative of Kernel::params");
  if constexpr (std::is_same_v<std::variant_alternative_t<I, Params>, P>) {
    return I;
  } else {
    return params_index_of<P, I + 1>();
  }
}

using K = KernelKind;
using U = KernelUnit;
constexpr KernelArity k1to1{1, 1, 1, 1};
constexpr KernelArity k2to1{2, 2, 1, 1};
constexpr KernelArity kNto1{1, 0, 1, 1};  // Concat: one or more inputs
constexpr KernelArity k1toN{1, 1, 1, 0};  // Split: one or more outputs

// One row per kind, in enum order. Depthwise convolutions stay channel-local on a fused PE (no
// exchange); GlobalAveragePool counts MACs but runs on the vector unit (costed by its bytes).
// clang-format off
constexpr std::array<KernelKindInfo, kKernelKindCount> kKinds{{
//   kind                  name                         arity  params                                      MACs         unit             exch   in_pl  row_local
    {K::Conv2d,            "LowLevelConv2d",            k1to1, params_index_of<Conv2dParams>(),            conv_macs,   U::MacArray,     true,  false, true},
    {K::DepthwiseConv2d,   "LowLevelDepthwiseConv2d",   k1to1, params_index_of<Conv2dParams>(),            conv_macs,   U::MacArray,     false, false, true},
    {K::MaxPool,           "LowLevelMaxPool",           k1to1, params_index_of<MaxPoolParams>(),           no_macs,     U::Vector,       false, false, true},
    {K::MatMul,            "LowLevelMatMul",            k1to1, params_index_of<MatMulParams>(),            matmul_macs, U::MacArray,     true,  false, false},
    {K::Add,               "LowLevelAdd",               k2to1, params_index_of<AddParams>(),               no_macs,     U::Vector,       false, true,  true},
    {K::Reshape,           "LowLevelReshape",           k1to1, params_index_of<ReshapeParams>(),           no_macs,     U::DataMovement, false, true,  true},
    {K::Requantize,        "LowLevelRequantize",        k1to1, params_index_of<RequantizeParams>(),        no_macs,     U::Vector,       false, true,  true},
    {K::Concat,            "LowLevelConcat",            kNto1, params_index_of<ConcatParams>(),            no_macs,     U::DataMovement, false, false, false},
    {K::Transpose,         "LowLevelTranspose",         k1to1, params_index_of<TransposeParams>(),         no_macs,     U::DataMovement, false, false, false},
    {K::Split,             "LowLevelSplit",             k1toN, params_index_of<SplitParams>(),             no_macs,     U::DataMovement, false, false, false},
    {K::GlobalAveragePool, "LowLevelGlobalAveragePool", k1to1, params_index_of<GlobalAveragePoolParams>(), gap_macs,    U::Vector,       false, false, false},
    {K::Resize,            "LowLevelResize",            k1to1, params_index_of<ResizeParams>(),            no_macs,     U::Vector,       false, false, false},
    {K::Slice,             "LowLevelSlice",             k1to1, params_index_of<SliceParams>(),             no_macs,     U::DataMovement, false, false, false},
    {K::Pad,               "LowLevelPad",               k1to1, params_index_of<PadParams>(),               no_macs,     U::DataMovement, false, false, false},
    {K::Mul,               "LowLevelMul",               k2to1, params_index_of<MulParams>(),               no_macs,     U::Vector,       false, true,  true},
    {K::Sub,               "LowLevelSub",               k2to1, params_index_of<SubParams>(),               no_macs,     U::Vector,       false, true,  true},
}};
// The row of a value outside the enum: verify() refuses its kernels (no params alternative).
constexpr KernelKindInfo kUnknown{
     static_cast<KernelKind>(0xff), "LowLevelUnknown", k1to1, std::variant_npos,              no_macs,     U::DataMovement, false, false, false};
// clang-format on

// Row i describes KernelKind(i), names are distinct, and every params alternative belongs to
// some kind (a new alternative without a kind is a compile error here).
constexpr bool rows_in_enum_order() {
  for (std::size_t i = 0; i < kKinds.size(); ++i) {
    if (kKinds[i].kind != static_cast<KernelKind>(i)) return false;
  }
  return true;
}
constexpr bool names_distinct() {
  for (std::size_t i = 0; i < kKinds.size(); ++i) {
    for (std::size_t j = i + 1; j < kKinds.size(); ++j) {
      if (kKinds[i].name == kKinds[j].name) return false;
    }
  }
  return true;
}
constexpr bool every_params_alternative_used() {
  for (std::size_t a = 0; a < std::variant_size_v<Params>; ++a) {
    bool used = false;
    for (const auto& row : kKinds) used = used || row.params_index == a;
    if (!used) return false;
  }
  return true;
}
static_assert(rows_in_enum_order(), "kKinds: one row per KernelKind, in enum order");
static_assert(names_distinct(), "kKinds: kernel kind names must be distinct");
static_assert(every_params_alternative_used(), "kKinds: a Kernel::params alternative has no kind");

}  // namespace

std::string_view kernel_unit_name(KernelUnit unit) noexcept {
  switch (unit) {
    case KernelUnit::MacArray: return "mac_array";
    case KernelUnit::Vector: return "vector";
    case KernelUnit::DataMovement: return "data_movement";
  }
  return "unknown";
}

const KernelKindInfo& kernel_kind_info(KernelKind kind) noexcept {
  const auto i = static_cast<std::size_t>(kind);
  return i < kKinds.size() ? kKinds[i] : kUnknown;
}

std::span<const KernelKindInfo, kKernelKindCount> all_kernel_kinds() noexcept { return kKinds; }

std::string_view kernel_name(KernelKind kind) noexcept { return kernel_kind_info(kind).name; }

std::uint64_t kernel_macs(const Kernel& kernel) {
  return kernel_kind_info(kernel.kind).macs(kernel);
}

KernelArity kernel_arity(KernelKind kind) noexcept { return kernel_kind_info(kind).arity; }

std::size_t kernel_params_index(KernelKind kind) noexcept {
  return kernel_kind_info(kind).params_index;
}

}  // namespace furiosa::isa
