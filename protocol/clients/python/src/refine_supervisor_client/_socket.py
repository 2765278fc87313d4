"""The service mode: one connection to `refine-supervisor serve`'s socket (`run/P/supervisor.sock`).

Framing (protocol/README.md, "The JSON contract"): one JSON object per line, `"v": 1`, request
then reply, any number on one connection, answered in order. `follow` and `events` answer with
a stream of lines, then (but for `events` with `follow`) one closing line, after which the
connection takes requests again.

A `keep=False` launch sends `"end_with_connection": true`: the service stops that scope, the whole
tree, when this connection ends (closed, the host crashed). `keep=True` sends nothing: the scope
outlives the connection and can be adopted by id later.

# Caveats
A service that predates `end_with_connection` or `events` refuses the unknown field or op; the
refusal is raised as it came (`bad_request`), nothing is launched.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
from typing import Any, AsyncIterator, Dict, Iterator, Mapping, Optional

from ._common import (
    API_VERSION,
    MAX_MESSAGE,
    LaunchAsk,
    NotFound,
    RefineError,
    ms,
    socket_path,
    text,
)


def encode(op: str, fields: Mapping[str, Any]) -> bytes:
    msg = {"v": API_VERSION, "op": op}
    msg.update({k: v for k, v in fields.items() if v is not None})
    line = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
    if len(line) > MAX_MESSAGE:
        raise ValueError(f"request of {len(line)} bytes is past the socket's {MAX_MESSAGE}")
    return line


def decode(reply: bytes) -> Dict[str, Any]:
    if not reply.endswith(b"\n"):
        raise ConnectionError("the service closed the connection without a whole reply")
    resp = json.loads(reply)
    if resp.get("v") != API_VERSION:
        raise RefineError(
            "bad_reply",
            f"reply version {resp.get('v')!r}, this client speaks {API_VERSION} (a version-1 service"
            " sends reasons as strings: upgrade it)",
        )
    if not resp.get("ok"):
        err = resp.get("error") or {}
        kind, message = err.get("kind", "internal"), err.get("message", "")
        raise (NotFound if kind == "not_found" else RefineError)(kind, message)
    return resp["result"]


def launch_fields(ask: LaunchAsk) -> Dict[str, Any]:
    """A `request.LaunchRequest` without `v` and `op`."""
    return dict(
        argv=[text(a, "argument") for a in ask.argv],
        env={text(k, "env name"): text(v, "env value") for k, v in ask.env.items()} if ask.env else None,
        cwd=os.fspath(ask.cwd) if ask.cwd is not None else os.getcwd(),
        label=ask.label or None,
        kind=ask.kind,
        timeout_ms=ms(ask.timeout, "timeout"),
        idle_timeout_ms=ms(ask.idle_timeout, "idle_timeout"),
        kill_after_ms=ms(ask.kill_after, "kill_after"),
        unique=ask.unique or None,
        input=ask.input or None,
        end_with_connection=None if ask.keep else True,
        memory_max_bytes=ask.memory_max,
        cpu_millis=None if ask.cpus is None else round(ask.cpus * 1000),
        pids_max=ask.pids_max,
        ready=ask.ready,
        ready_timeout_ms=ms(ask.ready_timeout, "ready_timeout"),
        protect=ask.protect,
        sandbox=sandbox_fields(ask),
        health_cmd=ask.health_cmd,
        health_interval_ms=ms(ask.health_interval, "health_interval"),
        health_timeout_ms=ms(ask.health_timeout, "health_timeout"),
        health_retries=ask.health_retries,
        health_start_period_ms=ms(ask.health_start_period, "health_start_period"),
    )


def sandbox_fields(ask: LaunchAsk) -> Optional[Dict[str, Any]]:
    """X12: the request's `sandbox` object (absent when nothing is asked)."""
    if ask.sandbox is None and ask.network is None and not ask.sandbox_paths:
        return None
    fields: Dict[str, Any] = {"mode": (ask.sandbox or "none").replace("-", "_")}
    if ask.sandbox_paths:
        fields["paths"] = [os.fspath(p) for p in ask.sandbox_paths]
    if ask.network is not None:
        fields["network"] = ask.network
    return fields


def follow_fields(id: str, stream: str, from_offset: Optional[int], from_unix_ms: Optional[int]):
    return {"id": id, "stream": stream, "from_offset": from_offset, "from_unix_ms": from_unix_ms}


