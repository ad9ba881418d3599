// The dynamic batcher (server/src/batcher.h): groups up to max_batch_size, the delay bound,
// deadlines expiring in the queue, close() handing on what is queued, a throwing flush.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <thread>

#include "batcher.h"

using namespace furiosa;
using namespace furiosa::server;
using namespace std::chrono_literals;

namespace {

/// Records each flushed group's size and answers every item.
struct Recorder {
  std::mutex mutex;
  std::vector<std::size_t> groups;
  std::atomic<int> answered{0};
  std::atomic<int> expired{0};

  Batcher::Flush flush() {
    return [this](std::vector<BatchItem>& group) {
      {
        std::lock_guard lock(mutex);
        groups.push_back(group.size());
      }
      for (auto& item : group) item.done({}, nullptr);
    };
  }
  BatchItem item(Deadline deadline = std::nullopt) {
    return {{}, deadline, Clock::now(), [this](std::vector<Tensor>, std::exception_ptr error) {
              if (error && status_of(error) == ServeStatus::DeadlineExceeded) ++expired;
              ++answered;
            }};
  }
  void wait_for(int n) {
    const auto until = Clock::now() + 10s;
    while (answered.load() < n && Clock::now() < until) std::this_thread::sleep_for(1ms);
  }
};

}  // namespace

TEST_CASE("a full group is handed on at once, the rest after the delay", "[server][batcher]") {
  Recorder r;
  Batcher batcher(8, 200ms, r.flush());
  const auto t0 = Clock::now();
  for (int i = 0; i < 11; ++i) batcher.add(r.item());
  r.wait_for(8);
  CHECK(Clock::now() - t0 < 150ms);  // the first 8 did not wait for the delay
  r.wait_for(11);
  CHECK(Clock::now() - t0 >= 150ms);  // the last 3 did
  std::lock_guard lock(r.mutex);
  CHECK(r.groups == std::vector<std::size_t>{8, 3});
  CHECK(r.answered == 11);
}

TEST_CASE("requests from many threads are each answered once in groups of at most the batch", "[server][batcher]") {
  Recorder r;
  {
    Batcher batcher(4, 2ms, r.flush());
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 50; ++i) batcher.add(r.item());
      });
    }
    for (auto& t : threads) t.join();
  }  // destructor: close() hands on whatever is queued
  CHECK(r.answered == 400);
  std::size_t total = 0;
  for (auto g : r.groups) {
    CHECK(g >= 1);
    CHECK(g <= 4);
    total += g;
  }
  CHECK(total == 400);
}

TEST_CASE("a request whose deadline passes in the queue is answered DeadlineExceeded, not flushed", "[server][batcher]") {
  Recorder r;
  Batcher batcher(8, 50ms, r.flush());
  batcher.add(r.item(Clock::now() + 1ms));
  batcher.add(r.item());
  r.wait_for(2);
  CHECK(r.expired == 1);
  std::lock_guard lock(r.mutex);
  CHECK(r.groups == std::vector<std::size_t>{1});
}

TEST_CASE("close hands on queued requests without the delay; add after close is refused", "[server][batcher]") {
  Recorder r;
  Batcher batcher(8, 10s, r.flush());
  batcher.add(r.item());
  batcher.add(r.item());
  const auto t0 = Clock::now();
  batcher.close();
  CHECK(Clock::now() - t0 < 5s);
  CHECK(r.answered == 2);
  try {
    batcher.add(r.item());
    FAIL("add after close accepted");
  } catch (const ServeError& e) {
    CHECK(e.status() == ServeStatus::Unavailable);
  }
}

TEST_CASE("a throwing flush: every item of its group is answered with the error", "[server][batcher]") {
  std::atomic<int> internal{0};
  Batcher batcher(2, 1ms, [](std::vector<BatchItem>&) { throw std::runtime_error("submit failed"); });
  for (int i = 0; i < 3; ++i) {
    batcher.add({{}, std::nullopt, Clock::now(), [&](std::vector<Tensor>, std::exception_ptr e) {
                   if (e && status_of(e) == ServeStatus::Internal) ++internal;
                 }});
  }
  const auto until = Clock::now() + 10s;
  while (internal.load() < 3 && Clock::now() < until) std::this_thread::sleep_for(1ms);
  CHECK(internal == 3);
}
