"""Both modes behind the one API, against the real binaries: a tree launched, waited for,
signalled, fed, followed and stopped; adopt after the host restarted; the keep rule when the
host is killed; the asyncio client. `/proc` says what is left of a stopped tree."""

import asyncio
import os
import signal

import pytest

from conftest import (
    BIN,
    HAS_END_WITH_CONNECTION,
    NO_END_WITH_CONNECTION,
    Client,
    assert_tree_gone,
    host,
    survivors,
    tree_of,
)
from refine_supervisor_client import Launched, SpawnFailed

# A tree that outlives its shell's own wishes: a background child, a setsid daemon that
# ignores SIGTERM, and the shell itself.
TREE = ["sh", "-c", "sleep 600 & setsid sh -c 'trap \"\" TERM; sleep 600' & wait"]
TREE_SIZE = 4  # sh, its sleep, the setsid sh (SIGTERM ignored), its sleep


def test_launch_wait_and_stop_a_tree(connect, default_keep, tmp_path):
    with connect() as c:
        done = c.launch(["sh", "-c", "pwd > where; exit 3"], cwd=tmp_path, label="job", **default_keep)
        assert isinstance(done, Launched)
        result = done.wait(timeout=60)
        assert (result.id, result.state, result.exit_code, result.timed_out) == (done.id, "exited", 3, False)
        assert (tmp_path / "where").read_text().strip() == str(tmp_path)
        assert c.show("job").state == "exited"

        job = c.launch(TREE, **default_keep)
        seen = tree_of(c, job.id, TREE_SIZE)
        timed = job.wait(timeout=0.2)
        assert timed.timed_out and timed.state == "live"
        doc = job.stop(grace=1)
        assert doc["state"] == "exited", doc
        assert_tree_gone(seen)
        assert job.wait(timeout=60).state == "exited"
        assert job.id in [s.id for s in c.list(all=True)]
        assert job.id not in [s.id for s in c.list()]


def test_signal_reaches_the_process_group(connect, default_keep):
    with connect() as c:
        job = c.launch(["sh", "-c", "sleep 600 & wait"], **default_keep)
        tree_of(c, job.id, 2)
        assert job.signal("USR1") is True
        assert job.wait(timeout=60).exit_code == 128 + signal.SIGUSR1
        assert c.signal(job.id, 15) is False


def test_input_feeds_the_workload(connect, default_keep, tmp_path):
    with connect() as c:
        job = c.launch(["sh", "-c", "cat > got"], cwd=tmp_path, input=True, **default_keep)
        assert job.input("one\n") == 4
        assert job.input(b"two\n", close=True) == 4
        assert job.wait(timeout=60).exit_code == 0
        assert (tmp_path / "got").read_text() == "one\ntwo\n"
        with pytest.raises(Exception, match="no open input"):
            job.input("late")


def test_follow_yields_each_stream_until_the_end(connect, default_keep):
    with connect() as c:
        job = c.launch(["sh", "-c", "printf 'a\\n'; printf 'b\\0\\n' >&2; printf 'c\\n'"], **default_keep)
        assert b"".join(job.follow()) == b"a\nc\n"
        assert c.followed == {"stream": "stdout", "end_offset": 4, "complete": True}
        assert b"".join(job.follow("stderr")) == b"b\0\n"
        assert b"".join(job.follow(from_offset=2)) == b"c\n"
        assert job.wait(timeout=60).exit_code == 0


def test_adopt_after_the_host_restarted(connect, mode, home):
    first = host(mode, home, True, TREE)  # keep=True: work meant to outlive this host
    id = first.stdout.readline().decode().strip()
    first.stdin.close()
    assert first.wait(timeout=60) == 0
    with connect() as c:  # the host, restarted
        job = c.adopt(id[:8])
        assert job.id == id
        seen = tree_of(c, id, TREE_SIZE)
        assert job.wait(timeout=0.1).timed_out
        assert job.signal("CONT") is True
        assert job.stop(grace=1)["state"] == "exited"
        assert_tree_gone(seen)
        assert b"".join(job.follow()) == b""


def _crash_the_host(mode, home, keep, connect):
    h = host(mode, home, keep, TREE)
    id = h.stdout.readline().decode().strip()
    assert id, "the host printed no id"
    with connect() as c:
        seen = tree_of(c, id, TREE_SIZE)
    h.kill()  # SIGKILL: no clean-up runs in the host
    h.wait(timeout=60)
    return id, seen


def test_keep_false_ends_with_a_killed_host(connect, mode, home):
    if mode == "socket" and not HAS_END_WITH_CONNECTION:
        pytest.skip(NO_END_WITH_CONNECTION)
    id, seen = _crash_the_host(mode, home, False, connect)
    with connect() as c:
        assert c.wait(id, timeout=60).state == "exited"
    assert_tree_gone(seen)


