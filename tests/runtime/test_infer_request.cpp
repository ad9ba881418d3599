// Runner::start and InferRequest (infer_request.h): the callback runs exactly once on a worker
// with the outputs or the error; validation errors are thrown before anything runs; cancel() of
// a waiting request, of one on the device and of a completed one; wait() inside the callback;
// destroying the Runner with requests in flight; StartOptions::first_stage_on_caller. In-flight states come from the simulator's gate
// (SimConfig::gate_path): executions stay queued on the device until the test creates the gate
// file, whatever the machine's speed.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "device_doubles.h"
#include "furiosa/compiler/onnx_import.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"

using namespace furiosa;
using namespace std::chrono_literals;

namespace {

/// Bound on every wait: only there to turn a hang into a failure, never reached by a correct
/// runtime on any machine.
constexpr auto kHangGuard = 120s;

const std::filesystem::path kMnist() { return test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx"); }

Tensor digit(int set) {
  return compiler::load_tensor_pb(test::shared_model("onnx-zoo/mnist-12-int8") /
                                  fmt::format("test_data_set_{}/input_0.pb", set % 10));
}

ErrorCode code_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return x.code();
  } catch (...) {
  }
  return ErrorCode::Internal;
}

/// What the callbacks of a test saw, per request index.
struct Outcomes {
  std::mutex mu;
  std::vector<int> calls;                 ///< callback calls per request
  std::vector<std::exception_ptr> errors;
  std::vector<std::vector<Tensor>> outputs;
  std::vector<std::thread::id> threads;

  explicit Outcomes(std::size_t n) : calls(n, 0), errors(n), outputs(n), threads(n) {}
  runtime::InferCallback callback(std::size_t i) {
    return [this, i](std::vector<Tensor> out, std::exception_ptr error) {
      std::lock_guard lock(mu);
      ++calls[i];
      errors[i] = error;
      outputs[i] = std::move(out);
      threads[i] = std::this_thread::get_id();
    };
  }
};

/// A simulator whose executions wait for a gate file, one PE (npu0pe0) and one worker: the
/// runtime admits 1 + 2 = 3 requests into its stages, the rest wait in line.
struct GatedRunner {
  test::TempDir dir{"infer-request"};
  std::filesystem::path gate = dir / "gate";
  test::CountingDriver driver{[this] {
    device::SimConfig cfg;
    cfg.gate_path = gate.string();
    return cfg;
  }()};
  std::unique_ptr<runtime::Runner> runner;

  GatedRunner() {
    runtime::RunnerOptions opts;
    opts.driver = &driver;
    opts.device = "npu0pe0";
    opts.worker_num = 1;
    runner = runtime::create_runner(kMnist(), opts);
  }
  /// Lets the held executions (and every later one) run.
  void open() { std::ofstream(gate).put('1'); }
  ~GatedRunner() {
    open();  // a failed check must not leave the runner's destructor waiting for the device
    runner.reset();
  }
};

}  // namespace

TEST_CASE("start: the callback gets the outputs once, on a worker, equal to run()", "[infer_request]") {
  auto runner = runtime::create_runner(kMnist());
  constexpr std::size_t kRequests = 12;
  Outcomes seen(kRequests);
  std::vector<runtime::InferRequest> requests;
  for (std::size_t i = 0; i < kRequests; ++i) requests.push_back(runner->start({digit(static_cast<int>(i))}, seen.callback(i)));
  for (auto& r : requests) {
    REQUIRE(r.valid());
    REQUIRE(r.wait_for(kHangGuard));
    CHECK(r.done());
  }
  for (std::size_t i = 0; i < kRequests; ++i) {
    INFO("request " << i);
    CHECK(seen.calls[i] == 1);
    CHECK(!seen.errors[i]);
    CHECK(seen.threads[i] != std::this_thread::get_id());
    REQUIRE(seen.outputs[i].size() == 1);
    CHECK(test::max_abs_diff(seen.outputs[i][0], runner->run({digit(static_cast<int>(i))})[0]) == 0);
  }
  CHECK(!requests[0].cancel());  // completed: nothing to cancel
  CHECK(seen.calls[0] == 1);
}

TEST_CASE("start: invalid inputs throw before anything runs, the callback is never called", "[infer_request]") {
  auto runner = runtime::create_runner(kMnist());
  std::atomic<int> calls{0};
  auto count = [&](std::vector<Tensor>, std::exception_ptr) { ++calls; };
  try {
    runner->start({Tensor(DType::UInt8, {1, 1, 28, 28})}, count);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK(e.tensor() == runner->model().inputs[0].name);
  }
  CHECK_THROWS_AS(runner->start({}, count), Error);
  // A correct request afterwards is the only one that completes.
  runner->start({digit(0)}, count).wait();
  CHECK(calls == 1);
}

