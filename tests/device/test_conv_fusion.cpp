// The simulator's fusion of a LowLevelRequantize into the convolution before it
// (device/sim/kernels/conv.cpp: fuse_conv_requantize; fast::conv's post_lut): fused pairs give
// the bytes of the two kernels run apart on the portable kernels, at every ISA level this CPU
// has (the avx512 level maps the bytes in the convolution's epilogue, the others run the two
// kernels one after the other), also when the level changes after the program was prepared; a
// convolution output that anything else reads is not fused.
#include <catch2/catch.hpp>
#include <cstring>
#include <fmt/format.h>
#include <random>
#include <vector>

#include "device_test_util.h"
#include "fast_switch.h"
#include "kernels.h"

using namespace furiosa;
using namespace furiosa::device;
using namespace furiosa::device::test;
using isa::Layout;

namespace {

std::int64_t rnd(std::mt19937& rng, std::int64_t n) {
  return static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(n));
}

DType pick_8bit(std::mt19937& rng) { return rnd(rng, 2) ? DType::Int8 : DType::UInt8; }

// Where the Requantize's output goes relative to the convolution's tensors.
enum class Place { Apart, OverInput };

struct Case {
  std::shared_ptr<const isa::Program> prog;
  isa::TensorRef y;                   // the Requantize's output (a program output)
  std::vector<isa::TensorRef> extra;  // further program outputs to compare
};

// x -> Conv2d -> t -> Requantize -> y, with random shapes, dtypes, layouts and table; `reread`:
// a third kernel (a Requantize into z) reads t again, `t_out`: t is a program output too.
Case make_case(std::uint32_t seed, Place place, bool reread, bool t_out) {
  std::mt19937 rng(seed);
  const std::int64_t group = place == Place::OverInput && rnd(rng, 2) ? 2 : 1;
  // (At least 2 input channels per group: with one, the plan takes the depthwise path, which
  // is never fused.)
  const std::int64_t c = group * (2 + rnd(rng, 11)), m = group * (1 + rnd(rng, 14));
  const std::int64_t k = rnd(rng, 2) ? 3 : 1, s = rnd(rng, 3) == 0 ? 2 : 1;
  const std::int64_t pad = k == 3 ? 1 : 0;
  const std::int64_t h = k + rnd(rng, 20), w = k + rnd(rng, 90);
  const std::int64_t oh = (h + 2 * pad - k) / s + 1, ow = (w + 2 * pad - k) / s + 1;
  const DType xt = pick_8bit(rng), wt = pick_8bit(rng), tt = pick_8bit(rng), yt = pick_8bit(rng);
  // Two images: over the input, image 0's output must not clobber image 1's input.
  const std::int64_t images = rnd(rng, 3) == 0 ? 2 : 1;
  const Layout layout = rnd(rng, 4) == 0 ? Layout::Linear : Layout::LoweredNCHW;

  isa::Conv2dParams p;
  p.pads = {pad, pad, pad, pad};
  p.strides = {s, s};
  p.group = group;
  const auto [xlo, xhi] = isa::quant_range(xt);
  const auto [tlo, thi] = isa::quant_range(tt);
  p.x = {0.02f, static_cast<std::int32_t>(xlo + rnd(rng, xhi - xlo + 1))};
  p.y = {0.05f, static_cast<std::int32_t>(tlo + rnd(rng, thi - tlo + 1))};
  p.w_scale = {0.004f};
  p.w_zero_point = {0};
  ProgramBuilder b("fusion");
  const Shape ws{m, c / group, k, k};
  p.weight =
      b.constant(wt, ws, random_8bit(static_cast<std::size_t>(element_count(ws)), wt, seed + 1));
  p.bias = b.constant(DType::Int32, {m},
                      random_values(static_cast<std::size_t>(m), -3000, 3000, seed + 2));
  const isa::TensorRef x = b.activation(xt, {images, c, h, w}, layout);
  const isa::TensorRef t = b.activation(tt, {images, m, oh, ow}, layout);
  isa::TensorRef y = b.activation(yt, {images, m, oh, ow}, layout);
  if (place == Place::OverInput && y.size_bytes() <= x.size_bytes()) y.address = x.address;
  if (place == Place::OverInput && images == 2) {
    // Image 0's output ending inside image 1's input: written before that input is read
    // unless the whole input is read first.
    const std::uint64_t xi = x.size_bytes() / 2, yi = y.size_bytes() / 2;
    const std::uint64_t shift = (xi - std::min(xi, yi) + 64) / 64 * 64;
    if (shift + 2 * yi <= 2 * xi && shift + yi > xi) y.address = x.address + shift;
  }
  isa::RequantizeParams rq;
  rq.x = p.y;
  rq.y = {0.03f, 7};
  if (rnd(rng, 3) != 0) {  // a table (an activation); else the float formula
    rq.table.resize(256);
    for (auto& v : rq.table) v = static_cast<std::uint8_t>(rng());
  }
  b.kernel(isa::KernelKind::Conv2d, {x}, {t}, p);
  b.kernel(isa::KernelKind::Requantize, {t}, {y}, rq);
  Case out;
  out.y = y;
  std::vector<isa::TensorRef> outputs{y};
  if (reread) {
    const isa::TensorRef z = b.activation(tt, {images, m, oh, ow}, layout);
    isa::RequantizeParams copy;
    copy.x = p.y;
    copy.y = p.y;
    b.kernel(isa::KernelKind::Requantize, {t}, {z}, copy);
    outputs.push_back(z);
    out.extra.push_back(z);
  }
  if (t_out) {
    outputs.push_back(t);
    out.extra.push_back(t);
  }
  out.prog = b.finish({x}, outputs);
  return out;
}

