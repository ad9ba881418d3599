// IDX reader. Format: big-endian magic 0x0000TTNN (TT = type, 0x08 unsigned byte; NN = number of
// dims), NN big-endian uint32 dims, then the data (yann.lecun.com/exdb/mnist, "FILE FORMATS").
#include "furiosa/tools/idx.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"

namespace furiosa::tools {
namespace {

// Whole file, decompressed when gzip (zlib's gz* functions read plain files unchanged).
std::vector<std::uint8_t> read_all(const std::filesystem::path& path) {
  // Opened with O_NONBLOCK and checked with fstat before zlib reads it, so a FIFO or device is
  // refused by name instead of blocking (or reading /dev/zero forever).
  const std::string shown = escape_text(path.string());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      throw Error(ErrorCode::InvalidInput, fmt::format("IDX file '{}' does not exist", shown));
    }
    throw Error(ErrorCode::InvalidInput, fmt::format("cannot open IDX file '{}': {}", shown, std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorCode::InvalidInput, fmt::format("IDX file '{}' is not a regular file", shown));
  }
  std::unique_ptr<gzFile_s, decltype(&gzclose)> f(gzdopen(fd, "rb"), &gzclose);  // owns fd from here
  if (!f) {
    ::close(fd);
    throw Error(ErrorCode::InvalidInput, fmt::format("cannot open IDX file '{}'", shown));
  }
  std::vector<std::uint8_t> out;
  std::uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f.get(), buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  if (n < 0) throw Error(ErrorCode::InvalidInput, fmt::format("IDX file '{}' is corrupt", shown));
  return out;
}

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

IdxArray read_idx(const std::filesystem::path& path) {
  auto bytes = read_all(path);
  auto bad = [&](const std::string& why) {
    return Error(ErrorCode::InvalidInput, fmt::format("IDX file '{}': {}", escape_text(path.string()), why));
  };
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0) throw bad("bad magic number");
  if (bytes[2] != 0x08) throw bad(fmt::format("element type 0x{:02x} is not unsigned byte (0x08)", bytes[2]));
  const std::size_t ndims = bytes[3];
  if (bytes.size() < 4 + 4 * ndims) throw bad("truncated header");
  IdxArray a;
  std::size_t count = 1;
  for (std::size_t d = 0; d < ndims; ++d) {
    a.dims.push_back(be32(&bytes[4 + 4 * d]));
    count *= static_cast<std::size_t>(a.dims.back());
  }
  const std::size_t offset = 4 + 4 * ndims;
  if (bytes.size() - offset != count) {
    throw bad(fmt::format("holds {} data bytes, its dims need {}", bytes.size() - offset, count));
  }
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(offset), bytes.end());
  return a;
}

Tensor FashionMnist::image(std::size_t i, DType dtype) const {
  const std::size_t px = 28 * 28;
  const std::uint8_t* src = images.data.data() + i * px;
  if (dtype == DType::UInt8) {
    Tensor t(DType::UInt8, {1, 1, 28, 28});
    std::copy(src, src + px, t.as<std::uint8_t>().begin());
    return t;
  }
  Tensor t(DType::Float32, {1, 1, 28, 28});
  auto out = t.as<float>();
  for (std::size_t k = 0; k < px; ++k) out[k] = static_cast<float>(src[k]) / 255.0f;
  return t;
}

FashionMnist load_fashion_mnist_test(const std::filesystem::path& dir) {
  auto pick = [&](const char* stem) {
    const auto gz = dir / (std::string(stem) + ".gz");
    return std::filesystem::exists(gz) ? gz : dir / stem;
  };
  FashionMnist ds{read_idx(pick("t10k-images-idx3-ubyte")), read_idx(pick("t10k-labels-idx1-ubyte"))};
  if (ds.images.dims.size() != 3 || ds.images.dims[1] != 28 || ds.images.dims[2] != 28 ||
      ds.labels.dims.size() != 1 || ds.labels.dims[0] != ds.images.dims[0]) {
    throw Error(ErrorCode::InvalidInput,
                fmt::format("'{}' does not hold a 28x28 image set with one label per image", dir.string()));
  }
  return ds;
}

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  return names;
}

}  // namespace furiosa::tools
