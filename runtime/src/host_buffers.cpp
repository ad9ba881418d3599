// HostBuffers and HostBufferPool (host_buffers.h).
#include "host_buffers.h"

#include <algorithm>

namespace furiosa::runtime::detail {

std::span<std::byte> HostBuffers::writable(const program::CompiledModel& model, int slot) {
  const auto i = static_cast<std::size_t>(slot);
  const auto& desc = model.slots[i];
  if (desc.layout == isa::Layout::Linear) {
    // A moved-from Tensor (an output given to the caller) has lost its storage: make a new one.
    if (!tensors[i] || tensors[i]->dtype() != desc.dtype || tensors[i]->shape() != desc.shape ||
        tensors[i]->bytes().size() != desc.size_bytes()) {
      tensors[i] = Tensor::uninitialized(desc.dtype, desc.shape);  // the writer sets every byte
    }
    ref[i] = &*tensors[i];
    return tensors[i]->bytes();
  }
  raw[i].resize(desc.size_bytes());
  return raw[i];
}

std::span<const std::byte> HostBuffers::readable(int slot) const {
  const auto i = static_cast<std::size_t>(slot);
  return ref[i] ? ref[i]->bytes() : std::span<const std::byte>(raw[i]);
}

HostBufferPool::HostBufferPool(const program::CompiledModel& model, std::size_t prepared) : model_(model) {
  std::vector<bool> external(model.slots.size(), false);
  for (int s : model.input_slots) external[static_cast<std::size_t>(s)] = true;
  for (int s : model.output_slots) external[static_cast<std::size_t>(s)] = true;
  for (std::size_t n = 0; n < prepared; ++n) {
    auto b = std::make_unique<HostBuffers>(model.slots.size());
    for (std::size_t s = 0; s < model.slots.size(); ++s) {
      if (!external[s] && !model.slots[s].constant) b->writable(model, static_cast<int>(s));
    }
    free_.push_back(std::move(b));
  }
}

std::unique_ptr<HostBuffers> HostBufferPool::acquire() {
  {
    std::lock_guard lock(mu_);
    if (!free_.empty()) {
      auto b = std::move(free_.back());
      free_.pop_back();
      return b;
    }
  }
  return std::make_unique<HostBuffers>(model_.slots.size());
}

void HostBufferPool::release(std::unique_ptr<HostBuffers> buffers) {
  std::fill(buffers->ref.begin(), buffers->ref.end(), nullptr);  // no pointers to the caller's inputs remain
  std::lock_guard lock(mu_);
  free_.push_back(std::move(buffers));
}

}  // namespace furiosa::runtime::detail
