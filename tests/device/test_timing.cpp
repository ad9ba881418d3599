// The simulator's timing model (device/sim/timing.h, docs/timing.md): determinism, MAC scaling
// and alignment losses, SRAM residency and DRAM streaming, fused vs single PE, DMA cost, the
// per-execution figures, timing-only mode and host-side concurrency of one device.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "device_test_util.h"
#include "timing.h"

using namespace furiosa;
using namespace furiosa::device;
using namespace furiosa::device::test;

namespace {

/// A quantized conv kernel (no bias) of the given shapes in a program of its own.
struct ConvProgram {
  std::shared_ptr<const isa::Program> program;
  Shape x_shape;
};

ConvProgram conv_program(std::int64_t c, std::int64_t m, std::int64_t h, std::int64_t w, std::int64_t k,
                         std::int64_t group = 1) {
  ProgramBuilder b("conv");
  const std::int64_t pad = k / 2;
  const Shape xs{1, c, h, w}, ys{1, m, h, w};
  isa::Conv2dParams cp;
  cp.weight = b.constant(DType::Int8, {m, c / group, k, k},
                         random_8bit(static_cast<std::size_t>(m * (c / group) * k * k), DType::Int8, 7));
  cp.w_scale = {0.01f};
  cp.w_zero_point = {0};
  cp.x = {0.05f, 0};
  cp.y = {1.0f, 0};
  cp.pads = {pad, pad, pad, pad};
  cp.group = group;
  isa::TensorRef x = b.activation(DType::UInt8, xs, isa::Layout::LoweredNCHW);
  isa::TensorRef y = b.activation(DType::UInt8, ys, isa::Layout::LoweredNCHW);
  b.kernel(group == c && group == m && group > 1 ? isa::KernelKind::DepthwiseConv2d : isa::KernelKind::Conv2d,
           {x}, {y}, cp);
  return {b.finish({x}, {y}), xs};
}

sim::KernelCost cost_of(const ConvProgram& p, const SimConfig& config, int pes) {
  return sim::model_program(config, *p.program, pes).kernels.at(0);
}

}  // namespace

TEST_CASE("Timing model: the same program gives the same cycles", "[device][sim][timing]") {
  const SimConfig config = fast_config();
  const auto p = conv_program(64, 64, 56, 56, 3);
  const auto a = sim::model_program(config, *p.program, 1);
  const auto b = sim::model_program(config, *p.program, 1);
  CHECK(a.kernel_cycles == b.kernel_cycles);
  CHECK(a.kernels.at(0).cycles == b.kernels.at(0).cycles);

  // And on a device, two executions with different inputs give the same cycles.
  auto s = open_sim(config);
  ExecutionTiming t1, t2;
  run_program(*s.device, p.program, {lower(random_8bit(64 * 56 * 56, DType::UInt8, 1), p.x_shape, DType::UInt8)}, &t1);
  run_program(*s.device, p.program, {lower(random_8bit(64 * 56 * 56, DType::UInt8, 2), p.x_shape, DType::UInt8)}, &t2);
  CHECK(t1.kernel_cycles == t2.kernel_cycles);
  CHECK(t1.kernel_cycles == a.kernel_cycles);
  CHECK(t1.task_cycles == t2.task_cycles);
}

TEST_CASE("Timing model: doubling a compute-bound conv's MACs doubles its compute cycles",
          "[device][sim][timing]") {
  const SimConfig config = fast_config();
  const auto small = cost_of(conv_program(64, 64, 32, 32, 3), config, 1);
  const auto big = cost_of(conv_program(128, 64, 32, 32, 3), config, 1);  // 2x input channels
  REQUIRE(big.macs == 2 * small.macs);
  for (const auto& c : {small, big}) {  // compute-bound: neither memory term is larger
    CHECK(c.compute_cycles > c.sram_cycles);
    CHECK(c.compute_cycles > c.dram_cycles);
  }
  CHECK(big.compute_cycles == 2 * small.compute_cycles);
  CHECK(big.cycles - config.kernel_overhead_cycles == 2 * (small.cycles - config.kernel_overhead_cycles));
  // 3x3, 64 -> 64, 32 x 32: every dimension is a multiple of 32, so no padding.
  CHECK(small.aligned_macs == small.macs);
  CHECK(small.compute_cycles ==
        static_cast<std::uint64_t>(std::ceil(static_cast<double>(small.macs) / config.macs_per_cycle_per_pe)));
}

