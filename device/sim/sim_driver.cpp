// The simulator backend ("sim"): simulated Warboy cards with exclusive device files. The pieces,
// one concept per file (each private header says more):
//   sim_config.cpp       SimConfig from the FURIOSA_SIM_* environment, and its validation
//   sim_state.cpp        a driver's cards: core ownership within the driver, enumerate()
//   pe_locks.cpp         system-wide core ownership through lock files
//   dram_allocator.cpp   each card's simulated DRAM
//   sim_device.cpp       an open device file (the Device interface)
//   loaded_program.cpp   a program loaded on a device, its cost model and regions
//   execution_queue.cpp  the device's in-order queue and compute threads, hangs and reset
//   execution.cpp        one execution: timeline placement, host computation, pacing, fence
//   fork_join.cpp        intra-op parallelism: kernels' jobs shared with idle compute threads
//   sim_faults.cpp       the fault spec and the per-device fault decisions
//   sim_counters.cpp     the per-device counters and their publication in the lock files
//   timing.cpp           the timing model
//   kernels/             the functional kernels, one file per family (kernels.h: interface);
//                        fast_kernels*.cpp / *.inc their vectorized versions per ISA level,
//                        conv_planes.cpp the padded phase planes their convolutions read
//
// Lifetime: the driver, its Devices and their LoadedPrograms share one SimState through
// shared_ptr, so a Device still releases its cores correctly when it outlives the driver.

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>
#include <utility>

#include "furiosa/device/sim.h"
#include "pe_locks.h"
#include "sim_config.h"
#include "sim_device.h"
#include "sim_state.h"

namespace furiosa::device {

namespace {

/// The simulator driver: a set of simulated cards.
class SimDriver final : public Driver {
 public:
  explicit SimDriver(const SimConfig& config) : state_(std::make_shared<sim::SimState>(config)) {}

  std::string_view name() const noexcept override { return "sim"; }

  std::vector<CardInfo> enumerate() const override { return state_->enumerate(); }

  std::unique_ptr<Device> open(const DeviceFile& file) override {
    const std::uint64_t owner = state_->acquire(file);
    try {
      sim::PeLocks locks;
      if (!state_->config.lock_dir.empty()) locks = sim::PeLocks(state_->config.lock_dir, file);
      auto device = sim::open_sim_device(state_, file, owner, std::move(locks));
      spdlog::debug("sim: opened {}", file.name());
      return device;
    } catch (...) {
      state_->release_cores(file);
      throw;
    }
  }

 private:
  std::shared_ptr<sim::SimState> state_;
};

}  // namespace

std::unique_ptr<Driver> create_sim_driver(const SimConfig& config) {
  sim::validate_config(config);
  return std::make_unique<SimDriver>(config);
}

void register_sim_backend(DriverRegistry& registry) {
  // The environment is read when the "sim" driver is first used, not at registration.
  registry.register_factory("sim", [] { return create_sim_driver(sim_config_from_environment()); });
}

}  // namespace furiosa::device
