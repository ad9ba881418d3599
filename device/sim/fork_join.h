// Private to the simulator: intra-op parallelism. A kernel computed on one of a device's compute
// threads (SimConfig::compute_threads) may split its work into chunks that the device's idle
// compute threads help with (SimConfig::intra_op), so a single inference uses the cores the
// runner leaves idle, as ONNX Runtime's intra-op threads do.
//
// While an execution computes its kernels (a Section), the device's idle compute threads stand
// by: they spin briefly between jobs, then sleep, so that a job posted by parallel_for() is taken
// within microseconds rather than after a thread wake-up (tens of microseconds on a virtual
// machine, as much as a small kernel). parallel_for() on a compute thread posts the job when a
// thread stands by, runs chunks itself, and returns when every chunk is done; otherwise (nobody
// standing by, another job running, not a compute thread: tests, sim-bench's direct runs) it runs
// the whole range inline. Chunks write disjoint outputs, so the results never depend on which
// thread ran which chunk or how many helped: outputs are the same bytes with intra-op on or off.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>

namespace furiosa::device::sim {

/// A chunk of a parallel loop: indices [begin, end) of the job, with the job's context.
using ParallelBody = void (*)(void* ctx, std::int64_t begin, std::int64_t end);

/// Runs body(ctx, b, e) over [0, n) in chunks of `grain` indices (the last one shorter), on the
/// calling thread and, when it is a compute thread of a device with intra-op parallelism on, the
/// device's compute threads standing by. Returns when all chunks are done; rethrows the first
/// exception a chunk threw. Bodies must only write state that belongs to their chunk.
void parallel_for(std::int64_t n, std::int64_t grain, ParallelBody body, void* ctx);

/// For tests, process-wide (off by default): parallel_for() on a thread bound to no ForkJoin
/// runs the chunks one at a time, last first, instead of the whole range at once, so that a
/// kernel whose chunks are not independent (one writing bytes another owns, a chunk reading
/// what an earlier one wrote) gives different bytes deterministically.
void set_reverse_inline_chunks(bool on);

/// The chunk size (grain) of a parallel_for over `n` items: about an eighth of them, so that the
/// threads that help balance their loads, and at least `at_least`, so that a chunk's fixed
/// cost (a plane to pad, weights to prepare) stays small next to its work.
constexpr std::int64_t chunk_grain(std::int64_t n, std::int64_t at_least) {
  return n / 8 > at_least ? n / 8 : at_least;
}

/// The fork-join state of one device's compute threads. Idle threads wait on the owner's
/// (the execution queue's) mutex and condition variable, which a Section's start notifies.
/// Thread-safe.
class ForkJoin {
 public:
  /// What a helper thread remembers: the last job it helped (it helps each job once).
  struct Helper {
    std::uint64_t seen = 0;
  };

  /// Brackets an execution's kernels on the calling compute thread (nothing when the thread is
  /// not bound to a ForkJoin): idle compute threads stand by while it lasts.
  class Section {
   public:
    Section();
    ~Section();
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;

   private:
    ForkJoin* fj_;
  };

  /// `mu` and `cv`: the owner's lock and the condition variable its idle threads wait on.
  ForkJoin(std::mutex& mu, std::condition_variable& cv) : mu_(mu), cv_(cv) {}
  ForkJoin(const ForkJoin&) = delete;
  ForkJoin& operator=(const ForkJoin&) = delete;

  /// Makes parallel_for() and Section on the calling thread use `fj` (nullptr: inline). For the
  /// compute threads, once at their start.
  static void bind_thread(ForkJoin* fj);

  /// True while some execution is in a Section: an idle thread should stand_by().
  [[nodiscard]] bool wanted() const { return sections_.load(std::memory_order_seq_cst) > 0; }

  /// The owner, holding its lock, has set the `attention` flag its stand_by() threads watch:
  /// wakes those asleep.
  void wake_locked() { standby_cv_.notify_all(); }

  /// An idle compute thread (owner's lock not held) helps with jobs until no Section is left or
  /// `attention` becomes true (the owner has other work for it).
  void stand_by(Helper& me, const std::atomic<bool>& attention);

  /// Threads in stand_by() now (for tests).
  [[nodiscard]] int standing_by() const { return standing_by_.load(std::memory_order_seq_cst); }

  /// parallel_for() on a bound thread.
  void run(std::int64_t n, std::int64_t grain, ParallelBody body, void* ctx);

 private:
  struct Job {
    std::uint64_t id = 0;
    std::int64_t n = 0, grain = 1, chunks = 0;
    ParallelBody body = nullptr;
    void* ctx = nullptr;
    std::atomic<std::int64_t> next{0};  // next chunk to take
    std::exception_ptr error;           // first exception of a chunk (mu_)
  };
  /// Takes and runs chunks of `job` until none is left; keeps the first exception in it.
  void run_chunks(Job& job);
  void begin_section();
  void end_section();

  std::mutex& mu_;
  std::condition_variable& cv_;
  std::condition_variable standby_cv_;  // sleeping stand-by threads (with mu_)
  std::atomic<int> sections_{0};        // executions in a Section
  std::atomic<int> standing_by_{0};     // threads in stand_by()
  std::atomic<int> sleepers_{0};        // of those, asleep on standby_cv_
  std::atomic<int> active_{0};          // helpers that may be reading the posted job
  std::atomic<Job*> job_{nullptr};      // the posted job
  /// Id of the last job posted: helpers compare it with the last one they helped before they
  /// touch job_'s pointee (a retired job's memory may already hold the next one).
  std::atomic<std::uint64_t> job_id_{0};
  std::atomic<std::uint64_t> next_id_{0};
};

}  // namespace furiosa::device::sim
