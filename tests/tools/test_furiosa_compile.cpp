// furiosa-compile end to end: compile a model into a program file, run that file with furiosa-run
// (same outputs as running the model), and refuse a damaged file with one line.
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

#include "furiosa/runtime/tensor_file.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// Runs `binary` with `args` (shell-quoted by the caller), capturing stdout and stderr, with the
/// compile cache off so furiosa-run really compiles the model it is compared with.
Result run_tool(const char* binary, const std::string& args, const fs::path& dir) {
  const fs::path err = dir / "stderr.txt";
  const auto c = test::run_command(
      fmt::format("FURIOSA_COMPILE_CACHE_DIR=off '{}' {} 2>'{}'", binary, args, err.string()));
  std::ifstream e(err);
  return {c.exit_code, c.out, std::string(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>())};
}

std::size_t line_count(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::equal(a.bytes().begin(), a.bytes().end(), b.bytes().begin(), b.bytes().end());
}

}  // namespace

TEST_CASE("furiosa-compile writes a program file that furiosa-run runs like the model", "[tools][program_file]") {
  const auto dir = test::shared_model("onnx-zoo/mnist-12-int8");
  const test::TempDir scratch("compile-test");  // removed even when a check fails
  const fs::path& tmp = scratch.path();
  const fs::path enf = tmp / "mnist.enf";
  const auto c = run_tool(FURIOSA_COMPILE_BINARY,
                          fmt::format("'{}' -o '{}' --target-npu warboy", (dir / "mnist-12-int8.onnx").string(), enf.string()),
                          tmp);
  INFO(c.out << c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(line_count(c.out) == 1);
  CHECK_THAT(c.out, Catch::StartsWith(fmt::format("wrote {} ({} bytes, 1 NPU program, target warboy, batch 1", enf.string(),
                                                  fs::file_size(enf))));
  const std::string input = fmt::format("--input 'Input3={}'", (dir / "test_data_set_0/input_0.pb").string());
  const auto from_model = run_tool(FURIOSA_RUN_BINARY,
                                   fmt::format("'{}' {} --devices npu0pe0 --output-dir '{}'",
                                               (dir / "mnist-12-int8.onnx").string(), input, (tmp / "a").string()),
                                   tmp);
  INFO(from_model.out << from_model.err);
  REQUIRE(from_model.exit_code == 0);
  // No --devices: the program file's own target (one single PE).
  const auto from_file = run_tool(FURIOSA_RUN_BINARY, fmt::format("'{}' {} --output-dir '{}'", enf.string(), input,
                                                                  (tmp / "b").string()),
                                  tmp);
  INFO(from_file.out << from_file.err);
  REQUIRE(from_file.exit_code == 0);
  CHECK_THAT(from_file.out, Catch::Contains("device: npu0pe0\n"));
  CHECK(same_bytes(runtime::read_npy(tmp / "a/Plus214_Output_0.npy"), runtime::read_npy(tmp / "b/Plus214_Output_0.npy")));
  // A fused-PE device is refused, naming both targets.
  const auto fused = run_tool(FURIOSA_RUN_BINARY, fmt::format("'{}' {} --devices npu0pe0-1", enf.string(), input), tmp);
  CHECK(fused.exit_code == 1);
  CHECK(line_count(fused.err) == 1);
  CHECK_THAT(fused.err, Catch::StartsWith("error: IncompatibleModel: program file") &&
                            Catch::Contains("compiled for warboy (1 PE) but device npu0pe0-1 has 2 PEs"));
  // A damaged file: one line naming it and the problem.
  {
    std::fstream f(enf, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-5, std::ios::end);
    char byte = 0;
    f.get(byte);
    f.seekp(-5, std::ios::end);
    f.put(static_cast<char>(byte ^ 0x21));
  }
  const auto damaged = run_tool(FURIOSA_RUN_BINARY, fmt::format("'{}' {}", enf.string(), input), tmp);
  CHECK(damaged.exit_code == 1);
  CHECK(line_count(damaged.err) == 1);
  CHECK_THAT(damaged.err, Catch::Equals(fmt::format("error: ModelLoadFailed: {}: corrupted: the checksum of the body does not match\n",
                                                    enf.string())));
  // A model furiosa-compile cannot read: one line, exit 1.
  const auto missing = run_tool(FURIOSA_COMPILE_BINARY, fmt::format("'{}' -o '{}'", (tmp / "none.onnx").string(), enf.string()), tmp);
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err, Catch::StartsWith("error: ModelLoadFailed"));
}
