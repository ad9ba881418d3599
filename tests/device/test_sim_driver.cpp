// The simulator driver: enumeration, exclusive open, memory, submit validation, faults, timing,
// pacing, concurrency and shutdown.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <thread>

#include "device_test_util.h"

using namespace furiosa;
using namespace furiosa::device;
using namespace furiosa::device::test;

namespace {

}  // namespace

TEST_CASE("Sim enumerate: one card, two PEs", "[device][sim]") {
  auto driver = create_sim_driver(fast_config());
  CHECK(driver->name() == "sim");
  const auto cards = driver->enumerate();
  REQUIRE(cards.size() == 1);
  const CardInfo& card = cards[0];
  CHECK(card.index == 0);
  CHECK(card.arch == "warboy");
  CHECK(card.serial == "SIM0000");
  CHECK_THAT(card.firmware_version, Catch::StartsWith("sim-"));
  CHECK(card.driver_version == "sim");
  CHECK(card.numa_node == 0);
  CHECK(card.pe_count == 2);
  CHECK(card.busname.size() == std::string("0000:00:00.0").size());
  CHECK(card.pe_busy == std::vector<bool>{false, false});
  std::vector<std::string> files;
  for (const auto& f : card.device_files) files.push_back(f.name());
  CHECK(files == std::vector<std::string>{"npu0pe0", "npu0pe1", "npu0pe0-1"});

  auto device = driver->open(DeviceFile::parse("npu0pe1"));
  CHECK(driver->enumerate()[0].pe_busy == std::vector<bool>{false, true});
  device.reset();
  CHECK(driver->enumerate()[0].pe_busy == std::vector<bool>{false, false});

  SimConfig big = fast_config();
  big.cards = 2;
  big.pes_per_card = 1;
  const auto two = create_sim_driver(big)->enumerate();
  REQUIRE(two.size() == 2);
  CHECK(two[1].serial == "SIM0001");
  CHECK(two[0].busname != two[1].busname);
  CHECK(two[1].device_files == std::vector<DeviceFile>{{1, 0, 0}});
}

TEST_CASE("Sim open is exclusive", "[device][sim]") {
  auto driver = create_sim_driver(fast_config());
  auto fused = driver->open(DeviceFile::parse("npu0pe0-1"));
  CHECK(fused->file() == DeviceFile{0, 0, 1});
  CHECK(driver->enumerate()[0].pe_busy == std::vector<bool>{true, true});

  std::string busy =
      error_message([&] { driver->open(DeviceFile::parse("npu0pe0")); }, ErrorCode::DeviceBusy);
  CHECK_THAT(busy, Catch::Contains("npu0pe0") && Catch::Contains("npu0pe0-1"));
  error_message([&] { driver->open(DeviceFile::parse("npu0pe1")); }, ErrorCode::DeviceBusy);
  error_message([&] { driver->open(DeviceFile::parse("npu0pe0-1")); }, ErrorCode::DeviceBusy);

  fused.reset();
  auto pe0 = driver->open(DeviceFile::parse("npu0pe0"));
  auto pe1 = driver->open(DeviceFile::parse("npu0pe1"));  // disjoint: fine
  busy =
      error_message([&] { driver->open(DeviceFile::parse("npu0pe0-1")); }, ErrorCode::DeviceBusy);
  CHECK_THAT(busy, Catch::Contains("npu0pe0-1") && Catch::Contains("npu0pe0"));
  pe0.reset();
  pe1.reset();
  CHECK_NOTHROW(driver->open(DeviceFile::parse("npu0pe0-1")));

  std::string missing =
      error_message([&] { driver->open(DeviceFile::parse("npu1pe0")); }, ErrorCode::DeviceNotFound);
  CHECK_THAT(missing, Catch::Contains("npu1pe0") && Catch::Contains("npu0"));
  missing =
      error_message([&] { driver->open(DeviceFile::parse("npu0pe2")); }, ErrorCode::DeviceNotFound);
  CHECK_THAT(missing, Catch::Contains("npu0pe2") && Catch::Contains("pe1"));
  error_message([&] { driver->open(DeviceFile{0, 1, 0}); }, ErrorCode::DeviceNotFound);

  // Separate drivers are separate machines.
  auto other = create_sim_driver(fast_config());
  auto again = driver->open(DeviceFile::parse("npu0pe0"));
  CHECK_NOTHROW(other->open(DeviceFile::parse("npu0pe0")));
}

