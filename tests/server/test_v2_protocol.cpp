// KServe v2 request decoding and response encoding (server/v2_protocol.h) on the real
// mnist-12-int8 input and the model's descriptions.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <limits>

#include "furiosa/core/error.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/runtime/tensor_file.h"
#include "furiosa/server/v2_protocol.h"
#include "test_support.h"

using namespace furiosa;
using nlohmann::json;

namespace {

runtime::Model mnist_model() {
  return runtime::describe_model(furiosa::test::shared_model("onnx-zoo/mnist-12-int8/mnist-12-int8.onnx"));
}

Tensor mnist_input() {
  return runtime::load_tensor_file(furiosa::test::shared_model("onnx-zoo/mnist-12-int8/test_data_set_0/input_0.pb"));
}

json json_request(const runtime::TensorDesc& d, const Tensor& t) {
  json data = json::array();
  for (float v : t.as<float>()) data.push_back(v);
  return {{"id", "r1"}, {"inputs", json::array({{{"name", d.name}, {"datatype", "FP32"}, {"shape", d.shape}, {"data", data}}})}};
}

void require_invalid(const std::string& body, std::optional<std::size_t> header, const runtime::Model& m,
                     const std::string& fragment, const std::string& tensor = "") {
  try {
    server::decode_infer_request(body, header, m.inputs);
    FAIL("no error for: " << fragment);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK_THAT(e.what(), Catch::Contains(fragment));
    if (!tensor.empty()) CHECK(e.tensor() == tensor);
  }
}

}  // namespace

TEST_CASE("v2 datatypes map to the runtime's dtypes", "[server]") {
  CHECK(server::v2_datatype(DType::Float32) == "FP32");
  CHECK(server::v2_datatype(DType::UInt8) == "UINT8");
  CHECK(server::dtype_of_v2("INT64") == DType::Int64);
  CHECK_FALSE(server::dtype_of_v2("FP16").has_value());
  CHECK_FALSE(server::dtype_of_v2("BYTES").has_value());
}

TEST_CASE("a JSON inference request decodes to the real input, flat or nested", "[server]") {
  const auto m = mnist_model();
  const auto& d = m.inputs.at(0);
  const Tensor x = mnist_input();
  auto request = server::decode_infer_request(json_request(d, x).dump(), std::nullopt, m.inputs);
  REQUIRE(request.inputs.size() == 1);
  CHECK(request.id == "r1");
  CHECK(request.inputs[0].shape() == d.shape);
  CHECK(std::memcmp(request.inputs[0].bytes().data(), x.bytes().data(), x.size_bytes()) == 0);

  // Nested [1][1][28][28] data decodes to the same bytes.
  json nested = json::array();
  auto v = x.as<float>();
  json rows = json::array();
  for (int r = 0; r < 28; ++r) {
    json row = json::array();
    for (int c = 0; c < 28; ++c) row.push_back(v[static_cast<std::size_t>(r * 28 + c)]);
    rows.push_back(row);
  }
  json body = json_request(d, x);
  body["inputs"][0]["data"] = json::array({json::array({rows})});
  auto again = server::decode_infer_request(body.dump(), std::nullopt, m.inputs);
  CHECK(std::memcmp(again.inputs[0].bytes().data(), x.bytes().data(), x.size_bytes()) == 0);
}

TEST_CASE("the binary tensor data extension carries raw input bytes after the JSON header", "[server]") {
  const auto m = mnist_model();
  const auto& d = m.inputs.at(0);
  const Tensor x = mnist_input();
  json header = {{"inputs", json::array({{{"name", d.name}, {"datatype", "FP32"}, {"shape", d.shape},
                                          {"parameters", {{"binary_data_size", x.size_bytes()}}}}})},
                 {"outputs", json::array({{{"name", m.outputs[0].name}, {"parameters", {{"binary_data", true}}}}})}};
  std::string text = header.dump();
  std::string body = text + std::string(reinterpret_cast<const char*>(x.bytes().data()), x.size_bytes());
  auto request = server::decode_infer_request(body, text.size(), m.inputs);
  CHECK(std::memcmp(request.inputs[0].bytes().data(), x.bytes().data(), x.size_bytes()) == 0);

  // The output asked as binary comes back as bytes after the response JSON.
  Tensor y(DType::Float32, {1, 10});
  for (int i = 0; i < 10; ++i) y.as<float>()[static_cast<std::size_t>(i)] = static_cast<float>(i) * 0.5f;
  auto encoded = server::encode_infer_response("mnist", "1", request, m.outputs, {y});
  REQUIRE(encoded.header_length.has_value());
  auto response = json::parse(encoded.body.substr(0, *encoded.header_length));
  CHECK(response["model_name"] == "mnist");
  CHECK(response["outputs"][0]["parameters"]["binary_data_size"] == 40);
  CHECK(response["outputs"][0]["shape"] == json::array({1, 10}));
  REQUIRE(encoded.body.size() == *encoded.header_length + 40);
  CHECK(std::memcmp(encoded.body.data() + *encoded.header_length, y.bytes().data(), 40) == 0);

  // Without binary_data the output is JSON data.
  server::InferRequest plain;
  auto json_encoded = server::encode_infer_response("mnist", "1", plain, m.outputs, {y});
  CHECK_FALSE(json_encoded.header_length.has_value());
  auto r = json::parse(json_encoded.body);
  CHECK(r["outputs"][0]["data"][3] == 1.5);
  CHECK(r["outputs"][0]["datatype"] == "FP32");
}

