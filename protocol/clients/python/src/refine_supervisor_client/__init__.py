"""A stdlib-only client of refine-supervisor's service socket (`run/P/supervisor.sock`).

One `Client` holds one connection and sends any number of requests on it, in order (the
socket's framing: one JSON object per line, `"v": 1`). Ids may be full ids, prefixes of at
least 4 hex digits, or labels, as the CLI takes them. A refusal raises `RefineError` (with the
service's `kind`); a closed or broken connection raises `ConnectionError`.

    with Client.connect() as c:
        scope = c.launch(["pytest", "-x"], label="tests", timeout=600)
        done = c.wait(scope.id, timeout=900)
        print(done.exit_code)
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

__all__ = [
    "Client",
    "AsyncClient",
    "RefineError",
    "NotFound",
    "Launched",
    "SpawnFailed",
    "Scope",
    "WaitResult",
    "API_VERSION",
    "socket_path",
]

API_VERSION = 1
MAX_MESSAGE = 1024 * 1024


class RefineError(Exception):
    """The service refused or failed a request: `kind` is its error kind (`bad_request`,
    `not_found`, `label_held`, ...), `message` its one line."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class NotFound(RefineError):
    """No scope has that id, prefix or label."""


@dataclass(frozen=True)
class Launched:
    id: str


@dataclass(frozen=True)
class SpawnFailed:
    """The registration was made but the workload never ran (`step`: program, cwd, user)."""

    id: str
    errno: int
    step: Optional[str] = None


@dataclass(frozen=True)
class Scope:
    """One row of `list` (as `ps --json`), or the main fields of `show`; `raw` is the whole
    document (keys this client does not know are kept there)."""

    id: str
    state: str
    label: str = ""
    kind: Optional[str] = None
    status: Optional[str] = None
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    outcome: Optional[str] = None
    pid: Optional[int] = None
    argv: List[str] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def _from(cls, doc: Dict[str, Any]) -> "Scope":
        # A `list` row has the record's fields flat; `show` has them under `record`.
        rec = doc.get("record") if isinstance(doc.get("record"), dict) else doc
        return cls(
            id=doc["id"],
            state=doc["state"],
            label=rec.get("label") or "",
            kind=rec.get("kind"),
            status=doc.get("status"),
            exit_code=doc.get("exit_code"),
            signal=doc.get("signal"),
            outcome=doc.get("outcome"),
            pid=doc.get("pid"),
            argv=list(rec.get("argv") or []),
            raw=doc,
        )


@dataclass(frozen=True)
class WaitResult:
    id: str
    state: str
    exit_code: Optional[int]
    timed_out: bool


DEFAULT_PORT = 7411


def socket_path(home: Optional[str] = None, port: Optional[int] = None) -> str:
    """The service's socket: `$REFINE_SOCKET` when set, else `HOME/run/PORT/supervisor.sock`
    with `home` (or `$REFINE_HOME`) and `port` (or 7411, the CLI's default)."""
    explicit = os.environ.get("REFINE_SOCKET")
    if explicit and home is None:
        return explicit
    home = home or os.environ.get("REFINE_HOME")
    if not home:
        raise ValueError("no socket given: pass path= or home=, or set REFINE_SOCKET or REFINE_HOME")
    return os.path.join(home, "run", str(port if port is not None else DEFAULT_PORT), "supervisor.sock")


def _ms(seconds: Optional[float], name: str) -> Optional[int]:
    if seconds is None:
        return None
    if seconds < 0:
        raise ValueError(f"{name} is negative: {seconds}")
    return int(round(seconds * 1000))


def _text(arg: Union[str, bytes], what: str) -> str:
    if isinstance(arg, bytes):
        try:
            return arg.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(
                f"{what} {arg!r} is not UTF-8: the socket carries text "
                "(`refine-supervisor run` takes any bytes)"
            ) from e
    return arg


def _encode(op: str, fields: Mapping[str, Any]) -> bytes:
    msg = {"v": API_VERSION, "op": op}
    msg.update({k: v for k, v in fields.items() if v is not None})
    line = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
    if len(line) > MAX_MESSAGE:
        raise ValueError(f"request of {len(line)} bytes is past the socket's {MAX_MESSAGE}")
    return line


