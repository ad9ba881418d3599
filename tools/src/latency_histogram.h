// Latency statistics in fixed memory for furiosa-run --bench: a log-linear histogram (HdrHistogram's
// layout: 64 linear sub-buckets per power of two) whose percentiles are within a documented
// relative error of the exact ones.
#pragma once

#include <array>
#include <cstdint>

namespace furiosa::tools {

/// Latencies in nanoseconds counted in log-linear buckets: values below 64 ns each have their
/// own bucket; above, every power of two [2^e, 2^(e+1)) is split into 64 equal buckets, so a
/// bucket is at most 1/64 of its lower bound wide. Memory is fixed (3,776 counters, about 30 KB)
/// whatever the number of values, where keeping every latency costs 8 bytes per query.
///
/// Error bound: percentile() returns the exact type-7 percentile (profiler::percentile) of the
/// recorded values rounded to whole ns, except that each of the two ranks it interpolates
/// between is taken as the middle of its bucket. A value v is at most half a bucket from that
/// middle, i.e. within v/128, so the result is within kRelativeError (1/128, under 0.8%) of the
/// exact percentile, plus 0.5 ns for the rounding to whole ns. min(), max() and mean() are exact
/// (up to that rounding for min and max).
///
/// Thread-compatible: callers serialize record() (furiosa-run --bench records under a mutex).
class LatencyHistogram {
 public:
  /// Sub-buckets per power of two; also the first value that shares a bucket with others.
  static constexpr std::uint64_t kSubBuckets = 64;
  /// Bound on |percentile() - exact| / exact (see the class comment), besides 0.5 ns.
  static constexpr double kRelativeError = 1.0 / (2.0 * kSubBuckets);

  /// Counts one latency of `us` microseconds (negative values count as 0; values beyond 2^63 ns
  /// as 2^63 - 1 ns).
  void record(double us) noexcept;

  /// Number of values recorded.
  std::uint64_t count() const noexcept { return count_; }
  /// Smallest, largest and mean value in us; 0 when nothing was recorded.
  double min_us() const noexcept;
  double max_us() const noexcept;
  double mean_us() const noexcept;
  /// Percentile `permille`/1000 in us, interpolated between the closest ranks like
  /// profiler::percentile, within kRelativeError of the exact one; 0 when nothing was recorded.
  double percentile_us(std::uint64_t permille) const noexcept;

 private:
  static constexpr std::size_t kBuckets = kSubBuckets + (63 - 6 + 1) * kSubBuckets;  // 64 exact + 58 powers x 64
  static std::size_t index_of(std::uint64_t ns) noexcept;
  static double middle_of(std::size_t index) noexcept;  // ns
  double value_at_rank(std::uint64_t rank) const noexcept;  // ns, rank 0-based

  std::array<std::uint64_t, kBuckets> counts_{};
  std::uint64_t count_ = 0;
  std::uint64_t min_ns_ = 0, max_ns_ = 0;
  long double sum_ns_ = 0;
};

}  // namespace furiosa::tools
