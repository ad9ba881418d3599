// LowLevelResize in nearest mode (whole upsampling factors, device/sim/kernels/resize.cpp)
// against a reference written here, on random 8-bit and int32 tensors in both layouts: widths
// that are not multiples of 32, factors 1 to 3 along each axis, batch 2, outputs preloaded with
// garbage so every byte (row padding included) must be written.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "data_movement_util.h"

using namespace furiosa;
using namespace furiosa::device;
using namespace furiosa::device::test;

TEST_CASE("Nearest Resize repeats every element scale_h x scale_w times",
          "[device][kernels][resize]") {
  struct Case {
    Shape xs;
    std::int64_t sh, sw;
    DType dtype;
    isa::Layout x_layout, y_layout;
  };
  const auto L = isa::Layout::LoweredNCHW;
  const auto F = isa::Layout::Linear;
  const std::vector<Case> cases{
      {{1, 3, 4, 5}, 2, 2, DType::UInt8, L, L},  // YOLOv8n's neck: 2 x 2
      {{2, 2, 3, 40}, 2, 2, DType::Int8, L, L},  // rows wider than 32 after upsampling
      {{1, 2, 3, 7}, 3, 1, DType::UInt8, L, F},
      {{1, 1, 2, 9}, 1, 3, DType::Int8, F, L},
      {{2, 3, 2, 3}, 2, 3, DType::UInt8, F, F},
      {{1, 2, 3, 5}, 2, 2, DType::Int32, F, F},  // 4-byte elements
  };
  std::uint32_t seed = 70;
  for (const Case& c : cases) {
    const Shape ys{c.xs[0], c.xs[1], c.xs[2] * c.sh, c.xs[3] * c.sw};
    INFO(fmt::format("{} {} -> {} x ({}, {})", dtype_name(c.dtype), shape_to_string(c.xs),
                     shape_to_string(ys), c.sh, c.sw));
    const auto count = static_cast<std::size_t>(element_count(c.xs));
    const auto x = c.dtype == DType::Int32 ? random_values(count, -100000, 100000, seed++)
                                           : random_8bit(count, c.dtype, seed++);
    ProgramBuilder b("resize_nearest");
    auto xr = b.activation(c.dtype, c.xs, c.dtype == DType::Int32 ? F : c.x_layout);
    auto yr = b.activation(c.dtype, ys, c.dtype == DType::Int32 ? F : c.y_layout);
    b.kernel(isa::KernelKind::Resize, {xr}, {yr}, isa::ResizeParams{c.sh, c.sw});
    auto out = run_dirty(b, {xr}, {pack(x, xr)}, {yr});
    std::vector<std::int32_t> expected(static_cast<std::size_t>(element_count(ys)));
    for (std::int64_t pos = 0; pos < element_count(ys); ++pos) {
      auto index = unravel(pos, ys);
      index[2] /= c.sh;
      index[3] /= c.sw;
      expected[static_cast<std::size_t>(pos)] = x[static_cast<std::size_t>(ravel(index, c.xs))];
    }
    CHECK(unpack(out[0], yr) == expected);
    check_padding_zero(out[0], yr);
  }
}
