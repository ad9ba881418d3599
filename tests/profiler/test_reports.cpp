// The inferences, NPU executions, NPU operators and external operators reports: every number
// recomputed independently from the record table; NPU Total/Run/IoWait from hand-made device
// executions turned into spans by the runtime's adapter (IoWait signed); the text renderings and
// the selection by name.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "furiosa/profiler/device_execution.h"
#include "furiosa/profiler/profiler.h"
#include "furiosa/profiler/report.h"
#include "synthetic_trace.h"

using namespace furiosa::profiler;
using furiosa::profiler::testing::synthetic_trace;

namespace {

/// The table of a synthetic trace recorded through a Profiler (so the profiler path is tested).
RecordTable recorded_table(int inferences) {
  Profiler profiler;
  for (const SpanRecord& r : synthetic_trace(inferences)) profiler.record(r);
  return profiler.record_table();
}

SpanRecord npu(const std::string& name, std::uint64_t id, std::uint64_t parent, std::int64_t start,
               std::int64_t end, std::int64_t execution, std::int32_t pe = 0) {
  SpanRecord r;
  r.trace_id = TraceId{5, 5};
  r.span_id = id;
  r.parent_span_id = parent;
  r.name = name;
  r.cat = Category::NPU;
  r.start_ns = start;
  r.end_ns = end;
  r.card = 0;
  r.pe_index = pe;
  r.execution_index = execution;
  return r;
}

/// A device execution on card 0 PE 0 with Load [load, exec), Execution [exec, store) and Store
/// [store, end) back to back; the caller adds kernels.
DeviceExecution execution(std::int64_t index, std::int64_t load, std::int64_t exec, std::int64_t store,
                          std::int64_t end) {
  DeviceExecution e;
  e.card = 0;
  e.pe_index = 0;
  e.execution_index = index;
  e.load_start_ns = load;
  e.load_end_ns = e.exec_start_ns = exec;
  e.exec_end_ns = e.store_start_ns = store;
  e.store_end_ns = end;
  return e;
}

/// Its spans as the runtime records them, under span 1 of trace {5, 5}, ids from 2.
std::vector<SpanRecord> spans_of(const DeviceExecution& e) {
  std::uint64_t id = 2;
  return device_execution_spans(e, SpanContext{TraceId{5, 5}, 1}, 0, [&] { return id++; });
}

}  // namespace

TEST_CASE("inferences report = the Inference rows of the table", "[profiler][report]") {
  const RecordTable table = recorded_table(9);
  const auto rows = inference_report(table.rows());
  const RecordTable expected = table.filter_by_name("Inference");
  REQUIRE(rows.size() == expected.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const SpanRecord& want = expected.rows()[i];
    CHECK(rows[i].trace_id == want.trace_id);
    CHECK(rows[i].span_id == want.span_id);
    CHECK(rows[i].thread_id == want.thread_id);
    CHECK(rows[i].dur_ns == want.end_ns - want.start_ns);
  }
  // The summary agrees with the same durations.
  std::vector<std::int64_t> durations;
  for (const auto& r : expected.rows()) durations.push_back(r.end_ns - r.start_ns);
  std::sort(durations.begin(), durations.end());
  const InferenceSummary s = summarize_inferences(table.rows());
  CHECK(s.count == 9);
  CHECK(s.min_ns == durations.front());
  CHECK(s.max_ns == durations.back());
  CHECK(s.median_ns == durations[4]);  // position 0.5 * 8 = 4: a rank, no interpolation
  // position 0.9 * 8 = 7.2: 0.2 of the way from the 8th to the 9th, rounded down
  CHECK(s.p90_ns == durations[7] + (durations[8] - durations[7]) * 2 / 10);
}

