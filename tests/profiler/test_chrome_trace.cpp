// Chrome Trace Event export: document shape, time units, tracks, args, flows, nesting.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "furiosa/profiler/profiler.h"
#include "profiler_test_util.h"

using namespace furiosa::profiler;
using furiosa::profiler::testing::read_json;
using furiosa::profiler::testing::TempFile;
using nlohmann::json;

namespace {

constexpr std::int64_t kBase = 1'000'000'000;  // absolute steady-clock ns of the first span
const TraceId kTrace{0x0123456789abcdefULL, 0xfedcba9876543210ULL};

/// A span of kTrace at [kBase + start, kBase + end].
SpanRecord span(std::string name, Category cat, std::int64_t start, std::int64_t end,
                std::uint64_t id, std::uint64_t parent) {
  SpanRecord r;
  r.trace_id = kTrace;
  r.span_id = id;
  r.parent_span_id = parent;
  r.name = std::move(name);
  r.cat = cat;
  r.start_ns = kBase + start;
  r.end_ns = kBase + end;
  return r;
}

/// One inference on host thread 7 with its device work on card 0 (PE 0 and PE 1), plus an
/// inference on host thread 8; recorded out of order.
void record_inference(Profiler& profiler) {
  SpanRecord inference = span("Inference", Category::Runtime, 0, 10'000, 1, 0);
  inference.thread_id = 7;
  SpanRecord quantize = span("Quantize", Category::Runtime, 500, 1'000, 3, 1);
  quantize.thread_id = 7;
  quantize.operator_index = 0;
  SpanRecord enqueue = span("Enqueue", Category::Runtime, 1'500, 2'000, 2, 1);
  enqueue.thread_id = 7;
  enqueue.flow_id = 42;
  SpanRecord execution = span("Execution", Category::NPU, 2'500, 8'000, 4, 2);
  execution.card = 0;
  execution.pe_index = 0;
  execution.execution_index = 0;
  execution.flow_id = 42;
  SpanRecord conv = span("LowLevelConv2d", Category::NPU, 3'000, 4'000, 5, 4);
  conv.card = 0;
  conv.pe_index = 0;
  conv.instruction_index = 2;
  conv.operator_index = 5;
  SpanRecord load = span("Load", Category::NPU, 2'100, 2'400, 6, 2);
  load.card = 0;
  load.pe_index = 1;
  SpanRecord other = span("Inference2", Category::Runtime, 100, 200, 7, 0);
  other.thread_id = 8;
  for (SpanRecord* r : {&conv, &execution, &other, &load, &enqueue, &inference, &quantize}) {
    profiler.record(*r);
  }
}

/// Writes `profiler`'s trace to a scratch file and parses it back.
json export_and_parse(const Profiler& profiler) {
  TempFile file("chrome");
  profiler.write_chrome_trace(file.path());
  return read_json(file.path());
}

/// The events of `doc` with phase `ph`.
std::vector<json> events_with_phase(const json& doc, const std::string& ph) {
  std::vector<json> out;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == ph) out.push_back(e);
  }
  return out;
}

/// The complete event named `name` (must be unique).
json complete_event(const json& doc, const std::string& name) {
  json found;
  int count = 0;
  for (const auto& e : events_with_phase(doc, "X")) {
    if (e.at("name") == name) {
      found = e;
      ++count;
    }
  }
  REQUIRE(count == 1);
  return found;
}

/// The args.name of the metadata event `kind` ("process_name"/"thread_name") of pid/tid, or "".
std::string metadata_name(const json& doc, const std::string& kind, int pid, int tid) {
  for (const auto& e : events_with_phase(doc, "M")) {
    const bool same_track = e.at("pid") == pid && (kind == "process_name" || e.at("tid") == tid);
    if (e.at("name") == kind && same_track) {
      return e.at("args").at("name").get<std::string>();
    }
  }
  return "";
}

}  // namespace