TEST_CASE("Timing model: a MAC kernel loads its weights before its MACs apply them",
          "[device][sim][timing]") {
  const SimConfig config = fast_config();
  // 3x3, 256 -> 256: 589,824 bytes of weights; compute-bound on both planes (widths multiples
  // of 32, so the MACs scale with the plane).
  const auto small = cost_of(conv_program(256, 256, 16, 32, 3), config, 1);
  const auto large = cost_of(conv_program(256, 256, 32, 64, 3), config, 1);
  const auto load =
      static_cast<std::uint64_t>(std::ceil(589824.0 / config.sram_bytes_per_cycle_per_pe));
  for (const auto& c : {small, large}) {
    CHECK(c.weight_load_cycles == load);
    CHECK(c.compute_cycles > c.sram_cycles);
    // Not hidden behind the compute, unlike the activations' SRAM traffic.
    CHECK(c.cycles == config.kernel_overhead_cycles + c.weight_load_cycles + c.compute_cycles);
    CHECK(c.bound == sim::KernelBound::Compute);
  }
  // Four times the plane: four times the MACs, the same weights loaded once.
  CHECK(large.compute_cycles == 4 * small.compute_cycles);
  CHECK(large.cycles - config.kernel_overhead_cycles - load ==
        4 * (small.cycles - config.kernel_overhead_cycles - load));
  // A fused PE loads each half of the weights into its own slices.
  const auto fused = cost_of(conv_program(256, 256, 16, 32, 3), config, 2);
  CHECK(fused.weight_load_cycles == load / 2);
  // Vector kernels have no weights to load; a depthwise conv loads its few.
  const auto dw = cost_of(conv_program(64, 64, 32, 32, 3, 64), config, 1);
  CHECK(dw.weight_load_cycles ==
        static_cast<std::uint64_t>(std::ceil(64.0 * 9 / config.sram_bytes_per_cycle_per_pe)));
}

TEST_CASE("Timing model: channels and width below multiples of 32 lose array utilisation",
          "[device][sim][timing]") {
  const SimConfig config = fast_config();
  // 3 input channels cost as much array time as 32 (the stem of an image model).
  CHECK(cost_of(conv_program(3, 64, 32, 32, 3), config, 1).compute_cycles ==
        cost_of(conv_program(32, 64, 32, 32, 3), config, 1).compute_cycles);
  // Width 33 is padded to 64.
  const auto w33 = cost_of(conv_program(64, 64, 8, 33, 1), config, 1);
  const auto w64 = cost_of(conv_program(64, 64, 8, 64, 1), config, 1);
  CHECK(w33.aligned_macs == w64.aligned_macs);
  CHECK(w33.macs < w64.macs);
  // A depthwise 3x3 conv: 9 taps padded to 32 stand where input channels would be.
  const auto dw = cost_of(conv_program(64, 64, 32, 32, 3, 64), config, 1);
  CHECK(dw.macs == 64ull * 32 * 32 * 9);
  CHECK(dw.aligned_macs == 64ull * 32 * 32 * 32);
}

TEST_CASE("Timing model: weights that do not fit in SRAM are streamed from DRAM",
          "[device][sim][timing]") {
  SimConfig config = fast_config();
  const auto p = conv_program(256, 256, 7, 7, 3);  // 589,824 bytes of weights
  const std::uint64_t weights = 256ull * 256 * 9;
  const auto fits = sim::model_program(config, *p.program, 1);
  CHECK(fits.weight_bytes == weights);
  CHECK(fits.resident_weight_bytes == weights);
  CHECK(fits.kernels.at(0).dram_bytes == 0);
  CHECK(fits.kernels.at(0).dram_cycles == 0);

  config.sram_bytes_per_pe = 512 * 1024;  // too small for one PE, enough for a fused pair
  const auto single = sim::model_program(config, *p.program, 1);
  CHECK(single.resident_weight_bytes == 0);
  CHECK(single.kernels.at(0).dram_bytes == weights);
  // One of two PEs gets half of the card's DRAM bandwidth.
  const double bytes_per_cycle = config.dram_bytes_per_ns / config.clock_ghz / 2;
  CHECK(single.kernels.at(0).dram_cycles ==
        static_cast<std::uint64_t>(std::ceil(static_cast<double>(weights) / bytes_per_cycle)));
  CHECK(single.kernels.at(0).cycles >= single.kernels.at(0).dram_cycles);
  const auto fused = sim::model_program(config, *p.program, 2);
  CHECK(fused.resident_weight_bytes == weights);
  CHECK(fused.kernels.at(0).dram_bytes == 0);
}

