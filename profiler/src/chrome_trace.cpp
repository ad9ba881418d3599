// Chrome Trace Event Format exporter (loads in chrome://tracing and the Perfetto UI).
//
// Document:
//   {"traceEvents": [...], "displayTimeUnit": "ns",
//    "otherData": {"clock": "steady_clock", "schema": "furiosa-trace/1", "dropped_events": 0,
//                  "base_ns": <steady-clock ns of the earliest span start, 0 when no spans>}}
//
// Times: "ts" and "dur" are microseconds (the format's unit) as doubles carrying the ns fraction
// (ns / 1000.0). "ts" is relative to base_ns so the values stay small and exact to the ns in a
// double; add base_ns * 1e-3 to get back to the absolute steady clock of now_ns().
//
// Tracks:
//   - Runtime spans: process pid 1 "Host", one thread track per host thread, tid = thread_id,
//     named "Thread <thread_id>".
//   - NPU spans: process pid 100 + card named "NPU<card>" (card < 0 is shown as card 0), one
//     thread track per PE, tid = pe_index + 1 named "PE <pe_index>" (tid 0 "Device" when the span
//     has no PE), so each PE gets its own track.
//   Metadata events ("ph":"M": process_name, process_sort_index, thread_name, thread_sort_index)
//   come first with "ts": 0; every other event follows in span order, so the whole array is
//   sorted by "ts".
//
// Spans: one complete event ("ph":"X") each, with "name", "cat" ("Runtime"/"NPU"), "ts", "dur"
// (a negative duration is clamped to 0), "pid", "tid" and "args":
//   trace_id (32 hex digits), span_id and parent_span_id (16 hex digits each, as strings: the
//   64-bit ids would lose precision as JSON numbers in JavaScript viewers), thread.id (number),
//   and when >= 0: card (NPU spans), pe_index, execution_index, instruction_index,
//   operator_index; flow_id (number) when non-zero.
//
// Flows: the spans sharing a non-zero flow_id (an Enqueue and its Execution) are linked by flow
// events with "id": flow_id, "cat": "flow", "name": "<first span name>-><last span name>" (e.g.
// "Enqueue->Execution"): "ph":"s" at the earliest span's start on its track, "ph":"f" with
// "bp":"e" (bind to the enclosing slice) at the latest span's start on its track, and "ph":"t"
// at the start of any span in between. A flow_id carried by a single span (the other end was
// dropped, e.g. while paused) produces no flow events.
#include "chrome_trace.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "span_order.h"

