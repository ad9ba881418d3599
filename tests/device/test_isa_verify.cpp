// isa::verify: the one check between a program and a device (program-file loader, Device::load).
#include "device_test_util.h"
#include "furiosa/device/isa.h"
#include "kernels.h"
#include "test_support.h"

using namespace furiosa;

namespace {

isa::TensorRef ref(std::uint64_t address, Shape shape, DType dtype = DType::UInt8,
                   isa::Layout layout = isa::Layout::Linear) {
  return isa::TensorRef{.address = address, .dtype = dtype, .shape = std::move(shape), .layout = layout};
}

/// A 1x1 convolution of a [1, 4, 2, 2] uint8 input: weights at 0, bias at 64, activations at 128.
isa::Program conv_program() {
  isa::Program p;
  p.name = "conv";
  p.dram_bytes = 256;
  p.constants.resize(96);
  isa::Conv2dParams c;
  c.weight = ref(0, {4, 4, 1, 1}, DType::Int8);
  c.bias = ref(64, {4}, DType::Int32);
  c.w_scale = {0.5f};
  c.w_zero_point = {0};
  isa::Kernel k;
  k.kind = isa::KernelKind::Conv2d;
  k.node_name = "conv_1";
  k.inputs = {ref(128, {1, 4, 2, 2})};
  k.outputs = {ref(192, {1, 4, 2, 2})};
  k.params = c;
  p.kernels = {k};
  p.inputs = k.inputs;
  p.outputs = k.outputs;
  return p;
}

}  // namespace

TEST_CASE("isa::verify accepts a program whose every tensor lies in its region", "[isa][verify]") {
  CHECK(isa::verify(conv_program()).empty());
}

TEST_CASE("isa::verify names the first tensor or field that breaks the region", "[isa][verify]") {
  isa::Program p = conv_program();
  SECTION("an output past the end") {
    p.kernels[0].outputs[0].address = 250;
    CHECK(isa::verify(p) == "kernels[0].outputs[0]: bytes [250, 266) lie outside the program's DRAM region of 256 bytes"
                            " (in LowLevelConv2d 'conv_1')");
  }
  SECTION("a weight past the end") {
    std::get<isa::Conv2dParams>(p.kernels[0].params).weight.address = 255;
    CHECK(isa::verify(p) ==
          "kernels[0].params.weight: bytes [255, 271) lie outside the program's DRAM region of 256 bytes"
          " (in LowLevelConv2d 'conv_1')");
  }
  SECTION("an address that would wrap around") {
    p.inputs[0].address = ~std::uint64_t{0} - 4;
    CHECK_THAT(isa::verify(p), Catch::StartsWith("inputs[0]: bytes ["));
  }
  SECTION("a shape whose size overflows 64 bits") {
    p.kernels[0].inputs[0].shape = {std::int64_t{1} << 40, std::int64_t{1} << 40, 1, 1};
    CHECK(isa::verify(p) == "kernels[0].inputs[0]: its shape [1099511627776, 1099511627776, 1, 1] has a negative dim "
                            "or too many bytes (in LowLevelConv2d 'conv_1')");
  }
  SECTION("constants larger than the region") {
    p.constants.resize(300);
    CHECK(isa::verify(p) == "constants: 300 bytes do not fit the DRAM region of 256 bytes");
  }
  SECTION("a lowered tensor that is not 4-D") {
    p.outputs[0] = ref(192, {4, 4}, DType::UInt8, isa::Layout::LoweredNCHW);
    CHECK(isa::verify(p) == "outputs[0]: a lowered_nchw tensor must be 4-D");
  }
  SECTION("the parameters of another kind") {
    p.kernels[0].params = isa::MaxPoolParams{};
    CHECK(isa::verify(p) == "kernels[0].params: not the parameters of a LowLevelConv2d (in LowLevelConv2d 'conv_1')");
  }
  SECTION("an Add with one input") {
    p.kernels[0].kind = isa::KernelKind::Add;
    p.kernels[0].node_name = "add\n\x1b[2J";
    CHECK(isa::verify(p) == "kernels[0].inputs: expected 2 tensor(s), got 1 (in LowLevelAdd 'add\\x0a\\x1b[2J')");
  }
}

TEST_CASE("the simulator refuses to load a program that breaks its region, naming the tensor", "[isa][verify][sim]") {
  const device::test::SimSession sim = device::test::open_sim();
  const auto& dev = sim.device;
  CHECK_NOTHROW(dev->load(std::make_shared<const isa::Program>(conv_program())));
  isa::Program bad = conv_program();
  bad.kernels[0].outputs[0].address = 250;
  try {
    dev->load(std::make_shared<const isa::Program>(bad));
    FAIL("loaded a program that writes past its region");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::DeviceFault);
    CHECK(e.message() == "npu0pe0: program 'conv' is invalid: kernels[0].outputs[0]: bytes [250, 266) lie outside "
                         "the program's DRAM region of 256 bytes (in LowLevelConv2d 'conv_1')");
  }
}

TEST_CASE("isa::verify_kernel gives verify's message for one kernel", "[isa][verify]") {
  isa::Program p = conv_program();
  CHECK(isa::verify_kernel(p.kernels[0], p.dram_bytes).empty());
  p.kernels[0].outputs[0].address = 250;
  CHECK(isa::verify_kernel(p.kernels[0], p.dram_bytes) ==
        "kernel.outputs[0]: bytes [250, 266) lie outside the program's DRAM region of 256 bytes"
        " (in LowLevelConv2d 'conv_1')");
  CHECK(isa::verify_kernel(p.kernels[0], p.dram_bytes, "kernels[0]") == isa::verify(p));
  // A larger region takes it.
  CHECK(isa::verify_kernel(p.kernels[0], 512).empty());
}

TEST_CASE("kernels from no verified program are checked as isa::verify checks them when they run",
          "[isa][verify][sim]") {
  const isa::Program good = conv_program();
  isa::Program bad = conv_program();
  bad.kernels[0].outputs[0].address = 250;
  const std::string expected =
      "kernel.outputs[0]: bytes [250, 266) lie outside the program's DRAM region of 256 bytes"
      " (in LowLevelConv2d 'conv_1')";
  std::vector<std::byte> region(256);
  const auto fault_of = [&](auto&& run) -> std::string {
    try {
      run();
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::DeviceFault);
      return e.message();
    }
    return "(no fault)";
  };
  // Without a prepared program.
  CHECK(fault_of([&] { device::sim::run_kernel(bad.kernels[0], region); }) == expected);
  CHECK_NOTHROW(device::sim::run_kernel(good.kernels[0], region));
  // A prepared program that fails verify: nothing is taken as verified.
  const auto bad_prepared = device::sim::prepare_program(bad);
  CHECK(fault_of([&] { device::sim::run_kernel(bad.kernels[0], region, bad_prepared.get(), 0); }) ==
        expected);
  // A verified program's preparation does not vouch for another kernel, nor for another region.
  const auto good_prepared = device::sim::prepare_program(good);
  CHECK_NOTHROW(device::sim::run_kernel(good.kernels[0], region, good_prepared.get(), 0));
  CHECK(fault_of([&] {
          device::sim::run_kernel(bad.kernels[0], region, good_prepared.get(), 0);
        }) == expected);
  std::vector<std::byte> small(200);
  CHECK_THAT(
      fault_of([&] { device::sim::run_kernel(good.kernels[0], small, good_prepared.get(), 0); }),
      Catch::Contains("lie outside the program's DRAM region of 200 bytes"));
}
