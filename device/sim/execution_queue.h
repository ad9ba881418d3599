// Private to the simulator: the execution queue of one open device and its compute threads.
//
// Executions are queued in submission order (bounded by SimConfig::queue_capacity; submit blocks
// when full). A compute thread (SimConfig::compute_threads of them) takes the next one and, still
// holding the queue lock, decides whether it faults (FaultInjector) and places it on the
// device's modelled timeline (start = max(now, end of the previous execution)), so executions
// never overlap on the timeline and the timeline follows submission order. It then runs it
// (execution.h) outside the lock; two executions may be computed at once on the host.
//
// Faults: an error or DMA fault fails the fence without computing; a hang keeps the fence
// unsignalled and stops the device taking work until reset() (which aborts the hung and queued
// executions) or close; a lost device fails that and every later execution with DeviceNotFound
// and refuses submits and resets.
//
// Affinity: the thread that took the last execution takes the next one when it is waiting for
// work; the others take it only while that thread is busy. The next execution then finds the
// program's constants and the region's activations in that core's caches; waking the
// longest-waiting thread instead (a condition variable's usual order) alternates the threads
// of a synchronous caller, each execution on the core that did not run the last one: on a
// 2-vCPU AMD EPYC VM whose cores share no cache, two compute threads without intra-op
// parallelism ran MobileNetV2 10% slower than one that way, 2-6% with this rule (noisy
// machine; docs/devices.md).
//
// Intra-op parallelism (SimConfig::intra_op): a compute thread waiting for work also waits for
// the fork-join jobs of the kernels its sibling computes (fork_join.h) and helps with them first.
//
// Test gate (SimConfig::gate_path): while nothing exists at the path, executions stay queued.
// Load-time warm-ups are not held, and a closing queue ignores the gate and drains.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "execution.h"
#include "fork_join.h"
#include "furiosa/device/device.h"
#include "furiosa/device/sim.h"
#include "sim_counters.h"
#include "sim_faults.h"

namespace furiosa::device::sim {

/// The in-order execution queue of one open device file. Thread-safe. The threads start in the
/// constructor and are joined by close() (or the destructor).
class ExecutionQueue {
 public:
  /// A queue for device `file` configured by `config`, counting into `counters`; both must
  /// outlive the queue.
  ExecutionQueue(const SimConfig& config, const DeviceFile& file, SimCounters& counters);
  /// close().
  ~ExecutionQueue();
  ExecutionQueue(const ExecutionQueue&) = delete;
  ExecutionQueue& operator=(const ExecutionQueue&) = delete;

  /// Queues `task` (its index is assigned here), blocking while the queue is full. Throws
  /// Error(SessionClosed) when the queue is closing and DeviceNotFound when the device is lost.
  void submit(Task task);

  /// Functional mode, when SimConfig::warm_up asks for it: every compute thread runs `program`
  /// once on whatever its region holds, off the timeline (no execution index, counters, spans
  /// or fence), so that the kernels' per-thread scratch, the regions' pages and the caches are
  /// ready before the first real execution. Blocks until all threads have run it. A kernel that
  /// fails here is left to fail (and be reported) in the real execution.
  void warm_up(const std::shared_ptr<const SimLoadedProgram>& program);

  /// Aborts the hung execution and every queued one (their fences fail with
  /// reset_abort_error()) and lets the device take work again; an execution being computed
  /// finishes normally. Counts the reset. Throws DeviceNotFound when the device is lost.
  void reset();

  /// Stops accepting work, runs every queued execution (a hung device instead fails its hung and
  /// queued executions with Error(SessionClosed)) and joins the threads. Idempotent.
  void close();

 private:
  struct WarmUp;

  /// Whether warm_up() runs anything (SimConfig::mode and SimConfig::warm_up).
  bool warm_up_enabled() const noexcept;
  /// Runs one warm-up on the calling compute thread.
  static void run_warm_up(WarmUp& w);
  /// The compute thread `me`: runs its warm-ups and the queued executions in order until closing
  /// and drained.
  void worker_loop(std::size_t me);
  /// True when SimConfig::gate_path is set and nothing exists at it (not followed if a link).
  bool gate_closed() const;
  /// Removes the hung execution and every queued one (mu_ held); returns their fences.
  std::vector<std::shared_ptr<Fence>> take_unfinished_locked();
  /// Whether compute thread `me` may take the queue's head now (mu_ held): something is queued,
  /// and `me` took the last execution, or that thread is not waiting for work (see Affinity).
  bool may_take_locked(std::size_t me) const;
  /// Recomputes attention_ (mu_ held) and wakes stand-by threads when it is set.
  void update_attention_locked();
  /// Error(SessionClosed) for an execution of a device closed while hung.
  std::exception_ptr closed_while_hung() const;

  const SimConfig& config_;
  const DeviceFile file_;
  const std::string name_;  // file_.name()
  SimCounters& counters_;

  std::mutex mu_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::deque<Task> queue_;                  // (mu_)
  bool stopping_ = false;                   // (mu_)
  std::uint64_t next_execution_index_ = 0;  // (mu_)
  /// Per compute thread: load-time warm-ups it has still to run (mu_).
  std::vector<std::deque<std::shared_ptr<WarmUp>>> warm_ups_;
  /// Per compute thread: blocked waiting for work (mu_).
  std::vector<bool> waiting_;
  /// The compute thread that took the last execution; none yet when >= waiting_.size() (mu_).
  std::size_t last_runner_ = static_cast<std::size_t>(-1);
  EngineTimeline timeline_;  // the device's engines on the modelled clock (mu_)

  // Fault injection state (mu_).
  std::condition_variable hang_cv_;  // wakes the hung thread on reset() or close
  FaultInjector faults_;
  bool hung_ = false;              // an execution hangs: nothing more is taken
  std::optional<Task> hung_task_;  // the hung execution (its fence), until reset or close
  std::uint64_t reset_generation_ = 0;

  ForkJoin fork_join_{mu_, not_empty_};  // the compute threads' intra-op jobs
  /// Some compute thread has work of its own (an execution to take, a warm-up, closing): threads
  /// standing by for intra-op jobs return to the queue. Set by update_attention_locked().
  std::atomic<bool> attention_{false};

  std::vector<std::thread> workers_;  // started last, in the constructor body
};

}  // namespace furiosa::device::sim
