"""What both modes share: the errors, the result types, the handle, and the conversions of a
host's values (seconds, text) into the contract's (`*_ms`, UTF-8).

The result types are small frozen dataclasses with the fields a host decides on; each keeps the
whole document in `raw`, typed by the generated models (`refine_supervisor_client.models`,
imported only for type checkers: the models need Python 3.11, the client 3.9)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

# 2: every `reason` is an object tagged by `kind`. A version-1 service (reasons as strings) is
# refused with a `bad_reply` that names both versions.
API_VERSION = 2
MAX_MESSAGE = 1024 * 1024
DEFAULT_PORT = 7411


class RefineError(Exception):
    """The service or the CLI refused or failed a request: `kind` is the service's error kind
    (`bad_request`, `not_found`, `label_held`, ...); in service-less mode a failed command is
    `cli` (its exit status in `exit_code`, its last stderr line in `message`) and what needs the
    service is `unsupported`."""

    def __init__(self, kind: str, message: str, exit_code: Optional[int] = None):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.exit_code = exit_code


class NotFound(RefineError):
    """No scope has that id, prefix or label."""


@dataclass(frozen=True)
class Handle:
    """A scope this client can act on: returned by `launch` (as `Launched`) and by `adopt(id)`
    (a scope launched earlier, by this host before it restarted or by anyone). Its methods are
    the client's with the id filled in; with an `AsyncClient` they are coroutines (`follow` and
    `events` async iterators)."""

    id: str
    client: Any = field(default=None, repr=False, compare=False)

    def wait(self, timeout: Optional[float] = None):
        return self.client.wait(self.id, timeout)

    def stop(self, grace: Optional[float] = None, signal: Optional[str] = None):
        return self.client.stop(self.id, grace=grace, signal=signal)

    def signal(self, signal: Union[str, int]):
        return self.client.signal(self.id, signal)

    def input(self, data: Union[str, bytes] = "", close: bool = False):
        return self.client.input(self.id, data, close=close)

    def follow(self, stream: str = "stdout", **start: Any):
        return self.client.follow(self.id, stream, **start)

    def show(self):
        return self.client.show(self.id)


@dataclass(frozen=True)
class Launched(Handle):
    """A launch whose workload started."""


@dataclass(frozen=True)
class SpawnFailed:
    """The registration was made but the workload never ran (`step`: program, cwd, user)."""

    id: str
    errno: int
    step: Optional[str] = None


@dataclass(frozen=True)
class Scope:
    """One row of `list` (as `ps --json`), or the main fields of `show`; `raw` is the whole
    document (a `models.defs.ScopeView` or a `models.show.ShowDoc`; keys this client does not know are kept)."""

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
        # A `list` row has the record's and the result's fields flat; `show` has them under
        # `record` and `result`.
        rec = doc.get("record") if isinstance(doc.get("record"), dict) else doc
        res = doc.get("result") if isinstance(doc.get("result"), dict) else doc
        work = rec.get("workload") if isinstance(rec.get("workload"), dict) else doc
        return cls(
            id=doc["id"],
            state=doc["state"],
            label=rec.get("label") or "",
            kind=rec.get("kind"),
            status=res.get("status"),
            exit_code=res.get("exit_code"),
            signal=res.get("signal"),
            outcome=res.get("outcome"),
            pid=work.get("pid"),
            argv=list(rec.get("argv") or []),
            raw=doc,
        )


@dataclass(frozen=True)
class WaitResult:
    """`raw` is the `wait --json` document (`models.wait.WaitDoc`); in service-less mode, once the
    client's own `run` child has exited, `run` is that child's `run --json` document
    (`models.run.RunDoc`)."""

    id: str
    state: str
    exit_code: Optional[int]
    timed_out: bool
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    run: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)

    @classmethod
    def _from(cls, doc: "Dict[str, Any]", run: Optional[Dict[str, Any]] = None) -> "WaitResult":
        s = doc["scopes"][0]
        return cls(
            id=s["id"],
            state=s["state"],
            exit_code=s.get("exit_code"),
            timed_out=doc["timed_out"],
            raw=doc,
            run=run,
        )


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


def ms(seconds: Optional[float], name: str) -> Optional[int]:
    if seconds is None:
        return None
    if seconds < 0:
        raise ValueError(f"{name} is negative: {seconds}")
    return int(round(seconds * 1000))


def text(arg: Union[str, bytes], what: str) -> str:
    if isinstance(arg, bytes):
        try:
            return arg.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(
                f"{what} {arg!r} is not UTF-8: the socket carries text "
                "(the service-less mode, `Client.local`, takes any bytes)"
            ) from e
    return arg


@dataclass(frozen=True)
class LaunchAsk:
    """One launch as the host asked for it, before either mode shapes it for its wire."""

    argv: List[Union[str, bytes]]
    env: Optional[Dict[Union[str, bytes], Union[str, bytes]]]
    cwd: Optional[Union[str, os.PathLike]]
    label: str
    kind: str
    timeout: Optional[float]
    idle_timeout: Optional[float]
    kill_after: Optional[float]
    unique: bool
    input: bool
    keep: bool
    memory_max: Optional[int] = None
    cpus: Optional[float] = None
    pids_max: Optional[int] = None
    ready: Optional[str] = None
    ready_timeout: Optional[float] = None
    protect: Optional[str] = None
    sandbox: Optional[str] = None
    sandbox_paths: Optional[List[str]] = None
    network: Optional[str] = None
    health_cmd: Optional[str] = None
    health_interval: Optional[float] = None
    health_timeout: Optional[float] = None
    health_retries: Optional[int] = None
    health_start_period: Optional[float] = None

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("argv is empty")
        for name in ("timeout", "idle_timeout", "kill_after"):
            ms(getattr(self, name), name)
