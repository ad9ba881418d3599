// Program files (.enf) as a whole: recognising one, the header and its checks, the depth-limited
// CBOR parse, atomic saving and loading (program_file.h).
#include "furiosa/program/program_file.h"

#include <fmt/format.h>

#include <algorithm>

#include "codec.h"
#include "furiosa/core/error.h"
#include "furiosa/core/file_io.h"
#include "furiosa/core/text.h"

namespace furiosa::program {

using detail::crc_of;
using detail::decode_model;
using detail::decode_options;
using detail::get_le;
using detail::json;
using detail::kMagic;

namespace {

/// nlohmann's CBOR reader recurses once per nested array or map, so a hostile body of a few
/// hundred thousand nested arrays would overflow the stack (found by fuzz_program_file). This
/// SAX handler builds the same DOM and stops the parse at kMaxDepth levels; the encoding this
/// build writes nests fewer than 12.
class DepthLimitedCbor {
 public:
  static constexpr std::size_t kMaxDepth = 64;
  explicit DepthLimitedCbor(json& out) : dom_(out, /*allow_exceptions=*/false) {}
  bool too_deep() const noexcept { return too_deep_; }

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool key(json::string_t& v) { return dom_.key(v); }
  bool start_object(std::size_t n) { return enter() && dom_.start_object(n); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return enter() && dom_.start_array(n); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    return dom_.parse_error(position, token, e);
  }

 private:
  bool enter() {
    if (++depth_ <= kMaxDepth) return true;
    too_deep_ = true;
    return false;
  }
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::size_t depth_ = 0;
  bool too_deep_ = false;
};

}  // namespace

bool is_program_bytes(std::string_view bytes) noexcept {
  return bytes.size() >= kMagic.size() && std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) == 0;
}

bool is_program_file(const std::filesystem::path& path) noexcept {
  try {
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext == ".enf") return true;
    const std::string head = read_file_prefix(path, kMagic.size());
    return is_program_bytes(head);
  } catch (...) {
    return false;
  }
}

ProgramFile deserialize_program(std::string_view bytes, const std::string& source) {
  const auto refuse = [&](const std::string& problem) {
    return Error(ErrorCode::ModelLoadFailed, fmt::format("{}: {}", source, problem), ErrorSubject::of_file(source));
  };
  if (!is_program_bytes(bytes)) {
    throw refuse(bytes.size() < kMagic.size() ? fmt::format("not a program file ({} bytes, shorter than the magic)", bytes.size())
                                              : "not a program file (wrong magic; expected a .enf written by furiosa-compile)");
  }
  if (bytes.size() < kProgramHeaderBytes) {
    throw refuse(fmt::format("truncated: {} bytes, shorter than the {}-byte header", bytes.size(), kProgramHeaderBytes));
  }
  const auto version = static_cast<std::uint32_t>(get_le(bytes, 8, 4));
  if (version != kProgramFormatVersion) {
    throw refuse(fmt::format("format version {} is {} this build's version {}: recompile the model with this "
                             "furiosa-compile", version, version > kProgramFormatVersion ? "newer than" : "older than",
                             kProgramFormatVersion));
  }
  const std::uint64_t meta_len = get_le(bytes, 12, 4);
  const std::uint64_t body_len = get_le(bytes, 16, 8);
  const std::uint64_t available = bytes.size() - kProgramHeaderBytes;
  if (meta_len > available || body_len > available - meta_len) {
    throw refuse(fmt::format("truncated: the header announces {} bytes, the file has {}",
                             kProgramHeaderBytes + meta_len + body_len, bytes.size()));
  }
  if (meta_len + body_len != available) {
    throw refuse(fmt::format("{} unexpected bytes after the body", available - meta_len - body_len));
  }
  const std::string_view meta = bytes.substr(kProgramHeaderBytes, meta_len);
  const std::string_view body = bytes.substr(kProgramHeaderBytes + meta_len, body_len);
  if (crc_of(meta) != static_cast<std::uint32_t>(get_le(bytes, 24, 4))) {
    throw refuse("corrupted: the checksum of the meta block does not match");
  }
  if (crc_of(body) != static_cast<std::uint32_t>(get_le(bytes, 28, 4))) {
    throw refuse("corrupted: the checksum of the body does not match");
  }
  const auto parse = [&](std::string_view part, const char* what) {
    json j;
    DepthLimitedCbor sax(j);
    bool ok = false;
    try {
      ok = json::sax_parse(part.begin(), part.end(), &sax, nlohmann::detail::input_format_t::cbor, /*strict=*/true);
    } catch (const json::exception& e) {  // e.g. an array header announcing 2^62 elements (408)
      throw refuse(fmt::format("the {} is not valid CBOR ({})", what, e.what()));
    }
    if (sax.too_deep()) {
      throw refuse(fmt::format("the {} nests deeper than {} levels", what, DepthLimitedCbor::kMaxDepth));
    }
    if (!ok || j.is_discarded()) throw refuse(fmt::format("the {} is not valid CBOR", what));
    return j;
  };
  const json meta_json = parse(meta, "meta block");
  const json body_json = parse(body, "body");
  ProgramFile out;
  if (!meta_json.is_object()) throw refuse("invalid content: meta: expected a map");
  for (const char* field : {"compiler_version", "options"}) {
    if (!meta_json.contains(field)) throw refuse(fmt::format("invalid content: meta: missing field '{}'", field));
  }
  if (!meta_json["compiler_version"].is_string()) throw refuse("invalid content: meta.compiler_version: expected a string");
  out.compiler_version = meta_json["compiler_version"].get<std::string>();
  out.options = decode_options(meta_json["options"], source);
  out.model = decode_model(body_json, source);
  return out;
}

void save_program(const CompiledModel& model, const CompilerOptions& options, std::string_view writer_version,
                  const std::filesystem::path& path) {
  // The directory may be shared (a compile cache): a file or link planted under the temporary
  // name is never written through, and the rename replaces a link at `path` rather than
  // following it (write_file_atomically).
  write_file_atomically(path, serialize_program(model, options, writer_version), ErrorCode::IoError,
                        "program file");
}

ProgramFile load_program(const std::filesystem::path& path) {
  return deserialize_program(read_regular_file(path, ErrorCode::ModelLoadFailed, "program file"), path.string());
}

}  // namespace furiosa::program
