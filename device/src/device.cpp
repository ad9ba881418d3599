// Device files and completion fences.
#include "furiosa/device/device.h"

#include <fmt/format.h>

#include <charconv>

#include "furiosa/core/error.h"
#include "text_scan.h"

namespace furiosa::device {

std::string DeviceFile::name() const {
  if (last_pe == first_pe) return fmt::format("npu{}pe{}", card, first_pe);
  return fmt::format("npu{}pe{}-{}", card, first_pe, last_pe);
}

bool DeviceFile::overlaps(const DeviceFile& other) const noexcept {
  return card == other.card && first_pe <= other.last_pe && other.first_pe <= last_pe;
}

using detail::consume;
using detail::consume_number;

DeviceFile DeviceFile::parse(std::string_view text) {
  std::string_view rest = text;
  consume(rest, "/dev/");
  DeviceFile file;
  bool ok = consume(rest, "npu") && consume_number(rest, file.card) && consume(rest, "pe") &&
            consume_number(rest, file.first_pe);
  file.last_pe = file.first_pe;
  if (ok && consume(rest, "-")) {
    // A fused range names at least two PEs in increasing order, so name() gives the text back.
    ok = consume_number(rest, file.last_pe) && file.last_pe > file.first_pe;
  }
  if (!ok || !rest.empty()) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("'{}' is not a device file name (expected npu<card>pe<pe> or "
                            "npu<card>pe<first>-<last>, e.g. npu0pe0 or npu0pe0-1)",
                            text));
  }
  return file;
}

bool Fence::wait_for(std::chrono::nanoseconds timeout) const {
  // Very long timeouts (e.g. nanoseconds::max()) would overflow now() + timeout: wait forever.
  if (timeout > std::chrono::hours(24 * 365 * 100)) {
    wait();
    return true;
  }
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return callbacks_run_; });
}

void Fence::wait() const {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return callbacks_run_; });
}

bool Fence::signalled() const {
  std::lock_guard lock(mu_);
  return done_;
}

std::exception_ptr Fence::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

const ExecutionTiming& Fence::timing() const {
  // The lock orders this read after the signalling write; timing_ never changes afterwards.
  std::lock_guard lock(mu_);
  return timing_;
}

void Fence::on_signal(std::function<void()> callback) {
  std::unique_lock lock(mu_);
  if (!done_) {
    callbacks_.push_back(std::move(callback));
    return;
  }
  lock.unlock();
  try {
    callback();
  } catch (...) {  // a callback's failure must not reach the backend thread (documented)
  }
}

void Fence::complete(std::unique_lock<std::mutex>& lock) {
  done_ = true;
  std::vector<std::function<void()>> callbacks = std::move(callbacks_);
  callbacks_.clear();
  lock.unlock();
  for (auto& callback : callbacks) {
    try {
      callback();
    } catch (...) {
    }
  }
  // Waiters wake only now, so a waiter sees the effects of the callbacks registered before the
  // signal (the conformance suite checks it; callers rely on it to read what callbacks wrote).
  lock.lock();
  callbacks_run_ = true;
  lock.unlock();
  cv_.notify_all();
}

void Fence::signal(ExecutionTiming timing) {
  std::unique_lock lock(mu_);
  if (done_) return;
  timing_ = std::move(timing);
  complete(lock);
}

void Fence::fail(std::exception_ptr error) {
  // A failure must carry an error, or waiters would take it for success.
  if (!error) {
    error = std::make_exception_ptr(Error(ErrorCode::Internal, "fence failed without an error"));
  }
  std::unique_lock lock(mu_);
  if (done_) return;
  error_ = std::move(error);
  complete(lock);
}

namespace {
constexpr std::string_view kResetAbort = "aborted by device reset";
}  // namespace

void Device::reset() {
  throw Error(ErrorCode::DeviceFault,
              fmt::format("{}: this backend cannot reset a device", file().name()),
              ErrorSubject::of_device(file().name()));
}

std::exception_ptr reset_abort_error(const DeviceFile& file, std::uint64_t execution) {
  return std::make_exception_ptr(
      Error(ErrorCode::DeviceFault, fmt::format("{}: execution {} {}", file.name(), execution, kResetAbort),
            ErrorSubject::of_device(file.name())));
}

bool aborted_by_reset(const std::exception_ptr& error) noexcept {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.code() == ErrorCode::DeviceFault && e.message().ends_with(kResetAbort);
  } catch (...) {
    return false;
  }
}

}  // namespace furiosa::device
