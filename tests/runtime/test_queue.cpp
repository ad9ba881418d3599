// Submit/recv queues and run_async: blocking, timeouts, out-of-order completion with contexts,
// close from either side with requests in flight, and 10,000 requests from 8 threads with
// nothing lost or duplicated.
#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/device/sim.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/queue.h"
#include "device_doubles.h"
#include "test_support.h"

using namespace furiosa;
using namespace std::chrono_literals;

namespace {

const std::filesystem::path kMnist() { return test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx"); }

Tensor digit(int set) {
  return compiler::load_tensor_pb(test::shared_model("onnx-zoo/mnist-12-int8") /
                                  fmt::format("test_data_set_{}/input_0.pb", set));
}

template <class F>
ErrorCode code_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  FAIL("no furiosa::Error thrown");
  return ErrorCode::Internal;
}

}  // namespace

TEST_CASE("queue: results carry their contexts and match the sync runner", "[queue]") {
  runtime::QueueOptions opts;
  opts.device = "npu0pe0";
  opts.worker_num = 3;
  auto [submitter, receiver] = runtime::create_queue(kMnist(), opts);
  runtime::RunnerOptions ropts;
  ropts.device = "npu0pe1";
  auto runner = runtime::create_runner(kMnist(), ropts);
  for (int i = 0; i < 30; ++i) submitter.submit({digit(i % 10)}, i);
  std::set<int> seen;
  for (int i = 0; i < 30; ++i) {
    auto r = receiver.recv(120s);
    const int ctx = std::any_cast<int>(r.context);
    CHECK(seen.insert(ctx).second);
    auto expected = runner->run({digit(ctx % 10)});
    CHECK(test::max_abs_diff(r.value()[0], expected[0]) == 0);
  }
  CHECK(seen.size() == 30);
  CHECK(code_of([&r = receiver] { r.recv(50ms); }) == ErrorCode::QueueWaitTimeout);
  submitter.close();
  CHECK(code_of([&r = receiver] { r.recv(1s); }) == ErrorCode::SessionTerminated);
  CHECK(code_of([&s = submitter] { s.submit({digit(0)}, 0); }) == ErrorCode::SessionClosed);
}

TEST_CASE("queue: bad inputs are refused at submit and nothing is queued", "[queue]") {
  auto [submitter, receiver] = runtime::create_queue(kMnist());
  CHECK(code_of([&s = submitter] { s.submit({Tensor(DType::UInt8, {1, 1, 28, 28})}, 1); }) == ErrorCode::InvalidInput);
  submitter.close();
  CHECK(code_of([&r = receiver] { r.recv(1s); }) == ErrorCode::SessionTerminated);
}

namespace {

/// The gate of HeldDevice's fences, shared by the devices of one HeldDriver.
struct Hold {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  int submitted = 0;  // executions submitted to the devices
  std::vector<std::pair<std::shared_ptr<device::Fence>, std::shared_ptr<device::Fence>>> held;  // inner, outer

  /// Forwards the result of `inner` to `outer`.
  static void forward(const device::Fence& inner, device::Fence& outer) {
    if (inner.error()) outer.fail(inner.error());
    else outer.signal(inner.timing());
  }
  /// Lets every held fence and every later one through.
  void release() {
    std::vector<std::pair<std::shared_ptr<device::Fence>, std::shared_ptr<device::Fence>>> now;
    {
      std::lock_guard lock(mu);
      released = true;
      now.swap(held);
    }
    for (auto& [inner, outer] : now) inner->on_signal([inner = inner, outer = outer] { forward(*inner, *outer); });
  }
};

// A simulated device whose fences are held back until release(): executions are accepted and
// computed, but none completes, so the session's requests stay in flight for as long as the
// test needs, whatever the machine's speed. Counts the executions submitted to it.
class HeldDevice : public test::ForwardingDevice {
 public:
  HeldDevice(std::unique_ptr<device::Device> inner, Hold& hold) : test::ForwardingDevice(std::move(inner)), hold_(hold) {}
  std::shared_ptr<device::Fence> submit(const device::LoadedProgram& p, std::vector<std::span<const std::byte>> in,
                                        std::vector<std::span<std::byte>> out) override;

