// Private to the simulator: a program loaded on a simulated device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "dram_allocator.h"
#include "furiosa/device/device.h"
#include "kernels.h"
#include "sim_state.h"
#include "timing.h"

namespace furiosa::device::sim {

/// A program resident in a SimDevice's DRAM, with what its executions need made at load: the
/// kernels' prepared state (functional mode), its modelled cost, and one spare region per further
/// compute thread. Frees its region when destroyed (unless the device already freed it on
/// close); keeps the region's storage alive for queued executions. Thread-safe.
class SimLoadedProgram final : public LoadedProgram,
                               public std::enable_shared_from_this<SimLoadedProgram> {
 public:
  /// `program` placed at `base` in `allocation` on `card` by device `owner` of `pe_count` PEs;
  /// the allocation already holds the constants.
  SimLoadedProgram(std::shared_ptr<const isa::Program> program, std::shared_ptr<SimState> state,
                   int card, std::uint64_t owner, std::uint64_t base, const Allocation& allocation,
                   int pe_count);
  ~SimLoadedProgram() override;

  const isa::Program& program() const noexcept override { return *program_; }
  std::int64_t modelled_ns() const noexcept override { return modelled_ns_; }
  /// Id of the SimDevice that loaded it.
  std::uint64_t owner() const noexcept { return owner_; }
  /// Device address of the program's DRAM region.
  std::uint64_t base_address() const noexcept { return base_; }
  /// The program's DRAM region (TensorRef addresses are offsets into it).
  std::span<std::byte> region() const noexcept {
    return {storage_.get(), static_cast<std::size_t>(size_)};
  }
  /// The kernels' per-program state (packed weights), made once at load (functional mode).
  const PreparedProgram* prepared() const noexcept { return prepared_.get(); }
  /// The program's modelled cost on the device it was loaded on.
  const ProgramCost& cost() const noexcept { return cost_; }

  /// A region to compute one execution in: the program's own region when no other execution
  /// of this program is being computed, else a private copy (constants at the start, the rest
  /// zero). Give it back with release_region(). Thread-safe.
  std::byte* acquire_region() const;
  /// Returns a region from acquire_region().
  void release_region(std::byte* region) const;

 private:
  /// A private region: the constants at the start, the rest zero (every page written).
  std::unique_ptr<std::byte[]> copy_region() const;

  std::shared_ptr<const isa::Program> program_;
  std::shared_ptr<SimState> state_;
  int card_;
  std::uint64_t owner_;
  std::uint64_t base_;
  std::uint64_t allocation_id_;
  std::shared_ptr<std::byte> storage_;
  std::uint64_t size_;
  std::shared_ptr<const PreparedProgram> prepared_;
  ProgramCost cost_;
  std::int64_t modelled_ns_ = 0;  ///< Load + kernels + Store, one execution
  mutable std::mutex regions_mu_;
  mutable bool primary_busy_ = false;
  mutable std::vector<std::unique_ptr<std::byte[]>> spare_regions_;
};

}  // namespace furiosa::device::sim