TEST_CASE("Sim device outliving its driver still releases cleanly", "[device][sim]") {
  auto driver = create_sim_driver(fast_config());
  auto device = driver->open(DeviceFile::parse("npu0pe0"));
  auto p = add_program();
  auto loaded = device->load(p.program);
  driver.reset();
  auto x = random_values(240, 0, 255, 3);
  auto out = run_program(*device, p.program, {lower(x, p.shape, DType::UInt8)});
  CHECK(from_bytes(out[0], DType::UInt8) == add_expected(p, x));
  CHECK_NOTHROW(device.reset());
}

TEST_CASE("Sim memory: round trip and bounds", "[device][sim][memory]") {
  SimConfig config = fast_config();
  config.dram_bytes = 1 << 20;
  auto s = open_sim(config);
  Device& dev = *s.device;

  DeviceBuffer a = dev.allocate(1000);
  DeviceBuffer b = dev.allocate(3000);
  CHECK(a.size == 1000);
  CHECK(b.size == 3000);
  CHECK((b.address >= a.address + a.size || a.address >= b.address + b.size));

  std::vector<std::byte> data(1000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7 + 1);
  dev.write(a.address, data);
  std::vector<std::byte> back(1000);
  dev.read(a.address, back);
  CHECK(back == data);
  std::vector<std::byte> middle(10);
  dev.read(a.address + 500, middle);
  CHECK(std::equal(middle.begin(), middle.end(), data.begin() + 500));
  std::vector<std::byte> fresh(3000, std::byte{0xFF});
  dev.read(b.address, fresh);
  CHECK(std::all_of(fresh.begin(), fresh.end(), [](std::byte v) { return v == std::byte{0}; }));

  const DeviceCounters c = dev.counters();
  CHECK(c.dma_bytes_to_device == 1000);
  CHECK(c.dma_bytes_to_host == 1000 + 10 + 3000);

  std::string msg =
      error_message([&] { dev.write(a.address + 990, data); }, ErrorCode::DeviceFault);
  CHECK_THAT(msg, Catch::Contains("npu0pe0") && Catch::Contains(fmt_hex(a.address + 990)));
  error_message([&] { dev.read(a.address + 1, back); }, ErrorCode::DeviceFault);
  error_message([&] { dev.read(config.dram_bytes + 5, middle); }, ErrorCode::DeviceFault);
  error_message([&] { dev.write(~std::uint64_t{0} - 3, middle); }, ErrorCode::DeviceFault);
  error_message([&] { dev.allocate(config.dram_bytes + 1); }, ErrorCode::DeviceFault);
  error_message([&] { dev.release({a.address + 1, 10}); }, ErrorCode::DeviceFault);

  dev.release(a);
  error_message([&] { dev.write(a.address, data); }, ErrorCode::DeviceFault);
  error_message([&] { dev.release(a); }, ErrorCode::DeviceFault);

  // Exhaustion and reuse: fill the card, free, allocate again.
  std::vector<DeviceBuffer> chunks;
  try {
    for (;;) chunks.push_back(dev.allocate(64 * 1024));
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::DeviceFault);
    CHECK_THAT(e.message(), Catch::Contains("exhausted"));
  }
  CHECK(chunks.size() >= 14);
  for (const auto& chunk : chunks) dev.release(chunk);
  CHECK_NOTHROW(dev.release(dev.allocate(512 * 1024)));

  // Buffers of another device on the same card are not reachable.
  auto other = s.driver->open(DeviceFile::parse("npu0pe1"));
  error_message([&] { other->read(b.address, middle); }, ErrorCode::DeviceFault);
  error_message([&] { other->release(b); }, ErrorCode::DeviceFault);
}