def _decode(reply: bytes) -> Dict[str, Any]:
    if not reply.endswith(b"\n"):
        raise ConnectionError("the service closed the connection without a whole reply")
    resp = json.loads(reply)
    if resp.get("v") != API_VERSION:
        raise RefineError("bad_reply", f"reply version {resp.get('v')!r}, this client speaks 1")
    if not resp.get("ok"):
        err = resp.get("error") or {}
        kind, message = err.get("kind", "internal"), err.get("message", "")
        raise (NotFound if kind == "not_found" else RefineError)(kind, message)
    return resp["result"]


def _launch_fields(argv, env, cwd, label, kind, timeout, idle_timeout, kill_after, unique):
    if not argv:
        raise ValueError("argv is empty")
    return dict(
        argv=[_text(a, "argument") for a in argv],
        env=dict(env) if env else None,
        cwd=os.fspath(cwd) if cwd is not None else os.getcwd(),
        label=label or None,
        kind=kind,
        timeout_ms=_ms(timeout, "timeout"),
        idle_timeout_ms=_ms(idle_timeout, "idle_timeout"),
        kill_after_ms=_ms(kill_after, "kill_after"),
        unique=unique or None,
    )


def _launched(result: Dict[str, Any]) -> Union[Launched, SpawnFailed]:
    if "spawn_failed" in result:
        f = result["spawn_failed"]
        return SpawnFailed(id=f["id"], errno=f["errno"], step=f.get("step"))
    return Launched(id=result["launched"]["id"])


def _waited(result: Dict[str, Any]) -> WaitResult:
    doc = result["wait"]
    s = doc["scopes"][0]
    return WaitResult(
        id=s["id"], state=s["state"], exit_code=s.get("exit_code"), timed_out=doc["timed_out"]
    )


