// The record table: one row per span, the C++ counterpart of the DataFrame that FuriosaAI's
// `furiosa.runtime.profiler` gives with format "pandas".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "furiosa/profiler/span.h"

namespace furiosa::profiler {

/// The columns of the record table, in order (also the CSV header):
///   trace_id         32 lowercase hex digits
///   parent_span_id   16 lowercase hex digits; empty for a root span
///   span_id          16 lowercase hex digits
///   start, end       ns since the Unix epoch (integers)
///   cat              Runtime | NPU
///   name             span name (Inference, Quantize, Execution, LowLevelConv2d, ...)
///   thread.id        host thread that recorded the span; empty for device spans
///   dram_base        device DRAM base of the execution; empty when unknown
///   pe_index, execution_index, instruction_index, operator_index
///                    integers; empty when absent (-1 in SpanRecord)
///   dur              end - start, ns
inline constexpr std::array<std::string_view, 14> kRecordColumns = {
    "trace_id",  "parent_span_id",  "span_id",         "start",          "end",
    "cat",       "name",            "thread.id",       "dram_base",      "pe_index",
    "execution_index", "instruction_index", "operator_index", "dur"};

/// Rows are SpanRecords whose start_ns/end_ns are ns since the Unix epoch (not the steady clock
/// of Profiler::records()). Attributes that are not columns (card, flow_id) are kept when the
/// table is built from a profiler or a Chrome trace, and lost in CSV.
class RecordTable {
 public:
  RecordTable() = default;
  /// A table of `rows` whose times are already epoch ns; rows are kept in the given order.
  explicit RecordTable(std::vector<SpanRecord> rows) : rows_(std::move(rows)) {}

  /// The table of profiler records (steady-clock ns, see now_ns()): every time is shifted by
  /// `epoch_offset_ns` (Profiler::epoch_offset_ns()) into ns since the Unix epoch.
  static RecordTable from_records(std::vector<SpanRecord> records, std::int64_t epoch_offset_ns);

  const std::vector<SpanRecord>& rows() const noexcept { return rows_; }
  std::size_t size() const noexcept { return rows_.size(); }
  bool empty() const noexcept { return rows_.empty(); }

  /// The rows named exactly `name`, as a new table.
  RecordTable filter_by_name(std::string_view name) const;
  /// The rows of category `cat`, as a new table.
  RecordTable filter_by_category(Category cat) const;
  /// The rows for which `keep` is true, as a new table.
  RecordTable filter(const std::function<bool(const SpanRecord&)>& keep) const;

  /// The text of one cell as written to CSV ("" for an absent value). Throws
  /// std::out_of_range for an unknown column or row.
  std::string cell(std::size_t row, std::string_view column) const;

  /// CSV (RFC 4180): the header row kRecordColumns, then one row per span; "\n" line ends; a
  /// field containing a comma, a double quote, CR or LF is quoted with inner quotes doubled.
  void write_csv(std::ostream& out) const;
  /// write_csv to `path` (created or truncated). Throws Error(IoError) naming the path.
  void write_csv(const std::filesystem::path& path) const;

  /// Parses CSV written by write_csv (columns may come in any order; every column of
  /// kRecordColumns must be present; unknown columns are ignored). Throws Error(InvalidInput)
  /// "<source>: line N: ..." on malformed input.
  static RecordTable read_csv(std::istream& in, std::string_view source = "<csv>");

 private:
  std::vector<SpanRecord> rows_;
};

}  // namespace furiosa::profiler
