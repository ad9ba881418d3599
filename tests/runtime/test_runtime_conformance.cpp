// The runtime over every kind of backend: the reference simulator, a driver from outside the
// registry (the counting test double of device_doubles.h, which reaches the runtime only through
// the Driver/Device interfaces) and the PCIe backend on a fake /dev + sysfs tree. Each one that
// can open a device gives the default model's recorded predictions through run, run_async,
// start and the queues, each request completing exactly once; a hardware backend on a machine
// without the card refuses the session with one DeviceNotFound line naming the device file.
#include <fmt/format.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <map>

#include "../device/fake_pcie_tree.h"
#include "device_doubles.h"
#include "furiosa/core/error.h"
#include "furiosa/device/pcie.h"
#include "furiosa/device/sim.h"
#include "furiosa/runtime/queue.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

/// The predicted class: the first maximum, as numpy's argmax in the model's generator script.
std::int64_t class_of(const Tensor& t) { return static_cast<std::int64_t>(test::argmax(t)); }

struct Backend {
  std::string name;
  std::function<std::unique_ptr<device::Driver>()> make;
};

/// The bundled images of the default model and the classes its generator recorded for them.
std::vector<std::pair<Tensor, std::int64_t>> bundled_images() {
  const fs::path dir = fs::path(test::build_path("FURIOSA_MODELS_DIR")) / "images";
  std::ifstream expected(dir / "expected_int8.txt");
  std::vector<std::pair<Tensor, std::int64_t>> out;
  std::string file;
  std::int64_t label = 0;
  while (expected >> file >> label) out.emplace_back(runtime::read_npy(dir / file), label);
  REQUIRE(out.size() == 8);
  return out;
}

}  // namespace

TEST_CASE("runtime conformance: every backend runs the default model through every front end",
          "[runtime][conformance]") {
  const device::pcie_test::FakeTree tree;
  const std::vector<Backend> backends = {
      {"sim", [] { return device::create_sim_driver(); }},
      {"counting test double", [] { return std::make_unique<test::CountingDriver>(device::SimConfig{}); }},
      {"pcie (fake sysfs)", [&tree] { return device::create_pcie_driver(tree.config); }}};
  const auto images = bundled_images();
  const fs::path model = fs::path(test::build_path("FURIOSA_MODELS_DIR")) / "fashion_mnist_int8.onnx";
  for (const Backend& backend : backends) {
    DYNAMIC_SECTION(backend.name) {
      auto driver = backend.make();
      runtime::RunnerOptions options;
      options.driver = driver.get();
      options.device = "npu0pe0";
      std::unique_ptr<runtime::Runner> runner;
      try {
        runner = runtime::create_runner(model, options);
      } catch (const Error& e) {
        REQUIRE(driver->is_hardware());  // a reference backend must run the session
        CHECK(e.code() == ErrorCode::DeviceNotFound);
        CHECK(e.device_file() == "npu0pe0");
        CHECK(e.message().find('\n') == std::string::npos);
        WARN(backend.name << ": the runtime checks need a real Warboy card: " << e.message());
        continue;
      }
      // run
      for (const auto& [input, label] : images) CHECK(class_of(runner->run({input})[0]) == label);
      // run_async
      std::vector<std::future<std::vector<Tensor>>> futures;
      for (const auto& [input, label] : images) futures.push_back(runner->run_async({input}));
      for (std::size_t i = 0; i < images.size(); ++i) CHECK(class_of(futures[i].get()[0]) == images[i].second);
      // start: each callback exactly once
      std::vector<std::atomic<int>> calls(images.size());
      std::vector<std::int64_t> classes(images.size(), -1);
      std::vector<runtime::InferRequest> requests;
      for (std::size_t i = 0; i < images.size(); ++i) {
        requests.push_back(runner->start({images[i].first}, [&, i](std::vector<Tensor> out, std::exception_ptr error) {
          if (!error) classes[i] = class_of(out[0]);
          ++calls[i];
        }));
      }
      for (auto& r : requests) r.wait();
      for (std::size_t i = 0; i < images.size(); ++i) {
        CHECK(calls[i].load() == 1);
        CHECK(classes[i] == images[i].second);
      }
      const auto health = runner->device_health();
      REQUIRE(health.size() == 1);
      CHECK(health[0].device_file == "npu0pe0");
      CHECK(health[0].completed == 3 * images.size());
      CHECK(health[0].faults == 0);
      runner.reset();
      // the queues
      runtime::QueueOptions q;
      q.driver = driver.get();
      q.device = "npu0pe0";
      auto [submitter, receiver] = runtime::create_queue(model, q);
      for (std::size_t i = 0; i < images.size(); ++i) submitter.submit({images[i].first}, i);
      std::map<std::size_t, int> received;
      for (std::size_t n = 0; n < images.size(); ++n) {
        auto result = receiver.recv(std::chrono::seconds(120));  // a bound against hanging only
        const auto i = std::any_cast<std::size_t>(result.context);
        ++received[i];
        CHECK(class_of(result.value()[0]) == images[i].second);
      }
      CHECK(received.size() == images.size());
    }
  }
}
