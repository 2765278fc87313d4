"""The client against a real `refine-supervisor serve` (the debug build beside the guardian,
or `$REFINE_BIN`): launch, list, show, wait, signal, stop, and the refusals as exceptions."""

import os
import pathlib
import socket
import subprocess
import time

import pytest

from refine_supervisor_client import Client, Launched, NotFound, RefineError

ROOT = pathlib.Path(__file__).resolve().parents[4]
BIN = pathlib.Path(os.environ.get("REFINE_BIN", ROOT / "target" / "debug" / "refine-supervisor"))


@pytest.fixture
def service(tmp_path):
    if not BIN.exists():
        pytest.skip(f"{BIN} is not built (cargo build --workspace --bins)")
    proc = subprocess.Popen(
        [str(BIN), "--home", str(tmp_path), "--port", "7411", "serve"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "REFINE_LOG_FILE": str(tmp_path / "service.log")},
    )
    sock = tmp_path / "run" / "7411" / "supervisor.sock"
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(str(sock))
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("serve did not come up")
            time.sleep(0.02)  # polling a connect: there is no readiness event to wait on
    yield tmp_path
    proc.terminate()
    proc.wait(timeout=60)


def test_launch_wait_returns_the_exit_code(service, tmp_path):
    with Client.connect(home=str(service)) as c:
        scope = c.launch(["sh", "-c", "pwd > where; exit 3"], label="job", cwd=tmp_path)
        assert isinstance(scope, Launched)
        done = c.wait("job", timeout=30)
        assert (done.id, done.state, done.exit_code, done.timed_out) == (scope.id, "exited", 3, False)
        assert (tmp_path / "where").read_text().strip() == str(tmp_path)
        shown = c.show(scope.id[:8])
        assert shown.state == "exited" and shown.label == "job"


def test_bytes_argv_env_and_list(service):
    with Client.connect(home=str(service)) as c:
        scope = c.launch([b"sh", b"-c", b'test "$GREETING" = hi'], env={"GREETING": "hi"})
        assert c.wait(scope.id).exit_code == 0
        assert scope.id in [s.id for s in c.list(all=True)]
        with pytest.raises(ValueError, match="not UTF-8"):
            c.launch([b"\xff"])


def test_signal_wait_timeout_and_stop(service):
    with Client.connect(home=str(service)) as c:
        scope = c.launch(["sleep", "600"])
        timed = c.wait(scope.id, timeout=0.2)
        assert timed.timed_out and timed.state == "live"
        assert c.signal(scope.id, "USR1") is True
        assert c.wait(scope.id, timeout=30).exit_code == 128 + 10
        assert c.signal(scope.id, "USR1") is False
        other = c.launch(["sleep", "600"])
        doc = c.stop(other.id, grace=2)
        assert doc["state"] == "exited"
        assert c.show(other.id).state == "exited"


def test_refusals_are_exceptions(service):
    with Client.connect(home=str(service)) as c:
        with pytest.raises(NotFound):
            c.show("nobody")
        with pytest.raises(RefineError) as bad:
            c.signal(c.launch(["sleep", "600"]).id, "NOPE")
        assert bad.value.kind == "bad_request"
        # The connection is still good after a refusal.
        assert isinstance(c.list(), list)
        for s in c.list():
            c.stop(s.id)


def test_asyncio_client_waits_on_two_scopes_at_once(service):
    import asyncio

    from refine_supervisor_client import AsyncClient

    async def main():
        c1 = await AsyncClient.connect(home=str(service))
        c2 = await AsyncClient.connect(home=str(service))
        async with c1, c2:
            a = await c1.launch(["sh", "-c", "exit 4"])
            b = await c2.launch(["sh", "-c", "exit 5"])
            done = await asyncio.gather(c1.wait(a.id, timeout=30), c2.wait(b.id, timeout=30))
            assert [d.exit_code for d in done] == [4, 5]
            assert (await c1.show(a.id)).state == "exited"

    asyncio.run(main())


def test_input_feeds_the_workload(service, tmp_path):
    with Client.connect(home=str(service)) as c:
        scope = c.launch(["sh", "-c", "cat > got"], cwd=tmp_path, input=True)
        assert c.input(scope.id, "one\n") == 4
        assert c.input(scope.id, b"two\n", close=True) == 4
        assert c.wait(scope.id, timeout=30).exit_code == 0
        assert (tmp_path / "got").read_text() == "one\ntwo\n"
        with pytest.raises(RefineError, match="no open input"):
            c.input(scope.id, "late")


def test_follow_yields_the_output_until_the_end(service):
    with Client.connect(home=str(service)) as c:
        scope = c.launch(["sh", "-c", "printf 'a\\n'; printf 'b\\0\\n' >&2; printf 'c\\n'"])
        out = b"".join(c.follow(scope.id))
        assert out == b"a\nc\n"
        assert c.followed == {"stream": "stdout", "end_offset": 4, "complete": True}
        assert b"".join(c.follow(scope.id, "stderr")) == b"b\0\n"
        assert c.wait(scope.id).exit_code == 0

