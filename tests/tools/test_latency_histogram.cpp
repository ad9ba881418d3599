// furiosa-run --bench's latency histogram: percentiles within the documented bound of the exact
// ones (profiler::percentile over every value) on known samples, in fixed memory.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "furiosa/profiler/statistics.h"
#include "src/latency_histogram.h"
#include "test_support.h"

using furiosa::tools::LatencyHistogram;

namespace {

/// Checks every permille of `h` against the exact percentile of `values_us` (rounded to whole ns,
/// as the histogram records them).
void check_against_exact(const LatencyHistogram& h, std::vector<double> values_us) {
  for (double& v : values_us) v = std::max(0.0, std::round(v * 1000.0)) / 1000.0;
  std::sort(values_us.begin(), values_us.end());
  REQUIRE(h.count() == values_us.size());
  CHECK(h.min_us() == Approx(values_us.front()).epsilon(1e-12));
  CHECK(h.max_us() == Approx(values_us.back()).epsilon(1e-12));
  double sum = 0;
  for (double v : values_us) sum += v;
  CHECK(h.mean_us() == Approx(sum / static_cast<double>(values_us.size())).epsilon(1e-9));
  for (std::uint64_t permille = 0; permille <= 1000; ++permille) {
    const double exact = furiosa::profiler::percentile<double>(values_us, permille);
    const double approx = h.percentile_us(permille);
    INFO("p" << permille / 10.0 << ": exact " << exact << " us, histogram " << approx << " us");
    // The bound of latency_histogram.h: 1/128 relative, plus 0.5 ns, plus floating-point slack.
    CHECK(std::abs(approx - exact) <= exact * LatencyHistogram::kRelativeError + 0.5e-3 + 1e-9 * exact);
  }
}

}  // namespace

TEST_CASE("latency histogram percentiles are within 1/128 of the exact ones", "[tools][bench][histogram]") {
  SECTION("a long-tailed sample over six decades (1 us .. 1 s)") {
    std::mt19937_64 rng(31);
    std::lognormal_distribution<double> body(std::log(700.0), 0.6);  // around 700 us
    std::uniform_real_distribution<double> tail(1.0, 1e6);
    LatencyHistogram h;
    std::vector<double> values;
    for (int i = 0; i < 200'000; ++i) {
      const double v = i % 100 == 0 ? tail(rng) : body(rng);
      values.push_back(v);
      h.record(v);
    }
    check_against_exact(h, values);
  }
  SECTION("sub-microsecond values are exact to the ns") {
    LatencyHistogram h;
    std::vector<double> values;
    for (int ns = 0; ns < 200; ++ns) {
      values.push_back(ns * 1e-3);
      h.record(ns * 1e-3);
    }
    check_against_exact(h, values);
    CHECK(h.percentile_us(500) == Approx(0.0995).margin(1e-12));  // exact: below 64 ns each has its bucket
  }
  SECTION("tiny samples use the exact extremes") {
    LatencyHistogram one;
    one.record(1234.567);
    CHECK(one.percentile_us(500) == Approx(1234.567).epsilon(1e-12));
    LatencyHistogram two;
    two.record(100.0);
    two.record(300.0);
    CHECK(two.percentile_us(500) == Approx(200.0).epsilon(1e-12));
    CHECK(two.percentile_us(999) == Approx(299.8).epsilon(1e-12));
  }
  SECTION("empty, negative and huge values") {
    LatencyHistogram h;
    CHECK(h.percentile_us(500) == 0);
    CHECK(h.mean_us() == 0);
    h.record(-5);
    h.record(1e30);
    CHECK(h.count() == 2);
    CHECK(h.min_us() == 0);
    CHECK(h.max_us() > 9.2e15);
  }
}

TEST_CASE("latency histogram memory does not grow with the number of values", "[tools][bench][histogram]") {
  // Keeping every latency cost 8 bytes per query (26 MB over a 150 s run in issue 31).
  STATIC_REQUIRE(sizeof(LatencyHistogram) < 40 * 1024);
}
