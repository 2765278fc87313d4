"""A stdlib-only client of refine-supervisor (SPEC C1): one API, two modes.

    Client.connect(home=...)   the service's socket (`run/P/supervisor.sock`); one connection
    Client.local(home=...)     no service: each launch a `refine-supervisor run --json` child

    with Client.connect(home="/var/lib/refine") as c:
        job = c.launch(["pytest", "-x"], label="tests", timeout=600)
        done = job.wait(timeout=900)
        print(done.exit_code)

The keep rule: by default (`keep=False`) a launch does not outlive its client: the service
stops it when the connection ends, a service-less `run` child dies with this process. `keep=True`
is work meant to outlive the host; `adopt(id)` gives a handle on it after a restart.

Ids may be full ids, prefixes of at least 4 hex digits, or labels, as the CLI takes them. A
refusal raises `RefineError` (the service's `kind`); a broken connection `ConnectionError`.
The documents are typed by the generated `refine_supervisor_client.models` (Python 3.11+).
"""

from __future__ import annotations

import os
from typing import Any, AsyncIterator, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._common import (
    API_VERSION,
    Handle,
    Launched,
    LaunchAsk,
    NotFound,
    RefineError,
    Scope,
    SpawnFailed,
    WaitResult,
    socket_path,
)
from ._local import AsyncLocalMode, LocalMode
from ._socket import AsyncSocketMode, SocketMode

__all__ = [
    "Client",
    "AsyncClient",
    "RefineError",
    "NotFound",
    "Handle",
    "Launched",
    "SpawnFailed",
    "Scope",
    "WaitResult",
    "API_VERSION",
    "socket_path",
]

Arg = Union[str, bytes]


def _launched(client: Any, result: Dict[str, Any]) -> Union[Launched, SpawnFailed]:
    if "spawn_failed" in result:
        f = result["spawn_failed"]
        return SpawnFailed(id=f["id"], errno=f["errno"], step=f.get("step"))
    return Launched(id=result["launched"]["id"], client=client)