std::vector<std::byte> bytes_of(const std::vector<std::byte>& region, const isa::TensorRef& ref) {
  return {region.begin() + static_cast<std::ptrdiff_t>(ref.address),
          region.begin() + static_cast<std::ptrdiff_t>(ref.address + ref.size_bytes())};
}

// Runs every kernel of `prog` in order on a copy of `region`.
std::vector<std::byte> run_all(const isa::Program& prog, std::vector<std::byte> region,
                               const sim::PreparedProgram* prepared) {
  for (std::size_t i = 0; i < prog.kernels.size(); ++i) {
    if (prepared != nullptr) {
      sim::run_kernel(prog.kernels[i], region, prepared, i);
    } else {
      sim::run_kernel(prog.kernels[i], region);
    }
  }
  return region;
}

// Checks the case at every level: the fused count, and every output against the portable
// kernels run unprepared.
void check(const Case& c, std::size_t want_fused) {
  FastSwitch restore;
  const isa::Program& prog = *c.prog;
  std::mt19937 rng(17);
  std::vector<std::byte> region(static_cast<std::size_t>(prog.dram_bytes));
  for (auto& v : region) v = static_cast<std::byte>(rng());
  std::memcpy(region.data(), prog.constants.data(), prog.constants.size());

  sim::set_fast_kernels_enabled(false);
  const auto want = run_all(prog, region, nullptr);
  sim::set_fast_kernels_enabled(true);
  std::vector<isa::TensorRef> outs{c.y};
  outs.insert(outs.end(), c.extra.begin(), c.extra.end());
  for (SimIsa level : sim_cpu_isa_levels()) {
    if (level == SimIsa::Portable) continue;
    REQUIRE(sim::set_fast_kernels_level(level));
    INFO("level " << sim_active_isa());
    const auto prepared = sim::prepare_program(prog);
    CHECK(sim::fused_kernels(*prepared) == want_fused);
    const auto got = run_all(prog, region, prepared.get());
    for (const auto& ref : outs) CHECK(bytes_of(got, ref) == bytes_of(want, ref));
    // The same plans after a switch to the portable kernels: the pair runs apart.
    sim::set_fast_kernels_enabled(false);
    const auto portable = run_all(prog, region, prepared.get());
    for (const auto& ref : outs) CHECK(bytes_of(portable, ref) == bytes_of(want, ref));
    sim::set_fast_kernels_enabled(true);
  }
}

}  // namespace

TEST_CASE("A Requantize after a convolution is fused and gives the bytes of the two kernels",
          "[device][kernels][fast][fusion]") {
  for (std::uint32_t seed = 1; seed <= 60; ++seed) {
    const Place place = seed % 3 == 0 ? Place::OverInput : Place::Apart;
    INFO("seed " << seed << (place == Place::OverInput ? ", output over the input" : ""));
    check(make_case(seed, place, false, false), 1);
  }
}

TEST_CASE("A convolution output that is read again is not fused",
          "[device][kernels][fast][fusion]") {
  for (std::uint32_t seed = 100; seed < 110; ++seed) {
    INFO("seed " << seed);
    check(make_case(seed, Place::Apart, true, false), 0);
    check(make_case(seed, Place::Apart, false, true), 0);
  }
}

TEST_CASE("A convolution output written over before it is read again is fused",
          "[device][kernels][fast][fusion]") {
  // x -> conv -> t -> Requantize -> y; then Requantize y -> t (t's bytes written over) and
  // Requantize t -> z: the later read of t's bytes reads the new tensor, not the convolution's.
  for (std::uint32_t seed = 200; seed < 210; ++seed) {
    INFO("seed " << seed);
    Case c = make_case(seed, Place::Apart, false, false);
    isa::Program prog = *c.prog;
    const isa::TensorRef t = prog.kernels[0].outputs[0];
    isa::TensorRef t2 = c.y;  // y's shape and layout, at t's address
    t2.address = t.address;
    t2.dtype = t.dtype;
    isa::TensorRef z = c.y;
    z.address = (prog.dram_bytes + 63) / 64 * 64;
    prog.dram_bytes = z.address + z.size_bytes();
    isa::RequantizeParams p1;
    p1.x = {0.03f, 0};
    p1.y = {0.03f, 0};
    isa::Kernel k1 = prog.kernels[1];
    k1.inputs = {c.y};
    k1.outputs = {t2};
    k1.params = p1;
    isa::Kernel k2 = prog.kernels[1];
    k2.inputs = {t2};
    k2.outputs = {z};
    k2.params = p1;
    prog.kernels.push_back(k1);
    prog.kernels.push_back(k2);
    prog.outputs = {c.y, z};
    c.prog = std::make_shared<const isa::Program>(prog);
    c.extra = {z};
    check(c, 1);
  }
}