 private:
  Hold& hold_;
};

std::shared_ptr<device::Fence> HeldDevice::submit(const device::LoadedProgram& p, std::vector<std::span<const std::byte>> in,
                                                  std::vector<std::span<std::byte>> out) {
  auto inner = inner_->submit(p, std::move(in), std::move(out));
  auto outer = std::make_shared<device::Fence>();
  {
    std::lock_guard lock(hold_.mu);
    ++hold_.submitted;
    hold_.cv.notify_all();
    if (!hold_.released) {
      hold_.held.emplace_back(inner, outer);
      return outer;
    }
  }
  inner->on_signal([inner, outer] { Hold::forward(*inner, *outer); });
  return outer;
}

class HeldDriver : public device::Driver {
 public:
  HeldDriver() : inner_(device::create_sim_driver()) {}
  std::string_view name() const noexcept override { return "held"; }
  std::vector<device::CardInfo> enumerate() const override { return inner_->enumerate(); }
  std::unique_ptr<device::Device> open(const device::DeviceFile& f) override {
    return std::make_unique<HeldDevice>(inner_->open(f), hold);
  }
  Hold hold;

 private:
  std::unique_ptr<device::Driver> inner_;
};

}  // namespace

TEST_CASE("queue: submit blocks while the input queue is full", "[queue]") {
  // A device whose executions do not complete until the test says so, and one worker: the
  // requests stay where the queue put them however fast or slow the machine is.
  HeldDriver driver;
  runtime::QueueOptions opts;
  opts.driver = &driver;
  opts.device = "npu0pe0";
  opts.worker_num = 1;
  opts.input_queue_size = 2;
  auto [submitter, receiver] = runtime::create_queue(kMnist(), opts);
  // Whatever happens below, the device lets its executions finish before the queue is
  // destroyed (declared after it, so destroyed first), else its destructor would wait forever.
  struct Releaser {
    Hold& hold;
    ~Releaser() { hold.release(); }
  } releaser{driver.hold};
  std::mutex mu;
  std::condition_variable cv;
  int submitted = 0;
  constexpr int kRequests = 8;
  std::thread producer([&, &s = submitter] {
    for (int i = 0; i < kRequests; ++i) {
      s.submit({digit(i)}, i);
      std::lock_guard lock(mu);
      ++submitted;
      cv.notify_all();
    }
  });
  struct Joiner {
    std::thread& t;
    Hold& hold;
    ~Joiner() {
      hold.release();  // a failed check below must not leave the producer blocked
      if (t.joinable()) t.join();
    }
  } joiner{producer, driver.hold};
  // The session admits worker_num + 2 per device = 3 requests (one executing, one queued on the
  // device, one in host work); two more wait in the input queue: the producer is blocked on
  // the sixth. The bounds of these waits only turn a hang into a failure.
  {
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, 120s, [&] { return submitted >= 5; }));
  }
  {
    std::unique_lock lock(driver.hold.mu);
    REQUIRE(driver.hold.cv.wait_for(lock, 120s, [&] { return driver.hold.submitted >= 2; }));
  }
  // Nothing completes until release(), so no sixth submit can have returned, however long this
  // thread took to get here.
  {
    std::lock_guard lock(mu);
    CHECK(submitted == 5);
  }
  driver.hold.release();
  for (int received = 0; received < kRequests; ++received) CHECK(receiver.recv(120s).value().size() == 1);
  producer.join();
  CHECK(submitted == kRequests);
}

