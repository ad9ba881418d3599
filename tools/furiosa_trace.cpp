// furiosa-trace: reads a trace written by the furiosa profiler (Chrome trace JSON or the CSV
// record table) and prints the same reports as the profiler API and furiosa-run, so a trace
// recorded on another machine can be analysed here.
//
//   furiosa-trace FILE [--report all|summary|inferences|npu-executions|npu-operators|
//                                external-operators] [--csv OUT]
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <exception>
#include <iostream>
#include <string>

#include "furiosa/profiler/report.h"
#include "furiosa/profiler/trace_reader.h"

namespace {

int run(const std::string& file, const std::string& report, const std::string& csv) {
  const furiosa::profiler::TraceFile trace = furiosa::profiler::read_trace_file(file);
  if (!csv.empty()) trace.table.write_csv(csv);
  if (trace.dropped_events > 0) {
    fmt::print(stderr,
               "furiosa-trace: warning: {} event(s) were dropped while recording (max_events); "
               "the reports cover the recorded ones\n",
               trace.dropped_events);
  }
  furiosa::profiler::print_report(std::cout, report, trace.table);
  std::cout.flush();
  return std::cout ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Prints the reports of a furiosa trace (Chrome trace JSON or CSV record table)",
               "furiosa-trace"};
  std::string file;
  std::string report = "all";
  std::string csv;
  app.add_option("FILE", file, "Trace file: Chrome trace JSON or CSV record table")->required();
  app.add_option("--report,-r", report,
                 std::string("Report to print: ") +
                     std::string(furiosa::profiler::kReportNames))
      ->check([](const std::string& name) {
        return furiosa::profiler::parse_report_kind(name)
                   ? std::string()
                   : fmt::format("unknown report '{}' (expected one of {})", name,
                                 furiosa::profiler::kReportNames);
      });
  app.add_option("--csv", csv, "Also write the record table of the trace as CSV to OUT");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(file, report, csv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "furiosa-trace: error: {}\n", e.what());
    return 1;
  }
}
