// Error, Tensor, ISA helpers, DeviceFile, Fence and the driver registry.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <thread>

#include "device_test_util.h"
#include "test_support.h"

using namespace furiosa;
using namespace furiosa::device;

TEST_CASE("Error: code names and what()", "[device][error]") {
  CHECK(to_string(ErrorCode::DeviceBusy) == "DeviceBusy");
  CHECK(to_string(ErrorCode::InvalidInput) == "InvalidInput");
  CHECK(to_string(ErrorCode::QueueWaitTimeout) == "QueueWaitTimeout");
  CHECK(to_string(ErrorCode::Internal) == "Internal");
  Error e(ErrorCode::DeviceFault, "npu0pe0: boom");
  CHECK(std::string(e.what()) == "DeviceFault: npu0pe0: boom");
  CHECK(e.message() == "npu0pe0: boom");
  CHECK(e.code() == ErrorCode::DeviceFault);
}

TEST_CASE("Tensor helpers", "[device][tensor]") {
  CHECK(dtype_size(DType::Float32) == 4);
  CHECK(dtype_size(DType::UInt8) == 1);
  CHECK(dtype_size(DType::Int64) == 8);
  CHECK(dtype_name(DType::Int8) == "int8");
  CHECK(dtype_name(DType::Float32) == "float32");
  CHECK(element_count({}) == 1);
  CHECK(element_count({1, 1, 28, 28}) == 784);
  CHECK(element_count({3, 0, 2}) == 0);
  CHECK(shape_to_string({1, 1, 28, 28}) == "[1, 1, 28, 28]");
  CHECK(shape_to_string({}) == "[]");
  CHECK(contiguous_strides({1, 1, 28, 28}) == std::vector<std::int64_t>{784, 784, 28, 1});
  CHECK(contiguous_strides({}).empty());

  Tensor zero(DType::Int32, {2, 3});
  CHECK(zero.size_bytes() == 24);
  CHECK(zero.elements() == 6);
  for (std::int32_t v : zero.as<std::int32_t>()) CHECK(v == 0);

  Tensor owned(DType::UInt8, {2, 2}, std::vector<std::byte>(4, std::byte{7}));
  CHECK(owned.as<std::uint8_t>()[3] == 7);

  try {
    Tensor bad(DType::Float32, {2, 2}, std::vector<std::byte>(15));
    FAIL("size mismatch accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK_THAT(e.message(), Catch::Contains("16") && Catch::Contains("15"));
  }
}

TEST_CASE("ISA helpers", "[device][isa]") {
  CHECK(isa::layout_name(isa::Layout::Linear) == "linear");
  CHECK(isa::layout_name(isa::Layout::LoweredNCHW) == "lowered_nchw");
  CHECK(isa::padded_width(28) == 32);
  CHECK(isa::padded_width(33) == 64);
  CHECK(isa::padded_width(64) == 64);

  isa::TensorRef lowered{0, DType::UInt8, {2, 3, 5, 37}, isa::Layout::LoweredNCHW};
  CHECK(lowered.size_bytes() == 2 * 3 * 5 * 64);
  isa::TensorRef linear{0, DType::Int32, {2, 3, 5, 37}, isa::Layout::Linear};
  CHECK(linear.size_bytes() == 2 * 3 * 5 * 37 * 4);
  isa::TensorRef bad_rank{0, DType::UInt8, {3, 5, 37}, isa::Layout::LoweredNCHW};
  CHECK(bad_rank.size_bytes() == 0);

  CHECK(isa::quant_range(DType::UInt8) == std::array<std::int32_t, 2>{0, 255});
  CHECK(isa::quant_range(DType::Int8) == std::array<std::int32_t, 2>{-128, 127});
  CHECK_THROWS_AS(isa::quant_range(DType::Int32), Error);

  CHECK(isa::kernel_name(isa::KernelKind::Conv2d) == "LowLevelConv2d");
  CHECK(isa::kernel_name(isa::KernelKind::DepthwiseConv2d) == "LowLevelDepthwiseConv2d");
  CHECK(isa::kernel_name(isa::KernelKind::MaxPool) == "LowLevelMaxPool");
  CHECK(isa::kernel_name(isa::KernelKind::MatMul) == "LowLevelMatMul");
  CHECK(isa::kernel_name(isa::KernelKind::Add) == "LowLevelAdd");
  CHECK(isa::kernel_name(isa::KernelKind::Reshape) == "LowLevelReshape");
  CHECK(isa::kernel_name(isa::KernelKind::Requantize) == "LowLevelRequantize");
  CHECK(isa::kernel_name(isa::KernelKind::Concat) == "LowLevelConcat");
  CHECK(isa::kernel_name(isa::KernelKind::Transpose) == "LowLevelTranspose");
  CHECK(isa::kernel_name(isa::KernelKind::Split) == "LowLevelSplit");
  CHECK(isa::kernel_name(isa::KernelKind::GlobalAveragePool) == "LowLevelGlobalAveragePool");

  isa::Kernel conv;
  conv.kind = isa::KernelKind::Conv2d;
  conv.inputs = {{0, DType::UInt8, {2, 8, 10, 10}, isa::Layout::LoweredNCHW}};
  conv.outputs = {{0, DType::UInt8, {2, 6, 5, 4}, isa::Layout::LoweredNCHW}};
  isa::Conv2dParams cp;
  cp.weight = {0, DType::Int8, {6, 4, 3, 2}, isa::Layout::Linear};
  cp.group = 2;
  conv.params = cp;
  CHECK(isa::kernel_macs(conv) == 2u * 6 * 5 * 4 * (8 / 2) * 3 * 2);

  isa::Kernel mm;
  mm.kind = isa::KernelKind::MatMul;
  mm.inputs = {{0, DType::UInt8, {3, 2, 5, 7}, isa::Layout::Linear}};
  mm.outputs = {{0, DType::UInt8, {3, 2, 5, 9}, isa::Layout::Linear}};
  isa::MatMulParams mp;
  mp.b = {0, DType::Int8, {7, 9}, isa::Layout::Linear};
  mm.params = mp;
  CHECK(isa::kernel_macs(mm) == 6u * 5 * 9 * 7);

  isa::Kernel pool;
  pool.kind = isa::KernelKind::MaxPool;
  pool.params = isa::MaxPoolParams{};
  CHECK(isa::kernel_macs(pool) == 0);

  // GlobalAveragePool counts one accumulation per input element; data movement counts none.
  isa::Kernel gap;
  gap.kind = isa::KernelKind::GlobalAveragePool;
  gap.inputs = {{0, DType::UInt8, {2, 8, 7, 9}, isa::Layout::LoweredNCHW}};
  gap.outputs = {{0, DType::UInt8, {2, 8, 1, 1}, isa::Layout::Linear}};
  gap.params = isa::GlobalAveragePoolParams{};
  CHECK(isa::kernel_macs(gap) == 2u * 8 * 7 * 9);
  isa::Kernel move;
  move.inputs = gap.inputs;
  move.outputs = gap.inputs;
  for (auto kind : {isa::KernelKind::Reshape, isa::KernelKind::Requantize, isa::KernelKind::Concat,
                    isa::KernelKind::Transpose, isa::KernelKind::Split}) {
    move.kind = kind;
    CHECK(isa::kernel_macs(move) == 0);
  }
}

TEST_CASE("requantize rounds half to even and saturates", "[device][isa]") {
  CHECK(isa::requantize(5, 0.5f, 0, -128, 127) == 2);    // 2.5 -> 2
  CHECK(isa::requantize(7, 0.5f, 0, -128, 127) == 4);    // 3.5 -> 4
  CHECK(isa::requantize(-5, 0.5f, 0, -128, 127) == -2);  // -2.5 -> -2
  CHECK(isa::requantize(-7, 0.5f, 0, -128, 127) == -4);  // -3.5 -> -4
  CHECK(isa::requantize(3, 0.5f, 10, 0, 255) == 12);     // 1.5 -> 2, + zp
  CHECK(isa::requantize(1000, 1.0f, 0, -128, 127) == 127);
  CHECK(isa::requantize(-1000, 1.0f, 0, -128, 127) == -128);
  CHECK(isa::requantize(-10, 1.0f, 5, 0, 255) == 0);
  CHECK(isa::requantize(300, 1.0f, 0, 0, 255) == 255);
}

TEST_CASE("DeviceFile parse and name", "[device][file]") {
  for (const char* text : {"npu0pe0", "npu0pe1", "npu0pe0-1", "npu3pe2-5", "npu12pe0"}) {
    CHECK(DeviceFile::parse(text).name() == text);
  }
  CHECK(DeviceFile::parse("/dev/npu0pe1") == DeviceFile{0, 1, 1});
  CHECK(DeviceFile::parse("npu2pe0-1") == DeviceFile{2, 0, 1});
  CHECK(DeviceFile::parse("npu2pe0-1").pe_count() == 2);
  CHECK(DeviceFile{1, 1, 1}.name() == "npu1pe1");

  for (const char* text : {"npu0pe1-0", "npux", "npu0", "npu0pe", "npu0pe0-", "npu0pe0-0",
                           "npu0pe0x", " npu0pe0", "npu-1pe0", "/dev/", "", "pe0", "npu0pe+1",
                           "/dev/npu0pe0-1-2", "npu:0:0", "warboy(2)*1", "npu0pe9999999"}) {
    INFO(text);
    try {
      DeviceFile::parse(text);
      FAIL("accepted " << text);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK_THAT(e.message(), Catch::Contains("'" + std::string(text) + "'"));
    }
  }
}

TEST_CASE("DeviceFile overlaps", "[device][file]") {
  const DeviceFile pe0{0, 0, 0}, pe1{0, 1, 1}, fused{0, 0, 1}, other{1, 0, 0};
  CHECK(pe0.overlaps(fused));
  CHECK(fused.overlaps(pe1));
  CHECK(pe0.overlaps(pe0));
  CHECK_FALSE(pe0.overlaps(pe1));
  CHECK_FALSE(pe0.overlaps(other));
}

TEST_CASE("Fence: first signal wins, waits time out", "[device][fence]") {
  Fence fence;
  CHECK_FALSE(fence.signalled());
  CHECK_FALSE(fence.wait_for(std::chrono::milliseconds(1)));
  ExecutionTiming timing;
  timing.execution_index = 7;
  std::thread signaller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    fence.signal(timing);
  });
  fence.wait();
  signaller.join();
  CHECK(fence.signalled());
  CHECK(fence.timing().execution_index == 7);
  fence.fail(std::make_exception_ptr(Error(ErrorCode::DeviceFault, "late")));
  CHECK_FALSE(fence.error());
  CHECK(fence.wait_for(std::chrono::nanoseconds::max()));

  Fence failed;
  failed.fail(std::make_exception_ptr(Error(ErrorCode::DeviceFault, "first")));
  failed.signal({});
  CHECK(device::test::error_of(failed.error()).message() == "first");
}

