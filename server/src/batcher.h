// Dynamic batching (model_repository.h DynamicBatching), as Triton's dynamic batcher forms
// batches: a queue of admitted requests that a thread hands on in groups of up to
// max_batch_size, only while a device slot is free (the model has fewer groups in flight than it
// can run at once), and then as soon as the group is full or max_queue_delay has passed since its
// first request. While every slot is busy, requests accumulate into the next group instead of
// queueing small groups in the runtime. Requests whose deadline has passed are answered
// DeadlineExceeded by the batcher and never handed on.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "serve_error.h"

namespace furiosa::server {

/// One admitted request waiting for a batch.
struct BatchItem {
  std::vector<Tensor> inputs;  ///< the request's inputs (batch dim 1), model order
  Deadline deadline;           ///< answered DeadlineExceeded if still waiting past it
  Clock::time_point admitted;  ///< when the request was admitted (queue-time metric)
  Completion done;             ///< called exactly once
};

/// The batching queue of one model. Thread-safe: add() from any thread; the flush function runs
/// on the batcher's own thread, one group at a time, in admission order.
class Batcher {
 public:
  /// Receives 1..max_batch_size items, none of them past its deadline at the time of the call.
  /// It owns them: it must see that each item's `done` runs exactly once. If it throws, the
  /// batcher answers every item whose `done` is still set with the exception (so a flush that
  /// answers items itself clears their `done`).
  using Flush = std::function<void(std::vector<BatchItem>&)>;

  /// True when a device slot is free for another group; called under the batcher's lock, so
  /// it must not block or call back into the batcher.
  using SlotFree = std::function<bool()>;

  /// Starts the thread. max_batch_size >= 1; max_delay >= 0 (0: hand on whatever is queued as
  /// soon as a slot is free). `slot_free` null: a slot is always free. Throws
  /// Error(InvalidArgument) for max_batch_size 0.
  Batcher(std::size_t max_batch_size, std::chrono::microseconds max_delay, Flush flush,
          SlotFree slot_free = {});
  /// close().
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  /// Queues one request. Throws ServeError(Unavailable) after close() (the item is not kept: the
  /// caller answers it).
  void add(BatchItem item);
  /// Hands on every queued request without waiting for the delay, then stops and joins the
  /// thread. Idempotent; may be called from several threads at once (all return after the join).
  void close();
  /// Requests queued, not yet handed on.
  std::size_t pending() const;
  /// Tells the batcher that `slot_free` may have become true (a group completed). Thread-safe.
  void slot_freed();

 private:
  void run();

  const std::size_t max_batch_;
  const std::chrono::microseconds max_delay_;
  Flush flush_;
  SlotFree slot_free_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<BatchItem> queue_;
  bool closed_ = false;
  std::mutex join_mutex_;  ///< serializes the join of concurrent close() calls
  std::thread thread_;
};

}  // namespace furiosa::server
