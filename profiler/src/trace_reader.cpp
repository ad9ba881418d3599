// Reading a Chrome trace or a CSV record table back into a RecordTable.
#include "furiosa/profiler/trace_reader.h"

#include "furiosa/core/error.h"
#include "furiosa/core/file_io.h"
#include "furiosa/core/text.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <istream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace furiosa::profiler {
namespace {

using nlohmann::json;

/// Thrown inside the reader and turned into one Error(InvalidInput) line naming the source.
struct BadTrace : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Parses 1..max_digits hex digits.
bool parse_hex(std::string_view text, std::size_t max_digits, std::uint64_t& out) {
  if (text.empty() || text.size() > max_digits) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, 16);
  return ec == std::errc() && ptr == text.data() + text.size();
}

/// Integer member `key` of `obj`, or `fallback` when absent; BadTrace when not an integer.
std::int64_t int_member(const json& obj, const char* key, std::int64_t fallback) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) throw BadTrace(fmt::format("'{}' is not an integer", key));
  return it->get<std::int64_t>();
}

/// A 64-bit id written as 16 hex digits in args (`key`); BadTrace when missing or malformed.
std::uint64_t hex_id_member(const json& args, const char* key) {
  const auto it = args.find(key);
  if (it == args.end() || !it->is_string()) {
    throw BadTrace(fmt::format("no args.{} (not a trace written by the furiosa profiler?)", key));
  }
  std::uint64_t v = 0;
  if (!parse_hex(it->get_ref<const std::string&>(), 16, v)) {
    throw BadTrace(fmt::format("bad args.{} '{}'", key, it->get<std::string>()));
  }
  return v;
}

/// A time in the format's microseconds -> whole ns (the exporter wrote ns / 1000.0).
std::int64_t us_to_ns(const json& v, const char* key) {
  if (!v.is_number()) throw BadTrace(fmt::format("'{}' is not a number", key));
  const double ns = std::round(v.get<double>() * 1000.0);
  if (!std::isfinite(ns) || std::fabs(ns) > 9.0e18) {
    throw BadTrace(fmt::format("'{}' is out of range", key));
  }
  return static_cast<std::int64_t>(ns);
}

/// One complete event as a row (times relative to the document's base).
SpanRecord span_of(const json& e) {
  SpanRecord r;
  const auto name = e.find("name");
  if (name == e.end() || !name->is_string()) throw BadTrace("no name");
  r.name = name->get<std::string>();
  // The category is the process's (pid 1 "Host" = Runtime, pid 100 + card = NPU, as the exporter
  // writes them): a flow's slices share one "cat" for Chrome DevTools (chrome_trace.cpp), so an
  // Enqueue is written "NPU". Without a pid, "cat" decides.
  const auto pid = e.find("pid");
  const auto cat = e.find("cat");
  if (pid != e.end() && pid->is_number_integer()) {
    r.cat = pid->get<std::int64_t>() >= 100 ? Category::NPU : Category::Runtime;
  } else {
    r.cat = cat != e.end() && cat->is_string() && *cat == "NPU" ? Category::NPU : Category::Runtime;
  }
  const auto ts = e.find("ts");
  if (ts == e.end()) throw BadTrace("no ts");
  r.start_ns = us_to_ns(*ts, "ts");
  const auto dur = e.find("dur");
  r.end_ns = r.start_ns + (dur == e.end() ? 0 : us_to_ns(*dur, "dur"));

  const auto args_it = e.find("args");
  if (args_it == e.end() || !args_it->is_object()) {
    throw BadTrace("no args (not a trace written by the furiosa profiler?)");
  }
  const json& args = *args_it;
  const auto trace = args.find("trace_id");
  if (trace == args.end() || !trace->is_string()) {
    throw BadTrace("no args.trace_id (not a trace written by the furiosa profiler?)");
  }
  const std::string& hex = trace->get_ref<const std::string&>();
  if (hex.empty() || hex.size() > 32) throw BadTrace(fmt::format("bad args.trace_id '{}'", hex));
  const std::string padded = std::string(32 - hex.size(), '0') + hex;
  if (!parse_hex(std::string_view(padded).substr(0, 16), 16, r.trace_id.hi) ||
      !parse_hex(std::string_view(padded).substr(16), 16, r.trace_id.lo)) {
    throw BadTrace(fmt::format("bad args.trace_id '{}'", hex));
  }
  r.span_id = hex_id_member(args, "span_id");
  r.parent_span_id = hex_id_member(args, "parent_span_id");
  const std::int64_t thread = int_member(args, "thread.id", 0);
  if (thread < 0) throw BadTrace("negative args.thread.id");
  r.thread_id = static_cast<std::uint64_t>(thread);
  r.card = static_cast<std::int32_t>(int_member(args, "card", -1));
  r.pe_index = static_cast<std::int32_t>(int_member(args, "pe_index", -1));
  r.execution_index = int_member(args, "execution_index", -1);
  r.instruction_index = static_cast<std::int32_t>(int_member(args, "instruction_index", -1));
  r.operator_index = static_cast<std::int32_t>(int_member(args, "operator_index", -1));
  r.dram_base = int_member(args, "dram_base", -1);
  r.cycles = int_member(args, "cycles", -1);
  const std::int64_t flow = int_member(args, "flow_id", 0);
  r.flow_id = flow > 0 ? static_cast<std::uint64_t>(flow) : 0;
  // The other string-valued args are the span's attributes (span_args() writes them there),
  // in key order; at most kMaxAttributes of them.
  constexpr std::size_t kMaxAttributes = 64;
  for (const auto& [key, value] : args.items()) {
    if (!value.is_string() || key == "trace_id" || key == "span_id" || key == "parent_span_id")
      continue;
    if (r.attributes.size() == kMaxAttributes)
      throw BadTrace(fmt::format("more than {} string args", kMaxAttributes));
    r.attributes.emplace_back(key, value.get<std::string>());
  }
  return r;
}

