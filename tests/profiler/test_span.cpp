// The span model's free functions: category names, trace id hex, clock, thread ids.
#include <catch2/catch.hpp>

#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "furiosa/profiler/span.h"

using namespace furiosa::profiler;

TEST_CASE("category_name names both categories", "[profiler][span]") {
  CHECK(category_name(Category::Runtime) == "Runtime");
  CHECK(category_name(Category::NPU) == "NPU");
}

TEST_CASE("TraceId::to_hex is 32 lowercase hex digits, hi first", "[profiler][span]") {
  CHECK(TraceId{}.to_hex() == "00000000000000000000000000000000");
  CHECK(TraceId{0x1, 0xABC}.to_hex() == "00000000000000010000000000000abc");
  CHECK(TraceId{0xFEDCBA9876543210ULL, 0x0123456789ABCDEFULL}.to_hex() ==
        "fedcba98765432100123456789abcdef");
  CHECK_FALSE(TraceId{}.valid());
  CHECK(TraceId{0, 1}.valid());
  CHECK(TraceId{1, 0}.valid());
}

TEST_CASE("now_ns is the steady clock in ns and never goes back", "[profiler][span]") {
  using namespace std::chrono;
  const auto before = duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
  const std::int64_t a = now_ns();
  const std::int64_t b = now_ns();
  const auto after = duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
  CHECK(before <= a);
  CHECK(a <= b);
  CHECK(b <= after);
}

TEST_CASE("current_thread_id is small, stable per thread and distinct across threads",
          "[profiler][span]") {
  const std::uint64_t mine = current_thread_id();
  CHECK(mine != 0);
  CHECK(current_thread_id() == mine);

  constexpr int kThreads = 4;
  std::vector<std::uint64_t> ids(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&ids, i] {
      ids[i] = current_thread_id();
      if (current_thread_id() != ids[i]) ids[i] = 0;  // must be stable within the thread
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::uint64_t> distinct(ids.begin(), ids.end());
  distinct.insert(mine);
  CHECK(distinct.size() == kThreads + 1);
  CHECK(distinct.count(0) == 0);
  // Small ids: handed out 1, 2, ... in this process, which has created few threads so far.
  CHECK(*distinct.rbegin() < 1000);
}
