// The simulator's fault injection: the fault spec parser (good and bad specs) and what each
// fault does to a device (error, DMA error, hang + reset, lost). No timed assertions: a hang is
// observed as "not signalled yet", and waits have generous limits.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>

#include "device_test_util.h"
#include "test_support.h"

using namespace furiosa;
using namespace furiosa::device;
using namespace furiosa::device::test;
using namespace std::chrono_literals;

namespace {

std::string parse_error(std::string_view spec) {
  try {
    parse_sim_faults(spec);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(std::string(e.what()).find('\n') == std::string::npos);  // one line
    return e.message();
  }
  FAIL("spec '" << spec << "' was accepted");
  return {};
}

/// One execution of add_program on `device`: its fence, with buffers kept by the caller.
struct Run {
  std::vector<std::byte> in, out;
  std::shared_ptr<Fence> fence;
};

std::unique_ptr<Run> submit(Device& device, const LoadedProgram& loaded, const AddProgram& p) {
  auto r = std::make_unique<Run>();
  r->in = lower(random_values(240, 0, 255, 3), p.shape, DType::UInt8);
  r->out.resize(p.program->outputs[0].size_bytes());
  r->fence = device.submit(loaded, {r->in}, {r->out});
  return r;
}

}  // namespace

TEST_CASE("fault spec parser accepts the documented grammar", "[device][sim][faults]") {
  CHECK(parse_sim_faults("").empty());
  CHECK(parse_sim_faults("  ").empty());
  const SimFaultPlan plan = parse_sim_faults("error:every=100, hang:p=0.001 ,dma:every=500,lost:after=2000,seed=7");
  REQUIRE(plan.rules.size() == 4);
  CHECK(plan.rules[0].kind == SimFaultKind::Error);
  CHECK(plan.rules[0].every == 100);
  CHECK(plan.rules[1].kind == SimFaultKind::Hang);
  CHECK(plan.rules[1].p == 0.001);
  CHECK(plan.rules[2].kind == SimFaultKind::Dma);
  CHECK(plan.rules[2].every == 500);
  CHECK(plan.rules[3].kind == SimFaultKind::Lost);
  CHECK(plan.rules[3].has_after);
  CHECK(plan.rules[3].after == 2000);
  CHECK(plan.seed == 7);
  CHECK(format_sim_faults(plan) == "error:every=100,hang:p=0.001,dma:every=500,lost:after=2000,seed=7");
  CHECK(format_sim_faults(parse_sim_faults(format_sim_faults(plan))) == format_sim_faults(plan));
  CHECK(parse_sim_faults("lost:after=0").rules[0].after == 0);
  CHECK(parse_sim_faults("hang:p=1").rules[0].p == 1.0);
}

TEST_CASE("fault spec parser names the bad item", "[device][sim][faults]") {
  CHECK_THAT(parse_error("error:every=100,boom:every=3"),
             Catch::Contains("'error:every=100,boom:every=3'") && Catch::Contains("item 'boom:every=3'") &&
                 Catch::Contains("unknown fault kind 'boom'"));
  CHECK_THAT(parse_error("error:every=0"), Catch::Contains("item 'error:every=0'") && Catch::Contains(">= 1"));
  CHECK_THAT(parse_error("error:every=-3"), Catch::Contains("every='-3'"));
  CHECK_THAT(parse_error("hang:p=1.5"), Catch::Contains("item 'hang:p=1.5'") && Catch::Contains("[0, 1]"));
  CHECK_THAT(parse_error("hang:p=nan"), Catch::Contains("p='nan'"));
  CHECK_THAT(parse_error("dma"), Catch::Contains("item 'dma'") && Catch::Contains("no ':'"));
  CHECK_THAT(parse_error("dma:every"), Catch::Contains("without '='"));
  CHECK_THAT(parse_error("dma:often=3"), Catch::Contains("unknown trigger 'often'"));
  CHECK_THAT(parse_error("error:every=5,,hang:every=9"), Catch::Contains("item ''") && Catch::Contains("empty"));
  CHECK_THAT(parse_error("lost:after=x1"), Catch::Contains("after='x1'"));
  CHECK_THAT(parse_error("seed=1,seed=2"), Catch::Contains("item 'seed=2'") && Catch::Contains("repeats"));
  CHECK_THAT(parse_error("seed=abc"), Catch::Contains("item 'seed=abc'"));
  CHECK_THAT(parse_error("error:every=99999999999999999999999"), Catch::Contains("not an integer"));
  // Echoed on one line, escaped: a spec cannot forge lines or move the cursor.
  const std::string forged = parse_error("error:every=3\nerror: forged,\x1b[2Jboom:every=1");
  CHECK(forged.find('\n') == std::string::npos);
  CHECK(forged.find('\x1b') == std::string::npos);
  CHECK_THAT(forged, Catch::Contains("'error:every=3\\x0aerror: forged,\\x1b[2Jboom:every=1'") &&
                         Catch::Contains("every='3\\x0aerror: forged'"));
}

