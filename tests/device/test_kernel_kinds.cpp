// The kernel-kind table (kernel_kinds.h): one row per kind, and the row agrees with what
// isa::verify accepts and refuses.
#include <set>
#include <string>
#include <utility>
#include <variant>

#include "device_test_util.h"
#include "furiosa/device/isa.h"
#include "furiosa/device/kernel_kinds.h"
#include "test_support.h"

using namespace furiosa;

namespace {

using Params = decltype(isa::Kernel::params);

// A default-constructed alternative `index` of Kernel::params.
template <std::size_t... I>
Params params_at(std::size_t index, std::index_sequence<I...>) {
  Params p;
  ((I == index ? static_cast<void>(p.template emplace<I>()) : static_cast<void>(0)), ...);
  return p;
}
Params params_at(std::size_t index) {
  return params_at(index, std::make_index_sequence<std::variant_size_v<Params>>{});
}

/// A one-kernel program of `kind` with `inputs` and `outputs` 4-byte uint8 tensors, each in its
/// own 64 bytes of the region, and the params alternative `params_index` (default values; a
/// Transpose's perm fits its rank-1 input).
isa::Program one_kernel(isa::KernelKind kind, std::size_t inputs, std::size_t outputs,
                        std::size_t params_index) {
  isa::Program p;
  p.name = "one";
  isa::Kernel k;
  k.kind = kind;
  k.node_name = "n";
  std::uint64_t at = 64;  // [0, 64) holds the default weight / b refs (address 0)
  const auto tensor = [&] {
    isa::TensorRef r{
        .address = at, .dtype = DType::UInt8, .shape = {4}, .layout = isa::Layout::Linear};
    at += 64;
    return r;
  };
  for (std::size_t i = 0; i < inputs; ++i) k.inputs.push_back(tensor());
  for (std::size_t i = 0; i < outputs; ++i) k.outputs.push_back(tensor());
  k.params = params_at(params_index);
  if (auto* t = std::get_if<isa::TransposeParams>(&k.params)) t->perm = {0};
  p.dram_bytes = at;
  p.kernels = {k};
  return p;
}

}  // namespace

TEST_CASE("the kernel kind table has one row per kind in enum order", "[isa][kernel_kinds]") {
  const auto kinds = isa::all_kernel_kinds();
  REQUIRE(kinds.size() == isa::kKernelKindCount);
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    CAPTURE(i);
    CHECK(kinds[i].kind == static_cast<isa::KernelKind>(i));
    CHECK(&isa::kernel_kind_info(kinds[i].kind) == &kinds[i]);
    CHECK(kinds[i].params_index < std::variant_size_v<Params>);
    CHECK(kinds[i].macs != nullptr);
  }
  CHECK(kinds.back().kind == isa::kLastKernelKind);
}

TEST_CASE("kernel kind names are unique and are the trace span names", "[isa][kernel_kinds]") {
  // The span names traces and program files have always used (isa.h kernel_name).
  const std::vector<std::string> expected = {"LowLevelConv2d",
                                             "LowLevelDepthwiseConv2d",
                                             "LowLevelMaxPool",
                                             "LowLevelMatMul",
                                             "LowLevelAdd",
                                             "LowLevelReshape",
                                             "LowLevelRequantize",
                                             "LowLevelConcat",
                                             "LowLevelTranspose",
                                             "LowLevelSplit",
                                             "LowLevelGlobalAveragePool",
                                             "LowLevelResize",
                                             "LowLevelSlice",
                                             "LowLevelPad",
                                             "LowLevelMul",
                                             "LowLevelSub"};
  std::vector<std::string> names;
  for (const auto& row : isa::all_kernel_kinds()) {
    names.emplace_back(row.name);
    CHECK(isa::kernel_name(row.kind) == row.name);
  }
  CHECK(names == expected);
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
}

TEST_CASE("the lookups of isa.h read the kernel kind table", "[isa][kernel_kinds]") {
  for (const auto& row : isa::all_kernel_kinds()) {
    CAPTURE(row.name);
    const isa::KernelArity a = isa::kernel_arity(row.kind);
    CHECK(a.in_min == row.arity.in_min);
    CHECK(a.in_max == row.arity.in_max);
    CHECK(a.out_min == row.arity.out_min);
    CHECK(a.out_max == row.arity.out_max);
    CHECK(isa::kernel_params_index(row.kind) == row.params_index);
  }
  // The MAC array runs exactly the kinds that multiply by weights.
  for (const auto& row : isa::all_kernel_kinds()) {
    const bool weighted = row.params_index == isa::kernel_params_index(isa::KernelKind::Conv2d) ||
                          row.params_index == isa::kernel_params_index(isa::KernelKind::MatMul);
    CHECK((row.unit == isa::KernelUnit::MacArray) == weighted);
  }
  // A value outside the enum: a row verify refuses.
  const auto bad = static_cast<isa::KernelKind>(isa::kKernelKindCount);
  CHECK(isa::kernel_name(bad) == "LowLevelUnknown");
  CHECK(isa::kernel_params_index(bad) == std::variant_npos);
  isa::Program p = one_kernel(isa::KernelKind::Reshape, 1, 1, 4);
  p.kernels[0].kind = bad;
  CHECK_THAT(isa::verify(p), Catch::Contains("not the parameters of a LowLevelUnknown"));
}

TEST_CASE("isa::verify accepts a minimal kernel of every kind and refuses another kind's params",
          "[isa][kernel_kinds][verify]") {
  for (const auto& row : isa::all_kernel_kinds()) {
    CAPTURE(row.name);
    const isa::KernelArity a = row.arity;
    CHECK(isa::verify(one_kernel(row.kind, a.in_min, a.out_min, row.params_index)).empty());
    // Any number above the minimum where the maximum is 0, else exactly up to the maximum.
    const std::size_t more_in = a.in_max == 0 ? a.in_min + 2 : a.in_max + 1;
    const std::size_t more_out = a.out_max == 0 ? a.out_min + 2 : a.out_max + 1;
    CHECK(isa::verify(one_kernel(row.kind, more_in, a.out_min, row.params_index)).empty() ==
          (a.in_max == 0));
    CHECK(isa::verify(one_kernel(row.kind, a.in_min, more_out, row.params_index)).empty() ==
          (a.out_max == 0));
    CHECK_THAT(isa::verify(one_kernel(row.kind, a.in_min - 1, a.out_min, row.params_index)),
               Catch::Contains(".inputs: expected"));
    CHECK_THAT(isa::verify(one_kernel(row.kind, a.in_min, a.out_min - 1, row.params_index)),
               Catch::Contains(".outputs: expected"));
    const std::size_t other = (row.params_index + 1) % std::variant_size_v<Params>;
    CHECK(isa::verify(one_kernel(row.kind, a.in_min, a.out_min, other)) ==
          "kernels[0].params: not the parameters of a " + std::string(row.name) + " (in " +
              std::string(row.name) + " 'n')");
  }
}