TEST_CASE("cancel: a request waiting for admission completes with Cancelled at once, without running",
          "[infer_request]") {
  GatedRunner g;
  Outcomes seen(5);
  std::vector<runtime::InferRequest> requests;
  // Requests 0-2 are admitted and reach the device, where the gate holds them; 3 and 4 wait in
  // line (admission is decided inside start(), so this holds whatever the speed).
  for (std::size_t i = 0; i < 5; ++i) requests.push_back(g.runner->start({digit(static_cast<int>(i))}, seen.callback(i)));
  REQUIRE(g.driver.count.wait_for(3, kHangGuard));
  CHECK(requests[3].cancel());
  CHECK(requests[3].cancel());  // idempotent, same answer
  // Completed while the device is still held: it never needed a device execution.
  REQUIRE(requests[3].wait_for(kHangGuard));
  {
    std::lock_guard lock(seen.mu);
    CHECK(seen.calls[3] == 1);
    CHECK(code_of(seen.errors[3]) == ErrorCode::Cancelled);
    CHECK(seen.outputs[3].empty());
    CHECK(seen.threads[3] != std::this_thread::get_id());
    for (std::size_t i : {0, 1, 2, 4}) CHECK(seen.calls[i] == 0);
  }
  g.open();
  for (auto& r : requests) REQUIRE(r.wait_for(kHangGuard));
  for (std::size_t i : {0, 1, 2, 4}) {
    CHECK(seen.calls[i] == 1);
    CHECK(!seen.errors[i]);
  }
  CHECK(g.driver.count.submitted == 4);  // the cancelled request never reached the device
  CHECK(g.runner->device_health()[0].completed == 4);
}

TEST_CASE("cancel: a request on the device stops when its execution completes, which is not aborted",
          "[infer_request]") {
  GatedRunner g;
  Outcomes seen(2);
  auto held = g.runner->start({digit(0)}, seen.callback(0));
  REQUIRE(g.driver.count.wait_for(1, kHangGuard));  // submitted; the gate keeps it there
  CHECK(held.cancel());
  CHECK(!held.done());  // nothing completes while its execution is held
  g.open();
  REQUIRE(held.wait_for(kHangGuard));
  CHECK(seen.calls[0] == 1);
  CHECK(code_of(seen.errors[0]) == ErrorCode::Cancelled);
  CHECK(seen.outputs[0].empty());
  CHECK(g.runner->device_health()[0].completed == 1);  // the device finished the execution
  // The runner goes on working.
  g.runner->start({digit(1)}, seen.callback(1)).wait();
  CHECK(!seen.errors[1]);
  CHECK(seen.outputs[1].size() == 1);
}

TEST_CASE("wait() inside the request's own callback is refused", "[infer_request]") {
  auto runner = runtime::create_runner(kMnist());
  std::promise<runtime::InferRequest> handle;
  std::shared_future<runtime::InferRequest> handle_future = handle.get_future().share();
  std::promise<ErrorCode> refused;
  auto request = runner->start({digit(0)}, [&](std::vector<Tensor>, std::exception_ptr) {
    try {
      handle_future.get().wait();
      refused.set_value(ErrorCode::Internal);
    } catch (const Error& e) {
      refused.set_value(e.code());
    }
  });
  handle.set_value(request);
  auto code = refused.get_future();
  REQUIRE(code.wait_for(kHangGuard) == std::future_status::ready);
  CHECK(code.get() == ErrorCode::InvalidArgument);
  request.wait();  // from outside it returns
}

TEST_CASE("destroying the runner with requests in flight completes each exactly once", "[infer_request]") {
  constexpr std::size_t kRequests = 10;
  Outcomes seen(kRequests);
  std::vector<runtime::InferRequest> requests;
  {
    GatedRunner g;
    for (std::size_t i = 0; i < kRequests; ++i) {
      requests.push_back(g.runner->start({digit(static_cast<int>(i))}, seen.callback(i)));
    }
    REQUIRE(g.driver.count.wait_for(3, kHangGuard));
    CHECK(requests[5].cancel());  // waiting in line: withdrawn
    // The destructor waits for every request (held, waiting and withdrawn); the gate opens from
    // another thread once the destruction is under way (or before: either way all complete).
    std::thread opener([&] { g.open(); });
    g.runner.reset();
    opener.join();
  }
  for (std::size_t i = 0; i < kRequests; ++i) {
    INFO("request " << i);
    CHECK(seen.calls[i] == 1);
    CHECK(requests[i].done());
    if (i == 5) CHECK(code_of(seen.errors[i]) == ErrorCode::Cancelled);
    else CHECK(!seen.errors[i]);
  }
  // Handles outlive their runner: nothing to wait for, nothing to cancel.
  requests[0].wait();
  CHECK(!requests[0].cancel());
  CHECK(requests[5].cancel());  // it was cancelled, and says so
}

