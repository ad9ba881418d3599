// The layout-agnostic simulator kernels (Requantize, Concat, Transpose, Split, Reshape between
// any layouts, GlobalAveragePool) against straightforward references computed here on small
// hand-made data (Slice, Pad, Mul and Sub: test_slice_pad_mul.cpp; malformed kernels:
// test_data_movement_faults.cpp). Lowered tensors have widths that are not multiples of 32; lowered
// inputs carry garbage (0xAB) in their row padding, which must never be read, and outputs are
// preloaded with garbage so the tests also prove that every output byte, row padding included, is
// written.
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

namespace {

using isa::Layout;

/// Reference ONNX Concat of dense tensors along `axis`.
std::vector<std::int32_t> concat_ref(const std::vector<std::vector<std::int32_t>>& parts,
                                     const std::vector<Shape>& shapes, std::size_t axis,
                                     const Shape& out) {
  std::vector<std::int32_t> y(static_cast<std::size_t>(element_count(out)));
  for (std::int64_t pos = 0; pos < element_count(out); ++pos) {
    auto index = unravel(pos, out);
    std::size_t part = 0;
    while (index[axis] >= shapes[part][axis]) index[axis] -= shapes[part++][axis];
    y[static_cast<std::size_t>(pos)] =
        parts[part][static_cast<std::size_t>(ravel(index, shapes[part]))];
  }
  return y;
}

/// Reference ONNX Transpose: output dim d is input dim perm[d].
std::vector<std::int32_t> transpose_ref(const std::vector<std::int32_t>& x, const Shape& xs,
                                        const std::vector<std::int64_t>& perm) {
  Shape ys(perm.size());
  for (std::size_t d = 0; d < perm.size(); ++d) ys[d] = xs[static_cast<std::size_t>(perm[d])];
  std::vector<std::int32_t> y(x.size());
  for (std::int64_t pos = 0; pos < element_count(ys); ++pos) {
    const auto out_index = unravel(pos, ys);
    std::vector<std::int64_t> in_index(xs.size());
    for (std::size_t d = 0; d < perm.size(); ++d)
      in_index[static_cast<std::size_t>(perm[d])] = out_index[d];
    y[static_cast<std::size_t>(pos)] = x[static_cast<std::size_t>(ravel(in_index, xs))];
  }
  return y;
}

/// DequantizeLinear then QuantizeLinear in float32, written out as in the ONNX operator spec.
std::int32_t requantize_ref(std::int32_t x, isa::QuantParam qx, isa::QuantParam qy, DType y_type) {
  const float f = static_cast<float>(x - qx.zero_point) * qx.scale;
  const float q = std::nearbyint(f / qy.scale) + static_cast<float>(qy.zero_point);
  const auto [qmin, qmax] = isa::quant_range(y_type);
  return static_cast<std::int32_t>(
      std::clamp(q, static_cast<float>(qmin), static_cast<float>(qmax)));
}

}  // namespace