TEST_CASE("Timing model: a fused PE has lower latency than a single PE", "[device][sim][timing]") {
  const SimConfig config = fast_config();
  const auto p = conv_program(128, 128, 56, 56, 3);
  const auto input = lower(random_8bit(128 * 56 * 56, DType::UInt8, 3), p.x_shape, DType::UInt8);
  ExecutionTiming single, fused;
  {
    auto s = open_sim(config, "npu0pe0");
    run_program(*s.device, p.program, {input}, &single);
  }
  {
    auto s = open_sim(config, "npu0pe0-1");
    run_program(*s.device, p.program, {input}, &fused);
  }
  CHECK(fused.total_ns() < single.total_ns());
  CHECK(fused.kernel_cycles < single.kernel_cycles);
  CHECK(fused.peak_macs_per_cycle == 2 * single.peak_macs_per_cycle);
  // Not twice as fast: the PEs exchange their output halves after the conv.
  CHECK(2 * fused.kernel_cycles > single.kernel_cycles);
  CHECK(single.mac_utilization() > 0.5);
  CHECK(single.mac_utilization() <= 1.0);
}

TEST_CASE("Timing model: DMA time grows with the bytes moved", "[device][sim][timing]") {
  const SimConfig config = fast_config();
  std::int64_t previous = -1;
  for (std::uint64_t bytes : {0ull, 1ull, 4096ull, 150528ull, 1204224ull}) {
    const std::int64_t ns = sim::dma_duration_ns(config, bytes);
    CHECK(ns > previous);
    CHECK(ns == config.dma_latency_ns +
                    static_cast<std::int64_t>(std::ceil(static_cast<double>(bytes) / config.pcie_bytes_per_ns)));
    previous = ns;
  }
  // Load of a bigger input takes longer on a device.
  auto s = open_sim(config);
  ExecutionTiming small, big;
  const auto ps = conv_program(32, 32, 16, 32, 1);
  const auto pb = conv_program(32, 32, 64, 32, 1);
  run_program(*s.device, ps.program, {std::vector<std::byte>(ps.program->inputs[0].size_bytes())}, &small);
  run_program(*s.device, pb.program, {std::vector<std::byte>(pb.program->inputs[0].size_bytes())}, &big);
  CHECK(big.load_end_ns - big.load_start_ns > small.load_end_ns - small.load_start_ns);
  CHECK(big.dma_bytes_to_device == 4 * small.dma_bytes_to_device);
}

TEST_CASE("Timing mode models the same time without computing the kernels", "[device][sim][timing]") {
  SimConfig config = fast_config();
  const auto p = conv_program(64, 64, 28, 28, 3);
  const auto input = lower(random_8bit(64 * 28 * 28, DType::UInt8, 4), p.x_shape, DType::UInt8);
  ExecutionTiming functional, timed;
  std::vector<std::vector<std::byte>> computed;
  {
    auto s = open_sim(config);
    computed = run_program(*s.device, p.program, {input}, &functional);
  }
  config.mode = SimMode::Timing;
  auto s = open_sim(config);
  auto loaded = s.device->load(p.program);
  std::vector<std::byte> out(p.program->outputs[0].size_bytes(), std::byte{0x5A});
  auto fence = s.device->submit(*loaded, {input}, {out});
  REQUIRE(fence->wait_for(std::chrono::seconds(120)));
  REQUIRE_FALSE(fence->error());
  timed = fence->timing();
  CHECK(timed.kernel_cycles == functional.kernel_cycles);
  CHECK(timed.total_ns() == functional.total_ns());
  CHECK(timed.backend_counters.at("sim.host_compute_ns") == 0);  // nothing was computed on the host
  CHECK(functional.backend_counters.at("sim.host_compute_ns") > 0);
  // The output buffer is untouched; the functional run did write a result there.
  CHECK(std::all_of(out.begin(), out.end(), [](std::byte b) { return b == std::byte{0x5A}; }));
  CHECK(computed[0] != out);
}

