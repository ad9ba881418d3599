// Slice and Pad (per-dim index maps across layouts) and the two-tensor Mul and Sub, against
// references written out here, as test_data_movement.cpp does for the other layout-agnostic
// kernels (the same conventions: garbage in lowered inputs' row padding, outputs preloaded with
// garbage).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <set>

#include "data_movement_util.h"
#include "device_test_util.h"

using namespace furiosa;
using namespace furiosa::device;
using namespace furiosa::device::test;

using isa::Layout;

namespace {

/// ONNX Pad's source index written out independently of host::pad_source: -1 for the constant.
std::int64_t pad_ref_index(isa::PadParams::Mode mode, std::int64_t o, std::int64_t begin,
                           std::int64_t n) {
  std::int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case isa::PadParams::Mode::Constant: return -1;
    case isa::PadParams::Mode::Edge: return i < 0 ? 0 : n - 1;
    case isa::PadParams::Mode::Wrap:
      while (i < 0) i += n;
      return i % n;
    case isa::PadParams::Mode::Reflect:
      while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
      return i;
  }
  return -1;
}

}  // namespace

TEST_CASE("Slice and Pad gather by per-dim index maps across layouts",
          "[device][kernels][slice][pad]") {
  SECTION("Slice: strided and backwards on a lowered int8 tensor, strided on a linear one") {
    const Shape xs{2, 3, 5, 37};
    const std::vector<std::int64_t> starts{1, 0, 4, 36}, steps{1, 2, -1, -3};
    const Shape ys{1, 2, 5, 13};
    const auto x = random_8bit(static_cast<std::size_t>(element_count(xs)), DType::Int8, 41);
    std::vector<std::int32_t> expected(static_cast<std::size_t>(element_count(ys)));
    for (std::int64_t pos = 0; pos < element_count(ys); ++pos) {
      auto index = unravel(pos, ys);
      for (std::size_t d = 0; d < 4; ++d) index[d] = starts[d] + index[d] * steps[d];
      expected[static_cast<std::size_t>(pos)] = x[static_cast<std::size_t>(ravel(index, xs))];
    }
    ProgramBuilder b("slice");
    auto xr = b.activation(DType::Int8, xs, Layout::LoweredNCHW);
    auto yr = b.activation(DType::Int8, ys, Layout::LoweredNCHW);
    auto lin_in = b.activation(DType::UInt8, {4, 9}, Layout::Linear);
    auto lin_out = b.activation(DType::UInt8, {2, 3}, Layout::Linear);
    b.kernel(isa::KernelKind::Slice, {xr}, {yr}, isa::SliceParams{starts, steps});
    b.kernel(isa::KernelKind::Slice, {lin_in}, {lin_out}, isa::SliceParams{{1, 2}, {2, 3}});
    std::vector<std::int32_t> ramp(36);
    std::iota(ramp.begin(), ramp.end(), 0);
    auto out = run_dirty(b, {xr, lin_in}, {pack(x, xr), pack(ramp, lin_in)}, {yr, lin_out});
    CHECK(unpack(out[0], yr) == expected);
    check_padding_zero(out[0], yr);
    CHECK(unpack(out[1], lin_out) == std::vector<std::int32_t>{11, 14, 17, 29, 32, 35});
  }

  SECTION("Pad: the four modes, with a crop, lowered -> lowered and lowered -> linear") {
    const Shape xs{1, 2, 3, 37};
    const std::vector<std::int64_t> begins{0, 1, 2, -1};
    const Shape ys{1, 4, 9,
                   39};  // C: 1 before, 1 after; H: 2 before, 4 after; W: 1 cropped, 3 after
    const auto x = random_8bit(static_cast<std::size_t>(element_count(xs)), DType::UInt8, 42);
    using Mode = isa::PadParams::Mode;
    for (const Mode mode : {Mode::Constant, Mode::Edge, Mode::Reflect, Mode::Wrap}) {
      INFO("mode " << static_cast<int>(mode));
      std::vector<std::int32_t> expected(static_cast<std::size_t>(element_count(ys)));
      for (std::int64_t pos = 0; pos < element_count(ys); ++pos) {
        auto index = unravel(pos, ys);
        bool fill = false;
        for (std::size_t d = 0; d < 4; ++d) {
          index[d] = pad_ref_index(mode, index[d], begins[d], xs[d]);
          fill = fill || index[d] < 0;
        }
        expected[static_cast<std::size_t>(pos)] =
            fill ? 7 : x[static_cast<std::size_t>(ravel(index, xs))];
      }
      ProgramBuilder b("pad");
      auto xr = b.activation(DType::UInt8, xs, Layout::LoweredNCHW);
      auto yr = b.activation(DType::UInt8, ys, Layout::LoweredNCHW);
      auto lin = b.activation(DType::UInt8, ys, Layout::Linear);
      b.kernel(isa::KernelKind::Pad, {xr}, {yr}, isa::PadParams{begins, mode, 7});
      b.kernel(isa::KernelKind::Pad, {xr}, {lin}, isa::PadParams{begins, mode, 7});
      auto out = run_dirty(b, {xr}, {pack(x, xr)}, {yr, lin});
      CHECK(unpack(out[0], yr) == expected);
      check_padding_zero(out[0], yr);
      CHECK(unpack(out[1], lin) == expected);
    }
  }
}