namespace furiosa::profiler::detail {
namespace {

using nlohmann::json;

/// The process/thread track a span is drawn on.
struct Track {
  int pid = 0;
  std::int64_t tid = 0;
};

/// Card index used for the track of an NPU span (unknown cards are shown as card 0).
int card_of(const SpanRecord& span) noexcept { return span.card >= 0 ? span.card : 0; }

/// Track of a span: host thread for Runtime spans, card and PE for NPU spans.
Track track_of(const SpanRecord& span) noexcept {
  if (span.cat == Category::NPU) {
    const std::int64_t tid = span.pe_index >= 0 ? std::int64_t{span.pe_index} + 1 : 0;
    return Track{kNpuPidBase + card_of(span), tid};
  }
  return Track{kHostPid, static_cast<std::int64_t>(span.thread_id)};
}

/// ns relative to the base -> the format's microseconds, keeping the ns fraction.
double to_us(std::int64_t ns) noexcept { return static_cast<double>(ns) / 1000.0; }

/// A 64-bit id as 16 lowercase hex digits.
std::string hex16(std::uint64_t v) { return fmt::format("{:016x}", v); }

/// One metadata ("ph":"M") event naming or ordering a process or thread.
json metadata_event(const char* name, int pid, std::int64_t tid, json args) {
  return json{{"ph", "M"}, {"name", name}, {"pid", pid},
              {"tid", tid}, {"ts", 0},     {"args", std::move(args)}};
}

/// Metadata events of every process and thread track used by `spans`: the Host process first,
/// then the NPU cards in index order, each thread track ordered by tid.
void append_metadata(const std::vector<SpanRecord>& spans, json& events) {
  std::set<std::int64_t> host_threads;
  std::map<int, std::set<std::int64_t>> npu_tracks;  // card -> tids
  for (const SpanRecord& span : spans) {
    const Track track = track_of(span);
    if (span.cat == Category::NPU) {
      npu_tracks[card_of(span)].insert(track.tid);
    } else {
      host_threads.insert(track.tid);
    }
  }
  if (!host_threads.empty()) {
    events.push_back(metadata_event("process_name", kHostPid, 0, {{"name", "Host"}}));
    events.push_back(metadata_event("process_sort_index", kHostPid, 0, {{"sort_index", 0}}));
    for (const std::int64_t tid : host_threads) {
      events.push_back(
          metadata_event("thread_name", kHostPid, tid, {{"name", fmt::format("Thread {}", tid)}}));
      events.push_back(metadata_event("thread_sort_index", kHostPid, tid, {{"sort_index", tid}}));
    }
  }
  for (const auto& [card, tids] : npu_tracks) {
    const int pid = kNpuPidBase + card;
    events.push_back(
        metadata_event("process_name", pid, 0, {{"name", fmt::format("NPU{}", card)}}));
    events.push_back(metadata_event("process_sort_index", pid, 0, {{"sort_index", 1 + card}}));
    for (const std::int64_t tid : tids) {
      const std::string name = tid > 0 ? fmt::format("PE {}", tid - 1) : std::string("Device");
      events.push_back(metadata_event("thread_name", pid, tid, {{"name", name}}));
      events.push_back(metadata_event("thread_sort_index", pid, tid, {{"sort_index", tid}}));
    }
  }
}

/// The flow event to emit at the start of one span: its phase ('s', 't' or 'f'; 0 = none) and
/// the name shared by all events of the flow (viewers match flow events by id, cat and name).
struct FlowMark {
  char phase = 0;
  std::string name;
};

/// Flow marks indexed like `spans` (which are in span order, so "first" means earliest start).
std::vector<FlowMark> flow_marks(const std::vector<SpanRecord>& spans) {
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (spans[i].flow_id != 0) groups[spans[i].flow_id].push_back(i);
  }
  std::vector<FlowMark> marks(spans.size());
  for (const auto& [flow_id, members] : groups) {
    if (members.size() < 2) continue;
    const std::string name = spans[members.front()].name + "->" + spans[members.back()].name;
    for (std::size_t k = 0; k < members.size(); ++k) {
      const char phase = k == 0 ? 's' : (k + 1 == members.size() ? 'f' : 't');
      marks[members[k]] = FlowMark{phase, name};
    }
  }
  return marks;
}

/// The "args" object of a span's complete event.
json span_args(const SpanRecord& span) {
  json args{{"trace_id", span.trace_id.to_hex()},
            {"span_id", hex16(span.span_id)},
            {"parent_span_id", hex16(span.parent_span_id)},
            {"thread.id", span.thread_id}};
  if (span.cat == Category::NPU && span.card >= 0) args["card"] = span.card;
  if (span.pe_index >= 0) args["pe_index"] = span.pe_index;
  if (span.execution_index >= 0) args["execution_index"] = span.execution_index;
  if (span.instruction_index >= 0) args["instruction_index"] = span.instruction_index;
  if (span.operator_index >= 0) args["operator_index"] = span.operator_index;
  if (span.flow_id != 0) args["flow_id"] = span.flow_id;
  return args;
}

}  // namespace

json chrome_trace_document(std::vector<SpanRecord> spans) {
  sort_spans(spans);
  const std::int64_t base_ns = spans.empty() ? 0 : spans.front().start_ns;

  json events = json::array();
  append_metadata(spans, events);
  const std::vector<FlowMark> marks = flow_marks(spans);
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const SpanRecord& span = spans[i];
    const Track track = track_of(span);
    const double ts = to_us(span.start_ns - base_ns);
    const std::int64_t dur_ns = span.dur_ns() > 0 ? span.dur_ns() : 0;
    events.push_back(json{{"ph", "X"},
                          {"name", span.name},
                          {"cat", category_name(span.cat)},
                          {"ts", ts},
                          {"dur", to_us(dur_ns)},
                          {"pid", track.pid},
                          {"tid", track.tid},
                          {"args", span_args(span)}});
    const FlowMark& mark = marks[i];
    if (mark.phase != 0) {
      json flow{{"ph", std::string(1, mark.phase)},
                {"name", mark.name},
                {"cat", "flow"},
                {"id", span.flow_id},
                {"ts", ts},
                {"pid", track.pid},
                {"tid", track.tid}};
      if (mark.phase == 'f') flow["bp"] = "e";
      events.push_back(std::move(flow));
    }
  }

  return json{{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ns"},
              {"otherData",
               {{"clock", "steady_clock"},
                {"schema", kTraceSchema},
                {"dropped_events", 0},
                {"base_ns", base_ns}}}};
}

void write_chrome_trace_file(const std::filesystem::path& path, std::vector<SpanRecord> spans) {
  // Replace invalid UTF-8 (a span name is arbitrary bytes) instead of throwing from dump().
  const std::string text =
      chrome_trace_document(std::move(spans))
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    const int err = errno;
    throw std::runtime_error(fmt::format("cannot open trace file '{}' for writing{}{}",
                                         path.string(), err != 0 ? ": " : "",
                                         err != 0 ? std::strerror(err) : ""));
  }
  out << text << '\n';
  out.close();
  if (!out) {
    throw std::runtime_error(fmt::format("failed to write trace file '{}'", path.string()));
  }
}

}  // namespace furiosa::profiler::detail
