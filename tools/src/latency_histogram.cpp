// LatencyHistogram (latency_histogram.h).
#include "latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace furiosa::tools {

namespace {
constexpr int kSubBits = 6;  // log2(kSubBuckets)
static_assert(LatencyHistogram::kSubBuckets == (std::uint64_t{1} << kSubBits));
}  // namespace

std::size_t LatencyHistogram::index_of(std::uint64_t ns) noexcept {
  if (ns < kSubBuckets) return static_cast<std::size_t>(ns);
  const int e = std::bit_width(ns) - 1;  // 2^e <= ns < 2^(e+1), e >= kSubBits
  const int shift = e - kSubBits;
  const std::uint64_t sub = ns >> shift;  // in [64, 128)
  return static_cast<std::size_t>(kSubBuckets + static_cast<std::uint64_t>(shift) * kSubBuckets + (sub - kSubBuckets));
}

double LatencyHistogram::middle_of(std::size_t index) noexcept {
  if (index < kSubBuckets) return static_cast<double>(index);
  const std::size_t shift = (index - kSubBuckets) / kSubBuckets;
  const std::uint64_t sub = kSubBuckets + (index - kSubBuckets) % kSubBuckets;
  const double lower = std::ldexp(static_cast<double>(sub), static_cast<int>(shift));
  const double width = std::ldexp(1.0, static_cast<int>(shift));
  return lower + (width - 1) / 2;  // the bucket holds the integers lower .. lower + width - 1
}

void LatencyHistogram::record(double us) noexcept {
  const double ns_f = std::round(us * 1000.0);
  std::uint64_t ns = 0;
  if (ns_f >= 9.2e18) ns = (std::uint64_t{1} << 63) - 1;
  else if (ns_f > 0) ns = static_cast<std::uint64_t>(ns_f);  // NaN and negatives stay 0
  ++counts_[index_of(ns)];
  min_ns_ = count_ == 0 ? ns : std::min(min_ns_, ns);
  max_ns_ = count_ == 0 ? ns : std::max(max_ns_, ns);
  sum_ns_ += static_cast<long double>(ns);
  ++count_;
}

double LatencyHistogram::min_us() const noexcept { return static_cast<double>(min_ns_) * 1e-3; }
double LatencyHistogram::max_us() const noexcept { return static_cast<double>(max_ns_) * 1e-3; }
double LatencyHistogram::mean_us() const noexcept {
  return count_ == 0 ? 0 : static_cast<double>(sum_ns_ / static_cast<long double>(count_)) * 1e-3;
}

double LatencyHistogram::value_at_rank(std::uint64_t rank) const noexcept {
  // The extremes are known exactly; the middle of their bucket would only add error.
  if (rank == 0) return static_cast<double>(min_ns_);
  if (rank + 1 == count_) return static_cast<double>(max_ns_);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen > rank) return std::clamp(middle_of(i), static_cast<double>(min_ns_), static_cast<double>(max_ns_));
  }
  return static_cast<double>(max_ns_);
}

double LatencyHistogram::percentile_us(std::uint64_t permille) const noexcept {
  if (count_ == 0) return 0;
  if (permille > 1000) permille = 1000;
  // profiler::percentile's rule: position h = (n - 1) * permille / 1000, linear between ranks.
  const std::uint64_t h = (count_ - 1) * permille;
  const std::uint64_t lo = h / 1000, frac = h % 1000;
  const double low = value_at_rank(lo);
  if (frac == 0) return low * 1e-3;
  const double high = value_at_rank(lo + 1);
  return (low + (high - low) * (static_cast<double>(frac) / 1000.0)) * 1e-3;
}

}  // namespace furiosa::tools
