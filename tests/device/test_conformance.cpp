// The backend conformance suite: the same Device contract (device/device.h, driver.h) checked on
// every built-in backend, in the manner of IREE's HAL CTS. The simulator runs every check; the
// pcie backend runs on a fake /dev + sysfs tree (fake_pcie_tree.h) and, where a check needs a
// real card (open, memory, submit), prints why it stops there (a WARN line in the test log).
#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "device_test_util.h"
#include "fake_pcie_tree.h"
#include "furiosa/device/pcie.h"

using namespace furiosa;
using namespace furiosa::device;
using furiosa::device::pcie_test::FakeTree;
using namespace furiosa::device::test;

namespace {

/// One backend as the suite runs it: a fresh driver per check.
struct BackendUnderTest {
  std::string name;
  std::function<std::unique_ptr<Driver>()> make;
};

/// Every built-in backend, each on a machine the test controls.
std::vector<BackendUnderTest> backends_under_test(const FakeTree& tree) {
  return {{"sim", [] { return create_sim_driver(fast_config()); }},
          {"pcie", [&tree] { return create_pcie_driver(tree.config); }}};
}

/// Opens `file`, or returns null after printing why when the backend drives hardware that this
/// machine does not have (its open() refuses a listed device file with DeviceNotFound).
std::unique_ptr<Device> open_or_explain(Driver& driver, const DeviceFile& file) {
  try {
    return driver.open(file);
  } catch (const Error& e) {
    REQUIRE(driver.is_hardware());  // a reference backend must open every listed file
    CHECK(e.code() == ErrorCode::DeviceNotFound);
    CHECK(e.device_file() == file.name());
    WARN(driver.name() << ": open, memory, load and submit checks need a real Warboy card: "
                       << e.message());
    return nullptr;
  }
}

/// The first single-PE and the fused device file of the first card with two PEs.
std::pair<DeviceFile, DeviceFile> two_files(Driver& driver) {
  for (const CardInfo& card : driver.enumerate()) {
    if (card.pe_count >= 2) return {DeviceFile{card.index, 0, 0}, DeviceFile{card.index, 0, 1}};
  }
  FAIL(driver.name() << ": no card with two PEs");
  return {};
}

}  // namespace

TEST_CASE("conformance: the suite covers every built-in backend", "[device][conformance]") {
  FakeTree tree;
  std::vector<std::string> covered;
  for (const auto& b : backends_under_test(tree)) covered.push_back(b.name);
  std::vector<std::string> built_in = builtin_backend_names();
  std::sort(covered.begin(), covered.end());
  std::sort(built_in.begin(), built_in.end());
  CHECK(covered == built_in);
  std::vector<std::string> registered = builtin_registry().names();
  CHECK(registered == built_in);
}

TEST_CASE("conformance: enumerate lists cards, PEs and device files", "[device][conformance]") {
  FakeTree tree;
  for (const auto& backend : backends_under_test(tree)) {
    DYNAMIC_SECTION(backend.name) {
      auto driver = backend.make();
      CHECK(driver->name() == backend.name);
      const std::vector<CardInfo> cards = driver->enumerate();
      REQUIRE_FALSE(cards.empty());
      for (const CardInfo& card : cards) {
        CHECK(card.arch == "warboy");
        CHECK(card.pe_busy.size() == static_cast<std::size_t>(card.pe_count));
        for (const DeviceFile& file : card.device_files) {
          CHECK(file.card == card.index);
          CHECK(file.first_pe >= 0);
          CHECK(file.last_pe < card.pe_count);
          CHECK(DeviceFile::parse(file.name()) == file);
        }
      }
    }
  }
}

TEST_CASE("conformance: a missing device file is DeviceNotFound naming it", "[device][conformance]") {
  FakeTree tree;
  for (const auto& backend : backends_under_test(tree)) {
    DYNAMIC_SECTION(backend.name) {
      auto driver = backend.make();
      const DeviceFile missing{97, 0, 0};
      try {
        driver->open(missing);
        FAIL("opened a device file that does not exist");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::DeviceNotFound);
        CHECK(e.device_file() == "npu97pe0");
        CHECK_THAT(e.message(), Catch::Contains("npu97pe0"));
      }
    }
  }
}