TEST_CASE("Sim submit validates counts and sizes", "[device][sim]") {
  auto s = open_sim();
  auto p = add_program();
  auto loaded = s.device->load(p.program);
  CHECK(&loaded->program() == p.program.get());
  std::vector<std::byte> x(p.program->inputs[0].size_bytes());
  std::vector<std::byte> out(240);
  std::vector<std::byte> short_x(x.size() - 1);

  std::string msg =
      error_message([&] { s.device->submit(*loaded, {short_x}, {out}); }, ErrorCode::InvalidInput);
  CHECK_THAT(msg, Catch::Contains("input 0") && Catch::Contains(std::to_string(x.size())) &&
                      Catch::Contains(std::to_string(short_x.size())));
  std::vector<std::byte> long_out(241);
  msg = error_message([&] { s.device->submit(*loaded, {x}, {long_out}); }, ErrorCode::InvalidInput);
  CHECK_THAT(msg, Catch::Contains("output 0") && Catch::Contains("240") && Catch::Contains("241"));
  error_message([&] { s.device->submit(*loaded, {}, {out}); }, ErrorCode::InvalidInput);
  error_message([&] { s.device->submit(*loaded, {x, x}, {out}); }, ErrorCode::InvalidInput);
  error_message([&] { s.device->submit(*loaded, {x}, {}); }, ErrorCode::InvalidInput);
  CHECK(s.device->counters().executions == 0);  // nothing was queued

  // A program loaded on another device is refused.
  auto other = s.driver->open(DeviceFile::parse("npu0pe1"));
  auto foreign = other->load(p.program);
  error_message([&] { s.device->submit(*foreign, {x}, {out}); }, ErrorCode::InvalidArgument);

  // The next valid submission runs with execution index 0.
  auto fence = s.device->submit(*loaded, {x}, {out});
  fence->wait();
  CHECK_FALSE(fence->error());
  CHECK(fence->timing().execution_index == 0);
}

TEST_CASE("Sim load checks that the program fits", "[device][sim]") {
  SimConfig config = fast_config();
  config.dram_bytes = 4096;
  auto s = open_sim(config);
  auto program = std::make_shared<isa::Program>();
  program->name = "huge";
  program->dram_bytes = 8192;
  error_message([&] { s.device->load(program); }, ErrorCode::DeviceFault);
  program->dram_bytes = 16;
  program->constants.resize(32);
  error_message([&] { s.device->load(program); }, ErrorCode::DeviceFault);
  error_message([&] { s.device->load(nullptr); }, ErrorCode::InvalidArgument);
  // A released program frees its region.
  program->constants.clear();
  program->dram_bytes = 4096;
  for (int i = 0; i < 3; ++i) CHECK_NOTHROW(s.device->load(program));
}

