// LowLevelAdd's fast paths for every float formula (isa::AddFormula: Dequantized, MlasRatios,
// MlasRatiosUint8) with broadcasting, including ONNX Runtime's swapped operands (a broadcast
// along the innermost dim of the output that is not 1: the kernel streams b), at every ISA level
// this CPU has, compared element for element with the portable kernel and with a reference
// written here from the formulas' definitions (isa.h). The exhaustive cases run the fast
// kernels directly on every (a, b) pair of 8-bit codes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "device_test_util.h"
#include "fast_kernels.h"
#include "fast_switch.h"
#include "kernels.h"

using namespace furiosa;
using namespace furiosa::device;
using namespace furiosa::device::test;
using isa::Layout;

namespace {

std::vector<SimIsa> fast_levels() {
  std::vector<SimIsa> levels = sim_cpu_isa_levels();
  levels.erase(std::remove(levels.begin(), levels.end(), SimIsa::Portable), levels.end());
  return levels;
}

// Runs the program's one kernel on a copy of `region` with the portable kernels, then at every
// fast level this CPU has: y's bytes must be `expected` each time.
void check_every_level(const isa::Program& prog, const std::vector<std::byte>& region,
                       const isa::TensorRef& y, const std::vector<std::byte>& expected) {
  const auto output = [&](const std::vector<std::byte>& r) {
    return std::vector<std::byte>(
        r.begin() + static_cast<std::ptrdiff_t>(y.address),
        r.begin() + static_cast<std::ptrdiff_t>(y.address + y.size_bytes()));
  };
  sim::set_fast_kernels_enabled(false);
  auto portable = region;
  sim::run_kernel(prog.kernels[0], portable);
  sim::set_fast_kernels_enabled(true);
  REQUIRE(output(portable) == expected);
  for (SimIsa level : fast_levels()) {
    REQUIRE(sim::set_fast_kernels_level(level));
    INFO("level " << sim_isa_name(level));
    auto r = region;
    sim::run_kernel(prog.kernels[0], r);
    CHECK(output(r) == expected);
  }
  sim::set_fast_kernels_level(SimIsa::Auto);
}

std::int64_t rnd(std::mt19937& rng, std::int64_t n) {
  return static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(n));
}

std::int32_t value_of(std::byte b, bool is_signed) {
  const auto u = std::to_integer<std::uint8_t>(b);
  return is_signed ? static_cast<std::int8_t>(u) : static_cast<std::int32_t>(u);
}

// One element of `formula` from its definition (isa::AddFormula), `swap`: ORT streams b.
std::int32_t reference_add(isa::AddFormula formula, bool swap, std::int32_t a, bool a_signed,
                           std::int32_t b, bool b_signed, const isa::AddParams& p,
                           std::int32_t qmin, std::int32_t qmax) {
  if (formula == isa::AddFormula::Dequantized) {
    return sim::qlinear_add(a, p.a, b, p.b, p.y, qmin, qmax);
  }
  isa::QuantParam qa = p.a, qb = p.b, qy = p.y;
  std::int32_t y_shift = 0;
  if (formula == isa::AddFormula::MlasRatiosUint8) {
    if (a_signed) a += 128, qa.zero_point += 128;
    if (b_signed) b += 128, qb.zero_point += 128;
    if (qmin < 0) y_shift = 128, qy.zero_point += 128;
  }
  const std::int32_t lo = qmin + y_shift, hi = qmax + y_shift;
  if (swap) return sim::mlas_add(b, a, sim::mlas_add_consts(qb, qa, qy), lo, hi) - y_shift;
  return sim::mlas_add(a, b, sim::mlas_add_consts(qa, qb, qy), lo, hi) - y_shift;
}

constexpr isa::AddFormula kFormulas[] = {isa::AddFormula::Dequantized, isa::AddFormula::MlasRatios,
                                         isa::AddFormula::MlasRatiosUint8};

}  // namespace