namespace {

// A driver that only counts how often it was created.
class NullDriver final : public Driver {
 public:
  explicit NullDriver(std::string name) : name_(std::move(name)) {}
  std::string_view name() const noexcept override { return name_; }
  std::vector<CardInfo> enumerate() const override { return {}; }
  std::unique_ptr<Device> open(const DeviceFile& file) override {
    throw Error(ErrorCode::DeviceNotFound, file.name());
  }

 private:
  std::string name_;
};

}  // namespace

TEST_CASE("DriverRegistry creates each driver once", "[device][registry]") {
  DriverRegistry registry;
  std::atomic<int> created{0};
  registry.register_factory("zeta", [&] {
    ++created;
    return std::make_unique<NullDriver>("zeta");
  });
  registry.register_factory("alpha", [] { return std::make_unique<NullDriver>("alpha"); });
  CHECK(registry.names() == std::vector<std::string>{"alpha", "zeta"});
  CHECK(created == 0);  // lazily

  std::vector<std::thread> threads;
  std::vector<Driver*> seen(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { seen[static_cast<std::size_t>(t)] = &registry.driver("zeta"); });
  }
  for (auto& th : threads) th.join();
  CHECK(created == 1);
  for (Driver* d : seen) CHECK(d == seen[0]);
  CHECK(registry.driver("zeta").name() == "zeta");

  try {
    registry.driver("pcie");
    FAIL("unknown driver accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::DeviceNotFound);
    CHECK_THAT(e.message(),
               Catch::Contains("pcie") && Catch::Contains("alpha") && Catch::Contains("zeta"));
  }
}

