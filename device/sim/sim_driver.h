// Private: the simulator's configuration from the environment (used by the builtin registry).
#pragma once

#include "furiosa/device/sim.h"

namespace furiosa::device::sim {

/// SimConfig defaults, overridden by FURIOSA_SIM_CARDS and FURIOSA_SIM_PES_PER_CARD when set
/// (and non-empty). Throws Error(InvalidArgument) naming the variable for a value that is not
/// an integer in range (cards 0..256, PEs per card 1..64).
SimConfig sim_config_from_environment();

}  // namespace furiosa::device::sim
