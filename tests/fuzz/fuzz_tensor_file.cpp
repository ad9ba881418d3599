// libFuzzer target: tensor files, both formats the runtime reads inputs from: the first byte picks
// .npy (runtime::read_npy_bytes) or ONNX TensorProto .pb (compiler::load_tensor_pb_bytes), the
// rest is the file. A refusal must be a furiosa::Error; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/core/error.h"
#include "furiosa/runtime/tensor_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view file(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] & 1) {
      (void)furiosa::runtime::read_npy_bytes(file, "fuzz.npy");
    } else {
      (void)furiosa::compiler::load_tensor_pb_bytes(std::string(file), "fuzz.pb");
    }
  } catch (const furiosa::Error&) {
  }
  return 0;
}
