// Private: the canonical order of recorded spans (Profiler::records() and the exporters).
#pragma once

#include <algorithm>
#include <vector>

#include "furiosa/profiler/span.h"

namespace furiosa::profiler::detail {

/// Strict weak order of spans: earlier start first; at equal starts the longer span (the one
/// ending later) first, so a parent precedes the children that start with it, which is what
/// trace viewers need to nest complete events on one track; then the smaller span id (parents
/// are given their id before their children) so the order is deterministic.
inline bool span_order_less(const SpanRecord& a, const SpanRecord& b) noexcept {
  if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
  if (a.end_ns != b.end_ns) return a.end_ns > b.end_ns;
  return a.span_id < b.span_id;
}

/// Sorts `spans` by span_order_less; stable, so fully equal spans keep their recording order.
inline void sort_spans(std::vector<SpanRecord>& spans) {
  std::stable_sort(spans.begin(), spans.end(), span_order_less);
}

}  // namespace furiosa::profiler::detail
