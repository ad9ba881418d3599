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
  const test::TempDir scratch("npy");  // removed even when a check fails
  const fs::path& dir = scratch.path();
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
}

namespace {

/// A version 1.0 .npy file with the given header text and `body_bytes` bytes of data.
std::string npy_file(const std::string& header, std::size_t body_bytes) {
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header + std::string(body_bytes, '\x07');
}

/// The message of the InvalidInput read_npy_bytes raises for `file`; fails when it is accepted.
std::string npy_refusal(const std::string& file, const LoadLimits& limits = {}) {
  try {
    (void)runtime::read_npy_bytes(file, "x.npy", limits);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK(e.file() == "x.npy");
    return e.message();
  }
  FAIL("accepted");
  return {};
}

}  // namespace

TEST_CASE(".npy headers are parsed and checked before the data is allocated", "[runtime][npy][validation]") {
  // numpy's own spellings: spaces, a one-element tuple with a trailing comma, a scalar.
  const Tensor t = runtime::read_npy_bytes(
      npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", 24), "x.npy");
  CHECK(t.shape() == Shape{2, 3});
  CHECK(runtime::read_npy_bytes(npy_file("{'descr':'|u1','fortran_order':False,'shape':(5,)}", 5), "x.npy").shape() ==
        Shape{5});
  CHECK(runtime::read_npy_bytes(npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 8), "x.npy")
            .shape()
            .empty());

  // The 12 GB case of the issue, in .npy form: dims claim far more than the 200 bytes present.
  CHECK_THAT(npy_refusal(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 5), }", 200)),
             Catch::Contains("its dims claim more than"));
  CHECK_THAT(npy_refusal(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1000, 5), }", 200)),
             Catch::Contains("data is 200 bytes, shape float32 [1000, 5] needs 20000"));
  CHECK_THAT(npy_refusal(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 5), }", 20)),
             Catch::Contains("shape entry '-1' is not a non-negative integer"));
  CHECK_THAT(npy_refusal(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 4)),
             Catch::Contains("is not a non-negative integer"));
  CHECK_THAT(npy_refusal(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4)),
             Catch::Contains("more than 8 dims"));
  CHECK_THAT(npy_refusal(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 8)),
             Catch::Contains("dtype '<f8' is not supported"));
  CHECK_THAT(npy_refusal(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", 4)),
             Catch::Contains("Fortran order"));
  CHECK_THAT(npy_refusal(npy_file("{'descr': '<f4', 'shape': (1,), }", 4)), Catch::Contains("fortran_order"));
  CHECK_THAT(npy_refusal(npy_file("{'descr': '<f4, 'fortran_order': False, 'shape': (1", 4)),
             Catch::Contains("unterminated 'shape'"));
  CHECK_THAT(npy_refusal(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 0).substr(0, 30)),
             Catch::Contains("truncated header"));
  std::string v2("\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12);
  CHECK_THAT(npy_refusal(v2), Catch::Contains("header of 2147483647 bytes"));
  LoadLimits tight;
  tight.max_tensor_bytes = 16;
  CHECK_THAT(npy_refusal(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24), tight),
             Catch::Contains("more than the limit of 16"));
}
