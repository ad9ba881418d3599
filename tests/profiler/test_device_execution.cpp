// The device-execution span adapter (device_execution.h): the span tree, ids, attributes and
// the recording path, as the runtime and the tests' synthetic traces use it.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "furiosa/profiler/device_execution.h"
#include "furiosa/profiler/profiler.h"

using namespace furiosa::profiler;

namespace {

/// Card 1, PE 2, execution 9: Load 100..200, Execution 200..700 with two kernels, Store 700..800,
/// one backend interval.
DeviceExecution sample() {
  DeviceExecution e;
  e.card = 1;
  e.pe_index = 2;
  e.execution_index = 9;
  e.dram_base = 0x4000;
  e.load_start_ns = 100;
  e.load_end_ns = 200;
  e.exec_start_ns = 200;
  e.exec_end_ns = 700;
  e.store_start_ns = 700;
  e.store_end_ns = 800;
  e.cycles = 1000;
  e.kernels = {{"LowLevelConv2d", 200, 450, 3, 0, 500}, {"LowLevelAdd", 460, 690, 4, 1, 460}};
  e.backend_intervals = {{"SimOverrun", 800, 900}};
  return e;
}

}  // namespace

TEST_CASE("device execution spans: order, parents, ids and attributes", "[profiler][device_execution]") {
  const SpanContext parent{TraceId{7, 8}, 55};
  std::uint64_t next = 100;
  const auto spans = device_execution_spans(sample(), parent, 42, [&] { return next++; });
  REQUIRE(spans.size() == 6);
  const std::vector<std::string> names = {"Load", "Execution", "LowLevelConv2d", "LowLevelAdd", "Store", "SimOverrun"};
  for (std::size_t i = 0; i < spans.size(); ++i) {
    INFO(names[i]);
    const SpanRecord& s = spans[i];
    CHECK(s.name == names[i]);
    CHECK(s.span_id == 100 + i);  // ids in the documented order
    CHECK(s.trace_id == parent.trace_id);
    CHECK(s.cat == Category::NPU);
    CHECK(s.card == 1);
    CHECK(s.pe_index == 2);
    CHECK(s.execution_index == 9);
    CHECK(s.dram_base == 0x4000);
    CHECK(s.thread_id == 0);
    const bool kernel = i == 2 || i == 3;
    CHECK(s.parent_span_id == (kernel ? spans[1].span_id : parent.span_id));
    CHECK(s.flow_id == (i == 1 ? 42u : 0u));
  }
  CHECK(spans[0].start_ns == 100);
  CHECK(spans[0].end_ns == 200);
  CHECK(spans[1].start_ns == 200);
  CHECK(spans[1].end_ns == 700);
  CHECK(spans[1].cycles == 1000);
  CHECK(spans[2].operator_index == 3);
  CHECK(spans[2].instruction_index == 0);
  CHECK(spans[2].cycles == 500);
  CHECK(spans[3].start_ns == 460);
  CHECK(spans[3].end_ns == 690);
  CHECK(spans[4].start_ns == 700);
  CHECK(spans[4].end_ns == 800);
  CHECK(spans[5].start_ns == 800);
  CHECK(spans[5].end_ns == 900);
  CHECK(spans[0].operator_index == -1);
  CHECK(spans[0].cycles == -1);
}

TEST_CASE("recording a device execution: profiler ids, nothing while paused or without a parent",
          "[profiler][device_execution]") {
  Profiler profiler;
  const SpanContext parent{TraceId{1, 2}, 3};
  record_device_execution(profiler, sample(), parent, 0);
  auto spans = profiler.records();
  REQUIRE(spans.size() == 6);
  for (const auto& s : spans) CHECK(s.span_id != 0);
  record_device_execution(profiler, sample(), SpanContext{}, 0);  // no trace: not recorded
  profiler.pause();
  record_device_execution(profiler, sample(), parent, 0);
  CHECK(profiler.records().size() == 6);
}

TEST_CASE("device execution spans: a modelled kernel's bound and DRAM bytes become span attributes",
          "[profiler][device_execution]") {
  DeviceExecution e = sample();
  e.kernels[1].bound = "dram";
  e.kernels[1].dram_bytes = 6144000;
  e.kernels[1].spill_bytes = 4096000;
  e.kernels[1].weight_load_cycles = 1152;
  std::uint64_t next = 1;
  const auto spans =
      device_execution_spans(e, SpanContext{TraceId{7, 8}, 55}, 0, [&] { return next++; });
  REQUIRE(spans.size() == 6);
  CHECK(spans[2].attributes.empty());  // not modelled: no attributes, no allocation
  using Attributes = std::vector<std::pair<std::string, std::string>>;
  CHECK(spans[3].attributes == Attributes{{"bound", "dram"},
                                          {"dram_bytes", "6144000"},
                                          {"spill_bytes", "4096000"},
                                          {"macs", "0"},
                                          {"bytes", "0"},
                                          {"weight_load_cycles", "1152"}});
}
