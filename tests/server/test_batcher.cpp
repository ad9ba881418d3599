// The dynamic batcher (server/src/batcher.h): groups up to max_batch_size, the delay bound,
// deadlines expiring in the queue, close() handing on what is queued, a throwing flush.
#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "batcher.h"
#include "furiosa/server/model_repository.h"

using namespace furiosa;
using namespace furiosa::server;
using namespace std::chrono_literals;

namespace {

/// Bound on waits for the batcher's thread: only there so that a broken batcher fails the test
/// instead of hanging it, never reached by a correct one on any machine.
constexpr auto kHangGuard = 120s;

/// Records each flushed group's size and answers every item. The first `held_groups` flushes
/// block until release(): while one does, the batcher's thread cannot take anything from its
/// queue, so the items added meanwhile are all queued when it comes back (whatever the speed).
struct Recorder {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::size_t> groups;
  int answered = 0;
  int expired = 0;
  int held_groups = 0;
  bool released = false;

  Batcher::Flush flush() {
    return [this](std::vector<BatchItem>& group) {
      {
        std::unique_lock lock(mutex);
        groups.push_back(group.size());
        changed.notify_all();
        if (static_cast<int>(groups.size()) <= held_groups) changed.wait(lock, [&] { return released; });
      }
      for (auto& item : group) item.done({}, nullptr);
    };
  }
  BatchItem item(Deadline deadline = std::nullopt, Clock::time_point admitted = Clock::now()) {
    return {{}, deadline, admitted, [this](std::vector<Tensor>, std::exception_ptr error) {
              std::lock_guard lock(mutex);
              if (error && status_of(error) == ServeStatus::DeadlineExceeded) ++expired;
              ++answered;
              changed.notify_all();
            }};
  }
  /// Waits until `n` items were answered.
  void wait_answered(int n) {
    std::unique_lock lock(mutex);
    REQUIRE(changed.wait_for(lock, kHangGuard, [&] { return answered >= n; }));
  }
  /// Waits until `n` groups were handed to the flush.
  void wait_groups(std::size_t n) {
    std::unique_lock lock(mutex);
    REQUIRE(changed.wait_for(lock, kHangGuard, [&] { return groups.size() >= n; }));
  }
  void release() {
    {
      std::lock_guard lock(mutex);
      released = true;
    }
    changed.notify_all();
  }
  std::vector<std::size_t> group_sizes() {
    std::lock_guard lock(mutex);
    return groups;
  }
};

}  // namespace

TEST_CASE("a full group is handed on at once, the rest waits for the delay", "[server][batcher]") {
  // The delay is an hour: the first group can only leave because it is full, and the rest stays
  // queued (until close), however slowly the items are added.
  Recorder r;
  Batcher batcher(8, std::chrono::hours(1), r.flush());
  for (int i = 0; i < 11; ++i) batcher.add(r.item());
  r.wait_answered(8);
  CHECK(r.group_sizes() == std::vector<std::size_t>{8});
  CHECK(batcher.pending() == 3);
  batcher.close();  // hands on the rest without the delay
  CHECK(r.group_sizes() == std::vector<std::size_t>{8, 3});
  CHECK(r.answered == 11);
}

TEST_CASE("a group that does not fill is handed on once the delay has passed", "[server][batcher]") {
  Recorder r;
  r.held_groups = 1;
  Batcher batcher(8, 100ms, r.flush());
  // A first item whose delay has long passed: handed on at once, and its flush holds the
  // batcher's thread while the next three are queued.
  batcher.add(r.item(std::nullopt, Clock::now() - std::chrono::hours(1)));
  r.wait_groups(1);
  const auto t0 = Clock::now();
  for (int i = 0; i < 3; ++i) batcher.add(r.item());
  r.release();
  r.wait_answered(4);
  // A lower bound: the three waited for the delay from their admission (at or after t0). It
  // holds at any speed.
  CHECK(Clock::now() - t0 >= 100ms);
  CHECK(r.group_sizes() == std::vector<std::size_t>{1, 3});
}

TEST_CASE("while no device slot is free the group grows past its delay, then leaves at once",
          "[server][batcher]") {
  // Zero delay: without the slot rule every item would leave alone. With every slot busy, the
  // five items stay queued (the thread cannot hand anything on while the predicate is false),
  // and the freed slot takes them as one group.
  Recorder r;
  std::atomic<bool> free{false};
  Batcher batcher(8, 0ms, r.flush(), [&] { return free.load(); });
  for (int i = 0; i < 5; ++i) batcher.add(r.item());
  CHECK(batcher.pending() == 5);
  CHECK(r.group_sizes().empty());
  free.store(true);
  batcher.slot_freed();
  r.wait_answered(5);
  CHECK(r.group_sizes() == std::vector<std::size_t>{5});
}

TEST_CASE("the batch ladder: powers of two below max_batch_size, or the preferred sizes",
          "[server][batcher]") {
  DynamicBatching b;
  b.max_batch_size = 8;
  CHECK(batch_ladder(b) == std::vector<std::int64_t>{1, 2, 4, 8});
  b.max_batch_size = 6;
  CHECK(batch_ladder(b) == std::vector<std::int64_t>{1, 2, 4, 6});
  b.max_batch_size = 1;
  CHECK(batch_ladder(b) == std::vector<std::int64_t>{1});
  b.max_batch_size = 16;
  b.preferred_batch_sizes = {4, 1, 4};
  CHECK(batch_ladder(b) == std::vector<std::int64_t>{1, 4, 16});
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
  // The first item's deadline (1 ms) passes long before its delay (50 ms) does: it is answered
  // DeadlineExceeded whether the second item joins its group or not.
  batcher.add(r.item(Clock::now() + 1ms));
  batcher.add(r.item());
  r.wait_answered(2);
  CHECK(r.expired == 1);
  CHECK(r.group_sizes() == std::vector<std::size_t>{1});
}

TEST_CASE("close hands on queued requests without the delay, add after close is refused", "[server][batcher]") {
  Recorder r;
  // An hour's delay: close() returning at all (it joins the batcher's thread) shows that it did
  // not wait for it; no measured time is needed.
  Batcher batcher(8, std::chrono::hours(1), r.flush());
  batcher.add(r.item());
  batcher.add(r.item());
  batcher.close();
  CHECK(r.answered == 2);
  CHECK(r.group_sizes() == std::vector<std::size_t>{2});
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
  batcher.close();  // hands on what is queued and joins the thread: every item was answered
  CHECK(internal == 3);
}
