// The Chrome trace as real viewers need it: balanced, properly nested slices on every
// (pid, tid) track (overlapping spans go to overflow lanes), counter tracks for queue depth and
// NPU utilisation, named threads, and the recording's metadata.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "furiosa/profiler/profiler.h"
#include "furiosa/profiler/report.h"
#include "profiler_test_util.h"
#include "synthetic_trace.h"

using namespace furiosa::profiler;
using furiosa::profiler::testing::read_json;
using furiosa::profiler::testing::synthetic_trace;
using furiosa::profiler::testing::TempFile;
using nlohmann::json;

namespace {

json export_and_parse(const Profiler& profiler) {
  TempFile file("views");
  profiler.write_chrome_trace(file.path());
  return read_json(file.path());
}

/// ts/dur (microseconds with the ns fraction) back to integer ns.
std::int64_t ns(const json& v) { return std::llround(v.get<double>() * 1000.0); }

/// Checks that the document parses as Trace Event Format with, on every (pid, tid), complete
/// events in time order that are balanced and properly nested (each one either inside the
/// enclosing open slice or after it). Returns the number of X events checked.
int check_nesting(const json& doc) {
  REQUIRE(doc.at("traceEvents").is_array());
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::int64_t>> open;  // ends
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> last_start;
  double previous_ts = -1;
  int checked = 0;
  for (const auto& e : doc.at("traceEvents")) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    REQUIRE(e.contains("ts"));
    CHECK(e.at("ts").get<double>() >= previous_ts);  // the whole array in time order
    previous_ts = e.at("ts").get<double>();
    if (e.at("ph") != "X") continue;
    ++checked;
    const auto track = std::make_pair(e.at("pid").get<std::int64_t>(), e.at("tid").get<std::int64_t>());
    const std::int64_t start = ns(e.at("ts"));
    const std::int64_t end = start + ns(e.at("dur"));
    CHECK(end >= start);
    if (last_start.count(track) != 0) CHECK(start >= last_start[track]);
    last_start[track] = start;
    auto& stack = open[track];
    while (!stack.empty() && stack.back() <= start) stack.pop_back();
    INFO("event " << e.dump());
    CHECK((stack.empty() || end <= stack.back()));  // nested in the enclosing slice
    stack.push_back(end);
  }
  return checked;
}

/// The counter events named `name`: (ts in ns relative to the base, value of `series`).
std::vector<std::pair<std::int64_t, double>> counter(const json& doc, const std::string& name,
                                                     const std::string& series) {
  std::vector<std::pair<std::int64_t, double>> out;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "C" || e.at("name") != name) continue;
    CHECK(e.at("cat") == "NPU");
    out.emplace_back(ns(e.at("ts")), e.at("args").at(series).get<double>());
  }
  return out;
}

SpanRecord span(std::string name, Category cat, std::int64_t start, std::int64_t end,
                std::uint64_t id, std::uint64_t parent, std::uint64_t thread) {
  SpanRecord r;
  r.trace_id = TraceId{3, id};
  r.span_id = id;
  r.parent_span_id = parent;
  r.name = std::move(name);
  r.cat = cat;
  r.start_ns = 1'000'000 + start;
  r.end_ns = 1'000'000 + end;
  r.thread_id = thread;
  if (cat == Category::NPU) {
    r.thread_id = 0;
    r.card = 0;
    r.pe_index = 0;
  }
  return r;
}

/// The thread_name metadata of (pid, tid), or "".
std::string thread_name_of(const json& doc, int pid, std::int64_t tid) {
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("pid") == pid &&
        e.at("tid") == tid) {
      return e.at("args").at("name").get<std::string>();
    }
  }
  return "";
}

}  // namespace

TEST_CASE("Chrome trace of a realistic run: every track balanced and properly nested",
          "[profiler][chrome]") {
  Profiler profiler;
  for (const SpanRecord& r : synthetic_trace(20)) profiler.record(r);
  // Real spans from two threads too.
  std::thread other([&profiler] {
    ScopedSpan a(&profiler, "Inference", SpanContext{});
    ScopedSpan b(&profiler, "Quantize", a.context());
  });
  other.join();
  { ScopedSpan a(&profiler, "Inference", SpanContext{}); }
  const json doc = export_and_parse(profiler);
  CHECK(check_nesting(doc) == 20 * 13 + 3);
}

