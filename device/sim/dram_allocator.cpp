// The simulated DRAM (dram_allocator.h): first-fit placement, ownership checks, DMA bounds.
#include "dram_allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "furiosa/core/error.h"

namespace furiosa::device::sim {

namespace {

// Zero-filled host storage of `bytes` bytes; null when the host is out of memory.
std::shared_ptr<std::byte> zeroed_storage(std::uint64_t bytes) {
  void* p = std::calloc(static_cast<std::size_t>(std::max<std::uint64_t>(bytes, 1)), 1);
  if (p == nullptr) return nullptr;
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); });
}

}  // namespace

DramAllocator::DramAllocator(int cards, std::uint64_t bytes_per_card)
    : bytes_per_card_(bytes_per_card), cards_(static_cast<std::size_t>(cards)) {}

std::pair<std::uint64_t, Allocation> DramAllocator::allocate(const DeviceFile& file,
                                                             std::uint64_t owner,
                                                             std::uint64_t bytes) {
  const std::uint64_t dram = bytes_per_card_;
  std::lock_guard lock(mu_);
  auto& card = cards_[static_cast<std::size_t>(file.card)];
  std::uint64_t used = 0;
  for (const auto& entry : card) used += entry.second.reserved;
  auto exhausted = [&] {
    return Error(ErrorCode::DeviceFault,
                 fmt::format("{}: device DRAM exhausted: cannot allocate {} bytes (npu{} has {} "
                             "bytes, {} in use)",
                             file.name(), bytes, file.card, dram, used),
                 ErrorSubject::of_device(file.name()));
  };
  if (bytes > dram) throw exhausted();
  const std::uint64_t reserved =
      std::max<std::uint64_t>((bytes + kDramAlign - 1) / kDramAlign * kDramAlign, kDramAlign);
  std::uint64_t cursor = 0;  // first-fit over the gaps between allocations
  for (const auto& [address, allocation] : card) {
    if (address - cursor >= reserved) break;
    cursor = address + allocation.reserved;
  }
  if (cursor > dram || dram - cursor < reserved) throw exhausted();
  Allocation allocation{bytes, reserved, owner, next_allocation_id_++, zeroed_storage(bytes)};
  if (!allocation.data) {
    throw Error(ErrorCode::DeviceFault,
                fmt::format("{}: host memory for {} bytes of simulated DRAM is exhausted",
                            file.name(), bytes));
  }
  card.emplace(cursor, allocation);
  return {cursor, std::move(allocation)};
}

void DramAllocator::release(const DeviceFile& file, std::uint64_t owner,
                            const DeviceBuffer& buffer) {
  std::lock_guard lock(mu_);
  auto& card = cards_[static_cast<std::size_t>(file.card)];
  auto it = card.find(buffer.address);
  if (it == card.end() || it->second.owner != owner || it->second.size != buffer.size) {
    throw Error(ErrorCode::DeviceFault,
                fmt::format("{}: release of {} bytes at 0x{:x}, which is not a buffer allocated "
                            "on this device",
                            file.name(), buffer.size, buffer.address),
                ErrorSubject::of_device(file.name()));
  }
  card.erase(it);
}

void DramAllocator::release_if_current(int card_index, std::uint64_t address,
                                       std::uint64_t id) noexcept {
  std::lock_guard lock(mu_);
  auto& card = cards_[static_cast<std::size_t>(card_index)];
  auto it = card.find(address);
  if (it != card.end() && it->second.id == id) card.erase(it);
}

void DramAllocator::release_all(int card_index, std::uint64_t owner) noexcept {
  std::lock_guard lock(mu_);
  std::erase_if(cards_[static_cast<std::size_t>(card_index)],
                [owner](const auto& entry) { return entry.second.owner == owner; });
}

Located DramAllocator::locate(const DeviceFile& file, std::uint64_t owner, std::uint64_t address,
                              std::uint64_t bytes, std::string_view access) const {
  std::lock_guard lock(mu_);
  const auto& card = cards_[static_cast<std::size_t>(file.card)];
  auto it = card.upper_bound(address);
  if (it != card.begin()) {
    --it;
    const Allocation& a = it->second;
    const std::uint64_t offset = address - it->first;
    if (a.owner == owner && offset <= a.size && bytes <= a.size - offset) {
      return {a.data, offset};
    }
  }
  throw Error(ErrorCode::DeviceFault,
              fmt::format("{}: {} of {} bytes at 0x{:x} is outside the buffers allocated on "
                          "this device",
                          file.name(), access, bytes, address));
}

}  // namespace furiosa::device::sim