class Client:
    """Blocking client; not shared between threads. `connect` or `local` makes one."""

    def __init__(self, mode: Union[SocketMode, LocalMode]):
        self._mode = mode

    @classmethod
    def connect(
        cls,
        path: Optional[str] = None,
        *,
        home: Optional[str] = None,
        port: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> "Client":
        """Connects to the service's socket: `path`, or that of `home` and `port` (see
        `socket_path`). `timeout` bounds each socket operation; a `wait` longer than it needs
        `timeout=None` (the default)."""
        return cls(SocketMode.connect(path, home, port, timeout))

    @classmethod
    def local(
        cls,
        home: Optional[str] = None,
        *,
        port: Optional[int] = None,
        bin: Optional[Union[str, os.PathLike]] = None,
    ) -> "Client":
        """The service-less mode on `home` (or `$REFINE_HOME`): the `refine-supervisor` at `bin`,
        `$REFINE_BIN` or on PATH runs each launch as a child of this process."""
        return cls(LocalMode(bin, home, port))

    @property
    def followed(self) -> Optional[Dict[str, Any]]:
        """After a `follow` read to its end: `{"stream", "end_offset", "complete"}`."""
        return self._mode.followed

    @property
    def events_end(self) -> Optional[Dict[str, Any]]:
        """After `events()` (without follow) read to its end: `{"cursor"}`, for `since=`."""
        return self._mode.events_end

    def close(self) -> None:
        """Ends the connection (the service then stops this connection's keep=False launches);
        service-less, sends SIGTERM to each keep=False run child still running and reaps it."""
        self._mode.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, op: str, **fields: Any) -> Dict[str, Any]:
        """One raw socket request (service mode only): its `result`, or `RefineError`."""
        if not isinstance(self._mode, SocketMode):
            raise RefineError("unsupported", "raw requests need the service (Client.connect)")
        return self._mode.request(op, **fields)

    def launch(
        self,
        argv: Sequence[Arg],
        *,
        env: Optional[Mapping[Arg, Arg]] = None,
        cwd: Optional[Union[str, bytes, os.PathLike]] = None,
        label: str = "",
        kind: str = "command",
        timeout: Optional[float] = None,
        idle_timeout: Optional[float] = None,
        kill_after: Optional[float] = None,
        unique: bool = False,
        input: bool = False,
        keep: bool = False,
        memory_max: Optional[int] = None,
        cpus: Optional[float] = None,
        pids_max: Optional[int] = None,
        ready: Optional[str] = None,
        ready_timeout: Optional[float] = None,
        protect: Optional[str] = None,
        sandbox: Optional[str] = None,
        sandbox_paths: Optional[Sequence[str]] = None,
        network: Optional[str] = None,
        health_cmd: Optional[str] = None,
        health_interval: Optional[float] = None,
        health_timeout: Optional[float] = None,
        health_retries: Optional[int] = None,
        health_start_period: Optional[float] = None,
    ) -> Union[Launched, SpawnFailed]:
        """Launches `argv` in a scope of its own; durations are seconds. `cwd` defaults to this
        process's working directory. `input=True` opens the workload's stdin for `input()`.
        `keep=False` (the default): the scope ends with this client (its connection, or this
        process); `keep=True`: it outlives the host. Socket mode takes text only (UTF-8
        `bytes` too); service-less, argv, env and cwd may be any bytes. `memory_max` (bytes),
        `cpus` (cores) and `pids_max` limit the whole tree (`run --memory-max`, `--cpus`,
        `--pids-max`); a limit the host cannot apply refuses the launch. `ready` ("notify" or
        "cmd=COMMAND") and `ready_timeout` (seconds) are `run --ready`/`--ready-timeout`.
        `protect` ("all", the default, "fs", "signals" or "none") is `run --protect`: what the
        workload's Landlock domain takes away (SPEC X11). `sandbox` ("read-only",
        "workspace-write" or "none") with `sandbox_paths` (more writable paths for
        "workspace-write") is `run --sandbox`, `network="none"` is `run --network none`
        (SPEC X12); a kernel that cannot hold them refuses the launch. `health_cmd` and
        `health_interval`, `health_timeout`, `health_start_period` (seconds), `health_retries`
        are `run --health-cmd` and its flags (H7: docker's HEALTHCHECK, reported, never acted
        on)."""
        ask = LaunchAsk(list(argv), dict(env) if env else None, cwd, label, kind, timeout,
                        idle_timeout, kill_after, unique, input, keep, memory_max, cpus,
                        pids_max, ready, ready_timeout, protect, sandbox,
                        list(sandbox_paths) if sandbox_paths else None, network, health_cmd,
                        health_interval, health_timeout, health_retries, health_start_period)
        return _launched(self, self._mode.launch(ask))

    def adopt(self, id: str) -> Handle:
        """A handle on a scope launched earlier (by this host before a restart, or by anyone):
        its id, prefix or label is resolved now (`NotFound` if there is none)."""
        return Handle(id=self.show(id).id, client=self)

    def list(self, all: bool = False) -> List[Scope]:
        return [Scope._from(r) for r in self._mode.list(all)]

    def show(self, id: str) -> Scope:
        return Scope._from(self._mode.show(id))

    def wait(self, id: str, timeout: Optional[float] = None) -> WaitResult:
        """Until the scope ended and its output and result are recorded, or `timeout` seconds
        (then `timed_out` is True and the scope is left alone)."""
        return WaitResult._from(*self._mode.wait(id, timeout))

    def input(self, id: str, data: Union[str, bytes] = "", close: bool = False) -> int:
        """Writes `data` to the stdin of a scope launched with `input=True` (socket: text or
        UTF-8 bytes; service-less: any bytes), then closes it if `close`; the bytes written."""
        return self._mode.input(id, data, close)

    def signal(self, id: str, signal: Union[str, int]) -> bool:
        """Sends `signal` (a name or number) to the workload's process group; False when the
        scope was over or nothing of its group was left."""
        return self._mode.signal(id, str(signal))

    def stop(self, id: str, grace: Optional[float] = None, signal: Optional[str] = None) -> Dict[str, Any]:
        """Ends the whole scope; with `grace` (seconds), `signal` (SIGTERM by default) first and
        up to that long for it to end by itself. Returns the `stop --json` document."""
        return self._mode.stop(id, grace, signal)

    def follow(
        self,
        id: str,
        stream: str = "stdout",
        *,
        from_offset: Optional[int] = None,
        from_unix_ms: Optional[int] = None,
    ) -> Iterator[bytes]:
        """Yields the stream's bytes as they are written, until the scope has exited and its
        output is all captured (as `logs -f`). Read it to the end before the next request on
        this connection; `followed` then holds the end (`end_offset`, `complete`)."""
        return self._mode.follow(id, stream, from_offset, from_unix_ms)

    def events(self, since: Optional[str] = None, follow: bool = False) -> Iterator[Dict[str, Any]]:
        """The service's events (`cursor`, `kind`, `id`, `label`, `time_unix_ms`, ...) after the
        cursor `since` (absent: all it keeps); without `follow` it ends with the last one
        (`events_end["cursor"]` for the next call), with `follow` it waits for new ones and
        holds this connection. Service-less: `refine-supervisor events --json`, the same journal
        (`events_end` is then the last event's cursor)."""
        return self._mode.events(since, follow)