TEST_CASE("cancel races completion: every request completes once, Cancelled exactly when cancel() says so",
          "[infer_request][stress]") {
  runtime::RunnerOptions opts;
  opts.device = "npu0pe0,npu0pe1";
  opts.worker_num = 2;
  auto runner = runtime::create_runner(kMnist(), opts);
  constexpr std::size_t kRequests = 400;
  Outcomes seen(kRequests);
  std::vector<runtime::InferRequest> requests(kRequests);
  std::vector<int> cancelled(kRequests, -1);  // cancel()'s answer, -1 when not called
  std::mutex mu;
  std::condition_variable started;
  std::size_t next = 0;
  std::thread canceller([&] {
    // Cancels every third request as soon as it exists, racing its stages and completion.
    for (std::size_t i = 0; i < kRequests; i += 3) {
      runtime::InferRequest r;
      {
        std::unique_lock lock(mu);
        REQUIRE(started.wait_for(lock, kHangGuard, [&] { return next > i; }));
        r = requests[i];
      }
      cancelled[i] = r.cancel() ? 1 : 0;
    }
  });
  const Tensor input = digit(7);
  for (std::size_t i = 0; i < kRequests; ++i) {
    auto r = runner->start({input}, seen.callback(i));
    std::lock_guard lock(mu);
    requests[i] = r;
    next = i + 1;
    started.notify_all();
  }
  canceller.join();
  for (auto& r : requests) REQUIRE(r.wait_for(kHangGuard));
  int yes = 0;
  for (std::size_t i = 0; i < kRequests; ++i) {
    INFO("request " << i);
    CHECK(seen.calls[i] == 1);
    const bool got_cancelled = seen.errors[i] && code_of(seen.errors[i]) == ErrorCode::Cancelled;
    if (cancelled[i] == -1) {
      CHECK(!seen.errors[i]);
    } else {
      CHECK(got_cancelled == (cancelled[i] == 1));
      CHECK(requests[i].cancel() == got_cancelled);  // asked again after completion: same answer
      yes += cancelled[i];
    }
    if (!seen.errors[i]) CHECK(seen.outputs[i].size() == 1);
  }
  INFO(yes << " of " << (kRequests + 2) / 3 << " cancels took effect");  // depends on timing; any count is right
}

TEST_CASE("first_stage_on_caller: an admitted request's host stage runs on the caller, the callback on a worker",
          "[infer_request]") {
  auto prof = std::make_shared<profiler::Profiler>();
  test::TempDir dir("first-stage");
  const auto gate = dir / "gate";
  device::SimConfig cfg;
  cfg.gate_path = gate.string();
  test::CountingDriver driver(cfg);
  runtime::RunnerOptions opts;
  opts.driver = &driver;
  opts.device = "npu0pe0";
  opts.worker_num = 1;  // admits 1 + 2 = 3
  opts.profiler = prof;
  auto runner = runtime::create_runner(kMnist(), opts);
  struct Opener {
    std::filesystem::path gate;
    ~Opener() { std::ofstream(gate).put('1'); }  // before the runner goes, whatever happens
  };
  constexpr std::size_t kRequests = 4;
  Outcomes seen(kRequests);
  std::vector<runtime::InferRequest> requests;
  {
    Opener opener{gate};
    runtime::StartOptions here;
    here.first_stage_on_caller = true;
    for (std::size_t i = 0; i < kRequests; ++i) {
      requests.push_back(runner->start({digit(static_cast<int>(i))}, seen.callback(i), here));
      // The first three were admitted at once: start() returned after submitting them.
      if (i < 3) CHECK(driver.count.submitted == static_cast<int>(i) + 1);
    }
  }
  for (auto& r : requests) REQUIRE(r.wait_for(kHangGuard));
  const std::uint64_t caller = profiler::current_thread_id();
  std::vector<std::pair<std::int64_t, std::uint64_t>> quantize;          // (start, thread)
  for (const auto& s : prof->records()) {
    if (s.name == "Quantize") quantize.emplace_back(s.start_ns, s.thread_id);
  }
  std::sort(quantize.begin(), quantize.end());
  REQUIRE(quantize.size() == kRequests);
  for (std::size_t i = 0; i < 3; ++i) CHECK(quantize[i].second == caller);
  CHECK(quantize[3].second != caller);  // waited for admission: a worker ran it
  for (std::size_t i = 0; i < kRequests; ++i) {
    CHECK(seen.calls[i] == 1);
    CHECK(!seen.errors[i]);
    CHECK(seen.threads[i] != std::this_thread::get_id());
  }
}
