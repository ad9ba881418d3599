// furiosa-operator-index (tools/operator_index.cpp): --write puts the generated operator index into
// a document and keeps its prose, --check passes on that and fails with one line naming the first
// differing line once the section drifts, and the index lists every TFLite operator the importer
// maps.
#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "furiosa/compiler/compiler.h"
#include "furiosa/compiler/tflite_import.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

test::CommandResult index_tool(const std::string& args, const fs::path& err) {
  return test::run_command(
      fmt::format("'{}' {} 2>'{}'", FURIOSA_OPERATOR_INDEX_BINARY, args, err.string()));
}

}  // namespace

TEST_CASE("furiosa-operator-index writes, checks and regenerates the operator index section",
          "[tools][docs]") {
  const test::TempDir scratch("operator-index-test");
  const fs::path doc = scratch.path() / "operators.md";
  const fs::path err = scratch.path() / "stderr.txt";
  const std::string prose = "# Supported operators\n\nHand-written prose.\n";
  spit(doc, prose);

  // No section yet: --check fails, --write appends one after the prose.
  CHECK(index_tool(fmt::format("--check '{}'", doc.string()), err).exit_code == 1);
  REQUIRE(index_tool(fmt::format("--write '{}'", doc.string()), err).exit_code == 0);
  const std::string written = slurp(doc);
  CHECK_THAT(written, Catch::StartsWith(prose));
  const auto printed = index_tool("", err);
  REQUIRE(printed.exit_code == 0);
  CHECK(written == prose + "\n" + printed.out);
  const auto ok = index_tool(fmt::format("--check '{}'", doc.string()), err);
  INFO(ok.out << slurp(err));
  CHECK(ok.exit_code == 0);

  // Every TFLite operator the importer maps has a row (TRANSPOSE_CONV: NPU for 8-bit, host for
  // float32, the types of its input 2), and so has every row of the compiler's NPU table.
  for (const auto& name : compiler::tflite_supported_operators()) {
    CHECK_THAT(printed.out, Catch::Contains(fmt::format("| {} |", name)));
  }
  CHECK_THAT(printed.out, Catch::Contains("| TRANSPOSE_CONV | uint8, int8 | float32 | input 2 |"));
  for (const auto& row : compiler::npu_operator_table()) {
    CHECK_THAT(printed.out, Catch::Contains(fmt::format("| {} |", row.op)));
  }

  // A drifted row: --check names its line; --write restores the section and keeps the prose
  // after it too.
  std::string drifted = written;
  const std::string row = "| TRANSPOSE_CONV | uint8, int8 | float32 | input 2 |";
  drifted.replace(drifted.find(row), row.size(), "| TRANSPOSE_CONV | uint8 | float32 | input 2 |");
  spit(doc, drifted + "\nMore prose.\n");
  const auto bad = index_tool(fmt::format("--check '{}'", doc.string()), err);
  CHECK(bad.exit_code == 1);
  const std::string msg = slurp(err);
  CHECK(std::count(msg.begin(), msg.end(), '\n') == 1);
  const auto line = static_cast<std::size_t>(
      std::count(drifted.begin(),
                 drifted.begin() + static_cast<std::ptrdiff_t>(drifted.find("| TRANSPOSE_CONV |")),
                 '\n') +
      1);
  CHECK_THAT(msg, Catch::Contains(fmt::format("line {} differs", line)) &&
                      Catch::Contains("'| TRANSPOSE_CONV | uint8 | float32 | input 2 |'"));
  REQUIRE(index_tool(fmt::format("--write '{}'", doc.string()), err).exit_code == 0);
  CHECK(slurp(doc) == written + "\nMore prose.\n");
}
