// Test doubles around the simulator's devices, shared by the runtime tests: a device that
// forwards every call (tests override what they change) and a driver whose devices count the
// executions submitted to them, so a test can wait until a request has reached the device.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "furiosa/device/device.h"
#include "furiosa/device/driver.h"
#include "furiosa/device/sim.h"

namespace furiosa::test {

/// A device that forwards every call to a simulated device; tests override what they change.
class ForwardingDevice : public device::Device {
 public:
  explicit ForwardingDevice(std::unique_ptr<device::Device> inner) : inner_(std::move(inner)) {}
  const device::DeviceFile& file() const noexcept override { return inner_->file(); }
  device::DeviceBuffer allocate(std::uint64_t bytes) override { return inner_->allocate(bytes); }
  void release(const device::DeviceBuffer& b) override { inner_->release(b); }
  void write(std::uint64_t a, std::span<const std::byte> d) override { inner_->write(a, d); }
  void read(std::uint64_t a, std::span<std::byte> d) override { inner_->read(a, d); }
  std::shared_ptr<device::LoadedProgram> load(std::shared_ptr<const isa::Program> p) override { return inner_->load(std::move(p)); }
  std::shared_ptr<device::Fence> submit(const device::LoadedProgram& p, std::vector<std::span<const std::byte>> in,
                                        std::vector<std::span<std::byte>> out) override {
    return inner_->submit(p, std::move(in), std::move(out));
  }
  device::DeviceCounters counters() const override { return inner_->counters(); }

 protected:
  std::unique_ptr<device::Device> inner_;
};

/// How many executions the devices of a CountingDriver accepted. Thread-safe.
struct SubmitCount {
  std::mutex mu;
  std::condition_variable cv;
  int submitted = 0;

  /// Waits until at least `n` were submitted, at most `bound` (only a guard against a hang).
  bool wait_for(int n, std::chrono::seconds bound) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, bound, [&] { return submitted >= n; });
  }
};

/// A simulated device counting the executions submitted to it.
class CountingDevice : public ForwardingDevice {
 public:
  CountingDevice(std::unique_ptr<device::Device> inner, SubmitCount& count)
      : ForwardingDevice(std::move(inner)), count_(count) {}
  std::shared_ptr<device::Fence> submit(const device::LoadedProgram& p, std::vector<std::span<const std::byte>> in,
                                        std::vector<std::span<std::byte>> out) override {
    auto fence = inner_->submit(p, std::move(in), std::move(out));
    std::lock_guard lock(count_.mu);
    ++count_.submitted;
    count_.cv.notify_all();
    return fence;
  }

 private:
  SubmitCount& count_;
};

/// The simulator with `config` (e.g. a gate_path holding executions), its devices counting
/// submits into `count`.
class CountingDriver : public device::Driver {
 public:
  explicit CountingDriver(const device::SimConfig& config) : inner_(device::create_sim_driver(config)) {}
  std::string_view name() const noexcept override { return "counting sim"; }
  std::vector<device::CardInfo> enumerate() const override { return inner_->enumerate(); }
  std::unique_ptr<device::Device> open(const device::DeviceFile& f) override {
    return std::make_unique<CountingDevice>(inner_->open(f), count);
  }
  SubmitCount count;

 private:
  std::unique_ptr<device::Driver> inner_;
};

}  // namespace furiosa::test
