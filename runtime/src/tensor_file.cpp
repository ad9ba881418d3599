// .npy (numpy's format description: numpy.lib.format) and ONNX TensorProto files.
#include "furiosa/runtime/tensor_file.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <charconv>

#include "furiosa/core/error.h"
#include "furiosa/core/file_io.h"
#include "model_source.h"

namespace furiosa::runtime {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

std::string npy_descr(DType d) {
  switch (d) {
    case DType::Float32: return "<f4";
    case DType::UInt8: return "|u1";
    case DType::Int8: return "|i1";
    case DType::Int32: return "<i4";
    case DType::Int64: return "<i8";
  }
  return "?";
}

[[noreturn]] void bad(const std::string& source, const std::string& why) {
  throw Error(ErrorCode::InvalidInput, fmt::format("'{}' is not a usable .npy file: {}", source, why),
              ErrorSubject::of_file(source));
}

/// Largest header accepted (numpy writes a few hundred bytes; numpy >= 1.24 refuses more than
/// 10000 unless told otherwise).
constexpr std::size_t kMaxHeaderBytes = std::size_t{1} << 20;

/// The header's value of key `key` ('descr', 'fortran_order', 'shape'): the text after the key's
/// colon, or empty when the key is absent. The header is a Python dict literal written by numpy
/// (numpy.lib.format), e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }.
std::string_view header_value(std::string_view header, std::string_view key) {
  std::size_t at = header.find(key);
  if (at == std::string_view::npos) return {};
  at = header.find_first_not_of(" \t", at + key.size());
  if (at == std::string_view::npos || header[at] != ':') return {};
  at = header.find_first_not_of(" \t", at + 1);
  return at == std::string_view::npos ? std::string_view{} : header.substr(at);
}

}  // namespace

Tensor read_npy_bytes(std::string_view data, const std::string& source, const LoadLimits& limits) {
  if (data.size() < 10 || data.compare(0, 6, std::string_view(kMagic, 6)) != 0) bad(source, "missing \\x93NUMPY magic");
  const int major = static_cast<unsigned char>(data[6]);
  std::size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(data[8]) | (static_cast<unsigned char>(data[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) bad(source, "truncated header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<std::size_t>(static_cast<unsigned char>(data[8 + i])) << (8 * i);
    offset = 12;
  } else {
    bad(source, fmt::format("unknown format version {}", major));
  }
  if (header_len > kMaxHeaderBytes) bad(source, fmt::format("header of {} bytes (at most {})", header_len, kMaxHeaderBytes));
  if (offset + header_len > data.size()) bad(source, "truncated header");
  const std::string_view header = data.substr(offset, header_len);

  std::string_view v = header_value(header, "'descr'");
  if (v.empty() || v[0] != '\'') bad(source, "no 'descr' string in the header");
  const std::size_t descr_end = v.find('\'', 1);
  if (descr_end == std::string_view::npos) bad(source, "unterminated 'descr' string");
  const std::string_view descr = v.substr(1, descr_end - 1);

  v = header_value(header, "'fortran_order'");
  if (v.starts_with("True")) bad(source, "Fortran order is not supported");
  if (!v.starts_with("False")) bad(source, "no 'fortran_order' True/False in the header");

  v = header_value(header, "'shape'");
  if (v.empty() || v[0] != '(') bad(source, "no 'shape' tuple in the header");
  const std::size_t shape_end = v.find(')');
  if (shape_end == std::string_view::npos) bad(source, "unterminated 'shape' tuple");
  Shape shape;
  for (std::string_view rest = v.substr(1, shape_end - 1); !rest.empty();) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t first = item.find_first_not_of(" \t");
    if (first == std::string_view::npos) continue;  // "(3,)" and trailing commas
    item = item.substr(first, item.find_last_not_of(" \tL") + 1 - first);
    std::int64_t d = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), d);
    if (ec != std::errc{} || end != item.data() + item.size() || d < 0) {
      bad(source, fmt::format("shape entry '{}' is not a non-negative integer", item));
    }
    if (shape.size() == limits.max_rank) bad(source, fmt::format("shape has more than {} dims", limits.max_rank));
    shape.push_back(d);
  }

  DType dtype;
  if (descr == "<f4") dtype = DType::Float32;
  else if (descr == "|u1" || descr == "<u1") dtype = DType::UInt8;
  else if (descr == "|i1" || descr == "<i1") dtype = DType::Int8;
  else if (descr == "<i4") dtype = DType::Int32;
  else if (descr == "<i8") dtype = DType::Int64;
  else bad(source, fmt::format("dtype '{}' is not supported (float32, uint8, int8, int32, int64)", descr));
  std::uint64_t need = 0;
  try {
    need = checked_tensor_bytes(dtype, shape, limits, source, ErrorCode::InvalidInput);
  } catch (const Error& e) {
    bad(source, e.message());
  }
  const std::size_t body = offset + header_len;
  if (data.size() - body != need) {
    bad(source, fmt::format("data is {} bytes, shape {} {} needs {}", data.size() - body, dtype_name(dtype),
                            shape_to_string(shape), need));
  }
  Tensor t = Tensor::uninitialized(dtype, shape);  // `need` bytes, every one copied below
  if (need > 0) std::memcpy(t.bytes().data(), data.data() + body, need);
  return t;
}

Tensor read_npy(const std::filesystem::path& path, const LoadLimits& limits) {
  return read_npy_bytes(read_regular_file(path, ErrorCode::InvalidInput, "input file"), path.string(), limits);
}

void write_npy(const std::filesystem::path& path, const Tensor& tensor) {
  std::string shape;
  for (auto d : tensor.shape()) shape += fmt::format("{}, ", d);
  if (tensor.shape().size() > 1) shape.resize(shape.size() - 2);
  else if (tensor.shape().size() == 1) shape.resize(shape.size() - 1);
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                   npy_descr(tensor.dtype()), shape);
  // Pad with spaces so that the data starts on a 64-byte boundary; end with a newline.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string bytes(kMagic, 6);
  bytes.push_back(1);  // format version 1.0
  bytes.push_back(0);
  const auto len = static_cast<std::uint16_t>(header.size());
  bytes.push_back(static_cast<char>(len & 0xff));
  bytes.push_back(static_cast<char>(len >> 8));
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(tensor.bytes().data()), tensor.size_bytes());
  // Renamed into place: no partial .npy for a reader, no link followed (write_file_atomically).
  write_file_atomically(path, bytes, ErrorCode::IoError, ".npy file");
}

Tensor load_tensor_file(const std::filesystem::path& path, const LoadLimits& limits) {
  if (path.extension() == ".npy") return read_npy(path, limits);
  if (path.extension() == ".pb") return detail::load_tensor_proto_file(path, limits);
  throw Error(ErrorCode::InvalidInput,
              fmt::format("input file '{}': unknown extension (expected .npy or .pb)", path.string()));
}

}  // namespace furiosa::runtime
