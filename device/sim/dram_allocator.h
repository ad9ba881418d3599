// Private to the simulator: the simulated DRAM of a driver's cards.
//
// Each card has an address space of SimConfig::dram_bytes. Allocations are placed first-fit at
// kDramAlign-aligned addresses and each one owns separate zero-initialised host storage (calloc,
// so untouched pages cost nothing). An allocation belongs to one owner (an open SimDevice); DMA
// must stay inside one allocation of the calling owner, anything else is Error(DeviceFault)
// naming the device file and the address.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "furiosa/device/device.h"

namespace furiosa::device::sim {

/// Alignment (and minimum address-space footprint) of simulated DRAM allocations.
inline constexpr std::uint64_t kDramAlign = 256;

/// One allocation in a card's simulated DRAM.
struct Allocation {
  std::uint64_t size = 0;           ///< bytes requested
  std::uint64_t reserved = 0;       ///< address space taken (size rounded up to kDramAlign)
  std::uint64_t owner = 0;          ///< id of the SimDevice that allocated it
  std::uint64_t id = 0;             ///< unique per allocation, so stale handles are recognised
  std::shared_ptr<std::byte> data;  ///< `size` bytes of storage
};

/// Host storage behind a device address: the allocation's bytes and the offset into them.
struct Located {
  std::shared_ptr<std::byte> data;  ///< the allocation's storage (kept alive by this copy)
  std::uint64_t offset = 0;         ///< of the address within the allocation
};

/// The DRAM of every card of one driver. Thread-safe (one mutex; callers copy data outside it,
/// through the storage a Located or an Allocation shares).
class DramAllocator {
 public:
  /// `cards` cards of `bytes_per_card` bytes each.
  DramAllocator(int cards, std::uint64_t bytes_per_card);

  /// Allocates `bytes` on `file`'s card for `owner`; returns the address and the allocation.
  /// Throws DeviceFault when the card's DRAM has no gap large enough or the host has no memory.
  std::pair<std::uint64_t, Allocation> allocate(const DeviceFile& file, std::uint64_t owner,
                                                std::uint64_t bytes);

  /// Frees the allocation of `owner` at buffer.address; throws DeviceFault when there is none.
  void release(const DeviceFile& file, std::uint64_t owner, const DeviceBuffer& buffer);

  /// Frees the allocation at `address` if it is still allocation `id` (no-op otherwise).
  void release_if_current(int card_index, std::uint64_t address, std::uint64_t id) noexcept;

  /// Frees every allocation of `owner` on `card_index`.
  void release_all(int card_index, std::uint64_t owner) noexcept;

  /// The storage of [address, address + bytes) when it lies inside one allocation of `owner`;
  /// throws DeviceFault naming the device file, the access and the address otherwise.
  Located locate(const DeviceFile& file, std::uint64_t owner, std::uint64_t address,
                 std::uint64_t bytes, std::string_view access) const;

 private:
  const std::uint64_t bytes_per_card_;
  mutable std::mutex mu_;
  std::vector<std::map<std::uint64_t, Allocation>> cards_;  // per card, by address (mu_)
  std::uint64_t next_allocation_id_ = 1;                    // (mu_)
};

}  // namespace furiosa::device::sim
