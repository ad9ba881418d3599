// System-wide ownership of simulated PEs: an open in another process makes ours DeviceBusy
// naming its pid, furiosactl-style enumeration shows the holder, and SIGKILL frees the PE; the
// holder's published executions and busy time reach furiosactl top.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "device_test_util.h"
#include "furiosa/device/device_spec.h"
#include "test_support.h"

extern char** environ;

using namespace furiosa;
using namespace furiosa::device;
using namespace furiosa::device::test;

namespace {

/// A child process running hold_pe: started, waited for until it holds the device file.
struct Holder {
  pid_t pid = -1;
  int out = -1;  // read end of its stdout

  Holder(const std::string& dir, const std::string& file) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    const std::string binary = FURIOSA_HOLD_PE_BINARY;
    char* argv[] = {const_cast<char*>(binary.c_str()), const_cast<char*>(dir.c_str()),
                    const_cast<char*>(file.c_str()), nullptr};
    const int rc = ::posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    out = fds[0];
    if (rc != 0) pid = -1;
    try {
      REQUIRE(rc == 0);
      char buf[16] = {};
      std::size_t got = 0;
      while (got < 6) {  // "ready\n"; EOF means it failed to open
        const ssize_t n = ::read(out, buf + got, sizeof buf - 1 - got);
        REQUIRE(n > 0);
        got += static_cast<std::size_t>(n);
      }
      REQUIRE(std::string(buf, 5) == "ready");
    } catch (...) {  // the destructor does not run for a constructor that throws
      kill();
      ::close(out);
      throw;
    }
  }
  void kill() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
  }
  ~Holder() {
    kill();
    if (out >= 0) ::close(out);
  }
};

}  // namespace

TEST_CASE("a PE held by another process is DeviceBusy naming its pid until that process dies",
          "[device][sim][ownership]") {
  const furiosa::test::TempDir lock_dir("ownership-test");  // removed even when a check fails
  const std::string dir = lock_dir.string();
  SimConfig config = fast_config();
  config.lock_dir = dir;
  auto driver = create_sim_driver(config);
  {
    Holder child(dir, "npu0pe0");
    const std::string pid = std::to_string(child.pid);
    const std::string message = error_message([&] { driver->open(DeviceFile::parse("npu0pe0")); }, ErrorCode::DeviceBusy);
    CHECK_THAT(message, Catch::Contains("npu0pe0") && Catch::Contains("process " + pid));
    // The fused range overlaps it too; the other PE is free.
    CHECK_THAT(error_message([&] { driver->open(DeviceFile::parse("npu0pe0-1")); }, ErrorCode::DeviceBusy),
               Catch::Contains("process " + pid));
    auto other = driver->open(DeviceFile::parse("npu0pe1"));
    const CardInfo card = driver->enumerate().at(0);
    REQUIRE(card.pe_holder_pid.size() == 2);
    CHECK(card.pe_busy[0]);
    CHECK(card.pe_holder_pid[0] == child.pid);
    CHECK(card.pe_holder_pid[1] == ::getpid());
    child.kill();  // SIGKILL: no cleanup code runs, the kernel drops the lock
    CHECK(driver->enumerate().at(0).pe_holder_pid[0] == 0);
    auto device = driver->open(DeviceFile::parse("npu0pe0"));
    CHECK(device->file().name() == "npu0pe0");
  }
  // Closed: free again for another process.
  {
    Holder again(dir, "npu0pe0-1");
    CHECK(driver->enumerate().at(0).pe_holder_pid[1] == again.pid);
  }
}

