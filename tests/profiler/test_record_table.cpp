// The record table: columns, cells, filters, CSV writing (quoting) and reading back.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "furiosa/profiler/profiler.h"
#include "furiosa/profiler/record_table.h"
#include "profiler_test_util.h"
#include "synthetic_trace.h"

using namespace furiosa::profiler;
using furiosa::profiler::testing::synthetic_trace;
using furiosa::profiler::testing::TempFile;

namespace {

/// Splits CSV text into lines (the tests' cells contain no line breaks unless said).
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string to_csv(const RecordTable& table) {
  std::ostringstream out;
  table.write_csv(out);
  return out.str();
}

RecordTable from_csv(const std::string& text) {
  std::istringstream in(text);
  return RecordTable::read_csv(in, "test.csv");
}

/// Every field of two spans that the CSV carries.
void check_same_row(const SpanRecord& a, const SpanRecord& b) {
  CHECK(a.trace_id == b.trace_id);
  CHECK(a.parent_span_id == b.parent_span_id);
  CHECK(a.span_id == b.span_id);
  CHECK(a.start_ns == b.start_ns);
  CHECK(a.end_ns == b.end_ns);
  CHECK(a.cat == b.cat);
  CHECK(a.name == b.name);
  CHECK(a.thread_id == b.thread_id);
  CHECK(a.dram_base == b.dram_base);
  CHECK(a.pe_index == b.pe_index);
  CHECK(a.execution_index == b.execution_index);
  CHECK(a.instruction_index == b.instruction_index);
  CHECK(a.operator_index == b.operator_index);
}

}  // namespace

TEST_CASE("record table columns are the SDK's, in order", "[profiler][table]") {
  const std::vector<std::string> expected = {
      "trace_id", "parent_span_id", "span_id", "start", "end", "cat", "name", "thread.id",
      "dram_base", "pe_index", "execution_index", "instruction_index", "operator_index", "dur"};
  REQUIRE(kRecordColumns.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) CHECK(kRecordColumns[i] == expected[i]);
  const auto lines = lines_of(to_csv(RecordTable{}));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "trace_id,parent_span_id,span_id,start,end,cat,name,thread.id,dram_base,pe_index,"
        "execution_index,instruction_index,operator_index,dur");
}

TEST_CASE("record table cells: hex ids, epoch ns, empty for absent values", "[profiler][table]") {
  SpanRecord host;
  host.trace_id = TraceId{0x0123456789abcdefULL, 0x42};
  host.span_id = 0x1f;
  host.parent_span_id = 0;
  host.name = "Inference";
  host.start_ns = 100;
  host.end_ns = 350;
  host.thread_id = 3;
  SpanRecord kernel;
  kernel.trace_id = host.trace_id;
  kernel.span_id = 0x20;
  kernel.parent_span_id = 0x1f;
  kernel.name = "LowLevelConv2d";
  kernel.cat = Category::NPU;
  kernel.start_ns = 200;
  kernel.end_ns = 260;
  kernel.card = 0;
  kernel.pe_index = 1;
  kernel.execution_index = 9;
  kernel.instruction_index = 0;
  kernel.operator_index = 4;
  kernel.dram_base = 4096;
  const RecordTable table = RecordTable::from_records({host, kernel}, 1'700'000'000'000'000'000);

  CHECK(table.cell(0, "trace_id") == "0123456789abcdef0000000000000042");
  CHECK(table.cell(0, "parent_span_id").empty());
  CHECK(table.cell(0, "span_id") == "000000000000001f");
  CHECK(table.cell(0, "start") == "1700000000000000100");
  CHECK(table.cell(0, "end") == "1700000000000000350");
  CHECK(table.cell(0, "dur") == "250");
  CHECK(table.cell(0, "cat") == "Runtime");
  CHECK(table.cell(0, "thread.id") == "3");
  for (const char* absent :
       {"dram_base", "pe_index", "execution_index", "instruction_index", "operator_index"}) {
    CHECK(table.cell(0, absent).empty());
  }
  CHECK(table.cell(1, "parent_span_id") == "000000000000001f");
  CHECK(table.cell(1, "cat") == "NPU");
  CHECK(table.cell(1, "thread.id").empty());
  CHECK(table.cell(1, "dram_base") == "4096");
  CHECK(table.cell(1, "pe_index") == "1");
  CHECK(table.cell(1, "execution_index") == "9");
  CHECK(table.cell(1, "instruction_index") == "0");
  CHECK(table.cell(1, "operator_index") == "4");
  CHECK(table.cell(1, "dur") == "60");
  CHECK_THROWS_AS(table.cell(0, "card"), std::out_of_range);
  CHECK_THROWS_AS(table.cell(2, "name"), std::out_of_range);

  const auto lines = lines_of(to_csv(table));
  REQUIRE(lines.size() == 3);
  CHECK(lines[1] ==
        "0123456789abcdef0000000000000042,,000000000000001f,1700000000000000100,"
        "1700000000000000350,Runtime,Inference,3,,,,,,250");
  CHECK(lines[2] ==
        "0123456789abcdef0000000000000042,000000000000001f,0000000000000020,1700000000000000200,"
        "1700000000000000260,NPU,LowLevelConv2d,,4096,1,9,0,4,60");
}