TEST_CASE("Chrome trace: document header and time base", "[profiler][chrome]") {
  Profiler profiler;
  record_inference(profiler);
  const json doc = export_and_parse(profiler);

  REQUIRE(doc.is_object());
  REQUIRE(doc.at("traceEvents").is_array());
  CHECK(doc.at("displayTimeUnit") == "ns");
  const json& other = doc.at("otherData");
  CHECK(other.at("clock") == "steady_clock");
  CHECK(other.at("schema") == "furiosa-trace/1");
  CHECK(other.at("dropped_events") == 0);
  CHECK(other.at("base_ns").get<std::int64_t>() == kBase);

  // ts/dur in microseconds relative to the first span, with the ns fraction kept.
  const json enqueue = complete_event(doc, "Enqueue");
  CHECK(enqueue.at("ts").get<double>() == Approx(1.5));
  CHECK(enqueue.at("dur").get<double>() == Approx(0.5));
  CHECK(complete_event(doc, "Inference").at("ts").get<double>() == 0.0);
  CHECK(complete_event(doc, "Inference").at("dur").get<double>() == Approx(10.0));
  CHECK(complete_event(doc, "Inference2").at("ts").get<double>() == Approx(0.1));
}

TEST_CASE("Chrome trace: events sorted by ts, complete events well formed", "[profiler][chrome]") {
  Profiler profiler;
  record_inference(profiler);
  const json doc = export_and_parse(profiler);

  double previous = -1;
  for (const auto& e : doc.at("traceEvents")) {
    REQUIRE(e.contains("ts"));
    const double ts = e.at("ts").get<double>();
    CHECK(ts >= previous);
    previous = ts;
  }
  const auto complete = events_with_phase(doc, "X");
  CHECK(complete.size() == 7);
  for (const auto& e : complete) {
    CHECK(e.at("dur").get<double>() >= 0);
    CHECK(e.contains("pid"));
    CHECK(e.contains("tid"));
    CHECK((e.at("cat") == "Runtime" || e.at("cat") == "NPU"));
  }
}

TEST_CASE("Chrome trace: Host and NPU processes with thread and PE tracks", "[profiler][chrome]") {
  Profiler profiler;
  record_inference(profiler);
  const json doc = export_and_parse(profiler);

  CHECK(metadata_name(doc, "process_name", 1, 0) == "Host");
  CHECK(metadata_name(doc, "thread_name", 1, 7) == "Thread 7");
  CHECK(metadata_name(doc, "thread_name", 1, 8) == "Thread 8");
  CHECK(metadata_name(doc, "process_name", 100, 0) == "NPU0");
  CHECK(metadata_name(doc, "thread_name", 100, 1) == "PE 0");
  CHECK(metadata_name(doc, "thread_name", 100, 2002) == "PE 1 Load");  // DMA beside the PE

  const json enqueue = complete_event(doc, "Enqueue");
  CHECK(enqueue.at("pid") == 1);
  CHECK(enqueue.at("tid") == 7);
  CHECK(enqueue.at("cat") == "NPU");  // the category of its flow (Enqueue -> Execution)
  CHECK(complete_event(doc, "Inference").at("cat") == "Runtime");
  const json conv = complete_event(doc, "LowLevelConv2d");
  CHECK(conv.at("pid") == 100);
  CHECK(conv.at("tid") == 1);
  CHECK(conv.at("cat") == "NPU");
  const json load = complete_event(doc, "Load");
  CHECK(load.at("pid") == 100);
  CHECK(load.at("tid") == 2002);
}

