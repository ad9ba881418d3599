// .npy and .pb tensor files.
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

#include "furiosa/core/error.h"
#include "furiosa/runtime/tensor_file.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

TEST_CASE(".npy files round-trip every dtype", "[runtime][npy]") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("furiosa-npy-{}", ::getpid());
  fs::create_directories(dir);
  for (DType d : {DType::Float32, DType::UInt8, DType::Int8, DType::Int32, DType::Int64}) {
    for (const Shape& s : {Shape{2, 3}, Shape{7}, Shape{1, 1, 2, 2}}) {
      Tensor t(d, s);
      for (std::size_t i = 0; i < t.size_bytes(); ++i) t.bytes()[i] = std::byte(i * 7 + 3);
      const fs::path p = dir / "t.npy";
      runtime::write_npy(p, t);
      // numpy's rule: the header (magic..newline) is a multiple of 64 bytes.
      CHECK((fs::file_size(p) - t.size_bytes()) % 64 == 0);
      Tensor back = runtime::read_npy(p);
      CHECK(back.dtype() == d);
      CHECK(back.shape() == s);
      CHECK(std::ranges::equal(back.bytes(), t.bytes()));
    }
  }
  std::ofstream(dir / "bad.npy") << "not numpy";
  CHECK_THROWS_AS(runtime::read_npy(dir / "bad.npy"), Error);
  CHECK_THROWS_AS(runtime::load_tensor_file(dir / "missing.npy"), Error);
  fs::remove_all(dir);
}