TEST_CASE("Requantize follows DequantizeLinear + QuantizeLinear in float32",
          "[device][kernels][requantize]") {
  SECTION("uint8 -> uint8, every input value, lowered -> lowered") {
    const Shape shape{1, 2, 4, 33};  // 264 elements: every uint8 value at least once
    std::vector<std::int32_t> x(264);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::int32_t>((i * 7) % 256);
    const isa::QuantParam qx{0.1f, 128}, qy{0.25f, 100};
    std::vector<std::int32_t> expected;
    for (std::int32_t v : x) expected.push_back(requantize_ref(v, qx, qy, DType::UInt8));
    CHECK(std::count(expected.begin(), expected.end(), 255) == 0);  // inside the range...
    CHECK(expected.front() == 100 + static_cast<std::int32_t>(std::nearbyint(-12.8f / 0.25f)));

    ProgramBuilder b("requantize");
    auto xr = b.activation(DType::UInt8, shape, Layout::LoweredNCHW);
    auto yr = b.activation(DType::UInt8, shape, Layout::LoweredNCHW);
    b.kernel(isa::KernelKind::Requantize, {xr}, {yr}, isa::RequantizeParams{qx, qy});
    auto out = run_dirty(b, {xr}, {pack(x, xr)}, {yr});
    CHECK(unpack(out[0], yr) == expected);
    check_padding_zero(out[0], yr);
  }

  SECTION("rounding is half to even, and two float operations, not one multiplier") {
    // x_scale 1, y_scale 2: (x - zp) / 2 lands exactly on halves for odd differences.
    const isa::QuantParam qx{1.0f, 100}, qy{2.0f, 10};
    const std::vector<std::int32_t> x{101, 103, 105, 107, 99, 97, 95, 100};
    //                         0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 3.5 -> 4, -0.5 -> -0, -1.5 -> -2,
    //                         -2.5 -> -2, 0
    const std::vector<std::int32_t> half_even{10, 12, 12, 14, 10, 8, 8, 10};
    // x_scale 0.1, y_scale 0.2: float(13) * 0.1f / 0.2f = 6.50000048 -> 7, whereas a combined
    // multiplier 13 * (0.1f / 0.2f) = 6.5 -> 6. Likewise 21 -> 11 (not 10), -13 -> -7 (not -6).
    const isa::QuantParam qx2{0.1f, 100}, qy2{0.2f, 50};
    const std::vector<std::int32_t> x2{113, 121, 87, 100};
    const std::vector<std::int32_t> two_step{57, 61, 43, 50};
    for (std::size_t i = 0; i < x.size(); ++i)
      CHECK(requantize_ref(x[i], qx, qy, DType::UInt8) == half_even[i]);
    for (std::size_t i = 0; i < x2.size(); ++i)
      CHECK(requantize_ref(x2[i], qx2, qy2, DType::UInt8) == two_step[i]);

    const Shape shape{8}, shape2{4};
    ProgramBuilder b("requantize_rounding");
    auto xr = b.activation(DType::UInt8, shape, Layout::Linear);
    auto yr = b.activation(DType::UInt8, shape, Layout::Linear);
    auto xr2 = b.activation(DType::UInt8, shape2, Layout::Linear);
    auto yr2 = b.activation(DType::UInt8, shape2, Layout::Linear);
    b.kernel(isa::KernelKind::Requantize, {xr}, {yr}, isa::RequantizeParams{qx, qy});
    b.kernel(isa::KernelKind::Requantize, {xr2}, {yr2}, isa::RequantizeParams{qx2, qy2});
    auto out =
        run_dirty(b, {xr, xr2}, {to_bytes(x, DType::UInt8), to_bytes(x2, DType::UInt8)}, {yr, yr2});
    CHECK(from_bytes(out[0], DType::UInt8) == half_even);
    CHECK(from_bytes(out[1], DType::UInt8) == two_step);
  }

  SECTION("saturation, uint8 -> int8 and int8 -> uint8, across layouts") {
    // Shrinking the scale 4x saturates both ends.
    const isa::QuantParam qx{0.04f, 128}, qy{0.01f, 0};
    const std::vector<std::int32_t> x{0, 1, 96, 127, 128, 129, 159, 160, 255, 200};
    const std::vector<std::int32_t> expected{-128, -128, -128, -4, 0, 4, 124, 127, 127, 127};
    for (std::size_t i = 0; i < x.size(); ++i)
      CHECK(requantize_ref(x[i], qx, qy, DType::Int8) == expected[i]);

    // uint8 -> int8 with the same scale is a plain shift of the zero point.
    const Shape shape{1, 3, 2, 35};
    const auto x2 = random_8bit(static_cast<std::size_t>(element_count(shape)), DType::UInt8, 11);
    std::vector<std::int32_t> shifted;
    for (std::int32_t v : x2) shifted.push_back(v - 128);
    // int8 -> uint8 with a different scale and zero point.
    const auto x3 = random_8bit(static_cast<std::size_t>(element_count(shape)), DType::Int8, 12);
    const isa::QuantParam qx3{0.03f, -5}, qy3{0.05f, 60};
    std::vector<std::int32_t> expected3;
    for (std::int32_t v : x3) expected3.push_back(requantize_ref(v, qx3, qy3, DType::UInt8));
    CHECK(std::count(expected3.begin(), expected3.end(), 0) > 0);  // saturated low

    ProgramBuilder b("requantize_types");
    auto xr = b.activation(DType::UInt8, {2, 5}, Layout::Linear);
    auto yr = b.activation(DType::Int8, {2, 5}, Layout::Linear);
    auto xr2 = b.activation(DType::UInt8, shape, Layout::LoweredNCHW);
    auto yr2 = b.activation(DType::Int8, shape, Layout::Linear);
    auto xr3 = b.activation(DType::Int8, shape, Layout::Linear);
    auto yr3 = b.activation(DType::UInt8, shape, Layout::LoweredNCHW);
    b.kernel(isa::KernelKind::Requantize, {xr}, {yr}, isa::RequantizeParams{qx, qy});
    b.kernel(isa::KernelKind::Requantize, {xr2}, {yr2},
             isa::RequantizeParams{{0.02f, 128}, {0.02f, 0}});
    b.kernel(isa::KernelKind::Requantize, {xr3}, {yr3}, isa::RequantizeParams{qx3, qy3});
    auto out = run_dirty(b, {xr, xr2, xr3},
                         {to_bytes(x, DType::UInt8), pack(x2, xr2), pack(x3, xr3)}, {yr, yr2, yr3});
    CHECK(from_bytes(out[0], DType::Int8) == expected);
    CHECK(unpack(out[1], yr2) == shifted);
    CHECK(unpack(out[2], yr3) == expected3);
    check_padding_zero(out[2], yr3);
  }
}

