// TFLite: unsupported operators, float compute operators, broken files and oversized sizes refused.
// TFLite models through the whole stack (importer, compiler, simulator, runtime): unsupported
// operators: an error naming the operator index and the builtin operator; float compute
// operators, broken files, and declared sizes past the limits or the buffers.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "furiosa/compiler/onnx_import.h"
#include "furiosa/compiler/tflite_import.h"
#include "furiosa/compiler/compiler.h"
#include "furiosa/runtime/from_graph.h"
#include "furiosa/runtime/runner.h"
#include "test_support.h"
#include "tflite_subset_generated.h"
#include "tflite_test_support.h"
#include "tflite_writer.h"

using namespace furiosa;
using namespace furiosa::test::tflite_tests;
namespace fs = std::filesystem;
namespace fb = furiosa::tflite_fb;

TEST_CASE("TFLite: an unsupported operator is an error naming its index and builtin name",
          "[tflite][errors]") {
  TfliteWriter w;
  const QSpec q{{0.1f}, {0}};
  const std::vector<std::int32_t> shape = {1, 4};
  const auto shape_bytes = bytes32(shape);
  const int x = w.tensor("x", fb::TensorType::UINT8, {1, 2, 2, 1}, &q);
  const int s = w.tensor("shape", fb::TensorType::INT32, {2}, nullptr, &shape_bytes);
  const int r = w.tensor("r", fb::TensorType::UINT8, {1, 4}, &q);
  const int t = w.tensor("t", fb::TensorType::UINT8, {1, 4}, &q);
  const int u = w.tensor("u", fb::TensorType::UINT8, {1, 4}, &q);
  w.op(22, {x, s}, {r});  // RESHAPE: supported
  w.op(28, {r}, {t});     // TANH: not supported
  w.op(32, {t}, {u});     // CUSTOM: not supported
  const int v = w.tensor("v", fb::TensorType::UINT8, {1, 4}, &q);
  w.custom_op("Evil\nerror: forged\x1b[2J", {u}, {v}, {});  // a hostile custom code, shown escaped
  const fs::path path = write_model("unsupported.tflite", w.finish({x}, {v}));
  try {
    runtime::create_runner(path, test_options());
    FAIL("an unsupported TFLite operator was accepted");
  } catch (const Error& err) {
    CHECK(err.code() == ErrorCode::UnsupportedOperator);
    CHECK_THAT(err.message(), Catch::Contains("operator 1: TANH (builtin code 28)"));
    CHECK_THAT(err.message(), Catch::Contains("operator 2: CUSTOM (builtin code 32)"));
    CHECK_THAT(err.message(), Catch::Contains(path.string()));
    CHECK_THAT(err.message(), !Catch::Contains("operator 0"));
    CHECK_THAT(err.message(), Catch::Contains("3 TFLite operator(s) cannot run: operator 1: TANH"));
    CHECK_THAT(err.message(), Catch::Contains("custom code 'Evil\\x0aerror: forged\\x1b[2J'"));
    CHECK(std::string(err.what()).find_first_of("\n\x1b") == std::string::npos);  // one line
  }
  CHECK(compiler::tflite_builtin_name(3) == "CONV_2D");
  CHECK(compiler::tflite_builtin_name(114) == "QUANTIZE");
  CHECK(compiler::tflite_builtin_name(999) == "BUILTIN_999");
}

TEST_CASE("TFLite: float compute operators and broken files are refused clearly",
          "[tflite][errors]") {
  {
    TfliteWriter w;
    auto& b = w.builder();
    const std::vector<float> wv(4, 0.5f);
    const auto wb = raw_bytes(wv);
    const int x = w.tensor("x", fb::TensorType::FLOAT32, {1, 2, 2, 1});
    const int k = w.tensor("k", fb::TensorType::FLOAT32, {1, 2, 2, 1}, nullptr, &wb);
    const int y = w.tensor("y", fb::TensorType::FLOAT32, {1, 1, 1, 1});
    w.op(3, {x, k, -1}, {y}, fb::BuiltinOptions::Conv2DOptions,
         fb::CreateConv2DOptions(b, fb::Padding::VALID, 1, 1).Union());
    const fs::path path = write_model("float_conv.tflite", w.finish({x}, {y}));
    try {
      compiler::import_tflite(path);
      FAIL("a float CONV_2D was accepted");
    } catch (const Error& err) {
      CHECK(err.code() == ErrorCode::UnsupportedOperator);
      CHECK_THAT(err.message(),
                 Catch::Contains("operator 0 (CONV_2D)") && Catch::Contains("float32"));
    }
  }
  const fs::path truncated =
      write_model("truncated.tflite", std::string("\x10\0\0\0TFL3\0\0\0\0", 12));
  try {
    compiler::import_model(truncated);
    FAIL("a truncated TFLite file was accepted");
  } catch (const Error& err) {
    CHECK(err.code() == ErrorCode::ModelLoadFailed);
    CHECK_THAT(err.message(), Catch::Contains("truncated.tflite"));
  }
}

TEST_CASE("TFLite: declared sizes are checked against the limits and the buffers before allocating",
          "[tflite][errors][validation]") {
  // A RESHAPE of a constant: the constant's shape and buffer are the culprits below.
  auto model = [](std::vector<std::int32_t> const_shape, std::size_t const_bytes,
                  std::vector<std::int32_t> out_shape) {
    TfliteWriter w;
    const std::vector<std::uint8_t> data(const_bytes, 1);
    const QSpec q{{0.5f}, {0}, 0};
    const int c = w.tensor("weights", fb::TensorType::UINT8, std::move(const_shape), &q, &data);
    const int x = w.tensor("x", fb::TensorType::UINT8, {1, 4}, &q);
    const int y = w.tensor("y", fb::TensorType::UINT8, std::move(out_shape), &q);
    w.op(22, {c}, {y});  // RESHAPE
    return w.finish({x}, {y});
  };
  auto refusal = [](const std::string& bytes, const LoadLimits& limits = {}) {
    try {
      (void)compiler::import_tflite_bytes(bytes, "bad.tflite", limits);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::IncompatibleModel);
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
      CHECK_THAT(e.message(), Catch::Contains("bad.tflite") && Catch::Contains("'"));
      return e.message();
    }
    FAIL("the model was accepted");
    return std::string();
  };
  // 65536 x 65536 x 5 uint8 = 20 GiB claimed by a 200-byte buffer.
  CHECK_THAT(refusal(model({65536, 65536, 5}, 200, {1, 4})),
             Catch::Contains("tensor 'weights'") && Catch::Contains("its dims claim more than"));
  CHECK_THAT(refusal(model({10, 20}, 199, {1, 4})),
             Catch::Contains(
                 "tensor 'weights' uint8 [10, 20] has a buffer of 199 bytes, its shape needs 200"));
  CHECK_THAT(refusal(model({1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, {1, 4})),
             Catch::Contains("rank 9, more than the limit of 8"));
  CHECK_THAT(refusal(model({2, 2}, 4, {1, 4, 1, 1, 1, 1, 1, 1, 1, 1})),
             Catch::Contains("tensor 'y' has rank 10"));
  LoadLimits tight;
  tight.max_total_bytes = 100;
  CHECK_THAT(refusal(model({10, 20}, 200, {1, 4}), tight),
             Catch::Contains("constant data passes the limit of 100"));
}
