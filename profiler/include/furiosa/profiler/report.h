// Reports computed from recorded spans.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "furiosa/profiler/span.h"

namespace furiosa::profiler {

/// Latency distribution of the Inference spans, in ns. Percentiles use the nearest-rank method
/// on the sorted durations (p = ceil(q * n)-th smallest); median is the 0.5 nearest rank.
struct InferenceSummary {
  std::uint64_t count = 0;
  std::int64_t min_ns = 0, max_ns = 0;
  double mean_ns = 0;
  std::int64_t median_ns = 0, p90_ns = 0, p95_ns = 0, p97_ns = 0, p99_ns = 0, p999_ns = 0;
};

/// Summary of the spans named "Inference" among `spans`.
InferenceSummary summarize_inferences(const std::vector<SpanRecord>& spans);

/// Multi-line human-readable rendering of a summary (values in ns).
std::string format_summary(const InferenceSummary& summary);

}  // namespace furiosa::profiler