TEST_CASE("Sim kernel fault fails the fence, not the process", "[device][sim]") {
  auto s = open_sim();
  ProgramBuilder b("faulty");
  const Shape shape{1, 1, 2, 40};
  isa::TensorRef x = b.activation(DType::UInt8, shape, isa::Layout::LoweredNCHW);
  isa::TensorRef y = b.activation(DType::UInt8, shape, isa::Layout::LoweredNCHW);
  // Inside the region (isa::verify passes), but of another shape than the Add's other input.
  isa::TensorRef other = b.activation(DType::UInt8, {1, 1, 2, 8}, isa::Layout::LoweredNCHW);
  b.kernel(isa::KernelKind::Reshape, {x}, {b.activation(DType::UInt8, {80}, isa::Layout::Linear)},
           isa::ReshapeParams{}, "fine");
  b.kernel(isa::KernelKind::Add, {x, other}, {y}, isa::AddParams{}, "broken_add");
  auto program = b.finish({x}, {y});
  auto loaded = s.device->load(program);
  std::vector<std::byte> in(x.size_bytes()), out(y.size_bytes());
  auto fence = s.device->submit(*loaded, {in}, {out});
  REQUIRE(fence->wait_for(std::chrono::seconds(120)));
  Error e = error_of(fence->error());
  CHECK(e.code() == ErrorCode::DeviceFault);
  CHECK_THAT(e.message(), Catch::Contains("npu0pe0") && Catch::Contains("instruction 1") &&
                              Catch::Contains("LowLevelAdd") && Catch::Contains("broken_add"));
  CHECK(s.device->counters().executions == 0);

  // Mismatched params and an input outside the region are refused at load (isa::verify), naming
  // the kernel's field; nothing runs.
  ProgramBuilder b2("mismatch");
  isa::TensorRef x2 = b2.activation(DType::UInt8, shape, isa::Layout::LoweredNCHW);
  isa::TensorRef y2 = b2.activation(DType::UInt8, shape, isa::Layout::LoweredNCHW);
  b2.kernel(isa::KernelKind::Conv2d, {x2}, {y2}, isa::MaxPoolParams{}, "wrong_params");
  auto program2 = b2.finish({x2}, {y2});
  CHECK_THAT(error_message([&] { s.device->load(program2); }, ErrorCode::DeviceFault),
             Catch::Contains("kernels[0].params: not the parameters of a LowLevelConv2d"));

  auto bad_io = std::make_shared<isa::Program>(*program2);
  bad_io->kernels.clear();
  bad_io->inputs[0].address = bad_io->dram_bytes;  // one past the end
  CHECK_THAT(error_message([&] { s.device->load(bad_io); }, ErrorCode::DeviceFault),
             Catch::Contains("inputs[0]: bytes [") && Catch::Contains("lie outside the program's DRAM region"));

  // The device keeps working.
  auto p = add_program();
  auto x4 = random_values(240, 0, 255, 5);
  auto out4 = run_program(*s.device, p.program, {lower(x4, p.shape, DType::UInt8)});
  CHECK(from_bytes(out4[0], DType::UInt8) == add_expected(p, x4));
}