TEST_CASE("Concat joins lowered and linear tensors along an axis", "[device][kernels][concat]") {
  SECTION("axis 1 of two lowered [1, C, H, W] tensors") {
    const Shape as{1, 3, 4, 37}, bs{1, 5, 4, 37}, ys{1, 8, 4, 37};
    const auto a = random_8bit(static_cast<std::size_t>(element_count(as)), DType::UInt8, 21);
    const auto bv = random_8bit(static_cast<std::size_t>(element_count(bs)), DType::UInt8, 22);
    const auto expected = concat_ref({a, bv}, {as, bs}, 1, ys);
    // Channels are whole planes: the output is a then b.
    std::vector<std::int32_t> joined = a;
    joined.insert(joined.end(), bv.begin(), bv.end());
    CHECK(expected == joined);

    ProgramBuilder b("concat_c");
    auto ar = b.activation(DType::UInt8, as, Layout::LoweredNCHW);
    auto br = b.activation(DType::UInt8, bs, Layout::LoweredNCHW);
    auto yr = b.activation(DType::UInt8, ys, Layout::LoweredNCHW);
    b.kernel(isa::KernelKind::Concat, {ar, br}, {yr}, isa::ConcatParams{1});
    auto out = run_dirty(b, {ar, br}, {pack(a, ar), pack(bv, br)}, {yr});
    CHECK(unpack(out[0], yr) == expected);
    check_padding_zero(out[0], yr);
  }

  SECTION("axis 1 of batch-2 lowered tensors, axis -1 (W) and mixed layouts") {
    const Shape as{2, 2, 3, 20}, bs{2, 3, 3, 20}, cs{2, 2, 3, 15};
    const Shape ys{2, 5, 3, 20}, ws{2, 2, 3, 35};
    const auto a = random_8bit(static_cast<std::size_t>(element_count(as)), DType::Int8, 23);
    const auto bv = random_8bit(static_cast<std::size_t>(element_count(bs)), DType::Int8, 24);
    const auto c = random_8bit(static_cast<std::size_t>(element_count(cs)), DType::Int8, 25);
    ProgramBuilder b("concat_mixed");
    auto ar = b.activation(DType::Int8, as, Layout::LoweredNCHW);
    auto br = b.activation(DType::Int8, bs, Layout::Linear);
    auto cr = b.activation(DType::Int8, cs, Layout::LoweredNCHW);
    auto yr = b.activation(DType::Int8, ys, Layout::LoweredNCHW);
    auto wr = b.activation(DType::Int8, ws, Layout::LoweredNCHW);
    b.kernel(isa::KernelKind::Concat, {ar, br}, {yr}, isa::ConcatParams{1});
    b.kernel(isa::KernelKind::Concat, {ar, cr}, {wr}, isa::ConcatParams{-1});
    auto out = run_dirty(b, {ar, br, cr}, {pack(a, ar), pack(bv, br), pack(c, cr)}, {yr, wr});
    CHECK(unpack(out[0], yr) == concat_ref({a, bv}, {as, bs}, 1, ys));
    CHECK(unpack(out[1], wr) == concat_ref({a, c}, {as, cs}, 3, ws));
    check_padding_zero(out[0], yr);
    check_padding_zero(out[1], wr);
  }

  SECTION("axis 0 of linear tensors, three inputs, int32 and uint8") {
    const Shape s0{2, 3, 4}, s1{1, 3, 4}, s2{3, 3, 4}, ys{6, 3, 4};
    const auto x0 = random_values(24, -100000, 100000, 26);
    const auto x1 = random_values(12, -100000, 100000, 27);
    const auto x2 = random_values(36, -100000, 100000, 28);
    const auto u0 = random_8bit(24, DType::UInt8, 29);
    const auto u2 = random_8bit(36, DType::UInt8, 30);
    const Shape us{5, 3, 4};
    ProgramBuilder b("concat_linear");
    auto r0 = b.activation(DType::Int32, s0, Layout::Linear);
    auto r1 = b.activation(DType::Int32, s1, Layout::Linear);
    auto r2 = b.activation(DType::Int32, s2, Layout::Linear);
    auto yr = b.activation(DType::Int32, ys, Layout::Linear);
    auto q0 = b.activation(DType::UInt8, s0, Layout::Linear);
    auto q2 = b.activation(DType::UInt8, s2, Layout::Linear);
    auto uy = b.activation(DType::UInt8, us, Layout::Linear);
    b.kernel(isa::KernelKind::Concat, {r0, r1, r2}, {yr}, isa::ConcatParams{0});
    b.kernel(isa::KernelKind::Concat, {q0, q2}, {uy}, isa::ConcatParams{-3});
    auto out = run_dirty(
        b, {r0, r1, r2, q0, q2},
        {to_bytes(x0, DType::Int32), to_bytes(x1, DType::Int32), to_bytes(x2, DType::Int32),
         to_bytes(u0, DType::UInt8), to_bytes(u2, DType::UInt8)},
        {yr, uy});
    std::vector<std::int32_t> expected = x0;
    expected.insert(expected.end(), x1.begin(), x1.end());
    expected.insert(expected.end(), x2.begin(), x2.end());
    CHECK(unpack(out[0], yr) == expected);
    CHECK(unpack(out[0], yr) == concat_ref({x0, x1, x2}, {s0, s1, s2}, 0, ys));
    CHECK(unpack(out[1], uy) == concat_ref({u0, u2}, {s0, s2}, 0, us));
  }
}

