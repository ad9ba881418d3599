// A hand-made trace shaped like the runtime's (DESIGN.md, "One inference, end to end"), with
// known, varied durations: the input of the report, table, reader and Chrome trace tests.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "furiosa/profiler/device_execution.h"
#include "furiosa/profiler/span.h"

namespace furiosa::profiler::testing {

/// Spans of `inferences` inferences alternating between host threads 1 and 2 (callers) with
/// workers 3 and 4, on card 0 PE 0 (even inferences) and card 0 PE 1 (odd ones). Each has:
/// Inference > Quantize(op 0), Lower(op 1), Enqueue(flow), Softmax(op 7, external),
/// Unlower(op 8), Dequantize(op 9), and on the NPU Load, Execution > 3 kernels, Store.
/// Times are steady-clock-like ns from `t0`; ids are unique.
inline std::vector<SpanRecord> synthetic_trace(int inferences, std::int64_t t0 = 1'000'000'000,
                                               unsigned seed = 42) {
  std::mt19937 rng(seed);
  auto jitter = [&rng](std::int64_t base) {
    return base + static_cast<std::int64_t>(rng() % static_cast<unsigned>(base / 2 + 1));
  };
  std::vector<SpanRecord> out;
  std::uint64_t next_id = 1;
  std::uint64_t next_flow = 1;
  std::int64_t clock = t0;
  for (int i = 0; i < inferences; ++i) {
    const TraceId trace{0xabc0000000000000ULL + static_cast<std::uint64_t>(i),
                        0x1000ULL + static_cast<std::uint64_t>(i)};
    const std::uint64_t caller = 1 + static_cast<std::uint64_t>(i % 2);
    const std::uint64_t worker = 3 + static_cast<std::uint64_t>(i % 2);
    const std::int32_t pe = i % 2;
    auto host = [&](std::string name, std::int64_t start, std::int64_t end, std::uint64_t parent,
                    std::uint64_t thread) {
      SpanRecord r;
      r.trace_id = trace;
      r.span_id = next_id++;
      r.parent_span_id = parent;
      r.name = std::move(name);
      r.cat = Category::Runtime;
      r.start_ns = start;
      r.end_ns = end;
      r.thread_id = thread;
      return r;
    };

    const std::int64_t start = clock;
    SpanRecord inference = host("Inference", start, 0, 0, caller);
    std::int64_t t = start + jitter(1'000);
    std::vector<SpanRecord> children;
    auto stage = [&](const std::string& name, std::int32_t op, std::int64_t dur) {
      SpanRecord r = host(name, t, t + dur, inference.span_id, worker);
      r.operator_index = op;
      t += dur + jitter(100);
      children.push_back(r);
    };
    stage("Quantize", 0, jitter(20'000));
    stage("Lower", 1, jitter(10'000));
    SpanRecord enqueue = host("Enqueue", t, t + jitter(2'000), inference.span_id, worker);
    enqueue.flow_id = next_flow++;
    t = enqueue.end_ns;
    children.push_back(enqueue);

    // The device's execution, turned into spans the way the runtime does it.
    DeviceExecution e;
    e.card = 0;
    e.pe_index = pe;
    e.execution_index = i / 2;  // per device
    e.dram_base = 0x1000 * (pe + 1);
    e.load_start_ns = t + jitter(500);
    e.load_end_ns = e.load_start_ns + jitter(5'000);
    e.exec_start_ns = e.load_end_ns;
    std::int64_t k = e.exec_start_ns;
    const char* kernels[] = {"LowLevelConv2d", "LowLevelConv2d", "LowLevelAdd"};
    for (int n = 0; n < 3; ++n) {
      const std::int64_t end = k + jitter(n == 2 ? 3'000 : 30'000);
      e.kernels.push_back({kernels[n], k, end, /*operator_index=*/10 + n, /*instruction_index=*/n});
      k = end + jitter(200);  // gaps between kernels: Run < Execution
    }
    e.exec_end_ns = k;
    e.store_start_ns = e.exec_end_ns + jitter(100);
    e.store_end_ns = e.store_start_ns + jitter(4'000);
    std::vector<SpanRecord> device =
        device_execution_spans(e, SpanContext{trace, inference.span_id}, enqueue.flow_id, [&] { return next_id++; });
    // Load, Execution, 3 kernels, Store. Other producers may leave execution_index off kernels:
    // the second kernel has none, so the readers are tested both ways.
    device[3].execution_index = -1;
    t = e.store_end_ns + jitter(1'000);

    // Host operators are numbered 0..N-1 in execution order, as the runtime does.
    stage("Softmax", 2, jitter(8'000));
    stage("Unlower", 3, jitter(10'000));
    stage("Dequantize", 4, jitter(15'000));
    inference.end_ns = t + jitter(500);
    clock = inference.end_ns + jitter(2'000);

    out.push_back(inference);
    for (auto& c : children) out.push_back(c);
    for (auto& d : device) out.push_back(std::move(d));
  }
  return out;
}

}  // namespace furiosa::profiler::testing
