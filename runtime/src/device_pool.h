// The devices of a session: opening them with the model's programs loaded, sending each NPU call
// to the least loaded one, and recovery (docs/devices.md "Recovery"): a watchdog thread fails an
// execution that made no progress within its limit with DeviceTimeout, resets the device and has
// the executions the reset aborted submitted again; a device that cannot be reset, or reports
// itself lost, takes no more executions.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "furiosa/program/compiled_model.h"
#include "furiosa/device/device.h"
#include "furiosa/device/driver.h"
#include "furiosa/profiler/profiler.h"
#include "furiosa/runtime/runner.h"

namespace furiosa::runtime::detail {

struct DeviceSlot;
class DevicePool;

/// The part of a request the pool reads and writes while one of its NPU calls is in flight (a
/// base of the pipeline's request). Between DevicePool::submit() and DevicePool::complete() the
/// pool owns these fields (the watchdog writes `forced_error` and `reset_victim` under the
/// device's lock); the request's stage owns them otherwise.
struct PooledExecution {
  virtual ~PooledExecution() = default;

  /// Where device events of this execution (DeviceTimeout, DeviceReset, DeviceLost instants) are
  /// recorded; null: the pool's default profiler. Set by the request, read by the watchdog.
  profiler::Profiler* events_profiler = nullptr;
  DeviceSlot* device = nullptr;           ///< the device running it
  /// The pool that submitted it, whose Signalled callback hands it on (on a shared device,
  /// another pool's watchdog may be the one to end it).
  DevicePool* pool = nullptr;
  std::shared_ptr<device::Fence> fence;   ///< its fence
  /// Set by the watchdog instead of the fence's result: DeviceTimeout for a hung execution,
  /// DeviceNotFound when its device could not be reset.
  std::exception_ptr forced_error;
  bool reset_victim = false;  ///< queued behind a hung execution when its device was reset
  int reset_retries = 0;      ///< times it was submitted again after a reset aborted it
};

/// One opened device and what the runtime knows of it: held by one pool, or by every pool of
/// the process that shares it (SessionOptions::share_devices; shared_devices.h), whose
/// watchdogs then all watch it, under `mu`.
struct DeviceSlot {
  std::unique_ptr<device::Device> device;
  std::atomic<int> in_flight{0};  ///< submitted, not yet completed (the load balancing's measure)
  std::atomic<bool> lost{false};
  /// Guards the fields below; held while submitting, so `running` is in device order.
  mutable std::mutex mu;
  std::condition_variable cv;  ///< signalled when a reset ends
  std::deque<std::shared_ptr<PooledExecution>> running;  ///< submitted, fence not yet seen, oldest first
  std::int64_t timeout_ns = 0;  ///< watchdog limit of one execution (the largest of its pools')
  std::int64_t last_progress_ns = 0;  ///< last fence signal, or submit to an idle device
  bool resetting = false;
  DeviceHealth health;  ///< counters (device_file, counters filled on read)
};

/// The devices of one session. Thread-safe. Destroying it stops the watchdog and closes the
/// devices: every execution must have completed (the pipeline drains first).
class DevicePool {
 public:
  /// Called exactly once per submitted execution when it is over (its fence signalled, or the
  /// watchdog gave up on its lost device), on the backend's or the watchdog's thread. Must be
  /// short and must not block: hand the execution to an executor, which then calls complete().
  using Signalled = std::function<void(std::shared_ptr<PooledExecution>)>;

  /// Opens every device of `files` from `driver` (DeviceBusy / DeviceNotFound name the file) --
  /// or, with `share`, takes it from the process's shared devices when another sharing pool has
  /// it open (shared_devices.h) -- loads every NPU program of `model` on each, and starts the
  /// watchdog. The watchdog limit of
  /// an execution is `device_timeout` when positive, else max(kDefaultDeviceTimeoutFloor, 1000 x
  /// the device's longest modelled program time). Device events of executions without a
  /// profiler of their own go to `default_profiler` (may be null).
  DevicePool(device::Driver& driver, const std::vector<device::DeviceFile>& files,
             const program::CompiledModel& model, std::chrono::nanoseconds device_timeout,
             std::shared_ptr<profiler::Profiler> default_profiler, Signalled on_signalled,
             bool share = false);
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  /// Device files held, comma separated ("npu0pe0,npu0pe1").
  std::string names() const;
  /// Per device, in the order of the files, what the runtime saw and did.
  std::vector<DeviceHealth> health() const;

  /// Submits NPU program `program` with the buffers `in` / `out` (borrowed until the execution is
  /// over) to the least loaded device that is not lost (one being reset only when no other is
  /// usable; a reset in progress is waited out). `accepted` is called once the device has taken
  /// the execution and before anything can signal it (the caller ends its Enqueue span there, so
  /// that it always ends before the request's continuation starts). `on_signalled` is then called
  /// exactly once for `execution`; the caller must not touch its pooled fields until then. Throws
  /// (nothing submitted, `on_signalled` never called) Error(DeviceNotFound) when every device is
  /// lost or the chosen one is, and whatever the device's submit throws.
  void submit(const std::shared_ptr<PooledExecution>& execution, std::size_t program,
              std::vector<std::span<const std::byte>> in, std::vector<std::span<std::byte>> out,
              const std::function<void()>& accepted);

  /// What became of an execution.
  struct Outcome {
    enum class Kind {
      Done,    ///< finished: `error` null (success, `fence->timing()` valid) or the device's error
      Retry,   ///< aborted by a reset behind a hung execution: submit the same call again
    };
    Kind kind = Kind::Done;
    std::exception_ptr error;              ///< the execution's failure, or null
    std::shared_ptr<device::Fence> fence;  ///< keeps the timing alive
    const device::DeviceFile* file = nullptr;  ///< the device it ran on
  };
  /// Accounts for an execution after `on_signalled`: health counters, the lost mark, the retry
  /// decision (at most kMaxResetRetries per execution). For the watchdog's own victim, waits
  /// until the reset's bookkeeping is done so the caller sees it. Call once per signal, from an
  /// executor thread (it may block while a reset runs).
  Outcome complete(PooledExecution& execution);

  /// How many times one execution is submitted again after resets aborted it before it fails
  /// with the abort error (so a device that keeps hanging cannot loop a request).
  static constexpr int kMaxResetRetries = 3;

 private:
  /// The index in devices_ of the device to submit to next.
  std::size_t pick();
  void watchdog_loop();
  /// Recovers `dev` when its oldest running execution made no progress within the limit.
  void check_device(DeviceSlot& dev);
  /// Records a device event (zero-length NPU span on the PE's track) into `prof` when recording.
  void record_device_event(profiler::Profiler* prof, const DeviceSlot& dev, std::string name, std::string detail);

  std::vector<std::shared_ptr<DeviceSlot>> devices_;
  /// Per device (same order), this pool's programs loaded on it, per NpuCall. Declared after
  /// devices_: unloaded before a device this pool alone holds closes.
  std::vector<std::vector<std::shared_ptr<device::LoadedProgram>>> programs_;
  std::shared_ptr<profiler::Profiler> default_profiler_;
  Signalled on_signalled_;
  /// The watchdog: one thread, polling every watch_interval_ (a fraction of the smallest limit)
  /// until the destructor stops it.
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool watch_stop_ = false;
  std::chrono::nanoseconds watch_interval_{0};
  std::thread watchdog_;
};

}  // namespace furiosa::runtime::detail
