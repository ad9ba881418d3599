// furiosa-serve's load parameters (load_parameters.h: a "config" parameter replacing the
// folder's config.json for one load) and, in poll mode, a new folder that fails its first load
// listed UNAVAILABLE in the index (ModelRegistry::rescan() called directly: no timer).
#include <catch2/catch.hpp>
#include <prometheus/registry.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "furiosa/core/error.h"
#include "load_parameters.h"
#include "model_control.h"
#include "serve_error.h"
#include "test_support.h"

using namespace furiosa;
using namespace furiosa::server;
namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
}

/// The status and message of the ServeError `f` throws ({Ok, ""} when it does not throw).
template <class F>
std::pair<ServeStatus, std::string> serve_error_of(F&& f) {
  try {
    f();
  } catch (const ServeError& e) {
    return {e.status(), e.what()};
  }
  return {ServeStatus::Ok, ""};
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// Loads `name` through the control thread and waits (generously) for the outcome.
std::exception_ptr load_and_wait(ModelRegistry& registry, const std::string& name,
                                 std::optional<ModelConfig> config) {
  auto done = std::make_shared<std::promise<std::exception_ptr>>();
  auto outcome = done->get_future();
  registry.load(name, [done](std::exception_ptr e) { done->set_value(e); }, std::move(config));
  REQUIRE(outcome.wait_for(std::chrono::minutes(5)) == std::future_status::ready);
  return outcome.get();
}

}  // namespace

TEST_CASE("serve load parameters: config parsed as config.json, others refused by name",
          "[server]") {
  CHECK_FALSE(config_of_load_parameters({}).has_value());
  const auto config =
      config_of_load_parameters({{"config", R"({"worker_num": 3, "max_inflight": 5})"}});
  REQUIRE(config.has_value());
  CHECK(config->worker_num == 3);
  CHECK(config->max_inflight == 5);

  auto [status, message] = serve_error_of(
      [] { (void)config_of_load_parameters({{"config", R"({"max_inflight": "many"})"}}); });
  CHECK(status == ServeStatus::InvalidArgument);
  CHECK(has(message, "load parameter 'config'"));
  CHECK(has(message, "max_inflight"));
  CHECK_FALSE(has(message, "\n"));

  std::tie(status, message) = serve_error_of(
      [] { (void)config_of_load_parameters({{"config", std::string(100, '[')}}); });
  CHECK(status == ServeStatus::InvalidArgument);
  std::tie(status, message) = serve_error_of([] {
    (void)config_of_load_parameters({{"config", std::string(kMaxConfigParameterBytes + 1, ' ')}});
  });
  CHECK((status == ServeStatus::InvalidArgument && has(message, "longer than")));
  std::tie(status, message) =
      serve_error_of([] { (void)config_of_load_parameters({{"config", std::nullopt}}); });
  CHECK((status == ServeStatus::InvalidArgument && has(message, "must be a string")));
  std::tie(status, message) = serve_error_of(
      [] { (void)config_of_load_parameters({{"file:1/model.onnx", "AAAA"}}); });
  CHECK((status == ServeStatus::InvalidArgument && has(message, "'file:1/model.onnx'") &&
         has(message, "not supported")));
  std::tie(status, message) =
      serve_error_of([] { (void)config_of_load_parameters({{"colour", "blue"}}); });
  CHECK((status == ServeStatus::InvalidArgument && has(message, "'colour'")));

  CHECK(load_parameters_of_json("").empty());
  CHECK(load_parameters_of_json(" {} ").empty());
  const auto params =
      load_parameters_of_json(R"({"parameters": {"config": "{}", "flag": true}})");
  CHECK(params == LoadParameters{{"config", "{}"}, {"flag", std::nullopt}});
  CHECK(serve_error_of([] { (void)load_parameters_of_json("[1]"); }).first ==
        ServeStatus::InvalidArgument);
  CHECK(has(serve_error_of([] { (void)load_parameters_of_json(R"({"params": {}})"); }).second,
            "\"params\""));
  CHECK(serve_error_of([] { (void)load_parameters_of_json(R"({"parameters": 1})"); }).first ==
        ServeStatus::InvalidArgument);
}

