// The runtime's CPU operators: Quantize, Dequantize, Lower, Unlower.
#pragma once

#include <cstddef>
#include <span>

#include "furiosa/program/compiled_model.h"

namespace furiosa::runtime::detail {

/// Runs `op` reading `in` (laid out as slot `in_slot`) and writing `out` (slot `out_slot`).
/// Buffers are exactly the slots' size_bytes(). Thread-safe (no shared state).
void run_host_step(const program::CpuOp& op, const program::HostSlot& in_slot,
                std::span<const std::byte> in, const program::HostSlot& out_slot,
                std::span<std::byte> out);

}  // namespace furiosa::runtime::detail
