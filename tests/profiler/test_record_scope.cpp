// Record scopes (Profiler::record("label")) as parents of the runtime's spans, the span tree of
// one inference, and record/pause/resume as in the SDK's example.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "furiosa/profiler/device_execution.h"
#include "furiosa/profiler/profiler.h"

using namespace furiosa::profiler;

namespace {

/// One inference recorded the way the runtime records it: Inference under the current record
/// scope on this thread, host stages under it, and the device spans of one execution added after
/// the fact with record_device_execution(), as the runtime adds them.
void fake_inference(Profiler& profiler) {
  ScopedSpan inference(&profiler, "Inference", profiler.current_context());
  const SpanContext ctx = inference.context();
  { ScopedSpan q(&profiler, "Quantize", ctx); q.record().operator_index = 0; }
  const std::uint64_t flow = profiler.next_flow_id();
  std::int64_t submitted = 0;
  {
    ScopedSpan enqueue(&profiler, "Enqueue", ctx);
    enqueue.record().flow_id = flow;
    submitted = now_ns();
  }
  if (profiler.is_recording()) {
    // Device times inside [submitted, now]: the device ran after the submit, before this.
    const std::int64_t done = now_ns();
    const std::int64_t step = std::max<std::int64_t>((done - submitted) / 5, 0);
    const std::int64_t t = submitted;
    DeviceExecution e;
    e.card = 0;
    e.pe_index = 0;
    e.execution_index = 0;
    e.load_start_ns = t;
    e.load_end_ns = e.exec_start_ns = t + step;
    e.exec_end_ns = e.store_start_ns = t + 3 * step;
    e.store_end_ns = t + 4 * step;
    e.kernels.push_back({"LowLevelConv2d", t + step, t + 2 * step, /*operator_index=*/-1, /*instruction_index=*/0});
    record_device_execution(profiler, e, ctx, flow);
  }
  { ScopedSpan d(&profiler, "Dequantize", ctx); d.record().operator_index = 2; }
}

std::vector<SpanRecord> named(const std::vector<SpanRecord>& spans, const std::string& name) {
  std::vector<SpanRecord> out;
  for (const SpanRecord& s : spans) {
    if (s.name == name) out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("span tree of one inference: names, parents, nesting, categories",
          "[profiler][scope]") {
  Profiler profiler;
  fake_inference(profiler);
  const auto spans = profiler.records();
  REQUIRE(spans.size() == 8);
  std::map<std::string, SpanRecord> by_name;
  for (const SpanRecord& s : spans) by_name[s.name] = s;
  const SpanRecord& inference = by_name.at("Inference");
  CHECK(inference.parent_span_id == 0);  // no record scope: a root
  CHECK(inference.cat == Category::Runtime);
  for (const char* child : {"Quantize", "Enqueue", "Dequantize", "Load", "Execution", "Store"}) {
    INFO(child);
    const SpanRecord& s = by_name.at(child);
    CHECK(s.parent_span_id == inference.span_id);
    CHECK(s.trace_id == inference.trace_id);
  }
  for (const char* host : {"Quantize", "Enqueue", "Dequantize"}) {
    const SpanRecord& s = by_name.at(host);
    CHECK(s.cat == Category::Runtime);
    CHECK(s.start_ns >= inference.start_ns);
    CHECK(s.end_ns <= inference.end_ns);
  }
  for (const char* device : {"Load", "Execution", "LowLevelConv2d", "Store"}) {
    CHECK(by_name.at(device).cat == Category::NPU);
  }
  CHECK(by_name.at("LowLevelConv2d").parent_span_id == by_name.at("Execution").span_id);
  CHECK(by_name.at("Enqueue").flow_id == by_name.at("Execution").flow_id);
  CHECK(by_name.at("Enqueue").flow_id != 0);
  // Host stages in order, without overlap.
  CHECK(by_name.at("Quantize").end_ns <= by_name.at("Enqueue").start_ns);
  CHECK(by_name.at("Enqueue").end_ns <= by_name.at("Dequantize").start_ns);
}

TEST_CASE("record scopes are the parents of the spans started inside them",
          "[profiler][scope]") {
  Profiler profiler;
  CHECK_FALSE(profiler.current_context().valid());
  std::uint64_t warm_id = 0, inner_id = 0;
  {
    RecordScope warm = profiler.record("warm up");
    REQUIRE(warm.active());
    warm_id = warm.context().span_id;
    CHECK(profiler.current_context().span_id == warm_id);
    CHECK(profiler.current_context().trace_id == warm.context().trace_id);
    for (int i = 0; i < 3; ++i) fake_inference(profiler);
    {
      auto inner = profiler.record(std::string("inner"));
      inner_id = inner.context().span_id;
      CHECK(profiler.current_context().span_id == inner_id);
      fake_inference(profiler);
    }
    CHECK(profiler.current_context().span_id == warm_id);
  }
  CHECK_FALSE(profiler.current_context().valid());
  fake_inference(profiler);  // outside any scope: a root of its own trace

  const auto spans = profiler.records();
  const auto warm = named(spans, "warm up");
  const auto inner = named(spans, "inner");
  REQUIRE(warm.size() == 1);
  REQUIRE(inner.size() == 1);
  CHECK(warm[0].span_id == warm_id);
  CHECK(warm[0].parent_span_id == 0);
  CHECK(warm[0].cat == Category::Runtime);
  CHECK(inner[0].parent_span_id == warm_id);
  CHECK(inner[0].trace_id == warm[0].trace_id);
  CHECK(inner[0].start_ns >= warm[0].start_ns);
  CHECK(inner[0].end_ns <= warm[0].end_ns);

  const auto inferences = named(spans, "Inference");
  REQUIRE(inferences.size() == 5);
  int under_warm = 0, under_inner = 0, roots = 0;
  for (const SpanRecord& inf : inferences) {
    if (inf.parent_span_id == warm_id) {
      ++under_warm;
      CHECK(inf.trace_id == warm[0].trace_id);
      CHECK(inf.start_ns >= warm[0].start_ns);
      CHECK(inf.end_ns <= warm[0].end_ns);
    } else if (inf.parent_span_id == inner_id) {
      ++under_inner;
      CHECK(inf.end_ns <= inner[0].end_ns);
    } else {
      ++roots;
      CHECK(inf.parent_span_id == 0);
      CHECK_FALSE(inf.trace_id == warm[0].trace_id);
      CHECK(inf.start_ns >= warm[0].end_ns);
    }
  }
  CHECK(under_warm == 3);
  CHECK(under_inner == 1);
  CHECK(roots == 1);
}

TEST_CASE("current_context is per thread and per profiler", "[profiler][scope]") {
  Profiler a;
  Profiler b;
  auto outer_a = a.record("A outer");
  CHECK(a.current_context().span_id == outer_a.context().span_id);
  CHECK_FALSE(b.current_context().valid());
  {
    auto scope_b = b.record("B");
    auto inner_a = a.record("A inner");
    CHECK(a.current_context().span_id == inner_a.context().span_id);
    CHECK(b.current_context().span_id == scope_b.context().span_id);
    CHECK(inner_a.context().trace_id == outer_a.context().trace_id);

    // Another thread sees none of this thread's scopes.
    SpanContext seen_a{TraceId{9, 9}, 9}, seen_b{TraceId{9, 9}, 9};
    std::thread other([&] {
      seen_a = a.current_context();
      seen_b = b.current_context();
    });
    other.join();
    CHECK_FALSE(seen_a.valid());
    CHECK_FALSE(seen_b.valid());
  }
  CHECK(a.current_context().span_id == outer_a.context().span_id);
  CHECK_FALSE(b.current_context().valid());
}

TEST_CASE("record scopes ending out of order unlink themselves", "[profiler][scope]") {
  Profiler profiler;
  auto first = std::make_unique<RecordScope>(&profiler, "first");
  auto second = std::make_unique<RecordScope>(&profiler, "second");
  const std::uint64_t second_id = second->context().span_id;
  CHECK(second->context().trace_id == first->context().trace_id);
  first.reset();  // the older scope ends first
  CHECK(profiler.current_context().span_id == second_id);
  second.reset();
  CHECK_FALSE(profiler.current_context().valid());
  CHECK(profiler.records().size() == 2);
}

TEST_CASE("a record scope of a null or paused profiler is inactive", "[profiler][scope]") {
  RecordScope none(nullptr, "nothing");
  CHECK_FALSE(none.active());
  CHECK_FALSE(none.context().valid());

  Profiler profiler;
  profiler.pause();
  {
    auto scope = profiler.record("paused");
    CHECK_FALSE(scope.active());
    CHECK_FALSE(profiler.current_context().valid());  // not a parent
    profiler.resume();
    fake_inference(profiler);  // recorded, as a root
    profiler.pause();
  }
  profiler.resume();
  const auto spans = profiler.records();
  CHECK(named(spans, "paused").empty());
  REQUIRE(named(spans, "Inference").size() == 1);
  CHECK(named(spans, "Inference")[0].parent_span_id == 0);
}

// The SDK's example: record "warm up", pause, run unrecorded, resume, record "trace"; the
// DataFrame then has exactly the spans of the recorded regions.
TEST_CASE("record, pause and resume: a paused region has no spans", "[profiler][scope]") {
  Profiler profiler;
  {
    auto warm = profiler.record("warm up");
    for (int i = 0; i < 2; ++i) fake_inference(profiler);
  }
  profiler.pause();
  profiler.pause();  // idempotent
  const std::int64_t paused_at = now_ns();
  for (int i = 0; i < 50; ++i) fake_inference(profiler);
  {
    auto ignored = profiler.record("ignored");
    fake_inference(profiler);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the clock keeps running
  const std::int64_t resumed_at = now_ns();
  profiler.resume();
  profiler.resume();  // idempotent
  {
    auto trace = profiler.record("trace");
    for (int i = 0; i < 2; ++i) fake_inference(profiler);
  }

  const auto spans = profiler.records();
  CHECK(named(spans, "warm up").size() == 1);
  CHECK(named(spans, "trace").size() == 1);
  CHECK(named(spans, "ignored").empty());
  CHECK(named(spans, "Inference").size() == 4);
  CHECK(spans.size() == 2 + 4 * 8);
  for (const SpanRecord& s : spans) {
    INFO(s.name);
    // Nothing starts or ends in the paused region.
    CHECK_FALSE((s.start_ns >= paused_at && s.start_ns <= resumed_at));
    CHECK_FALSE((s.end_ns >= paused_at && s.end_ns <= resumed_at));
  }
  const SpanRecord trace = named(spans, "trace").at(0);
  CHECK(trace.start_ns > resumed_at);
  CHECK(trace.start_ns - named(spans, "warm up").at(0).end_ns >= 2'000'000);
  const RecordTable table = profiler.record_table();
  CHECK(table.filter_by_name("Inference").size() == 4);
  CHECK(table.filter_by_name("trace").size() == 1);
}