TEST_CASE("every attempt on a PE another process holds names the holder's pid",
          "[device][sim][ownership]") {
  const furiosa::test::TempDir lock_dir("busy-pid-test");  // removed even when a check fails
  const std::string dir = lock_dir.string();
  SimConfig config = fast_config();
  config.lock_dir = dir;
  Holder child(dir, "npu0pe0");  // holds the PE once it says "ready"
  // The holder as messages show it: its pid and command name (hold_pe, alive while it holds).
  const std::string pid = "process " + std::to_string(child.pid) + " 'hold_pe'";
  for (int attempt = 0; attempt < 30; ++attempt) {
    INFO("attempt " << attempt);
    auto driver = create_sim_driver(config);  // a new driver each time, as a new process has
    // The runtime's way in: the spec is resolved against enumerate(), which sees the holder...
    const std::string spec_message = error_message(
        [&] { resolve_device_spec(parse_device_spec("npu0pe0"), driver->enumerate()); }, ErrorCode::DeviceBusy);
    CHECK_THAT(spec_message, Catch::Contains("its cores npu0pe0 are held by " + pid));
    const std::string any_message = error_message(
        [&] { resolve_device_spec(parse_device_spec("warboy(2)*1"), driver->enumerate()); }, ErrorCode::DeviceBusy);
    CHECK_THAT(any_message, Catch::Contains("held cores: npu0pe0 (" + pid + ")"));
    // ...and an open that raced past enumerate() is refused by the lock itself.
    CHECK_THAT(error_message([&] { driver->open(DeviceFile::parse("npu0pe0")); }, ErrorCode::DeviceBusy),
               Catch::Contains("npu0pe0 is held by " + pid));
  }
}

namespace {

/// hold_pe processes started at once on one device file, each with its stdout and stderr on
/// pipes; all killed and reaped on destruction (also when a check fails).
struct Contenders {
  struct Child {
    pid_t pid = -1;
    int out = -1, err = -1;
  };
  std::vector<Child> children;

  Contenders(const std::string& dir, const std::string& file, int n) {
    const std::string binary = FURIOSA_HOLD_PE_BINARY;
    for (int i = 0; i < n; ++i) {
      int out[2], err[2];
      REQUIRE(::pipe(out) == 0);
      REQUIRE(::pipe(err) == 0);
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      posix_spawn_file_actions_adddup2(&actions, out[1], 1);
      posix_spawn_file_actions_adddup2(&actions, err[1], 2);
      posix_spawn_file_actions_addclose(&actions, out[0]);
      posix_spawn_file_actions_addclose(&actions, err[0]);
      char* argv[] = {const_cast<char*>(binary.c_str()), const_cast<char*>(dir.c_str()),
                      const_cast<char*>(file.c_str()), nullptr};
      Child c;
      const int rc = ::posix_spawn(&c.pid, binary.c_str(), &actions, nullptr, argv, environ);
      posix_spawn_file_actions_destroy(&actions);
      ::close(out[1]);
      ::close(err[1]);
      c.out = out[0];
      c.err = err[0];
      if (rc != 0) c.pid = -1;
      children.push_back(c);
      REQUIRE(rc == 0);
    }
  }
  ~Contenders() {
    for (Child& c : children) {
      if (c.pid > 0) {
        ::kill(c.pid, SIGKILL);
        int status = 0;
        ::waitpid(c.pid, &status, 0);
      }
      ::close(c.out);
      ::close(c.err);
    }
  }
  Contenders(const Contenders&) = delete;
  Contenders& operator=(const Contenders&) = delete;

  /// Everything `fd` gives until EOF (a loser exits; the winner's stdout is read only up to
  /// "ready\n", since it never exits).
  static std::string read_all(int fd, std::size_t stop_after = std::string::npos) {
    std::string text;
    char buf[512];
    while (text.size() < stop_after) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
    }
    return text;
  }
};

}  // namespace

TEST_CASE("30 simultaneous opens of one PE: one wins, every loser names the winner's pid",
          "[device][sim][ownership]") {
  const furiosa::test::TempDir lock_dir("race-test");  // removed even when a check fails
  Contenders race(lock_dir.string(), "npu0pe0", 30);
  // Each child either prints "ready" (and holds the PE until killed) or exits with one error
  // line; nothing here depends on timing: a loser's flock failed while the winner held the lock,
  // and the winner never lets go.
  pid_t winner = -1;
  std::vector<std::string> refusals;
  for (auto& c : race.children) {
    const std::string out = Contenders::read_all(c.out, 6);
    if (out == "ready\n") {
      CHECK(winner == -1);
      winner = c.pid;
      continue;
    }
    refusals.push_back(Contenders::read_all(c.err));
    int status = 0;
    REQUIRE(::waitpid(c.pid, &status, 0) == c.pid);
    c.pid = -1;
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
  }
  REQUIRE(winner > 0);
  REQUIRE(refusals.size() == 29);
  for (const std::string& line : refusals) {
    // The holder's pid, its command name, and its device file once it has published it.
    CHECK_THAT(line,
               Catch::Matches("DeviceBusy: npu0pe0: device busy: npu0pe0 is held by process " +
                              std::to_string(winner) + " '[^']+'( \\(npu0pe0\\))?\n"));
  }
}

