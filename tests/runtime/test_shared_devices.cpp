// Devices shared between sessions of one process (SessionOptions::share_devices): two real
// models on one simulated PE answer exactly as on PEs of their own, the PE stays exclusive to
// everyone who does not share it, it closes with its last session, and a hang on the shared PE is
// recovered for both models. Nothing here depends on timing: watchdog limits are shortened through
// device_timeout and only bound the test.
#include <fmt/format.h>

#include <atomic>
#include <optional>
#include <thread>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/core/error.h"
#include "furiosa/device/sim.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"

using namespace furiosa;
using namespace std::chrono_literals;

namespace {

std::filesystem::path mnist() {
  return test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
}
std::filesystem::path mobilenet() {
  return test::shared_model("onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx");
}

Tensor digit(int set) {
  return compiler::load_tensor_pb(test::shared_model("onnx-zoo/mnist-12-int8") /
                                  fmt::format("test_data_set_{}/input_0.pb", set));
}

Tensor image() {
  return compiler::load_tensor_pb(test::shared_model("onnx-zoo/mobilenetv2-12-int8") /
                                  "test_data_set_0/input_0.pb");
}

std::vector<std::byte> bytes_of(const std::vector<Tensor>& outputs) {
  std::vector<std::byte> out;
  for (const Tensor& t : outputs) out.insert(out.end(), t.bytes().begin(), t.bytes().end());
  return out;
}

runtime::RunnerOptions on(device::Driver& driver, const std::string& device, bool share) {
  runtime::RunnerOptions o;
  o.driver = &driver;
  o.device = device;
  o.share_devices = share;
  return o;
}

/// The error code creating a runner fails with; nullopt when it succeeds.
std::optional<ErrorCode> code_of_create(const std::filesystem::path& model,
                                        const runtime::RunnerOptions& o) {
  try {
    auto r = runtime::create_runner(model, o);
    return std::nullopt;
  } catch (const Error& e) {
    return e.code();
  }
}

}  // namespace

TEST_CASE("two models share one PE and answer as on PEs of their own",
          "[runtime][shared_devices]") {
  auto driver = device::create_sim_driver();
  std::vector<std::vector<std::byte>> digits_expected;
  std::vector<std::byte> image_expected;
  {
    auto alone = runtime::create_runner(mnist(), on(*driver, "npu0pe1", false));
    for (int i = 0; i < 4; ++i) digits_expected.push_back(bytes_of(alone->run({digit(i)})));
  }
  {
    auto alone = runtime::create_runner(mobilenet(), on(*driver, "npu0pe1", false));
    image_expected = bytes_of(alone->run({image()}));
  }

  {
    auto a = runtime::create_runner(mnist(), on(*driver, "npu0pe0", true));
    auto b = runtime::create_runner(mobilenet(), on(*driver, "npu0pe0", true));
    CHECK(a->device_name() == "npu0pe0");
    CHECK(b->device_name() == "npu0pe0");
    // Not shared with a session that does not share, nor as an overlapping device file.
    CHECK(code_of_create(mnist(), on(*driver, "npu0pe0", false)) == ErrorCode::DeviceBusy);
    CHECK(code_of_create(mnist(), on(*driver, "npu0pe0-1", true)) == ErrorCode::DeviceBusy);

    // Both models at once, their executions interleaved in the PE's queue.
    constexpr int kRounds = 6;
    int digits_wrong = 0, images_wrong = 0;
    std::thread digits([&] {
      for (int r = 0; r < kRounds * 4; ++r) {
        if (bytes_of(a->run({digit(r % 4)})) != digits_expected[static_cast<std::size_t>(r % 4)])
          ++digits_wrong;
      }
    });
    for (int r = 0; r < kRounds; ++r) {
      if (bytes_of(b->run({image()})) != image_expected) ++images_wrong;
    }
    digits.join();
    CHECK(digits_wrong == 0);
    CHECK(images_wrong == 0);
    // One device, so one set of counters: every execution of both models.
    const auto ha = a->device_health(), hb = b->device_health();
    REQUIRE(ha.size() == 1);
    REQUIRE(hb.size() == 1);
    CHECK(ha[0].completed == hb[0].completed);
    CHECK(ha[0].completed >= static_cast<std::uint64_t>(kRounds * 4 + kRounds));

    // The PE stays open while one sharing session remains.
    a.reset();
    CHECK(code_of_create(mnist(), on(*driver, "npu0pe0", false)) == ErrorCode::DeviceBusy);
    CHECK(bytes_of(b->run({image()})) == image_expected);
  }
  // Closed with its last session: anyone may open it again.
  auto again = runtime::create_runner(mnist(), on(*driver, "npu0pe0", false));
  CHECK(bytes_of(again->run({digit(0)})) == digits_expected[0]);
}

TEST_CASE("sharing sessions given the default spec all land on its first device",
          "[runtime][shared_devices]") {
  auto driver = device::create_sim_driver();
  std::vector<std::unique_ptr<runtime::Runner>> runners;
  for (int i = 0; i < 3; ++i)
    runners.push_back(runtime::create_runner(mnist(), on(*driver, "warboy(2)*1", true)));
  for (const auto& r : runners) CHECK(r->device_name() == "npu0pe0-1");
  const auto expected = bytes_of(runners[0]->run({digit(3)}));
  for (const auto& r : runners) CHECK(bytes_of(r->run({digit(3)})) == expected);
  // Without sharing, the same spec finds the simulator's one card taken.
  CHECK(code_of_create(mnist(), on(*driver, "warboy(2)*1", false)) == ErrorCode::DeviceBusy);
}

TEST_CASE("a hang on a shared PE is recovered for both models",
          "[runtime][shared_devices][faults]") {
  std::vector<std::vector<std::byte>> expected;
  {
    auto clean = device::create_sim_driver();
    auto r = runtime::create_runner(mnist(), on(*clean, "npu0pe0", false));
    for (int i = 0; i < 4; ++i) expected.push_back(bytes_of(r->run({digit(i)})));
  }
  device::SimConfig config;
  config.faults = device::parse_sim_faults("hang:every=25");
  auto driver = device::create_sim_driver(config);
  runtime::RunnerOptions o = on(*driver, "npu0pe0", true);
  // A hung execution is given up after this long without progress: far above a healthy mnist
  // execution even at 200 ms per inference (so no healthy one times out), and paid only by the
  // two hangs.
  o.device_timeout = 5s;
  auto a = runtime::create_runner(mnist(), o);
  auto b = runtime::create_runner(mnist(), o);
  constexpr int kEach = 30;  // 60 executions on the PE: hangs at the 25th and 50th
  std::atomic<int> ok{0}, timeouts{0}, other{0};
  auto drive = [&](runtime::Runner& r, int offset) {
    for (int i = 0; i < kEach; ++i) {
      const int set = (i + offset) % 4;
      try {
        if (bytes_of(r.run({digit(set)})) == expected[static_cast<std::size_t>(set)]) ++ok;
        else ++other;
      } catch (const Error& e) {
        if (e.code() == ErrorCode::DeviceTimeout) ++timeouts;
        else ++other;
      }
    }
  };
  std::thread t([&] { drive(*a, 0); });
  drive(*b, 1);
  t.join();
  // Every request answered once: the hung ones with DeviceTimeout, all others right.
  CHECK(ok + timeouts == 2 * kEach);
  CHECK(other == 0);
  CHECK(timeouts >= 1);
  const auto h = a->device_health().at(0);
  CHECK(h.timeouts == static_cast<std::uint64_t>(timeouts.load()));
  CHECK(h.resets == h.timeouts);
}
