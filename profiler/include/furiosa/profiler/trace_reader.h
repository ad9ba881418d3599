// Reading traces back: the Chrome Trace JSON written by Profiler::write_chrome_trace() or the CSV
// record table written by Profiler::write_table() / RecordTable::write_csv(), so the reports of
// a trace recorded on another machine can be computed here (furiosa-trace).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <string_view>

#include "furiosa/profiler/record_table.h"

namespace furiosa::profiler {

/// What was read from a trace file.
struct TraceFile {
  enum class Format { ChromeTrace, Table };
  Format format = Format::ChromeTrace;
  /// The spans, times in ns since the Unix epoch.
  RecordTable table;
  /// otherData.dropped_events of a Chrome trace (a CSV does not carry it: 0).
  std::uint64_t dropped_events = 0;
};

/// Reads a Chrome trace document written by this profiler: every complete ("X") event becomes
/// a row, from its name, cat, ts, dur and args (trace_id, span_id, parent_span_id, thread.id,
/// card, pe_index, execution_index, instruction_index, operator_index, dram_base, flow_id);
/// times are otherData.base_ns + ts (+ otherData.epoch_offset_ns). Other events are ignored.
/// Throws Error(InvalidInput) "<source>: ..." (one line) when the text is not JSON or not such a
/// trace.
TraceFile read_chrome_trace(std::istream& in, std::string_view source = "<json>");

/// Reads `path`, a Chrome trace (the name ends in ".json", or the first non-blank character is
/// '{' or '[') or a CSV record table (anything else). Throws Error(InvalidInput) "<path>: ..."
/// (one line) on failure.
TraceFile read_trace_file(const std::filesystem::path& path);

}  // namespace furiosa::profiler