TEST_CASE("NPU executions report recomputed from Load, Store and kernel rows",
          "[profiler][report]") {
  const RecordTable table = recorded_table(8);
  const auto rows = npu_execution_report(table.rows());
  const RecordTable executions = table.filter_by_name("Execution");
  REQUIRE(rows.size() == executions.size());
  REQUIRE(rows.size() == 8);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const SpanRecord& e = executions.rows()[i];
    auto same_execution = [&e](const SpanRecord& r) {
      return r.trace_id == e.trace_id && r.pe_index == e.pe_index &&
             r.execution_index == e.execution_index;
    };
    const RecordTable load = table.filter_by_name("Load").filter(same_execution);
    const RecordTable store = table.filter_by_name("Store").filter(same_execution);
    REQUIRE(load.size() == 1);
    REQUIRE(store.size() == 1);
    std::int64_t run = 0;
    const RecordTable npu_rows = table.filter_by_category(Category::NPU);
    for (const auto& r : npu_rows.rows()) {
      if (r.parent_span_id == e.span_id) run += r.end_ns - r.start_ns;
    }
    const std::int64_t total = store.rows()[0].end_ns - load.rows()[0].start_ns;
    INFO("execution " << i);
    CHECK(rows[i].trace_id == e.trace_id);
    CHECK(rows[i].span_id == e.span_id);
    CHECK(rows[i].pe_index == e.pe_index);
    CHECK(rows[i].execution_index == e.execution_index);
    CHECK(rows[i].total_ns == total);
    CHECK(rows[i].run_ns == run);
    CHECK(rows[i].iowait_ns == total - run);
    CHECK(rows[i].run_ns > 0);
    CHECK(rows[i].run_ns < rows[i].total_ns);  // the synthetic kernels leave gaps
  }
}

TEST_CASE("NPU Total, Run and IoWait of hand-made executions, IoWait is signed",
          "[profiler][report]") {
  SECTION("Load, Execution with two kernels, Store") {
    DeviceExecution e = execution(0, 1'000, 1'300, 2'000, 2'250);
    e.kernels = {{"LowLevelConv2d", 1'300, 1'700}, {"LowLevelAdd", 1'750, 1'900}};
    const std::vector<SpanRecord> spans = spans_of(e);
    const auto rows = npu_execution_report(spans);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].total_ns == 1'250);  // 2250 - 1000
    CHECK(rows[0].run_ns == 550);      // 400 + 150
    CHECK(rows[0].iowait_ns == 700);
  }
  SECTION("kernels adding up to more than the window give a negative IoWait") {
    // Overlapping kernel spans (e.g. concurrent units) sum past the Load..Store window.
    DeviceExecution e = execution(7, 1'000, 1'010, 1'100, 1'120);
    e.kernels = {{"LowLevelConv2d", 1'010, 1'100}, {"LowLevelConv2d", 1'010, 1'100}};
    const std::vector<SpanRecord> spans = spans_of(e);
    const auto rows = npu_execution_report(spans);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].total_ns == 120);
    CHECK(rows[0].run_ns == 180);
    CHECK(rows[0].iowait_ns == -60);
    static_assert(std::is_signed_v<decltype(rows[0].iowait_ns)>);
    CHECK_THAT(format_npu_executions(rows), Catch::Contains("-60"));
  }
  SECTION("Load/Store are matched by execution_index and pe_index") {
    const std::vector<SpanRecord> spans = {
        npu("Load", 2, 1, 0, 100, 0, 0),       npu("Load", 12, 1, 50, 120, 0, 1),
        npu("Execution", 3, 1, 100, 500, 0, 0), npu("Execution", 13, 1, 120, 300, 0, 1),
        npu("Store", 4, 1, 500, 600, 0, 0),     npu("Store", 14, 1, 300, 310, 0, 1),
        npu("Load", 22, 1, 600, 700, 1, 0),     npu("Execution", 23, 1, 700, 800, 1, 0),
        npu("Store", 24, 1, 800, 950, 1, 0),
    };
    const auto rows = npu_execution_report(spans);
    REQUIRE(rows.size() == 3);
    std::map<std::uint64_t, NpuExecutionRow> by_id;
    for (const auto& r : rows) by_id[r.span_id] = r;
    CHECK(by_id.at(3).total_ns == 600);
    CHECK(by_id.at(13).total_ns == 260);
    CHECK(by_id.at(23).total_ns == 350);
    CHECK(by_id.at(23).run_ns == 0);
    CHECK(by_id.at(23).iowait_ns == 350);
  }
  SECTION("without Load and Store the Execution's own window is used") {
    const auto rows = npu_execution_report({npu("Execution", 3, 1, 100, 400, 0),
                                            npu("LowLevelAdd", 4, 3, 100, 150, -1)});
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].total_ns == 300);
    CHECK(rows[0].iowait_ns == 250);
  }
}

