// Helpers shared by the TFLite tests (test_tflite_*.cpp): writing hand-made models into the build
// tree, TFLite's quantization for the float references, and reading .tflite files.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "furiosa/runtime/runner.h"
#include "test_support.h"
#include "tflite_subset_generated.h"
#include "tflite_writer.h"

namespace furiosa::test::tflite_tests {

// The .tflite writer, raw_bytes and the float NHWC convolution reference (tflite_writer.h).
using test::conv_ref;
using test::QSpec;
using test::raw_bytes;
using test::TfliteWriter;

// Writes `bytes` to the build tree (FURIOSA_TFLITE_TEST_DIR) and returns the path.
inline std::filesystem::path write_model(const std::string& name, const std::string& bytes) {
  const std::filesystem::path dir = FURIOSA_TFLITE_TEST_DIR;
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / name;
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// ---- float references -----------------------------------------------------------------------

// TFLite's quantization of a real value: round half away from zero, saturate.
inline std::int32_t quantize_ref(double v, double scale, std::int32_t zp, DType d) {
  const double q = std::round(v / scale) + zp;
  const double lo = d == DType::UInt8 ? 0 : -128, hi = d == DType::UInt8 ? 255 : 127;
  return static_cast<std::int32_t>(std::clamp(q, lo, hi));
}

inline std::vector<double> dequantized(const Tensor& t, double scale, std::int32_t zp) {
  std::vector<double> out(static_cast<std::size_t>(t.elements()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = (test::element(t, i) - zp) * scale;
  return out;
}

// Largest |ours - expected| over the elements (ours in its own dtype, same element order).
inline int worst_diff(const Tensor& ours, const std::vector<std::int32_t>& expected) {
  REQUIRE(static_cast<std::size_t>(ours.elements()) == expected.size());
  int worst = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    worst = std::max(worst, static_cast<int>(std::abs(test::element(ours, i) - expected[i])));
  }
  return worst;
}

inline std::vector<std::int32_t> quantize_all(const std::vector<double>& v, double scale,
                                              std::int32_t zp, DType d) {
  std::vector<std::int32_t> out;
  for (double x : v) out.push_back(quantize_ref(x, scale, zp, d));
  return out;
}

// Random weights as 8-bit values, and the bytes to store them.
inline std::vector<std::int32_t> random_ints(std::mt19937& rng, std::size_t n, std::int32_t lo,
                                             std::int32_t hi) {
  std::uniform_int_distribution<std::int32_t> dist(lo, hi);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}
inline std::vector<std::uint8_t> bytes8(const std::vector<std::int32_t>& v) {
  std::vector<std::uint8_t> out;
  for (auto x : v) out.push_back(static_cast<std::uint8_t>(x));
  return out;
}
inline std::vector<std::uint8_t> bytes32(const std::vector<std::int32_t>& v) {
  return raw_bytes(v);
}

// One worker on one PE of the built-in simulator (`device`: which one, so two runners can be
// open at once).
// Number of distinct element values: guards the stage checks against degenerate data (a stage
// that clamps everything to one value would compare equal trivially).
inline std::size_t distinct(const Tensor& t) {
  std::vector<double> v;
  for (std::size_t i = 0; i < static_cast<std::size_t>(t.elements()); ++i)
    v.push_back(test::element(t, i));
  std::sort(v.begin(), v.end());
  return static_cast<std::size_t>(std::unique(v.begin(), v.end()) - v.begin());
}

inline runtime::RunnerOptions test_options(const char* device = "npu0pe0") {
  runtime::RunnerOptions o;
  o.worker_num = 1;
  o.device = device;
  return o;
}

// Scale and zero point of a tensor of a .tflite file, read with the generated accessors.
inline std::pair<double, std::int32_t> tensor_quant(const std::string& bytes,
                                                    const std::string& name) {
  const fb::Model* m = fb::GetModel(bytes.data());
  const auto* tensors = m->subgraphs()->Get(0)->tensors();
  for (const auto* t : *tensors) {
    if (t->name() && t->name()->str() == name) {
      std::int64_t zp = 0;  // int64 vectors of converted files may be only 4-byte aligned
      std::memcpy(&zp, t->quantization()->zero_point()->Data(), sizeof zp);
      return {t->quantization()->scale()->Get(0), static_cast<std::int32_t>(zp)};
    }
  }
  FAIL("no tensor " << name);
  return {};
}

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// uint8 softmax of uint8 logits (scale s, zero point zp) with the output quantization of
// TFLite's SOFTMAX (scale 1/256, zero point 0), in double.
inline std::vector<std::int32_t> softmax_q(const Tensor& logits, double s, std::int32_t zp) {
  const auto x = dequantized(logits, s, zp);
  const double mx = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (double v : x) sum += std::exp(v - mx);
  std::vector<std::int32_t> out;
  for (double v : x)
    out.push_back(quantize_ref(std::exp(v - mx) / sum, 1.0 / 256, 0, DType::UInt8));
  return out;
}

}  // namespace furiosa::test::tflite_tests
