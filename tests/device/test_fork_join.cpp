// Intra-op parallelism of the simulator's compute threads (device/sim/fork_join.h): a job's
// chunks run on a thread standing by while the poster runs others (made deterministic: the
// poster's chunk waits for the helper's chunk to start), every index is run exactly once,
// exceptions reach the poster, and without anyone standing by the loop runs inline. Runs under
// TSan (.ci/run).
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "fork_join.h"

using namespace furiosa::device::sim;
using namespace std::chrono_literals;

namespace {

// A ForkJoin with one helper thread that stands by whenever a section is open, as an idle
// compute thread does (execution_queue.cpp), until the fixture is destroyed.
struct Pool {
  std::mutex mu;
  std::condition_variable cv;
  ForkJoin fj{mu, cv};
  std::atomic<bool> attention{false};
  std::thread helper;
  std::thread::id helper_id;

  Pool() {
    helper = std::thread([this] {
      ForkJoin::Helper me;
      for (;;) {
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return attention.load() || fj.wanted(); });
          if (attention.load()) return;
        }
        fj.stand_by(me, attention);
      }
    });
    helper_id = helper.get_id();
  }
  ~Pool() {
    {
      std::lock_guard lock(mu);
      attention = true;
      fj.wake_locked();
    }
    cv.notify_all();
    helper.join();
  }
  // Waits (bounded) until the helper stands by; false if it never does.
  bool wait_standing_by() const {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (fj.standing_by() == 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(100us);
    }
    return true;
  }
};

// Chunk 0 waits for chunk 1 to have started: only a second thread can start it.
struct Rendezvous {
  std::atomic<bool> second_started{false};
  std::atomic<bool> first_saw_second{false};
  std::atomic<int> runs{0};
  std::thread::id first_thread, second_thread;
};

void rendezvous_body(void* ctx, std::int64_t begin, std::int64_t end) {
  auto& r = *static_cast<Rendezvous*>(ctx);
  r.runs += static_cast<int>(end - begin);
  if (begin == 0) {
    r.first_thread = std::this_thread::get_id();
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!r.second_started.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    r.first_saw_second = r.second_started.load();
  } else {
    r.second_thread = std::this_thread::get_id();
    r.second_started = true;
  }
}

void count_body(void* ctx, std::int64_t begin, std::int64_t end) {
  auto& hits = *static_cast<std::vector<std::atomic<int>>*>(ctx);
  for (std::int64_t i = begin; i < end; ++i) ++hits[static_cast<std::size_t>(i)];
}

void throwing_body(void*, std::int64_t begin, std::int64_t) {
  if (begin == 3) throw std::runtime_error("chunk 3 failed");
}

}  // namespace

TEST_CASE("parallel_for shares a job with a compute thread standing by", "[device][fork_join]") {
  Pool pool;
  ForkJoin::bind_thread(&pool.fj);
  {
    const ForkJoin::Section section;  // as an execution's kernels are
    REQUIRE(pool.wait_standing_by());
    Rendezvous r;
    parallel_for(2, 1, &rendezvous_body, &r);
    CHECK(r.runs == 2);
    CHECK(r.first_saw_second);
    // One chunk on this thread, the other on the helper (either way round).
    CHECK(r.first_thread != r.second_thread);
    CHECK((r.first_thread == pool.helper_id || r.second_thread == pool.helper_id));

    // Many chunks: each index exactly once, whoever runs it.
    std::vector<std::atomic<int>> hits(1000);
    for (int round = 0; round < 50; ++round) parallel_for(1000, 7, &count_body, &hits);
    int wrong = 0;
    for (auto& h : hits) wrong += h.load() == 50 ? 0 : 1;
    CHECK(wrong == 0);
  }
  ForkJoin::bind_thread(nullptr);
}

// (Not in the TSan subset, whose name filter this avoids: an exception made on one thread and
// rethrown on another shares libstdc++'s uninstrumented reference count; see .ci/run.)
TEST_CASE("parallel_for hands a chunk's exception to its poster", "[device][fork_join]") {
  Pool pool;
  ForkJoin::bind_thread(&pool.fj);
  {
    const ForkJoin::Section section;
    REQUIRE(pool.wait_standing_by());
    CHECK_THROWS_WITH(parallel_for(8, 1, &throwing_body, nullptr), "chunk 3 failed");
  }
  ForkJoin::bind_thread(nullptr);
}

TEST_CASE("parallel_for runs inline with nobody standing by or on an unbound thread",
          "[device][fork_join]") {
  std::vector<std::atomic<int>> hits(100);
  parallel_for(100, 10, &count_body, &hits);  // unbound: inline
  Pool pool;
  ForkJoin::bind_thread(&pool.fj);
  parallel_for(100, 10, &count_body, &hits);  // bound, no section: the helper sleeps
  ForkJoin::bind_thread(nullptr);
  int wrong = 0;
  for (auto& h : hits) wrong += h.load() == 2 ? 0 : 1;
  CHECK(wrong == 0);
  CHECK(pool.fj.standing_by() == 0);
}