TEST_CASE("Fast add with broadcasting and swapped operands equals the portable kernel",
          "[device][kernels][fast][add]") {
  FastSwitch restore;
  std::mt19937 rng(2911);
  int swapped = 0, b_broadcast = 0;
  for (int iter = 0; iter < 240; ++iter) {
    const isa::AddFormula formula = kFormulas[iter % 3];
    // Rank-4 Linear operands; each of a's and b's dims is y's or 1. Every other case has a
    // broadcast along the innermost non-1 dim of y (ORT's scalar spans).
    Shape ys{1 + rnd(rng, 2), 1 + rnd(rng, 5), 1 + rnd(rng, 6), 1 + rnd(rng, 70)};
    if (rnd(rng, 6) == 0) ys[3] = 1;
    Shape as = ys, bs = ys;
    for (std::size_t d = 0; d < 4; ++d) {
      const auto r = rnd(rng, 4);
      if (r == 0) as[d] = 1;
      if (r == 1) bs[d] = 1;
    }
    if (iter % 2 == 1) (rnd(rng, 2) == 0 ? as : bs)[3] = 1;
    if (iter % 17 == 0) as = bs = ys = {1, 1, 1, 1};
    const DType at = rnd(rng, 2) ? DType::Int8 : DType::UInt8;
    const DType bt = rnd(rng, 2) ? DType::Int8 : DType::UInt8;
    const DType yt = rnd(rng, 2) ? DType::Int8 : DType::UInt8;
    const bool a_signed = at == DType::Int8, b_signed = bt == DType::Int8;
    const auto [alo, ahi] = isa::quant_range(at);
    const auto [blo, bhi] = isa::quant_range(bt);
    const auto [ylo, yhi] = isa::quant_range(yt);
    std::uniform_real_distribution<float> log_scale(-7.0f, 0.0f);
    const float y_scale = rnd(rng, 8) == 0 ? 1e-5f : std::exp(log_scale(rng));
    isa::AddParams p{
        {std::exp(log_scale(rng)), static_cast<std::int32_t>(alo + rnd(rng, ahi - alo + 1))},
        {std::exp(log_scale(rng)), static_cast<std::int32_t>(blo + rnd(rng, bhi - blo + 1))},
        {y_scale, static_cast<std::int32_t>(ylo + rnd(rng, yhi - ylo + 1))}};
    p.formula = formula;
    // ORT streams b where a is broadcast along the innermost non-1 dim of y, or y is one element.
    bool swap = formula != isa::AddFormula::Dequantized;
    for (std::size_t d = 4; swap && d-- > 0;) {
      if (ys[d] == 1) continue;
      swap = as[d] == 1;
      break;
    }
    for (std::size_t d = 4; d-- > 0;) {  // count the broadcast runs (whatever the formula)
      if (ys[d] == 1) continue;
      swapped += as[d] == 1 ? 1 : 0;
      b_broadcast += as[d] != 1 && bs[d] == 1 ? 1 : 0;
      break;
    }
    ProgramBuilder builder("add");
    const isa::TensorRef a = builder.activation(at, as, Layout::Linear);
    const isa::TensorRef b = builder.activation(bt, bs, Layout::Linear);
    isa::TensorRef y = builder.activation(yt, ys, Layout::Linear);
    // In place over a streamed a (same shape and type) in some cases.
    if (as == ys && at == yt && rnd(rng, 4) == 0) y.address = a.address;
    builder.kernel(isa::KernelKind::Add, {a, b}, {y}, p);
    auto prog = builder.finish({a, b}, {y});
    std::vector<std::byte> region(static_cast<std::size_t>(prog->dram_bytes));
    for (auto& v : region) v = static_cast<std::byte>(rng());
    INFO("iter " << iter << " " << isa::add_formula_name(formula) << " a " << shape_to_string(as)
                 << " " << dtype_name(at) << " b " << shape_to_string(bs) << " " << dtype_name(bt)
                 << " y " << shape_to_string(ys) << " " << dtype_name(yt)
                 << (swap ? " swapped" : "") << (y.address == a.address ? " in place" : ""));
    // The reference from the definitions.
    std::vector<std::byte> expected(y.size_bytes());
    for (std::int64_t n = 0; n < ys[0]; ++n)
      for (std::int64_t c = 0; c < ys[1]; ++c)
        for (std::int64_t h = 0; h < ys[2]; ++h)
          for (std::int64_t w = 0; w < ys[3]; ++w) {
            auto at_ = [&](const Shape& s, std::int64_t addr) {
              const std::int64_t i = (((s[0] == 1 ? 0 : n) * s[1] + (s[1] == 1 ? 0 : c)) * s[2] +
                                      (s[2] == 1 ? 0 : h)) *
                                         s[3] +
                                     (s[3] == 1 ? 0 : w);
              return region[static_cast<std::size_t>(addr + i)];
            };
            const std::int32_t av =
                value_of(at_(as, static_cast<std::int64_t>(a.address)), a_signed);
            const std::int32_t bv =
                value_of(at_(bs, static_cast<std::int64_t>(b.address)), b_signed);
            const std::int64_t i = ((n * ys[1] + c) * ys[2] + h) * ys[3] + w;
            expected[static_cast<std::size_t>(i)] =
                static_cast<std::byte>(static_cast<std::uint8_t>(
                    reference_add(formula, swap, av, a_signed, bv, b_signed, p, ylo, yhi)));
          }
    check_every_level(*prog, region, y, expected);
  }
  CHECK(swapped >= 30);
  CHECK(b_broadcast >= 30);
}