TEST_CASE("bad inference requests are InvalidInput naming the tensor or the problem", "[server]") {
  const auto m = mnist_model();
  const auto& d = m.inputs.at(0);
  const Tensor x = mnist_input();
  json good = json_request(d, x);

  require_invalid("{not json", std::nullopt, m, "not a JSON object");
  json j = good;
  j["inputs"][0]["name"] = "nope";
  require_invalid(j.dump(), std::nullopt, m, "no such input", "nope");
  j = good;
  j["inputs"][0]["datatype"] = "UINT8";
  require_invalid(j.dump(), std::nullopt, m, "datatype UINT8 given, the model expects FP32", d.name);
  j = good;
  j["inputs"][0]["shape"] = json::array({1, 1, 28, 27});
  require_invalid(j.dump(), std::nullopt, m, "shape [1, 1, 28, 27] given", d.name);
  j = good;
  j["inputs"][0]["data"].erase(0);
  require_invalid(j.dump(), std::nullopt, m, "\"data\" has 783 elements, the shape needs 784", d.name);
  j = good;
  j["inputs"][0]["data"][5] = "x";
  require_invalid(j.dump(), std::nullopt, m, "holds a string", d.name);
  j = good;
  j["inputs"] = json::array();
  require_invalid(j.dump(), std::nullopt, m, "missing", d.name);
  const std::string text = good.dump();
  require_invalid(text, text.size() + 10, m, "exceeds the body");
  require_invalid(text + "xyz", text.size(), m, "3 bytes after the last binary input");
  json b = good;
  b["inputs"][0].erase("data");
  b["inputs"][0]["parameters"] = {{"binary_data_size", 100}};
  const std::string btext = b.dump();
  require_invalid(btext + std::string(100, '\0'), btext.size(), m, "binary_data_size 100 bytes, the shape needs 3136",
                  d.name);

  server::InferRequest asks_unknown;
  asks_unknown.outputs = {"missing_output"};
  CHECK_THROWS_WITH(server::encode_infer_response("m", "1", asks_unknown, m.outputs, {Tensor(DType::Float32, {1, 10})}),
                    Catch::Contains("missing_output"));
}

