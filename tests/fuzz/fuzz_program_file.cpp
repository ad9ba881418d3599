// libFuzzer target: .enf program files (compiler::deserialize_program). The harness rewrites the
// header's two CRC-32 fields to match the mutated meta and body, so that mutations reach the
// CBOR decoding and the validation of its content instead of stopping at the checksum. A
// refusal must be a furiosa::Error; anything else is a finding.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "furiosa/compiler/program_file.h"
#include "furiosa/core/error.h"

namespace {

std::uint64_t get_le(const std::string& s, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

void put_crc(std::string& s, std::size_t at, std::size_t from, std::size_t len) {
  const auto crc = static_cast<std::uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(s.data() + from), static_cast<uInt>(len)));
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  // Header (compiler/program_file.h): magic, u32 version @8, u32 meta_len @12, u64 body_len @16,
  // u32 crc(meta) @24, u32 crc(body) @28, then meta and body.
  if (bytes.size() >= furiosa::compiler::kProgramHeaderBytes) {
    const std::uint64_t meta_len = get_le(bytes, 12, 4), body_len = get_le(bytes, 16, 8);
    const std::uint64_t available = bytes.size() - furiosa::compiler::kProgramHeaderBytes;
    if (meta_len <= available && body_len <= available - meta_len) {
      put_crc(bytes, 24, furiosa::compiler::kProgramHeaderBytes, meta_len);
      put_crc(bytes, 28, furiosa::compiler::kProgramHeaderBytes + meta_len, body_len);
    }
  }
  try {
    (void)furiosa::compiler::deserialize_program(bytes, "fuzz.enf");
  } catch (const furiosa::Error&) {
  }
  return 0;
}
