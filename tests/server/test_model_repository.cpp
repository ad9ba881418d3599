// Model repository scanning (server/model_repository.h): versions, config.json, refusals.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "furiosa/core/error.h"
#include "furiosa/server/model_repository.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

void link_model(const fs::path& dir, const std::string& relative_shared) {
  fs::create_directories(dir.parent_path());
  fs::create_symlink(furiosa::test::shared_model(relative_shared), dir);
}

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

}  // namespace

TEST_CASE("the model repository serves each model's highest version with its config", "[server]") {
  const test::TempDir scratch("repo-ok");  // removed even when a check fails
  const fs::path& repo = scratch.path();
  link_model(repo / "mnist" / "1" / "model.onnx", "onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  link_model(repo / "mnist" / "10" / "model.onnx", "onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  link_model(repo / "mnist" / "2" / "model.onnx", "onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  write(repo / "mnist" / "config.json", R"({"device": "npu0pe1", "worker_num": 3, "max_inflight": 7})");
  link_model(repo / "digits" / "1" / "model.tflite",
             "furiosa-sdk/MNISTnet_uint8_quant_without_softmax/MNISTnet_uint8_quant_without_softmax.tflite");
  auto models = server::scan_model_repository(repo);
  REQUIRE(models.size() == 2);
  CHECK(models[0].name == "digits");
  CHECK(models[0].platform == "tflite");
  CHECK(models[0].config.device.empty());
  CHECK(models[0].config.max_inflight == 64);
  CHECK(models[1].name == "mnist");
  CHECK(models[1].version == "10");
  CHECK(models[1].versions == std::vector<std::string>{"1", "2", "10"});
  CHECK(models[1].config.device == "npu0pe1");
  CHECK(models[1].config.worker_num == 3);
  CHECK(models[1].config.max_inflight == 7);
  CHECK(!models[1].config.dynamic_batching);
  write(repo / "mnist" / "config.json", R"({"dynamic_batching": {"max_batch_size": 16, "max_queue_delay_us": 250}})");
  models = server::scan_model_repository(repo);
  REQUIRE(models[1].config.dynamic_batching);
  CHECK(models[1].config.dynamic_batching->max_batch_size == 16);
  CHECK(models[1].config.dynamic_batching->max_queue_delay == std::chrono::microseconds(250));
  write(repo / "mnist" / "config.json", R"({"input_shapes": {"Input3": [1, 1, 28, 28]}})");
  models = server::scan_model_repository(repo);
  CHECK(models[1].config.input_shapes ==
        std::map<std::string, std::vector<std::int64_t>>{{"Input3", {1, 1, 28, 28}}});
}

TEST_CASE("bad model repositories are refused naming the file", "[server]") {
  CHECK_THROWS_WITH(server::scan_model_repository("/nonexistent/repo"), Catch::Contains("/nonexistent/repo"));

  const test::TempDir scratch("repo-bad");  // removed even when a check fails
  const fs::path& repo = scratch.path();
  fs::create_directories(repo / "empty" / "1");
  CHECK_THROWS_WITH(server::scan_model_repository(repo), Catch::Contains("empty") && Catch::Contains("no VERSION/model"));
  fs::remove_all(repo / "empty");

  link_model(repo / "m" / "v1" / "model.onnx", "onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  CHECK_THROWS_WITH(server::scan_model_repository(repo), Catch::Contains("v1") && Catch::Contains("non-negative integer"));
  fs::remove_all(repo / "m");

  link_model(repo / "m" / "1" / "model.onnx", "onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  write(repo / "m" / "config.json", R"({"workers": 2})");
  try {
    server::scan_model_repository(repo);
    FAIL("unknown key accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::ModelLoadFailed);
    CHECK_THAT(e.what(), Catch::Contains("config.json") && Catch::Contains("unknown key \"workers\""));
    CHECK_THAT(e.file(), Catch::EndsWith("config.json"));
  }
  write(repo / "m" / "config.json", R"({"max_inflight": 0})");
  CHECK_THROWS_WITH(server::scan_model_repository(repo), Catch::Contains("\"max_inflight\" must be an integer >= 1"));
  write(repo / "m" / "config.json", R"({"dynamic_batching": {"max_batch_size": 0}})");
  CHECK_THROWS_WITH(server::scan_model_repository(repo),
                    Catch::Contains("\"dynamic_batching.max_batch_size\" must be an integer >= 1"));
  write(repo / "m" / "config.json", R"({"dynamic_batching": {"delay": 5}})");
  CHECK_THROWS_WITH(server::scan_model_repository(repo), Catch::Contains("unknown key \"dynamic_batching.delay\""));
  write(repo / "m" / "config.json", R"({"batch_size": 2, "dynamic_batching": {}})");
  CHECK_THROWS_WITH(server::scan_model_repository(repo),
                    Catch::Contains("config.json") && Catch::Contains("\"batch_size\" must be 1"));
  for (const char* bad :
       {R"({"input_shapes": [1, 3]})", R"({"input_shapes": {"x": [1, 0]}})",
        R"({"input_shapes": {"x": []}})", R"({"input_shapes": {"x": [1, "a"]}})"}) {
    write(repo / "m" / "config.json", bad);
    CHECK_THROWS_WITH(server::scan_model_repository(repo),
                      Catch::Contains("config.json") && Catch::Contains("\"input_shapes"));
  }
  write(repo / "m" / "config.json", "[1, 2]");
  CHECK_THROWS_WITH(server::scan_model_repository(repo), Catch::Contains("not a JSON object"));
}

TEST_CASE("version_policy selects the versions served, Triton's field names", "[server]") {
  const test::TempDir scratch("repo-versions");
  const fs::path& repo = scratch.path();
  for (const char* v : {"1", "2", "10"})
    link_model(repo / "m" / v / "model.onnx", "onnx-zoo/mnist-12-int8/mnist-12-int8.onnx");
  auto served = [&](const std::string& policy) {
    write(repo / "m" / "config.json", policy);
    return server::served_versions(server::scan_model(repo, "m"));
  };
  using V = std::vector<std::string>;
  CHECK(served("{}") == V{"10"});
  CHECK(served(R"({"version_policy": {"latest": {"num_versions": 2}}})") == V{"2", "10"});
  CHECK(served(R"({"version_policy": {"latest": {"num_versions": 9}}})") == V{"1", "2", "10"});
  CHECK(served(R"({"version_policy": {"all": {}}})") == V{"1", "2", "10"});
  CHECK(served(R"({"version_policy": {"specific": {"versions": [10, 1, 1]}}})") == V{"1", "10"});
  // The entry of one served version: its own file, the served versions in its metadata.
  const auto entry = server::scan_model(repo, "m");
  const auto v2 = server::for_version(entry, "2", {"1", "2"});
  CHECK(v2.version == "2");
  CHECK(v2.path.parent_path().filename() == "2");
  CHECK(v2.versions == V{"1", "2"});
  CHECK_THROWS_WITH(served(R"({"version_policy": {"specific": {"versions": [3]}}})"),
                    Catch::Contains("model 'm'") && Catch::Contains("version 3"));
  for (const char* bad :
       {R"({"version_policy": {"latest": {"num_versions": 0}}})",
        R"({"version_policy": {"newest": {}}})", R"({"version_policy": {"all": {"x": 1}}})",
        R"({"version_policy": {"specific": {"versions": [-1]}}})",
        R"({"version_policy": {"all": {}, "latest": {"num_versions": 1}}})",
        R"({"version_policy": 1})"}) {
    write(repo / "m" / "config.json", bad);
    CHECK_THROWS_WITH(server::scan_model(repo, "m"),
                      Catch::Contains("config.json") && Catch::Contains("\"version_policy"));
  }
  for (const char* name : {"", ".", "..", "a/b", "nosuch"})
    CHECK_THROWS_WITH(server::scan_model(repo, name), Catch::Contains("unknown model"));
}