TEST_CASE("Kernel statistics are counted per device, only when asked for", "[device][sim][counters]") {
  SimConfig config = fast_config();
  const auto p = conv_program(64, 64, 28, 28, 3);
  const auto input = lower(random_8bit(64 * 28 * 28, DType::UInt8, 4), p.x_shape, DType::UInt8);
  const std::string conv = std::string("sim.kernels.") + std::string(isa::kernel_name(p.program->kernels[0].kind));
  {
    auto off = open_sim(config);
    run_program(*off.device, p.program, {input});
    CHECK(off.device->counters().backend_counters.count(conv + ".calls") == 0);
  }
  config.kernel_stats = true;
  // Two devices of one driver: each counts its own executions (nothing is process-wide).
  SimSession s = open_sim(config);
  auto other = s.driver->open(DeviceFile::parse("npu0pe1"));
  for (int i = 0; i < 3; ++i) run_program(*s.device, p.program, {input});
  run_program(*other, p.program, {input});
  const auto convs = static_cast<std::int64_t>(
      std::count_if(p.program->kernels.begin(), p.program->kernels.end(),
                    [&](const isa::Kernel& k) { return k.kind == p.program->kernels[0].kind; }));
  const auto counters = s.device->counters().backend_counters;
  CHECK(counters.at(conv + ".calls") == 3 * convs);
  CHECK(counters.at(conv + ".macs") == 3 * static_cast<std::int64_t>(isa::kernel_macs(p.program->kernels[0])));
  CHECK(counters.at(conv + ".host_ns") > 0);
  CHECK(other->counters().backend_counters.at(conv + ".calls") == convs);
}

TEST_CASE("Executions of one device computed concurrently keep their own results",
          "[device][sim][concurrency]") {
  SimConfig config = fast_config();
  config.compute_threads = 4;
  auto s = open_sim(config);
  const auto p = conv_program(32, 32, 16, 32, 3);
  auto loaded = s.device->load(p.program);
  constexpr int kRuns = 24;
  std::vector<std::vector<std::byte>> inputs, outputs, expected;
  for (int i = 0; i < kRuns; ++i) {
    inputs.push_back(lower(random_8bit(32 * 16 * 32, DType::UInt8, static_cast<std::uint32_t>(100 + i)),
                           p.x_shape, DType::UInt8));
  }
  {
    SimConfig one = fast_config();
    one.compute_threads = 1;
    auto ref = open_sim(one);
    for (const auto& in : inputs) expected.push_back(run_program(*ref.device, p.program, {in})[0]);
  }
  outputs.assign(kRuns, std::vector<std::byte>(p.program->outputs[0].size_bytes()));
  std::vector<std::shared_ptr<Fence>> fences;
  for (int i = 0; i < kRuns; ++i) {
    fences.push_back(s.device->submit(*loaded, {inputs[static_cast<std::size_t>(i)]},
                                      {outputs[static_cast<std::size_t>(i)]}));
  }
  std::vector<ExecutionTiming> timings;
  for (auto& f : fences) {
    REQUIRE(f->wait_for(std::chrono::seconds(120)));
    REQUIRE_FALSE(f->error());
    timings.push_back(f->timing());
  }
  for (int i = 0; i < kRuns; ++i) {
    INFO("execution " << i);
    CHECK(outputs[static_cast<std::size_t>(i)] == expected[static_cast<std::size_t>(i)]);
  }
  // One device timeline, in submission order: each engine (Load DMA, PE, Store DMA) takes one
  // execution at a time, so no two executions' kernels overlap (a Load may overlap the kernels
  // before it: EngineTimeline).
  for (std::size_t i = 1; i < timings.size(); ++i) {
    CHECK(timings[i].execution_index == i);
    CHECK(timings[i].load_start_ns >= timings[i - 1].load_end_ns);
    CHECK(timings[i].exec_start_ns >= timings[i - 1].exec_end_ns);
    CHECK(timings[i].store_start_ns >= timings[i - 1].store_end_ns);
  }
}

