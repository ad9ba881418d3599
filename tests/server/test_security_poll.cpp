// furiosa-serve's bearer token (auth.h), TLS file checks (tls.h) and repository poll
// (repository_poll.h, ModelRegistry::rescan): the rescan is called directly, so nothing here
// waits on the poll thread's timer.
#include <catch2/catch.hpp>
#include <prometheus/registry.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "auth.h"
#include "furiosa/core/error.h"
#include "model_control.h"
#include "repository_poll.h"
#include "test_support.h"
#include "tls.h"

using namespace furiosa;
using namespace furiosa::server;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
}

/// The message of what `f` throws ("" when it does not throw).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("serve auth: bearer header parsing and constant-time comparison", "[server]") {
  CHECK(equal_constant_time("abc", "abc"));
  CHECK_FALSE(equal_constant_time("abd", "abc"));
  CHECK_FALSE(equal_constant_time("ab", "abc"));
  CHECK_FALSE(equal_constant_time("abcd", "abc"));
  CHECK(equal_constant_time("", ""));

  CHECK(bearer_matches("Bearer s3cret", "s3cret"));
  CHECK(bearer_matches("bearer s3cret", "s3cret"));   // the scheme is case-insensitive
  CHECK(bearer_matches("BEARER   s3cret ", "s3cret"));
  CHECK_FALSE(bearer_matches("Bearer S3cret", "s3cret"));  // the token is not
  CHECK_FALSE(bearer_matches("Bearer s3cre", "s3cret"));
  CHECK_FALSE(bearer_matches("Bearer s3crett", "s3cret"));
  CHECK_FALSE(bearer_matches("Basic s3cret", "s3cret"));
  CHECK_FALSE(bearer_matches("Bearers3cret", "s3cret"));
  CHECK_FALSE(bearer_matches("s3cret", "s3cret"));
  CHECK_FALSE(bearer_matches("", "s3cret"));
  CHECK_FALSE(bearer_matches("Bearer ", ""));  // no token configured never matches
}

TEST_CASE("serve auth: the token file, its trailing newline stripped, empty refused", "[server]") {
  const test::TempDir dir("serve-token");
  write(dir / "lf", "tok-1\n");
  write(dir / "crlf", "tok-2\r\n\n");
  write(dir / "empty", "");
  write(dir / "newline", "\n");
  write(dir / "two", "a b\n");
  CHECK(read_token_file(dir / "lf") == "tok-1");
  CHECK(read_token_file(dir / "crlf") == "tok-2");
  for (const char* bad : {"empty", "newline"}) {
    const auto message = error_of([&] { read_token_file(dir / bad); });
    CHECK(contains(message, (dir / bad).string()));
    CHECK(contains(message, "holds no token"));
  }
  const auto spaced = error_of([&] { read_token_file(dir / "two"); });
  CHECK(contains(spaced, (dir / "two").string()));
  CHECK_FALSE(contains(spaced, "a b"));  // never the token itself
  const auto missing = error_of([&] { read_token_file(dir / "missing"); });
  CHECK(contains(missing, "--auth-token-file"));
  CHECK(contains(missing, (dir / "missing").string()));
}

TEST_CASE("serve tls: both files or neither, a bad file named", "[server]") {
  const test::TempDir dir("serve-tls");
  write(dir / "junk.pem", "not a certificate\n");
  CHECK_FALSE(read_tls_files("", "").has_value());
  CHECK(contains(error_of([&] { read_tls_files(dir / "junk.pem", ""); }), "--tls-cert needs --tls-key"));
  CHECK(contains(error_of([&] { read_tls_files("", dir / "junk.pem"); }), "--tls-key needs --tls-cert"));
  const auto junk = error_of([&] { read_tls_files(dir / "junk.pem", dir / "junk.pem"); });
  CHECK(contains(junk, "--tls-cert"));
  CHECK(contains(junk, (dir / "junk.pem").string()));
  const auto missing = error_of([&] { read_tls_files(dir / "none.pem", dir / "junk.pem"); });
  CHECK(contains(missing, (dir / "none.pem").string()));
  // --tls-client-ca (mutual TLS) needs the server's pair, whatever the file holds.
  CHECK(contains(error_of([&] { read_tls_files("", "", dir / "junk.pem"); }),
                 "--tls-client-ca needs --tls-cert and --tls-key"));
  CHECK(contains(error_of([&] { read_tls_files(dir / "junk.pem", "", dir / "junk.pem"); }),
                 "--tls-client-ca needs --tls-cert and --tls-key"));
}

