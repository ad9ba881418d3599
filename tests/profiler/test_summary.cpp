// The inference summary (report.h summarize_inferences, format_summary): percentiles by linear
// interpolation (the SDK's method), mean, filtering by name, the SDK's layout. The other
// reports are tested in test_reports.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "furiosa/profiler/report.h"
#include "furiosa/profiler/statistics.h"

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
  CHECK(s.p999_ns == 99);  // position 98.901: 99.901 rounded down (nearest rank gave 100)
}

TEST_CASE("summarize_inferences interpolates between ranks on small sets", "[profiler][report]") {
  SECTION("1..10 us") {
    std::vector<SpanRecord> spans;
    for (int d = 10; d >= 1; --d) spans.push_back(timed("Inference", 0, d * 1000));
    const InferenceSummary s = summarize_inferences(spans);
    CHECK(s.count == 10);
    CHECK(s.median_ns == 5500);   // position 4.5: between 5000 and 6000
    CHECK(s.p90_ns == 9100);      // position 8.1
    CHECK(s.p95_ns == 9550);      // position 8.55
    CHECK(s.p999_ns == 9991);     // position 8.991
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

TEST_CASE("summary of the SDK's example: the four durations of FuriosaAI's profiler guide",
          "[profiler][report]") {
  // The guide's print_inferences() rows (650018, 365199, 258540, 270625 ns) and the
  // print_summary() it shows for them.
  std::vector<SpanRecord> spans;
  std::int64_t start = 0;
  for (const std::int64_t d : {650018, 365199, 258540, 270625}) {
    spans.push_back(timed("Inference", start, d));
    start += 1'000'000;
  }
  const InferenceSummary s = summarize_inferences(spans);
  CHECK(s.count == 4);
  CHECK(s.min_ns == 258540);
  CHECK(s.max_ns == 650018);
  CHECK(s.mean_ns == Approx(386095.5));
  CHECK(s.median_ns == 317912);
  CHECK(s.p90_ns == 564572);
  CHECK(s.p95_ns == 607295);
  CHECK(s.p97_ns == 624384);
  CHECK(s.p99_ns == 641473);
  CHECK(s.p999_ns == 649163);
  CHECK(format_summary(s) ==
        "================================================\n"
        "  Inference Results Summary\n"
        "================================================\n"
        "Inference counts                : 4\n"
        "Min latency (ns)                : 258540\n"
        "Max latency (ns)                : 650018\n"
        "Mean latency (ns)               : 386095\n"
        "Median latency (ns)             : 317912\n"
        "90.0 percentile latency (ns)    : 564572\n"
        "95.0 percentile latency (ns)    : 607295\n"
        "97.0 percentile latency (ns)    : 624384\n"
        "99.0 percentile latency (ns)    : 641473\n"
        "99.9 percentile latency (ns)    : 649163\n");
}

TEST_CASE("percentile: linear interpolation between closest ranks", "[profiler][report]") {
  SECTION("integers: exact, rounded down, no overflow") {
    const std::vector<std::int64_t> v = {10, 20};
    CHECK(percentile<std::int64_t>(v, 0) == 10);
    CHECK(percentile<std::int64_t>(v, 1000) == 20);
    CHECK(percentile<std::int64_t>(v, 500) == 15);
    CHECK(percentile<std::int64_t>(v, 999) == 19);    // 19.99 rounded down
    CHECK(percentile<std::int64_t>(v, 5000) == 20);   // above 1000 = the maximum
    const std::vector<std::int64_t> big = {0, std::numeric_limits<std::int64_t>::max()};
    CHECK(percentile<std::int64_t>(big, 1000) == std::numeric_limits<std::int64_t>::max());
    CHECK(percentile<std::int64_t>(big, 500) == std::numeric_limits<std::int64_t>::max() / 2);
    CHECK(percentile<std::int64_t>(std::vector<std::int64_t>{}, 500) == 0);
    CHECK(percentile<std::int64_t>(std::vector<std::int64_t>{7}, 900) == 7);
  }
  SECTION("floating point: not rounded, agrees with numpy.quantile") {
    const std::vector<double> v = {258.540, 270.625, 365.199, 650.018};
    CHECK(percentile<double>(v, 500) == Approx(317.912));
    CHECK(percentile<double>(v, 999) == Approx(649.163543));
    CHECK(percentile<double>(std::vector<double>{}, 500) == 0.0);
  }
}

TEST_CASE("format_summary renders every figure in ns", "[profiler][report]") {
  std::vector<SpanRecord> spans;
  for (int d = 1; d <= 100; ++d) spans.push_back(timed("Inference", 0, d));
  const std::string text = format_summary(summarize_inferences(spans));
  CHECK(text ==
        "================================================\n"
        "  Inference Results Summary\n"
        "================================================\n"
        "Inference counts                : 100\n"
        "Min latency (ns)                : 1\n"
        "Max latency (ns)                : 100\n"
        "Mean latency (ns)               : 50\n"
        "Median latency (ns)             : 50\n"
        "90.0 percentile latency (ns)    : 90\n"
        "95.0 percentile latency (ns)    : 95\n"
        "97.0 percentile latency (ns)    : 97\n"
        "99.0 percentile latency (ns)    : 99\n"
        "99.9 percentile latency (ns)    : 99\n");

  CHECK(format_summary(InferenceSummary{}) ==
        "================================================\n"
        "  Inference Results Summary\n"
        "================================================\n"
        "Inference counts                : 0\n");
}