namespace {

/// A residual block x -> conv3x3 -> y1 -> conv3x3 -> y2 -> Add(y2, x): x stays live across both
/// convs (the shortcut), as in ResNet's basic block. c channels of h x w, lowered uint8.
std::shared_ptr<const isa::Program> residual_program(std::int64_t c, std::int64_t h,
                                                     std::int64_t w) {
  ProgramBuilder b("residual");
  const Shape s{1, c, h, w};
  const auto conv_params = [&](int seed) {
    isa::Conv2dParams cp;
    cp.weight = b.constant(DType::Int8, {c, c, 3, 3},
                           random_8bit(static_cast<std::size_t>(c * c * 9), DType::Int8, seed));
    cp.w_scale = {0.01f};
    cp.w_zero_point = {0};
    cp.x = {0.05f, 0};
    cp.y = {1.0f, 0};
    cp.pads = {1, 1, 1, 1};
    return cp;
  };
  const isa::Conv2dParams p1 = conv_params(11), p2 = conv_params(12);
  const isa::TensorRef x = b.activation(DType::UInt8, s, isa::Layout::LoweredNCHW);
  const isa::TensorRef y1 = b.activation(DType::UInt8, s, isa::Layout::LoweredNCHW);
  const isa::TensorRef y2 = b.activation(DType::UInt8, s, isa::Layout::LoweredNCHW);
  const isa::TensorRef y = b.activation(DType::UInt8, s, isa::Layout::LoweredNCHW);
  b.kernel(isa::KernelKind::Conv2d, {x}, {y1}, p1);
  b.kernel(isa::KernelKind::Conv2d, {y1}, {y2}, p2);
  b.kernel(isa::KernelKind::Add, {y2, x}, {y}, isa::AddParams{});
  return b.finish({x}, {y});
}

}  // namespace

TEST_CASE("Timing model: activations that exceed SRAM spill to DRAM and cost time",
          "[device][sim][timing]") {
  SimConfig config = fast_config();
  // 64 x 256 x 256 lowered uint8: 4 MiB per tensor; x, y1 and y2 live at once: 12 MiB.
  const auto p = residual_program(64, 256, 256);
  const std::uint64_t tensor = p->inputs.at(0).size_bytes();
  REQUIRE(tensor == 4ull << 20);
  const auto fits = sim::model_program(config, *p, 1);  // 16 MiB per PE
  CHECK(fits.activation_bytes == 3 * tensor);
  CHECK(fits.spill_bytes == 0);
  for (const auto& k : fits.kernels) CHECK(k.spill_read_bytes + k.spill_write_bytes == 0);

  config.sram_bytes_per_pe = 10ull << 20;  // room for two of the three live tensors
  const auto spills = sim::model_program(config, *p, 1);
  // The second conv needs y1 and y2 on chip: the shortcut x, read next by the Add, is evicted
  // (written to DRAM once) and the Add reads it back.
  CHECK(spills.kernels.at(0).spill_write_bytes == 0);
  CHECK(spills.kernels.at(1).spill_write_bytes == tensor);
  CHECK(spills.kernels.at(2).spill_read_bytes == tensor);
  CHECK(spills.spill_bytes == 2 * tensor);
  CHECK(spills.kernel_cycles > fits.kernel_cycles);
  // The Add reads the shortcut back from DRAM at a single PE's share of the card's bandwidth,
  // before it can use it: the spill's time adds to the kernel's, where streamed weights overlap.
  const double bytes_per_cycle = config.dram_bytes_per_ns / config.clock_ghz / 2;
  const auto read_back =
      static_cast<std::uint64_t>(std::ceil(static_cast<double>(tensor) / bytes_per_cycle));
  const auto& add = spills.kernels.at(2);
  CHECK(add.spill_cycles == read_back);
  CHECK(add.dram_cycles == 0);  // no weights
  CHECK(add.cycles ==
        config.kernel_overhead_cycles + std::max(add.compute_cycles, add.sram_cycles) + read_back);
  CHECK(spills.kernels.at(1).spill_cycles > 0);  // the eviction of the shortcut
  CHECK(spills.kernels.at(1).cycles > fits.kernels.at(1).cycles);
  CHECK(spills.kernels.at(2).bound == sim::KernelBound::Dram);
  CHECK(std::string(sim::bound_name(spills.kernels.at(2).bound)) == "dram");
  // Deterministic.
  CHECK(sim::model_program(config, *p, 1).kernel_cycles == spills.kernel_cycles);

  // A fused PE holds every activation on both PEs, so it spills the same way.
  CHECK(sim::model_program(config, *p, 2).spill_bytes == 2 * tensor);
}