TEST_CASE("Sim timing: ordered, modelled, deterministic", "[device][sim][timing]") {
  SimConfig config = fast_config();
  auto p = add_program();
  auto x = random_values(240, 0, 255, 9);
  const auto input = lower(x, p.shape, DType::UInt8);

  auto run_on = [&](std::string_view file) {
    auto s = open_sim(config, file);
    std::vector<ExecutionTiming> timings(2);
    for (auto& t : timings) run_program(*s.device, p.program, {input}, &t);
    return std::pair{timings, s.device->counters()};
  };
  auto [timings, counters] = run_on("npu0pe0");
  for (const ExecutionTiming& t : timings) {
    CHECK(t.load_start_ns <= t.load_end_ns);
    CHECK(t.load_end_ns <= t.exec_start_ns);
    CHECK(t.exec_start_ns <= t.exec_end_ns);
    CHECK(t.exec_end_ns <= t.store_start_ns);
    CHECK(t.store_start_ns <= t.store_end_ns);
    REQUIRE(t.kernels.size() == 2);
    std::int64_t previous = t.exec_start_ns;
    for (std::size_t k = 0; k < t.kernels.size(); ++k) {
      const KernelTiming& kt = t.kernels[k];
      CHECK(kt.instruction_index == static_cast<std::int32_t>(k));
      CHECK(kt.operator_index == p.program->kernels[k].operator_index);
      CHECK(kt.kind == p.program->kernels[k].kind);
      CHECK(kt.start_ns >= previous);
      CHECK(kt.end_ns > kt.start_ns);
      CHECK(kt.end_ns <= t.exec_end_ns);
      previous = kt.end_ns;
    }
    // Modelled durations: one DMA each way, data-movement kernels on one PE.
    const auto dma = [&](double bytes) {
      return config.dma_latency_ns +
             static_cast<std::int64_t>(std::ceil(bytes / config.pcie_bytes_per_ns));
    };
    CHECK(t.load_end_ns - t.load_start_ns == dma(static_cast<double>(input.size())));
    CHECK(t.store_end_ns - t.store_start_ns == dma(240));
    const std::uint64_t add_bytes = 3 * p.program->inputs[0].size_bytes();
    CHECK(t.kernels[0].cycles ==
          config.kernel_overhead_cycles +
              static_cast<std::uint64_t>(std::ceil(add_bytes / config.sram_bytes_per_cycle_per_pe)));
    CHECK(t.kernels[0].end_ns - t.kernels[0].start_ns ==
          static_cast<std::int64_t>(std::ceil(t.kernels[0].cycles / config.clock_ghz)));
  }
  CHECK(timings[0].execution_index == 0);
  CHECK(timings[1].execution_index == 1);
  CHECK(timings[1].load_start_ns >= timings[0].load_end_ns);  // in order on the device's engines
  CHECK(timings[1].exec_start_ns >= timings[0].exec_end_ns);
  CHECK(timings[1].store_start_ns >= timings[0].store_end_ns);
  for (std::size_t k = 0; k < 2; ++k)
    CHECK(timings[0].kernels[k].cycles == timings[1].kernels[k].cycles);
  CHECK(counters.executions == 2);
  CHECK(counters.cycles == 2 * (timings[0].kernels[0].cycles + timings[0].kernels[1].cycles));
  CHECK(timings[0].kernel_cycles == timings[0].kernels[0].cycles + timings[0].kernels[1].cycles);
  CHECK(counters.task_cycles == timings[0].task_cycles + timings[1].task_cycles);
  CHECK(timings[0].iowait_ns() == timings[0].total_ns() - timings[0].run_ns());
  CHECK(timings[0].iowait_ns() > 0);  // two DMAs around the kernels
  CHECK(counters.dma_bytes_to_device ==
        2 * (p.program->constants.size() + input.size()));  // load() counted once per run_program
  CHECK(counters.dma_bytes_to_host == 2 * 240);

  // A fresh device gives the same cycles; a fused device is never slower.
  auto [again, counters_again] = run_on("npu0pe0");
  CHECK(counters_again.cycles == counters.cycles);
  auto [fused, fused_counters] = run_on("npu0pe0-1");
  CHECK(fused_counters.cycles > 0);
}

TEST_CASE("Sim timing of MAC kernels follows the MAC rate", "[device][sim][timing]") {
  // A 1x1 conv with 64 -> 64 channels on a 40 x 40 image: 6.5 M MACs.
  ProgramBuilder b("conv");
  const Shape xs{1, 64, 40, 40}, ys{1, 64, 40, 40};
  isa::Conv2dParams cp;
  cp.weight = b.constant(DType::Int8, {64, 64, 1, 1}, random_8bit(64 * 64, DType::Int8, 1));
  cp.w_scale = {0.01f};
  cp.w_zero_point = {0};
  cp.x = {0.05f, 0};
  cp.y = {1.0f, 0};
  isa::TensorRef x = b.activation(DType::UInt8, xs, isa::Layout::LoweredNCHW);
  isa::TensorRef y = b.activation(DType::UInt8, ys, isa::Layout::LoweredNCHW);
  b.kernel(isa::KernelKind::Conv2d, {x}, {y}, cp);
  auto program = b.finish({x}, {y});
  const std::uint64_t macs = isa::kernel_macs(program->kernels[0]);
  CHECK(macs == 64ull * 64 * 40 * 40);
  const SimConfig config = fast_config();
  const auto input = lower(random_8bit(64 * 40 * 40, DType::UInt8, 2), xs, DType::UInt8);
  for (const char* file : {"npu0pe0", "npu0pe0-1"}) {
    auto s = open_sim(config, file);
    const double pes = s.device->file().pe_count();
    ExecutionTiming t;
    run_program(*s.device, program, {input}, &t);
    // Width 40 is padded to 64 (array_align 32); channels are multiples of 32.
    const double aligned = 64.0 * 64 * 40 * 64;
    const auto compute = static_cast<std::uint64_t>(std::ceil(aligned / (config.macs_per_cycle_per_pe * pes)));
    const double traffic = 2.0 * x.size_bytes();  // activations in and out
    const auto sram = static_cast<std::uint64_t>(std::ceil(traffic / (config.sram_bytes_per_cycle_per_pe * pes)));
    // The weights move into the MAC slices before the MACs start (not overlapped).
    const auto weights =
        static_cast<std::uint64_t>(std::ceil(64 * 64 / (config.sram_bytes_per_cycle_per_pe * pes)));
    const std::uint64_t exchange =
        pes > 1 ? static_cast<std::uint64_t>(std::ceil(y.size_bytes() / config.fused_exchange_bytes_per_cycle)) : 0;
    CHECK(t.kernels[0].cycles ==
          config.kernel_overhead_cycles + exchange + weights + std::max(compute, sram));
    CHECK(t.macs == macs);
    CHECK(t.mac_utilization() > 0.0);
    CHECK(t.mac_utilization() < 1.0);
  }
}