/// Collapses a message to one line (JSON library messages quote the input they stopped at).
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

}  // namespace

TraceFile read_chrome_trace(std::istream& in, std::string_view source) {
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::InvalidInput, one_line(fmt::format("{}: not valid JSON: {}", source, e.what())),
                ErrorSubject::of_file(std::string(source)));
  }
  const json* events = nullptr;
  std::int64_t base_ns = 0, epoch_offset_ns = 0;
  TraceFile file;
  file.format = TraceFile::Format::ChromeTrace;
  try {
    if (doc.is_array()) {  // the format's "JSON Array" form: events only
      events = &doc;
    } else if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array()) {
      events = &doc["traceEvents"];
      if (const auto other = doc.find("otherData"); other != doc.end() && other->is_object()) {
        base_ns = int_member(*other, "base_ns", 0);
        epoch_offset_ns = int_member(*other, "epoch_offset_ns", 0);
        const std::int64_t dropped = int_member(*other, "dropped_events", 0);
        file.dropped_events = dropped > 0 ? static_cast<std::uint64_t>(dropped) : 0;
      }
    } else {
      throw BadTrace("not a Chrome trace (no \"traceEvents\" array)");
    }
  } catch (const BadTrace& e) {
    throw Error(ErrorCode::InvalidInput, one_line(fmt::format("{}: {}", source, e.what())),
                ErrorSubject::of_file(std::string(source)));
  }

  std::vector<SpanRecord> rows;
  std::size_t index = 0;
  for (const json& e : *events) {
    ++index;
    if (!e.is_object()) {
      throw Error(ErrorCode::InvalidInput, fmt::format("{}: event #{} is not an object", source, index),
                  ErrorSubject::of_file(std::string(source)));
    }
    const auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string() || *ph != "X") continue;
    try {
      SpanRecord r = span_of(e);
      r.start_ns += base_ns + epoch_offset_ns;
      r.end_ns += base_ns + epoch_offset_ns;
      rows.push_back(std::move(r));
    } catch (const std::exception& ex) {  // BadTrace, or a json type error
      const auto name = e.find("name");
      const std::string label =
          name != e.end() && name->is_string() ? fmt::format(" ('{}')", name->get<std::string>())
                                               : std::string();
      throw Error(ErrorCode::InvalidInput,
                  one_line(fmt::format("{}: event #{}{}: {}", source, index, label, ex.what())),
                  ErrorSubject::of_file(std::string(source)));
    }
  }
  file.table = RecordTable(std::move(rows));
  return file;
}

TraceFile read_trace_file(const std::filesystem::path& path) {
  // read_regular_file opens with O_NONBLOCK and checks fstat first: a FIFO or device given as
  // the trace is refused by name ("is not a regular file (a FIFO)") instead of blocking.
  std::string bytes;
  try {
    bytes = read_regular_file(path, ErrorCode::InvalidInput, "trace file");
  } catch (const Error&) {
    std::error_code ec;
    const char* what = std::filesystem::is_directory(path, ec) ? "is a directory"
                       : !std::filesystem::exists(path, ec)    ? "no such file"
                                                               : nullptr;
    if (what == nullptr) throw;
    throw Error(ErrorCode::InvalidInput, fmt::format("{}: {}", escape_text(path.string()), what),
                ErrorSubject::of_file(path.string()));
  }
  std::istringstream in(std::move(bytes));
  // Sniff the first non-blank character: a JSON document starts with '{' or '['.
  int c = in.peek();
  while (c != std::char_traits<char>::eof() && std::isspace(c)) {
    in.get();
    c = in.peek();
  }
  if (c == std::char_traits<char>::eof()) {
    throw Error(ErrorCode::InvalidInput, fmt::format("{}: empty file", path.string()),
                ErrorSubject::of_file(path.string()));
  }
  std::string extension = path.extension().string();
  for (char& ch : extension) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (c == '{' || c == '[' || extension == ".json") return read_chrome_trace(in, path.string());
  TraceFile file;
  file.format = TraceFile::Format::Table;
  file.table = RecordTable::read_csv(in, path.string());
  return file;
}

}  // namespace furiosa::profiler
