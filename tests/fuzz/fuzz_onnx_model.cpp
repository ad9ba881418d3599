// libFuzzer target: ONNX ModelProto bytes -> graph IR (compiler::import_onnx_bytes). A refusal
// must be a furiosa::Error; anything else escaping, a crash, a sanitizer report, a leak, an
// allocation over -malloc_limit_mb or a timeout is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)furiosa::compiler::import_onnx_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx");
  } catch (const furiosa::Error&) {
  }
  return 0;
}