TEST_CASE("holders publish executions and busy time, furiosactl top and info show them from another process",
          "[device][sim][ownership][top]") {
  const furiosa::test::TempDir lock_dir("top-test");  // removed even when a check fails
  const std::string dir = lock_dir.string();
  SimConfig config = fast_config();
  config.lock_dir = dir;
  auto driver = create_sim_driver(config);
  auto device = driver->open(DeviceFile::parse("npu0pe1"));
  const AddProgram p = add_program();
  const std::vector<std::vector<std::byte>> inputs{lower(random_values(240, 0, 100, 3), p.shape, DType::UInt8)};
  std::int64_t busy = 0;
  for (int i = 0; i < 20; ++i) {
    ExecutionTiming t;
    run_program(*device, p.program, inputs, &t);
    busy += t.busy_ns();
  }
  // Not synchronisation: the holder republishes its counters on an execution at least 100 ms
  // (steady clock) after its last publish, and a sleep guarantees that much time has passed
  // since the 20th execution's, on any machine.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ExecutionTiming t;
  run_program(*device, p.program, inputs, &t);
  busy += t.busy_ns();
  // Another driver reads only the lock files, as another process would.
  const CardInfo card = create_sim_driver(config)->enumerate().at(0);
  REQUIRE(card.pe_executions.size() == 2);
  CHECK(card.pe_holder_pid[1] == ::getpid());
  CHECK(card.pe_executions[1] == 21);
  CHECK(card.pe_busy_ns[1] == static_cast<std::uint64_t>(busy));
  CHECK(card.pe_executions[0] == 0);

  // furiosactl in a child process while executions keep running here.
  // (No Catch2 assertion on this thread: Catch2's are not thread-safe.)
  std::atomic<bool> stop{false};
  auto loaded = device->load(p.program);
  std::vector<std::byte> output(p.program->outputs.at(0).size_bytes());
  // Executions keep running until furiosactl has exited, so top's interval sees some whatever
  // the speed: the 21 above are published, and any execution completing at least 100 ms after
  // the last publish publishes again. (A scheduler that starves this thread for the whole
  // interval could still leave top no new sample; the interval is 1 s to make that remote.)
  std::thread load([&] {
    const std::vector<std::span<const std::byte>> in{inputs[0]};
    const std::vector<std::span<std::byte>> out{output};
    while (!stop) device->submit(*loaded, in, out)->wait_for(std::chrono::seconds(120));
  });
  struct StopAndJoin {  // also when run_command fails the test
    std::atomic<bool>& stop;
    std::thread& t;
    ~StopAndJoin() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } stopper{stop, load};
  const std::string env = "FURIOSA_SIM_LOCK_DIR='" + dir + "' ";
  const auto top = furiosa::test::run_command(env + FURIOSACTL_BINARY + " --backend sim top --interval 1 --format json");
  const auto info = furiosa::test::run_command(env + FURIOSACTL_BINARY + " --backend sim info");
  stop = true;
  load.join();
  REQUIRE(top.exit_code == 0);
  const auto j = nlohmann::json::parse(top.out);
  REQUIRE(j["pes"].size() == 2);
  CHECK(j["pes"][0]["holder_pid"].is_null());
  CHECK_FALSE(j["pes"][0].contains("utilisation"));
  const auto& pe1 = j["pes"][1];
  CHECK(pe1["name"] == "npu0pe1");
  CHECK(pe1["holder_pid"] == ::getpid());
  CHECK(pe1["utilisation"].template get<double>() > 0);
  CHECK(pe1["utilisation"].template get<double>() <= 1);
  CHECK(pe1["executions_per_s"].template get<double>() > 0);
  CHECK(pe1["executions"].template get<std::uint64_t>() > 21);
  REQUIRE(info.exit_code == 0);
  CHECK_THAT(info.out, Catch::Contains("pe0: -, pe1: pid " + std::to_string(::getpid())));
  loaded.reset();
  device.reset();
}
