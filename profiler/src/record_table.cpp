// The record table: building, filtering, CSV writing and reading.
#include "furiosa/profiler/record_table.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <istream>
#include <iterator>
#include <ostream>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "furiosa/core/error.h"
#include "csv_field.h"
#include "output_file.h"

namespace furiosa::profiler {
namespace {

using detail::append_csv_field;

/// Index of `column` in kRecordColumns, or kRecordColumns.size() when unknown.
std::size_t column_index(std::string_view column) noexcept {
  const auto it = std::find(kRecordColumns.begin(), kRecordColumns.end(), column);
  return static_cast<std::size_t>(it - kRecordColumns.begin());
}

/// An optional (>= 0) integer attribute as a cell.
template <class Int>
std::string optional_cell(Int v) {
  return v >= 0 ? fmt::format("{}", v) : std::string();
}

/// Cell `column` (an index into kRecordColumns) of `r`.
std::string cell_of(const SpanRecord& r, std::size_t column) {
  switch (column) {
    case 0: return r.trace_id.to_hex();
    case 1: return r.parent_span_id != 0 ? fmt::format("{:016x}", r.parent_span_id) : "";
    case 2: return fmt::format("{:016x}", r.span_id);
    case 3: return fmt::format("{}", r.start_ns);
    case 4: return fmt::format("{}", r.end_ns);
    case 5: return std::string(category_name(r.cat));
    case 6: return r.name;
    case 7: return r.thread_id != 0 ? fmt::format("{}", r.thread_id) : "";
    case 8: return optional_cell(r.dram_base);
    case 9: return optional_cell(r.pe_index);
    case 10: return optional_cell(r.execution_index);
    case 11: return optional_cell(r.instruction_index);
    case 12: return optional_cell(r.operator_index);
    case 13: return fmt::format("{}", r.dur_ns());
    default: throw std::out_of_range("record table: no such column");
  }
}

/// Reads CSV records one at a time (quoted fields may hold commas, quotes and line breaks).
class CsvReader {
 public:
  CsvReader(std::istream& in, std::string_view source) : in_(in), source_(source) {}

  /// The next record's fields; false at end of input. `line` is the record's first line.
  bool next(std::vector<std::string>& fields, std::size_t& line) {
    fields.clear();
    int c = in_.get();
    if (first_) {  // a UTF-8 byte order mark (spreadsheets write one) is not data
      first_ = false;
      if (c == 0xEF && in_.peek() == 0xBB) {
        in_.get();
        if (in_.get() != 0xBF) fail(line_, "malformed byte order mark");
        c = in_.get();
      }
    }
    if (c == std::char_traits<char>::eof()) return false;
    line = line_;
    std::string field;
    bool quoted = false;  // inside a quoted field
    bool was_quoted = false;
    for (;; c = in_.get()) {
      if (c == std::char_traits<char>::eof()) {
        if (quoted) fail(line, "unterminated quoted field");
        fields.push_back(std::move(field));
        return true;
      }
      const char ch = static_cast<char>(c);
      if (quoted) {
        if (ch == '"') {
          if (in_.peek() == '"') {
            in_.get();
            field += '"';
          } else {
            quoted = false;
          }
        } else {
          if (ch == '\n') ++line_;
          field += ch;
        }
        continue;
      }
      if (ch == '"') {
        if (!field.empty() || was_quoted) fail(line_, "a quote inside an unquoted field");
        quoted = was_quoted = true;
      } else if (ch == ',') {
        fields.push_back(std::move(field));
        field.clear();
        was_quoted = false;
      } else if (ch == '\r' && in_.peek() == '\n') {
        continue;  // CRLF: the LF ends the record
      } else if (ch == '\n') {
        ++line_;
        fields.push_back(std::move(field));
        return true;
      } else {
        if (was_quoted) fail(line_, "characters after a closing quote");
        field += ch;
      }
    }
  }

  [[noreturn]] void fail(std::size_t line, std::string_view what) const {
    throw Error(ErrorCode::InvalidInput, fmt::format("{}: line {}: {}", source_, line, what),
                ErrorSubject::of_file(std::string(source_)));
  }