TEST_CASE("conformance: open is exclusive and released on close", "[device][conformance]") {
  FakeTree tree;
  for (const auto& backend : backends_under_test(tree)) {
    DYNAMIC_SECTION(backend.name) {
      auto driver = backend.make();
      const auto [single, fused] = two_files(*driver);
      auto device = open_or_explain(*driver, fused);
      if (!device) continue;
      CHECK(device->file() == fused);
      try {
        driver->open(single);
        FAIL("an overlapping open succeeded");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::DeviceBusy);
        CHECK(e.device_file() == single.name());
        CHECK_THAT(e.message(), Catch::Contains(single.name()) && Catch::Contains(fused.name()));
      }
      device.reset();
      auto again = driver->open(single);
      CHECK(again->file() == single);
    }
  }
}

TEST_CASE("conformance: DRAM round trip and out-of-range DMA", "[device][conformance]") {
  FakeTree tree;
  for (const auto& backend : backends_under_test(tree)) {
    DYNAMIC_SECTION(backend.name) {
      auto driver = backend.make();
      auto device = open_or_explain(*driver, two_files(*driver).first);
      if (!device) continue;
      const DeviceBuffer buffer = device->allocate(4096);
      std::vector<std::byte> data(4096);
      for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 13 + 5);
      device->write(buffer.address, data);
      std::vector<std::byte> back(4096);
      device->read(buffer.address, back);
      CHECK(back == data);
      try {
        device->write(buffer.address + 4000, data);
        FAIL("a write past the buffer succeeded");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::DeviceFault);
      }
      device->release(buffer);
    }
  }
}

TEST_CASE("conformance: load, submit, fence with timing and callbacks, faults fail the fence",
          "[device][conformance]") {
  FakeTree tree;
  for (const auto& backend : backends_under_test(tree)) {
    DYNAMIC_SECTION(backend.name) {
      auto driver = backend.make();
      auto device = open_or_explain(*driver, two_files(*driver).first);
      if (!device) continue;
      const AddProgram p = add_program();
      auto loaded = device->load(p.program);
      const auto x = random_values(240, 0, 255, 21);
      const auto input = lower(x, p.shape, DType::UInt8);
      std::vector<std::byte> out(p.program->outputs[0].size_bytes());
      std::atomic<int> before{0}, after{0};
      auto fence = device->submit(*loaded, {input}, {out});
      fence->on_signal([&] { ++before; });
      REQUIRE(fence->wait_for(std::chrono::seconds(120)));
      fence->on_signal([&] { ++after; });  // registered after the signal: runs at once
      CHECK_FALSE(fence->error());
      CHECK(before.load() == 1);
      CHECK(after.load() == 1);
      CHECK(from_bytes(out, DType::UInt8) == add_expected(p, x));
      const ExecutionTiming& t = fence->timing();
      CHECK(t.total_ns() >= t.run_ns());
      CHECK(t.run_ns() >= 0);
      CHECK(t.kernels.size() == p.program->kernels.size());
      CHECK(device->counters().executions >= 1);

      // Wrong buffer sizes: refused at submit, nothing queued.
      std::vector<std::byte> short_input(input.size() - 1);
      try {
        device->submit(*loaded, {short_input}, {out});
        FAIL("a submit with a short input was accepted");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::InvalidInput);
      }

      // A kernel whose operands do not fit each other (inside the region, so isa::verify lets it
      // load) fails its fence with a DeviceFault that names the device; the callback still runs
      // exactly once and the device keeps working.
      ProgramBuilder b("faulty");
      isa::TensorRef in = b.activation(DType::UInt8, p.shape, isa::Layout::LoweredNCHW);
      isa::TensorRef y = b.activation(DType::UInt8, p.shape, isa::Layout::LoweredNCHW);
      isa::TensorRef other = b.activation(DType::UInt8, {1, 1, 2, 8}, isa::Layout::LoweredNCHW);
      b.kernel(isa::KernelKind::Add, {in, other}, {y}, isa::AddParams{}, "broken_add");
      auto faulty = device->load(b.finish({in}, {y}));
      std::atomic<int> failed_callbacks{0};
      std::vector<std::byte> faulty_out(y.size_bytes());
      auto failing = device->submit(*faulty, {input}, {faulty_out});
      failing->on_signal([&] { ++failed_callbacks; });
      REQUIRE(failing->wait_for(std::chrono::seconds(120)));
      const Error e = error_of(failing->error());
      CHECK(e.code() == ErrorCode::DeviceFault);
      CHECK(e.device_file() == device->file().name());
      CHECK(failed_callbacks.load() == 1);
      const auto out2 = run_program(*device, p.program, {input});
      CHECK(from_bytes(out2[0], DType::UInt8) == add_expected(p, x));
    }
  }
}
