// Helpers of the device tests: building small NPU programs, (un)lowering host data, running a
// program on the simulator, and reference arithmetic written independently of device/sim.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "furiosa/device/backends.h"
#include "furiosa/device/device.h"
#include "furiosa/device/driver.h"
#include "furiosa/core/error.h"
#include "furiosa/device/isa.h"
#include "furiosa/device/sim.h"

namespace furiosa::device::test {

/// Garbage written into the row padding of lowered inputs; kernels must never read it.
inline constexpr std::uint8_t kGarbage = 0xAB;

/// "0x1f4" for 500, as device error messages print addresses.
inline std::string fmt_hex(std::uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

/// Values as bytes of `dtype` (UInt8, Int8 or Int32).
inline std::vector<std::byte> to_bytes(const std::vector<std::int32_t>& values, DType dtype) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::Int32) {
      std::memcpy(bytes.data() + 4 * i, &values[i], 4);
    } else {
      bytes[i] = static_cast<std::byte>(static_cast<std::uint8_t>(values[i]));
    }
  }
  return bytes;
}

/// Bytes of 8-bit `dtype` as int32 values.
inline std::vector<std::int32_t> from_bytes(std::span<const std::byte> bytes, DType dtype) {
  std::vector<std::int32_t> values(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto u = std::to_integer<std::uint8_t>(bytes[i]);
    values[i] = dtype == DType::Int8 ? static_cast<std::int8_t>(u) : u;
  }
  return values;
}

/// Dense NCHW 8-bit values -> LoweredNCHW bytes with every padding byte set to `fill`.
inline std::vector<std::byte> lower(const std::vector<std::int32_t>& dense, const Shape& shape,
                                    DType dtype, std::uint8_t fill = kGarbage) {
  const std::int64_t w = shape[3], wp = isa::padded_width(w);
  const std::int64_t rows = shape[0] * shape[1] * shape[2];
  std::vector<std::byte> bytes(static_cast<std::size_t>(rows * wp), std::byte{fill});
  const std::vector<std::byte> packed = to_bytes(dense, dtype);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::memcpy(bytes.data() + r * wp, packed.data() + r * w, static_cast<std::size_t>(w));
  }
  return bytes;
}

/// LoweredNCHW bytes -> dense NCHW values (padding dropped).
inline std::vector<std::int32_t> unlower(std::span<const std::byte> bytes, const Shape& shape,
                                         DType dtype) {
  const std::int64_t w = shape[3], wp = isa::padded_width(w);
  const std::int64_t rows = shape[0] * shape[1] * shape[2];
  std::vector<std::int32_t> dense;
  for (std::int64_t r = 0; r < rows; ++r) {
    auto row = from_bytes(
        bytes.subspan(static_cast<std::size_t>(r * wp), static_cast<std::size_t>(w)), dtype);
    dense.insert(dense.end(), row.begin(), row.end());
  }
  return dense;
}

/// Uniformly random integers in [lo, hi] from a fixed-seed generator.
inline std::vector<std::int32_t> random_values(std::size_t count, std::int32_t lo, std::int32_t hi,
                                               std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> dist(lo, hi);
  std::vector<std::int32_t> values(count);
  for (auto& v : values) v = dist(rng);
  return values;
}

/// Full range of an 8-bit dtype.
inline std::vector<std::int32_t> random_8bit(std::size_t count, DType dtype, std::uint32_t seed) {
  const auto [lo, hi] = isa::quant_range(dtype);
  return random_values(count, lo, hi, seed);
}

/// Builds a Program: constants first (at address 0 upward), then activations after them.
class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string name = "test") { program_.name = std::move(name); }

  /// Appends a constant tensor with the given bytes (64-byte aligned).
  isa::TensorRef constant(DType dtype, Shape shape, const std::vector<std::byte>& bytes,
                          isa::Layout layout = isa::Layout::Linear) {
    REQUIRE(activations_ == 0);  // constants must come first
    isa::TensorRef ref{align(program_.constants.size()), dtype, std::move(shape), layout};
    REQUIRE(ref.size_bytes() == bytes.size());
    program_.constants.resize(ref.address, std::byte{0});
    program_.constants.insert(program_.constants.end(), bytes.begin(), bytes.end());
    return ref;
  }
  /// Appends a constant tensor of 8-bit or int32 values.
  isa::TensorRef constant(DType dtype, Shape shape, const std::vector<std::int32_t>& values) {
    return constant(dtype, std::move(shape), to_bytes(values, dtype));
  }

  /// Reserves an activation tensor after the constants.
  isa::TensorRef activation(DType dtype, Shape shape, isa::Layout layout) {
    if (activations_ == 0) activations_ = align(program_.constants.size() + 1);
    isa::TensorRef ref{activations_, dtype, std::move(shape), layout};
    activations_ = align(activations_ + ref.size_bytes());
    return ref;
  }

  /// Adds a kernel.
  void kernel(isa::KernelKind kind, std::vector<isa::TensorRef> inputs,
              std::vector<isa::TensorRef> outputs, decltype(isa::Kernel::params) params,
              std::string node_name = "") {
    isa::Kernel k;
    k.kind = kind;
    k.node_name = node_name.empty() ? std::string(isa::kernel_name(kind)) : std::move(node_name);
    k.operator_index = static_cast<std::int32_t>(program_.kernels.size());
    k.inputs = std::move(inputs);
    k.outputs = std::move(outputs);
    k.params = std::move(params);
    program_.kernels.push_back(std::move(k));
  }

  /// The finished program with the given DMA inputs and outputs.
  std::shared_ptr<const isa::Program> finish(std::vector<isa::TensorRef> inputs,
                                             std::vector<isa::TensorRef> outputs) {
    program_.inputs = std::move(inputs);
    program_.outputs = std::move(outputs);
    program_.dram_bytes = std::max<std::uint64_t>(activations_, align(program_.constants.size()));
    return std::make_shared<const isa::Program>(program_);
  }

 private:
  static std::uint64_t align(std::uint64_t v) { return (v + 63) / 64 * 64; }
  isa::Program program_;
  std::uint64_t activations_ = 0;
};

