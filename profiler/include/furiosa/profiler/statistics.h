// The one percentile rule of the project's reports and benchmarks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

namespace furiosa::profiler {

/// Nearest-rank percentile of ascending `sorted`: the ceil(permille * n / 1000)-th smallest
/// value (permille 500 = median, 900 = p90, 999 = p99.9), clamped to ranks 1..n; T{} when
/// `sorted` is empty. Integer rank arithmetic, so 0.9 x 100 is exactly rank 90 (a floating-point
/// product could round up to rank 91). Used by the profiler's summary report, furiosa-run
/// --bench, perf-guide and sim-bench.
template <class T>
T nearest_rank(std::span<const T> sorted, std::uint64_t permille) {
  const std::uint64_t n = sorted.size();
  if (n == 0) return T{};
  const std::uint64_t rank = std::clamp<std::uint64_t>((permille * n + 999) / 1000, 1, n);
  return sorted[rank - 1];
}

}  // namespace furiosa::profiler
