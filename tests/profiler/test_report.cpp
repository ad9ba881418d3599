// Inference summary: nearest-rank percentiles, mean, filtering by name, formatting.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "furiosa/profiler/report.h"

using namespace furiosa::profiler;

namespace {

/// An Inference-like span named `name` lasting `dur` ns.
SpanRecord timed(const std::string& name, std::int64_t start, std::int64_t dur) {
  SpanRecord r;
  r.name = name;
  r.start_ns = start;
  r.end_ns = start + dur;
  return r;
}

}  // namespace

TEST_CASE("summarize_inferences on 1..100 ns", "[profiler][report]") {
  std::vector<SpanRecord> spans;
  for (int d = 1; d <= 100; ++d) spans.push_back(timed("Inference", 1000 * d, d));
  // Other spans are ignored, whatever their duration.
  spans.push_back(timed("Quantize", 5, 1'000'000));
  spans.push_back(timed("Execution", 5, 0));
  spans.push_back(timed("inference", 5, 7));
  std::shuffle(spans.begin(), spans.end(), std::mt19937(1234));

  const InferenceSummary s = summarize_inferences(spans);
  CHECK(s.count == 100);
  CHECK(s.min_ns == 1);
  CHECK(s.max_ns == 100);
  CHECK(s.mean_ns == Approx(50.5));
  CHECK(s.median_ns == 50);
  CHECK(s.p90_ns == 90);
  CHECK(s.p95_ns == 95);
  CHECK(s.p97_ns == 97);
  CHECK(s.p99_ns == 99);
  CHECK(s.p999_ns == 100);
}

TEST_CASE("summarize_inferences uses nearest ranks on small sets", "[profiler][report]") {
  SECTION("1..10 us") {
    std::vector<SpanRecord> spans;
    for (int d = 10; d >= 1; --d) spans.push_back(timed("Inference", 0, d * 1000));
    const InferenceSummary s = summarize_inferences(spans);
    CHECK(s.count == 10);
    CHECK(s.median_ns == 5000);   // ceil(0.5 * 10) = 5th
    CHECK(s.p90_ns == 9000);      // ceil(0.9 * 10) = 9th
    CHECK(s.p95_ns == 10000);     // ceil(9.5) = 10th
    CHECK(s.p999_ns == 10000);
    CHECK(s.mean_ns == Approx(5500.0));
  }
  SECTION("a single inference") {
    const InferenceSummary s = summarize_inferences({timed("Inference", 10, 712'000)});
    CHECK(s.count == 1);
    CHECK(s.min_ns == 712'000);
    CHECK(s.max_ns == 712'000);
    CHECK(s.median_ns == 712'000);
    CHECK(s.p999_ns == 712'000);
    CHECK(s.mean_ns == Approx(712'000.0));
  }
  SECTION("1000 inferences: p99.9 is the 999th") {
    std::vector<SpanRecord> spans;
    for (int d = 1; d <= 1000; ++d) spans.push_back(timed("Inference", 0, d));
    const InferenceSummary s = summarize_inferences(spans);
    CHECK(s.p999_ns == 999);
    CHECK(s.p97_ns == 970);
    CHECK(s.median_ns == 500);
  }
}

TEST_CASE("summarize_inferences without inferences is all zeros", "[profiler][report]") {
  for (const auto& spans : {std::vector<SpanRecord>{},
                            std::vector<SpanRecord>{timed("Quantize", 0, 10)}}) {
    const InferenceSummary s = summarize_inferences(spans);
    CHECK(s.count == 0);
    CHECK(s.min_ns == 0);
    CHECK(s.max_ns == 0);
    CHECK(s.mean_ns == 0.0);
    CHECK(s.median_ns == 0);
    CHECK(s.p90_ns == 0);
    CHECK(s.p95_ns == 0);
    CHECK(s.p97_ns == 0);
    CHECK(s.p99_ns == 0);
    CHECK(s.p999_ns == 0);
  }
}

TEST_CASE("format_summary renders every figure in ns", "[profiler][report]") {
  std::vector<SpanRecord> spans;
  for (int d = 1; d <= 100; ++d) spans.push_back(timed("Inference", 0, d));
  const std::string text = format_summary(summarize_inferences(spans));
  CHECK(text ==
        "Inference count: 100\n"
        "min: 1 ns\n"
        "max: 100 ns\n"
        "mean: 50.5 ns\n"
        "median: 50 ns\n"
        "p90: 90 ns\n"
        "p95: 95 ns\n"
        "p97: 97 ns\n"
        "p99: 99 ns\n"
        "p99.9: 100 ns\n");

  CHECK(format_summary(InferenceSummary{}) == "Inference count: 0\n");
}