/// A simulator configuration without pacing (fast tests).
inline SimConfig fast_config() {
  SimConfig config;
  config.pacing = false;
  return config;
}

/// A sim driver and one open device on it.
struct SimSession {
  std::unique_ptr<Driver> driver;
  std::unique_ptr<Device> device;
};

inline SimSession open_sim(const SimConfig& config = fast_config(),
                           std::string_view file = "npu0pe0") {
  SimSession s;
  s.driver = create_sim_driver(config);
  s.device = s.driver->open(DeviceFile::parse(file));
  return s;
}

/// The message of the Error `action` throws, CHECKing its code (FAILs when nothing is thrown).
inline std::string error_message(const std::function<void()>& action, ErrorCode expected) {
  try {
    action();
  } catch (const Error& e) {
    CHECK(e.code() == expected);
    return e.message();
  }
  FAIL("no error thrown");
  return {};
}

/// A program Add(x, c) -> y on [1, 2, 3, 40] lowered uint8, c constant, plus Reshape(y) -> z
/// linear [1, 240]. Its output is x + c (saturated), with all scales 1 and zero points 0.
struct AddProgram {
  std::shared_ptr<const isa::Program> program;
  std::vector<std::int32_t> constant;
  Shape shape{1, 2, 3, 40};
};

inline AddProgram add_program(isa::Layout constant_layout = isa::Layout::LoweredNCHW) {
  AddProgram p;
  ProgramBuilder b("add_reshape");
  p.constant = random_values(240, 0, 100, 11);
  isa::TensorRef c = constant_layout == isa::Layout::LoweredNCHW
                         ? b.constant(DType::UInt8, p.shape,
                                      lower(p.constant, p.shape, DType::UInt8), constant_layout)
                         : b.constant(DType::UInt8, p.shape, p.constant);
  isa::TensorRef x = b.activation(DType::UInt8, p.shape, isa::Layout::LoweredNCHW);
  isa::TensorRef y = b.activation(DType::UInt8, p.shape, isa::Layout::LoweredNCHW);
  isa::TensorRef z = b.activation(DType::UInt8, {1, 240}, isa::Layout::Linear);
  b.kernel(isa::KernelKind::Add, {x, c}, {y}, isa::AddParams{}, "add0");
  b.kernel(isa::KernelKind::Reshape, {y}, {z}, isa::ReshapeParams{}, "flatten0");
  p.program = b.finish({x}, {z});
  return p;
}

/// Expected output of add_program for input values x.
inline std::vector<std::int32_t> add_expected(const AddProgram& p, const std::vector<std::int32_t>& x) {
  std::vector<std::int32_t> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::min(x[i] + p.constant[i], 255);
  return y;
}

/// Loads and runs `program` once; returns the outputs (REQUIREs success).
inline std::vector<std::vector<std::byte>> run_program(
    Device& device, std::shared_ptr<const isa::Program> program,
    const std::vector<std::vector<std::byte>>& inputs, ExecutionTiming* timing = nullptr) {
  auto loaded = device.load(program);
  std::vector<std::vector<std::byte>> outputs;
  for (const auto& ref : program->outputs) outputs.emplace_back(ref.size_bytes());
  std::vector<std::span<const std::byte>> in(inputs.begin(), inputs.end());
  std::vector<std::span<std::byte>> out(outputs.begin(), outputs.end());
  auto fence = device.submit(*loaded, in, out);
  REQUIRE(fence->wait_for(std::chrono::seconds(120)));
  if (fence->error()) {
    try {
      std::rethrow_exception(fence->error());
    } catch (const std::exception& e) {
      FAIL("execution failed: " << e.what());
    }
  }
  if (timing != nullptr) *timing = fence->timing();
  return outputs;
}

/// The Error an exception_ptr holds (REQUIREs that it holds one).
inline Error error_of(std::exception_ptr ptr) {
  REQUIRE(ptr);
  try {
    std::rethrow_exception(ptr);
  } catch (const Error& e) {
    return e;
  } catch (...) {
  }
  FAIL("not a furiosa::Error");
  return Error(ErrorCode::Internal, "unreachable");
}

}  // namespace furiosa::device::test
