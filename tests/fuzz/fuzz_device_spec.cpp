// libFuzzer target: device specs (FURIOSA_DEVICES, --device): device::parse_device_spec. A
// refusal must be a furiosa::Error; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "furiosa/core/error.h"
#include "furiosa/device/device_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)furiosa::device::parse_device_spec(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const furiosa::Error&) {
  }
  return 0;
}
