# Cross build for aarch64 Linux with Debian's cross compiler (g++-aarch64-linux-gnu) against
# Debian's arm64 multiarch libraries (libfmt-dev:arm64, libspdlog-dev:arm64; the header-only
# Catch2 is the host's), as .ci/install-deps installs them. Used with FURIOSA_KERNEL_TESTS_ONLY:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
#     -DFURIOSA_KERNEL_TESTS_ONLY=ON -DFURIOSA_WERROR=ON
# Its kernel tests run under qemu-aarch64 (tests/device/CMakeLists.txt, docs/simulator-speed.md).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Packages' CMake files and libraries under /usr/lib/aarch64-linux-gnu (multiarch), never the
# host's /usr/lib/x86_64-linux-gnu; programs (qemu-aarch64) are the host's.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# The target's C library for qemu-aarch64 -L (Debian's libc6-arm64-cross).
set(FURIOSA_QEMU_SYSROOT /usr/aarch64-linux-gnu CACHE PATH "Sysroot qemu-aarch64 runs the tests with (-L)")
