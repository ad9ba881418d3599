// DevicePool (device_pool.h): opening, load balancing, the watchdog and recovery.
//
// Each device keeps its running executions in submission order. The watchdog fails the oldest
// with DeviceTimeout when the device made no progress for its limit, resets the device and marks
// the executions behind it as reset victims: their fences fail with the reset's abort and
// complete() tells the pipeline to submit them again (at most kMaxResetRetries times each). A
// lost device (DeviceNotFound) takes no more executions.
#include "device_pool.h"

#include "shared_devices.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace furiosa::runtime::detail {

DevicePool::DevicePool(device::Driver& driver, const std::vector<device::DeviceFile>& files,
                       const program::CompiledModel& model, std::chrono::nanoseconds device_timeout,
                       std::shared_ptr<profiler::Profiler> default_profiler, Signalled on_signalled,
                       bool share)
    : default_profiler_(std::move(default_profiler)), on_signalled_(std::move(on_signalled)) {
  for (const auto& file : files) {
    std::shared_ptr<DeviceSlot> slot;
    if (share) {
      slot = acquire_shared_slot(driver, file);
    } else {
      slot = std::make_shared<DeviceSlot>();
      slot->device = driver.open(file);  // DeviceBusy / DeviceNotFound name the file
      slot->health.device_file = slot->device->file().name();
    }
    std::vector<std::shared_ptr<device::LoadedProgram>> loaded;
    for (const auto& call : model.npu_calls) loaded.push_back(slot->device->load(call.program));
    devices_.push_back(std::move(slot));
    programs_.push_back(std::move(loaded));
  }
  // Watchdog limits: the option, else 1000 x the longest program's modelled time with a floor; a
  // shared device keeps the largest limit of its pools.
  std::int64_t min_timeout = 0;
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    std::int64_t modelled = 0;
    for (const auto& p : programs_[i]) modelled = std::max(modelled, p->modelled_ns());
    const std::int64_t floor_ns = std::chrono::nanoseconds(kDefaultDeviceTimeoutFloor).count();
    const std::int64_t limit =
        device_timeout.count() > 0 ? device_timeout.count() : std::max(floor_ns, modelled * 1000);
    {
      std::lock_guard lock(devices_[i]->mu);
      devices_[i]->timeout_ns = std::max(devices_[i]->timeout_ns, limit);
    }
    min_timeout = min_timeout == 0 ? limit : std::min(min_timeout, limit);
  }
  watch_interval_ = std::chrono::nanoseconds(std::clamp<std::int64_t>(min_timeout / 8, 1'000'000, 250'000'000));
  watchdog_ = std::thread([this] { watchdog_loop(); });
}

DevicePool::~DevicePool() {
  if (watchdog_.joinable()) {
    {
      std::lock_guard lock(watch_mu_);
      watch_stop_ = true;
    }
    watch_cv_.notify_all();
    watchdog_.join();
  }
}

std::string DevicePool::names() const {
  std::string out;
  for (const auto& d : devices_) out += (out.empty() ? "" : ",") + d->device->file().name();
  return out;
}

std::vector<DeviceHealth> DevicePool::health() const {
  std::vector<DeviceHealth> out;
  for (const auto& d : devices_) {
    DeviceHealth h;
    {
      std::lock_guard lock(d->mu);
      h = d->health;
    }
    h.lost = d->lost.load();
    h.counters = d->device->counters();
    out.push_back(std::move(h));
  }
  return out;
}

std::size_t DevicePool::pick() {
  DeviceSlot* best = nullptr;
  std::size_t best_index = 0;
  bool best_resetting = false;
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    const auto& d = devices_[i];
    if (d->lost.load()) continue;
    bool resetting;
    {
      std::lock_guard lock(d->mu);
      resetting = d->resetting;
    }
    if (best == nullptr || (best_resetting && !resetting) ||
        (resetting == best_resetting &&
         d->in_flight.load(std::memory_order_relaxed) < best->in_flight.load(std::memory_order_relaxed))) {
      best = d.get();
      best_index = i;
      best_resetting = resetting;
    }
  }
  if (best == nullptr) {
    throw Error(ErrorCode::DeviceNotFound,
                fmt::format("every device of the session is lost ({}); create a new runner or queue to "
                            "open them again",
                            names()),
                ErrorSubject::of_device(names()));
  }
  return best_index;
}

