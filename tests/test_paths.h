// Paths of this build that the tests read (models, tools, work folders): each is a macro the
// test's CMake target defines with furiosa_test_paths (tests/CMakeLists.txt), expanding to a call
// of build_path, whose table is generated per test executable. Keeping the values out of the
// compile commands lets ccache reuse test objects across build trees and clones.
#pragma once

#include <string_view>

namespace furiosa::test {

/// The value of path `name` (e.g. "FURIOSA_SHARED_MODELS_DIR") in this build, a NUL-terminated
/// string with static storage. Aborts with a message naming `name` when the executable's CMake
/// target declared no such path (a build error caught on first use).
const char* build_path(std::string_view name);

}  // namespace furiosa::test
