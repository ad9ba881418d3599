// The execution queue of one open simulated device (execution_queue.h).
#include "execution_queue.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include <sys/stat.h>

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "furiosa/core/error.h"
#include "kernels.h"
#include "loaded_program.h"

namespace furiosa::device::sim {

/// A load-time warm-up of one program, run once by every compute thread (see warm_up()).
struct ExecutionQueue::WarmUp {
  std::shared_ptr<const SimLoadedProgram> program;
  std::mutex mu;
  std::condition_variable done;
  std::size_t pending = 0;  ///< compute threads that have not run it yet (mu)
};

ExecutionQueue::ExecutionQueue(const SimConfig& config, const DeviceFile& file,
                               SimCounters& counters)
    : config_(config),
      file_(file),
      name_(file.name()),
      counters_(counters),
      faults_(config.faults, name_) {
  const int threads = std::max(config_.compute_threads, 1);
  warm_ups_.resize(static_cast<std::size_t>(threads));
  waiting_.assign(static_cast<std::size_t>(threads), false);
  for (int i = 0; i < threads; ++i)
    workers_.emplace_back([this, i] { worker_loop(static_cast<std::size_t>(i)); });
}

ExecutionQueue::~ExecutionQueue() { close(); }

void ExecutionQueue::close() {
  std::vector<std::shared_ptr<Fence>> aborted;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    // A hung device runs nothing more: its hung and queued executions fail.
    if (hung_) aborted = take_unfinished_locked();
    update_attention_locked();
  }
  not_empty_.notify_all();
  not_full_.notify_all();
  hang_cv_.notify_all();
  for (auto& f : aborted) f->fail(closed_while_hung());
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
}

void ExecutionQueue::submit(Task task) {
  bool wake_all = false;
  {
    std::unique_lock lock(mu_);
    const std::size_t capacity = std::max<std::size_t>(config_.queue_capacity, 1);
    not_full_.wait(lock, [&] { return stopping_ || queue_.size() < capacity; });
    if (stopping_) {
      throw Error(ErrorCode::SessionClosed, fmt::format("{}: the device is closing", name_));
    }
    if (faults_.lost()) throw device_lost_error(name_);
    task.index = next_execution_index_++;
    queue_.push_back(std::move(task));
    update_attention_locked();
    // The thread that ran the last execution is the one to wake when it waits (see
    // may_take_locked()); one notify_one could wake another, which would then wait again.
    wake_all = last_runner_ < waiting_.size() && waiting_[last_runner_];
  }
  if (wake_all) {
    not_empty_.notify_all();
  } else {
    not_empty_.notify_one();
  }
}

bool ExecutionQueue::may_take_locked(std::size_t me) const {
  if (queue_.empty()) return false;
  if (stopping_ || last_runner_ >= waiting_.size() || last_runner_ == me) return true;
  return !waiting_[last_runner_];  // busy (or about to look at the queue itself): anyone may
}

void ExecutionQueue::reset() {
  std::vector<std::shared_ptr<Fence>> aborted;
  std::vector<std::uint64_t> indices;
  {
    std::lock_guard lock(mu_);
    if (faults_.lost()) throw device_lost_error(name_);
    indices.reserve(queue_.size() + 1);
    if (hung_task_) indices.push_back(hung_task_->index);
    for (const Task& t : queue_) indices.push_back(t.index);
    aborted = take_unfinished_locked();
    hung_ = false;
    ++reset_generation_;
    update_attention_locked();
  }
  counters_.count_reset();
  hang_cv_.notify_all();
  not_full_.notify_all();
  not_empty_.notify_all();
  for (std::size_t i = 0; i < aborted.size(); ++i)
    aborted[i]->fail(reset_abort_error(file_, indices[i]));
  spdlog::debug("sim: {} reset ({} executions aborted)", name_, aborted.size());
}

std::vector<std::shared_ptr<Fence>> ExecutionQueue::take_unfinished_locked() {
  std::vector<std::shared_ptr<Fence>> fences;
  if (hung_task_) fences.push_back(std::move(hung_task_->fence));
  hung_task_.reset();
  for (Task& t : queue_) fences.push_back(std::move(t.fence));
  queue_.clear();
  return fences;
}

std::exception_ptr ExecutionQueue::closed_while_hung() const {
  return std::make_exception_ptr(
      Error(ErrorCode::SessionClosed, fmt::format("{}: the device closed while it was hung", name_),
            ErrorSubject::of_device(name_)));
}

bool ExecutionQueue::warm_up_enabled() const noexcept {
  if (config_.mode != SimMode::Functional) return false;
  switch (config_.warm_up) {
    case SimWarmUp::Off: return false;
    case SimWarmUp::Always: return true;
    case SimWarmUp::FastKernels: return fast_kernels_active();
  }
  return false;
}

