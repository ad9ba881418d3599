// furiosa-trace: reads a trace written by the furiosa profiler (Chrome trace JSON or the CSV
// record table) and prints the same reports as the profiler API and furiosa-run, so a trace
// recorded on another machine can be analysed here.
//
//   furiosa-trace FILE [--report all|summary|inferences|npu-executions|npu-operators|
//                                external-operators] [--csv OUT]
//   furiosa-trace analyze FILE [-t/--top N] [--order-by time|cumulative|flops|memory|bandwidth]
//                              [--aggregate-by none|name|type] [--aggregate sum|mean|max|min|count]
//                              [--min-time SECONDS] [--type KIND] [--pe N] [--format text|csv|json]
//   (also spelled furiosa-trace FILE --analyze ...)
// analyze ranks the NPU kernels as MegEngine's profile_analyze ranks operators
// (furiosa/profiler/operator_analysis.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "furiosa/profiler/operator_analysis.h"
#include "furiosa/profiler/report.h"
#include "furiosa/profiler/trace_reader.h"

namespace {

struct Analysis {
  bool enabled = false;
  std::size_t top = 10;
  std::string order = "time";
  std::string aggregate_by = "name";
  std::string aggregate = "sum";
  double min_time_s = 0;
  double min_time_us = 0;
  std::string type;
  std::int32_t pe = -1;
  std::string format = "text";
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
    namespace fp = furiosa::profiler;
    fp::OperatorAnalysisOptions options;  // the names were checked by CLI11
    options.top = analysis.top;
    options.order = *fp::parse_operator_order(analysis.order);
    options.grouping = *fp::parse_operator_grouping(analysis.aggregate_by);
    options.aggregate = *fp::parse_time_aggregate(analysis.aggregate);
    options.min_time_s = std::max(analysis.min_time_s, analysis.min_time_us * 1e-6);
    options.type = analysis.type;
    options.pe = analysis.pe;
    const auto& spans = trace.table.rows();
    std::cout << fp::format_operator_analysis(
        fp::analyze_operators(spans, options), fp::total_kernel_ns(spans),
        *fp::parse_analysis_format(analysis.format), options.aggregate);
  } else {
    furiosa::profiler::print_report(std::cout, report, trace.table);
  }
  std::cout.flush();
  return std::cout ? 0 : 1;
}

/// The command line; exceptions from run() are reported by main().
int cli_main(int argc, char** argv) {
  // "furiosa-trace analyze FILE ..." is "furiosa-trace FILE ... --analyze".
  std::vector<char*> args(argv, argv + argc);
  static char analyze_flag[] = "--analyze";
  if (args.size() > 1 && std::string(args[1]) == "analyze") {
    args.erase(args.begin() + 1);
    args.push_back(analyze_flag);
  }
  argc = static_cast<int>(args.size());
  argv = args.data();
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
               "Rank the NPU kernels (device self time, FLOPs, FLOP/s, memory, bandwidth, DRAM "
               "traffic, bound, shapes) instead of printing the reports; also spelled "
               "'furiosa-trace analyze FILE'");
  app.add_option("-t,--top", analysis.top, "analyze: rows to print (0: all)")
      ->capture_default_str();
  app.add_option("--order-by", analysis.order,
                 "analyze: rank by the aggregated time, the total time, FLOP/s, memory per call "
                 "or bandwidth")
      ->check(CLI::IsMember({"time", "cumulative", "flops", "memory", "bandwidth"}))
      ->capture_default_str();
  app.add_option("--aggregate-by", analysis.aggregate_by,
                 "analyze: one row per kernel call, per kernel of a program, or per kernel type")
      ->check(CLI::IsMember({"none", "name", "type"}))
      ->capture_default_str();
  app.add_option("--aggregate", analysis.aggregate,
                 "analyze: how a row's time is reduced over its calls")
      ->check(CLI::IsMember({"sum", "mean", "max", "min", "count"}))
      ->capture_default_str();
  app.add_option("--min-time", analysis.min_time_s,
                 "analyze: leave out rows whose mean time per call is below this many seconds")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--min-time-us", analysis.min_time_us, "analyze: --min-time in microseconds")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--type", analysis.type,
                 "analyze: only kernels of this type (LowLevelConv2d, or Conv2d)");
  app.add_option("--pe", analysis.pe, "analyze: only kernels on the device whose first PE is N")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--format", analysis.format, "analyze: text table, CSV or JSON")
      ->check(CLI::IsMember({"text", "csv", "json"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return run(file, report, csv, analysis);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return cli_main(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "furiosa-trace: error: {}\n", e.what());
    return 1;
  }
}