TEST_CASE("serve unload parameters: unload_dependents taken as a bool, others refused by name",
          "[server]") {
  CHECK(unload_parameters_of_json("").empty());
  CHECK(unload_parameters_of_json("{}").empty());
  CHECK_NOTHROW(check_unload_parameters({}));
  for (const char* body : {R"({"parameters": {"unload_dependents": true}})",
                           R"({"parameters": {"unload_dependents": false}})"}) {
    const auto params = unload_parameters_of_json(body);
    REQUIRE(params.size() == 1);
    CHECK(params.at("unload_dependents").has_value());
    CHECK_NOTHROW(check_unload_parameters(params));
  }
  CHECK(unload_parameters_of_json(R"({"parameters": {"unload_dependents": false}})") ==
        UnloadParameters{{"unload_dependents", false}});

  // A wrong type (a string, a number) is refused naming the parameter.
  for (const char* body : {R"({"parameters": {"unload_dependents": "true"}})",
                           R"({"parameters": {"unload_dependents": 1}})"}) {
    auto [status, message] =
        serve_error_of([&] { check_unload_parameters(unload_parameters_of_json(body)); });
    CHECK(status == ServeStatus::InvalidArgument);
    CHECK(has(message, "'unload_dependents'"));
    CHECK(has(message, "true or false"));
  }
  // Any other name, escaped in the one-line message.
  auto [status, message] = serve_error_of([] {
    check_unload_parameters(unload_parameters_of_json(
        R"({"parameters": {"config": "{}", "unload_dependents": true}})"));
  });
  CHECK(status == ServeStatus::InvalidArgument);
  CHECK(has(message, "unknown unload parameter 'config'"));
  std::tie(status, message) = serve_error_of([] {
    check_unload_parameters({{"evil\nname", true}});
  });
  CHECK(status == ServeStatus::InvalidArgument);
  CHECK_FALSE(has(message, "\n"));
  CHECK(has(message, "evil"));

  // The body's own form, as a load body's.
  CHECK(has(serve_error_of([] { (void)unload_parameters_of_json("[1]"); }).second,
            "the unload request must be a JSON object"));
  CHECK(has(serve_error_of([] { (void)unload_parameters_of_json(R"({"params": {}})"); }).second,
            "\"params\" in the unload request"));
  CHECK(serve_error_of([] { (void)unload_parameters_of_json(R"({"parameters": []})"); }).first ==
        ServeStatus::InvalidArgument);
}

TEST_CASE("serve load parameters: a config parameter replaces config.json for one load",
          "[server]") {
  const test::TempDir dir("serve-load-config");
  const fs::path mnist = test::shared_model("onnx-zoo/mnist-12-int8") / "mnist-12-int8.onnx";
  const fs::path repo = dir / "repo";
  fs::create_directories(repo / "a" / "1");
  fs::copy_file(mnist, repo / "a" / "1" / "model.onnx");
  write_file(repo / "a" / "config.json", R"({"max_inflight": 7})");

  ServerOptions options;
  options.model_repository = repo;
  options.model_control_mode = ModelControlMode::Explicit;
  options.load_models = {"a"};
  prometheus::Registry prom;
  ServiceMetrics metrics(prom);
  std::ostringstream log;
  ModelRegistry registry(options, metrics, log);
  CHECK(registry.find("a", "")->entry().config.max_inflight == 7);

  CHECK_FALSE(load_and_wait(registry, "a",
                            config_of_load_parameters(
                                {{"config", R"({"max_inflight": 3, "worker_num": 1})"}})));
  CHECK(registry.find("a", "")->entry().config.max_inflight == 3);
  CHECK(registry.find("a", "")->entry().config.worker_num == 1);
  // The override was for that load: the next one reads config.json again.
  CHECK_FALSE(load_and_wait(registry, "a", std::nullopt));
  CHECK(registry.find("a", "")->entry().config.max_inflight == 7);
  CHECK(registry.find("a", "")->entry().config.worker_num == 2);
  registry.close();
}

TEST_CASE("serve poll: a new folder failing its first load is listed UNAVAILABLE with why",
          "[server]") {
  const test::TempDir dir("serve-poll-unavailable");
  const fs::path mnist = test::shared_model("onnx-zoo/mnist-12-int8") / "mnist-12-int8.onnx";
  const fs::path repo = dir / "repo";
  fs::create_directories(repo);

  ServerOptions options;
  options.model_repository = repo;
  options.model_control_mode = ModelControlMode::Poll;
  options.repository_poll_s = 3600;  // the thread never fires during the test
  prometheus::Registry prom;
  ServiceMetrics metrics(prom);
  std::ostringstream log;
  ModelRegistry registry(options, metrics, log);
  CHECK(registry.index(false).empty());

  fs::create_directories(repo / "b" / "1");
  fs::copy_file(mnist, repo / "b" / "1" / "model.onnx");
  write_file(repo / "b" / "config.json", R"({"max_inflight": "many"})");
  registry.rescan();
  auto rows = registry.index(false);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].name == "b");
  CHECK(rows[0].state == "UNAVAILABLE");
  CHECK(has(rows[0].reason, "max_inflight"));
  CHECK(has(log.str(), "repository poll: cannot load model b"));
  CHECK(registry.index(true).empty());
  CHECK(serve_error_of([&] { (void)registry.find("b", ""); }).first == ServeStatus::Unavailable);

  write_file(repo / "b" / "config.json", R"({"max_inflight": 9})");
  registry.rescan();
  rows = registry.index(false);
  REQUIRE(rows.size() == 1);
  CHECK((rows[0].state == "READY" && rows[0].reason.empty() && rows[0].version == "1"));
  CHECK(registry.find("b", "")->entry().config.max_inflight == 9);

  // Removed after a failed first load: it leaves the index.
  write_file(repo / "c" / "config.json", "{}");  // no version folder: the scan fails
  registry.rescan();
  CHECK(registry.index(false).size() == 2);
  fs::remove_all(repo / "c");
  registry.rescan();
  rows = registry.index(false);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].name == "b");
  registry.close();
}
