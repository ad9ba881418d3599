// Per-thread span buffers: no loss below the bound from many threads, the max_events bound with
// its dropped count (also in the trace), span ids, and the epoch offset.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "furiosa/profiler/profiler.h"
#include "profiler_test_util.h"

using namespace furiosa::profiler;
using furiosa::profiler::testing::read_json;
using furiosa::profiler::testing::TempFile;

namespace {

SpanRecord plain(std::uint64_t id, std::int64_t start) {
  SpanRecord r;
  r.trace_id = TraceId{1, 1};
  r.span_id = id;
  r.name = "S";
  r.start_ns = start;
  r.end_ns = start + 1;
  return r;
}

}  // namespace

TEST_CASE("4 threads recording below the bound lose nothing", "[profiler][buffers]") {
  Profiler profiler;  // default bound: 1,000,000
  CHECK(profiler.options().max_events == kDefaultMaxEvents);
  constexpr int kThreads = 4;
  constexpr int kSpans = 20'000;  // several chunks per thread
  std::atomic<bool> done{false};
  std::size_t max_seen = 0;
  std::atomic<bool> torn{false};  // Catch2 assertions are for the main thread only
  std::thread reader([&] {  // snapshots while writing: never more than written, never torn
    while (!done.load()) {
      const auto snapshot = profiler.records();
      max_seen = std::max(max_seen, snapshot.size());
      for (const SpanRecord& s : snapshot) {
        if (s.name != "Work" || s.span_id == 0) torn = true;
      }
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&profiler, t] {
      const SpanContext parent{TraceId{7, static_cast<std::uint64_t>(t + 1)}, 0};
      for (int i = 0; i < kSpans; ++i) {
        ScopedSpan span(&profiler, "Work", parent);
        span.record().operator_index = i;
      }
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  reader.join();

  const auto spans = profiler.records();
  CHECK_FALSE(torn.load());
  CHECK(max_seen <= spans.size());
  REQUIRE(spans.size() == static_cast<std::size_t>(kThreads * kSpans));
  CHECK(profiler.dropped_events() == 0);
  std::set<std::uint64_t> ids;
  std::map<std::uint64_t, std::vector<int>> ops_by_trace;  // per thread, in recording order
  for (const SpanRecord& s : spans) {
    ids.insert(s.span_id);
    ops_by_trace[s.trace_id.lo].push_back(s.operator_index);
  }
  CHECK(ids.size() == spans.size());
  REQUIRE(ops_by_trace.size() == kThreads);
  for (const auto& [trace, ops] : ops_by_trace) {
    REQUIRE(ops.size() == static_cast<std::size_t>(kSpans));
    std::set<int> distinct(ops.begin(), ops.end());
    CHECK(distinct.size() == static_cast<std::size_t>(kSpans));
  }
}

TEST_CASE("max_events bounds the buffered spans and counts the dropped ones",
          "[profiler][buffers]") {
  TempFile file("dropped");
  {
    ProfilerOptions options;
    options.max_events = 100;
    options.output_path = file.path();
    Profiler profiler(options);
    for (int i = 0; i < 150; ++i) profiler.record(plain(static_cast<std::uint64_t>(i + 1), i));
    CHECK(profiler.records().size() == 100);
    CHECK(profiler.dropped_events() == 50);
    // The first spans are kept (the buffer fills up, it does not wrap).
    const auto spans = profiler.records();
    CHECK(spans.front().span_id == 1);
    CHECK(spans.back().span_id == 100);
    // Paused spans are not "dropped": they were never recorded.
    profiler.pause();
    for (int i = 0; i < 10; ++i) profiler.record(plain(1000, 0));
    CHECK(profiler.dropped_events() == 50);
    profiler.resume();
    { ScopedSpan span(&profiler, "Late", SpanContext{}); }
    CHECK(profiler.dropped_events() == 51);
  }
  const auto doc = read_json(file.path());
  CHECK(doc.at("otherData").at("dropped_events") == 51);
  int complete = 0;
  for (const auto& e : doc.at("traceEvents")) complete += e.at("ph") == "X" ? 1 : 0;
  CHECK(complete == 100);
}

TEST_CASE("max_events holds across threads: kept + dropped = offered, kept <= bound",
          "[profiler][buffers]") {
  ProfilerOptions options;
  options.max_events = 1000;
  Profiler profiler(options);
  constexpr int kThreads = 4;
  constexpr int kSpans = 700;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&profiler] {
      for (int i = 0; i < kSpans; ++i) {
        ScopedSpan span(&profiler, "Work", SpanContext{});
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::size_t kept = profiler.records().size();
  CHECK(kept <= options.max_events);
  CHECK(kept >= options.max_events / 2);  // budget is handed out in chunks, most of it used
  CHECK(kept + profiler.dropped_events() == static_cast<std::size_t>(kThreads * kSpans));
}

TEST_CASE("max_events = 0 keeps nothing", "[profiler][buffers]") {
  ProfilerOptions options;
  options.max_events = 0;
  Profiler profiler(options);
  { ScopedSpan span(&profiler, "A", SpanContext{}); }
  profiler.record(plain(1, 1));
  CHECK(profiler.records().empty());
  CHECK(profiler.dropped_events() == 2);
}

TEST_CASE("span ids are unique across threads and increase within a thread",
          "[profiler][buffers]") {
  Profiler profiler;
  constexpr int kThreads = 3;
  std::vector<std::vector<std::uint64_t>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) ids[static_cast<std::size_t>(t)].push_back(profiler.next_span_id());
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::uint64_t> all;
  for (const auto& v : ids) {
    CHECK(std::is_sorted(v.begin(), v.end()));
    for (std::uint64_t id : v) {
      CHECK(id != 0);
      all.insert(id);
    }
  }
  CHECK(all.size() == kThreads * 5000);
}

TEST_CASE("several profilers on one thread keep their spans apart", "[profiler][buffers]") {
  std::vector<std::unique_ptr<Profiler>> profilers;
  for (int i = 0; i < 7; ++i) profilers.push_back(std::make_unique<Profiler>());  // > cache
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < profilers.size(); ++i) {
      ScopedSpan span(profilers[i].get(), "P" + std::to_string(i), SpanContext{});
    }
  }
  for (std::size_t i = 0; i < profilers.size(); ++i) {
    const auto spans = profilers[i]->records();
    REQUIRE(spans.size() == 3);
    for (const auto& s : spans) CHECK(s.name == "P" + std::to_string(i));
  }
  // A profiler created where a destroyed one was must not see its buffers.
  profilers[0].reset();
  auto fresh = std::make_unique<Profiler>();
  CHECK(fresh->records().empty());
  { ScopedSpan span(fresh.get(), "Fresh", SpanContext{}); }
  CHECK(fresh->records().size() == 1);
}

TEST_CASE("epoch_offset_ns maps the steady clock to the system clock", "[profiler][buffers]") {
  using namespace std::chrono;
  Profiler profiler;
  const std::int64_t system_before =
      duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
  const std::int64_t steady = now_ns();
  const std::int64_t system_after =
      duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
  const std::int64_t epoch = steady + profiler.epoch_offset_ns();
  // Within a millisecond (the system clock may be slewed, never by that much in a test).
  CHECK(epoch >= system_before - 1'000'000);
  CHECK(epoch <= system_after + 1'000'000);
  // The record table is in epoch ns.
  { ScopedSpan span(&profiler, "Now", SpanContext{}); }
  const RecordTable table = profiler.record_table();
  REQUIRE(table.size() == 1);
  CHECK(table.rows()[0].start_ns == profiler.records()[0].start_ns + profiler.epoch_offset_ns());
  CHECK(table.rows()[0].start_ns > 1'600'000'000'000'000'000);  // after September 2020
}
