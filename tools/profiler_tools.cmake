# Profiler tools (included from tools/CMakeLists.txt).

# furiosa-trace: reads a Chrome trace or CSV record table back and prints the reports.
add_executable(furiosa-trace ${CMAKE_CURRENT_LIST_DIR}/furiosa_trace.cpp)
target_link_libraries(furiosa-trace PRIVATE furiosa::profiler CLI11::CLI11 fmt::fmt)
furiosa_warnings(furiosa-trace)

# profiler-bench: cost of a recorded span, and MobileNetV2 throughput with tracing on vs off.
add_executable(profiler-bench ${CMAKE_CURRENT_LIST_DIR}/profiler_bench.cpp)
target_link_libraries(profiler-bench PRIVATE furiosa_bench furiosa::profiler furiosa::runtime CLI11::CLI11
  fmt::fmt spdlog::spdlog Threads::Threads)
target_compile_definitions(profiler-bench PRIVATE
  FURIOSA_SHARED_MODELS_DIR="${FURIOSA_SHARED_MODELS_DIR}")
furiosa_warnings(profiler-bench)