void ExecutionQueue::warm_up(const std::shared_ptr<const SimLoadedProgram>& program) {
  if (!warm_up_enabled() || program->program().kernels.empty()) return;
  auto w = std::make_shared<WarmUp>();
  w->program = program;
  w->pending = warm_ups_.size();
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    for (auto& list : warm_ups_) list.push_back(w);
    update_attention_locked();
  }
  not_empty_.notify_all();
  std::unique_lock lock(w->mu);
  w->done.wait(lock, [&] { return w->pending == 0; });
}

void ExecutionQueue::run_warm_up(WarmUp& w) {
  const SimLoadedProgram& loaded = *w.program;
  const isa::Program& prog = loaded.program();
  std::byte* region_data = loaded.acquire_region();
  try {
    const std::span<std::byte> region(region_data, loaded.region().size());
    for (std::size_t k = 0; k < prog.kernels.size(); ++k) {
      run_kernel(prog.kernels[k], region, loaded.prepared(), k);
    }
  } catch (...) {  // reported by the real execution
  }
  loaded.release_region(region_data);
  {
    std::lock_guard lock(w.mu);
    --w.pending;
  }
  w.done.notify_all();
}

void ExecutionQueue::update_attention_locked() {
  bool warm_ups = false;
  for (const auto& list : warm_ups_) warm_ups = warm_ups || !list.empty();
  const bool attention = stopping_ || (!queue_.empty() && !hung_) || warm_ups;
  attention_.store(attention, std::memory_order_release);
  if (attention) fork_join_.wake_locked();
}

bool ExecutionQueue::gate_closed() const {
  const std::string& gate = config_.gate_path;
  struct stat st {};
  return !gate.empty() && ::lstat(gate.c_str(), &st) != 0;
}

void ExecutionQueue::worker_loop(std::size_t me) {
#ifdef __linux__
  // Pacing sleeps until modelled times in the microsecond range; the default 50 us timer
  // slack would add that much to every paced completion.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
  ForkJoin::bind_thread(config_.intra_op && config_.mode == SimMode::Functional ? &fork_join_
                                                                                : nullptr);
  ForkJoin::Helper helper;
  for (;;) {
    Task task;
    ExecutionTiming timing;
    {
      std::unique_lock lock(mu_);
      // A hung device takes nothing until reset() or close (load-time warm-ups still run).
      // With nothing of its own to do while a sibling computes an execution, the thread stands
      // by for that execution's intra-op jobs (fork_join.h).
      waiting_[me] = true;
      not_empty_.wait(lock, [this, me] {
        return stopping_ || (may_take_locked(me) && !hung_) || !warm_ups_[me].empty() ||
               fork_join_.wanted();
      });
      waiting_[me] = false;
      if (!stopping_ && (!may_take_locked(me) || hung_) && warm_ups_[me].empty()) {
        lock.unlock();  // only an execution's kernels need this thread: help with their jobs
        fork_join_.stand_by(helper, attention_);
        continue;
      }
      if (!warm_ups_[me].empty()) {
        std::shared_ptr<WarmUp> w = std::move(warm_ups_[me].front());
        warm_ups_[me].pop_front();
        update_attention_locked();
        lock.unlock();
        run_warm_up(*w);
        continue;
      }
      if (queue_.empty()) return;         // closing, and every execution has been run
      if (!stopping_ && gate_closed()) {  // SimConfig::gate_path: the test holds executions
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      task = std::move(queue_.front());
      queue_.pop_front();
      last_runner_ = me;
      update_attention_locked();
      if (faults_.lost()) {
        task.fault = SimFaultKind::Lost;
      } else {
        task.fault = faults_.next();
        if (task.fault) counters_.count_fault(*task.fault);
      }
      if (task.fault == SimFaultKind::Hang) {
        // The fence stays unsignalled until reset() or close fails it; the inputs and
        // outputs are never touched.
        hung_ = true;
        update_attention_locked();
        not_full_.notify_one();
        hung_task_ = Task{nullptr, {}, {}, task.fence, task.index, task.fault};
        const std::uint64_t generation = reset_generation_;
        hang_cv_.wait(lock, [&] { return stopping_ || reset_generation_ != generation; });
        if (hung_task_ && hung_task_->fence == task.fence) {  // closing: nobody reset it
          hung_task_.reset();
          hung_ = false;
          update_attention_locked();
          lock.unlock();
          task.fence->fail(closed_while_hung());
        }
        continue;
      }
      timing = place_on_timeline(config_, file_, task, timeline_);
    }
    not_full_.notify_one();
    try {
      execute(config_, name_, counters_, task, std::move(timing));
    } catch (...) {  // execute() reports through the fence; this is the last resort
      task.fence->fail(std::current_exception());
    }
  }
}

}  // namespace furiosa::device::sim
