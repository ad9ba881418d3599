// Malformed layout-agnostic kernels (Requantize, Concat, Transpose, Split, Reshape, Slice, Pad,
// ...): each is refused in one line naming the kernel and what is wrong, at load by isa::verify
// or on the fence with DeviceFault, and the device keeps working. Split from
// test_data_movement.cpp, which tests the same kernels on well-formed programs.
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

/// Runs a one-kernel program and returns the DeviceFault message it fails with: at load when
/// isa::verify refuses it (a malformed program never reaches a kernel), else on its fence.
std::string fault_message(ProgramBuilder& b, const std::vector<isa::TensorRef>& inputs,
                          const std::vector<isa::TensorRef>& outputs) {
  auto program = b.finish(inputs, outputs);
  auto s = open_sim();
  std::shared_ptr<LoadedProgram> loaded;
  try {
    loaded = s.device->load(program);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::DeviceFault);
    return e.message();
  }
  std::vector<std::vector<std::byte>> in, out;
  for (const auto& ref : inputs) in.emplace_back(ref.size_bytes());
  for (const auto& ref : outputs) out.emplace_back(ref.size_bytes());
  std::vector<std::span<const std::byte>> in_spans(in.begin(), in.end());
  std::vector<std::span<std::byte>> out_spans(out.begin(), out.end());
  auto fence = s.device->submit(*loaded, in_spans, out_spans);
  REQUIRE(fence->wait_for(std::chrono::seconds(120)));
  Error e = error_of(fence->error());
  CHECK(e.code() == ErrorCode::DeviceFault);
  // The device keeps working after the fault.
  CHECK_NOTHROW(s.device->load(program));
  return e.message();
}

}  // namespace