TEST_CASE("Builtin registry has the sim driver", "[device][registry]") {
  DriverRegistry& registry = builtin_registry();
  CHECK(&registry == &builtin_registry());
  const auto names = registry.names();
  CHECK(std::find(names.begin(), names.end(), "sim") != names.end());
  Driver& sim = registry.driver("sim");
  CHECK(sim.name() == "sim");
  CHECK(&sim == &registry.driver("sim"));
  CHECK_FALSE(sim.enumerate().empty());
}

TEST_CASE("Sim config from the environment", "[device][registry]") {
  furiosa::test::ScopedEnv cards("FURIOSA_SIM_CARDS", "3");
  furiosa::test::ScopedEnv pes("FURIOSA_SIM_PES_PER_CARD", "4");
  SimConfig config = sim_config_from_environment();
  CHECK(config.cards == 3);
  CHECK(config.pes_per_card == 4);

  cards.set("");
  pes.set(std::nullopt);
  config = sim_config_from_environment();
  CHECK(config.cards == SimConfig{}.cards);
  CHECK(config.pes_per_card == SimConfig{}.pes_per_card);

  pes.set("two");
  try {
    sim_config_from_environment();
    FAIL("bad value accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.message(), Catch::Contains("FURIOSA_SIM_PES_PER_CARD"));
  }
}
