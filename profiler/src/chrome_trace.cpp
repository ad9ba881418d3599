// Chrome Trace Event Format exporter (loads in chrome://tracing and the Perfetto UI).
//
// Document:
//   {"traceEvents": [...], "displayTimeUnit": "ns",
//    "otherData": {"clock": "steady_clock", "schema": "furiosa-trace/1",
//                  "dropped_events": <spans not kept because of max_events>,
//                  "epoch_offset_ns": <system_clock - steady_clock, ns>,
//                  "base_ns": <steady-clock ns of the earliest span start, 0 when no spans>}}
//
// Times: "ts" and "dur" are microseconds (the format's unit) as doubles carrying the ns fraction
// (ns / 1000.0). "ts" is relative to base_ns so the values stay small and exact to the ns in a
// double; add base_ns * 1e-3 to get back to the absolute steady clock of now_ns(), and
// epoch_offset_ns to get ns since the Unix epoch.
//
// Tracks:
//   - Runtime spans: process pid 1 "Host", one thread track per host thread, tid = thread_id,
//     named "Thread <thread_id>" (or "<name> (thread <thread_id>)" after
//     set_current_thread_name()).
//   - NPU spans: process pid 100 + card named "NPU<card>" (card < 0 is shown as card 0), one
//     thread track per PE, tid = pe_index + 1 named "PE <pe_index>" (tid 0 "Device" when the span
//     has no PE), so each PE gets its own track.
//   - The simulator's host lateness (SimOverrun spans: from the modelled Store end to the time
//     the host finished computing the execution) goes to a track of its own per PE,
//     tid = 1000 + pe_index + 1 named "PE <pe_index> host lateness": it is host time, and the
//     modelled device may already run the next execution during it.
//   - Load and Store spans go to "PE <pe_index> Load" (tid 2000 + pe_index + 1) and "PE
//     <pe_index> Store" (tid 3000 + pe_index + 1): the DMA engines run beside the PE, so a
//     queued execution's Load overlaps the kernels before it, and the PE's track keeps only the
//     Executions and their kernels, which never overlap.
//   - Overflow lanes: slices on one track must nest (a viewer draws a partial overlap wrongly).
//     A span that would partially overlap an open span of its track (e.g. two Inference spans in
//     flight from one submitting thread, whose ends are recorded by workers) goes to the first
//     lane k >= 1 where it nests: tid + k * 100000, named "<track name> (overlap k)". So the X
//     events of every (pid, tid) are balanced and properly nested.
//   Metadata events ("ph":"M": process_name, process_sort_index, thread_name, thread_sort_index)
//   come first with "ts": 0; every other event follows sorted by "ts" (stable: complete events
//   keep span order, so a parent precedes the children starting with it).
//
// Spans: one complete event ("ph":"X") each, with "name", "cat" ("Runtime"/"NPU"), "ts", "dur"
// (a negative duration is clamped to 0), "pid", "tid" and "args". A zero-length span with the
// attribute event=instant (the runtime's DeviceTimeout / DeviceReset / DeviceLost marks on a PE's
// track) is an instant event instead: "ph":"i", "s":"t", no "dur".
// Nesting survives the conversion to microseconds: "ts" is the double nearest to start/1000 and
// "dur" is chosen (within a few ulps of dur/1000) so that ts + dur, added in double precision as
// viewers do, is exactly the double nearest to end/1000. Rounding to nearest is monotonic, so a
// child ending at or before its parent's end (in ns) also does so in the viewer's arithmetic, and
// a slice starting at or after its sibling's end does not overlap it; reading the values back
// with llround(x * 1000) gives the ns exactly. The args are:
//   trace_id (32 hex digits), span_id and parent_span_id (16 hex digits each, as strings: the
//   64-bit ids would lose precision as JSON numbers in JavaScript viewers), thread.id (number),
//   and when >= 0: card (NPU spans), pe_index, execution_index, instruction_index,
//   operator_index, dram_base, cycles; flow_id (number) when non-zero.
//
// Flows: the spans sharing a non-zero flow_id (an Enqueue and its Execution) are linked by flow
// events with "id": flow_id, "name": "<first span name>-><last span name>" (e.g.
// "Enqueue->Execution"): "ph":"s" at the earliest span's start on its track, "ph":"f" with
// "bp":"e" (bind to the enclosing slice) at the latest span's start on its track, and "ph":"t"
// at the start of any span in between, each with exactly its slice's "ts", "pid" and "tid". A
// flow_id carried by a single span (the other end was dropped, e.g. while paused) produces no
// flow events. Chrome DevTools binds a flow event to the slice with the same ts, pid, tid AND cat,
// and pairs the events of one flow by cat, name and id (front_end/models/trace/handlers/
// FlowsHandler.ts), so one category must hold the whole flow: the flow events and every slice of
// the flow carry the category of its last span ("NPU" for Enqueue -> Execution; the Enqueue
// slice, the host's submission to the NPU's queue, is written "NPU" although it is a Runtime
// span). Perfetto binds by thread and time alone and draws the same arrows. The reader takes a
// span's category from its process (pid 1 Host = Runtime, pid >= 100 = NPU), so the round trip
// keeps Enqueue a Runtime span.
//
// Counters ("ph":"C", "cat":"NPU", on the card's process, computed from the spans at export):
//   - "Queue depth PE <pe>" {"depth": n}: executions in flight on the device whose first PE is
//     <pe>: +1 at the start of the Enqueue sharing the Execution's flow_id (the Load start when
//     there is none), -1 at the Store end (the Execution end when there is none).
//   - "NPU utilisation PE <pe>" {"utilisation": f}: per execution window (Load start .. Store
//     end), f = NPU Run / NPU Total (fraction of the window spent in kernels), 0 between windows.
//   One event per distinct timestamp, carrying the value after every change at that time.
#include "chrome_trace.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "analysis.h"
#include "output_file.h"
#include "span_order.h"

