// Reports computed from recorded spans: the inference latency summary.
#include "furiosa/profiler/report.h"

#include <algorithm>
#include <iterator>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace furiosa::profiler {
namespace {

/// Name of the root span of one inference (DESIGN.md, "One inference, end to end").
constexpr std::string_view kInferenceSpan = "Inference";

/// Nearest-rank percentile of ascending, non-empty `sorted`: the ceil(q * n)-th smallest value
/// with q = permille / 1000. Integer arithmetic, so e.g. 0.9 * 100 is exactly rank 90 (the
/// floating-point product could round up to rank 91).
std::int64_t nearest_rank(const std::vector<std::int64_t>& sorted, std::uint64_t permille) {
  const std::uint64_t n = sorted.size();
  std::uint64_t rank = (permille * n + 999) / 1000;
  rank = std::clamp<std::uint64_t>(rank, 1, n);
  return sorted[rank - 1];
}

}  // namespace

InferenceSummary summarize_inferences(const std::vector<SpanRecord>& spans) {
  std::vector<std::int64_t> durations;
  for (const SpanRecord& span : spans) {
    if (span.name == kInferenceSpan) durations.push_back(span.dur_ns());
  }
  InferenceSummary summary;
  if (durations.empty()) return summary;
  std::sort(durations.begin(), durations.end());

  summary.count = durations.size();
  summary.min_ns = durations.front();
  summary.max_ns = durations.back();
  long double sum = 0;  // exact for any realistic count of ns durations
  for (const std::int64_t d : durations) sum += static_cast<long double>(d);
  summary.mean_ns = static_cast<double>(sum / static_cast<long double>(durations.size()));
  summary.median_ns = nearest_rank(durations, 500);
  summary.p90_ns = nearest_rank(durations, 900);
  summary.p95_ns = nearest_rank(durations, 950);
  summary.p97_ns = nearest_rank(durations, 970);
  summary.p99_ns = nearest_rank(durations, 990);
  summary.p999_ns = nearest_rank(durations, 999);
  return summary;
}

std::string format_summary(const InferenceSummary& summary) {
  std::string out = fmt::format("Inference count: {}\n", summary.count);
  if (summary.count == 0) return out;  // no latencies to show
  fmt::format_to(std::back_inserter(out),
                 "min: {} ns\n"
                 "max: {} ns\n"
                 "mean: {:.1f} ns\n"
                 "median: {} ns\n"
                 "p90: {} ns\n"
                 "p95: {} ns\n"
                 "p97: {} ns\n"
                 "p99: {} ns\n"
                 "p99.9: {} ns\n",
                 summary.min_ns, summary.max_ns, summary.mean_ns, summary.median_ns,
                 summary.p90_ns, summary.p95_ns, summary.p97_ns, summary.p99_ns,
                 summary.p999_ns);
  return out;
}

}  // namespace furiosa::profiler
