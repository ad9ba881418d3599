// A program loaded on a simulated device (loaded_program.h): its cost model and prepared kernels
// made at load, and the regions its executions compute in.
#include "loaded_program.h"

#include <algorithm>
#include <cstring>

namespace furiosa::device::sim {

SimLoadedProgram::SimLoadedProgram(std::shared_ptr<const isa::Program> program,
                                   std::shared_ptr<SimState> state, int card, std::uint64_t owner,
                                   std::uint64_t base, const Allocation& allocation, int pe_count)
    : program_(std::move(program)),
      state_(std::move(state)),
      card_(card),
      owner_(owner),
      base_(base),
      allocation_id_(allocation.id),
      storage_(allocation.data),
      size_(allocation.size),
      prepared_(state_->config.mode == SimMode::Functional ? prepare_program(*program_) : nullptr),
      cost_(model_program(state_->config, *program_, pe_count)) {
  modelled_ns_ = 0;
  for (std::int64_t ns : cost_.load_ns) modelled_ns_ += ns;
  modelled_ns_ += cycles_to_ns(state_->config, cost_.kernel_cycles);
  for (std::int64_t ns : cost_.store_ns) modelled_ns_ += ns;
  if (state_->config.mode != SimMode::Functional || size_ == 0) return;
  // Everything an execution needs is made now, not by the first executions (docs/timing.md
  // "Cold start"): the region's pages past the constants (calloc leaves them unmapped until
  // the first execution writes its activations) and one private region per further compute
  // thread (two executions of the program computed at once).
  const std::uint64_t constants = program_->constants.size();
  if (size_ > constants) {
    std::memset(storage_.get() + constants, 0, static_cast<std::size_t>(size_ - constants));
  }
  const int spares = std::max(state_->config.compute_threads, 1) - 1;
  for (int i = 0; i < spares; ++i) spare_regions_.push_back(copy_region());
}

SimLoadedProgram::~SimLoadedProgram() {
  state_->dram.release_if_current(card_, base_, allocation_id_);
}

std::byte* SimLoadedProgram::acquire_region() const {
  std::lock_guard lock(regions_mu_);
  if (!primary_busy_) {
    primary_busy_ = true;
    return storage_.get();
  }
  if (!spare_regions_.empty()) {
    std::byte* r = spare_regions_.back().release();
    spare_regions_.pop_back();
    return r;
  }
  return copy_region().release();
}

void SimLoadedProgram::release_region(std::byte* region) const {
  std::lock_guard lock(regions_mu_);
  if (region == storage_.get()) {
    primary_busy_ = false;
  } else {
    spare_regions_.emplace_back(region);
  }
}

std::unique_ptr<std::byte[]> SimLoadedProgram::copy_region() const {
  auto copy = std::make_unique<std::byte[]>(static_cast<std::size_t>(size_));
  // (A program without constants has a null data(): memcpy's source must not be null.)
  if (!program_->constants.empty()) {
    std::memcpy(copy.get(), program_->constants.data(), program_->constants.size());
  }
  return copy;
}

}  // namespace furiosa::device::sim
