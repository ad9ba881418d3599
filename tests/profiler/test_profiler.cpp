// Profiler and ScopedSpan: nesting, pause/resume, inactive spans, id uniqueness, concurrency,
// record order, writing at destruction, and process_profiler() without the env variable.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "furiosa/profiler/profiler.h"
#include "profiler_test_util.h"
#include "test_support.h"

using namespace furiosa::profiler;
using furiosa::profiler::testing::read_json;
using furiosa::profiler::testing::TempFile;

namespace {

/// The records of `profiler` keyed by name (names are unique in the tests using this).
std::map<std::string, SpanRecord> by_name(const Profiler& profiler) {
  std::map<std::string, SpanRecord> out;
  for (SpanRecord& r : profiler.records()) {
    const std::string name = r.name;
    out.emplace(name, std::move(r));
  }
  return out;
}

/// A hand-made span for the tests that call Profiler::record() directly.
SpanRecord make_span(std::string name, std::int64_t start, std::int64_t end, std::uint64_t id) {
  SpanRecord r;
  r.trace_id = TraceId{1, 2};
  r.span_id = id;
  r.name = std::move(name);
  r.start_ns = start;
  r.end_ns = end;
  return r;
}

}  // namespace

TEST_CASE("ScopedSpan nesting builds parent/child ids within one trace", "[profiler]") {
  Profiler profiler;
  SpanContext root_context;
  SpanContext child_context;
  {
    ScopedSpan root(&profiler, "Inference", SpanContext{});
    REQUIRE(root.active());
    root_context = root.context();
    {
      ScopedSpan child(&profiler, "Quantize", root.context());
      child.record().operator_index = 3;
      child_context = child.context();
      ScopedSpan grandchild(&profiler, "Execution", child.context(), Category::NPU);
    }
    // Nothing is recorded before the span ends.
    CHECK(profiler.records().size() == 2);
  }

  auto spans = by_name(profiler);
  REQUIRE(spans.size() == 3);
  const SpanRecord& root = spans.at("Inference");
  const SpanRecord& child = spans.at("Quantize");
  const SpanRecord& grandchild = spans.at("Execution");

  CHECK(root.trace_id.valid());
  CHECK(child.trace_id == root.trace_id);
  CHECK(grandchild.trace_id == root.trace_id);
  CHECK(root_context.trace_id == root.trace_id);
  CHECK(root_context.span_id == root.span_id);
  CHECK(child_context.span_id == child.span_id);

  CHECK(root.parent_span_id == 0);
  CHECK(child.parent_span_id == root.span_id);
  CHECK(grandchild.parent_span_id == child.span_id);
  CHECK(root.span_id != 0);
  CHECK(std::set<std::uint64_t>{root.span_id, child.span_id, grandchild.span_id}.size() == 3);

  CHECK(root.cat == Category::Runtime);
  CHECK(grandchild.cat == Category::NPU);
  CHECK(child.operator_index == 3);
  CHECK(root.operator_index == -1);
  CHECK(root.thread_id == current_thread_id());

  // Children lie within their parents.
  CHECK(root.start_ns <= child.start_ns);
  CHECK(child.start_ns <= grandchild.start_ns);
  CHECK(grandchild.end_ns <= child.end_ns);
  CHECK(child.end_ns <= root.end_ns);
  CHECK(root.dur_ns() >= 0);

  // records() puts the parent first.
  const auto ordered = profiler.records();
  CHECK(ordered[0].name == "Inference");
  CHECK(ordered[1].name == "Quantize");
  CHECK(ordered[2].name == "Execution");
}

TEST_CASE("ScopedSpan without a valid parent starts a new trace", "[profiler]") {
  Profiler profiler;
  { ScopedSpan a(&profiler, "Inference", SpanContext{}); }
  { ScopedSpan b(&profiler, "Inference", SpanContext{TraceId{}, 77}); }
  const auto spans = profiler.records();
  REQUIRE(spans.size() == 2);
  CHECK(spans[0].trace_id.valid());
  CHECK(spans[1].trace_id.valid());
  CHECK_FALSE(spans[0].trace_id == spans[1].trace_id);
  CHECK(spans[0].parent_span_id == 0);
  CHECK(spans[1].parent_span_id == 0);
}