TEST_CASE("Sim pacing: completion no earlier than the modelled end", "[device][sim][timing]") {
  SimConfig config;  // pacing on by default
  REQUIRE(config.pacing);
  config.dma_latency_ns = 2'000'000;  // 2 ms per transfer makes the modelled time visible
  auto s = open_sim(config);
  auto p = add_program();
  auto loaded = s.device->load(p.program);
  std::vector<std::byte> x(p.program->inputs[0].size_bytes());
  std::vector<std::vector<std::byte>> outs(3, std::vector<std::byte>(240));
  std::vector<std::shared_ptr<Fence>> fences;
  const auto before = std::chrono::steady_clock::now();
  for (auto& out : outs) fences.push_back(s.device->submit(*loaded, {x}, {out}));
  for (auto& f : fences) {
    f->wait();
    const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count();
    CHECK_FALSE(f->error());
    CHECK(now >= f->timing().store_end_ns);
    CHECK(f->timing().store_end_ns - f->timing().load_start_ns >= 4'000'000);
  }
  // Each engine (Load DMA, PE, Store DMA) takes the executions in order, one at a time: three
  // 2 ms Loads one after the other, then the last 2 ms Store.
  for (std::size_t i = 1; i < fences.size(); ++i) {
    const auto& a = fences[i - 1]->timing();
    const auto& b = fences[i]->timing();
    CHECK(b.load_start_ns >= a.load_end_ns);
    CHECK(b.exec_start_ns >= a.exec_end_ns);
    CHECK(b.store_start_ns >= a.store_end_ns);
  }
  CHECK(fences[2]->timing().store_end_ns - fences[0]->timing().load_start_ns >= 8'000'000);
  CHECK(std::chrono::steady_clock::now() - before >= std::chrono::milliseconds(8));
}