TEST_CASE("Mul and Sub of two quantized tensors follow QLinearMul's formula and float32 DQ-Sub-Q",
          "[device][kernels][mul][sub]") {
  const Shape as{1, 3, 4, 37}, gs{1, 3, 1, 1};
  const auto a = random_8bit(static_cast<std::size_t>(element_count(as)), DType::UInt8, 43);
  const auto c = random_8bit(static_cast<std::size_t>(element_count(as)), DType::Int8, 44);
  const auto g = random_8bit(3, DType::UInt8, 45);
  const isa::QuantParam qa{0.031f, 120}, qc{0.017f, -3}, qg{0.0042f, 128}, qmul{0.0009f, 125},
      qmul_ac{0.07f, 1}, qsub{0.05f, 2};
  // The contrib formula (QLinearMul) and DequantizeLinear -> Sub -> QuantizeLinear, written out.
  auto mul_ref = [](std::int32_t x, isa::QuantParam qx, std::int32_t y, isa::QuantParam qy,
                    isa::QuantParam qo, DType out) {
    const float ratio = qx.scale * qy.scale / qo.scale;
    const float v =
        std::nearbyint(static_cast<float>((x - qx.zero_point) * (y - qy.zero_point)) * ratio +
                       static_cast<float>(qo.zero_point));
    const auto range = isa::quant_range(out);
    return static_cast<std::int32_t>(std::clamp(v, static_cast<float>(std::get<0>(range)),
                                                static_cast<float>(std::get<1>(range))));
  };
  auto sub_ref = [](std::int32_t x, isa::QuantParam qx, std::int32_t y, isa::QuantParam qy,
                    isa::QuantParam qo, DType out) {
    const float fx = static_cast<float>(x - qx.zero_point) * qx.scale;
    const float fy = static_cast<float>(y - qy.zero_point) * qy.scale;
    const float v = std::nearbyint((fx - fy) / qo.scale) + static_cast<float>(qo.zero_point);
    const auto range = isa::quant_range(out);
    return static_cast<std::int32_t>(std::clamp(v, static_cast<float>(std::get<0>(range)),
                                                static_cast<float>(std::get<1>(range))));
  };
  std::vector<std::int32_t> mul_gate(a.size()), mul_ac(a.size()), sub_ac(a.size()),
      sub_gate(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::size_t ch = i / static_cast<std::size_t>(4 * 37);
    mul_gate[i] = mul_ref(a[i], qa, g[ch], qg, qmul, DType::UInt8);
    mul_ac[i] = mul_ref(a[i], qa, c[i], qc, qmul_ac, DType::Int8);
    sub_ac[i] = sub_ref(a[i], qa, c[i], qc, qsub, DType::UInt8);
    sub_gate[i] = sub_ref(a[i], qa, g[ch], qg, qsub, DType::Int8);
  }
  ProgramBuilder b("binary");
  auto ar = b.activation(DType::UInt8, as, Layout::LoweredNCHW);
  auto cr = b.activation(DType::Int8, as, Layout::LoweredNCHW);
  auto al = b.activation(DType::UInt8, as, Layout::Linear);
  auto gr = b.activation(DType::UInt8, gs, Layout::Linear);
  auto y_gate = b.activation(DType::UInt8, as, Layout::Linear);
  auto y_ac = b.activation(DType::Int8, as, Layout::LoweredNCHW);
  auto y_sub = b.activation(DType::UInt8, as, Layout::LoweredNCHW);
  auto y_subg = b.activation(DType::Int8, as, Layout::Linear);
  b.kernel(isa::KernelKind::Reshape, {ar}, {al}, isa::ReshapeParams{});
  b.kernel(isa::KernelKind::Mul, {al, gr}, {y_gate}, isa::MulParams{qa, qg, qmul});
  b.kernel(isa::KernelKind::Mul, {ar, cr}, {y_ac}, isa::MulParams{qa, qc, qmul_ac});
  b.kernel(isa::KernelKind::Sub, {ar, cr}, {y_sub}, isa::SubParams{qa, qc, qsub});
  b.kernel(isa::KernelKind::Sub, {al, gr}, {y_subg}, isa::SubParams{qa, qg, qsub});
  auto out = run_dirty(b, {ar, cr, gr}, {pack(a, ar), pack(c, cr), pack(g, gr)},
                       {y_gate, y_ac, y_sub, y_subg});
  CHECK(unpack(out[0], y_gate) == mul_gate);
  CHECK(unpack(out[1], y_ac) == mul_ac);
  check_padding_zero(out[1], y_ac);
  CHECK(unpack(out[2], y_sub) == sub_ac);
  check_padding_zero(out[2], y_sub);
  CHECK(unpack(out[3], y_subg) == sub_gate);
  // The outputs are not degenerate: many distinct values.
  CHECK(std::set<std::int32_t>(mul_gate.begin(), mul_gate.end()).size() > 50);
  CHECK(std::set<std::int32_t>(mul_ac.begin(), mul_ac.end()).size() > 50);
  CHECK(std::set<std::int32_t>(sub_ac.begin(), sub_ac.end()).size() > 50);
}