TEST_CASE("FURIOSA_SIM_FAULTS configures the built-in simulator", "[device][sim][faults]") {
  furiosa::test::ScopedEnv faults("FURIOSA_SIM_FAULTS", "error:every=3");
  CHECK(sim_config_from_environment().faults.rules.size() == 1);
  faults.set("error:every=3,hang");
  try {
    sim_config_from_environment();
    FAIL("accepted a bad FURIOSA_SIM_FAULTS");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.message(), Catch::StartsWith("FURIOSA_SIM_FAULTS: ") && Catch::Contains("item 'hang'"));
  }
  faults.set(std::nullopt);
  CHECK(sim_config_from_environment().faults.empty());
}

TEST_CASE("injected execution and DMA errors fail only their fences", "[device][sim][faults]") {
  SimConfig config = fast_config();
  config.faults = parse_sim_faults("error:every=3,dma:every=4");
  auto s = open_sim(config);
  const AddProgram p = add_program();
  auto loaded = s.device->load(p.program);
  std::vector<ErrorCode> codes;
  for (int i = 1; i <= 12; ++i) {
    auto r = submit(*s.device, *loaded, p);
    REQUIRE(r->fence->wait_for(120s));
    if (!r->fence->error()) continue;
    const Error e = error_of(r->fence->error());
    CHECK(e.device_file() == "npu0pe0");
    CHECK_THAT(e.message(), Catch::Contains("injected fault"));
    INFO("execution " << i);
    // Counted from 1, as every=N counts: the 3rd execution is "execution 3".
    CHECK_THAT(e.message(), Catch::StartsWith("npu0pe0: execution " + std::to_string(i) + ": "));
    CHECK((i % 3 == 0 || i % 4 == 0));
    if (i % 4 == 0) CHECK_THAT(e.message(), Catch::Contains("DMA error"));
    codes.push_back(e.code());
  }
  CHECK(codes == std::vector<ErrorCode>(6, ErrorCode::DeviceFault));  // 3 6 9 12 | 4 8 (12 is dma)
  const DeviceCounters c = s.device->counters();
  CHECK(c.backend_counters.at("sim.faults.error") == 3);  // 3, 6, 9
  CHECK(c.backend_counters.at("sim.faults.dma") == 3);    // 4, 8, 12
  CHECK(c.executions == 6);
}

TEST_CASE("a hung execution stays unsignalled until reset, which aborts the queue behind it",
          "[device][sim][faults]") {
  SimConfig config = fast_config();
  config.faults = parse_sim_faults("hang:every=2");
  auto s = open_sim(config);
  const AddProgram p = add_program();
  auto loaded = s.device->load(p.program);
  auto first = submit(*s.device, *loaded, p);
  REQUIRE(first->fence->wait_for(120s));
  CHECK_FALSE(first->fence->error());
  auto hung = submit(*s.device, *loaded, p);
  auto behind = submit(*s.device, *loaded, p);
  CHECK_FALSE(hung->fence->wait_for(50ms));  // hangs (no claim about how long)
  CHECK_FALSE(behind->fence->signalled());   // the device takes nothing behind it
  s.device->reset();
  REQUIRE(hung->fence->signalled());
  REQUIRE(behind->fence->signalled());
  CHECK(aborted_by_reset(hung->fence->error()));
  CHECK(aborted_by_reset(behind->fence->error()));
  CHECK(error_of(behind->fence->error()).device_file() == "npu0pe0");
  CHECK(s.device->counters().resets == 1);
  CHECK(s.device->counters().backend_counters.at("sim.faults.hang") == 1);
  // Working again; the 4th execution (3rd taken) succeeds, the 4th taken hangs again.
  auto again = submit(*s.device, *loaded, p);
  REQUIRE(again->fence->wait_for(120s));
  CHECK_FALSE(again->fence->error());
  CHECK(from_bytes(again->out, DType::UInt8) == add_expected(p, random_values(240, 0, 255, 3)));
  auto hangs_again = submit(*s.device, *loaded, p);
  CHECK_FALSE(hangs_again->fence->wait_for(10ms));
  // Closing a hung device fails its execution instead of waiting forever.
  s.device.reset();
  REQUIRE(hangs_again->fence->signalled());
  CHECK(error_of(hangs_again->fence->error()).code() == ErrorCode::SessionClosed);
}