TEST_CASE("Sim timeline: a queued execution's Load overlaps the kernels and Store before it",
          "[device][sim][timing]") {
  SimConfig config;
  config.pacing = false;  // modelled time only: nothing waits for it
  // A 1000 s DMA: the second execution is placed long before the first one's modelled Load
  // ends, however slow the host, so the overlap does not depend on the host's speed.
  config.dma_latency_ns = 1'000'000'000'000;
  auto s = open_sim(config);
  auto p = add_program();
  auto loaded = s.device->load(p.program);
  std::vector<std::byte> x(p.program->inputs[0].size_bytes());
  std::vector<std::byte> y0(240), y1(240);
  auto f0 = s.device->submit(*loaded, {x}, {y0});
  f0->wait();
  auto f1 = s.device->submit(*loaded, {x}, {y1});
  f1->wait();
  REQUIRE_FALSE(f0->error());
  REQUIRE_FALSE(f1->error());
  const auto& a = f0->timing();
  const auto& b = f1->timing();
  // The second Load starts when the first ends, while the first execution's kernels and Store
  // still run; its kernels wait for its Load and the PE, its Store for them and the first Store.
  CHECK(b.load_start_ns == a.load_end_ns);
  CHECK(b.load_start_ns < a.store_end_ns);
  CHECK(b.exec_start_ns >= a.exec_end_ns);
  CHECK(b.exec_start_ns == b.load_end_ns);
  CHECK(b.store_start_ns == std::max(b.exec_end_ns, a.store_end_ns));
  CHECK(b.store_end_ns - a.load_start_ns <
        4 * (a.load_end_ns - a.load_start_ns));  // not 2 x (Load + Store)
  CHECK(b.store_end_ns - b.store_start_ns == a.store_end_ns - a.store_start_ns);
  // The device's busy time counts the overlap once: the union of the two executions' spans.
  CHECK(a.busy_ns() == a.total_ns());
  CHECK(b.busy_start_ns == a.store_end_ns);
  CHECK(a.busy_ns() + b.busy_ns() == b.store_end_ns - a.load_start_ns);
}

TEST_CASE("Sim handles many submissions from several threads", "[device][sim]") {
  SimConfig config = fast_config();
  config.queue_capacity = 4;  // small, so submitters block on a full queue
  auto s = open_sim(config);
  auto p = add_program();
  auto loaded = s.device->load(p.program);
  constexpr int kThreads = 4, kPerThread = 40;
  std::vector<std::thread> threads;
  std::atomic<int> correct{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::vector<std::int32_t>> xs;
      std::vector<std::vector<std::byte>> ins, outs;
      std::vector<std::shared_ptr<Fence>> fences;
      for (int i = 0; i < kPerThread; ++i) {
        xs.push_back(random_values(240, 0, 255, static_cast<std::uint32_t>(t * 1000 + i)));
        ins.push_back(lower(xs.back(), p.shape, DType::UInt8));
        outs.emplace_back(240);
      }
      for (int i = 0; i < kPerThread; ++i) {
        fences.push_back(s.device->submit(*loaded, {ins[static_cast<std::size_t>(i)]},
                                          {outs[static_cast<std::size_t>(i)]}));
      }
      for (int i = 0; i < kPerThread; ++i) {
        const auto u = static_cast<std::size_t>(i);
        if (!fences[u]->wait_for(std::chrono::seconds(120)) || fences[u]->error()) continue;
        if (from_bytes(outs[u], DType::UInt8) == add_expected(p, xs[u])) ++correct;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(correct == kThreads * kPerThread);
  CHECK(s.device->counters().executions == kThreads * kPerThread);
}

TEST_CASE("Destroying a device signals every queued fence", "[device][sim]") {
  SimConfig config;
  config.dma_latency_ns = 1'000'000;  // paced: each execution takes >= 2 ms
  auto s = open_sim(config);
  auto p = add_program();
  auto loaded = s.device->load(p.program);
  const auto x = random_values(240, 0, 255, 21);
  const auto input = lower(x, p.shape, DType::UInt8);
  std::vector<std::vector<std::byte>> outs(20, std::vector<std::byte>(240));
  std::vector<std::shared_ptr<Fence>> fences;
  for (auto& out : outs) fences.push_back(s.device->submit(*loaded, {input}, {out}));
  CHECK_FALSE(fences.back()->signalled());
  loaded.reset();  // queued executions keep the program alive
  s.device.reset();
  for (std::size_t i = 0; i < fences.size(); ++i) {
    INFO(i);
    CHECK(fences[i]->signalled());
    CHECK_FALSE(fences[i]->error());
    CHECK(from_bytes(outs[i], DType::UInt8) == add_expected(p, x));
  }
  // The cores are free again.
  CHECK_NOTHROW(s.driver->open(DeviceFile::parse("npu0pe0")));
}
