# perf-guide: the performance guide's optimization steps on MobileNetV2 (../shared/models) and the
# project's SSD-MobileNet v1 (models/ssd_mobilenet_v1.py), and its
# questions answered for ResNet-50 v1.5 (issues 6 and 16), on the simulator. The ResNet-50 models
# are generated into the build tree by the resnet50-model target.
add_executable(perf-guide perf_guide.cpp)
target_link_libraries(perf-guide PRIVATE furiosa_bench furiosa::runtime furiosa::host furiosa::profiler CLI11::CLI11 fmt::fmt spdlog::spdlog)
target_compile_definitions(perf-guide PRIVATE
  FURIOSA_RESNET50_FLOAT="${CMAKE_BINARY_DIR}/models/resnet50_v1_5.onnx"
  FURIOSA_RESNET50_UINT8="${CMAKE_BINARY_DIR}/models/resnet50_v1_5_uint8.onnx"
  FURIOSA_MOBILENETV2="${FURIOSA_SHARED_MODELS_DIR}/onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx"
  FURIOSA_SSD_MOBILENET="${CMAKE_BINARY_DIR}/models/ssd_mobilenet_v1.onnx")
add_dependencies(perf-guide resnet50-model ssd-mobilenet-model)
furiosa_warnings(perf-guide)
