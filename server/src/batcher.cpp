// Batcher (batcher.h) and the serving outcome classes (serve_error.h).
#include "batcher.h"

#include <fmt/format.h>

#include "furiosa/core/error.h"

namespace furiosa::server {

ServeStatus status_of(const std::exception& e) noexcept {
  if (const auto* s = dynamic_cast<const ServeError*>(&e)) return s->status();
  if (const auto* r = dynamic_cast<const Error*>(&e)) {
    switch (r->code()) {
      case ErrorCode::InvalidInput:
      case ErrorCode::InvalidArgument: return ServeStatus::InvalidArgument;
      case ErrorCode::SessionClosed:
      case ErrorCode::SessionTerminated: return ServeStatus::Unavailable;
      case ErrorCode::DeviceTimeout: return ServeStatus::DeadlineExceeded;
      default: return ServeStatus::Internal;
    }
  }
  return ServeStatus::Internal;
}

ServeStatus status_of(std::exception_ptr e) noexcept {
  if (!e) return ServeStatus::Ok;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return status_of(x);
  } catch (...) {
    return ServeStatus::Internal;
  }
}

std::string_view reason_label(ServeStatus status) noexcept {
  switch (status) {
    case ServeStatus::Ok: return "ok";
    case ServeStatus::InvalidArgument: return "invalid_argument";
    case ServeStatus::NotFound: return "not_found";
    case ServeStatus::ResourceExhausted: return "resource_exhausted";
    case ServeStatus::Unavailable: return "unavailable";
    case ServeStatus::DeadlineExceeded: return "deadline_exceeded";
    case ServeStatus::Internal: return "internal";
  }
  return "internal";
}

Batcher::Batcher(std::size_t max_batch_size, std::chrono::microseconds max_delay, Flush flush,
                 SlotFree slot_free)
    : max_batch_(max_batch_size),
      max_delay_(max_delay < std::chrono::microseconds(0) ? std::chrono::microseconds(0)
                                                          : max_delay),
      flush_(std::move(flush)),
      slot_free_(std::move(slot_free)) {
  if (max_batch_ == 0) throw Error(ErrorCode::InvalidArgument, "max_batch_size must be >= 1");
  thread_ = std::thread([this] { run(); });
}

Batcher::~Batcher() { close(); }

void Batcher::add(BatchItem item) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) throw ServeError(ServeStatus::Unavailable, "the model's batcher is closed (shutting down)");
    queue_.push_back(std::move(item));
  }
  cv_.notify_one();
}

void Batcher::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  cv_.notify_one();
  std::lock_guard join_lock(join_mutex_);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::size_t Batcher::pending() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

void Batcher::slot_freed() {
  // Under the lock: the waiting thread either saw the slot free before it slept, or is woken.
  std::lock_guard lock(mutex_);
  cv_.notify_one();
}

void Batcher::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
    if (queue_.empty()) return;  // closed and drained
    // Hold the group while every device slot is busy: it grows meanwhile (not after close:
    // hand on at once).
    cv_.wait(lock, [&] { return closed_ || !slot_free_ || slot_free_(); });
    // Then wait for a full group or the first request's delay.
    const auto flush_at = queue_.front().admitted + max_delay_;
    cv_.wait_until(lock, flush_at, [&] { return closed_ || queue_.size() >= max_batch_; });
    std::vector<BatchItem> group;
    std::vector<BatchItem> expired;
    const auto now = Clock::now();
    while (!queue_.empty() && group.size() < max_batch_) {
      BatchItem item = std::move(queue_.front());
      queue_.pop_front();
      if (item.deadline && *item.deadline <= now) expired.push_back(std::move(item));
      else group.push_back(std::move(item));
    }
    lock.unlock();
    for (auto& item : expired) {
      item.done({}, std::make_exception_ptr(ServeError(
                        ServeStatus::DeadlineExceeded, "the request's deadline passed while it waited for a batch")));
    }
    if (!group.empty()) {
      try {
        flush_(group);
      } catch (...) {
        // The flush did not take the group: answer each request with its error.
        const auto error = std::current_exception();
        for (auto& item : group) {
          if (item.done) item.done({}, error);
        }
      }
    }
    lock.lock();
  }
}

}  // namespace furiosa::server
