// A hand-made trace shaped like the runtime's (DESIGN.md, "One inference, end to end"), with
// known, varied durations: the input of the report, table, reader and Chrome trace tests.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

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
    auto npu = [&](std::string name, std::int64_t start, std::int64_t end, std::uint64_t parent) {
      SpanRecord r;
      r.trace_id = trace;
      r.span_id = next_id++;
      r.parent_span_id = parent;
      r.name = std::move(name);
      r.cat = Category::NPU;
      r.start_ns = start;
      r.end_ns = end;
      r.card = 0;
      r.pe_index = pe;
      r.execution_index = i / 2;  // per device
      r.dram_base = 0x1000 * (pe + 1);
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

    SpanRecord load = npu("Load", t + jitter(500), 0, inference.span_id);
    load.end_ns = load.start_ns + jitter(5'000);
    SpanRecord exec = npu("Execution", load.end_ns, 0, inference.span_id);
    exec.flow_id = enqueue.flow_id;
    std::int64_t k = exec.start_ns;
    const char* kernels[] = {"LowLevelConv2d", "LowLevelConv2d", "LowLevelAdd"};
    std::vector<SpanRecord> kernel_spans;
    for (int n = 0; n < 3; ++n) {
      SpanRecord kr = npu(kernels[n], k, k + jitter(n == 2 ? 3'000 : 30'000), exec.span_id);
      kr.instruction_index = n;
      kr.operator_index = 10 + n;  // ONNX node index of the kernel
      kr.execution_index = -1;  // the runtime sets it on kernels too; tests both
      if (n != 1) kr.execution_index = exec.execution_index;
      k = kr.end_ns + jitter(200);  // gaps between kernels: Run < Execution
      kernel_spans.push_back(kr);
    }
    exec.end_ns = k;
    SpanRecord store = npu("Store", exec.end_ns + jitter(100), 0, inference.span_id);
    store.end_ns = store.start_ns + jitter(4'000);
    t = store.end_ns + jitter(1'000);

    // Host operators are numbered 0..N-1 in execution order, as the runtime does.
    stage("Softmax", 2, jitter(8'000));
    stage("Unlower", 3, jitter(10'000));
    stage("Dequantize", 4, jitter(15'000));
    inference.end_ns = t + jitter(500);
    clock = inference.end_ns + jitter(2'000);

    out.push_back(inference);
    for (auto& c : children) out.push_back(c);
    out.push_back(load);
    out.push_back(exec);
    for (auto& kr : kernel_spans) out.push_back(kr);
    out.push_back(store);
  }
  return out;
}

}  // namespace furiosa::profiler::testing
