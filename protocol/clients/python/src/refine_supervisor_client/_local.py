"""The service-less mode: each launch is a `refine-supervisor run --json [flags] -- CMD...` child
of this process, and everything else is one CLI command with `--json` (`ps`, `show`, `wait`,
`stop`, `logs -f`), which work without a service.

    launch   run --json [--end-with-parent] ... -- CMD   (argv, env and cwd may be any bytes)
             the id: the new registration whose guardian is that run child's child
    wait     wait --json [--timeout] ID, then the run child is reaped (its document in `.run`)
    stop     stop --json [-t GRACE] [--signal SIG] ID, then the run child is reaped
    signal   the workload's process group, once its leader is verified (pidfd + start time)
    input    the run child's stdin (its workload's), for this client's launches with input=True
    follow   logs -f --stdout|--stderr ID
    events   events --json [--after CURSOR] [-f] (one event a line)
    close    SIGTERM to each keep=False run child still running: run forwards it and stops the
             whole scope after its --stop-grace (10 s)

keep: a keep=False run gets `--end-with-parent` (PR_SET_PDEATHSIG: it dies with this process,
so its scope is stopped); a run that predates the flag gets the same from this client, a
PR_SET_PDEATHSIG of SIGTERM set between fork and exec. keep=True starts the run child in a
session of its own (`setsid`), so it outlives this process, its terminal and its process group.

# Caveats
- PR_SET_PDEATHSIG fires when the *thread* that started the child ends, not the process: launch
  keep=False work from a thread that lives as long as the host (the main thread, an event loop).
- Between the run child's start and its registration the id is not known yet: `launch` polls
  the registrations directory (a few ms), then asks `ps --json` which new scope's guardian is
  that child's. A workload that fails to start is `SpawnFailed` only if run has already ended
  by then; else it is `Launched`, and its wait reports the status `never_started`.
- The service's error kinds are the socket's: here a failed command is `RefineError("cli")`.
"""

from __future__ import annotations

import asyncio
import ctypes
import datetime
import json
import os
import shutil
import signal as signals
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from ._common import DEFAULT_PORT, LaunchAsk, RefineError, ms

PR_SET_PDEATHSIG = 1
LAUNCH_DEADLINE = 60.0
REAP_DEADLINE = 60.0
CHUNK = 64 * 1024

Arg = Union[str, bytes]


def find_binary(bin: Optional[Union[str, os.PathLike]]) -> str:
    found = os.fspath(bin) if bin else os.environ.get("REFINE_BIN") or shutil.which("refine-supervisor")
    if not found:
        raise FileNotFoundError("refine-supervisor is not on PATH: pass bin= or set REFINE_BIN")
    return found


def _dur(seconds: float, name: str) -> str:
    return f"{ms(seconds, name)}ms"


def _b(arg: Union[Arg, os.PathLike]) -> bytes:
    return os.fsencode(arg)


@dataclass
class RunChild:
    """A `run` child of this client: its process (a `subprocess.Popen` or an asyncio
    `Process`), the unlinked files its stdout (the document) and stderr go to."""

    proc: Any
    out: Any
    err: Any
    keep: bool
    input: bool
    doc: Optional[Dict[str, Any]] = None

    def finish(self) -> Optional[Dict[str, Any]]:
        """Reads the document once the child has exited (None if it printed none)."""
        if self.doc is None:
            self.out.seek(0)
            raw = self.out.read()
            self.doc = json.loads(raw) if raw.strip() else None
        return self.doc

    def failure(self, code: int) -> RefineError:
        self.err.seek(0)
        lines = self.err.read().decode(errors="replace").strip().splitlines()
        return RefineError("cli", lines[-1] if lines else f"run exited {code} with no document", code)