TEST_CASE("JSON nested past the limit is refused while parsing, not walked (100,000 levels)", "[server]") {
  const auto m = mnist_model();
  const auto& d = m.inputs.at(0);
  const Tensor x = mnist_input();
  // The request that crashed the server by recursion (issue 30): "data" 100,000 levels deep.
  const std::string deep = std::string(100'000, '[') + "1" + std::string(100'000, ']');
  json good = json_request(d, x);
  std::string text = good.dump();
  const std::string flat = good["inputs"][0]["data"].dump();
  text.replace(text.find(flat), flat.size(), deep);
  require_invalid(text, std::nullopt, m, "nested deeper than 64 levels");
  // The same depth unclosed (truncated) is refused the same way, before the parse fails.
  require_invalid(std::string(100'000, '['), std::nullopt, m, "nested deeper than 64 levels");

  // Up to the limit it is an ordinary request: the 784 values wrapped so that the document is
  // exactly 64 levels deep ({} 1, "inputs" 2, the input 3, "data" 4..64) decode to the same bytes.
  json wrapped = good["inputs"][0]["data"];
  for (int level = 4; level < 64; ++level) wrapped = json::array({wrapped});
  json at_limit = good;
  at_limit["inputs"][0]["data"] = wrapped;
  auto decoded = server::decode_infer_request(at_limit.dump(), std::nullopt, m.inputs);
  CHECK(std::memcmp(decoded.inputs[0].bytes().data(), x.bytes().data(), x.size_bytes()) == 0);
  // One level more is refused.
  at_limit["inputs"][0]["data"] = json::array({wrapped});
  require_invalid(at_limit.dump(), std::nullopt, m, "nested deeper than 64 levels");
}

TEST_CASE("JSON with more values than the model's inputs can use is refused while parsing",
          "[server]") {
  // A 250 MiB body of "0," took 4.4 GB of furiosa-serve's memory as a JSON tree before this
  // bound; the parse now stops at the 784 elements of mnist's input + 65,536 values of overhead.
  const auto m = mnist_model();
  const auto& d = m.inputs.at(0);
  const Tensor x = mnist_input();
  json good = json_request(d, x);
  const std::size_t budget = 784 + 65'536;
  // As many numbers as the budget holds minus the request's other values decode up to the usual
  // element-count check; one past the budget is refused by the parser.
  json big = good;
  big["inputs"][0]["data"] = json::array();
  for (std::size_t i = 0; i < budget + 1; ++i) big["inputs"][0]["data"].push_back(0);
  require_invalid(
      big.dump(), std::nullopt, m,
      "the JSON holds more than 66320 values, and the model's inputs have 784 elements in all");
  json fits = good;
  fits["inputs"][0]["data"] = json::array();
  for (std::size_t i = 0; i < 1000; ++i) fits["inputs"][0]["data"].push_back(0);
  require_invalid(fits.dump(), std::nullopt, m, "has 1000 elements, the shape needs 784");
  // Keys count too: an object of 70,000 parameters is refused the same way.
  json keys = good;
  for (int i = 0; i < 70'000; ++i) keys["parameters"][fmt::format("k{}", i)] = 1;
  require_invalid(keys.dump(), std::nullopt, m, "the JSON holds more than 66320 values");
  // The real request is unaffected.
  const auto decoded = server::decode_infer_request(good.dump(), std::nullopt, m.inputs);
  CHECK(std::memcmp(decoded.inputs[0].bytes().data(), x.bytes().data(), x.size_bytes()) == 0);
}

TEST_CASE("names from a request reach error messages escaped, on one line", "[server]") {
  const auto m = mnist_model();
  const auto& d = m.inputs.at(0);
  json j = json_request(d, mnist_input());
  j["inputs"][0]["name"] = "x\nerror: forged line\x1b[2J";
  try {
    server::decode_infer_request(j.dump(), std::nullopt, m.inputs);
    FAIL("an unknown input was accepted");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    CHECK(what.find('\x1b') == std::string::npos);
    CHECK_THAT(what, Catch::Contains("x\\x0aerror: forged line\\x1b[2J"));
  }
}

TEST_CASE("timeout_us accepts any positive int64, up to its maximum", "[server]") {
  const auto m = mnist_model();
  json j = json_request(m.inputs.at(0), mnist_input());
  j["parameters"] = {{"timeout_us", std::numeric_limits<std::int64_t>::max()}};
  auto request = server::decode_infer_request(j.dump(), std::nullopt, m.inputs);
  CHECK(request.timeout_us == std::numeric_limits<std::int64_t>::max());
  j["parameters"] = {{"timeout_us", 0}};
  require_invalid(j.dump(), std::nullopt, m, "timeout_us must be an integer >= 1");
}

TEST_CASE("model metadata lists the model's tensors with v2 datatypes", "[server]") {
  const auto m = mnist_model();
  auto meta = json::parse(server::model_metadata_json("mnist", {"1", "2"}, "onnx", m));
  CHECK(meta["name"] == "mnist");
  CHECK(meta["versions"] == json::array({"1", "2"}));
  CHECK(meta["platform"] == "onnx");
  CHECK(meta["inputs"][0]["name"] == m.inputs[0].name);
  CHECK(meta["inputs"][0]["datatype"] == "FP32");
  CHECK(meta["inputs"][0]["shape"] == json::array({1, 1, 28, 28}));
  CHECK(meta["outputs"][0]["shape"] == json::array({1, 10}));
  CHECK(json::parse(server::error_json("bad \"x\""))["error"] == "bad \"x\"");
}
