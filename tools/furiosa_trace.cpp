// furiosa-trace: reads a trace written by the furiosa profiler (Chrome trace JSON or the CSV
// record table) and prints the same reports as the profiler API and furiosa-run, so a trace
// recorded on another machine can be analysed here.
//
//   furiosa-trace FILE [--report all|summary|inferences|npu-executions|npu-operators|
//                                external-operators] [--csv OUT]
//   furiosa-trace FILE --analyze [--top N] [--order-by time|memory|flops] [--aggregate-by type]
//                                [--min-time-us US]
// --analyze ranks the NPU kernels as MegEngine's profile analyzer ranks operators
// (furiosa/profiler/operator_analysis.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <exception>
#include <iostream>
#include <string>

#include "furiosa/profiler/operator_analysis.h"
#include "furiosa/profiler/report.h"
#include "furiosa/profiler/trace_reader.h"

namespace {

struct Analysis {
  bool enabled = false;
  std::size_t top = 10;
  std::string order = "time";
  std::string aggregate_by = "none";
  double min_time_us = 0;
};

int run(const std::string& file, const std::string& report, const std::string& csv,
        const Analysis& analysis) {
  const furiosa::profiler::TraceFile trace = furiosa::profiler::read_trace_file(file);
  if (!csv.empty()) trace.table.write_csv(csv);
  if (trace.dropped_events > 0) {
    fmt::print(stderr,
               "furiosa-trace: warning: {} event(s) were dropped while recording (max_events); "
               "the reports cover the recorded ones\n",
               trace.dropped_events);
  }
  if (analysis.enabled) {
    furiosa::profiler::OperatorAnalysisOptions options;
    options.top = analysis.top;
    options.order = *furiosa::profiler::parse_operator_order(analysis.order);  // checked by CLI11
    options.by_type = analysis.aggregate_by == "type";
    options.min_mean_us = analysis.min_time_us;
    const auto& spans = trace.table.rows();
    std::cout << furiosa::profiler::format_operator_analysis(
        furiosa::profiler::analyze_operators(spans, options),
        furiosa::profiler::total_kernel_ns(spans));
  } else {
    furiosa::profiler::print_report(std::cout, report, trace.table);
  }
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
  Analysis analysis;
  app.add_flag("--analyze", analysis.enabled,
               "Rank the NPU kernels (device self time, MACs, FLOP/s, memory, bandwidth, DRAM "
               "traffic, bound) "
               "instead of printing the reports");
  app.add_option("--top", analysis.top, "--analyze: rows to print (0: all)")->capture_default_str();
  app.add_option("--order-by", analysis.order,
                 "--analyze: rank by total time, memory per call or FLOP/s")
      ->check(CLI::IsMember({"time", "memory", "flops"}))
      ->capture_default_str();
  app.add_option("--aggregate-by", analysis.aggregate_by,
                 "--analyze: one row per kernel, or per kernel type")
      ->check(CLI::IsMember({"none", "type"}))
      ->capture_default_str();
  app.add_option("--min-time-us", analysis.min_time_us,
                 "--analyze: leave out rows whose mean time per call is below")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(file, report, csv, analysis);
  } catch (const std::exception& e) {
    fmt::print(stderr, "furiosa-trace: error: {}\n", e.what());
    return 1;
  }
}