TEST_CASE("Transpose permutes dims across layouts", "[device][kernels][transpose]") {
  SECTION("ShuffleNet channel shuffle: 5-D linear, perm [0, 2, 1, 3, 4]") {
    const Shape xs{2, 2, 3, 4, 5};  // [N, groups, C / groups, H, W]
    const std::vector<std::int64_t> perm{0, 2, 1, 3, 4};
    const Shape ys{2, 3, 2, 4, 5};
    const auto x = random_8bit(static_cast<std::size_t>(element_count(xs)), DType::UInt8, 31);
    const auto expected = transpose_ref(x, xs, perm);
    // Spot check by hand: y[n][c][g][h][w] = x[n][g][c][h][w].
    CHECK(expected[static_cast<std::size_t>(ravel({1, 2, 1, 3, 4}, ys))] ==
          x[static_cast<std::size_t>(ravel({1, 1, 2, 3, 4}, xs))]);

    ProgramBuilder b("shuffle");
    auto xr = b.activation(DType::UInt8, xs, Layout::Linear);
    auto yr = b.activation(DType::UInt8, ys, Layout::Linear);
    b.kernel(isa::KernelKind::Transpose, {xr}, {yr}, isa::TransposeParams{perm});
    auto out = run_dirty(b, {xr}, {pack(x, xr)}, {yr});
    CHECK(unpack(out[0], yr) == expected);
  }

  SECTION("4-D lowered -> linear (NCHW -> NHWC) and linear -> lowered") {
    const Shape xs{2, 3, 4, 37};
    const std::vector<std::int64_t> nhwc{0, 2, 3, 1}, swap_hw{0, 1, 3, 2};
    const Shape ys{2, 4, 37, 3}, zs{2, 3, 37, 4};
    const auto x = random_8bit(static_cast<std::size_t>(element_count(xs)), DType::Int8, 32);
    ProgramBuilder b("transpose4");
    auto xr = b.activation(DType::Int8, xs, Layout::LoweredNCHW);
    auto yr = b.activation(DType::Int8, ys, Layout::Linear);
    auto lin = b.activation(DType::Int8, xs, Layout::Linear);
    auto zr = b.activation(DType::Int8, zs, Layout::LoweredNCHW);
    b.kernel(isa::KernelKind::Transpose, {xr}, {yr}, isa::TransposeParams{nhwc});
    b.kernel(isa::KernelKind::Reshape, {xr}, {lin}, isa::ReshapeParams{});
    b.kernel(isa::KernelKind::Transpose, {lin}, {zr}, isa::TransposeParams{swap_hw});
    auto out = run_dirty(b, {xr}, {pack(x, xr)}, {yr, zr});
    CHECK(unpack(out[0], yr) == transpose_ref(x, xs, nhwc));
    CHECK(unpack(out[1], zr) == transpose_ref(x, xs, swap_hw));
    check_padding_zero(out[1], zr);
  }

  SECTION("int32 3-D reversal and the identity permutation") {
    const Shape xs{3, 4, 5};
    const auto x = random_values(60, -1000000, 1000000, 33);
    ProgramBuilder b("transpose_i32");
    auto xr = b.activation(DType::Int32, xs, Layout::Linear);
    auto yr = b.activation(DType::Int32, {5, 4, 3}, Layout::Linear);
    auto ir = b.activation(DType::Int32, xs, Layout::Linear);
    b.kernel(isa::KernelKind::Transpose, {xr}, {yr}, isa::TransposeParams{{2, 1, 0}});
    b.kernel(isa::KernelKind::Transpose, {xr}, {ir}, isa::TransposeParams{{0, 1, 2}});
    auto out = run_dirty(b, {xr}, {to_bytes(x, DType::Int32)}, {yr, ir});
    CHECK(unpack(out[0], yr) == transpose_ref(x, xs, {2, 1, 0}));
    CHECK(unpack(out[1], ir) == x);
  }
}

