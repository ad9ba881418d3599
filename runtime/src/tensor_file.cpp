// .npy (numpy's format description: numpy.lib.format) and ONNX TensorProto files.
#include "furiosa/runtime/tensor_file.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/core/error.h"

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

[[noreturn]] void bad(const std::filesystem::path& p, const std::string& why) {
  throw Error(ErrorCode::InvalidInput, fmt::format("'{}' is not a usable .npy file: {}", p.string(), why));
}

}  // namespace

Tensor read_npy(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorCode::InvalidInput, fmt::format("input file '{}' does not exist", path.string()));
  }
  std::ifstream f(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (data.size() < 10 || data.compare(0, 6, kMagic, 6) != 0) bad(path, "missing \\x93NUMPY magic");
  const int major = static_cast<unsigned char>(data[6]);
  std::size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(data[8]) | (static_cast<unsigned char>(data[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) bad(path, "truncated header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<std::size_t>(static_cast<unsigned char>(data[8 + i])) << (8 * i);
    offset = 12;
  } else {
    bad(path, fmt::format("unknown format version {}", major));
  }
  if (offset + header_len > data.size()) bad(path, "truncated header");
  const std::string header = data.substr(offset, header_len);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']*)')"))) bad(path, "no descr");
  const std::string descr = m[1];
  if (!std::regex_search(header, m, std::regex(R"('fortran_order'\s*:\s*(True|False))"))) bad(path, "no fortran_order");
  if (m[1] == "True") bad(path, "Fortran order is not supported");
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))"))) bad(path, "no shape");
  Shape shape;
  std::stringstream ss(m[1].str());
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(" \t") == std::string::npos) continue;
    shape.push_back(std::stoll(item));
  }
  DType dtype;
  if (descr == "<f4") dtype = DType::Float32;
  else if (descr == "|u1" || descr == "<u1") dtype = DType::UInt8;
  else if (descr == "|i1" || descr == "<i1") dtype = DType::Int8;
  else if (descr == "<i4") dtype = DType::Int32;
  else if (descr == "<i8") dtype = DType::Int64;
  else bad(path, fmt::format("dtype '{}' is not supported (float32, uint8, int8, int32, int64)", descr));
  const std::size_t body = offset + header_len;
  const std::size_t need = static_cast<std::size_t>(element_count(shape)) * dtype_size(dtype);
  if (data.size() - body != need) {
    bad(path, fmt::format("data is {} bytes, shape {} {} needs {}", data.size() - body,
                          dtype_name(dtype), shape_to_string(shape), need));
  }
  std::vector<std::byte> bytes(need);
  std::memcpy(bytes.data(), data.data() + body, need);
  return Tensor(dtype, shape, std::move(bytes));
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
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(kMagic, 6);
  const char ver[2] = {1, 0};
  f.write(ver, 2);
  const auto len = static_cast<std::uint16_t>(header.size());
  const char lenb[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  f.write(lenb, 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(tensor.bytes().data()), static_cast<std::streamsize>(tensor.size_bytes()));
  f.close();
  if (!f) throw Error(ErrorCode::IoError, fmt::format("cannot write '{}'", path.string()));
}

Tensor load_tensor_file(const std::filesystem::path& path) {
  if (path.extension() == ".npy") return read_npy(path);
  if (path.extension() == ".pb") return compiler::load_tensor_pb(path);
  throw Error(ErrorCode::InvalidInput,
              fmt::format("input file '{}': unknown extension (expected .npy or .pb)", path.string()));
}

}  // namespace furiosa::runtime