TEST_CASE("Chrome trace: args carry ids and attributes", "[profiler][chrome]") {
  Profiler profiler;
  record_inference(profiler);
  const json doc = export_and_parse(profiler);

  const json enqueue = complete_event(doc, "Enqueue").at("args");
  CHECK(enqueue.at("trace_id") == "0123456789abcdeffedcba9876543210");
  CHECK(enqueue.at("span_id") == "0000000000000002");
  CHECK(enqueue.at("parent_span_id") == "0000000000000001");
  CHECK(enqueue.at("thread.id") == 7);
  CHECK(enqueue.at("flow_id") == 42);
  CHECK_FALSE(enqueue.contains("operator_index"));
  CHECK_FALSE(enqueue.contains("pe_index"));

  CHECK(complete_event(doc, "Quantize").at("args").at("operator_index") == 0);
  CHECK(complete_event(doc, "Inference").at("args").at("parent_span_id") == "0000000000000000");

  const json conv = complete_event(doc, "LowLevelConv2d").at("args");
  CHECK(conv.at("span_id") == "0000000000000005");
  CHECK(conv.at("parent_span_id") == "0000000000000004");
  CHECK(conv.at("pe_index") == 0);
  CHECK(conv.at("card") == 0);
  CHECK(conv.at("instruction_index") == 2);
  CHECK(conv.at("operator_index") == 5);
  CHECK_FALSE(conv.contains("execution_index"));
  CHECK(complete_event(doc, "Execution").at("args").at("execution_index") == 0);
}

TEST_CASE("Chrome trace: a flow pair from Enqueue to Execution", "[profiler][chrome]") {
  Profiler profiler;
  record_inference(profiler);
  const json doc = export_and_parse(profiler);

  const auto starts = events_with_phase(doc, "s");
  const auto finishes = events_with_phase(doc, "f");
  REQUIRE(starts.size() == 1);
  REQUIRE(finishes.size() == 1);
  CHECK(events_with_phase(doc, "t").empty());
  const json& s = starts.front();
  const json& f = finishes.front();
  CHECK(s.at("id") == 42);
  CHECK(s.at("id") == f.at("id"));
  CHECK(s.at("cat") == "NPU");
  CHECK(f.at("cat") == "NPU");
  CHECK(s.at("name") == "Enqueue->Execution");
  CHECK(f.at("name") == s.at("name"));
  CHECK(f.at("bp") == "e");

  const json enqueue = complete_event(doc, "Enqueue");
  const json execution = complete_event(doc, "Execution");
  CHECK(s.at("ts") == enqueue.at("ts"));
  CHECK(s.at("pid") == enqueue.at("pid"));
  CHECK(s.at("tid") == enqueue.at("tid"));
  CHECK(f.at("ts") == execution.at("ts"));
  CHECK(f.at("pid") == execution.at("pid"));
  CHECK(f.at("tid") == execution.at("tid"));
  // Chrome DevTools binds each phase to the slice of the same ts, pid, tid and cat, and pairs the
  // phases by cat, name and id (FlowsHandler.ts): exactly one slice per phase, one category.
  CHECK(s.at("cat") == enqueue.at("cat"));
  CHECK(f.at("cat") == execution.at("cat"));
  auto bound = [&](const json& phase) {
    int n = 0;
    for (const auto& e : doc.at("traceEvents")) {
      if (e.at("ph") == "X" && e.at("ts") == phase.at("ts") && e.at("pid") == phase.at("pid") &&
          e.at("tid") == phase.at("tid") && e.at("cat") == phase.at("cat")) {
        ++n;
      }
    }
    return n;
  };
  CHECK(bound(s) == 1);
  CHECK(bound(f) == 1);
}

