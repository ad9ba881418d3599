// Reading traces back (trace_reader.h) and the furiosa-trace tool on a written JSON and CSV.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/profiler/profiler.h"
#include "furiosa/profiler/report.h"
#include "furiosa/profiler/trace_reader.h"
#include "profiler_test_util.h"
#include "synthetic_trace.h"
#include "test_paths.h"

using namespace furiosa::profiler;
using furiosa::profiler::testing::synthetic_trace;
using furiosa::profiler::testing::TempFile;

namespace {

/// A profiler holding a synthetic trace plus a few real spans (with a record scope).
void fill(Profiler& profiler) {
  for (const SpanRecord& r : synthetic_trace(6)) profiler.record(r);
  auto scope = profiler.record("trace, \"quoted\"");
  ScopedSpan inference(&profiler, "Inference", profiler.current_context());
  ScopedSpan softmax(&profiler, "Softmax", inference.context());
  softmax.record().operator_index = 3;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// The error message of read_trace_file(path), or "(no error)". The error must be an
/// Error(InvalidInput) whose typed subject is the file.
std::string read_error(const std::filesystem::path& path) {
  try {
    read_trace_file(path);
  } catch (const furiosa::Error& e) {
    CHECK(e.code() == furiosa::ErrorCode::InvalidInput);
    CHECK(e.file() == path.string());
    return e.message();
  }
  return "(no error)";
}

void check_same(const SpanRecord& a, const SpanRecord& b, bool with_extras) {
  CHECK(a.trace_id == b.trace_id);
  CHECK(a.span_id == b.span_id);
  CHECK(a.parent_span_id == b.parent_span_id);
  CHECK(a.name == b.name);
  CHECK(a.cat == b.cat);
  CHECK(a.start_ns == b.start_ns);
  CHECK(a.end_ns == b.end_ns);
  CHECK(a.thread_id == b.thread_id);
  CHECK(a.pe_index == b.pe_index);
  CHECK(a.execution_index == b.execution_index);
  CHECK(a.instruction_index == b.instruction_index);
  CHECK(a.operator_index == b.operator_index);
  CHECK(a.dram_base == b.dram_base);
  if (with_extras) {
    CHECK(a.card == b.card);
    CHECK(a.flow_id == b.flow_id);
  }
}

}  // namespace

TEST_CASE("a written Chrome trace reads back as the profiler's record table",
          "[profiler][reader]") {
  TempFile file("reader-json");
  Profiler profiler;
  fill(profiler);
  profiler.write_chrome_trace(file.path());

  const TraceFile trace = read_trace_file(file.path());
  CHECK(trace.format == TraceFile::Format::ChromeTrace);
  CHECK(trace.dropped_events == 0);
  const RecordTable expected = profiler.record_table();
  REQUIRE(trace.table.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("row " << i << " " << expected.rows()[i].name);
    check_same(trace.table.rows()[i], expected.rows()[i], true);
  }
  // The same reports, from the file and from memory.
  CHECK(format_report(ReportKind::All, trace.table.rows()) ==
        format_report(ReportKind::All, profiler.records()));
}

TEST_CASE("a written CSV table reads back", "[profiler][reader]") {
  TempFile file("reader-csv", ".csv");
  ProfilerOptions options;
  options.output_path = file.path();
  options.format = ProfilerFormat::Table;
  auto profiler = std::make_unique<Profiler>(options);
  fill(*profiler);
  const RecordTable expected = profiler->record_table();
  const std::string reports = format_report(ReportKind::All, profiler->records());
  profiler.reset();  // writes the CSV

  const TraceFile trace = read_trace_file(file.path());
  CHECK(trace.format == TraceFile::Format::Table);
  REQUIRE(trace.table.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    check_same(trace.table.rows()[i], expected.rows()[i], false);
  }
  CHECK(format_report(ReportKind::All, trace.table.rows()) == reports);
}

TEST_CASE("bad trace files give one-line errors naming the file", "[profiler][reader]") {
  TempFile file("reader-bad");
  const std::string name = file.path().string();
  auto check_error = [&](const std::string& text, const std::string& expected) {
    write_text(file.path(), text);
    const std::string error = read_error(file.path());
    INFO(error);
    CHECK_THAT(error, Catch::StartsWith(name + ": ") && Catch::Contains(expected));
    CHECK(error.find('\n') == std::string::npos);
  };

  CHECK_THAT(read_error(file.path().string() + ".missing"), Catch::Contains("no such file"));
  CHECK_THAT(read_error(std::filesystem::temp_directory_path()), Catch::Contains("is a directory"));
  {  // A FIFO (no writer: a blocking open would hang) and a device are refused at once, by name.
    const TempFile fifo_file("reader-fifo");  // removed even when a check fails
    const std::string fifo = fifo_file.path().string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THAT(read_error(fifo), Catch::Contains("trace file '" + fifo + "' is not a regular file (a FIFO)"));
    CHECK_THAT(read_error("/dev/zero"), Catch::Contains("is not a regular file (a character device)"));
  }
  check_error("", "empty file");
  check_error("  \n\t", "empty file");
  check_error("{\"traceEvents\": [\n{\"ph\": \"X\",", "not valid JSON");
  check_error("{\"events\": []}", "no \"traceEvents\" array");
  check_error("{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"Foreign\", \"ts\": 1, \"dur\": 2}]}",
              "event #1 ('Foreign'): no args");
  check_error(
      "{\"traceEvents\": [{\"ph\": \"M\", \"name\": \"x\"}, {\"ph\": \"X\", \"name\": \"A\", "
      "\"ts\": 1, \"args\": {\"trace_id\": \"ff\", \"span_id\": \"zz\", \"parent_span_id\": "
      "\"0\"}}]}",
      "event #2 ('A'): bad args.span_id 'zz'");
  check_error(
      "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"A\", \"ts\": \"soon\", \"args\": {}}]}",
      "'ts' is not a number");
  check_error("not,a,table\n1,2,3\n", "not valid JSON");  // named .json: read as JSON
  {
    TempFile csv("reader-bad", ".csv");
    write_text(csv.path(), "not,a,table\n1,2,3\n");
    CHECK_THAT(read_error(csv.path()),
               Catch::StartsWith(csv.path().string() + ": line 1: ") &&
                   Catch::Contains("no column 'trace_id'"));
  }

  // Minimal valid documents: the JSON array form, and events with no optional args.
  write_text(file.path(),
             "[{\"ph\": \"X\", \"name\": \"Inference\", \"ts\": 1.5, \"dur\": 2.25, \"args\": "
             "{\"trace_id\": \"1\", \"span_id\": \"a\", \"parent_span_id\": \"0\"}}]");
  const TraceFile trace = read_trace_file(file.path());
  REQUIRE(trace.table.size() == 1);
  CHECK(trace.table.rows()[0].start_ns == 1500);
  CHECK(trace.table.rows()[0].dur_ns() == 2250);
  CHECK(trace.table.rows()[0].span_id == 10);
  CHECK(trace.table.rows()[0].pe_index == -1);
}

#ifdef FURIOSA_TRACE_BINARY
namespace {

struct Run {
  int status = -1;
  std::string out, err;
};

/// Runs furiosa-trace with `args` (already shell-quoted), capturing stdout and stderr.
Run furiosa_trace(const std::string& args) {
  TempFile out("trace-stdout");
  TempFile err("trace-stderr");
  const std::string command = std::string("'") + FURIOSA_TRACE_BINARY + "' " + args + " >'" +
                              out.path().string() + "' 2>'" + err.path().string() + "'";
  const int raw = std::system(command.c_str());
  Run run;
  run.status = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  run.out = read_text(out.path());
  run.err = read_text(err.path());
  return run;
}

}  // namespace

TEST_CASE("furiosa-trace prints the reports of a JSON and a CSV trace", "[profiler][reader]") {
  TempFile json_file("tool-json");
  TempFile csv_file("tool-csv", ".csv");
  TempFile converted("tool-converted", ".csv");
  Profiler profiler;
  fill(profiler);
  profiler.write_chrome_trace(json_file.path());
  profiler.write_table(csv_file.path());
  const std::string all = format_report(ReportKind::All, profiler.records());

  const Run from_json = furiosa_trace("'" + json_file.path().string() + "'");
  CHECK(from_json.status == 0);
  CHECK(from_json.err.empty());
  CHECK(from_json.out == all);
  CHECK_THAT(from_json.out, Catch::Contains("Inference counts                : 7"));

  const Run from_csv = furiosa_trace("'" + csv_file.path().string() + "' --report all");
  CHECK(from_csv.status == 0);
  CHECK(from_csv.out == all);

  for (const char* report : {"summary", "inferences", "npu-executions", "npu-operators",
                             "external-operators"}) {
    const Run one = furiosa_trace("'" + json_file.path().string() + "' --report " + report);
    CHECK(one.status == 0);
    CHECK(one.out == format_report(*parse_report_kind(report), profiler.records()));
  }

  const Run convert = furiosa_trace("'" + json_file.path().string() + "' --report summary --csv '" +
                                    converted.path().string() + "'");
  CHECK(convert.status == 0);
  CHECK(read_trace_file(converted.path()).table.size() == profiler.records().size());
  CHECK(read_text(converted.path()) == read_text(csv_file.path()));

  write_text(csv_file.path(), "{ broken");
  const Run bad = furiosa_trace("'" + csv_file.path().string() + "'");
  CHECK(bad.status == 1);
  CHECK(bad.out.empty());
  CHECK_THAT(bad.err, Catch::StartsWith("furiosa-trace: error: InvalidInput: " + csv_file.path().string()));
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);

  const Run unknown = furiosa_trace("'" + json_file.path().string() + "' --report bogus");
  CHECK(unknown.status != 0);
  CHECK_THAT(unknown.err, Catch::Contains("unknown report 'bogus'"));
}
#endif