class Client:
    """One connection to the service socket; not shared between threads."""

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._rd = sock.makefile("rb")

    @classmethod
    def connect(
        cls,
        path: Optional[str] = None,
        *,
        home: Optional[str] = None,
        port: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> "Client":
        """Connects to `path`, or the socket of `home` and `port` (see `socket_path`).
        `timeout` bounds each socket operation; a `wait` longer than it needs `timeout=None`
        (the default)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(path or socket_path(home, port))
        except OSError:
            s.close()
            raise
        return cls(s)

    def close(self) -> None:
        self._rd.close()
        self._sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, op: str, **fields: Any) -> Dict[str, Any]:
        """Sends one request and returns its `result` object; raises `RefineError` on a
        refusal. Fields whose value is None are left out (absent: the default)."""
        self._sock.sendall(_encode(op, fields))
        return _decode(self._rd.readline(MAX_MESSAGE + 1))

    def launch(
        self,
        argv: Sequence[Union[str, bytes]],
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[Union[str, os.PathLike]] = None,
        label: str = "",
        kind: str = "command",
        timeout: Optional[float] = None,
        idle_timeout: Optional[float] = None,
        kill_after: Optional[float] = None,
        unique: bool = False,
        input: bool = False,
    ) -> Union[Launched, SpawnFailed]:
        """Launches `argv` in a scope of its own. `cwd` defaults to this process's working
        directory (the service's own otherwise); durations are seconds."""
        fields = _launch_fields(argv, env, cwd, label, kind, timeout, idle_timeout, kill_after, unique)
        fields["input"] = input or None
        return _launched(self.request("launch", **fields))

    def list(self, all: bool = False) -> List[Scope]:
        return [Scope._from(r) for r in self.request("list", all=all)["list"]]

    def show(self, id: str) -> Scope:
        return Scope._from(self.request("show", id=id)["show"])

    def wait(self, id: str, timeout: Optional[float] = None) -> WaitResult:
        """Until the scope ended and its output and result are recorded, or `timeout` seconds
        (then `timed_out` is True and the scope is left alone)."""
        return _waited(self.request("wait", id=id, timeout_ms=_ms(timeout, "timeout")))

    def input(self, id: str, data: Union[str, bytes] = "", close: bool = False) -> int:
        """Writes `data` (text, or UTF-8 bytes) to the stdin of a scope launched with
        `input=True`, then closes it if `close`; returns the bytes written."""
        result = self.request("input", id=id, data=_text(data, "input"), close=close or None)
        return result["input"]["written"]

    def signal(self, id: str, signal: Union[str, int]) -> bool:
        """Sends `signal` (a name or number) to the workload's process group; False when the
        scope was over or nothing of its group was left."""
        return self.request("signal", id=id, signal=str(signal))["signalled"]["delivered"]

    def stop(self, id: str, grace: Optional[float] = None, signal: Optional[str] = None) -> Dict[str, Any]:
        """Ends the whole scope; with `grace` (seconds), `signal` (SIGTERM by default) first and
        up to that long for it to end by itself. Returns the `stop --json` document."""
        return self.request("stop", id=id, grace_ms=_ms(grace, "grace"), signal=signal)["stop"]

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
        this connection; `self.followed` then holds the end (`end_offset`, `complete`)."""
        self._sock.sendall(
            _encode("follow", {"id": id, "stream": stream, "from_offset": from_offset,
                               "from_unix_ms": from_unix_ms})
        )
        while True:
            result = _decode(self._rd.readline(MAX_MESSAGE + 1))
            if "output" in result:
                yield base64.b64decode(result["output"]["data_b64"])
                continue
            self.followed = result["followed"]
            return


class AsyncClient:
    """`Client` for asyncio: one connection, its requests awaited one after another (a lock
    keeps concurrent callers' lines and replies paired)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()

    @classmethod
    async def connect(
        cls, path: Optional[str] = None, *, home: Optional[str] = None, port: Optional[int] = None
    ) -> "AsyncClient":
        reader, writer = await asyncio.open_unix_connection(
            path or socket_path(home, port), limit=MAX_MESSAGE + 1
        )
        return cls(reader, writer)

    async def close(self) -> None:
        self._writer.close()
        await self._writer.wait_closed()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(self, op: str, **fields: Any) -> Dict[str, Any]:
        line = _encode(op, fields)
        async with self._lock:
            self._writer.write(line)
            await self._writer.drain()
            reply = await self._reader.readline()
        return _decode(reply)

    async def launch(
        self,
        argv: Sequence[Union[str, bytes]],
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[Union[str, os.PathLike]] = None,
        label: str = "",
        kind: str = "command",
        timeout: Optional[float] = None,
        idle_timeout: Optional[float] = None,
        kill_after: Optional[float] = None,
        unique: bool = False,
        input: bool = False,
    ) -> Union[Launched, SpawnFailed]:
        fields = _launch_fields(argv, env, cwd, label, kind, timeout, idle_timeout, kill_after, unique)
        fields["input"] = input or None
        return _launched(await self.request("launch", **fields))

    async def list(self, all: bool = False) -> List[Scope]:
        return [Scope._from(r) for r in (await self.request("list", all=all))["list"]]

    async def show(self, id: str) -> Scope:
        return Scope._from((await self.request("show", id=id))["show"])

    async def wait(self, id: str, timeout: Optional[float] = None) -> WaitResult:
        return _waited(await self.request("wait", id=id, timeout_ms=_ms(timeout, "timeout")))

    async def input(self, id: str, data: Union[str, bytes] = "", close: bool = False) -> int:
        result = await self.request("input", id=id, data=_text(data, "input"), close=close or None)
        return result["input"]["written"]

    async def signal(self, id: str, signal: Union[str, int]) -> bool:
        result = await self.request("signal", id=id, signal=str(signal))
        return result["signalled"]["delivered"]

    async def stop(
        self, id: str, grace: Optional[float] = None, signal: Optional[str] = None
    ) -> Dict[str, Any]:
        return (await self.request("stop", id=id, grace_ms=_ms(grace, "grace"), signal=signal))["stop"]