class Plan:
    """The commands of one home and port, and what their output means; no I/O but /proc."""

    def __init__(self, bin: Optional[Union[str, os.PathLike]], home: Optional[str], port: Optional[int]):
        home = home or os.environ.get("REFINE_HOME")
        if not home:
            raise ValueError("no home given: pass home= or set REFINE_HOME")
        self.bin = find_binary(bin)
        self.home = os.fspath(home)
        self.port = port if port is not None else DEFAULT_PORT
        self.registrations = os.path.join(self.home, "run", str(self.port), "registrations")
        self._end_with_parent: Optional[bool] = None

    def cli(self, *args: Arg) -> List[Arg]:
        return [self.bin, "--home", self.home, "--port", str(self.port), *args]

    def run_argv(self, ask: LaunchAsk, end_with_parent: bool) -> List[Arg]:
        argv: List[Arg] = ["run", "--json", "--kind", ask.kind]
        if ask.label:
            argv += ["--label", ask.label]
        if ask.cwd is not None:
            argv += ["--cwd", _b(ask.cwd)]
        for k, v in (ask.env or {}).items():
            argv += ["--env", _b(k) + b"=" + _b(v)]
        if ask.timeout is not None:
            argv += ["--timeout", _dur(ask.timeout, "timeout")]
        if ask.idle_timeout is not None:
            argv += ["--idle-timeout", _dur(ask.idle_timeout, "idle_timeout")]
        if ask.kill_after is not None:
            argv += ["--kill-after", _dur(ask.kill_after, "kill_after")]
        if ask.unique:
            argv.append("--unique")
        if ask.memory_max is not None:
            argv += ["--memory-max", str(ask.memory_max)]
        if ask.cpus is not None:
            argv += ["--cpus", str(ask.cpus)]
        if ask.pids_max is not None:
            argv += ["--pids-max", str(ask.pids_max)]
        if ask.ready is not None:
            argv += ["--ready", ask.ready]
            if ask.ready_timeout is not None:
                argv += ["--ready-timeout", _dur(ask.ready_timeout, "ready_timeout")]
        if ask.protect is not None:
            argv += ["--protect", ask.protect]
        if ask.sandbox is not None:
            paths = ",".join(os.fspath(p) for p in ask.sandbox_paths or [])
            argv += ["--sandbox", ask.sandbox + ("=" + paths if paths else "")]
        if ask.network is not None:
            argv += ["--network", ask.network]
        if ask.health_cmd is not None:
            argv += ["--health-cmd", ask.health_cmd]
            for flag, v in (("--health-interval", ask.health_interval),
                            ("--health-timeout", ask.health_timeout),
                            ("--health-start-period", ask.health_start_period)):
                if v is not None:
                    argv += [flag, _dur(v, flag[2:].replace("-", "_"))]
            if ask.health_retries is not None:
                argv += ["--health-retries", str(ask.health_retries)]
        if not ask.keep and end_with_parent:
            argv.append("--end-with-parent")
        return self.cli(*argv, "--", *[_b(a) for a in ask.argv])

    def wait_argv(self, id: str, timeout: Optional[float]) -> List[Arg]:
        extra = ["--timeout", _dur(timeout, "timeout")] if timeout is not None else []
        return self.cli("wait", "--json", *extra, id)

    def stop_argv(self, id: str, grace: Optional[float], signal: Optional[str]) -> List[Arg]:
        if signal is not None and grace is None:
            raise RefineError("bad_request", "a stop with a signal needs a grace")
        extra: List[Arg] = ["--grace", _dur(grace, "grace")] if grace is not None else []
        if signal is not None:
            extra += ["--signal", signal]
        return self.cli("stop", "--json", *extra, id)

    def logs_argv(self, id: str, stream: str, from_unix_ms: Optional[int]) -> List[Arg]:
        if stream not in ("stdout", "stderr"):
            raise RefineError("bad_request", f"no stream {stream!r}: stdout or stderr")
        extra: List[Arg] = []
        if from_unix_ms is not None:
            at = datetime.datetime.fromtimestamp(from_unix_ms / 1000, datetime.timezone.utc)
            extra = ["--since", at.isoformat(timespec="milliseconds")]
        return self.cli("logs", "--follow", f"--{stream}", *extra, id)

    def events_argv(self, since: Optional[str], follow: bool) -> List[Arg]:
        extra: List[Arg] = ["--after", since] if since else []
        return self.cli("events", "--json", *extra, *(["--follow"] if follow else []))

    def end_with_parent_known(self) -> Optional[bool]:
        return self._end_with_parent

    def learn_end_with_parent(self, run_help: bytes) -> bool:
        self._end_with_parent = b"--end-with-parent" in run_help
        return self._end_with_parent

    def preexec(self, ask: LaunchAsk):
        """For a keep=False launch through a run without `--end-with-parent`: the same
        PR_SET_PDEATHSIG, set in the child between fork and exec (one system call, no
        allocation), with the check for a parent that died before it."""
        if ask.keep or self._end_with_parent:
            return None
        prctl = ctypes.CDLL(None, use_errno=True).prctl
        parent = os.getpid()

        def die_with_parent() -> None:
            prctl(PR_SET_PDEATHSIG, int(signals.SIGTERM), 0, 0, 0)
            if os.getppid() != parent:
                os._exit(1)

        return die_with_parent

    def new_registrations(self, before: Set[str]) -> Set[str]:
        try:
            return set(os.listdir(self.registrations)) - before
        except FileNotFoundError:
            return set()

    @staticmethod
    def child_of(rows: Sequence[Dict[str, Any]], new: Set[str], parent: int) -> Optional[str]:
        """The new scope whose guardian is a child of `parent` (the run child): the oldest, as
        a launch with a readiness probe also starts the probe's scopes from that run."""
        found = [row for row in rows
                 if row["id"] in new and row.get("guardian_pid") and _ppid(row["guardian_pid"]) == parent]
        # ps lists the newest first: on a tie of milliseconds the later row is the older.
        return min(reversed(found), key=lambda r: r.get("started_at_unix_ms", 0))["id"] if found else None

    @staticmethod
    def launched(doc: Dict[str, Any]) -> Dict[str, Any]:
        if doc.get("outcome") == "spawn_failed":
            return {"spawn_failed": {"id": doc["id"], "errno": doc.get("errno"), "step": None}}
        return {"launched": {"id": doc["id"]}}


