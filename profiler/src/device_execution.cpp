// device_execution.h: the NPU spans of one device execution.
#include "furiosa/profiler/device_execution.h"

#include <string>
#include <utility>

#include "furiosa/profiler/profiler.h"

namespace furiosa::profiler {

namespace {

/// Calls `emit(SpanRecord)` for each span of `e` in the documented order.
template <class NextId, class Emit>
void for_each_span(const DeviceExecution& e, const SpanContext& parent, std::uint64_t flow_id, NextId&& next_id,
                   Emit&& emit) {
  auto npu = [&](std::string_view name, std::int64_t start, std::int64_t end, std::uint64_t parent_id) {
    SpanRecord r;
    r.trace_id = parent.trace_id;
    r.span_id = next_id();
    r.parent_span_id = parent_id;
    r.name = std::string(name);
    r.cat = Category::NPU;
    r.start_ns = start;
    r.end_ns = end;
    r.card = e.card;
    r.pe_index = e.pe_index;
    r.execution_index = e.execution_index;
    r.dram_base = e.dram_base;
    return r;
  };
  emit(npu("Load", e.load_start_ns, e.load_end_ns, parent.span_id));
  SpanRecord exec = npu("Execution", e.exec_start_ns, e.exec_end_ns, parent.span_id);
  exec.flow_id = flow_id;
  exec.cycles = e.cycles;
  const std::uint64_t exec_id = exec.span_id;
  emit(std::move(exec));
  for (const DeviceKernel& k : e.kernels) {
    SpanRecord r = npu(k.name, k.start_ns, k.end_ns, exec_id);
    r.operator_index = k.operator_index;
    r.instruction_index = k.instruction_index;
    r.cycles = k.cycles;
    if (!k.bound.empty()) {
      r.attributes = {{"bound", std::string(k.bound)},
                      {"dram_bytes", std::to_string(k.dram_bytes)},
                      {"spill_bytes", std::to_string(k.spill_bytes)},
                      {"macs", std::to_string(k.macs)},
                      {"bytes", std::to_string(k.bytes)},
                      {"weight_load_cycles", std::to_string(k.weight_load_cycles)}};
    }
    if (!k.in_shapes.empty()) r.attributes.emplace_back("in_shapes", std::string(k.in_shapes));
    if (!k.out_shapes.empty()) r.attributes.emplace_back("out_shapes", std::string(k.out_shapes));
    emit(std::move(r));
  }
  emit(npu("Store", e.store_start_ns, e.store_end_ns, parent.span_id));
  for (const DeviceInterval& i : e.backend_intervals) emit(npu(i.name, i.start_ns, i.end_ns, parent.span_id));
}

}  // namespace

std::vector<SpanRecord> device_execution_spans(const DeviceExecution& execution, const SpanContext& parent,
                                               std::uint64_t flow_id, const std::function<std::uint64_t()>& next_id) {
  std::vector<SpanRecord> out;
  out.reserve(3 + execution.kernels.size() + execution.backend_intervals.size());
  for_each_span(execution, parent, flow_id, next_id, [&](SpanRecord r) { out.push_back(std::move(r)); });
  return out;
}

void record_device_execution(Profiler& profiler, const DeviceExecution& execution, const SpanContext& parent,
                             std::uint64_t flow_id) {
  if (!profiler.is_recording() || !parent.valid()) return;
  for_each_span(
      execution, parent, flow_id, [&] { return profiler.next_span_id(); },
      [&](SpanRecord r) { profiler.record(std::move(r)); });
}

}  // namespace furiosa::profiler