class SocketMode:
    """Blocking requests on one connection; not shared between threads."""

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._rd = sock.makefile("rb")
        self.followed: Optional[Dict[str, Any]] = None
        self.events_end: Optional[Dict[str, Any]] = None

    @classmethod
    def connect(cls, path: Optional[str], home: Optional[str], port: Optional[int],
                timeout: Optional[float]) -> "SocketMode":
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

    def request(self, op: str, **fields: Any) -> Dict[str, Any]:
        self._sock.sendall(encode(op, fields))
        return self._reply()

    def _reply(self) -> Dict[str, Any]:
        return decode(self._rd.readline(MAX_MESSAGE + 1))

    def launch(self, ask: LaunchAsk) -> Dict[str, Any]:
        return self.request("launch", **launch_fields(ask))

    def list(self, all: bool):
        return self.request("list", all=all or None)["list"]

    def show(self, id: str):
        return self.request("show", id=id)["show"]

    def wait(self, id: str, timeout: Optional[float]):
        return self.request("wait", id=id, timeout_ms=ms(timeout, "timeout"))["wait"], None

    def input(self, id: str, data, close: bool) -> int:
        result = self.request("input", id=id, data=text(data, "input"), close=close or None)
        return result["input"]["written"]

    def signal(self, id: str, signal: str) -> bool:
        return self.request("signal", id=id, signal=signal)["signalled"]["delivered"]

    def stop(self, id: str, grace: Optional[float], signal: Optional[str]):
        return self.request("stop", id=id, grace_ms=ms(grace, "grace"), signal=signal)["stop"]

    def follow(self, id, stream, from_offset, from_unix_ms) -> Iterator[bytes]:
        self._sock.sendall(encode("follow", follow_fields(id, stream, from_offset, from_unix_ms)))
        while True:
            result = self._reply()
            if "output" in result:
                yield base64.b64decode(result["output"]["data_b64"])
                continue
            self.followed = result["followed"]
            return

    def events(self, since: Optional[str], follow: bool) -> Iterator[Dict[str, Any]]:
        self._sock.sendall(encode("events", {"since": since, "follow": follow}))
        while True:
            result = self._reply()
            if "event" in result:
                yield result["event"]
                continue
            self.events_end = result["events_end"]
            return


class AsyncSocketMode:
    """`SocketMode` for asyncio; a lock keeps concurrent callers' lines and replies paired (a
    `follow` or `events` stream holds it until its end)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()
        self.followed: Optional[Dict[str, Any]] = None
        self.events_end: Optional[Dict[str, Any]] = None

    @classmethod
    async def connect(cls, path: Optional[str], home: Optional[str], port: Optional[int]):
        reader, writer = await asyncio.open_unix_connection(
            path or socket_path(home, port), limit=MAX_MESSAGE + 1
        )
        return cls(reader, writer)

    async def close(self) -> None:
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, BrokenPipeError):
            pass

    async def _send(self, line: bytes) -> None:
        self._writer.write(line)
        await self._writer.drain()

    async def request(self, op: str, **fields: Any) -> Dict[str, Any]:
        line = encode(op, fields)
        async with self._lock:
            await self._send(line)
            reply = await self._reader.readline()
        return decode(reply)

    async def launch(self, ask: LaunchAsk):
        return await self.request("launch", **launch_fields(ask))

    async def list(self, all: bool):
        return (await self.request("list", all=all or None))["list"]

    async def show(self, id: str):
        return (await self.request("show", id=id))["show"]

    async def wait(self, id: str, timeout: Optional[float]):
        return (await self.request("wait", id=id, timeout_ms=ms(timeout, "timeout")))["wait"], None

    async def input(self, id: str, data, close: bool) -> int:
        result = await self.request("input", id=id, data=text(data, "input"), close=close or None)
        return result["input"]["written"]

    async def signal(self, id: str, signal: str) -> bool:
        return (await self.request("signal", id=id, signal=signal))["signalled"]["delivered"]

    async def stop(self, id: str, grace: Optional[float], signal: Optional[str]):
        return (await self.request("stop", id=id, grace_ms=ms(grace, "grace"), signal=signal))["stop"]

    async def _stream(self, line: bytes, item: str, end: str) -> AsyncIterator[Dict[str, Any]]:
        async with self._lock:
            await self._send(line)
            while True:
                result = decode(await self._reader.readline())
                if item in result:
                    yield result[item]
                    continue
                setattr(self, end, result[end])
                return

    async def follow(self, id, stream, from_offset, from_unix_ms) -> AsyncIterator[bytes]:
        line = encode("follow", follow_fields(id, stream, from_offset, from_unix_ms))
        async for out in self._stream(line, "output", "followed"):
            yield base64.b64decode(out["data_b64"])

    def events(self, since: Optional[str], follow: bool) -> AsyncIterator[Dict[str, Any]]:
        return self._stream(encode("events", {"since": since, "follow": follow}), "event", "events_end")
