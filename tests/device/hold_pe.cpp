// Test helper for system-wide PE ownership: opens a device file of a simulator whose lock
// directory is argv[1], prints "ready" and holds it until killed.
//   hold_pe <lock-dir> <device-file>
#include <unistd.h>

#include <cstdio>
#include <exception>

#include "furiosa/device/device.h"
#include "furiosa/device/sim.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: hold_pe <lock-dir> <device-file>\n");
    return 2;
  }
  try {
    furiosa::device::SimConfig config;
    config.lock_dir = argv[1];
    auto driver = furiosa::device::create_sim_driver(config);
    auto device = driver->open(furiosa::device::DeviceFile::parse(argv[2]));
    std::printf("ready\n");
    std::fflush(stdout);
    for (;;) ::pause();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