TEST_CASE("Split slices a tensor along an axis", "[device][kernels][split]") {
  SECTION("axis 1 of a lowered tensor into two lowered halves (ShuffleNet-like [58, 58])") {
    const Shape xs{1, 6, 3, 33}, hs{1, 3, 3, 33};
    const auto x = random_8bit(static_cast<std::size_t>(element_count(xs)), DType::UInt8, 41);
    const auto plane = static_cast<std::ptrdiff_t>(element_count(hs));
    const std::vector<std::int32_t> first(x.begin(), x.begin() + plane),
        second(x.begin() + plane, x.end());

    ProgramBuilder b("split_c");
    auto xr = b.activation(DType::UInt8, xs, Layout::LoweredNCHW);
    auto y0 = b.activation(DType::UInt8, hs, Layout::LoweredNCHW);
    auto y1 = b.activation(DType::UInt8, hs, Layout::LoweredNCHW);
    b.kernel(isa::KernelKind::Split, {xr}, {y0, y1}, isa::SplitParams{1});
    auto out = run_dirty(b, {xr}, {pack(x, xr)}, {y0, y1});
    CHECK(unpack(out[0], y0) == first);
    CHECK(unpack(out[1], y1) == second);
    check_padding_zero(out[0], y0);
    check_padding_zero(out[1], y1);
  }

  SECTION("uneven sizes, batch 2, mixed output layouts, negative axis; Concat undoes it") {
    const Shape xs{2, 6, 2, 40}, s0{2, 2, 2, 40}, s1{2, 4, 2, 40};
    const auto x = random_8bit(static_cast<std::size_t>(element_count(xs)), DType::Int8, 42);
    ProgramBuilder b("split_mixed");
    auto xr = b.activation(DType::Int8, xs, Layout::LoweredNCHW);
    auto y0 = b.activation(DType::Int8, s0, Layout::LoweredNCHW);
    auto y1 = b.activation(DType::Int8, s1, Layout::Linear);
    auto back = b.activation(DType::Int8, xs, Layout::LoweredNCHW);
    b.kernel(isa::KernelKind::Split, {xr}, {y0, y1}, isa::SplitParams{-3});
    b.kernel(isa::KernelKind::Concat, {y0, y1}, {back}, isa::ConcatParams{1});
    auto out = run_dirty(b, {xr}, {pack(x, xr)}, {y0, y1, back});
    // Reference: element (n, c, h, w) of output i is x (n, c + start_i, h, w).
    std::vector<std::int32_t> e0, e1;
    for (std::int64_t pos = 0; pos < element_count(xs); ++pos) {
      const auto index = unravel(pos, xs);
      (index[1] < 2 ? e0 : e1).push_back(x[static_cast<std::size_t>(pos)]);
    }
    CHECK(unpack(out[0], y0) == e0);
    CHECK(unpack(out[1], y1) == e1);
    CHECK(unpack(out[2], back) == x);
    check_padding_zero(out[0], y0);
    check_padding_zero(out[2], back);
  }
}

