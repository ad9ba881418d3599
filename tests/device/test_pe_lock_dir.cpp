// The PE lock directory cannot be turned against the user opening a device (root included): a
// directory other users can write to, one owned by someone else, a symbolic link for the
// directory or for a lock file, a FIFO for a lock file are refused in one line naming the
// directory and what is wrong, and nothing outside the directory is touched.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "device_test_util.h"
#include "test_support.h"

using namespace furiosa;
using namespace furiosa::device;
using namespace furiosa::device::test;

namespace {

/// The message of the DeviceFault an open of npu0pe0 with lock directory `dir` throws.
std::string refusal(const std::string& dir) {
  SimConfig config = fast_config();
  config.lock_dir = dir;
  auto driver = create_sim_driver(config);
  const std::string message =
      error_message([&] { driver->open(DeviceFile::parse("npu0pe0")); }, ErrorCode::DeviceFault);
  CHECK(message.find('\n') == std::string::npos);
  CHECK_THAT(message, Catch::Contains("npu0pe0: cannot use the PE lock directory '" + dir + "'"));
  return message;
}

std::string contents(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

}  // namespace

TEST_CASE("a missing lock directory is created 0700 and used", "[device][sim][ownership][locks]") {
  const furiosa::test::TempDir top("lockdir-new");
  const std::string dir = (top / "locks").string();
  SimConfig config = fast_config();
  config.lock_dir = dir;
  auto device = create_sim_driver(config)->open(DeviceFile::parse("npu0pe0"));
  struct stat st {};
  REQUIRE(::lstat(dir.c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(st.st_uid == ::geteuid());
  REQUIRE(::lstat((top / "locks" / "npu0pe0.lock").c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 077) == 0);
}

TEST_CASE("a lock directory that other users can write to is refused", "[device][sim][ownership][locks]") {
  const furiosa::test::TempDir dir("lockdir-open");
  REQUIRE(::chmod(dir.string().c_str(), 0777) == 0);
  CHECK_THAT(refusal(dir.string()), Catch::Contains("mode 0777"));
  REQUIRE(::chmod(dir.string().c_str(), 0750) == 0);  // group bits alone are too wide as well
  CHECK_THAT(refusal(dir.string()), Catch::Contains("mode 0750"));
  CHECK_FALSE(std::filesystem::exists(dir / "npu0pe0.lock"));  // refused before creating anything
}

TEST_CASE("a lock directory owned by another user is refused", "[device][sim][ownership][locks]") {
  const furiosa::test::TempDir dir("lockdir-foreign");
  // As root (CI) the directory is given to uid 65534 (nobody); mode stays 0700.
  if (::geteuid() != 0 || ::chown(dir.string().c_str(), 65534, 65534) != 0) {
    WARN("cannot give the directory to uid 65534 (not root, or no CAP_CHOWN): the foreign-owner case is not checked");
    return;
  }
  CHECK_THAT(refusal(dir.string()), Catch::Contains("owned by uid 65534"));
}

TEST_CASE("a lock directory that is a symbolic link is refused", "[device][sim][ownership][locks]") {
  const furiosa::test::TempDir top("lockdir-link");
  const std::filesystem::path real = top / "real";
  REQUIRE(::mkdir(real.c_str(), 0700) == 0);  // a perfectly good directory behind the link
  std::filesystem::create_directory_symlink(real, top / "link");
  CHECK_THAT(refusal((top / "link").string()), Catch::Contains("symbolic link"));
  CHECK(std::filesystem::is_empty(real));
}

TEST_CASE("a lock file that is a symbolic link is refused and its target left alone",
          "[device][sim][ownership][locks]") {
  const furiosa::test::TempDir dir("lockdir-file-link");
  const furiosa::test::TempDir elsewhere("lockdir-victim");
  const std::filesystem::path victim = elsewhere / "victim";
  const std::string original = "precious bytes\n";
  write_file(victim, original);
  std::filesystem::create_symlink(victim, dir / "npu0pe0.lock");
  {
    CHECK_THAT(refusal(dir.string()), Catch::Contains("npu0pe0.lock is a symbolic link"));
    // The other PE is unaffected.
    SimConfig config = fast_config();
    config.lock_dir = dir.string();
    auto driver = create_sim_driver(config);
    auto device = driver->open(DeviceFile::parse("npu0pe1"));
    CHECK(driver->enumerate().at(0).pe_holder_pid.at(0) == 0);  // probing does not follow it either
  }  // closed: whatever cleanup runs has run
  CHECK(contents(victim) == original);
  CHECK(std::filesystem::is_symlink(dir / "npu0pe0.lock"));
}

TEST_CASE("a lock file that is a FIFO or another user's file is refused at once",
          "[device][sim][ownership][locks]") {
  const furiosa::test::TempDir dir("lockdir-fifo");
  REQUIRE(::mkfifo((dir / "npu0pe0.lock").c_str(), 0600) == 0);
  CHECK_THAT(refusal(dir.string()), Catch::Contains("npu0pe0.lock: it is not a regular file"));
  SimConfig config = fast_config();
  config.lock_dir = dir.string();
  CHECK(create_sim_driver(config)->enumerate().at(0).pe_holder_pid.at(0) == 0);  // does not block
  write_file(dir / "npu0pe1.lock", "");
  if (::geteuid() == 0 && ::chown((dir / "npu0pe1.lock").c_str(), 65534, 65534) == 0) {
    SimConfig c = fast_config();
    c.lock_dir = dir.string();
    CHECK_THAT(error_message([&] { create_sim_driver(c)->open(DeviceFile::parse("npu0pe1")); }, ErrorCode::DeviceFault),
               Catch::Contains("npu0pe1.lock: it is owned by uid 65534"));
  }
}
