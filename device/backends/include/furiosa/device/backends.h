// The process's device backends: the registry every session, furiosactl and furiosa-run use by
// default, filled from the backends this build was configured with (CMake FURIOSA_DEVICE_BACKENDS,
// default "sim;pcie"), in the style of IREE's HAL driver registration.
#pragma once

#include <string>
#include <vector>

#include "furiosa/device/driver.h"

namespace furiosa::device {

/// The process-wide registry with every built-in backend registered (each backend's
/// register_<name>_backend()). Created once, thread-safely, on first use; the devices it opens
/// stand for hardware, which is process-wide. Tests that want isolation create their own drivers.
DriverRegistry& builtin_registry();

/// Names of the backends compiled into this build, in configuration order ("sim", "pcie").
std::vector<std::string> builtin_backend_names();

}  // namespace furiosa::device