TEST_CASE("Reshape copies between any layouts in row-major order", "[device][kernels][reshape]") {
  const Shape ls{1, 3, 5, 37};
  const auto x = random_8bit(static_cast<std::size_t>(element_count(ls)), DType::UInt8, 51);
  ProgramBuilder b("reshape_any");
  auto flat = b.activation(DType::UInt8, {1, 555}, Layout::Linear);
  auto low = b.activation(DType::UInt8, ls, Layout::LoweredNCHW);               // linear -> lowered
  auto other = b.activation(DType::UInt8, {1, 5, 3, 37}, Layout::LoweredNCHW);  // same W
  auto narrow = b.activation(DType::UInt8, {1, 1, 37, 15}, Layout::LoweredNCHW);  // new W
  auto wide = b.activation(DType::UInt8, {3, 1, 1, 185}, Layout::LoweredNCHW);    // W > 32
  auto column = b.activation(DType::UInt8, {555, 1, 1, 1}, Layout::LoweredNCHW);  // W = 1
  auto back = b.activation(DType::UInt8, {555}, Layout::Linear);
  b.kernel(isa::KernelKind::Reshape, {flat}, {low}, isa::ReshapeParams{});
  b.kernel(isa::KernelKind::Reshape, {low}, {other}, isa::ReshapeParams{});
  b.kernel(isa::KernelKind::Reshape, {other}, {narrow}, isa::ReshapeParams{});
  b.kernel(isa::KernelKind::Reshape, {narrow}, {wide}, isa::ReshapeParams{});
  b.kernel(isa::KernelKind::Reshape, {wide}, {column}, isa::ReshapeParams{});
  b.kernel(isa::KernelKind::Reshape, {column}, {back}, isa::ReshapeParams{});
  auto out =
      run_dirty(b, {flat}, {to_bytes(x, DType::UInt8)}, {low, other, narrow, wide, column, back});
  const std::vector<isa::TensorRef> refs{low, other, narrow, wide, column, back};
  for (std::size_t i = 0; i < refs.size(); ++i) {
    INFO("output " << i << " " << shape_to_string(refs[i].shape));
    CHECK(unpack(out[i], refs[i]) == x);
    check_padding_zero(out[i], refs[i]);
  }
}

