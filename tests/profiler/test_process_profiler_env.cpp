// process_profiler() with FURIOSA_PROFILER_OUTPUT_PATH set. Its std::call_once state lives for
// the whole process, so each case forks a child that sets the variable before the first call,
// uses the profiler and exits normally (std::exit runs static destructors, which write the
// trace); the parent checks the child's exit code and the file it left. This executable's own
// process never calls process_profiler().
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>

#include "furiosa/profiler/profiler.h"
#include "profiler_test_util.h"

using namespace furiosa::profiler;
using furiosa::profiler::testing::read_json;
using furiosa::profiler::testing::TempFile;

namespace {

/// Runs `body` in a forked child that exits with std::exit(body()) (static destructors run),
/// or with 100 when `body` throws. Returns the child's exit status, -1 when it did not exit.
int run_in_child(const std::function<int()>& body) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);  // the child must not replay the parent's buffered output
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int code = 100;
    try {
      code = body();
    } catch (...) {
    }
    std::exit(code);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("process_profiler writes FURIOSA_PROFILER_OUTPUT_PATH at process exit",
          "[profiler][env]") {
  TempFile file("env");
  const int status = run_in_child([&file] {
    ::setenv("FURIOSA_PROFILER_OUTPUT_PATH", file.path().c_str(), 1);
    const std::shared_ptr<Profiler> profiler = process_profiler();
    if (!profiler) return 1;
    if (process_profiler() != profiler) return 2;  // the same profiler on every call
    if (profiler->options().output_path != file.path()) return 3;
    {
      ScopedSpan root(profiler.get(), "Inference", SpanContext{});
      ScopedSpan child(profiler.get(), "EnvChild", root.context());
    }
    if (std::filesystem::exists(file.path())) return 4;  // not before exit
    return 0;
  });
  REQUIRE(status == 0);
  REQUIRE(std::filesystem::exists(file.path()));
  const auto doc = read_json(file.path());
  int complete = 0;
  bool child_seen = false;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    ++complete;
    child_seen = child_seen || e.at("name") == "EnvChild";
  }
  CHECK(complete == 2);
  CHECK(child_seen);
}

TEST_CASE("process_profiler is null when FURIOSA_PROFILER_OUTPUT_PATH is empty",
          "[profiler][env]") {
  const int status = run_in_child([] {
    ::setenv("FURIOSA_PROFILER_OUTPUT_PATH", "", 1);
    return process_profiler() == nullptr && process_profiler() == nullptr ? 0 : 1;
  });
  CHECK(status == 0);
}

TEST_CASE("process_profiler is null in a child process without FURIOSA_PROFILER_OUTPUT_PATH",
          "[profiler][env]") {
  const int status = run_in_child([] {
    ::unsetenv("FURIOSA_PROFILER_OUTPUT_PATH");
    return process_profiler() == nullptr ? 0 : 1;
  });
  CHECK(status == 0);
}

TEST_CASE("process_profiler writes a CSV record table when the path ends in .csv",
          "[profiler][env]") {
  TempFile file("env-csv", ".csv");
  const std::filesystem::path& csv = file.path();
  const int status = run_in_child([&csv] {
    ::setenv("FURIOSA_PROFILER_OUTPUT_PATH", csv.c_str(), 1);
    const std::shared_ptr<Profiler> profiler = process_profiler();
    if (!profiler) return 1;
    if (profiler->options().format != ProfilerFormat::Table) return 2;
    { ScopedSpan root(profiler.get(), "Inference", SpanContext{}); }
    return 0;
  });
  REQUIRE(status == 0);
  REQUIRE(std::filesystem::exists(csv));
  std::ifstream in(csv);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  CHECK(header.rfind("trace_id,parent_span_id,span_id,start,end,cat,name,", 0) == 0);
  CHECK(row.find(",Runtime,Inference,") != std::string::npos);
}
