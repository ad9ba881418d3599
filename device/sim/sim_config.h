// Private to the simulator: checking a SimConfig. The public side (SimConfig,
// sim_config_from_environment, sim_default_lock_dir) is declared in furiosa/device/sim.h.
#pragma once

#include "furiosa/device/sim.h"

namespace furiosa::device::sim {

/// Throws Error(InvalidArgument) naming the first field of `config` that no simulator can use
/// (negative counts, non-positive rates, compute_threads outside 1..64).
void validate_config(const SimConfig& config);

}  // namespace furiosa::device::sim
