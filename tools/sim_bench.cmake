# sim-bench: speed of the simulator's functional kernels on real models (issue 8). Reads the
# simulator's private kernel-statistics hook (device/sim/kernels.h).
add_executable(sim-bench sim_bench.cpp)
target_link_libraries(sim-bench PRIVATE furiosa_bench furiosa::runtime CLI11::CLI11 fmt::fmt Threads::Threads)
target_include_directories(sim-bench PRIVATE ${PROJECT_SOURCE_DIR}/device/sim)
target_compile_definitions(sim-bench PRIVATE
  FURIOSA_SHARED_MODELS_DIR="${FURIOSA_SHARED_MODELS_DIR}")
furiosa_warnings(sim-bench)
