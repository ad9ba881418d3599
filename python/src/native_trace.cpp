// The _native functions that read a trace file written by the profiler: its record table and
// its operator analysis (furiosa.runtime.profiler.read_trace / analyze_trace).
#include "native_trace.h"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include <sstream>
#include <string>

#include "furiosa/core/error.h"
#include "furiosa/profiler/operator_analysis.h"
#include "furiosa/profiler/report.h"
#include "furiosa/profiler/trace_reader.h"

namespace furiosa::python {
namespace {

namespace py = pybind11;

template <class T>
T parsed(const std::optional<T>& value, std::string_view what, const std::string& name) {
  if (!value)
    throw Error(ErrorCode::InvalidArgument,
                "analyze_trace: unknown " + std::string(what) + " '" + name + "'");
  return *value;
}

std::string hex16(std::uint64_t id) { return fmt::format("{:016x}", id); }

}  // namespace

py::dict report_columns(const std::string& name, const std::vector<profiler::SpanRecord>& spans) {
  py::dict out;
  const auto kind = profiler::parse_report_kind(name);
  if (kind == profiler::ReportKind::Inferences) {
    py::list trace, span, thread, dur;
    for (const auto& r : profiler::inference_report(spans)) {
      trace.append(r.trace_id.to_hex());
      span.append(hex16(r.span_id));
      thread.append(r.thread_id);
      dur.append(r.dur_ns);
    }
    out["trace_id"] = trace;
    out["span_id"] = span;
    out["thread.id"] = thread;
    out["dur"] = dur;
  } else if (kind == profiler::ReportKind::NpuExecutions) {
    py::list trace, span, pe, exec, total, run, iowait;
    for (const auto& r : profiler::npu_execution_report(spans)) {
      trace.append(r.trace_id.to_hex());
      span.append(hex16(r.span_id));
      pe.append(r.pe_index);
      exec.append(r.execution_index);
      total.append(r.total_ns);
      run.append(r.run_ns);
      iowait.append(r.iowait_ns);
    }
    out["trace_id"] = trace;
    out["span_id"] = span;
    out["pe_index"] = pe;
    out["execution_index"] = exec;
    out["NPU Total"] = total;
    out["NPU Run"] = run;
    out["NPU IoWait"] = iowait;
  } else if (kind == profiler::ReportKind::NpuOperators) {
    py::list names, average, count;
    for (const auto& r : profiler::npu_operator_report(spans)) {
      names.append(r.name);
      average.append(r.average_ns);
      count.append(r.count);
    }
    out["name"] = names;
    out["average elapsed(ns)"] = average;
    out["count"] = count;
  } else if (kind == profiler::ReportKind::ExternalOperators) {
    py::list trace, span, thread, names, op, dur;
    for (const auto& r : profiler::external_operator_report(spans)) {
      trace.append(r.trace_id.to_hex());
      span.append(hex16(r.span_id));
      thread.append(r.thread_id);
      names.append(r.name);
      op.append(r.operator_index);
      dur.append(r.dur_ns);
    }
    out["trace_id"] = trace;
    out["span_id"] = span;
    out["thread.id"] = thread;
    out["name"] = names;
    out["operator_index"] = op;
    out["dur"] = dur;
  } else {
    throw Error(ErrorCode::InvalidArgument, "report_columns: no table report '" + name + "'");
  }
  return out;
}

void bind_trace_functions(py::module_& m) {
  m.def(
      "trace_record_table_csv",
      [](const std::string& path) {
        std::ostringstream out;
        {
          py::gil_scoped_release release;
          profiler::read_trace_file(path).table.write_csv(out);
        }
        return out.str();
      },
      py::arg("path"));
  m.def(
      "analyze_trace",
      [](const std::string& path, std::size_t top, const std::string& order,
         const std::string& aggregate_by, const std::string& aggregate, double min_time,
         const std::string& type, std::int32_t pe) {
        profiler::OperatorAnalysisOptions options;
        options.top = top;
        options.order = parsed(profiler::parse_operator_order(order), "order_by", order);
        options.grouping =
            parsed(profiler::parse_operator_grouping(aggregate_by), "aggregate_by", aggregate_by);
        options.aggregate =
            parsed(profiler::parse_time_aggregate(aggregate), "aggregate", aggregate);
        options.min_time_s = min_time;
        options.type = type;
        options.pe = pe;
        py::gil_scoped_release release;
        const auto trace = profiler::read_trace_file(path);
        const auto& spans = trace.table.rows();
        return profiler::format_operator_analysis(profiler::analyze_operators(spans, options),
                                                  profiler::total_kernel_ns(spans),
                                                  profiler::AnalysisFormat::Csv, options.aggregate);
      },
      py::arg("path"), py::arg("top"), py::arg("order_by"), py::arg("aggregate_by"),
      py::arg("aggregate"), py::arg("min_time"), py::arg("type"), py::arg("pe"));
  m.def(
      "trace_report_columns",
      [](const std::string& path, const std::string& name) {
        profiler::TraceFile trace;
        {
          py::gil_scoped_release release;
          trace = profiler::read_trace_file(path);
        }
        return report_columns(name, trace.table.rows());
      },
      py::arg("path"), py::arg("report"));
}

}  // namespace furiosa::python
