// The one percentile rule of the project's reports and benchmarks.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

namespace furiosa::profiler {

/// Percentile `permille`/1000 of ascending `sorted` by linear interpolation between the closest
/// ranks: the method of FuriosaAI's profiler (numpy.quantile / pandas.Series.quantile default,
/// "linear"; Hyndman & Fan type 7). With n values, the 0-based position is
/// h = (n - 1) * permille / 1000 and the result is
/// sorted[floor(h)] + (h - floor(h)) * (sorted[floor(h) + 1] - sorted[floor(h)]).
/// permille 500 = median, 900 = p90, 999 = p99.9; values above 1000 are treated as 1000.
///
/// Integer T (ns durations): exact integer arithmetic, the interpolated value rounded DOWN
/// (floor; the values are ascending, so the added part is non-negative) -- the SDK converts its
/// float quantile to an integer ns the same way: its example durations 258540, 270625, 365199,
/// 650018 give p99.9 = 649163 (exactly 649163.543). Never overflows: the difference is split
/// into thousands and a remainder.
/// Floating T (benchmark latencies in us): interpolated in T, not rounded.
///
/// T{} when `sorted` is empty. Pure function, thread-safe. `sorted` must be ascending (not
/// checked). Used by the profiler's summary report, furiosa-run --bench (and perf-guide through
/// it) and sim-bench.
template <class T>
T percentile(std::span<const T> sorted, std::uint64_t permille) {
  const std::uint64_t n = sorted.size();
  if (n == 0) return T{};
  if (permille > 1000) permille = 1000;
  const std::uint64_t h = (n - 1) * permille;  // position x 1000
  const std::uint64_t lo = h / 1000;
  const std::uint64_t frac = h % 1000;  // thousandths between ranks lo and lo + 1
  const T low = sorted[lo];
  if (frac == 0) return low;
  const T diff = sorted[lo + 1] - low;  // >= 0 for ascending input
  if constexpr (std::is_integral_v<T>) {
    const T f = static_cast<T>(frac);
    return static_cast<T>(low + (diff / 1000) * f + (diff % 1000) * f / 1000);
  } else {
    return low + diff * (static_cast<T>(frac) / static_cast<T>(1000));
  }
}

}  // namespace furiosa::profiler
