// Host buffers of the requests in flight: one set of slot buffers per request, leased from a pool
// so that the hot path allocates only the outputs it hands to the caller.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "furiosa/program/compiled_model.h"
#include "furiosa/core/tensor.h"

namespace furiosa::runtime::detail {

/// The host buffers of one inference, one per slot of the compiled model: dense (Linear) slots
/// hold Tensors, lowered slots raw bytes; user inputs and constants are referenced in place
/// (`ref`), never copied. A slot keeps its storage from one inference to the next unless its
/// Tensor was handed to the caller as an output. Thread-compatible: one request uses it at a time.
struct HostBuffers {
  /// Empty buffers for `slots` slots (nothing allocated yet).
  explicit HostBuffers(std::size_t slots) : tensors(slots), raw(slots), ref(slots, nullptr) {}

  std::vector<std::optional<Tensor>> tensors;  ///< dense slots written by this inference
  std::vector<std::vector<std::byte>> raw;     ///< lowered slots
  /// The Tensor each dense slot reads from: its own, a user input or a constant; null for a
  /// lowered slot or one not written yet.
  std::vector<const Tensor*> ref;

  /// The bytes of slot `slot` to write, exactly `model.slots[slot].size_bytes()` long, allocated
  /// if the slot has no storage of the right size (a dense slot's Tensor given away as an output).
  std::span<std::byte> writable(const program::CompiledModel& model, int slot);
  /// The bytes of slot `slot` to read: the referenced Tensor's, else the raw bytes.
  std::span<const std::byte> readable(int slot) const;
};

/// Sets of HostBuffers reused across inferences. Thread-safe.
class HostBufferPool {
 public:
  /// Makes `prepared` sets for `model` with every intermediate slot (neither a model input, a
  /// model output nor a constant) allocated now. `model` is borrowed: it must outlive the pool.
  HostBufferPool(const program::CompiledModel& model, std::size_t prepared);

  /// A free set, or a new one when every set is in use. Never null; may throw std::bad_alloc.
  std::unique_ptr<HostBuffers> acquire();
  /// Gives a set back. Its references to the caller's inputs are cleared first, so none outlives
  /// the request.
  void release(std::unique_ptr<HostBuffers> buffers);

 private:
  const program::CompiledModel& model_;
  std::mutex mu_;
  std::vector<std::unique_ptr<HostBuffers>> free_;
};

}  // namespace furiosa::runtime::detail