def _ppid(pid: int) -> Optional[int]:
    stat = _stat(pid)
    return int(stat[1]) if stat else None


def _stat(pid: int) -> Optional[List[str]]:
    """The fields of /proc/PID/stat after `comm` (field 3 first), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return raw[raw.rindex(")") + 2:].split()


def signal_group(show: Dict[str, Any], sig: Union[str, int]) -> bool:
    """Sends `sig` to a live scope's workload process group once its leader is proven to be the
    workload: a pidfd is opened first, then the start time read; a pid reused after the
    workload ended has another start time, and the pidfd keeps this pid from being reused
    until the signal is sent. A workload whose leader has ended is not signalled (False)."""
    number = _signal_number(sig)
    work = (show.get("record") or {}).get("workload") or {}
    if show.get("state") != "live" or not work.get("pid"):
        return False
    pid, pgid = work["pid"], work.get("pgid") or work["pid"]
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        stat = _stat(pid)
        if stat is None or int(stat[19]) != work["start_time"] or int(stat[2]) != pgid:
            return False
        os.killpg(pgid, number)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(pidfd)


def _signal_number(sig: Union[str, int]) -> int:
    if isinstance(sig, int) or str(sig).isdigit():
        return int(sig)
    name = str(sig).upper()
    name = name if name.startswith("SIG") else "SIG" + name
    try:
        return int(getattr(signals.Signals, name))
    except AttributeError:
        raise RefineError("bad_request", f"{sig!r} is no signal") from None


def _document(stdout: bytes, stderr: bytes, code: int) -> Any:
    if stdout.strip():
        return json.loads(stdout)
    lines = stderr.decode(errors="replace").strip().splitlines()
    raise RefineError("cli", lines[-1] if lines else f"exit {code} and no document", code)


def _files():
    return tempfile.TemporaryFile(), tempfile.TemporaryFile()


def _no_input(id: str) -> RefineError:
    return RefineError(
        "bad_request",
        f"scope {id} has no open input (service-less: only this client's launches with input=True)",
    )


def _followed(stream: str, end: int, show: Dict[str, Any]) -> Dict[str, Any]:
    art = (show.get("artifacts") or {}).get(stream) or {}
    return {"stream": stream, "end_offset": end, "complete": not art.get("incomplete")}


class LocalMode:
    """Blocking service-less mode; `run` children are this client's until reaped."""

    def __init__(self, bin, home, port):
        self.plan = Plan(bin, home, port)
        self.children: Dict[str, RunChild] = {}
        self.followed: Optional[Dict[str, Any]] = None
        self.events_end = None

    def _cli(self, argv: List[Arg]) -> Any:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True)
        return _document(done.stdout, done.stderr, done.returncode)

    def _end_with_parent(self) -> bool:
        known = self.plan.end_with_parent_known()
        if known is None:
            help = subprocess.run(self.plan.cli("run", "--help"), capture_output=True).stdout
            known = self.plan.learn_end_with_parent(help)
        return known

    def launch(self, ask: LaunchAsk) -> Dict[str, Any]:
        before = self.plan.new_registrations(set())
        argv = self.plan.run_argv(ask, self._end_with_parent())
        out, err = _files()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if ask.input else subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=ask.keep,
            preexec_fn=self.plan.preexec(ask),
        )
        child = RunChild(proc, out, err, ask.keep, ask.input)
        deadline, delay = time.monotonic() + LAUNCH_DEADLINE, 0.002
        while True:
            code = proc.poll()
            if code is not None:
                doc = child.finish()
                if doc is None:
                    raise child.failure(code)
                self.children[doc["id"]] = child
                return Plan.launched(doc)
            new = self.plan.new_registrations(before)
            if new:
                rows = self._cli(self.plan.cli("ps", "--json"))["registrations"]
                id = Plan.child_of(rows, new, proc.pid)
                if id:
                    self.children[id] = child
                    return {"launched": {"id": id}}
            if time.monotonic() > deadline:
                proc.terminate()
                raise RefineError("cli", f"run child {proc.pid} registered nothing in {LAUNCH_DEADLINE:.0f} s")
            time.sleep(delay)  # polling a directory: no event tells a registration's arrival
            delay = min(delay * 2, 0.05)

    def _reap(self, id: str) -> Optional[Dict[str, Any]]:
        child = self.children.pop(id, None)
        if child is None:
            return None
        code = child.proc.wait(REAP_DEADLINE)
        if child.proc.stdin:
            child.proc.stdin.close()
        return child.finish() if code is not None else None

    def list(self, all: bool):
        return self._cli(self.plan.cli("ps", "--json", *(["--all"] if all else [])))["registrations"]

    def show(self, id: str):
        return self._cli(self.plan.cli("show", "--json", id))

    def wait(self, id: str, timeout: Optional[float]):
        doc = self._cli(self.plan.wait_argv(id, timeout))
        run = None if doc["timed_out"] else self._reap(doc["scopes"][0]["id"])
        return doc, run

    def stop(self, id: str, grace: Optional[float], signal: Optional[str]):
        doc = self._cli(self.plan.stop_argv(id, grace, signal))
        if isinstance(doc, dict) and "id" in doc:
            self._reap(doc["id"])
        return doc

    def signal(self, id: str, signal: str) -> bool:
        return signal_group(self.show(id), signal)

    def input(self, id: str, data: Union[str, bytes], close: bool) -> int:
        full = self.show(id)["id"]
        child = self.children.get(full)
        if child is None or not child.input or child.proc.stdin is None or child.proc.stdin.closed:
            raise _no_input(full)
        raw = data.encode() if isinstance(data, str) else bytes(data)
        child.proc.stdin.write(raw)
        child.proc.stdin.flush()
        if close:
            child.proc.stdin.close()
        return len(raw)

    def follow(self, id, stream, from_offset, from_unix_ms) -> Iterator[bytes]:
        argv = self.plan.logs_argv(id, stream, from_unix_ms)
        skip = end = from_offset or 0
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
            try:
                while True:
                    chunk = proc.stdout.read1(CHUNK)
                    if not chunk:
                        break
                    if skip:
                        chunk, skip = chunk[skip:], max(0, skip - len(chunk))
                    if chunk:
                        end += len(chunk)
                        yield chunk
                code = proc.wait()
            finally:
                if proc.poll() is None:
                    proc.kill()  # the caller left the stream early: end the logs child
                    proc.wait()
                proc.stdout.close()
            if code != 0:
                err.seek(0)
                _document(b"", err.read(), code)
        self.followed = _followed(stream, end, self.show(id))

    def events(self, since, follow) -> Iterator[Dict[str, Any]]:
        cursor = since
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(self.plan.events_argv(since, follow), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=err)
            try:
                for line in proc.stdout:
                    event = json.loads(line)
                    cursor = event.get("cursor", cursor)
                    yield event
                code = proc.wait()
            finally:
                if proc.poll() is None:
                    proc.kill()  # the caller left the stream early: end the events child
                    proc.wait()
                proc.stdout.close()
            if code != 0:
                err.seek(0)
                _document(b"", err.read(), code)
        self.events_end = {"cursor": cursor}

    def close(self) -> None:
        for id, child in list(self.children.items()):
            if not child.keep and child.proc.poll() is None:
                child.proc.send_signal(signals.SIGTERM)
            if child.keep:
                self.children.pop(id)
        for id in list(self.children):
            self._reap(id)