TEST_CASE("NPU operators report: average and count per kernel name", "[profiler][report]") {
  const RecordTable table = recorded_table(10);
  const auto rows = npu_operator_report(table.rows());
  std::map<std::string, std::pair<std::int64_t, std::uint64_t>> expected;  // sum, count
  const RecordTable npu_rows = table.filter_by_category(Category::NPU);
  for (const auto& r : npu_rows.rows()) {
    if (r.name.rfind("LowLevel", 0) != 0) continue;
    expected[r.name].first += r.end_ns - r.start_ns;
    expected[r.name].second += 1;
  }
  REQUIRE(rows.size() == expected.size());
  REQUIRE(rows.size() == 2);
  for (const auto& row : rows) {
    const auto& [sum, count] = expected.at(row.name);
    CHECK(row.count == count);
    CHECK(row.average_ns == Approx(static_cast<double>(sum) / static_cast<double>(count)));
  }
  CHECK(rows[0].name == "LowLevelConv2d");  // by decreasing average
  CHECK(rows[0].count == 20);
  CHECK(rows[1].name == "LowLevelAdd");
  CHECK(rows[0].average_ns >= rows[1].average_ns);
}

TEST_CASE("external operators report: every host operator execution, as the SDK lists them",
          "[profiler][report]") {
  const RecordTable table = recorded_table(5);
  const auto rows = external_operator_report(table.rows());
  const RecordTable expected = table.filter([](const SpanRecord& r) {
    return r.cat == Category::Runtime && r.operator_index >= 0;
  });
  REQUIRE(rows.size() == expected.size());
  REQUIRE(rows.size() == 5 * 5);  // Quantize, Lower, Softmax (fallback), Unlower, Dequantize
  const char* names[] = {"Quantize", "Lower", "Softmax", "Unlower", "Dequantize"};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const SpanRecord& want = expected.rows()[i];
    CHECK(rows[i].name == names[i % 5]);
    CHECK(rows[i].operator_index == static_cast<std::int32_t>(i % 5));  // execution order
    CHECK(rows[i].trace_id == want.trace_id);
    CHECK(rows[i].span_id == want.span_id);
    CHECK(rows[i].thread_id == want.thread_id);
    CHECK(rows[i].dur_ns == want.end_ns - want.start_ns);
  }
  // Inference, Enqueue and the NPU kernels (which carry ONNX node indices) are not rows.
  for (const auto& r : rows) {
    CHECK(r.name != "Inference");
    CHECK(r.name != "Enqueue");
    CHECK(r.name.rfind("LowLevel", 0) != 0);
  }
}

TEST_CASE("report texts and selection by name", "[profiler][report]") {
  const RecordTable table = recorded_table(3);
  const auto& spans = table.rows();

  const std::string inferences = format_inferences(inference_report(spans));
  CHECK_THAT(inferences, Catch::StartsWith("trace_id"));
  CHECK_THAT(inferences, Catch::Contains("thread.id"));
  CHECK_THAT(inferences, Catch::Contains(spans[0].trace_id.to_hex()));
  CHECK(std::count(inferences.begin(), inferences.end(), '\n') == 4);  // header + 3

  const std::string executions = format_npu_executions(npu_execution_report(spans));
  for (const char* column : {"pe_index", "execution_index", "NPU Total", "NPU Run", "NPU IoWait"}) {
    CHECK_THAT(executions, Catch::Contains(column));
  }
  CHECK_THAT(format_npu_operators(npu_operator_report(spans)),
             Catch::Contains("average elapsed (ns)"));
  CHECK_THAT(format_external_operators(external_operator_report(spans)),
             Catch::Contains("Softmax"));

  CHECK(format_inferences({}) == "(no inferences)\n");
  CHECK(format_npu_executions({}) == "(no NPU executions)\n");
  CHECK(format_npu_operators({}) == "(no NPU operators)\n");
  CHECK(format_external_operators({}) == "(no external operators)\n");

  for (const char* name :
       {"all", "summary", "inferences", "npu-executions", "npu-operators", "external-operators"}) {
    const auto kind = parse_report_kind(name);
    REQUIRE(kind.has_value());
    CHECK(report_kind_name(*kind) == name);
  }
  CHECK_FALSE(parse_report_kind("everything").has_value());

  std::ostringstream summary;
  print_report(summary, "summary", table);
  CHECK(summary.str() == format_summary(summarize_inferences(spans)));
  std::ostringstream all;
  print_report(all, "all", spans);
  for (const char* heading : {"== summary ==", "== inferences ==", "== npu-executions ==",
                              "== npu-operators ==", "== external-operators =="}) {
    CHECK_THAT(all.str(), Catch::Contains(heading));
  }
  std::ostringstream ignored;
  CHECK_THROWS_WITH(print_report(ignored, "bogus", spans),
                    Catch::Contains("unknown report 'bogus'") &&
                        Catch::Contains("all|summary|inferences"));
}
