# sim-bench: speed of the simulator's functional kernels on real models (issue 8). Reads the
# simulator's private kernel-statistics hook (device/sim/kernels.h).
add_executable(sim-bench sim_bench.cpp)
target_link_libraries(sim-bench PRIVATE furiosa_bench furiosa::runtime CLI11::CLI11 fmt::fmt Threads::Threads)
target_include_directories(sim-bench PRIVATE ${PROJECT_SOURCE_DIR}/device/sim)
target_compile_definitions(sim-bench PRIVATE
  FURIOSA_SHARED_MODELS_DIR="${FURIOSA_SHARED_MODELS_DIR}")
furiosa_warnings(sim-bench)

# libcpuid-cap.so: preloaded into ONNX Runtime by tools/ort-compare/compare.sh so that the
# simulator's avx2 / avx-vnni levels are timed against ONNX Runtime's kernels of the same class
# (CPUID faulting hides AVX-512; see the source). x86-64 Linux only.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
  add_library(cpuid-cap MODULE ort-compare/cpuid_cap.cpp)
  furiosa_warnings(cpuid-cap)
endif()