TEST_CASE("record table filters by name and by category", "[profiler][table]") {
  const RecordTable table(synthetic_trace(6));
  const RecordTable inferences = table.filter_by_name("Inference");
  CHECK(inferences.size() == 6);
  for (const auto& r : inferences.rows()) CHECK(r.name == "Inference");
  CHECK(table.filter_by_name("LowLevelConv2d").size() == 12);
  CHECK(table.filter_by_name("nothing").empty());
  const RecordTable npu = table.filter_by_category(Category::NPU);
  const RecordTable host = table.filter_by_category(Category::Runtime);
  CHECK(npu.size() == 6 * 6);   // Load, Execution, 3 kernels, Store
  CHECK(host.size() == 6 * 7);  // Inference, Quantize, Lower, Enqueue, Softmax, Unlower, Dequantize
  CHECK(npu.size() + host.size() == table.size());
  for (const auto& r : npu.rows()) CHECK(r.cat == Category::NPU);
  // Filters compose and keep the order.
  const RecordTable loads = npu.filter_by_name("Load");
  CHECK(loads.size() == 6);
  CHECK(std::is_sorted(loads.rows().begin(), loads.rows().end(),
                       [](const SpanRecord& a, const SpanRecord& b) {
                         return a.start_ns < b.start_ns;
                       }));
  CHECK(table.filter([](const SpanRecord& r) { return r.operator_index == 2; }).size() == 6);
}

TEST_CASE("record table CSV round trip, names with commas and quotes", "[profiler][table]") {
  std::vector<SpanRecord> rows = synthetic_trace(4);
  rows[1].name = "Quantize, \"fast\"";
  rows[2].name = "multi\nline";
  rows[3].name = "";
  rows[4].name = "trailing\"";
  const RecordTable table(rows);
  const std::string csv = to_csv(table);
  CHECK(csv.find("\"Quantize, \"\"fast\"\"\"") != std::string::npos);
  CHECK(csv.find("\"multi\nline\"") != std::string::npos);

  const RecordTable back = from_csv(csv);
  REQUIRE(back.size() == table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    INFO("row " << i);
    check_same_row(back.rows()[i], table.rows()[i]);
  }
  CHECK(to_csv(back) == csv);

  SECTION("CRLF line ends and a byte order mark are accepted") {
    std::string crlf = "\xEF\xBB\xBF";
    for (const char c : csv) {
      if (c == '\n') crlf += '\r';
      crlf += c;
    }
    // The quoted line break inside a name is data: turn its CR back.
    const auto pos = crlf.find("multi\r\nline");
    REQUIRE(pos != std::string::npos);
    crlf.erase(pos + 5, 1);
    const RecordTable again = from_csv(crlf);
    REQUIRE(again.size() == table.size());
    CHECK(again.rows()[2].name == "multi\nline");
    CHECK(again.rows()[1].name == "Quantize, \"fast\"");
  }
  SECTION("columns in another order and extra columns") {
    const std::string text =
        "name,extra,dur,end,start,cat,span_id,parent_span_id,trace_id,thread.id,dram_base,"
        "pe_index,execution_index,instruction_index,operator_index\n"
        "Inference,x,5,15,10,Runtime,0a,,ff,2,,,,,\n";
    const RecordTable t = from_csv(text);
    REQUIRE(t.size() == 1);
    CHECK(t.rows()[0].name == "Inference");
    CHECK(t.rows()[0].span_id == 10);
    CHECK(t.rows()[0].trace_id == TraceId{0, 0xff});
    CHECK(t.rows()[0].thread_id == 2);
    CHECK(t.rows()[0].dur_ns() == 5);
  }
}