TEST_CASE("Fast add equals the formulas on every operand pair, swapped and broadcast",
          "[device][kernels][fast][add]") {
  // Every (a, b) pair of codes, every formula, the operands exchanged or not (ORT's swap), b
  // streamed or one element per row, through add_run and add_rows at every level.
  struct Set {
    float as, bs, ys;
    bool a_signed, b_signed, y_signed;
  };
  std::vector<Set> sets = {{0.05f, 0.05f, 0.1f, true, true, true},
                           {0.0078125f, 0.0078125f, 0.015625f, true, false, true},
                           {0.031f, 0.017f, 0.05f, false, true, false},
                           {1.0f / 3, 1.0f / 7, 0.3f, true, true, false},
                           {0.031f, 0.017f, 1e-5f, true, true, true}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> log_scale(-9.0f, 1.0f);
  for (int i = 0; i < 6; ++i) {
    sets.push_back({std::exp(log_scale(rng)), std::exp(log_scale(rng)), std::exp(log_scale(rng)),
                    rnd(rng, 2) == 0, rnd(rng, 2) == 0, rnd(rng, 2) == 0});
  }
  // Row r, column c: a = c, b = r (so b is constant along a row: b_broadcast reads b_col[r]).
  std::vector<std::byte> a(65536), b(65536), b_col(256), y(65536), expected(65536);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<std::byte>(i & 0xff);
    b[i] = static_cast<std::byte>(i >> 8);
  }
  for (std::size_t r = 0; r < 256; ++r) b_col[r] = static_cast<std::byte>(r);
  for (const Set& set : sets) {
    const auto [ylo, yhi] = isa::quant_range(set.y_signed ? DType::Int8 : DType::UInt8);
    isa::AddParams p{{set.as, set.a_signed ? -3 : 131},
                     {set.bs, set.b_signed ? 7 : 120},
                     {set.ys, set.y_signed ? 1 : 128}};
    for (const isa::AddFormula formula : kFormulas) {
      p.formula = formula;
      for (const bool exchange : {false, true}) {
        // With exchange the kernel's input 0 is the streamed operand's (here: the bytes a)
        // second argument: it computes y = add(input0 = b, input1 = a) as ORT's swap does.
        for (std::size_t i = 0; i < a.size(); ++i) {
          const std::int32_t va = value_of(a[i], exchange ? set.b_signed : set.a_signed);
          const std::int32_t vb = value_of(b[i], exchange ? set.a_signed : set.b_signed);
          expected[i] = static_cast<std::byte>(static_cast<std::uint8_t>(
              exchange
                  ? reference_add(formula, true, vb, set.a_signed, va, set.b_signed, p, ylo, yhi)
                  : reference_add(formula, false, va, set.a_signed, vb, set.b_signed, p, ylo,
                                  yhi)));
        }
        sim::fast::AddParamsF f =
            sim::fast_add_params(p, set.a_signed, set.b_signed, ylo, yhi, exchange);
        for (SimIsa level : fast_levels()) {
          const sim::fast::Kernels* k = sim::fast::kernels_for(level);
          REQUIRE(k != nullptr);
          if (k->add_run == nullptr) continue;
          INFO("level " << sim_isa_name(level) << " " << isa::add_formula_name(formula)
                        << (exchange ? " exchanged" : "") << " scales " << set.as << " " << set.bs
                        << " " << set.ys << " signed " << set.a_signed << set.b_signed
                        << set.y_signed);
          f.b_broadcast = false;
          std::fill(y.begin(), y.end(), std::byte{0x5a});
          k->add_run(f, a.data(), b.data(), y.data(), static_cast<std::int64_t>(a.size()));
          CHECK(y == expected);
          std::fill(y.begin(), y.end(), std::byte{0x5a});
          k->add_rows(f, a.data(), 256, b.data(), 256, y.data(), 256, 256, 256, 0);
          CHECK(y == expected);
          f.b_broadcast = true;
          std::fill(y.begin(), y.end(), std::byte{0x5a});
          k->add_rows(f, a.data(), 256, b_col.data(), 1, y.data(), 256, 256, 256, 0);
          CHECK(y == expected);
          std::fill(y.begin(), y.end(), std::byte{0x5a});
          for (std::size_t r = 0; r < 256; ++r) {  // odd run lengths: the tails
            k->add_run(f, a.data() + r * 256, b_col.data() + r, y.data() + r * 256,
                       256 - 1 - static_cast<std::int64_t>(r % 31));
          }
          bool tails_ok = true;
          for (std::size_t r = 0; r < 256; ++r) {
            const std::size_t n = 256 - 1 - r % 31;
            tails_ok = tails_ok &&
                       std::equal(y.begin() + r * 256, y.begin() + r * 256 + n,
                                  expected.begin() + r * 256) &&
                       std::all_of(y.begin() + r * 256 + n, y.begin() + r * 256 + 256,
                                   [](std::byte v) { return v == std::byte{0x5a}; });
          }
          CHECK(tails_ok);
        }
      }
    }
  }
}

