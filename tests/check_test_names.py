"""Fails when two tests of build tree BUILD_DIR share a name.

CTest keys test properties and fixture dependencies by name: of two tests with one name (say one
Catch2 case in two test binaries), only one gets FIXTURES_REQUIRED furiosa_suite, so the suite's
cleanup (check_leftovers.py) may start while the other still runs and kill it. CMake refuses
duplicate add_test() names only within one directory; this check covers the whole tree, Catch2's
discovered cases included.

Run by ctest:  python3 tests/check_test_names.py CTEST BUILD_DIR
"""

import collections
import json
import subprocess
import sys


def shown(text):
    """`text` on one line, control and non-ASCII characters escaped."""
    return "".join(c if " " <= c <= "~" else f"\\x{ord(c):02x}" for c in text)


def main():
    ctest, build_dir = sys.argv[1], sys.argv[2]
    listing = subprocess.run([ctest, "--test-dir", build_dir, "--show-only=json-v1"],
                             check=True, capture_output=True, text=True).stdout
    tests = json.loads(listing)["tests"]
    counts = collections.Counter(test["name"] for test in tests)
    duplicates = sorted(name for name, count in counts.items() if count > 1)
    for name in duplicates:
        commands = [" ".join(t.get("command", [])[:1]) for t in tests if t["name"] == name]
        print(f"duplicate test name '{shown(name)}' in: {', '.join(shown(c) for c in commands)}")
    print(f"check_test_names: {len(tests)} tests, {len(duplicates)} duplicate names")
    return 1 if duplicates else 0


if __name__ == "__main__":
    sys.exit(main())
