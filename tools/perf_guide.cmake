# perf-guide: the performance guide's questions answered on the simulator for ResNet-50 v1.5
# (issue 6). Its models are generated into the build tree by the resnet50-model target.
add_executable(perf-guide perf_guide.cpp)
target_link_libraries(perf-guide PRIVATE furiosa_bench furiosa::runtime CLI11::CLI11 fmt::fmt spdlog::spdlog)
target_compile_definitions(perf-guide PRIVATE
  FURIOSA_RESNET50_FLOAT="${CMAKE_BINARY_DIR}/models/resnet50_v1_5.onnx"
  FURIOSA_RESNET50_UINT8="${CMAKE_BINARY_DIR}/models/resnet50_v1_5_uint8.onnx")
add_dependencies(perf-guide resnet50-model)
furiosa_warnings(perf-guide)