def test_keep_true_outlives_a_killed_host(connect, mode, home):
    id, seen = _crash_the_host(mode, home, True, connect)
    with connect() as c:
        # A bounded wait as the negative check: the scope is still live after it.
        assert c.wait(id, timeout=1).timed_out
        assert c.show(id).state == "live" and len(survivors(seen)) == len(seen)
        assert c.stop(id, grace=1)["state"] == "exited"
    assert_tree_gone(seen)


def test_local_mode_takes_bytes_argv_env_and_cwd(home, tmp_path):
    odd = os.fsencode(tmp_path) + b"/\xff\xfe"
    os.mkdir(odd)
    with Client.local(home=str(home), bin=BIN) as c:
        job = c.launch([b"sh", b"-c", b'printf "%s|%s|" "$1" "$ODD"; pwd', b"sh", b"\xff"],
                       env={b"ODD": b"\xfe"}, cwd=odd)
        assert job.wait(timeout=60).exit_code == 0
        assert b"".join(job.follow()) == b"\xff|\xfe|" + odd + b"\n"
        assert job.show().raw["record"]["argv_bytes"][4] == [0xFF]
        failed = c.launch(["/nonexistent/program"])
        if isinstance(failed, SpawnFailed):
            assert failed.errno == 2
        else:
            assert c.wait(failed.id, timeout=60).raw["scopes"][0]["exit_code"] in (None, 127)


def test_socket_mode_refuses_non_utf8_argv(service):
    with Client.connect(home=str(service)) as c:
        with pytest.raises(ValueError, match="not UTF-8"):
            c.launch([b"\xff"], keep=True)


def test_asyncio_client_in_both_modes(aconnect, default_keep):
    async def main():
        c1, c2 = await aconnect(), await aconnect()
        async with c1, c2:
            a = await c1.launch(["sh", "-c", "echo out; exit 4"], **default_keep)
            b = await c2.launch(["sh", "-c", "exit 5"], **default_keep)
            done = await asyncio.gather(a.wait(timeout=60), b.wait(timeout=60))
            assert [d.exit_code for d in done] == [4, 5]
            assert b"".join([chunk async for chunk in a.follow()]) == b"out\n"
            assert c1.followed["complete"] is True
            tree = await c1.launch(TREE, input=True, **default_keep)
            adopted = await c2.adopt(tree.id)
            assert await adopted.signal("CONT") is True
            assert await tree.input("x") == 1
            assert (await adopted.wait(timeout=0.1)).timed_out
            assert (await adopted.stop(grace=1))["state"] == "exited"
            assert (await tree.wait(timeout=60)).state == "exited"
            assert [s.state for s in await c1.list(all=True)].count("exited") == 3

    asyncio.run(main())


def test_a_memory_max_ends_the_tree_oom(connect, default_keep):
    """H8 through the client: a tree past its `memory_max` is OOM-killed, and the result says
    so. Skipped where the host has no memory controller to limit it with."""
    from refine_supervisor_client import RefineError

    with connect() as c:
        try:
            job = c.launch(["python3", "-c", "b = b'x' * (64 << 20)"], memory_max=32 << 20,
                           **default_keep)
        except RefineError as e:
            pytest.skip(f"no memory limit here: {e}")
        if isinstance(job, SpawnFailed):
            pytest.skip("no memory limit here")
        assert job.wait(timeout=60).exit_code == 137
        assert c.show(job.id).raw["result"]["reason"] == "oom"


def test_a_ready_probe_makes_the_scope_ready(connect, default_keep):
    """H6 through the client: `ready="cmd=true"` is `starting` until its probe (a scope of its
    own) exits 0, then `ready`."""
    from conftest import wait_until

    with connect() as c:
        job = c.launch(["sleep", "600"], ready="cmd=true", ready_timeout=60, **default_keep)
        wait_until(lambda: c.show(job.id).raw.get("readiness", {}).get("state") == "ready",
                   "the probe's success")
        job.stop()


def test_a_sandbox_keeps_writes_in_the_workspace(connect, default_keep, tmp_path):
    """X12 through the client: `sandbox="workspace-write"` with a named path and
    `network="none"`; a write outside is refused, the record carries the policy."""
    ws, named, outside = tmp_path / "ws", tmp_path / "named", tmp_path / "outside"
    for d in (ws, named, outside):
        d.mkdir()
    script = 'echo x > in; echo x > "$0/n"; echo x > "$1/o" 2>/dev/null; exit 0'
    with connect() as c:
        job = c.launch(["sh", "-c", script, str(named), str(outside)], cwd=ws,
                       sandbox="workspace-write", sandbox_paths=[str(named)], network="none",
                       **default_keep)
        assert job.wait(timeout=60).state == "exited"
        assert (ws / "in").exists() and (named / "n").exists()
        assert not (outside / "o").exists()
        sandbox = c.show(job.id).raw["record"]["sandbox"]
        assert (sandbox["mode"], sandbox["network"]) == ("workspace_write", "none"), sandbox
