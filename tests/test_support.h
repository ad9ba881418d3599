// Helpers shared by the tests: where the real models and the ONNX test data are, tensor
// comparisons, running a command-line tool, and scratch directories.
#pragma once

#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "furiosa/core/tensor.h"
#include "test_paths.h"

namespace furiosa::test {

/// What a shell command did: its exit status (-1 when it did not exit normally) and stdout.
struct CommandResult {
  int exit_code = -1;
  std::string out;
};

/// Runs `command` with /bin/sh (popen), capturing its standard output; stderr is left to the
/// caller's redirections. Fails the test when the shell cannot be started.
inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

/// Sets (or, with nullopt, unsets) an environment variable for the scope's lifetime and restores
/// the old value when destroyed: also when the test fails or throws half-way, so a failing test
/// never leaks its setting into the next one. Not thread-safe (setenv).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(std::move(value));
  }
  ~ScopedEnv() { set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  /// Changes the value again within the scope (the destructor still restores the original).
  void set(const std::optional<std::string>& value) {
    if (value) ::setenv(name_, value->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

/// A new, empty directory under the system temp directory (mkdtemp, so never shared with another
/// test or process), removed with its contents when destroyed: also when the test fails or
/// throws half-way.
class TempDir {
 public:
  explicit TempDir(const std::string& stem) {
    std::string templ = (std::filesystem::temp_directory_path() / ("furiosa-" + stem + "-XXXXXX")).string();
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }
  std::string string() const { return path_.string(); }
  std::filesystem::path operator/(const std::filesystem::path& rel) const { return path_ / rel; }

 private:
  std::filesystem::path path_;
};

/// ../shared/models (FURIOSA_SHARED_MODELS_DIR). Fails the test with a clear message when the
/// folder is missing: the real-model tests must not pass vacuously.
inline std::filesystem::path shared_models() {
  const std::filesystem::path p = FURIOSA_SHARED_MODELS_DIR;
  if (!std::filesystem::is_directory(p)) {
    FAIL("the staged models folder " << p.string()
         << " is missing: clone the project with ../shared beside it");
  }
  return p;
}

/// A model folder or file under ../shared/models that must exist.
inline std::filesystem::path shared_model(const std::string& rel) {
  auto p = shared_models() / rel;
  if (!std::filesystem::exists(p)) FAIL("missing staged model file " << p.string());
  return p;
}

/// The ONNX backend node tests of Debian's libonnx-testdata.
inline std::filesystem::path onnx_node_test(const std::string& name) {
  const std::filesystem::path p = std::filesystem::path(FURIOSA_ONNX_TESTDATA_DIR) / name;
  if (!std::filesystem::is_directory(p)) {
    FAIL("missing ONNX backend test " << p.string() << ": install Debian package libonnx-testdata");
  }
  return p;
}

/// Element i as double, whatever the dtype.
inline double element(const Tensor& t, std::size_t i) {
  switch (t.dtype()) {
    case DType::Float32: return t.as<float>()[i];
    case DType::UInt8: return t.as<std::uint8_t>()[i];
    case DType::Int8: return t.as<std::int8_t>()[i];
    case DType::Int32: return t.as<std::int32_t>()[i];
    case DType::Int64: return static_cast<double>(t.as<std::int64_t>()[i]);
  }
  return 0;
}

/// Largest |a - b| over the elements; requires equal dtype and shape.
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dtype() == b.dtype());
  REQUIRE(a.shape() == b.shape());
  double worst = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(a.elements()); ++i) {
    worst = std::max(worst, std::abs(element(a, i) - element(b, i)));
  }
  return worst;
}

/// Index of the largest element of a [1, C] (or flat) tensor.
inline std::size_t argmax(const Tensor& t) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < static_cast<std::size_t>(t.elements()); ++i) {
    if (element(t, i) > element(t, best)) best = i;
  }
  return best;
}

}  // namespace furiosa::test