class AsyncLocalMode:
    """`LocalMode` for asyncio: the children are asyncio subprocesses, no thread blocks."""

    def __init__(self, bin, home, port):
        self.plan = Plan(bin, home, port)
        self.children: Dict[str, RunChild] = {}
        self.followed: Optional[Dict[str, Any]] = None
        self.events_end = None

    async def _cli(self, argv: List[Arg]) -> Any:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        stdout, stderr = await proc.communicate()
        return _document(stdout, stderr, proc.returncode)

    async def _end_with_parent(self) -> bool:
        known = self.plan.end_with_parent_known()
        if known is None:
            proc = await asyncio.create_subprocess_exec(
                *self.plan.cli("run", "--help"), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
            )
            known = self.plan.learn_end_with_parent((await proc.communicate())[0])
        return known

    async def launch(self, ask: LaunchAsk) -> Dict[str, Any]:
        before = self.plan.new_registrations(set())
        argv = self.plan.run_argv(ask, await self._end_with_parent())
        out, err = _files()
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.PIPE if ask.input else subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=ask.keep,
            preexec_fn=self.plan.preexec(ask),
        )
        child = RunChild(proc, out, err, ask.keep, ask.input)
        deadline, delay = time.monotonic() + LAUNCH_DEADLINE, 0.002
        while True:
            if proc.returncode is not None:
                doc = child.finish()
                if doc is None:
                    raise child.failure(proc.returncode)
                self.children[doc["id"]] = child
                return Plan.launched(doc)
            new = self.plan.new_registrations(before)
            if new:
                rows = (await self._cli(self.plan.cli("ps", "--json")))["registrations"]
                id = Plan.child_of(rows, new, proc.pid)
                if id:
                    self.children[id] = child
                    return {"launched": {"id": id}}
            if time.monotonic() > deadline:
                proc.terminate()
                raise RefineError("cli", f"run child {proc.pid} registered nothing in {LAUNCH_DEADLINE:.0f} s")
            await asyncio.sleep(delay)  # polling a directory: no event tells a registration's arrival
            delay = min(delay * 2, 0.05)

    async def _reap(self, id: str) -> Optional[Dict[str, Any]]:
        child = self.children.pop(id, None)
        if child is None:
            return None
        await asyncio.wait_for(child.proc.wait(), REAP_DEADLINE)
        if child.proc.stdin:
            child.proc.stdin.close()
        return child.finish()

    async def list(self, all: bool):
        return (await self._cli(self.plan.cli("ps", "--json", *(["--all"] if all else []))))["registrations"]

    async def show(self, id: str):
        return await self._cli(self.plan.cli("show", "--json", id))

    async def wait(self, id: str, timeout: Optional[float]):
        doc = await self._cli(self.plan.wait_argv(id, timeout))
        run = None if doc["timed_out"] else await self._reap(doc["scopes"][0]["id"])
        return doc, run

    async def stop(self, id: str, grace: Optional[float], signal: Optional[str]):
        doc = await self._cli(self.plan.stop_argv(id, grace, signal))
        if isinstance(doc, dict) and "id" in doc:
            await self._reap(doc["id"])
        return doc

    async def signal(self, id: str, signal: str) -> bool:
        return signal_group(await self.show(id), signal)

    async def input(self, id: str, data: Union[str, bytes], close: bool) -> int:
        full = (await self.show(id))["id"]
        child = self.children.get(full)
        stdin = child.proc.stdin if child and child.input else None
        if stdin is None or stdin.is_closing():
            raise _no_input(full)
        raw = data.encode() if isinstance(data, str) else bytes(data)
        stdin.write(raw)
        await stdin.drain()
        if close:
            stdin.close()
        return len(raw)

    async def follow(self, id, stream, from_offset, from_unix_ms) -> AsyncIterator[bytes]:
        argv = self.plan.logs_argv(id, stream, from_unix_ms)
        skip = end = from_offset or 0
        with tempfile.TemporaryFile() as err:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err
            )
            try:
                while True:
                    chunk = await proc.stdout.read(CHUNK)
                    if not chunk:
                        break
                    if skip:
                        chunk, skip = chunk[skip:], max(0, skip - len(chunk))
                    if chunk:
                        end += len(chunk)
                        yield chunk
                code = await proc.wait()
            finally:
                if proc.returncode is None:
                    proc.kill()  # the caller left the stream early: end the logs child
                    await proc.wait()
            if code != 0:
                err.seek(0)
                _document(b"", err.read(), code)
        self.followed = _followed(stream, end, await self.show(id))

    async def events(self, since, follow) -> AsyncIterator[Dict[str, Any]]:
        cursor = since
        with tempfile.TemporaryFile() as err:
            proc = await asyncio.create_subprocess_exec(
                *self.plan.events_argv(since, follow), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=err, limit=2 * 1024 * 1024,
            )
            try:
                async for line in proc.stdout:
                    event = json.loads(line)
                    cursor = event.get("cursor", cursor)
                    yield event
                code = await proc.wait()
            finally:
                if proc.returncode is None:
                    proc.kill()  # the caller left the stream early: end the events child
                    await proc.wait()
            if code != 0:
                err.seek(0)
                _document(b"", err.read(), code)
        self.events_end = {"cursor": cursor}

    async def close(self) -> None:
        for id, child in list(self.children.items()):
            if not child.keep and child.proc.returncode is None:
                child.proc.send_signal(signals.SIGTERM)
            if child.keep:
                self.children.pop(id)
        for id in list(self.children):
            await self._reap(id)