TEST_CASE("ScopedSpan::end records once and keeps the record readable", "[profiler]") {
  Profiler profiler;
  {
    ScopedSpan span(&profiler, "Enqueue", SpanContext{});
    span.record().flow_id = profiler.next_flow_id();
    span.end();
    span.end();
    CHECK(span.active());
    CHECK(span.record().name == "Enqueue");
    CHECK(span.record().end_ns >= span.record().start_ns);
    CHECK(profiler.records().size() == 1);
  }
  const auto spans = profiler.records();
  REQUIRE(spans.size() == 1);
  CHECK(spans[0].flow_id == 1);
}

TEST_CASE("pause() drops spans and resume() records again, both are idempotent", "[profiler]") {
  Profiler profiler;
  CHECK(profiler.is_recording());

  profiler.pause();
  profiler.pause();
  CHECK_FALSE(profiler.is_recording());
  const SpanContext parent{TraceId{5, 6}, 9};
  {
    ScopedSpan span(&profiler, "Paused", parent);
    CHECK_FALSE(span.active());
    CHECK(span.context().trace_id == parent.trace_id);
    CHECK(span.context().span_id == parent.span_id);
  }
  profiler.record(make_span("PausedManual", 1, 2, 1));
  CHECK(profiler.records().empty());

  profiler.resume();
  profiler.resume();
  CHECK(profiler.is_recording());
  { ScopedSpan span(&profiler, "Resumed", SpanContext{}); }
  profiler.record(make_span("ResumedManual", 1, 2, 100));

  // A span still open when recording is paused is dropped at its end.
  {
    ScopedSpan span(&profiler, "EndedWhilePaused", SpanContext{});
    CHECK(span.active());
    profiler.pause();
  }
  profiler.resume();

  const auto spans = by_name(profiler);
  CHECK(spans.size() == 2);
  CHECK(spans.count("Resumed") == 1);
  CHECK(spans.count("ResumedManual") == 1);
}

TEST_CASE("ScopedSpan with a null profiler is a no-op", "[profiler]") {
  const SpanContext parent{TraceId{3, 4}, 42};
  ScopedSpan span(nullptr, "Nothing", parent);
  CHECK_FALSE(span.active());
  CHECK(span.context().trace_id == parent.trace_id);
  CHECK(span.context().span_id == 42);
  span.record().operator_index = 1;  // allowed, ignored
  span.end();
  CHECK(span.context().span_id == 42);

  ScopedSpan root(nullptr, "Nothing", SpanContext{});
  CHECK_FALSE(root.context().valid());
}

TEST_CASE("new_trace gives unique non-zero trace ids", "[profiler]") {
  Profiler profiler;
  std::set<std::pair<std::uint64_t, std::uint64_t>> seen;
  for (int i = 0; i < 10000; ++i) {
    const SpanContext context = profiler.new_trace();
    REQUIRE(context.valid());
    REQUIRE(context.span_id == 0);
    seen.emplace(context.trace_id.hi, context.trace_id.lo);
  }
  CHECK(seen.size() == 10000);

  // Another profiler has its own random seed.
  Profiler other;
  const TraceId a = profiler.new_trace().trace_id;
  const TraceId b = other.new_trace().trace_id;
  CHECK_FALSE(a == b);
}

TEST_CASE("span and flow ids are non-zero and increasing", "[profiler]") {
  Profiler profiler;
  const std::uint64_t s1 = profiler.next_span_id();
  const std::uint64_t s2 = profiler.next_span_id();
  CHECK(s1 != 0);
  CHECK(s2 > s1);
  const std::uint64_t f1 = profiler.next_flow_id();
  CHECK(f1 != 0);
  CHECK(profiler.next_flow_id() > f1);
}

