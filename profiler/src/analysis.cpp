// The device-side analysis: Execution windows (Load start .. Store end) and kernel run time.
#include "analysis.h"

#include <map>
#include <tuple>
#include <utility>

namespace furiosa::profiler::detail {
namespace {

/// Identifies one execution on one device within one trace.
using ExecutionKey = std::tuple<std::uint64_t, std::uint64_t, std::int32_t, std::int32_t,
                                std::int64_t>;  // trace hi, lo, card, pe_index, execution_index

ExecutionKey key_of(const SpanRecord& s) noexcept {
  return {s.trace_id.hi, s.trace_id.lo, s.card, s.pe_index, s.execution_index};
}

}  // namespace

std::vector<ExecutionWindow> execution_windows(const std::vector<SpanRecord>& spans) {
  std::map<ExecutionKey, std::vector<const SpanRecord*>> loads, stores;
  // (trace hi, trace lo, parent span id) -> summed kernel time
  std::map<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>, std::int64_t> run;
  for (const SpanRecord& s : spans) {
    if (s.cat != Category::NPU) continue;
    if (s.name == kLoadSpan) {
      loads[key_of(s)].push_back(&s);
    } else if (s.name == kStoreSpan) {
      stores[key_of(s)].push_back(&s);
    }
    if (s.parent_span_id != 0) run[{s.trace_id.hi, s.trace_id.lo, s.parent_span_id}] += s.dur_ns();
  }

  std::vector<ExecutionWindow> windows;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const SpanRecord& e = spans[i];
    if (e.cat != Category::NPU || e.name != kExecutionSpan) continue;
    ExecutionWindow w;
    w.execution = i;
    w.start_ns = e.start_ns;
    w.end_ns = e.end_ns;
    if (const auto it = loads.find(key_of(e)); it != loads.end()) {
      const SpanRecord* best = nullptr;
      for (const SpanRecord* l : it->second) {
        if (l->start_ns <= e.start_ns && (best == nullptr || l->start_ns > best->start_ns)) best = l;
      }
      if (best == nullptr) best = it->second.front();
      w.start_ns = best->start_ns;
    }
    if (const auto it = stores.find(key_of(e)); it != stores.end()) {
      const SpanRecord* best = nullptr;
      for (const SpanRecord* s : it->second) {
        if (s->end_ns >= e.end_ns && (best == nullptr || s->end_ns < best->end_ns)) best = s;
      }
      if (best == nullptr) best = it->second.front();
      w.end_ns = best->end_ns;
    }
    w.total_ns = w.end_ns - w.start_ns;
    if (const auto it = run.find({e.trace_id.hi, e.trace_id.lo, e.span_id}); it != run.end()) {
      w.run_ns = it->second;
    }
    w.iowait_ns = w.total_ns - w.run_ns;
    windows.push_back(w);
  }
  return windows;
}

}  // namespace furiosa::profiler::detail