TEST_CASE("Fast add over lowered rows of any width equals the formulas, padding zeroed",
          "[device][kernels][fast][add]") {
  // Lowered NCHW operands whose rows are one contiguous run (every level then walks the whole
  // run in steps that cross rows and masks the row padding: 7 and 14 elements of a 16-byte
  // pitch, 56 of 64, ...), every formula, int8 and uint8, in place or not. The inputs' row
  // padding holds random bytes, which must not reach y; y's padding must come out zero.
  FastSwitch restore;
  std::mt19937 rng(4127);
  const std::int64_t widths[] = {1, 7, 14, 15, 16, 17, 28, 33, 56, 64, 70};
  for (int iter = 0; iter < 66; ++iter) {
    const isa::AddFormula formula = kFormulas[iter % 3];
    const Shape shape{1 + rnd(rng, 2), 1 + rnd(rng, 5), 1 + rnd(rng, 9), widths[iter % 11]};
    const DType at = rnd(rng, 2) ? DType::Int8 : DType::UInt8;
    const DType bt = rnd(rng, 2) ? DType::Int8 : DType::UInt8;
    const DType yt = rnd(rng, 2) ? DType::Int8 : DType::UInt8;
    const bool a_signed = at == DType::Int8, b_signed = bt == DType::Int8;
    const auto [alo, ahi] = isa::quant_range(at);
    const auto [blo, bhi] = isa::quant_range(bt);
    const auto [ylo, yhi] = isa::quant_range(yt);
    std::uniform_real_distribution<float> log_scale(-7.0f, 0.0f);
    isa::AddParams p{
        {std::exp(log_scale(rng)), static_cast<std::int32_t>(alo + rnd(rng, ahi - alo + 1))},
        {std::exp(log_scale(rng)), static_cast<std::int32_t>(blo + rnd(rng, bhi - blo + 1))},
        {std::exp(log_scale(rng)), static_cast<std::int32_t>(ylo + rnd(rng, yhi - ylo + 1))}};
    p.formula = formula;
    ProgramBuilder builder("add");
    const isa::TensorRef a = builder.activation(at, shape, Layout::LoweredNCHW);
    const isa::TensorRef b = builder.activation(bt, shape, Layout::LoweredNCHW);
    isa::TensorRef y = builder.activation(yt, shape, Layout::LoweredNCHW);
    if (at == yt && rnd(rng, 3) == 0) y.address = a.address;
    builder.kernel(isa::KernelKind::Add, {a, b}, {y}, p);
    auto prog = builder.finish({a, b}, {y});
    std::vector<std::byte> region(static_cast<std::size_t>(prog->dram_bytes));
    for (auto& v : region) v = static_cast<std::byte>(rng());
    INFO("iter " << iter << " " << isa::add_formula_name(formula) << " " << shape_to_string(shape)
                 << " " << dtype_name(at) << " + " << dtype_name(bt) << " -> " << dtype_name(yt)
                 << (y.address == a.address ? " in place" : ""));
    // Same shapes: ORT streams a unless y is a single element (then b, as isa::AddFormula
    // says). The padding bytes of y stay zero.
    const bool swap = formula != isa::AddFormula::Dequantized && element_count(shape) == 1;
    const std::int64_t pitch = isa::padded_width(shape[3]);
    std::vector<std::byte> expected(y.size_bytes(), std::byte{0});
    for (std::int64_t row = 0; row < shape[0] * shape[1] * shape[2]; ++row) {
      for (std::int64_t w = 0; w < shape[3]; ++w) {
        const std::int64_t at_row = row * pitch + w;
        const std::int32_t av =
            value_of(region[static_cast<std::size_t>(a.address + at_row)], a_signed);
        const std::int32_t bv =
            value_of(region[static_cast<std::size_t>(b.address + at_row)], b_signed);
        expected[static_cast<std::size_t>(at_row)] =
            static_cast<std::byte>(static_cast<std::uint8_t>(
                reference_add(formula, swap, av, a_signed, bv, b_signed, p, ylo, yhi)));
      }
    }
    check_every_level(*prog, region, y, expected);
  }
}