void DevicePool::submit(const std::shared_ptr<PooledExecution>& execution, std::size_t program,
                        std::vector<std::span<const std::byte>> in, std::vector<std::span<std::byte>> out,
                        const std::function<void()>& accepted) {
  const std::size_t index = pick();
  DeviceSlot& dev = *devices_[index];
  dev.in_flight.fetch_add(1);
  std::shared_ptr<device::Fence> fence;
  try {
    // Submitting under the device's lock keeps `running` in the device's order; a reset in
    // progress is waited out.
    std::unique_lock lock(dev.mu);
    dev.cv.wait(lock, [&] { return !dev.resetting; });
    if (dev.lost.load()) {
      throw Error(ErrorCode::DeviceNotFound,
                  fmt::format("{}: device lost; create a new runner or queue to open it again",
                              dev.health.device_file),
                  ErrorSubject::of_device(dev.health.device_file));
    }
    fence = dev.device->submit(*programs_[index][program], std::move(in), std::move(out));
    if (dev.running.empty()) dev.last_progress_ns = profiler::now_ns();
    dev.running.push_back(execution);
    execution->device = &dev;
    execution->pool = this;
    execution->fence = fence;
    // Nothing can hand the execution on yet: the watchdog takes it only under this lock, the
    // fence's callback is registered below.
    try {
      accepted();
    } catch (...) {  // the execution is on the device now: a failing hook must not undo that
    }
  } catch (const Error& e) {
    if (e.code() == ErrorCode::DeviceNotFound) dev.lost.store(true);
    dev.in_flight.fetch_sub(1);
    throw;
  } catch (...) {
    dev.in_flight.fetch_sub(1);
    throw;
  }
  // The callback runs on the backend's thread (or here, if the fence already signalled): it
  // only hands the execution on, unless the watchdog already took it.
  fence->on_signal([this, execution, &dev] {
    {
      std::lock_guard lock(dev.mu);
      auto it = std::find(dev.running.begin(), dev.running.end(), execution);
      if (it == dev.running.end()) return;  // failed by the watchdog already
      dev.running.erase(it);
      dev.last_progress_ns = profiler::now_ns();
    }
    on_signalled_(execution);
  });
}

DevicePool::Outcome DevicePool::complete(PooledExecution& execution) {
  DeviceSlot& dev = *execution.device;
  if (execution.forced_error) {
    // The watchdog's execution (its fence was failed inside the reset) completes only after the
    // reset's bookkeeping -- the resets counter and the DeviceReset / DeviceLost instant event --
    // so a caller that has its DeviceTimeout also finds them.
    std::unique_lock lock(dev.mu);
    dev.cv.wait(lock, [&] { return !dev.resetting; });
  }
  Outcome out;
  out.fence = std::move(execution.fence);
  out.file = &dev.device->file();
  execution.device = nullptr;
  dev.in_flight.fetch_sub(1);
  std::exception_ptr error = execution.forced_error ? execution.forced_error : out.fence->error();
  const bool victim = std::exchange(execution.reset_victim, false);
  if (!execution.forced_error && error) {
    if (victim && device::aborted_by_reset(error) && execution.reset_retries < kMaxResetRetries) {
      // Aborted behind a hung execution: not this request's fault, so it runs again (on the
      // least loaded device) from the same NPU call; its buffers are untouched.
      ++execution.reset_retries;
      std::lock_guard lock(dev.mu);
      ++dev.health.retried;
      out.kind = Outcome::Kind::Retry;
      return out;
    }
    ErrorCode code = ErrorCode::Internal;
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      code = e.code();
    } catch (...) {
    }
    std::lock_guard lock(dev.mu);
    if (code == ErrorCode::DeviceNotFound && !dev.lost.exchange(true)) {
      spdlog::warn("{}: device lost; requests go to the session's other devices", dev.health.device_file);
    }
    if (code != ErrorCode::DeviceNotFound) ++dev.health.faults;
  }
  execution.forced_error = nullptr;
  if (!error) {
    const auto& t = out.fence->timing();
    std::lock_guard lock(dev.mu);
    ++dev.health.completed;
    dev.health.busy_ns += static_cast<std::uint64_t>(t.busy_ns());
  }
  out.error = error;
  return out;
}