TEST_CASE("queue: closing the receiver with requests in flight stops the session", "[queue]") {
  auto [submitter, receiver] = runtime::create_queue(kMnist());
  for (int i = 0; i < 20; ++i) submitter.submit({digit(i % 10)}, i);
  receiver.close();  // drops whatever is pending; in-flight requests finish and are discarded
  CHECK(code_of([&s = submitter] { s.submit({digit(0)}, 0); }) == ErrorCode::SessionClosed);
  CHECK(code_of([&r = receiver] { r.recv(10ms); }) == ErrorCode::SessionClosed);
}

TEST_CASE("queue: closing the submitter with requests in flight still delivers them all", "[queue]") {
  auto [submitter, receiver] = runtime::create_queue(kMnist());
  for (int i = 0; i < 25; ++i) submitter.submit({digit(i % 10)}, i);
  submitter.close();
  int n = 0;
  try {
    for (;;) {
      receiver.recv(120s);
      ++n;
    }
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::SessionTerminated);
  }
  CHECK(n == 25);
}

TEST_CASE("queue: destroying both sides with work in flight neither hangs nor leaks", "[queue]") {
  for (int round = 0; round < 3; ++round) {
    auto q = runtime::create_queue(kMnist());
    for (int i = 0; i < 10; ++i) q.first.submit({digit(i)}, i);
  }  // Receiver then Submitter destroyed here
  auto q = runtime::create_queue(kMnist());  // the device was released
  q.first.submit({digit(0)}, 0);
  CHECK(q.second.recv(120s).value().size() == 1);
}

TEST_CASE("queue: 10,000 requests from 8 threads, nothing lost or duplicated", "[queue][stress]") {
  runtime::QueueOptions opts;
  opts.device = "npu0pe0,npu0pe1";  // spread over both PEs
  opts.worker_num = 4;
  opts.input_queue_size = 16;
  opts.output_queue_size = 16;
  auto [submitter, receiver] = runtime::create_queue(kMnist(), opts);
  const Tensor input = digit(3);
  constexpr int kThreads = 8, kPer = 1250;
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t, &s = submitter] {
      for (int i = 0; i < kPer; ++i) s.submit({input}, t * kPer + i);
    });
  }
  std::vector<int> count(kThreads * kPer, 0);
  int errors = 0;
  for (int i = 0; i < kThreads * kPer; ++i) {
    auto r = receiver.recv(120s);
    if (r.error) ++errors;
    ++count[static_cast<std::size_t>(std::any_cast<int>(r.context))];
  }
  for (auto& p : producers) p.join();
  CHECK(errors == 0);
  CHECK(std::all_of(count.begin(), count.end(), [](int c) { return c == 1; }));
  submitter.close();
  CHECK(code_of([&r = receiver] { r.recv(1s); }) == ErrorCode::SessionTerminated);
}

TEST_CASE("run_async returns futures that complete out of the caller's way", "[queue]") {
  auto runner = runtime::create_runner(kMnist());
  std::vector<std::future<std::vector<Tensor>>> futures;
  for (int i = 0; i < 10; ++i) futures.push_back(runner->run_async({digit(i)}));
  for (int i = 0; i < 10; ++i) {
    auto out = futures[static_cast<std::size_t>(i)].get();
    CHECK(test::max_abs_diff(out[0], runner->run({digit(i)})[0]) == 0);
  }
  CHECK_THROWS_AS(runner->run_async({Tensor(DType::UInt8, {1})}), Error);
}