namespace furiosa::profiler::detail {
namespace {

using nlohmann::json;

/// The process/thread track a span is drawn on.
struct Track {
  int pid = 0;
  std::int64_t tid = 0;
  auto operator<=>(const Track&) const = default;
};

/// Card index used for the track of an NPU span (unknown cards are shown as card 0).
int card_of(const SpanRecord& span) noexcept { return span.card >= 0 ? span.card : 0; }

/// Base track of a span: host thread for Runtime spans, card and PE for NPU spans, the PE's
/// host-lateness track for SimOverrun spans, its Load and Store tracks for those DMA spans.
Track base_track_of(const SpanRecord& span) noexcept {
  if (span.cat == Category::NPU) {
    std::int64_t tid = span.pe_index >= 0 ? std::int64_t{span.pe_index} + 1 : 0;
    if (span.name == kOverrunSpan) tid += kLatenessTidBase;
    if (span.name == "Load") tid += kLoadTidBase;
    if (span.name == "Store") tid += kStoreTidBase;
    return Track{kNpuPidBase + card_of(span), tid};
  }
  return Track{kHostPid, static_cast<std::int64_t>(span.thread_id)};
}

/// End of a span as drawn (a negative duration is clamped to 0).
std::int64_t drawn_end(const SpanRecord& span) noexcept {
  return std::max(span.start_ns, span.end_ns);
}

/// Tracks of `spans` (in span order) with overflow lanes, so that the slices of every track
/// nest: each lane keeps the ends of its open slices as a stack.
std::vector<Track> assign_tracks(const std::vector<SpanRecord>& spans) {
  std::map<Track, std::vector<std::vector<std::int64_t>>> lanes;  // base -> lane -> open ends
  std::vector<Track> tracks;
  tracks.reserve(spans.size());
  for (const SpanRecord& span : spans) {
    const Track base = base_track_of(span);
    const std::int64_t end = drawn_end(span);
    auto& stacks = lanes[base];
    std::size_t lane = 0;
    for (;; ++lane) {
      if (lane == stacks.size()) stacks.emplace_back();
      auto& open = stacks[lane];
      while (!open.empty() && open.back() <= span.start_ns) open.pop_back();
      if (open.empty() || end <= open.back()) break;
    }
    stacks[lane].push_back(end);
    tracks.push_back(Track{base.pid, base.tid + static_cast<std::int64_t>(lane) * kLaneTidStride});
  }
  return tracks;
}

/// ns relative to the base -> the format's microseconds, keeping the ns fraction.
double to_us(std::int64_t ns) noexcept { return static_cast<double>(ns) / 1000.0; }

/// The "dur" (us) of a slice starting at `ts_us` = to_us(start_ns) and lasting `dur_ns` >= 0:
/// a double d within rounding of dur_ns / 1000 for which ts_us + d (double addition, as viewers
/// compute a slice's end) is exactly end_us = to_us(start_ns + dur_ns). d = end_us - ts_us is
/// exact when end_us <= 2 ts_us (Sterbenz), and then ts_us + d == end_us; otherwise d >= end_us / 2,
/// so one ulp of d moves the sum by at most an ulp and a few nextafter steps reach end_us.
/// llround(d * 1000) == dur_ns still (the error is far below 0.5 ns).
double exact_dur_us(double ts_us, std::int64_t start_ns, std::int64_t dur_ns) noexcept {
  const double end_us = to_us(start_ns + dur_ns);
  double d = end_us - ts_us;
  for (int i = 0; i < 64 && ts_us + d < end_us; ++i) d = std::nextafter(d, end_us);
  for (int i = 0; i < 64 && ts_us + d > end_us; ++i) d = std::nextafter(d, 0.0);
  return d;
}

/// A 64-bit id as 16 lowercase hex digits.
std::string hex16(std::uint64_t v) { return fmt::format("{:016x}", v); }

/// One metadata ("ph":"M") event naming or ordering a process or thread.
json metadata_event(const char* name, int pid, std::int64_t tid, json args) {
  return json{{"ph", "M"}, {"name", name}, {"pid", pid},
              {"tid", tid}, {"ts", 0},     {"args", std::move(args)}};
}

/// Display name of a track.
std::string track_name(const Track& track) {
  const std::int64_t lane = track.tid / kLaneTidStride;
  const std::int64_t tid = track.tid % kLaneTidStride;
  std::string name;
  if (track.pid == kHostPid) {
    const std::string given = thread_name(static_cast<std::uint64_t>(tid));
    name = given.empty() ? fmt::format("Thread {}", tid) : fmt::format("{} (thread {})", given, tid);
  } else {
    const std::int64_t base = tid / kLatenessTidBase * kLatenessTidBase;  // 0, or a *TidBase
    const std::int64_t pe_tid = tid - base;
    name = pe_tid > 0 ? fmt::format("PE {}", pe_tid - 1) : std::string("Device");
    if (base == kLatenessTidBase) name += " host lateness";
    if (base == kLoadTidBase) name += " Load";
    if (base == kStoreTidBase) name += " Store";
  }
  if (lane > 0) name += fmt::format(" (overlap {})", lane);
  return name;
}

/// Metadata events of every process and thread track in `tracks`: the Host process first,
/// then the NPU cards in index order, each thread track ordered by tid.
void append_metadata(const std::vector<Track>& tracks, json& events) {
  std::map<int, std::set<std::int64_t>> processes;  // pid -> tids; kHostPid sorts first
  for (const Track& track : tracks) processes[track.pid].insert(track.tid);
  for (const auto& [pid, tids] : processes) {
    const bool host = pid == kHostPid;
    const int card = pid - kNpuPidBase;
    events.push_back(metadata_event(
        "process_name", pid, 0, {{"name", host ? std::string("Host") : fmt::format("NPU{}", card)}}));
    events.push_back(
        metadata_event("process_sort_index", pid, 0, {{"sort_index", host ? 0 : 1 + card}}));
    for (const std::int64_t tid : tids) {
      events.push_back(metadata_event("thread_name", pid, tid, {{"name", track_name({pid, tid})}}));
      events.push_back(metadata_event("thread_sort_index", pid, tid, {{"sort_index", tid}}));
    }
  }
}

/// The flow event to emit at the start of one span: its phase ('s', 't' or 'f'; 0 = none) and
/// the name shared by all events of the flow (viewers match flow events by id, cat and name).
struct FlowMark {
  char phase = 0;
  std::string name;
  std::string_view cat;  ///< the flow's category: its last span's, for its events and slices
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
    const std::string_view cat = category_name(spans[members.back()].cat);
    for (std::size_t k = 0; k < members.size(); ++k) {
      const char phase = k == 0 ? 's' : (k + 1 == members.size() ? 'f' : 't');
      marks[members[k]] = FlowMark{phase, name, cat};
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
  if (span.dram_base >= 0) args["dram_base"] = span.dram_base;
  if (span.cycles >= 0) args["cycles"] = span.cycles;
  if (span.flow_id != 0) args["flow_id"] = span.flow_id;
  for (const auto& [key, value] : span.attributes) {
    if (!args.contains(key)) args[key] = value;  // never shadows a typed field
  }
  return args;
}

/// An event with its time, to be sorted by time before it is written.
struct TimedEvent {
  std::int64_t ts_ns = 0;  ///< absolute steady-clock ns
  json event;
};

/// One change of a counter: at `ts_ns`, add `delta` (queue depth) or set `value` (utilisation).
struct CounterStep {
  std::int64_t ts_ns = 0;
  int order = 0;  ///< steps at one time apply in this order (ends before starts)
  double delta_or_value = 0;
};

/// Sorts `steps`, applies them (accumulating when `accumulate`, else setting) and appends one
/// counter event per distinct time with the value after all the steps at that time.
void append_counter(std::vector<CounterStep> steps, bool accumulate, const std::string& name,
                    const char* series, int pid, std::vector<TimedEvent>& out) {
  std::stable_sort(steps.begin(), steps.end(), [](const CounterStep& a, const CounterStep& b) {
    return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.order < b.order;
  });
  double value = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    value = accumulate ? value + steps[i].delta_or_value : steps[i].delta_or_value;
    if (i + 1 < steps.size() && steps[i + 1].ts_ns == steps[i].ts_ns) continue;
    json args = json::object();
    if (accumulate) {
      args[series] = static_cast<std::int64_t>(value);
    } else {
      args[series] = value;
    }
    out.push_back(TimedEvent{steps[i].ts_ns, json{{"ph", "C"},
                                                  {"name", name},
                                                  {"cat", "NPU"},
                                                  {"pid", pid},
                                                  {"tid", 0},
                                                  {"args", std::move(args)}}});
  }
}

/// The queue-depth and utilisation counters of every device (see the file comment).
void append_counters(const std::vector<SpanRecord>& spans, std::vector<TimedEvent>& out) {
  const std::vector<ExecutionWindow> windows = execution_windows(spans);
  if (windows.empty()) return;
  std::unordered_map<std::uint64_t, std::int64_t> enqueue_start;  // flow_id -> host start
  for (const SpanRecord& s : spans) {
    if (s.flow_id == 0 || s.cat == Category::NPU) continue;
    const auto [it, inserted] = enqueue_start.emplace(s.flow_id, s.start_ns);
    if (!inserted) it->second = std::min(it->second, s.start_ns);
  }
  struct Device {
    std::vector<CounterStep> depth, utilisation;
  };
  std::map<std::pair<int, std::int32_t>, Device> devices;  // (card, first PE)
  for (const ExecutionWindow& w : windows) {
    const SpanRecord& e = spans[w.execution];
    Device& device = devices[{card_of(e), e.pe_index}];
    std::int64_t submitted = w.start_ns;
    if (e.flow_id != 0) {
      if (const auto it = enqueue_start.find(e.flow_id); it != enqueue_start.end()) {
        submitted = std::min(it->second, w.start_ns);
      }
    }
    device.depth.push_back(CounterStep{submitted, 1, +1.0});
    device.depth.push_back(CounterStep{w.end_ns, 0, -1.0});
    const double busy = w.total_ns > 0 ? static_cast<double>(w.run_ns) /
                                             static_cast<double>(w.total_ns)
                                       : 0.0;
    device.utilisation.push_back(CounterStep{w.start_ns, 1, busy});
    device.utilisation.push_back(CounterStep{w.end_ns, 0, 0.0});
  }
  for (auto& [key, device] : devices) {
    const auto& [card, pe] = key;
    const int pid = kNpuPidBase + card;
    const std::string where = pe >= 0 ? fmt::format("PE {}", pe) : std::string("Device");
    append_counter(std::move(device.depth), true, "Queue depth " + where, "depth", pid, out);
    append_counter(std::move(device.utilisation), false, "NPU utilisation " + where,
                   "utilisation", pid, out);
  }
}

}  // namespace

/// True for a zero-length span marked as an instant event (attribute event=instant).
static bool is_instant(const SpanRecord& span) {
  if (span.end_ns != span.start_ns) return false;
  for (const auto& [key, value] : span.attributes) {
    if (key == "event" && value == "instant") return true;
  }
  return false;
}

json chrome_trace_document(std::vector<SpanRecord> spans, const TraceInfo& info) {
  sort_spans(spans);
  const std::int64_t base_ns = spans.empty() ? 0 : spans.front().start_ns;
  const std::vector<Track> tracks = assign_tracks(spans);

  json events = json::array();
  append_metadata(tracks, events);

  std::vector<TimedEvent> timed;
  timed.reserve(spans.size() + spans.size() / 4);
  const std::vector<FlowMark> marks = flow_marks(spans);
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const SpanRecord& span = spans[i];
    const Track& track = tracks[i];
    const std::int64_t rel_start = span.start_ns - base_ns;
    const double ts = to_us(rel_start);
    const double dur = exact_dur_us(ts, rel_start, drawn_end(span) - span.start_ns);
    if (is_instant(span)) {  // a device event (DeviceTimeout, DeviceReset, ...): a mark on the track
      timed.push_back(TimedEvent{span.start_ns, json{{"ph", "i"},
                                                     {"s", "t"},
                                                     {"name", span.name},
                                                     {"cat", category_name(span.cat)},
                                                     {"ts", ts},
                                                     {"pid", track.pid},
                                                     {"tid", track.tid},
                                                     {"args", span_args(span)}}});
      continue;
    }
    const FlowMark& mark = marks[i];
    timed.push_back(TimedEvent{span.start_ns,
                               json{{"ph", "X"},
                                    {"name", span.name},
                                    {"cat", mark.phase != 0 ? mark.cat : category_name(span.cat)},
                                    {"ts", ts},
                                    {"dur", dur},
                                    {"pid", track.pid},
                                    {"tid", track.tid},
                                    {"args", span_args(span)}}});
    if (mark.phase != 0) {
      json flow{{"ph", std::string(1, mark.phase)},
                {"name", mark.name},
                {"cat", mark.cat},
                {"id", span.flow_id},
                {"ts", ts},
                {"pid", track.pid},
                {"tid", track.tid}};
      if (mark.phase == 'f') flow["bp"] = "e";
      timed.push_back(TimedEvent{span.start_ns, std::move(flow)});
    }
  }
  std::vector<TimedEvent> counters;
  append_counters(spans, counters);
  for (TimedEvent& c : counters) {
    c.event["ts"] = to_us(c.ts_ns - base_ns);
    timed.push_back(std::move(c));
  }
  std::stable_sort(timed.begin(), timed.end(), [](const TimedEvent& a, const TimedEvent& b) {
    return a.ts_ns < b.ts_ns;
  });
  for (TimedEvent& t : timed) events.push_back(std::move(t.event));

  return json{{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ns"},
              {"otherData",
               {{"clock", "steady_clock"},
                {"schema", kTraceSchema},
                {"dropped_events", info.dropped_events},
                {"epoch_offset_ns", info.epoch_offset_ns},
                {"base_ns", base_ns}}}};
}

void write_chrome_trace_file(const std::filesystem::path& path, std::vector<SpanRecord> spans,
                             const TraceInfo& info) {
  // Replace invalid UTF-8 (a span name is arbitrary bytes) instead of throwing from dump().
  const std::string text =
      chrome_trace_document(std::move(spans), info)
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  write_output_file(path, "trace file", [&](std::ostream& out) { out << text << '\n'; });
}

}  // namespace furiosa::profiler::detail