TEST_CASE("Malformed data-movement kernels fail the fence with DeviceFault",
          "[device][kernels][faults]") {
  using K = isa::KernelKind;
  struct BadCase {
    const char* what;
    K kind;
    std::vector<isa::TensorRef> (*inputs)(ProgramBuilder&);
    std::vector<isa::TensorRef> (*outputs)(ProgramBuilder&);
    decltype(isa::Kernel::params) params;
    const char* expected;  ///< part of the message
  };
  const BadCase cases[] = {
      {"concat extents do not add up", K::Concat,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {1, 3, 2, 40}, Layout::LoweredNCHW),
                            b.activation(DType::UInt8, {1, 5, 2, 40}, Layout::LoweredNCHW)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {1, 7, 2, 40}, Layout::LoweredNCHW)};
       },
       isa::ConcatParams{1}, "sum to 8"},
      {"concat dims other than the axis differ", K::Concat,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3}, Layout::Linear),
                            b.activation(DType::UInt8, {2, 4}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {4, 3}, Layout::Linear)};
       },
       isa::ConcatParams{0}, "every dim but axis 0"},
      {"concat dtypes differ", K::Concat,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3}, Layout::Linear),
                            b.activation(DType::Int8, {2, 3}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {4, 3}, Layout::Linear)};
       },
       isa::ConcatParams{0}, "dtype"},
      {"concat axis out of range", K::Concat,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3}, Layout::Linear)};
       },
       isa::ConcatParams{2}, "axis 2 is out of range"},
      {"split extents do not add up", K::Split,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {1, 6, 2, 40}, Layout::LoweredNCHW)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {1, 3, 2, 40}, Layout::LoweredNCHW),
                            b.activation(DType::UInt8, {1, 2, 2, 40}, Layout::LoweredNCHW)};
       },
       isa::SplitParams{1}, "sum to 5"},
      {"split outputs overlap", K::Split,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {4, 8}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         auto y = b.activation(DType::UInt8, {2, 8}, Layout::Linear);
         return std::vector{y, y};
       },
       isa::SplitParams{0}, "overlaps"},
      {"transpose perm is not a permutation", K::Transpose,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3, 4}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {3, 3, 4}, Layout::Linear)};
       },
       isa::TransposeParams{{1, 1, 2}}, "not a permutation"},
      {"transpose output shape is wrong", K::Transpose,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3, 4}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3, 4}, Layout::Linear)};
       },
       isa::TransposeParams{{0, 2, 1}}, "must have shape [2, 4, 3]"},
      {"transpose perm of the wrong rank", K::Transpose,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3, 4}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {3, 2, 4}, Layout::Linear)};
       },
       isa::TransposeParams{{1, 0}}, "kernels[0].params.perm: expected 3 axes, got 2"},
      {"reshape element counts differ", K::Reshape,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {1, 3, 2, 40}, Layout::LoweredNCHW)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {1, 239}, Layout::Linear)};
       },
       isa::ReshapeParams{}, "different element counts"},
      {"requantize shapes differ", K::Requantize,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::Int8, {3, 2}, Layout::Linear)};
       },
       isa::RequantizeParams{{0.1f, 0}, {0.1f, 0}}, "must have the shape"},
      {"requantize of int32", K::Requantize,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::Int32, {2, 3}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::Int8, {2, 3}, Layout::Linear)};
       },
       isa::RequantizeParams{{0.1f, 0}, {0.1f, 0}}, "must be uint8 or int8"},
      {"requantize with a zero scale", K::Requantize,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::Int8, {2, 3}, Layout::Linear)};
       },
       isa::RequantizeParams{{0.1f, 0}, {0.0f, 0}}, "y_scale"},
      {"global average pool output shape", K::GlobalAveragePool,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {1, 3, 2, 40}, Layout::LoweredNCHW)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {1, 3}, Layout::Linear)};
       },
       isa::GlobalAveragePoolParams{{0.1f, 0}, {0.1f, 0}}, "must have shape [1, 3, 1, 1]"},
      {"global average pool zero point out of range", K::GlobalAveragePool,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {1, 3, 2, 40}, Layout::LoweredNCHW)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::Int8, {1, 3, 1, 1}, Layout::LoweredNCHW)};
       },
       isa::GlobalAveragePoolParams{{0.1f, 0}, {0.1f, 128}}, "y_zero_point 128"},
      {"slice reads past the input", K::Slice,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {4, 9}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 4}, Layout::Linear)};
       },
       isa::SliceParams{{1, 2}, {2, 3}}, "dim 1: 4 elements from 2 by step 3"},
      {"slice with a zero step", K::Slice,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {4, 9}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 4}, Layout::Linear)};
       },
       isa::SliceParams{{1, 2}, {1, 0}}, "steps[1] is 0"},
      {"pad value outside int8", K::Pad,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::Int8, {2, 3}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::Int8, {2, 5}, Layout::Linear)};
       },
       isa::PadParams{{0, 1}, isa::PadParams::Mode::Constant, 200}, "constant value 200"},
      {"pad begins of the wrong rank", K::Pad,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 5}, Layout::Linear)};
       },
       isa::PadParams{{1}, isa::PadParams::Mode::Edge, 0}, "begins has 1 entries"},
      {"mul with a zero output scale", K::Mul,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3}, Layout::Linear),
                            b.activation(DType::UInt8, {2, 3}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3}, Layout::Linear)};
       },
       isa::MulParams{{0.1f, 0}, {0.1f, 0}, {0.0f, 0}}, "y_scale"},
      {"sub operand does not broadcast", K::Sub,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3}, Layout::Linear),
                            b.activation(DType::UInt8, {2, 2}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {2, 3}, Layout::Linear)};
       },
       isa::SubParams{{0.1f, 0}, {0.1f, 0}, {0.1f, 0}}, "does not broadcast"},
      {"parameters of another kind", K::Split,
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {4}, Layout::Linear)};
       },
       [](ProgramBuilder& b) {
         return std::vector{b.activation(DType::UInt8, {4}, Layout::Linear)};
       },
       isa::ConcatParams{0}, "not the parameters of a"},
  };
  for (const BadCase& bc : cases) {
    INFO(bc.what);
    ProgramBuilder b("bad");
    const auto inputs = bc.inputs(b);
    const auto outputs = bc.outputs(b);
    b.kernel(bc.kind, inputs, outputs, bc.params, "bad_node");
    const std::string message = fault_message(b, inputs, outputs);
    CHECK_THAT(message, Catch::Contains(std::string(isa::kernel_name(bc.kind))) &&
                            Catch::Contains("bad_node") && Catch::Contains(bc.expected));
  }

  // A tensor outside the region fails the same way.
  ProgramBuilder b("outside");
  auto x = b.activation(DType::UInt8, {1, 3, 2, 40}, Layout::LoweredNCHW);
  auto y = b.activation(DType::UInt8, {1, 3, 2, 40}, Layout::LoweredNCHW);
  isa::TensorRef beyond = x;
  beyond.address = 1 << 20;
  b.kernel(K::Concat, {x, beyond}, {y}, isa::ConcatParams{1}, "far_concat");
  CHECK_THAT(fault_message(b, {x}, {y}), Catch::Contains("LowLevelConcat") &&
                                             Catch::Contains("outside the program's DRAM region"));
}
