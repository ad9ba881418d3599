# furiosactl: device listing (list / info, text or JSON) over the registered backends.
add_executable(furiosactl ${CMAKE_CURRENT_LIST_DIR}/furiosactl.cpp)
target_link_libraries(furiosactl PRIVATE furiosa::device_backends CLI11::CLI11 nlohmann_json::nlohmann_json
  fmt::fmt spdlog::spdlog)
furiosa_warnings(furiosactl)