TEST_CASE("Chrome trace: children lie within their parent on the same track",
          "[profiler][chrome]") {
  Profiler profiler;
  record_inference(profiler);
  // A child starting with its parent and ending with it too: order must still be parent first.
  SpanRecord parent = span("Same", Category::NPU, 9'000, 9'500, 10, 0);
  parent.card = 0;
  parent.pe_index = 1;
  SpanRecord child = span("SameChild", Category::NPU, 9'000, 9'500, 11, 10);
  child.card = 0;
  child.pe_index = 1;
  profiler.record(child);
  profiler.record(parent);
  const json doc = export_and_parse(profiler);

  std::map<std::string, json> by_span_id;
  std::vector<std::string> order;
  for (const auto& e : events_with_phase(doc, "X")) {
    const auto id = e.at("args").at("span_id").get<std::string>();
    by_span_id[id] = e;
    order.push_back(id);
  }
  int checked = 0;
  for (const auto& [id, e] : by_span_id) {
    const auto it = by_span_id.find(e.at("args").at("parent_span_id").get<std::string>());
    if (it == by_span_id.end()) continue;
    const json& p = it->second;
    if (p.at("pid") != e.at("pid") || p.at("tid") != e.at("tid")) continue;  // other track
    CHECK(p.at("ts").get<double>() <= e.at("ts").get<double>());
    CHECK(e.at("ts").get<double>() + e.at("dur").get<double>() <=
          p.at("ts").get<double>() + p.at("dur").get<double>());
    const auto parent_pos = std::find(order.begin(), order.end(), it->first);
    const auto child_pos = std::find(order.begin(), order.end(), id);
    CHECK(parent_pos < child_pos);
    ++checked;
  }
  CHECK(checked == 4);  // Quantize, Enqueue in Inference; conv in Execution; SameChild in Same
}

TEST_CASE("Chrome trace: empty profiler, lone flow ends, bad names, negative durations",
          "[profiler][chrome]") {
  SECTION("no spans") {
    Profiler profiler;
    const json doc = export_and_parse(profiler);
    CHECK(doc.at("traceEvents").is_array());
    CHECK(doc.at("traceEvents").empty());
    CHECK(doc.at("otherData").at("base_ns") == 0);
  }
  SECTION("a flow id on a single span gives no flow events") {
    Profiler profiler;
    SpanRecord enqueue = span("Enqueue", Category::Runtime, 0, 10, 1, 0);
    enqueue.thread_id = 1;
    enqueue.flow_id = 9;
    profiler.record(enqueue);
    const json doc = export_and_parse(profiler);
    CHECK(events_with_phase(doc, "s").empty());
    CHECK(events_with_phase(doc, "f").empty());
    CHECK(events_with_phase(doc, "X").size() == 1);
    CHECK(events_with_phase(doc, "M").size() == 4);  // Host name + sort, thread name + sort
  }
  SECTION("invalid UTF-8 in a name does not break the export") {
    Profiler profiler;
    profiler.record(span("Bad\xff\xfeName", Category::Runtime, 0, 10, 1, 0));
    json doc;
    REQUIRE_NOTHROW(doc = export_and_parse(profiler));
    CHECK(events_with_phase(doc, "X").size() == 1);
  }
  SECTION("a negative duration is clamped to 0") {
    Profiler profiler;
    profiler.record(span("Backwards", Category::Runtime, 100, 50, 1, 0));
    const json doc = export_and_parse(profiler);
    CHECK(complete_event(doc, "Backwards").at("dur").get<double>() == 0.0);
  }
  SECTION("three spans on one flow: s, t, f") {
    Profiler profiler;
    SpanRecord a = span("Enqueue", Category::Runtime, 0, 10, 1, 0);
    SpanRecord b = span("Load", Category::NPU, 20, 30, 2, 1);
    SpanRecord c = span("Execution", Category::NPU, 40, 50, 3, 1);
    for (SpanRecord* r : {&a, &b, &c}) {
      r->flow_id = 5;
      r->card = 1;
      r->pe_index = 0;
      profiler.record(*r);
    }
    const json doc = export_and_parse(profiler);
    REQUIRE(events_with_phase(doc, "s").size() == 1);
    REQUIRE(events_with_phase(doc, "t").size() == 1);
    REQUIRE(events_with_phase(doc, "f").size() == 1);
    CHECK(events_with_phase(doc, "t").front().at("ts").get<double>() == Approx(0.02));
    CHECK(events_with_phase(doc, "f").front().at("name") == "Enqueue->Execution");
    CHECK(metadata_name(doc, "process_name", 101, 0) == "NPU1");
  }
}
