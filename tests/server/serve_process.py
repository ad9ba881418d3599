"""A furiosa-serve process for tests that cannot outlive them.

Every ServeProcess:
- runs in its own process group (start_new_session), so a wrapper script's children go with it;
- holds its simulated PEs in a lock directory of its own (FURIOSA_SIM_LOCK_DIR), under
  FURIOSA_TEST_LOCK_ROOT when ctest sets it (tests/CMakeLists.txt), so a process that somehow
  survives can never block other programs on the machine, and the suite's leftover check
  (tests/check_leftovers.py) finds its locks if it is still holding them;
- can start with its simulated devices held by a gate (FURIOSA_SIM_GATE, docs/devices.md): requests
  are admitted and stay in flight until open_gate(), whatever the machine's speed;
- reads its output on a thread, so a test can wait for a line without blocking forever;
- is killed (the whole group, SIGKILL) when the `with` block or the fixture ends, pass or fail, and
  at interpreter exit as a last resort.
"""

import atexit
import itertools
import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

_live = set()
_counter = itertools.count()


@atexit.register
def _kill_survivors():
    for p in list(_live):
        p.kill()


def env_path(name):
    """The existing path in environment variable `name` (set by ctest, tests/CMakeLists.txt);
    fails the test with one line when it is unset or missing."""
    value = os.environ.get(name)
    if not value or not pathlib.Path(value).exists():
        pytest.fail(f"{name}={value!r} is not an existing path (run through ctest)")
    return pathlib.Path(value)


def lock_dir():
    """A fresh simulator lock directory for one process (mode 0700, as the simulator requires)."""
    root = os.environ.get("FURIOSA_TEST_LOCK_ROOT")
    if root:
        path = pathlib.Path(root) / f"{os.getpid()}-{next(_counter)}"
        path.mkdir(mode=0o700, parents=True, exist_ok=False)
        return path
    return pathlib.Path(tempfile.mkdtemp(prefix="furiosa-test-locks-"))


class ServeProcess:
    """`command` (furiosa-serve or a wrapper of it) started with `env` (default: this process's)
    plus a lock directory of its own; `gate`: a path whose absence holds every execution of its
    simulated devices (FURIOSA_SIM_GATE); `min_execution_us`: each execution takes at least this
    long (FURIOSA_SIM_MIN_EXECUTION_US). Waits for the "HTTP: 127.0.0.1:PORT" line."""

    def __init__(self, command, env=None, gate=None, min_execution_us=None, start_timeout=300):
        env = dict(os.environ if env is None else env)
        self.lock_dir = lock_dir()
        env["FURIOSA_SIM_LOCK_DIR"] = str(self.lock_dir)
        if gate is not None:
            env["FURIOSA_SIM_GATE"] = str(gate)
        if min_execution_us is not None:
            env["FURIOSA_SIM_MIN_EXECUTION_US"] = str(min_execution_us)
        self.command = [str(c) for c in command]
        self.gate = pathlib.Path(gate) if gate is not None else None
        self.lines = []
        self._cv = threading.Condition()
        self._eof = False
        self.proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env, start_new_session=True)
        _live.add(self)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            m = self.wait_for(r"HTTP: 127\.0\.0\.1:(\d+)", start_timeout)
            self.port = int(m.group(1))
            self.url = f"http://127.0.0.1:{self.port}"
        except BaseException:
            self.kill()
            raise

    def _read(self):
        for line in self.proc.stdout:
            with self._cv:
                self.lines.append(line)
                self._cv.notify_all()
        with self._cv:
            self._eof = True
            self._cv.notify_all()

    def output(self):
        with self._cv:
            return "".join(self.lines)

    def wait_for(self, pattern, timeout):
        """The first output line matching `pattern` (re.match); fails the test when the process
        ends or `timeout` seconds pass first (a bound against hanging, not a speed claim)."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cv:
            while True:
                for line in self.lines[seen:]:
                    m = regex.match(line)
                    if m:
                        return m
                seen = len(self.lines)
                if self._eof:
                    pytest.fail(f"{self.command[0]} exited before printing {pattern!r}: " + "".join(self.lines))
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"{self.command[0]} printed no {pattern!r} within {timeout} s: " + "".join(self.lines))
                self._cv.wait(left)

    def open_gate(self):
        """Lets the held executions run (creates the gate file)."""
        self.gate.touch()

    def close_gate(self):
        """Holds executions not yet started (removes the gate file)."""
        self.gate.unlink(missing_ok=True)

    def stop(self, timeout=120):
        """SIGTERM (furiosa-serve's graceful shutdown) and its exit status; the group is killed
        if it has not exited within `timeout` seconds."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._reader.join(timeout=10)
        self.kill()  # anything left in its group
        return self.proc.returncode

    def kill(self):
        """Kills the whole process group (idempotent) and reaps the process."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            return  # still there: tests/check_leftovers.py reports it and its locks
        _live.discard(self)
        shutil.rmtree(self.lock_dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        return False
