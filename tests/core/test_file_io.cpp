// read_regular_file and read_file_prefix on what users pass as model, program and input paths:
// regular files, missing ones, directories and FIFOs (which must never block).
#include <sys/stat.h>

#include <fstream>

#include "furiosa/core/file_io.h"
#include "test_support.h"

using namespace furiosa;
namespace fs = std::filesystem;

TEST_CASE("read_regular_file returns the bytes of a regular file and of a symlink to one", "[core][file_io]") {
  const test::TempDir dir("file-io");
  const std::string bytes("\x89" "FWENF\r\n\0tail", 13);
  { std::ofstream(dir / "a.bin", std::ios::binary) << bytes; }
  CHECK(read_regular_file(dir / "a.bin", ErrorCode::ModelLoadFailed, "model file") == bytes);
  fs::create_symlink(dir / "a.bin", dir / "link.bin");
  CHECK(read_regular_file(dir / "link.bin", ErrorCode::ModelLoadFailed, "model file") == bytes);
  CHECK(read_file_prefix(dir / "a.bin", 8) == bytes.substr(0, 8));
  CHECK(read_file_prefix(dir / "a.bin", 100) == bytes);
}

TEST_CASE("read_regular_file refuses missing files, directories and FIFOs with one line naming the file",
          "[core][file_io]") {
  const test::TempDir dir("file-io");
  const auto message_of = [](const fs::path& p) {
    try {
      read_regular_file(p, ErrorCode::InvalidInput, "input file");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidInput);
      CHECK(e.subject().file == p.string());
      CHECK(e.message().find('\n') == std::string::npos);
      return e.message();
    }
    FAIL("read " << p);
    return std::string();
  };
  CHECK(message_of(dir / "missing.npy") == "input file '" + (dir / "missing.npy").string() + "' does not exist");
  CHECK_THAT(message_of(dir.path()), Catch::EndsWith("is not a regular file (a directory)"));
  // A FIFO with no writer: opening it for reading would block forever without O_NONBLOCK.
  const fs::path fifo = dir / "model.onnx";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(message_of(fifo), Catch::EndsWith("is not a regular file (a FIFO)"));
  CHECK(read_file_prefix(fifo, 8).empty());
  CHECK(read_file_prefix(dir / "missing", 8).empty());
}

TEST_CASE("read_regular_file escapes control characters of the path in its message", "[core][file_io]") {
  const test::TempDir dir("file-io");
  const fs::path p = dir / "evil\nerror: forged line.onnx";
  try {
    read_regular_file(p, ErrorCode::ModelLoadFailed, "model file");
    FAIL("read a missing file");
  } catch (const Error& e) {
    CHECK(e.message().find('\n') == std::string::npos);
    CHECK_THAT(e.message(), Catch::Contains("evil\\x0aerror: forged line.onnx"));
  }
}