TEST_CASE("Data movement works in place (output over its input)", "[device][kernels][reshape]") {
  // The compiler may place an output over its input; kernels read the input before writing.
  const Shape xs{1, 2, 3, 40};
  const auto x = random_8bit(static_cast<std::size_t>(element_count(xs)), DType::UInt8, 52);
  ProgramBuilder b("in_place");
  auto arena = b.activation(DType::UInt8, {4096}, Layout::Linear);  // room for overlapping refs
  const isa::TensorRef xr{arena.address, DType::UInt8, xs, Layout::LoweredNCHW};
  const isa::TensorRef flat{arena.address, DType::UInt8, {240}, Layout::Linear};
  const isa::TensorRef dense{arena.address, DType::UInt8, xs, Layout::Linear};
  const isa::TensorRef relowered{
      arena.address + 8, DType::UInt8, {1, 2, 40, 3}, Layout::LoweredNCHW};
  auto copy = b.activation(DType::UInt8, {240}, Layout::Linear);
  b.kernel(isa::KernelKind::Reshape, {xr}, {flat}, isa::ReshapeParams{});  // compacts in place
  b.kernel(isa::KernelKind::Reshape, {flat}, {copy}, isa::ReshapeParams{});
  // A transpose whose output overlaps its input at an offset.
  b.kernel(isa::KernelKind::Transpose, {dense}, {relowered}, isa::TransposeParams{{0, 1, 3, 2}});
  auto program = b.finish({xr}, {copy, relowered});
  auto s = open_sim();
  auto out = run_program(*s.device, program, {pack(x, xr)});
  CHECK(from_bytes(out[0], DType::UInt8) == x);
  CHECK(unpack(out[1], relowered) == transpose_ref(x, xs, {0, 1, 3, 2}));
  check_padding_zero(out[1], relowered);
}

TEST_CASE("GlobalAveragePool averages H x W and requantizes", "[device][kernels][gap]") {
  struct GapCase {
    DType x_type, y_type;
    Layout x_layout, y_layout;
    Shape xs;
    isa::QuantParam qx, qy;
  };
  const GapCase cases[] = {
      {DType::UInt8,
       DType::UInt8,
       Layout::LoweredNCHW,
       Layout::LoweredNCHW,
       {2, 3, 5, 37},
       {0.05f, 100},
       {0.01f, 20}},
      {DType::Int8,
       DType::Int8,
       Layout::LoweredNCHW,
       Layout::Linear,
       {1, 4, 7, 7},
       {0.1f, -3},
       {0.02f, 5}},
      {DType::UInt8,
       DType::Int8,
       Layout::Linear,
       Layout::LoweredNCHW,
       {1, 5, 3, 45},
       {0.02f, 128},
       {0.01f, 0}},
  };
  for (const GapCase& gc : cases) {
    INFO(shape_to_string(gc.xs) << " " << dtype_name(gc.x_type) << " -> " << dtype_name(gc.y_type));
    const std::int64_t N = gc.xs[0], C = gc.xs[1], HW = gc.xs[2] * gc.xs[3];
    const auto x = random_8bit(static_cast<std::size_t>(element_count(gc.xs)), gc.x_type, 61);
    const auto [qmin, qmax] = isa::quant_range(gc.y_type);
    std::vector<std::int32_t> expected;
    for (std::int64_t nc = 0; nc < N * C; ++nc) {
      std::int32_t sum = 0;
      for (std::int64_t i = 0; i < HW; ++i)
        sum += x[static_cast<std::size_t>(nc * HW + i)] - gc.qx.zero_point;
      const float mult = gc.qx.scale / (gc.qy.scale * static_cast<float>(HW));
      const std::int32_t y = isa::requantize(sum, mult, gc.qy.zero_point, qmin, qmax);
      // The real-valued average, requantized, agrees to within rounding.
      const double mean = gc.qx.scale * static_cast<double>(sum) / static_cast<double>(HW);
      const double real =
          std::clamp(mean / gc.qy.scale + gc.qy.zero_point, double(qmin), double(qmax));
      CHECK(std::abs(real - y) <= 0.5 + 1e-3);
      expected.push_back(y);
    }
    const auto inside = std::count_if(expected.begin(), expected.end(),
                                      [lo = qmin, hi = qmax](std::int32_t v) { return v > lo && v < hi; });
    CHECK(inside == static_cast<std::int64_t>(expected.size()));  // no saturation hides errors

    ProgramBuilder b("gap");
    auto xr = b.activation(gc.x_type, gc.xs, gc.x_layout);
    auto yr = b.activation(gc.y_type, {N, C, 1, 1}, gc.y_layout);
    b.kernel(isa::KernelKind::GlobalAveragePool, {xr}, {yr},
             isa::GlobalAveragePoolParams{gc.qx, gc.qy});
    auto out = run_dirty(b, {xr}, {pack(x, xr)}, {yr});
    CHECK(unpack(out[0], yr) == expected);
    check_padding_zero(out[0], yr);
  }
}