TEST_CASE("queue trace: both PEs used and host work overlaps device work", "[queue][trace]") {
  auto prof = std::make_shared<profiler::Profiler>();
  device::SimConfig cfg;
  // Long modelled transfers (pacing holds each execution for them) keep both devices busy for
  // the whole run, whatever the host's speed (sanitizer builds included).
  cfg.dma_latency_ns = 5'000'000;
  auto driver = device::create_sim_driver(cfg);
  runtime::QueueOptions opts;
  opts.device = "npu0pe0,npu0pe1";
  opts.worker_num = 4;
  opts.profiler = prof;
  opts.driver = driver.get();
  {
    auto [submitter, receiver] = runtime::create_queue(kMnist(), opts);
    for (int i = 0; i < 24; ++i) submitter.submit({digit(i % 10)}, i);
    for (int i = 0; i < 24; ++i) CHECK(!receiver.recv(120s).error);
  }
  const auto spans = prof->records();
  std::set<int> pes;
  std::vector<const profiler::SpanRecord*> exec, host;
  for (const auto& s : spans) {
    if (s.name == "Execution") pes.insert(s.pe_index);
    if (s.cat == profiler::Category::NPU) exec.push_back(&s);  // Load, Execution, kernels, Store
    if (s.name == "Quantize" || s.name == "Dequantize") host.push_back(&s);
  }
  CHECK(pes == std::set<int>{0, 1});
  bool overlap = false;
  for (const auto* h : host) {
    for (const auto* e : exec) {
      if (!(h->trace_id == e->trace_id) && h->start_ns < e->end_ns && e->start_ns < h->end_ns) overlap = true;
    }
  }
  CHECK(overlap);
}

namespace {

// A device that fails every third execution's fence with DeviceFault (as a DMA error would),
// delegating everything else to a simulated device.
class FaultyDevice : public test::ForwardingDevice {
 public:
  explicit FaultyDevice(std::unique_ptr<device::Device> inner) : test::ForwardingDevice(std::move(inner)) {}
  std::shared_ptr<device::Fence> submit(const device::LoadedProgram& p, std::vector<std::span<const std::byte>> in,
                                        std::vector<std::span<std::byte>> out) override {
    if (count_++ % 3 == 2) {
      auto f = std::make_shared<device::Fence>();
      f->fail(std::make_exception_ptr(Error(ErrorCode::DeviceFault, file().name() + ": injected DMA error")));
      return f;
    }
    return inner_->submit(p, std::move(in), std::move(out));
  }

 private:
  std::atomic<int> count_{0};
};

class FaultyDriver : public device::Driver {
 public:
  FaultyDriver() : inner_(device::create_sim_driver()) {}
  std::string_view name() const noexcept override { return "faulty"; }
  std::vector<device::CardInfo> enumerate() const override { return inner_->enumerate(); }
  std::unique_ptr<device::Device> open(const device::DeviceFile& f) override {
    return std::make_unique<FaultyDevice>(inner_->open(f));
  }

 private:
  std::unique_ptr<device::Driver> inner_;
};

}  // namespace

TEST_CASE("queue: device faults come back as per-request errors, one result per request", "[queue]") {
  FaultyDriver driver;
  runtime::QueueOptions opts;
  opts.driver = &driver;
  opts.device = "npu0pe0";
  opts.worker_num = 1;  // in order, so the failing requests are known
  auto [submitter, receiver] = runtime::create_queue(kMnist(), opts);
  for (int i = 0; i < 9; ++i) submitter.submit({digit(i)}, i);
  submitter.close();
  int ok = 0, failed = 0;
  std::set<int> seen;
  try {
    for (;;) {
      auto r = receiver.recv(120s);
      seen.insert(std::any_cast<int>(r.context));
      if (r.error) {
        ++failed;
        try {
          r.value();
          FAIL("value() did not rethrow");
        } catch (const Error& e) {
          CHECK(e.code() == ErrorCode::DeviceFault);
          CHECK_THAT(e.what(), Catch::Contains("injected DMA error"));
        }
      } else {
        ++ok;
      }
    }
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::SessionTerminated);
  }
  CHECK(seen.size() == 9);
  CHECK(failed == 3);
  CHECK(ok == 6);
  // The sync runner reports the same fault as an exception.
  runtime::RunnerOptions ro;
  ro.driver = &driver;
  ro.device = "npu0pe1";
  auto runner = runtime::create_runner(kMnist(), ro);
  runner->run({digit(0)});
  runner->run({digit(1)});
  CHECK_THROWS_AS(runner->run({digit(2)}), Error);
  CHECK(runner->run({digit(3)}).size() == 1);  // and keeps working
}
