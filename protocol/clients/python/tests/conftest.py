"""What the tests share: the binaries (`$REFINE_BIN`, else the debug build), a service on a
fresh home, a client of either mode, the wire additions the binary has, and the /proc checks.

Nothing here sleeps to synchronize: `wait_until` polls a condition against a generous deadline,
and deaths are read from /proc (a pid is the same process only while its start time is)."""

import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

from refine_supervisor_client import AsyncClient, Client

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = HERE.parent
ROOT = PACKAGE.parents[2]
BIN = pathlib.Path(os.environ.get("REFINE_BIN", ROOT / "target" / "debug" / "refine-supervisor"))
DEADLINE = 60.0


def _probe(*args):
    if not BIN.exists():
        return b""
    return subprocess.run([str(BIN), *args], capture_output=True).stdout


_REQUEST_SCHEMA = _probe("schema", "request")
HAS_END_WITH_CONNECTION = b"end_with_connection" in _REQUEST_SCHEMA
HAS_EVENTS = b'"events"' in _REQUEST_SCHEMA
HAS_END_WITH_PARENT = b"--end-with-parent" in _probe("run", "--help")
NO_END_WITH_CONNECTION = "the binary predates the socket's end_with_connection (keep=False)"
NO_EVENTS = "the binary predates the socket's events op"


def wait_until(cond, what, deadline=DEADLINE):
    end = time.monotonic() + deadline
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > end:
            pytest.fail(f"not within {deadline} s: {what}")
        time.sleep(0.01)  # polling a condition against a deadline; no event to wait on


def start_time(pid):
    """The process's start time (clock ticks), or None when it is gone or a zombie."""
    try:
        raw = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def witnesses(show):
    """(pid, start time) of every process a `show` document lists in the scope."""
    return [(p["pid"], p["start_time"]) for p in show.raw.get("processes") or []]


def survivors(seen):
    return [(pid, t) for pid, t in seen if start_time(pid) == t]


def assert_tree_gone(seen):
    assert seen, "no process was witnessed"
    wait_until(lambda: not survivors(seen), f"every process of {seen} has ended")


def tree_of(client, id, n):
    """Waits until the scope shows `n` processes; their witnesses."""
    return wait_until(lambda: (lambda w: w if len(w) >= n else None)(witnesses(client.show(id))),
                      f"{n} processes in scope {id}")


@pytest.fixture
def home(tmp_path):
    if not BIN.exists():
        pytest.skip(f"{BIN} is not built (cargo build --workspace --bins)")
    return tmp_path / "home"


@pytest.fixture
def service(home):
    home.mkdir()
    proc = subprocess.Popen(
        [str(BIN), "--home", str(home), "--port", "7411", "serve"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "REFINE_LOG_FILE": str(home / "service.log")},
    )
    sock = home / "run" / "7411" / "supervisor.sock"

    def up():
        if proc.poll() is not None:
            pytest.fail("serve exited before its socket took a connection")
        with socket.socket(socket.AF_UNIX) as s:
            try:
                s.connect(str(sock))
            except OSError:
                return False
        return True

    wait_until(up, "serve takes a connection")
    yield home
    proc.terminate()
    proc.wait(timeout=60)


@pytest.fixture(params=["socket", "local"])
def mode(request, home):
    return request.param


@pytest.fixture
def connect(mode, request):
    """Makes clients of the test's mode (a service is started for socket mode)."""
    if mode == "socket":
        home = request.getfixturevalue("service")
        return lambda: Client.connect(home=str(home))
    home = request.getfixturevalue("home")
    return lambda: Client.local(home=str(home), bin=BIN)


@pytest.fixture
def aconnect(mode, request):
    if mode == "socket":
        home = request.getfixturevalue("service")
        return lambda: AsyncClient.connect(home=str(home))
    home = request.getfixturevalue("home")

    async def local():
        return AsyncClient.local(home=str(home), bin=BIN)

    return local


@pytest.fixture
def default_keep(mode):
    """The launch arguments of a test that is not about keep: the default (keep=False), but on
    a service that predates end_with_connection, which refuses it, keep=True."""
    return {"keep": True} if mode == "socket" and not HAS_END_WITH_CONNECTION else {}


def host(mode, home, keep, argv):
    """A host process (a child python) that launches `argv` and prints the id, then waits for
    its stdin to close; the test kills it as a crash would."""
    code = (
        "import sys; from refine_supervisor_client import Client\n"
        f"c = Client.connect(home={str(home)!r}) if {mode!r} == 'socket' else "
        f"Client.local(home={str(home)!r}, bin={str(BIN)!r})\n"
        f"print(c.launch({argv!r}, keep={keep!r}).id, flush=True)\n"
        "sys.stdin.read()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(PACKAGE / "src")}
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env)
