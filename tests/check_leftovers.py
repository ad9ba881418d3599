"""Fails when the test suite left something behind in build tree BUILD_DIR: a process whose
executable or command line is in BUILD_DIR (furiosa-serve, furiosa-run, test binaries, their
children), or a simulated PE lock still held in BUILD_DIR/test-locks (the lock directories the
server tests give their processes, tests/server/serve_process.py). Each leftover is printed on one
line, then killed, so a red run does not block the machine either.

Run by ctest as the cleanup of the fixture every test requires (tests/CMakeLists.txt), so it runs
after the whole suite, green or red:  python3 tests/check_leftovers.py BUILD_DIR
"""

import fcntl
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys


def shown(text):
    """`text` on one line, control and non-ASCII characters escaped."""
    return "".join(c if " " <= c <= "~" else f"\\x{ord(c):02x}" for c in text)


def ancestors():
    """This process and its ancestors (ctest, the shell that ran it): not leftovers."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return pids


def leftover_processes(build):
    skip = ancestors()
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        try:
            exe = os.readlink(entry / "exe")
        except OSError:
            exe = ""
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        cmdline = " ".join(a.decode(errors="replace") for a in argv if a)
        if not cmdline:
            continue  # a kernel thread or a zombie
        if exe.startswith(build + "/") or build + "/" in cmdline:
            found.append((int(entry.name), cmdline))
    return found


def held_locks(build):
    held = []
    root = pathlib.Path(build) / "test-locks"
    if not root.is_dir():
        return held
    for path in sorted(root.rglob("*.lock")):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue  # gone, or not a regular file: nothing can hold it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.append(path)
        finally:
            os.close(fd)
    return held


def tests_outside_fixture(build):
    """Tests that require no fixture this check cleans up, so ctest may run them beside this
    check, which would then kill them as leftovers (a plain add_test() in a subdirectory misses
    tests/CMakeLists.txt's loop). Read from ctest's own JSON description of the suite."""
    ctest = shutil.which("ctest")
    if ctest is None:
        return []
    out = subprocess.run([ctest, "--show-only=json-v1"], cwd=build, capture_output=True, text=True)
    if out.returncode != 0:
        return []
    tests = [{p["name"]: p["value"] for p in t.get("properties", [])} | {"": t["name"]}
             for t in json.loads(out.stdout).get("tests", [])]
    # This check is the cleanup of every fixture it lists (furiosa_suite, ort_node).
    cleaned = set()
    for props in tests:
        if "furiosa_suite" in props.get("FIXTURES_CLEANUP", []):
            cleaned = set(props["FIXTURES_CLEANUP"])
    # (catch_discover_tests registers a placeholder "<exe>_NOT_BUILT..." test, with no
    # properties, for an executable a partial build left out; it runs nothing.)
    return [props[""] for props in tests
            if "furiosa_suite" not in props.get("FIXTURES_CLEANUP", [])
            and "_NOT_BUILT" not in props[""]
            and not cleaned & set(props.get("FIXTURES_REQUIRED", []))]


def main():
    if len(sys.argv) != 2:
        print("usage: check_leftovers.py BUILD_DIR", file=sys.stderr)
        return 2
    build = os.path.realpath(sys.argv[1])
    locks = held_locks(build)
    for path in locks:
        print(f"leftover PE lock still held: {shown(str(path))}")
    processes = leftover_processes(build)
    for pid, cmdline in processes:
        print(f"leftover process {pid}: {shown(cmdline)}")
        try:
            os.kill(pid, signal.SIGKILL)  # releases its locks too
        except ProcessLookupError:
            pass
    unfixtured = tests_outside_fixture(build)
    for name in unfixtured:
        print(f"test outside the furiosa_suite fixture (ctest may run it beside this check): {shown(name)}")
    if processes or locks:
        print(f"check_leftovers: {len(processes)} processes, {len(locks)} held locks left by the suite in {build}")
        return 1
    if unfixtured:
        return 1
    print(f"check_leftovers: no process or PE lock left by the suite in {build}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
