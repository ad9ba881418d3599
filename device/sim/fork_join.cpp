// Intra-op parallelism of a device's compute threads (fork_join.h).
#include "fork_join.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace furiosa::device::sim {
namespace {

thread_local ForkJoin* t_fork_join = nullptr;

// A spin-wait step that leaves the core's resources to its sibling hyperthread.
inline void relax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long a standing-by thread spins without a job before it sleeps: longer than the gap
// between two parallel kernels of a model (a few vector kernels), shorter than a thread's time
// slice.
constexpr auto kSpin = std::chrono::microseconds(200);

std::atomic<bool> g_reverse_inline_chunks{false};  // set_reverse_inline_chunks()

}  // namespace

void ForkJoin::bind_thread(ForkJoin* fj) { t_fork_join = fj; }

void set_reverse_inline_chunks(bool on) { g_reverse_inline_chunks.store(on); }

void parallel_for(std::int64_t n, std::int64_t grain, ParallelBody body, void* ctx) {
  if (n <= 0) return;
  if (t_fork_join == nullptr) {
    if (!g_reverse_inline_chunks.load(std::memory_order_relaxed) || grain <= 0) {
      body(ctx, 0, n);
      return;
    }
    for (std::int64_t end = n; end > 0;) {  // the chunks run() would make, last first
      const std::int64_t begin = (end - 1) / grain * grain;
      body(ctx, begin, end);
      end = begin;
    }
    return;
  }
  t_fork_join->run(n, grain, body, ctx);
}

ForkJoin::Section::Section() : fj_(t_fork_join) {
  if (fj_ != nullptr) fj_->begin_section();
}

ForkJoin::Section::~Section() {
  if (fj_ != nullptr) fj_->end_section();
}

void ForkJoin::begin_section() {
  sections_.fetch_add(1, std::memory_order_seq_cst);
  std::lock_guard lock(mu_);  // an idle thread checks wanted() under mu_: no lost wake-up
  cv_.notify_all();
}

void ForkJoin::end_section() {
  if (sections_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
      sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard lock(mu_);
    standby_cv_.notify_all();
  }
}

void ForkJoin::run_chunks(Job& job) {
  for (;;) {
    const std::int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.chunks) return;
    const std::int64_t begin = c * job.grain;
    try {
      job.body(job.ctx, begin, std::min(job.n, begin + job.grain));
    } catch (...) {
      std::lock_guard lock(mu_);
      if (!job.error) job.error = std::current_exception();
    }
  }
}

void ForkJoin::stand_by(Helper& me, const std::atomic<bool>& attention) {
  standing_by_.fetch_add(1, std::memory_order_seq_cst);
  auto last_job = std::chrono::steady_clock::now();
  for (int polls = 1; !attention.load(std::memory_order_acquire); ++polls) {
    if (job_id_.load(std::memory_order_acquire) != me.seen &&
        job_.load(std::memory_order_acquire) != nullptr) {
      // A job this thread has not helped. Registered in active_ before the job is read, so its
      // poster (which clears job_ and then waits for active_ to drop to 0) cannot retire it
      // while this thread uses it; nothing of the job is read before that.
      active_.fetch_add(1, std::memory_order_seq_cst);
      if (Job* job = job_.load(std::memory_order_seq_cst); job != nullptr && job->id != me.seen) {
        me.seen = job->id;
        run_chunks(*job);
      }
      active_.fetch_sub(1, std::memory_order_seq_cst);
      last_job = std::chrono::steady_clock::now();
      continue;
    }
    if (!wanted()) break;  // the sections ended: back to the queue
    relax();
    if (polls % 64 != 0 || std::chrono::steady_clock::now() - last_job < kSpin) continue;
    // Long without a job inside a section: sleep until one is posted, the sections end or the
    // owner calls.
    std::unique_lock lock(mu_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    standby_cv_.wait(lock, [&] {
      return (job_id_.load(std::memory_order_seq_cst) != me.seen &&
              job_.load(std::memory_order_seq_cst) != nullptr) ||
             !wanted() || attention.load(std::memory_order_acquire);
    });
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
    last_job = std::chrono::steady_clock::now();
  }
  standing_by_.fetch_sub(1, std::memory_order_seq_cst);
}

void ForkJoin::run(std::int64_t n, std::int64_t grain, ParallelBody body, void* ctx) {
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t chunks = (n + grain - 1) / grain;
  if (chunks < 2 || standing_by_.load(std::memory_order_seq_cst) == 0) {
    body(ctx, 0, n);
    return;
  }
  Job job;
  job.id = next_id_.fetch_add(1, std::memory_order_relaxed) + 1;
  job.n = n;
  job.grain = grain;
  job.chunks = chunks;
  job.body = body;
  job.ctx = ctx;
  Job* expected = nullptr;
  if (!job_.compare_exchange_strong(expected, &job, std::memory_order_seq_cst)) {
    body(ctx, 0, n);  // another execution's job is running: no helper to spare
    return;
  }
  job_id_.store(job.id, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard lock(mu_);
    standby_cv_.notify_all();
  }
  run_chunks(job);
  job_.store(nullptr, std::memory_order_seq_cst);
  while (active_.load(std::memory_order_seq_cst) != 0) relax();  // helpers finish their chunks
  std::exception_ptr error;
  {
    std::lock_guard lock(mu_);
    error = job.error;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace furiosa::device::sim