TEST_CASE(
    "Timing model: an output too large for SRAM with one reader right after it is tiled into it",
    "[device][sim][timing]") {
  SimConfig config = fast_config();
  config.sram_bytes_per_pe = 6ull << 20;
  // x (4 MiB) -> conv -> y1 (4 MiB) -> conv -> y2: y1 does not fit beside x, and its only reader
  // is the next conv, so it is made tile by tile into it (depth-first) and never touches DRAM.
  ProgramBuilder b("chain");
  const Shape s{1, 64, 256, 256};
  isa::Conv2dParams cp;
  cp.weight = b.constant(DType::Int8, {64, 64, 1, 1}, random_8bit(64 * 64, DType::Int8, 5));
  cp.w_scale = {0.01f};
  cp.w_zero_point = {0};
  cp.x = {0.05f, 0};
  cp.y = {1.0f, 0};
  const isa::TensorRef x = b.activation(DType::UInt8, s, isa::Layout::LoweredNCHW);
  const isa::TensorRef y1 = b.activation(DType::UInt8, s, isa::Layout::LoweredNCHW);
  const isa::TensorRef y2 = b.activation(DType::UInt8, s, isa::Layout::LoweredNCHW);
  b.kernel(isa::KernelKind::Conv2d, {x}, {y1}, cp);
  b.kernel(isa::KernelKind::Conv2d, {y1}, {y2}, cp);
  const auto chain = sim::model_program(config, *b.finish({x}, {y2}), 1);
  CHECK(chain.kernels.at(0).spill_write_bytes == 0);
  CHECK(chain.kernels.at(1).spill_read_bytes == 0);
  // y2 is a program output and has no reader on the device: it is written to DRAM as made.
  CHECK(chain.kernels.at(1).spill_write_bytes == 0);  // x is dead by then: y2 fits
  CHECK(chain.spill_bytes == 0);
}

TEST_CASE("Timing model: kernel timings carry the bound and DRAM bytes", "[device][sim][timing]") {
  SimConfig config = fast_config();
  config.mode = SimMode::Timing;  // the figures only: 4.8 GMACs need not be computed
  config.sram_bytes_per_pe = 10ull << 20;
  const auto p = residual_program(64, 256, 256);
  auto s = open_sim(config);
  ExecutionTiming t;
  run_program(*s.device, p, {std::vector<std::byte>(p->inputs.at(0).size_bytes())}, &t);
  REQUIRE(t.kernels.size() == 3);
  CHECK(t.kernels.at(0).bound == "compute");
  CHECK(t.kernels.at(1).spill_bytes == 4ull << 20);
  CHECK(t.kernels.at(2).bound == "dram");
  CHECK(t.kernels.at(2).spill_bytes == 4ull << 20);
  CHECK(t.kernels.at(2).dram_bytes == 4ull << 20);
  // The convolutions' weight loads, as the cost model has them; the Add loads none.
  const auto cost = sim::model_program(config, *p, 1);
  for (std::size_t k = 0; k < 3; ++k)
    CHECK(t.kernels.at(k).weight_load_cycles == cost.kernels.at(k).weight_load_cycles);
  CHECK(t.kernels.at(0).weight_load_cycles > 0);
  CHECK(t.kernels.at(2).weight_load_cycles == 0);
}
