// The trace-file functions of the _native module (native_trace.cpp).
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "furiosa/profiler/span.h"

namespace furiosa::python {

/// Adds to `m`: trace_record_table_csv(path) -> str, the record table (CSV) of a trace file
/// (Chrome trace JSON or CSV record table); analyze_trace(path, top, order_by, aggregate_by,
/// aggregate, min_time, type, pe) -> str, its operator analysis as CSV
/// (furiosa/profiler/operator_analysis.h). Both release the GIL while reading and raise the
/// runtime's errors (InvalidArgument for an unknown option, the reader's for a bad file).
void bind_trace_functions(pybind11::module_& m);

/// The rows of report `name` ("inferences", "npu-executions", "npu-operators",
/// "external-operators"; profiler/report.h) over `spans` as a dict of equal-length column lists,
/// columns named as FuriosaAI's profiler prints them (trace_id, span_id, thread.id, dur;
/// trace_id, span_id, pe_index, execution_index, NPU Total, NPU Run, NPU IoWait; name,
/// average elapsed(ns), count; trace_id, span_id, thread.id, name, operator_index, dur). Ids are
/// hex strings, times ns. Raises InvalidArgument for any other name.
pybind11::dict report_columns(const std::string& name,
                              const std::vector<profiler::SpanRecord>& spans);

}  // namespace furiosa::python
