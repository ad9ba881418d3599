// The operator analysis (operator_analysis.h) on constructed kernel spans, its round trip
// through a written Chrome trace, and furiosa-trace --analyze.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "furiosa/profiler/operator_analysis.h"
#include "furiosa/profiler/profiler.h"
#include "furiosa/profiler/trace_reader.h"
#include "profiler_test_util.h"
#include "test_paths.h"

using namespace furiosa::profiler;
using furiosa::profiler::testing::TempFile;

namespace {

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A kernel span: `dur_ns` long, with the timing model's attributes.
SpanRecord kernel(std::string name, std::int32_t op, std::int32_t instr, std::int64_t start_ns,
                  std::int64_t dur_ns, std::int64_t macs, std::int64_t bytes, std::int64_t spill,
                  std::string bound) {
  SpanRecord r;
  r.trace_id = TraceId{1, 2};
  r.span_id = static_cast<std::uint64_t>(1000 + start_ns);
  r.parent_span_id = 1;
  r.name = std::move(name);
  r.cat = Category::NPU;
  r.start_ns = start_ns;
  r.end_ns = start_ns + dur_ns;
  r.card = 0;
  r.pe_index = 0;
  r.execution_index = 0;
  r.operator_index = op;
  r.instruction_index = instr;
  r.cycles = dur_ns * 2;
  r.attributes = {{"bound", bound},
                  {"dram_bytes", std::to_string(spill)},
                  {"spill_bytes", std::to_string(spill)},
                  {"macs", std::to_string(macs)},
                  {"bytes", std::to_string(bytes)}};
  return r;
}

/// Two executions of a program of three kernels (a 1 ms conv, a 0.25 ms conv, a 0.1 ms Add
/// that reads 4 MB back from DRAM), plus a Runtime span the analysis ignores.
std::vector<SpanRecord> two_executions() {
  std::vector<SpanRecord> spans;
  for (std::int64_t t : {0, 10'000'000}) {
    spans.push_back(
        kernel("LowLevelConv2d", 1, 0, t, 1'000'000, 4'000'000'000, 20'000'000, 0, "compute"));
    spans.push_back(kernel("LowLevelConv2d", 2, 1, t + 1'000'000, 250'000, 500'000'000, 2'000'000,
                           0, "compute"));
    spans.push_back(
        kernel("LowLevelAdd", 3, 2, t + 1'250'000, 100'000, 0, 12'000'000, 4'000'000, "dram"));
  }
  spans[0].attributes.emplace_back("in_shapes", "[1,3,224,224]");
  spans[0].attributes.emplace_back("out_shapes", "[1,32,112,112]");
  SpanRecord host;
  host.name = "Quantize";
  host.start_ns = 0;
  host.end_ns = 5'000'000;
  spans.push_back(host);
  return spans;
}

}  // namespace

TEST_CASE("operator analysis ranks kernels by time, memory and FLOP/s", "[profiler][analysis]") {
  const auto spans = two_executions();
  CHECK(total_kernel_ns(spans) == 2 * 1'350'000);
  const auto by_time = analyze_operators(spans);
  REQUIRE(by_time.size() == 3);
  CHECK(by_time[0].operator_index == 1);
  CHECK(by_time[0].calls == 2);
  CHECK(by_time[0].self_ns == 2'000'000);
  CHECK(by_time[0].mean_ns() == Approx(1'000'000));
  CHECK(by_time[0].flops_per_s() == Approx(2 * 4e9 / 1e-3));  // 8 TFLOP/s
  CHECK(by_time[0].bytes_per_s() == Approx(20e6 / 1e-3));
  CHECK(by_time[1].operator_index == 2);
  CHECK(by_time[2].name == "LowLevelAdd");
  CHECK(by_time[2].spill_bytes == 2 * 4'000'000);
  CHECK(by_time[2].bound == "dram");

  OperatorAnalysisOptions memory;
  memory.order = OperatorOrder::Memory;
  const auto by_memory = analyze_operators(spans, memory);
  CHECK(by_memory[0].operator_index == 1);    // 20 MB per call
  CHECK(by_memory[1].name == "LowLevelAdd");  // 12 MB per call
  memory.min_time_s = 200e-6;                 // the Add's 100 us per call is left out
  const auto slow_by_memory = analyze_operators(spans, memory);
  REQUIRE(slow_by_memory.size() == 2);
  CHECK(slow_by_memory[1].operator_index == 2);

  OperatorAnalysisOptions flops;
  flops.order = OperatorOrder::Flops;
  flops.top = 1;
  const auto by_flops = analyze_operators(spans, flops);
  REQUIRE(by_flops.size() == 1);
  CHECK(by_flops[0].operator_index == 1);  // 8 TFLOP/s against 4 TFLOP/s

  OperatorAnalysisOptions types;
  types.grouping = OperatorGrouping::Type;
  const auto by_type = analyze_operators(spans, types);
  REQUIRE(by_type.size() == 2);
  CHECK(by_type[0].name == "LowLevelConv2d");
  CHECK(by_type[0].calls == 4);
  CHECK(by_type[0].self_ns == 2'500'000);
  CHECK(by_type[0].operator_index == -1);
  CHECK(by_type[0].bound.empty());

  const std::string table = format_operator_analysis(by_time, total_kernel_ns(spans));
  CHECK_THAT(table, Catch::Contains("LowLevelConv2d (op 1, #0)"));
  CHECK_THAT(table, Catch::Contains(" 74.1 "));  // 2 ms of 2.7 ms
  CHECK_THAT(table, Catch::Contains("100.0"));   // the cumulative share reaches all kernel time
  CHECK_THAT(format_operator_analysis({}, 0), Catch::Contains("no NPU kernel spans"));
  CHECK(parse_operator_order("memory") == OperatorOrder::Memory);
  CHECK_FALSE(parse_operator_order("bogus").has_value());
}

TEST_CASE("operator analysis aggregates, filters and writes CSV and JSON", "[profiler][analysis]") {
  auto spans = two_executions();
  spans[3].pe_index = 1;  // the second execution's first conv ran on PE 1
  spans[3].end_ns = spans[3].start_ns + 3'000'000;
  spans[5].end_ns = spans[5].start_ns + 400'000;  // all kernels: 5 ms

  OperatorAnalysisOptions max;
  max.aggregate = TimeAggregate::Max;
  max.top = 1;
  const auto longest = analyze_operators(spans, max);
  REQUIRE(longest.size() == 1);
  CHECK(longest[0].time(TimeAggregate::Max) == 3'000'000);
  CHECK(longest[0].min_ns == 1'000'000);
  CHECK(longest[0].pe_index == -1);  // its calls ran on two PEs
  CHECK(longest[0].in_shapes == "[1,3,224,224]");

  OperatorAnalysisOptions count;
  count.grouping = OperatorGrouping::Type;
  count.aggregate = TimeAggregate::Count;
  const auto by_count = analyze_operators(spans, count);
  REQUIRE(by_count.size() == 2);
  CHECK(by_count[0].name == "LowLevelConv2d");
  CHECK(by_count[0].time(TimeAggregate::Count) == 4);

  OperatorAnalysisOptions calls;
  calls.grouping = OperatorGrouping::None;
  calls.top = 0;
  calls.type = "Conv2d";  // without the LowLevel prefix
  calls.pe = 0;
  const auto conv_calls = analyze_operators(spans, calls);
  REQUIRE(conv_calls.size() == 3);  // 2 + 2 conv calls, one of them on PE 1
  for (const auto& r : conv_calls) CHECK(r.calls == 1);
  CHECK(conv_calls[0].self_ns == 1'000'000);
  calls.type = "LowLevelAdd";
  CHECK(analyze_operators(spans, calls).size() == 2);

  OperatorAnalysisOptions bandwidth;
  bandwidth.order = OperatorOrder::Bandwidth;
  const auto by_bandwidth = analyze_operators(spans, bandwidth);
  CHECK(by_bandwidth[0].name == "LowLevelAdd");  // 12 MB in 0.1 ms

  OperatorAnalysisOptions options;
  options.top = 2;
  const auto rows = analyze_operators(spans, options);
  const std::int64_t total = total_kernel_ns(spans);
  CHECK(format_operator_analysis(rows, total, AnalysisFormat::Csv) ==
        "rank,name,operator_index,instruction_index,pe_index,calls,time_ns,total_ns,mean_ns,"
        "min_ns,max_ns,share,cumulative_ns,cumulative_share,flops,flops_per_s,bytes,bytes_per_s,"
        "dram_bytes,spill_bytes,bound,in_shapes,out_shapes\n"
        "1,LowLevelConv2d,1,0,-1,2,4000000.0,4000000,2000000.0,1000000,3000000,0.8,4000000.0,0.8,"
        "8000000000.0,4000000000000.0,20000000.0,10000000000.0,0.0,0.0,compute,\"[1,3,224,224]\","
        "\"[1,32,112,112]\"\n"
        "2,LowLevelAdd,3,2,0,2,500000.0,500000,250000.0,100000,400000,0.1,4500000.0,0.9,0.0,0.0,"
        "12000000.0,48000000000.0,4000000.0,4000000.0,dram,,\n");  // ties keep name order
  const auto json =
      nlohmann::json::parse(format_operator_analysis(rows, total, AnalysisFormat::Json));
  REQUIRE(json.size() == 2);
  CHECK(json[0]["name"] == "LowLevelConv2d");
  CHECK(json[0]["max_ns"] == 3'000'000);
  CHECK(json[1]["cumulative_share"].get<double>() == Approx(0.9));
  CHECK(format_operator_analysis({}, 0, AnalysisFormat::Csv).find('\n') ==
        format_operator_analysis({}, 0, AnalysisFormat::Csv).size() - 1);  // the header alone
  const std::string text =
      format_operator_analysis(rows, total, AnalysisFormat::Text, TimeAggregate::Mean);
  CHECK_THAT(text, Catch::Contains("mean us"));
  CHECK_THAT(text, Catch::Contains("[1,3,224,224] -> [1,32,112,112]"));
  CHECK(parse_operator_grouping("type") == OperatorGrouping::Type);
  CHECK(parse_time_aggregate("count") == TimeAggregate::Count);
  CHECK(parse_analysis_format("json") == AnalysisFormat::Json);
  CHECK_FALSE(parse_time_aggregate("median").has_value());
}

TEST_CASE("kernel span attributes survive a written Chrome trace", "[profiler][analysis][reader]") {
  Profiler profiler;
  for (const auto& s : two_executions()) profiler.record(s);
  TempFile file("analysis-trace");
  profiler.write_chrome_trace(file.path());
  const auto rows = read_trace_file(file.path()).table.rows();
  const auto read_back = analyze_operators(rows);
  const auto recorded = analyze_operators(profiler.records());
  REQUIRE(read_back.size() == recorded.size());
  for (std::size_t i = 0; i < read_back.size(); ++i) {
    CHECK(read_back[i].name == recorded[i].name);
    CHECK(read_back[i].macs == recorded[i].macs);
    CHECK(read_back[i].bytes == recorded[i].bytes);
    CHECK(read_back[i].spill_bytes == recorded[i].spill_bytes);
    CHECK(read_back[i].bound == recorded[i].bound);
  }
#ifdef FURIOSA_TRACE_BINARY
  TempFile out("analysis-stdout");
  const std::string command = std::string("'") + FURIOSA_TRACE_BINARY + "' '" +
                              file.path().string() + "' --analyze --aggregate-by type >'" +
                              out.path().string() + "' 2>&1";
  const int raw = std::system(command.c_str());
  REQUIRE((raw != -1 && WIFEXITED(raw) && WEXITSTATUS(raw) == 0));
  const std::string text = file_text(out.path());
  INFO(text);
  CHECK_THAT(text, Catch::Contains("LowLevelConv2d"));
  CHECK_THAT(text, Catch::Contains("LowLevelAdd"));
  CHECK_THAT(text, !Catch::Contains("Quantize"));
#endif
}
