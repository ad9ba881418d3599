// A device's three engines on a modelled clock: the host -> device DMA (Load), the PE or fused
// PE (the kernels) and the device -> host DMA (Store). They run concurrently, as a card's DMA
// engines and PEs do, so the Load of a queued execution overlaps the kernels of the one before
// it (docs/timing.md, "An execution"). The simulator places its executions with it
// (device/sim/execution.cpp) and the bench's modelled section its closed-loop schedule
// (tools/src/bench.cpp), so the two follow one rule.
#pragma once

#include <algorithm>
#include <cstdint>

namespace furiosa::device {

/// Where one execution lands on the engines, ns on the timeline's clock.
struct EnginePlacement {
  std::int64_t load_start_ns = 0, load_end_ns = 0;
  std::int64_t exec_start_ns = 0, exec_end_ns = 0;
  std::int64_t store_start_ns = 0, store_end_ns = 0;
  /// load_start_ns, or the previous execution's Store end when this Load overlapped it: the
  /// start of the part of [load_start_ns, store_end_ns] no earlier execution covers
  /// (ExecutionTiming::busy_start_ns).
  std::int64_t busy_start_ns = 0;
};

/// The three engines of one device, each the ns at which it is next free. Not thread-safe: the
/// owner serializes place().
struct EngineTimeline {
  std::int64_t load_free_ns = 0;
  std::int64_t pe_free_ns = 0;
  std::int64_t store_free_ns = 0;

  /// Places an execution ready at `ready_ns` whose Load, kernels and Store take `load_ns`,
  /// `exec_ns` and `store_ns` (each >= 0): the Load from max(ready, the Load engine's free
  /// time), the kernels from max(Load end, the PE's free time), the Store from max(kernels' end,
  /// the Store engine's free time); each engine is then busy until that stage ends. Call in the
  /// order the executions are taken, so that each engine runs them in that order.
  EnginePlacement place(std::int64_t ready_ns, std::int64_t load_ns, std::int64_t exec_ns,
                        std::int64_t store_ns) {
    EnginePlacement p;
    p.load_start_ns = std::max(ready_ns, load_free_ns);
    p.busy_start_ns = std::max(p.load_start_ns, store_free_ns);
    p.load_end_ns = load_free_ns = p.load_start_ns + load_ns;
    p.exec_start_ns = std::max(p.load_end_ns, pe_free_ns);
    p.exec_end_ns = pe_free_ns = p.exec_start_ns + exec_ns;
    p.store_start_ns = std::max(p.exec_end_ns, store_free_ns);
    p.store_end_ns = store_free_ns = p.store_start_ns + store_ns;
    return p;
  }
};

}  // namespace furiosa::device