class AsyncClient:
    """`Client` for asyncio, with the same methods as coroutines (`follow` and `events` are
    async iterators). Socket mode: one connection, its requests answered in order, so waits
    meant to run side by side use a connection each; service-less, they run side by side."""

    def __init__(self, mode: Union[AsyncSocketMode, AsyncLocalMode]):
        self._mode = mode

    @classmethod
    async def connect(
        cls, path: Optional[str] = None, *, home: Optional[str] = None, port: Optional[int] = None
    ) -> "AsyncClient":
        return cls(await AsyncSocketMode.connect(path, home, port))

    @classmethod
    def local(
        cls,
        home: Optional[str] = None,
        *,
        port: Optional[int] = None,
        bin: Optional[Union[str, os.PathLike]] = None,
    ) -> "AsyncClient":
        return cls(AsyncLocalMode(bin, home, port))

    @property
    def followed(self) -> Optional[Dict[str, Any]]:
        return self._mode.followed

    @property
    def events_end(self) -> Optional[Dict[str, Any]]:
        return self._mode.events_end

    async def close(self) -> None:
        await self._mode.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(self, op: str, **fields: Any) -> Dict[str, Any]:
        if not isinstance(self._mode, AsyncSocketMode):
            raise RefineError("unsupported", "raw requests need the service (AsyncClient.connect)")
        return await self._mode.request(op, **fields)

    async def launch(
        self,
        argv: Sequence[Arg],
        *,
        env: Optional[Mapping[Arg, Arg]] = None,
        cwd: Optional[Union[str, bytes, os.PathLike]] = None,
        label: str = "",
        kind: str = "command",
        timeout: Optional[float] = None,
        idle_timeout: Optional[float] = None,
        kill_after: Optional[float] = None,
        unique: bool = False,
        input: bool = False,
        keep: bool = False,
        memory_max: Optional[int] = None,
        cpus: Optional[float] = None,
        pids_max: Optional[int] = None,
        ready: Optional[str] = None,
        ready_timeout: Optional[float] = None,
        protect: Optional[str] = None,
        sandbox: Optional[str] = None,
        sandbox_paths: Optional[Sequence[str]] = None,
        network: Optional[str] = None,
        health_cmd: Optional[str] = None,
        health_interval: Optional[float] = None,
        health_timeout: Optional[float] = None,
        health_retries: Optional[int] = None,
        health_start_period: Optional[float] = None,
    ) -> Union[Launched, SpawnFailed]:
        ask = LaunchAsk(list(argv), dict(env) if env else None, cwd, label, kind, timeout,
                        idle_timeout, kill_after, unique, input, keep, memory_max, cpus,
                        pids_max, ready, ready_timeout, protect, sandbox,
                        list(sandbox_paths) if sandbox_paths else None, network, health_cmd,
                        health_interval, health_timeout, health_retries, health_start_period)
        return _launched(self, await self._mode.launch(ask))

    async def adopt(self, id: str) -> Handle:
        return Handle(id=(await self.show(id)).id, client=self)

    async def list(self, all: bool = False) -> List[Scope]:
        return [Scope._from(r) for r in await self._mode.list(all)]

    async def show(self, id: str) -> Scope:
        return Scope._from(await self._mode.show(id))

    async def wait(self, id: str, timeout: Optional[float] = None) -> WaitResult:
        return WaitResult._from(*await self._mode.wait(id, timeout))

    async def input(self, id: str, data: Union[str, bytes] = "", close: bool = False) -> int:
        return await self._mode.input(id, data, close)

    async def signal(self, id: str, signal: Union[str, int]) -> bool:
        return await self._mode.signal(id, str(signal))

    async def stop(
        self, id: str, grace: Optional[float] = None, signal: Optional[str] = None
    ) -> Dict[str, Any]:
        return await self._mode.stop(id, grace, signal)

    def follow(
        self,
        id: str,
        stream: str = "stdout",
        *,
        from_offset: Optional[int] = None,
        from_unix_ms: Optional[int] = None,
    ) -> AsyncIterator[bytes]:
        return self._mode.follow(id, stream, from_offset, from_unix_ms)

    def events(self, since: Optional[str] = None, follow: bool = False) -> AsyncIterator[Dict[str, Any]]:
        return self._mode.events(since, follow)
