"""The example runs as a host would run it, and leaves nothing behind (/proc)."""

import os
import pathlib
import subprocess
import sys

from conftest import BIN, PACKAGE

MARK = b"600.25"  # the example's sleeps, found by their argument


def sleepers():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", MARK]:
            found.append(int(pid))
    return found


def test_replace_killpg_leaves_no_process(home):
    assert not sleepers(), "a sleep of the example was running before it"
    env = {**os.environ, "PYTHONPATH": str(PACKAGE / "src"), "REFINE_BIN": str(BIN)}
    run = subprocess.run([sys.executable, str(PACKAGE / "examples" / "replace_killpg.py"), str(home)],
                         env=env, capture_output=True, timeout=120)
    assert run.returncode == 0, run
    assert run.stdout.split()[:2] == [b"exited", b"timed_out"], run
    assert not sleepers()