TEST_CASE("serve poll: fingerprints see added, changed and removed folders, not link targets",
          "[server]") {
  const test::TempDir dir("serve-poll-fp");
  const test::TempDir outside("serve-poll-outside");
  write(dir / "a" / "1" / "model.onnx", "one");
  write(outside / "model.onnx", "outside");
  fs::create_directories(dir / "b" / "1");
  fs::create_symlink(outside / "model.onnx", dir / "b" / "1" / "model.onnx");
  write(dir / "not-a-model.txt", "x");
  const auto first = repository_fingerprints(dir.path());
  REQUIRE(first.size() == 2);
  CHECK(plan_rescan(first, repository_fingerprints(dir.path())).empty());

  // The link's target changes: not followed, so not seen.
  write(outside / "model.onnx", "outside, rewritten at another length");
  CHECK(plan_rescan(first, repository_fingerprints(dir.path())).empty());

  write(dir / "a" / "config.json", "{}");
  write(dir / "c" / "1" / "model.onnx", "three");
  fs::remove_all(dir / "b");
  const auto plan = plan_rescan(first, repository_fingerprints(dir.path()));
  CHECK(plan.load == std::vector<std::string>{"c"});
  CHECK(plan.reload == std::vector<std::string>{"a"});
  CHECK(plan.unload == std::vector<std::string>{"b"});

  // A new version folder, and a model file replaced by one of another size.
  const auto second = repository_fingerprints(dir.path());
  write(dir / "a" / "2" / "model.onnx", "two");
  CHECK(plan_rescan(second, repository_fingerprints(dir.path())).reload ==
        std::vector<std::string>{"a"});
  const auto third = repository_fingerprints(dir.path());
  write(dir / "c" / "1" / "model.onnx", "three, longer");
  CHECK(plan_rescan(third, repository_fingerprints(dir.path())).reload ==
        std::vector<std::string>{"c"});

  CHECK(contains(error_of([&] { repository_fingerprints(dir / "gone"); }), "not a folder"));
}

TEST_CASE("serve poll: rescan loads new models, reloads changed ones, unloads removed ones",
          "[server]") {
  const test::TempDir dir("serve-poll-registry");
  const fs::path mnist = test::shared_model("onnx-zoo/mnist-12-int8") / "mnist-12-int8.onnx";
  const fs::path repo = dir / "repo";
  fs::create_directories(repo / "a" / "1");
  fs::copy_file(mnist, repo / "a" / "1" / "model.onnx");

  ServerOptions options;
  options.model_repository = repo;
  options.model_control_mode = ModelControlMode::Poll;
  options.repository_poll_s = 3600;  // the thread never fires during the test
  prometheus::Registry prom;
  ServiceMetrics metrics(prom);
  std::ostringstream log;
  ModelRegistry registry(options, metrics, log);
  auto states = [&] {
    std::map<std::string, std::string> out;
    for (const auto& row : registry.index(false)) out[row.name] = row.state;
    return out;
  };
  CHECK(states() == std::map<std::string, std::string>{{"a", "READY"}});
  registry.rescan();  // nothing changed
  CHECK(states() == std::map<std::string, std::string>{{"a", "READY"}});

  // Explicit requests are refused in poll mode, as Triton refuses them.
  const auto refused = error_of([&] { registry.load("a", [](std::exception_ptr) {}); });
  CHECK(contains(refused, "not allowed if polling is enabled"));
  CHECK(contains(error_of([&] { registry.unload("a", [](std::exception_ptr) {}); }),
                 "not allowed if polling is enabled"));

  fs::create_directories(repo / "b" / "1");
  fs::copy_file(mnist, repo / "b" / "1" / "model.onnx");
  registry.rescan();
  CHECK(states() == std::map<std::string, std::string>{{"a", "READY"}, {"b", "READY"}});
  CHECK(registry.find("b", "")->entry().config.max_inflight == 64);

  write(repo / "b" / "config.json", R"({"max_inflight": 7})");
  registry.rescan();
  CHECK(states() == std::map<std::string, std::string>{{"a", "READY"}, {"b", "READY"}});
  CHECK(registry.find("b", "")->entry().config.max_inflight == 7);  // reloaded

  fs::remove_all(repo / "a");
  registry.rescan();
  CHECK(states() == std::map<std::string, std::string>{{"b", "READY"}});
  try {
    (void)registry.find("a", "");
    FAIL("a removed model is still found");
  } catch (const ServeError& e) {
    CHECK(e.status() == ServeStatus::NotFound);
  }

  // A broken config: the reload is refused at the scan, before the loaded version is
  // unloaded, so that version keeps serving (as Triton keeps a model whose reload fails); the
  // error is logged, and the folder is retried once it changes again.
  write(repo / "b" / "config.json", R"({"max_inflight": "many"})");
  registry.rescan();
  CHECK(states() == std::map<std::string, std::string>{{"b", "READY"}});
  CHECK(registry.find("b", "")->entry().config.max_inflight == 7);
  CHECK(contains(log.str(), "repository poll: cannot load model b"));
  write(repo / "b" / "config.json", R"({"max_inflight": 9})");
  registry.rescan();
  CHECK(states() == std::map<std::string, std::string>{{"b", "READY"}});
  CHECK(registry.find("b", "")->entry().config.max_inflight == 9);
  registry.close();
}