TEST_CASE("Data-movement kernels are timed by the bytes they touch", "[device][sim][timing]") {
  const Shape as{1, 3, 4, 37}, bs{1, 5, 4, 37}, ys{1, 8, 4, 37};
  ProgramBuilder b("timed");
  auto ar = b.activation(DType::UInt8, as, Layout::LoweredNCHW);
  auto br = b.activation(DType::UInt8, bs, Layout::LoweredNCHW);
  auto yr = b.activation(DType::UInt8, ys, Layout::LoweredNCHW);
  auto s0 = b.activation(DType::UInt8, as, Layout::LoweredNCHW);
  auto s1 = b.activation(DType::UInt8, bs, Layout::LoweredNCHW);
  auto tr = b.activation(DType::UInt8, {1, 4, 37, 8}, Layout::Linear);
  auto rq = b.activation(DType::Int8, ys, Layout::LoweredNCHW);
  auto gp = b.activation(DType::UInt8, {1, 8, 1, 1}, Layout::Linear);
  b.kernel(isa::KernelKind::Concat, {ar, br}, {yr}, isa::ConcatParams{1});
  b.kernel(isa::KernelKind::Split, {yr}, {s0, s1}, isa::SplitParams{1});
  b.kernel(isa::KernelKind::Transpose, {yr}, {tr}, isa::TransposeParams{{0, 2, 3, 1}});
  b.kernel(isa::KernelKind::Requantize, {yr}, {rq}, isa::RequantizeParams{{0.1f, 0}, {0.2f, 0}});
  b.kernel(isa::KernelKind::GlobalAveragePool, {yr}, {gp},
           isa::GlobalAveragePoolParams{{0.1f, 0}, {0.1f, 0}});
  const SimConfig config = fast_config();
  ExecutionTiming t;
  run_dirty(b, {ar, br},
            {std::vector<std::byte>(ar.size_bytes()), std::vector<std::byte>(br.size_bytes())},
            {s0, s1, tr, rq, gp}, &t);
  const std::uint64_t row = 64;  // padded_width(37)
  const std::uint64_t touched[] = {(3 + 5 + 8) * 4 * row, (8 + 3 + 5) * 4 * row,
                                   8 * 4 * row + 4 * 37 * 8, 2 * 8 * 4 * row, 8 * 4 * row + 8};
  REQUIRE(t.kernels.size() == 5);
  for (std::size_t k = 0; k < 5; ++k) {
    INFO("kernel " << k);
    CHECK(t.kernels[k].cycles ==
          config.kernel_overhead_cycles +
              static_cast<std::uint64_t>(std::ceil(static_cast<double>(touched[k]) /
                                                   config.sram_bytes_per_cycle_per_pe)));
  }
}