TEST_CASE("span ids are unique across threads recording concurrently", "[profiler]") {
  Profiler profiler;
  constexpr int kThreads = 4;
  constexpr int kRootsPerThread = 1000;
  std::atomic<bool> done{false};

  // A reader taking snapshots while the writers record.
  std::thread reader([&] {
    while (!done.load()) (void)profiler.records();
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&profiler] {
      for (int i = 0; i < kRootsPerThread; ++i) {
        ScopedSpan root(&profiler, "Inference", SpanContext{});
        ScopedSpan child(&profiler, "Quantize", root.context());
      }
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  reader.join();

  const auto spans = profiler.records();
  REQUIRE(spans.size() == kThreads * kRootsPerThread * 2);
  std::set<std::uint64_t> span_ids;
  std::set<std::uint64_t> thread_ids;
  std::set<std::pair<std::uint64_t, std::uint64_t>> trace_ids;
  std::map<std::uint64_t, const SpanRecord*> by_id;
  for (const SpanRecord& s : spans) {
    CHECK(s.span_id != 0);
    span_ids.insert(s.span_id);
    thread_ids.insert(s.thread_id);
    by_id[s.span_id] = &s;
    if (s.parent_span_id == 0) trace_ids.emplace(s.trace_id.hi, s.trace_id.lo);
  }
  CHECK(span_ids.size() == spans.size());
  CHECK(thread_ids.size() == kThreads);
  CHECK(trace_ids.size() == kThreads * kRootsPerThread);
  // Every child points to a root of its own trace recorded on the same thread.
  for (const SpanRecord& s : spans) {
    if (s.parent_span_id == 0) continue;
    const auto it = by_id.find(s.parent_span_id);
    REQUIRE(it != by_id.end());
    CHECK(it->second->trace_id == s.trace_id);
    CHECK(it->second->thread_id == s.thread_id);
  }
  // Sorted by start time.
  CHECK(std::is_sorted(spans.begin(), spans.end(), [](const SpanRecord& a, const SpanRecord& b) {
    return a.start_ns < b.start_ns;
  }));
}

TEST_CASE("records() sorts by start, longer spans first, then by span id", "[profiler]") {
  Profiler profiler;
  profiler.record(make_span("C", 100, 150, 1));  // smaller id, ends first
  profiler.record(make_span("Q", 100, 250, 3));
  profiler.record(make_span("A", 50, 300, 5));
  profiler.record(make_span("P", 100, 250, 2));
  profiler.record(make_span("Z", 10, 20, 9));
  std::vector<std::string> names;
  for (const auto& s : profiler.records()) names.push_back(s.name);
  CHECK(names == std::vector<std::string>{"Z", "A", "P", "Q", "C"});
}

TEST_CASE("Profiler writes its output_path on flush() and at destruction", "[profiler]") {
  TempFile file("destructor");
  {
    Profiler profiler(ProfilerOptions{file.path()});
    CHECK(profiler.options().output_path == file.path());
    { ScopedSpan span(&profiler, "Inference", SpanContext{}); }
    profiler.flush();
    REQUIRE(std::filesystem::exists(file.path()));
    CHECK(read_json(file.path())["traceEvents"].size() > 0);
    std::filesystem::remove(file.path());
    { ScopedSpan span(&profiler, "Second", SpanContext{}); }
  }
  REQUIRE(std::filesystem::exists(file.path()));
  const auto doc = read_json(file.path());
  int complete = 0;
  for (const auto& e : doc["traceEvents"]) complete += e["ph"] == "X" ? 1 : 0;
  CHECK(complete == 2);
}

TEST_CASE("flush() without output_path is a no-op", "[profiler]") {
  Profiler profiler;
  { ScopedSpan span(&profiler, "Inference", SpanContext{}); }
  CHECK_NOTHROW(profiler.flush());
}

TEST_CASE("write failures throw naming the path, the destructor only logs", "[profiler]") {
  const std::filesystem::path bad =
      std::filesystem::temp_directory_path() / "furiosa-no-such-dir-4f1c" / "trace.json";
  auto profiler = std::make_unique<Profiler>(ProfilerOptions{bad});
  { ScopedSpan span(profiler.get(), "Inference", SpanContext{}); }
  try {
    profiler->flush();
    FAIL("flush() did not throw");
  } catch (const std::runtime_error& e) {
    CHECK_THAT(e.what(), Catch::Contains(bad.string()));
  }
  CHECK_THROWS_AS(profiler->write_chrome_trace(bad), std::runtime_error);
  CHECK_NOTHROW(profiler.reset());
}

// process_profiler() reads the variable once per process (std::call_once). Nothing else in this
// executable calls it, so unsetting the variable first makes the first call take the null path,
// and setting it afterwards has no effect. The set path is tested in profiler_env_tests, which
// forks a fresh child per case.
TEST_CASE("process_profiler is null when FURIOSA_PROFILER_OUTPUT_PATH is unset", "[profiler]") {
  furiosa::test::ScopedEnv output("FURIOSA_PROFILER_OUTPUT_PATH", std::nullopt);
  CHECK(process_profiler() == nullptr);
  TempFile file("late-env");
  output.set(file.path().string());
  CHECK(process_profiler() == nullptr);  // read once: a later change is ignored
}
