// An open simulated device file (sim_device.h): DRAM access on its card, program loading, and
// submission to its execution queue (execution_queue.h), with its own counters
// (sim_counters.h).
//
// Memory: DMA (write/read) must stay inside one allocation of the calling Device; anything else
// is Error(DeviceFault) naming the device file and address (dram_allocator.h). Closing a Device
// frees its allocations and releases its cores. A SimLoadedProgram keeps its region's storage
// alive, so queued executions never touch freed memory.
#include "sim_device.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "execution_queue.h"
#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "loaded_program.h"
#include "sim_counters.h"

namespace furiosa::device::sim {

namespace {

/// An open simulated device file. The members are declared in the order they depend on each
/// other: the queue's threads use the counters, which publish into the locks.
class SimDevice final : public Device {
 public:
  SimDevice(std::shared_ptr<SimState> state, const DeviceFile& file, std::uint64_t owner,
            PeLocks locks)
      : state_(std::move(state)),
        file_(file),
        name_(file.name()),
        owner_(owner),
        locks_(std::move(locks)),
        counters_(locks_),
        queue_(state_->config, file_, counters_) {}

  /// Drains the queue (every queued execution runs and signals its fence), joins the compute
  /// threads, frees this device's DRAM and releases its cores.
  ~SimDevice() override {
    queue_.close();
    state_->dram.release_all(file_.card, owner_);
    state_->release_cores(file_);
    spdlog::debug("sim: closed {}", name_);
  }

  const DeviceFile& file() const noexcept override { return file_; }

  DeviceBuffer allocate(std::uint64_t bytes) override {
    return {state_->dram.allocate(file_, owner_, bytes).first, bytes};
  }

  void release(const DeviceBuffer& buffer) override { state_->dram.release(file_, owner_, buffer); }

  void write(std::uint64_t address, std::span<const std::byte> data) override {
    Located at = state_->dram.locate(file_, owner_, address, data.size(), "DMA write");
    if (!data.empty()) std::memcpy(at.data.get() + at.offset, data.data(), data.size());
    counters_.add_dma_to_device(data.size());
  }

  void read(std::uint64_t address, std::span<std::byte> data) override {
    Located at = state_->dram.locate(file_, owner_, address, data.size(), "DMA read");
    if (!data.empty()) std::memcpy(data.data(), at.data.get() + at.offset, data.size());
    counters_.add_dma_to_host(data.size());
  }

  std::shared_ptr<LoadedProgram> load(std::shared_ptr<const isa::Program> program) override {
    if (!program)
      throw Error(ErrorCode::InvalidArgument, fmt::format("{}: load of a null program", name_));
    // The one program check of every path to a device (isa.h): nothing outside the region.
    if (const std::string problem = isa::verify(*program); !problem.empty()) {
      throw Error(ErrorCode::DeviceFault,
                  fmt::format("{}: program '{}' is invalid: {}", name_, escape_text(program->name), problem),
                  ErrorSubject::of_device(name_));
    }
    auto [base, allocation] = state_->dram.allocate(file_, owner_, program->dram_bytes);
    if (!program->constants.empty()) {
      std::memcpy(allocation.data.get(), program->constants.data(), program->constants.size());
    }
    counters_.add_dma_to_device(program->constants.size());
    auto loaded = std::make_shared<SimLoadedProgram>(std::move(program), state_, file_.card, owner_,
                                                     base, allocation, file_.pe_count());
    queue_.warm_up(loaded);
    return loaded;
  }

  std::shared_ptr<Fence> submit(const LoadedProgram& program,
                                std::vector<std::span<const std::byte>> inputs,
                                std::vector<std::span<std::byte>> outputs) override {
    const auto* loaded = dynamic_cast<const SimLoadedProgram*>(&program);
    if (loaded == nullptr || loaded->owner() != owner_) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: program '{}' was not loaded on this device", name_,
                              program.program().name));
    }
    const isa::Program& prog = loaded->program();
    check_sizes(prog, "input", prog.inputs, inputs);
    check_sizes(prog, "output", prog.outputs, outputs);
    auto fence = std::make_shared<Fence>();
    queue_.submit(Task{loaded->shared_from_this(), std::move(inputs), std::move(outputs), fence, 0,
                       std::nullopt});
    return fence;
  }

  DeviceCounters counters() const override { return counters_.snapshot(); }

  void reset() override { queue_.reset(); }

 private:
  /// Throws InvalidInput unless `given` matches the program's tensors in count and byte sizes.
  template <class Span>
  void check_sizes(const isa::Program& prog, std::string_view what,
                   const std::vector<isa::TensorRef>& refs, const std::vector<Span>& given) const {
    if (given.size() != refs.size()) {
      throw Error(ErrorCode::InvalidInput,
                  fmt::format("{}: program '{}' has {} {}(s) but {} were given", name_, prog.name,
                              refs.size(), what, given.size()));
    }
    for (std::size_t i = 0; i < refs.size(); ++i) {
      if (given[i].size() != refs[i].size_bytes()) {
        throw Error(ErrorCode::InvalidInput,
                    fmt::format("{}: {} {} of program '{}' ({} {} {}) must be {} bytes but {} "
                                "bytes were given",
                                name_, what, i, prog.name, shape_to_string(refs[i].shape),
                                dtype_name(refs[i].dtype), isa::layout_name(refs[i].layout),
                                refs[i].size_bytes(), given[i].size()));
      }
    }
  }

  std::shared_ptr<SimState> state_;
  const DeviceFile file_;
  const std::string name_;  // file_.name()
  const std::uint64_t owner_;
  PeLocks locks_;         // system-wide ownership of the PEs (none without a lock_dir)
  SimCounters counters_;  // this device's counters, published into locks_
  ExecutionQueue queue_;  // its compute threads start last
};

}  // namespace

std::unique_ptr<Device> open_sim_device(std::shared_ptr<SimState> state, const DeviceFile& file,
                                        std::uint64_t owner, PeLocks locks) {
  return std::make_unique<SimDevice>(std::move(state), file, owner, std::move(locks));
}

}  // namespace furiosa::device::sim