TEST_CASE("Profiler writes the table with format Table", "[profiler][table]") {
  TempFile file("table", ".csv");
  std::int64_t offset = 0;
  {
    ProfilerOptions options;
    options.output_path = file.path();
    options.format = ProfilerFormat::Table;
    Profiler profiler(options);
    offset = profiler.epoch_offset_ns();
    for (const SpanRecord& r : synthetic_trace(3)) profiler.record(r);
  }
  std::ifstream in(file.path());
  const RecordTable back = RecordTable::read_csv(in, file.path().string());
  REQUIRE(back.size() == synthetic_trace(3).size());
  const RecordTable expected = RecordTable::from_records(synthetic_trace(3), offset);
  // records() sorts by start; compare as sets keyed by span id.
  for (const SpanRecord& want : expected.rows()) {
    const auto it = std::find_if(back.rows().begin(), back.rows().end(),
                                 [&](const SpanRecord& r) { return r.span_id == want.span_id; });
    REQUIRE(it != back.rows().end());
    check_same_row(*it, want);
  }
}

TEST_CASE("read_csv rejects malformed tables with the line", "[profiler][table]") {
  const std::string header =
      "trace_id,parent_span_id,span_id,start,end,cat,name,thread.id,dram_base,pe_index,"
      "execution_index,instruction_index,operator_index,dur\n";
  auto error_of = [](const std::string& text) -> std::string {
    try {
      from_csv(text);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "(no error)";
  };
  CHECK_THAT(error_of(""), Catch::Contains("test.csv: line 1: empty file"));
  CHECK_THAT(error_of("a,b\n1,2\n"), Catch::Contains("no column 'trace_id'"));
  CHECK_THAT(error_of(header + "ff,,01,1,2,Runtime,A,,,,,,,1\nff,,02,1,2,Runtime\n"),
             Catch::Contains("test.csv: line 3: 6 fields, the header has 14"));
  CHECK_THAT(error_of(header + "zz,,01,1,2,Runtime,A,,,,,,,1\n"),
             Catch::Contains("line 2: bad trace_id 'zz'"));
  CHECK_THAT(error_of(header + "ff,,01,1,2,GPU,A,,,,,,,1\n"), Catch::Contains("bad cat 'GPU'"));
  CHECK_THAT(error_of(header + "ff,,01,x,2,Runtime,A,,,,,,,1\n"), Catch::Contains("bad start"));
  CHECK_THAT(error_of(header + "ff,,01,1,2,Runtime,A,,,-3,,,,1\n"),
             Catch::Contains("bad pe_index '-3'"));
  CHECK_THAT(error_of(header + "ff,,01,1,2,Runtime,A,,,,,,,7\n"), Catch::Contains("bad dur '7'"));
  CHECK_THAT(error_of(header + "ff,,01,1,2,Runtime,\"A,,,,,,,1\n"),
             Catch::Contains("unterminated quoted field"));
  CHECK_THAT(error_of(header + "ff,,01,1,2,Runtime,A\"b,,,,,,,1\n"),
             Catch::Contains("a quote inside an unquoted field"));
  // One line each.
  CHECK(error_of(header + "ff,,01,1,2,Runtime,\"A,,,,,,,1\n").find('\n') == std::string::npos);
  // A blank line is skipped, not an error.
  CHECK(from_csv(header + "ff,,01,1,2,Runtime,A,,,,,,,1\n\n").size() == 1);
}
