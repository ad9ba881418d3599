// libFuzzer target: trace files furiosa-trace reads: the first byte picks a Chrome trace
// (profiler::read_chrome_trace) or a CSV record table (RecordTable::read_csv), the rest is the
// file. A refusal must be a furiosa::Error; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "furiosa/core/error.h"
#include "furiosa/profiler/record_table.h"
#include "furiosa/profiler/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  try {
    if (data[0] & 1) {
      (void)furiosa::profiler::read_chrome_trace(in, "fuzz.json");
    } else {
      (void)furiosa::profiler::RecordTable::read_csv(in, "fuzz.csv");
    }
  } catch (const furiosa::Error&) {
  }
  return 0;
}