 private:
  std::istream& in_;
  std::string source_;
  std::size_t line_ = 1;
  bool first_ = true;
};

/// Parses an unsigned hex number of at most `max_digits` digits.
bool parse_hex(std::string_view text, std::size_t max_digits, std::uint64_t& out) {
  if (text.empty() || text.size() > max_digits) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, 16);
  return ec == std::errc() && ptr == text.data() + text.size();
}

/// Parses a decimal integer filling all of `text`.
template <class Int>
bool parse_int(std::string_view text, Int& out) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

RecordTable RecordTable::from_records(std::vector<SpanRecord> records,
                                      std::int64_t epoch_offset_ns) {
  for (SpanRecord& r : records) {
    r.start_ns += epoch_offset_ns;
    r.end_ns += epoch_offset_ns;
  }
  return RecordTable(std::move(records));
}

RecordTable RecordTable::filter_by_name(std::string_view name) const {
  return filter([name](const SpanRecord& r) { return r.name == name; });
}

RecordTable RecordTable::filter_by_category(Category cat) const {
  return filter([cat](const SpanRecord& r) { return r.cat == cat; });
}

RecordTable RecordTable::filter(const std::function<bool(const SpanRecord&)>& keep) const {
  std::vector<SpanRecord> kept;
  std::copy_if(rows_.begin(), rows_.end(), std::back_inserter(kept), keep);
  return RecordTable(std::move(kept));
}

std::string RecordTable::cell(std::size_t row, std::string_view column) const {
  const std::size_t c = column_index(column);
  if (c == kRecordColumns.size()) {
    throw std::out_of_range(fmt::format("record table: no column '{}'", column));
  }
  return cell_of(rows_.at(row), c);
}

void RecordTable::write_csv(std::ostream& out) const {
  std::string line;
  for (std::size_t c = 0; c < kRecordColumns.size(); ++c) {
    if (c > 0) line += ',';
    line += kRecordColumns[c];
  }
  line += '\n';
  out << line;
  for (const SpanRecord& r : rows_) {
    line.clear();
    for (std::size_t c = 0; c < kRecordColumns.size(); ++c) {
      if (c > 0) line += ',';
      append_csv_field(line, cell_of(r, c));
    }
    line += '\n';
    out << line;
  }
}

void RecordTable::write_csv(const std::filesystem::path& path) const {
  detail::write_output_file(path, "record table", [&](std::ostream& out) { write_csv(out); });
}

RecordTable RecordTable::read_csv(std::istream& in, std::string_view source) {
  CsvReader reader(in, source);
  std::vector<std::string> fields;
  std::size_t line = 1;
  if (!reader.next(fields, line)) reader.fail(1, "empty file, expected the record table header");
  // Where each column of kRecordColumns is in the file.
  std::vector<std::size_t> position(kRecordColumns.size(), fields.size());
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const std::size_t c = column_index(fields[i]);
    if (c < kRecordColumns.size()) position[c] = i;
  }
  for (std::size_t c = 0; c < kRecordColumns.size(); ++c) {
    if (position[c] == fields.size()) {
      reader.fail(1, fmt::format("not a record table: no column '{}' in the header",
                                 kRecordColumns[c]));
    }
  }
  const std::size_t width = fields.size();

  std::vector<SpanRecord> rows;
  while (reader.next(fields, line)) {
    if (fields.size() == 1 && fields[0].empty()) continue;  // a blank line
    if (fields.size() != width) {
      reader.fail(line, fmt::format("{} fields, the header has {}", fields.size(), width));
    }
    auto at = [&](std::size_t c) -> const std::string& { return fields[position[c]]; };
    auto bad = [&](std::size_t c) {
      reader.fail(line, fmt::format("bad {} '{}'", kRecordColumns[c], at(c)));
    };
    SpanRecord r;
    const std::string& trace = at(0);
    if (trace.size() > 32 || trace.empty()) bad(0);
    {
      const std::string padded = std::string(32 - trace.size(), '0') + trace;
      if (!parse_hex(std::string_view(padded).substr(0, 16), 16, r.trace_id.hi) ||
          !parse_hex(std::string_view(padded).substr(16), 16, r.trace_id.lo)) {
        bad(0);
      }
    }
    if (!at(1).empty() && !parse_hex(at(1), 16, r.parent_span_id)) bad(1);
    if (!parse_hex(at(2), 16, r.span_id)) bad(2);
    if (!parse_int(at(3), r.start_ns)) bad(3);
    if (!parse_int(at(4), r.end_ns)) bad(4);
    if (at(5) == "Runtime") {
      r.cat = Category::Runtime;
    } else if (at(5) == "NPU") {
      r.cat = Category::NPU;
    } else {
      bad(5);
    }
    r.name = at(6);
    if (!at(7).empty() && !parse_int(at(7), r.thread_id)) bad(7);
    if (!at(8).empty() && (!parse_int(at(8), r.dram_base) || r.dram_base < 0)) bad(8);
    if (!at(9).empty() && (!parse_int(at(9), r.pe_index) || r.pe_index < 0)) bad(9);
    if (!at(10).empty() && (!parse_int(at(10), r.execution_index) || r.execution_index < 0)) {
      bad(10);
    }
    if (!at(11).empty() && (!parse_int(at(11), r.instruction_index) || r.instruction_index < 0)) {
      bad(11);
    }
    if (!at(12).empty() && (!parse_int(at(12), r.operator_index) || r.operator_index < 0)) {
      bad(12);
    }
    std::int64_t dur = 0;
    if (!parse_int(at(13), dur) || dur != r.end_ns - r.start_ns) bad(13);
    rows.push_back(std::move(r));
  }
  return RecordTable(std::move(rows));
}

}  // namespace furiosa::profiler
