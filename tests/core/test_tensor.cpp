// Tensor's constructors: zero-filled, uninitialized for writers of every byte, and a copy of
// given bytes, each with the same checks of the shape.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/core/tensor.h"
#include "test_support.h"

using furiosa::DType;
using furiosa::Error;
using furiosa::ErrorCode;
using furiosa::Tensor;

namespace {
bool all_zero(const Tensor& t) {
  return std::all_of(t.bytes().begin(), t.bytes().end(),
                     [](std::byte b) { return b == std::byte{0}; });
}
}  // namespace

TEST_CASE("A tensor made from a dtype and a shape is zero-filled, also in reused memory",
          "[core][tensor]") {
  // Small enough for the allocator to hand the freed block out again: a constructor that left
  // it unfilled would show the 0xab bytes of the tensor before.
  for (int round = 0; round < 8; ++round) {
    {
      Tensor dirty(DType::Float32, {1, 250});
      std::fill(dirty.bytes().begin(), dirty.bytes().end(), std::byte{0xab});
    }
    const Tensor t(DType::Float32, {1, 250});
    REQUIRE(t.size_bytes() == 1000);
    CHECK(all_zero(t));
  }
}

TEST_CASE("An uninitialized tensor has its shape's size and the constructor's checks",
          "[core][tensor]") {
  Tensor t = Tensor::uninitialized(DType::Int32, {2, 3, 4});
  CHECK(t.dtype() == DType::Int32);
  CHECK(t.shape() == furiosa::Shape{2, 3, 4});
  CHECK(t.elements() == 24);
  REQUIRE(t.size_bytes() == 96);
  auto v = t.as<std::int32_t>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i) - 7;
  CHECK(t.as<std::int32_t>()[23] == 16);
  CHECK(Tensor::uninitialized(DType::UInt8, {}).size_bytes() == 1);  // a scalar
  CHECK(Tensor::uninitialized(DType::UInt8, {3, 0}).size_bytes() == 0);
  for (const furiosa::Shape& bad : {furiosa::Shape{2, -1}, furiosa::Shape{1LL << 40, 1LL << 40}}) {
    try {
      (void)Tensor::uninitialized(DType::Float32, bad);
      FAIL("no error for shape " << furiosa::shape_to_string(bad));
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidInput);
    }
  }
}

TEST_CASE("A tensor made from bytes holds a copy of them, of exactly the shape's size",
          "[core][tensor]") {
  std::vector<std::byte> bytes(6);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i + 1);
  const Tensor t(DType::UInt8, {2, 3}, bytes);
  bytes[0] = std::byte{0x55};  // the tensor's bytes are its own
  REQUIRE(t.size_bytes() == 6);
  CHECK(t.bytes()[0] == std::byte{1});
  CHECK(t.bytes()[5] == std::byte{6});
  try {
    const Tensor wrong(DType::Float32, {2, 3}, bytes);
    FAIL("no error for 6 bytes of a float32 [2, 3] tensor");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK(std::string(e.what()).find("needs 24 bytes but 6 bytes were given") != std::string::npos);
  }
}