void DevicePool::watchdog_loop() {
  std::unique_lock lock(watch_mu_);
  while (!watch_stop_) {
    watch_cv_.wait_for(lock, watch_interval_, [this] { return watch_stop_; });
    if (watch_stop_) break;
    lock.unlock();
    for (auto& d : devices_) {
      try {
        check_device(*d);
      } catch (const std::exception& e) {  // never let the watchdog thread die
        spdlog::error("{}: watchdog: {}", d->health.device_file, e.what());
      }
    }
    lock.lock();
  }
}

void DevicePool::check_device(DeviceSlot& dev) {
  std::shared_ptr<PooledExecution> hung;
  const std::string& file = dev.health.device_file;
  const std::int64_t now = profiler::now_ns();
  {
    std::lock_guard lock(dev.mu);
    if (dev.running.empty() || dev.resetting || now - dev.last_progress_ns < dev.timeout_ns) return;
    // The oldest execution stays in `running` until its fence signals: only then has the device
    // finished with the request's buffers (the reset fails a hung fence; one still computing,
    // merely slow, finishes). It then completes with the timeout error.
    hung = dev.running.front();
    if (hung->forced_error) return;  // timed out already, waiting for its fence
    hung->forced_error = std::make_exception_ptr(
        Error(ErrorCode::DeviceTimeout,
              fmt::format("{}: the execution did not finish within {} ms (watchdog); the device was reset",
                          file, dev.timeout_ns / 1'000'000),
              ErrorSubject::of_device(file)));
    for (std::size_t i = 1; i < dev.running.size(); ++i) dev.running[i]->reset_victim = true;
    dev.resetting = true;
    ++dev.health.timeouts;
  }
  spdlog::warn("{}: execution hung for {} ms; resetting the device", file, dev.timeout_ns / 1'000'000);
  profiler::Profiler* prof = hung->events_profiler != nullptr ? hung->events_profiler : default_profiler_.get();
  record_device_event(prof, dev, "DeviceTimeout", "watchdog fired");
  std::exception_ptr reset_error;
  try {
    dev.device->reset();
  } catch (...) {
    reset_error = std::current_exception();
  }
  record_device_event(prof, dev, reset_error ? "DeviceLost" : "DeviceReset", "");
  std::deque<std::shared_ptr<PooledExecution>> stranded;
  {
    std::lock_guard lock(dev.mu);
    dev.resetting = false;
    dev.last_progress_ns = profiler::now_ns();
    if (!reset_error) {
      ++dev.health.resets;
    } else {
      // A device that cannot be reset is lost; what still runs on it fails now.
      dev.lost.store(true);
      stranded.swap(dev.running);
      std::string why = "reset failed";
      try {
        std::rethrow_exception(reset_error);
      } catch (const std::exception& e) {
        why = e.what();
      }
      const auto lost = std::make_exception_ptr(
          Error(ErrorCode::DeviceNotFound, fmt::format("{}: device lost: {}", file, why), ErrorSubject::of_device(file)));
      for (auto& r : stranded) {
        if (!r->forced_error) r->forced_error = lost;  // the hung one keeps its DeviceTimeout
      }
    }
  }
  dev.cv.notify_all();
  // A device that could not be reset will not signal its fences: its executions are over now,
  // each handed on by the pool that submitted it.
  for (auto& r : stranded) r->pool->on_signalled_(r);
}

void DevicePool::record_device_event(profiler::Profiler* prof, const DeviceSlot& dev, std::string name,
                                     std::string detail) {
  if (prof == nullptr || !prof->is_recording()) return;
  const auto& file = dev.device->file();
  profiler::SpanRecord r;
  r.trace_id = prof->new_trace().trace_id;
  r.span_id = prof->next_span_id();
  r.name = std::move(name);
  r.cat = profiler::Category::NPU;
  r.start_ns = r.end_ns = profiler::now_ns();
  r.card = file.card;
  r.pe_index = file.first_pe;
  r.attributes = {{"event", "instant"}, {"device", file.name()}};
  if (!detail.empty()) r.attributes.emplace_back("detail", std::move(detail));
  prof->record(std::move(r));
}

}  // namespace furiosa::runtime::detail