TEST_CASE("a lost device fails every later execution with DeviceNotFound", "[device][sim][faults]") {
  SimConfig config = fast_config();
  config.faults = parse_sim_faults("lost:after=2");
  auto s = open_sim(config);
  const AddProgram p = add_program();
  auto loaded = s.device->load(p.program);
  for (int i = 0; i < 2; ++i) {
    auto r = submit(*s.device, *loaded, p);
    REQUIRE(r->fence->wait_for(120s));
    CHECK_FALSE(r->fence->error());
  }
  auto r = submit(*s.device, *loaded, p);
  REQUIRE(r->fence->wait_for(120s));
  CHECK(error_of(r->fence->error()).code() == ErrorCode::DeviceNotFound);
  CHECK(error_of(r->fence->error()).device_file() == "npu0pe0");
  CHECK_THROWS_MATCHES(submit(*s.device, *loaded, p), Error,
                       Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::DeviceNotFound; }));
  CHECK_THROWS_AS(s.device->reset(), Error);
  CHECK(s.device->counters().backend_counters.at("sim.faults.lost") == 1);
  // Reopening gives a working device (the fault plan counts again from its first execution).
  s.device.reset();
  s.device = s.driver->open(DeviceFile::parse("npu0pe0"));
  auto loaded2 = s.device->load(p.program);
  auto ok = submit(*s.device, *loaded2, p);
  REQUIRE(ok->fence->wait_for(120s));
  CHECK_FALSE(ok->fence->error());
}

TEST_CASE("p faults repeat with the same seed", "[device][sim][faults]") {
  auto pattern = [](std::uint64_t seed) {
    SimConfig config = fast_config();
    config.faults = parse_sim_faults("error:p=0.3");
    config.faults.seed = seed;
    auto s = open_sim(config);
    const AddProgram p = add_program();
    auto loaded = s.device->load(p.program);
    std::string out;
    for (int i = 0; i < 40; ++i) {
      auto r = submit(*s.device, *loaded, p);
      REQUIRE(r->fence->wait_for(120s));
      out += r->fence->error() ? 'x' : '.';
    }
    return out;
  };
  const std::string a = pattern(1);
  CHECK(a == pattern(1));
  CHECK(a.find('x') != std::string::npos);
  CHECK(a.find('.') != std::string::npos);
  CHECK(a != pattern(2));
}

TEST_CASE("counters belong to one open device, never to the process or the driver",
          "[device][sim][faults]") {
  SimConfig config = fast_config();
  config.faults = parse_sim_faults("error:every=2");
  auto a = open_sim(config);
  auto b = open_sim(config);  // a second driver: its own card npu0, so npu0pe0 opens again
  const AddProgram p = add_program();
  auto loaded_a = a.device->load(p.program);
  for (int i = 0; i < 4; ++i) REQUIRE(submit(*a.device, *loaded_a, p)->fence->wait_for(120s));
  const DeviceCounters ca = a.device->counters();
  CHECK(ca.executions == 2);
  CHECK(ca.backend_counters.at("sim.faults.error") == 2);
  a.device->reset();
  CHECK(a.device->counters().resets == 1);
  // Nothing of a's shows on b.
  const DeviceCounters cb = b.device->counters();
  CHECK(cb.executions == 0);
  CHECK(cb.resets == 0);
  CHECK(cb.cycles == 0);
  CHECK(cb.dma_bytes_to_device == 0);
  CHECK(cb.backend_counters.empty());
  // Closing and opening the same file again on a's driver starts from zero too.
  loaded_a.reset();
  a.device.reset();
  a.device = a.driver->open(DeviceFile::parse("npu0pe0"));
  const DeviceCounters again = a.device->counters();
  CHECK(again.executions == 0);
  CHECK(again.resets == 0);
  CHECK(again.dma_bytes_to_device == 0);
  CHECK(again.backend_counters.empty());
}