TEST_CASE("Chrome trace: spans that overlap without nesting go to overflow lanes",
          "[profiler][chrome]") {
  Profiler profiler;
  // Two inferences in flight from one submitting thread (async): [0,100] and [50,150].
  profiler.record(span("Inference", Category::Runtime, 0, 100, 1, 0, 5));
  profiler.record(span("Inference", Category::Runtime, 50, 150, 2, 0, 5));
  profiler.record(span("Inference", Category::Runtime, 60, 70, 3, 0, 5));   // nests in lane 0
  profiler.record(span("Inference", Category::Runtime, 120, 130, 4, 0, 5)); // lane 0 is free
  // Two NPU spans overlapping on one PE's track; a Load beside them goes to the PE's Load track.
  profiler.record(span("Execution", Category::NPU, 0, 100, 5, 0, 0));
  profiler.record(span("Load", Category::NPU, 90, 110, 6, 0, 0));
  profiler.record(span("Execution", Category::NPU, 90, 110, 7, 0, 0));
  const json doc = export_and_parse(profiler);
  check_nesting(doc);

  std::map<std::uint64_t, std::int64_t> tid_of;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    tid_of[std::stoull(e.at("args").at("span_id").get<std::string>(), nullptr, 16)] =
        e.at("tid").get<std::int64_t>();
  }
  CHECK(tid_of.at(1) == 5);
  CHECK(tid_of.at(2) == 5 + 100'000);
  CHECK(tid_of.at(3) == 5);
  CHECK(tid_of.at(4) == 5);  // first fit
  CHECK(tid_of.at(5) == 1);
  CHECK(tid_of.at(6) == 2001);
  CHECK(tid_of.at(7) == 1 + 100'000);
  CHECK(thread_name_of(doc, 100, 2001) == "PE 0 Load");
  CHECK(thread_name_of(doc, 1, 5) == "Thread 5");
  CHECK(thread_name_of(doc, 1, 100'005) == "Thread 5 (overlap 1)");
  CHECK(thread_name_of(doc, 100, 100'001) == "PE 0 (overlap 1)");
}

TEST_CASE("Chrome trace: queue depth and NPU utilisation counters", "[profiler][chrome]") {
  SECTION("sequential executions: depth 0/1, utilisation = Run / Total per window") {
    Profiler profiler;
    const auto spans = synthetic_trace(4);
    for (const SpanRecord& r : spans) profiler.record(r);
    const json doc = export_and_parse(profiler);
    const std::int64_t base = doc.at("otherData").at("base_ns").get<std::int64_t>();
    const auto depth = counter(doc, "Queue depth PE 0", "depth");
    const auto busy = counter(doc, "NPU utilisation PE 0", "utilisation");
    CHECK(counter(doc, "Queue depth PE 1", "depth").size() == 4);
    // PE 0 ran inferences 0 and 2: each +1 at its Enqueue start, -1 at its Store end.
    REQUIRE(depth.size() == 4);
    std::vector<std::int64_t> enqueue_starts, store_ends, load_starts;
    for (const SpanRecord& r : spans) {
      const bool pe0 = r.trace_id.lo % 2 == 0;  // synthetic inference i has lo 0x1000 + i
      if (!pe0) continue;
      if (r.name == "Enqueue") enqueue_starts.push_back(r.start_ns - base);
      if (r.name == "Store") store_ends.push_back(r.end_ns - base);
      if (r.name == "Load") load_starts.push_back(r.start_ns - base);
    }
    CHECK(depth[0] == std::make_pair(enqueue_starts[0], 1.0));
    CHECK(depth[1] == std::make_pair(store_ends[0], 0.0));
    CHECK(depth[2] == std::make_pair(enqueue_starts[1], 1.0));
    CHECK(depth[3] == std::make_pair(store_ends[1], 0.0));

    std::vector<NpuExecutionRow> pe0_rows;
    for (const auto& row : npu_execution_report(spans)) {
      if (row.pe_index == 0) pe0_rows.push_back(row);
    }
    REQUIRE(pe0_rows.size() == 2);
    REQUIRE(busy.size() == 4);
    for (int k = 0; k < 2; ++k) {
      const double expected = static_cast<double>(pe0_rows[static_cast<std::size_t>(k)].run_ns) /
                              static_cast<double>(pe0_rows[static_cast<std::size_t>(k)].total_ns);
      CHECK(busy[2 * static_cast<std::size_t>(k)].first == load_starts[static_cast<std::size_t>(k)]);
      CHECK(busy[2 * static_cast<std::size_t>(k)].second == Approx(expected));
      CHECK(busy[2 * static_cast<std::size_t>(k)].second > 0.0);
      CHECK(busy[2 * static_cast<std::size_t>(k)].second < 1.0);
      CHECK(busy[2 * static_cast<std::size_t>(k) + 1] ==
            std::make_pair(store_ends[static_cast<std::size_t>(k)], 0.0));
    }
    // Counters live on the card's process.
    for (const auto& e : doc.at("traceEvents")) {
      if (e.at("ph") == "C") CHECK(e.at("pid") == 100);
    }
  }
  SECTION("two executions in flight: depth reaches 2") {
    Profiler profiler;
    SpanRecord enqueue_a = span("Enqueue", Category::Runtime, 0, 5, 1, 0, 1);
    enqueue_a.flow_id = 1;
    SpanRecord enqueue_b = span("Enqueue", Category::Runtime, 10, 15, 2, 0, 2);
    enqueue_b.flow_id = 2;
    SpanRecord load_a = span("Load", Category::NPU, 20, 100, 3, 1, 0);
    SpanRecord exec_a = span("Execution", Category::NPU, 100, 200, 4, 1, 0);
    SpanRecord kernel_a = span("LowLevelAdd", Category::NPU, 100, 150, 5, 4, 0);
    SpanRecord store_a = span("Store", Category::NPU, 200, 250, 6, 1, 0);
    SpanRecord exec_b = span("Execution", Category::NPU, 250, 300, 7, 2, 0);
    SpanRecord store_b = span("Store", Category::NPU, 300, 350, 8, 2, 0);
    exec_a.flow_id = 1;
    exec_b.flow_id = 2;
    for (SpanRecord* r : {&load_a, &exec_a, &kernel_a, &store_a}) {
      r->trace_id = TraceId{3, 1};
      r->execution_index = 0;
    }
    kernel_a.execution_index = -1;
    for (SpanRecord* r : {&exec_b, &store_b}) {
      r->trace_id = TraceId{3, 2};
      r->execution_index = 1;
    }
    for (SpanRecord* r : {&enqueue_a, &enqueue_b, &load_a, &exec_a, &kernel_a, &store_a, &exec_b,
                          &store_b}) {
      profiler.record(*r);
    }
    const json doc = export_and_parse(profiler);
    check_nesting(doc);
    const auto depth = counter(doc, "Queue depth PE 0", "depth");
    const std::vector<std::pair<std::int64_t, double>> expected_depth = {
        {0, 1.0}, {10, 2.0}, {250, 1.0}, {350, 0.0}};
    CHECK(depth == expected_depth);
    const auto busy = counter(doc, "NPU utilisation PE 0", "utilisation");
    // Window A: 20..250, run 50 -> 50/230; window B: 250..350 (no Load: Execution start), run 0.
    REQUIRE(busy.size() == 3);
    CHECK(busy[0].first == 20);
    CHECK(busy[0].second == Approx(50.0 / 230.0));
    CHECK(busy[1] == std::make_pair(std::int64_t{250}, 0.0));
    CHECK(busy[2] == std::make_pair(std::int64_t{350}, 0.0));
  }
}

TEST_CASE("Chrome trace: named threads and recording metadata", "[profiler][chrome]") {
  ProfilerOptions options;
  options.max_events = 2;
  Profiler profiler(options);
  std::uint64_t named_id = 0;
  std::thread worker([&] {
    set_current_thread_name("worker");
    set_current_thread_name("runtime worker");  // the latest name wins
    named_id = current_thread_id();
    ScopedSpan s(&profiler, "Quantize", SpanContext{});
  });
  worker.join();
  CHECK(thread_name(named_id) == "runtime worker");
  { ScopedSpan s(&profiler, "Inference", SpanContext{}); }
  { ScopedSpan s(&profiler, "Dropped", SpanContext{}); }
  const json doc = export_and_parse(profiler);
  CHECK(thread_name_of(doc, 1, static_cast<std::int64_t>(named_id)) ==
        "runtime worker (thread " + std::to_string(named_id) + ")");
  CHECK(thread_name_of(doc, 1, static_cast<std::int64_t>(current_thread_id())) ==
        "Thread " + std::to_string(current_thread_id()));
  const json& other = doc.at("otherData");
  CHECK(other.at("dropped_events") == 1);
  CHECK(other.at("epoch_offset_ns").get<std::int64_t>() == profiler.epoch_offset_ns());
  CHECK(other.at("schema") == "furiosa-trace/1");
}
