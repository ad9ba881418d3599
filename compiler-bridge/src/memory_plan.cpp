// See memory_plan.h.
#include "memory_plan.h"

#include <algorithm>
#include <numeric>

namespace furiosa::compiler::detail {

std::vector<std::uint64_t> plan_buffers(const std::vector<BufferUse>& buffers, std::uint64_t alignment,
                                        std::uint64_t& peak) {
  const auto align_up = [alignment](std::uint64_t v) { return (v + alignment - 1) / alignment * alignment; };
  std::vector<std::size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (buffers[a].size != buffers[b].size) return buffers[a].size > buffers[b].size;
    return buffers[a].first < buffers[b].first;
  });
  std::vector<std::uint64_t> offset(buffers.size(), 0);
  std::vector<std::size_t> placed;
  peak = 0;
  for (std::size_t i : order) {
    const BufferUse& b = buffers[i];
    // The address ranges of placed buffers live at the same time as b, by start.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> busy;
    for (std::size_t j : placed) {
      const BufferUse& o = buffers[j];
      if (o.first <= b.last && b.first <= o.last) busy.emplace_back(offset[j], offset[j] + o.size);
    }
    std::sort(busy.begin(), busy.end());
    std::uint64_t at = 0;
    for (const auto& [start, end] : busy) {
      if (at + b.size <= start) break;  // fits in the gap before this one
      at = std::max(at, align_up(end));
    }
    offset[i] = at;
    peak = std::max(peak, align_up(at + b.size));
    placed.push_back(i);
  }
  return offset;
}

}  // namespace furiosa::compiler::detail
