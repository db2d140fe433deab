"""Soak: the HTTP server's resident memory across long runs of calls, SSE calls, hang-ups, slow-loris sockets
and 2025-era sessions.

    python benchmarks/soak.py [--calls 1000000] [--sse 20000] [--disconnects 20000] [--sockets 10000]
        [--session 200000] [--abandoned 20000] [--resume 20000] [--subscribe 100000]

Starts benchmarks/servers/soak_server.py on 127.0.0.1 (pinned to one CPU and this
driver to another when taskset and two CPUs are available; 2025-era sessions idle for
--session-idle-timeout, 1 s, expire), warms every phase up at a small count (20,000
calls, 1,000 SSE calls and hang-ups, three waves of sockets, and the 2025-era counts in
WARMUP), then runs the measured phases (a count of 0 skips one; every phase runs by
default), sampling the server's VmRSS every --sample-interval seconds:

1. calls: `tools/call` in a closed loop over --connections keep-alive connections, half
   to `echo` (a sync tool: worker thread), half to `echo_async`; JSON answers.
2. sse: `notify` sends a progress notification and a log message before its result, so
   every answer is an SSE stream; each must hold both and the result.
3. disconnects: a fresh connection calls `hang` (it never returns) and goes away before
   the answer: after its progress event (the call is running) or right after sending
   (it may not have started), by closing (FIN) or resetting (RST), in turn. 20,000 of
   them outnumber the server's 1,024 in-flight slots: one not freed stalls later calls.
4. sockets: connections that send nothing, half a request head, or a head one byte at a
   time, then are left alone: the server's header deadline must close each (with 408
   once bytes came). In waves below --max-connections; a normal call must succeed
   while every wave is open.

The 2025-era phases speak the 2025-11-25 wire (initialize, notifications/initialized,
then requests with Mcp-Session-Id); each ends by reading the server's census of the
resumable streams its sessions keep (`stats`, `stream_census`) and its RSS while the
sessions are still live:

5. session: one session for the whole phase, --connections connections in it: echo,
   tools/list, ping, `notify` (progress and a log message: the answer is an SSE stream),
   and `hang` cancelled with notifications/cancelled once it runs; then DELETE.
6. abandoned: sessions opened --concurrency at a time, each with one to three calls
   (one of them streams), then half ended with DELETE and half abandoned to the idle
   timeout; every one must have expired after the phase.
7. resume: in one session, in turn: a session of its own opens its GET stream, drops it
   (FIN or RST) and ends; `drip` dropped by the client after its first progress event,
   and `polled` ended by the server after it, each resumed with GET and Last-Event-ID to
   its result.
8. subscribe: in one session with its GET stream open, resources/subscribe and
   unsubscribe over 16 URIs, and `touch` announcing updates the GET stream carries.

Pass (exit 0) only if, for every phase: every count is done with no error (a non-200
status, a JSON-RPC or tool error, a wrong reply, a socket not closed within the header
deadline + 5 s); after the phase and a --settle pause a health call succeeds and the
server's own counters show no `hang` call still running, no more tasks or open fds than
after warm-up, and at most --max-object-growth more live (gc-tracked) objects than at the
previous check-up; the server stays alive and logs nothing after start; and RSS after
the settle pause exceeds RSS at the phase's start by at most --max-growth-mib, and the
last phase's end the first phase's start by at most --max-total-growth-mib (a 2025-era
phase's growth is taken while its sessions were live, too, if more: ending a session
frees what it held); and a 2025-era phase's sessions keep at most UNUSABLE_STREAMS
streams that nothing can resume (neither in flight nor with events still stored), and
hold no session once the idle timeout has passed. Otherwise exit 1. Progress goes to
stderr; the machine, a Markdown table and the verdict to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

from procs import free_port, machine, pinned, stop
from httpload import drive, encode_http, is_error, mcp_request, parse_response
from stdiobench import rss_kib

from mcpcore._runtime import defaults

HOST = "127.0.0.1"
HERE = Path(__file__).resolve().parent
SERVER = HERE / "servers" / "soak_server.py"
MIB = 1024  # KiB
REPLY_TIMEOUT = 10.0  # seconds for any single answer the driver waits for
REAP_MARGIN = 5.0  # seconds past the header deadline before an open socket counts as not reaped
RESERVED_CONNECTIONS = 8  # kept free below the server's limit during a wave, for health calls
WARMUP = {"calls": 20_000, "sse": 1_000, "disconnects": 1_000,  # and three waves of sockets
          "session": 5_000, "abandoned": 5_000, "resume": 1_000, "subscribe": 5_000}
WARMUP_WAVES = 3  # the allocator takes a few waves of ~1,000 open connections to settle
SSE_PARTS = (b"data: ", b'"notifications/progress"', b'"notifications/message"', b'"result"')
LEGACY_VERSION = "2025-11-25"
LEGACY_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
SUBSCRIBED_URIS = 16  # distinct resources the subscribe phase follows and lets go of
# Streams a session may keep beyond those in flight or with events still stored: none, since a stream
# leaves its store as its call ends, or as its last stored event does.
UNUSABLE_STREAMS = 0
LOITER_HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json\r\n"


class Unhealthy(Exception):
    """The server did not answer a normal call as it should."""


class Aborted(Exception):
    """A phase could not go on: the server died, or the phase ran out of time."""


@dataclass
class Tally:
    """What a phase's driver did: items done, and errors with the first few reasons."""

    done: int = 0
    errors: int = 0
    reasons: list[str] = field(default_factory=list)
    streams: int = 0  # 2025-era phases: the streams the server kept in its sessions at the phase's end,
    unusable: int = 0  # and of those, the ones nothing could resume any more,
    rss_live: int = 0  # and the server's RSS then, before the sessions ended and freed what they held

    def error(self, why: str) -> None:
        self.errors += 1
        if len(self.reasons) < 5 and why not in self.reasons:
            self.reasons.append(why)


@dataclass
class Phase:
    name: str
    count: int
    run: Callable[[int, int], Awaitable[Tally]]  # (port, count) -> tally
    tally: Tally = field(default_factory=Tally)
    rss_start: int = 0
    rss_peak: int = 0
    rss_end: int = 0
    elapsed: float = 0.0
    stats: dict[str, int] = field(default_factory=dict)  # the server's counters after the phase
    objects_before: int = 0  # live objects at the previous check-up
    problems: list[str] = field(default_factory=list)

    @property
    def growth(self) -> int:
        """RSS growth after the phase, or while its sessions were still live if more (ending one frees its memory)."""
        return max(self.rss_end, self.tally.rss_live) - self.rss_start

    @property
    def object_growth(self) -> int:
        return self.stats["objects"] - self.objects_before


# -- the server --------------------------------------------------------------


class SoakServer:
    """The server subprocess; its stderr goes to a file so anything it logs is seen."""

    def __init__(self, server_file: Path, port: int, args: argparse.Namespace, cpu: int | None) -> None:
        self.port = port
        self.log = tempfile.TemporaryFile()
        self._log_read = 0
        command = [sys.executable, str(server_file), "--port", str(port), "--max-connections", str(args.max_connections),
                   "--header-timeout", str(args.header_timeout), "--session-idle-timeout", str(args.session_idle_timeout),
                   "--max-sessions", str(args.max_sessions)]
        self.process = subprocess.Popen(pinned(None if cpu is None else str(cpu), command),
                                        stdout=subprocess.DEVNULL, stderr=self.log)

    def alive(self) -> bool:
        return self.process.poll() is None

    def rss(self) -> int:
        return rss_kib(self.process.pid)

    def logged(self) -> str:
        """What the server wrote to stderr since the last look."""
        self.log.seek(self._log_read)
        data = self.log.read()
        self._log_read += len(data)
        return data.decode(errors="replace")

    async def ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                await checkup(self.port)
                return
            except (OSError, Unhealthy):
                if not self.alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start: {self.logged()}") from None
                await asyncio.sleep(0.1)

    def close(self) -> None:
        stop(self.process)
        self.log.close()


def tool_call(port: int, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> bytes:
    """The wire bytes of a 2026-07-28 `tools/call` with its headers."""
    body, headers = mcp_request("tools/call", {"name": tool, "arguments": arguments}, meta=meta)
    return encode_http(f"{HOST}:{port}", "/mcp", body, headers)


class Link:
    """One keep-alive connection: requests one after another, each answer read whole (or up to a marker)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.buffer = bytearray()

    @classmethod
    async def open(cls, port: int) -> "Link":
        return cls(*await asyncio.open_connection(HOST, port))

    async def _read(self) -> bytes:
        try:
            data = await asyncio.wait_for(self.reader.read(1 << 16), REPLY_TIMEOUT)
        except asyncio.TimeoutError:
            raise Unhealthy(f"no answer within {REPLY_TIMEOUT:.0f} s") from None
        self.buffer += data
        return data

    async def more(self) -> None:
        """Read what comes next; Unhealthy if the server closed the connection instead."""
        if not await self._read():
            raise Unhealthy("the server closed the connection before answering")

    async def rest(self) -> bytes:
        """Read until the answer is whole or the server closes the connection: all that came."""
        while parse_response(self.buffer) is None and await self._read():
            pass
        return bytes(self.buffer)

    async def ask(self, request: bytes) -> tuple[int, bytes, bytes]:
        """Send a request and read its answer whole: (status, head, body)."""
        self.writer.write(request)
        return await self.answer()

    async def answer(self) -> tuple[int, bytes, bytes]:
        while (parsed := parse_response(self.buffer)) is None:
            await self.more()
        consumed, status, body = parsed
        head = bytes(self.buffer[: self.buffer.find(b"\r\n\r\n")])
        del self.buffer[:consumed]
        return status, head, body

    async def until(self, marker: bytes) -> bytes:
        """Read until `marker` and the end of the SSE event holding it: all that came so far."""
        while (at := self.buffer.find(marker)) < 0 or self.buffer.find(b"\n\n", at) < 0:
            await self.more()
        return bytes(self.buffer)

    def close(self, reset: bool = False) -> None:
        """Close (FIN), or reset (RST) the connection."""
        if reset:
            self.writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.close()


async def exchange(port: int, requests: list[bytes]) -> list[tuple[int, bytes]]:
    """Send requests one after another on one keep-alive connection: (status, body) of each answer."""
    link = await Link.open(port)
    try:
        return [(status, body) for status, _, body in [await link.ask(request) for request in requests]]
    finally:
        link.close()


async def checkup(port: int) -> dict[str, int]:
    """A health call (an echo must come back) and then the server's counters, on one connection."""
    (status, body), (stats_status, stats_body) = await exchange(
        port, [tool_call(port, "echo", {"text": "health"}), tool_call(port, "stats", {})])
    if is_error(status, body) or b'"text":"health"' not in body:
        raise Unhealthy(f"health call answered {status}: {body[:200]!r}")
    if is_error(stats_status, stats_body):
        raise Unhealthy(f"stats call answered {stats_status}: {stats_body[:200]!r}")
    return json.loads(stats_body)["result"]["structuredContent"]


# -- the phases --------------------------------------------------------------


async def calls(port: int, count: int, connections: int, timeout: float) -> Tally:
    """Plain JSON calls, half to the sync echo, half to the async one, over keep-alive connections."""
    half = count // 2
    runs = await asyncio.gather(*(
        drive(HOST, port, tool_call(port, tool, {"text": "soak"}), max(1, connections // 2), share, timeout, 0.0)
        for tool, share in (("echo", count - half), ("echo_async", half)) if share))
    return _tally_of(runs, "a non-200 status, an error, or a dropped connection")


def _not_streamed(status: int, body: bytes) -> bool:
    return is_error(status, body) or not all(part in body for part in SSE_PARTS)


async def sse(port: int, count: int, connections: int, timeout: float) -> Tally:
    """Calls whose notifications turn the answer into an SSE stream."""
    meta = {"progressToken": "soak", "io.modelcontextprotocol/logLevel": "info"}
    request = tool_call(port, "notify", {}, meta)
    runs = [await drive(HOST, port, request, connections, count, timeout, 0.0, failed=_not_streamed)]
    return _tally_of(runs, "an answer that was not an SSE stream of progress, log message and result")


def _tally_of(runs: list[dict[str, Any]], why: str) -> Tally:
    tally = Tally(done=sum(len(run["latencies"]) for run in runs))
    for _ in range(sum(run["errors"] for run in runs)):
        tally.error(why)
    return tally


async def _hang_up(port: int, request: bytes, cycle: int) -> None:
    """One cycle: call `hang` on a fresh connection, then leave before the answer."""
    link = await Link.open(port)
    try:
        link.writer.write(request)
        if cycle % 2 == 0:  # wait until the call is running: its progress event opened the stream
            head = await link.until(b'"notifications/progress"')
            if not head.startswith(b"HTTP/1.1 200 ") or b"text/event-stream" not in head.lower():
                raise Unhealthy(f"hang answered {head[:100]!r}")
        else:
            await link.writer.drain()
    finally:
        link.close(reset=cycle % 4 >= 2)


async def disconnects(port: int, count: int, concurrency: int) -> Tally:
    """Calls abandoned mid-way, `concurrency` at a time; the server must cancel each."""
    request = tool_call(port, "hang", {}, {"progressToken": "soak"})
    cycles = iter(range(count))
    tally = Tally()

    async def client() -> None:
        for cycle in cycles:
            try:
                await _hang_up(port, request, cycle)
            except (OSError, Unhealthy) as error:
                tally.error(f"{type(error).__name__}: {error}")
            tally.done += 1

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return tally


class Loiterer:
    """One abandoned socket: silent, half a request head, or a head one byte at a time (kind 0, 1, 2)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, kind: int,
                 byte_interval: float) -> None:
        self.reader, self.writer, self.kind = reader, writer, kind
        self.opened = time.monotonic()
        self.trickle: asyncio.Task[None] | None = None
        if kind == 1:
            writer.write(LOITER_HEAD[: len(LOITER_HEAD) // 2])
        elif kind == 2:
            self.trickle = asyncio.ensure_future(self._dribble(byte_interval))

    @classmethod
    async def open(cls, port: int, kind: int, byte_interval: float) -> "Loiterer":
        reader, writer = await asyncio.open_connection(HOST, port)
        return cls(reader, writer, kind, byte_interval)

    async def _dribble(self, interval: float) -> None:
        for index in range(len(LOITER_HEAD)):  # never the blank line that would end the head
            self.writer.write(LOITER_HEAD[index : index + 1])
            await asyncio.sleep(interval)

    async def reaped(self, within: float) -> str | None:
        """Wait for the server to close the socket: None if it did in time with the right answer, else why not."""
        received = b""
        try:
            while True:
                left = max(0.1, within - (time.monotonic() - self.opened))  # what came while we were busy counts
                data = await asyncio.wait_for(self.reader.read(1 << 16), left)
                if not data:
                    break
                received += data
        except asyncio.TimeoutError:
            return f"a socket of kind {self.kind} was still open after {within:.0f} s"
        except ConnectionResetError:
            pass  # the server's close met our trickle; judge what came before it
        finally:
            if self.trickle is not None:
                self.trickle.cancel()
            self.writer.close()
        if received.startswith(b"HTTP/1.1 408 ") or (self.kind == 0 and not received):
            return None
        return f"a socket of kind {self.kind} got {received[:60]!r} instead of a 408"


async def sockets(port: int, count: int, wave_size: int, header_timeout: float) -> Tally:
    """Slow-loris sockets in waves: each wave opens, a normal call must succeed, then every socket must be reaped."""
    tally = Tally()
    byte_interval = header_timeout / 20  # far too slow to finish a head in time
    while tally.done < count:
        size = min(wave_size, count - tally.done)
        opened = await asyncio.gather(*(Loiterer.open(port, (tally.done + i) % 3, byte_interval) for i in range(size)),
                                      return_exceptions=True)
        loiterers = [item for item in opened if isinstance(item, Loiterer)]
        for failure in (item for item in opened if not isinstance(item, Loiterer)):
            tally.error(f"connect: {failure!r}")
        try:
            await checkup(port)
        except (OSError, Unhealthy) as error:
            tally.error(f"health call during a wave of {size}: {error}")
        verdicts = await asyncio.gather(*(loiterer.reaped(header_timeout + REAP_MARGIN) for loiterer in loiterers))
        for why in verdicts:
            if why is not None:
                tally.error(why)
        tally.done += size
    return tally


# -- the 2025-era phases -------------------------------------------------------


class LegacySession:
    """A 2025-11-25 session the driver opened: the wire bytes of its requests, notifications, GET and DELETE."""

    def __init__(self, port: int, session_id: str) -> None:
        self.port, self.id = port, session_id
        self._ids = itertools.count(1)
        self.headers = {**LEGACY_HEADERS, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": LEGACY_VERSION}

    @classmethod
    async def open(cls, link: Link, port: int) -> "LegacySession":
        """initialize, notifications/initialized, and logging/setLevel info (so `notify` streams its log message)."""
        params = {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": {"name": "mcpcore-soak", "version": "1"}}
        body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}).encode()
        status, head, answer = await link.ask(encode_http(f"{HOST}:{port}", "/mcp", body, LEGACY_HEADERS))
        session_id = _header(head, b"mcp-session-id")
        if is_error(status, answer) or session_id is None:
            raise Unhealthy(f"initialize answered {status}: {answer[:200]!r}")
        session = cls(port, session_id)
        status, _, answer = await link.ask(session.notification("notifications/initialized"))
        if status != 202:
            raise Unhealthy(f"notifications/initialized answered {status}: {answer[:200]!r}")
        await session.expect(link, session.request("logging/setLevel", {"level": "info"}), b'"result":{}', "logging/setLevel")
        return session

    def new_id(self) -> int:
        return next(self._ids)

    def _post(self, message: dict[str, Any]) -> bytes:
        return encode_http(f"{HOST}:{self.port}", "/mcp", json.dumps(message).encode(), self.headers)

    def request(self, method: str, params: dict[str, Any] | None = None, request_id: int | None = None) -> bytes:
        message = {"jsonrpc": "2.0", "id": self.new_id() if request_id is None else request_id, "method": method}
        return self._post({**message, "params": params} if params is not None else message)

    def call(self, tool: str, arguments: dict[str, Any] | None = None, progress: bool = False,
             request_id: int | None = None) -> bytes:
        """A `tools/call`; `progress` asks for progress notifications, so the answer may stream."""
        params: dict[str, Any] = {"name": tool, "arguments": arguments or {}}
        if progress:
            params["_meta"] = {"progressToken": "soak"}
        return self.request("tools/call", params, request_id)

    def notification(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        return self._post({**message, "params": params} if params is not None else message)

    def get(self, last_event: str | None = None) -> bytes:
        """The standalone GET stream, or (`last_event`) the resumption of a call's stream after that event."""
        headers = {**self.headers, "Accept": "text/event-stream"}
        if last_event is not None:
            headers["Last-Event-ID"] = last_event
        return encode_http(f"{HOST}:{self.port}", "/mcp", b"", headers, method="GET")

    def delete(self) -> bytes:
        return encode_http(f"{HOST}:{self.port}", "/mcp", b"", self.headers, method="DELETE")

    async def expect(self, link: Link, request: bytes, wanted: bytes, what: str, status: int = 200) -> bytes:
        """Send a request of this session; Unhealthy unless it is answered with `status` and holds `wanted`."""
        got, _, body = await link.ask(request)
        if got != status or (status == 200 and is_error(got, body)) or wanted not in body:
            raise Unhealthy(f"{what} answered {got}: {body[:200]!r}")
        return body


def _header(head: bytes, name: bytes) -> str | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip().decode()
    return None


def _progress_event_id(stream: bytes) -> str:
    """The id of a stream's first progress event (its `id:` line comes before its data)."""
    ids = re.findall(rb"^id: (\S+)", stream[: stream.find(b'"notifications/progress"')], re.MULTILINE)
    if not ids:
        raise Unhealthy(f"a resumable stream carried no progress event with an id: {stream[:200]!r}")
    return ids[-1].decode()


Step = Callable[[LegacySession, Link, int], Awaitable[None]]  # (session, the client's connection, item number)


async def _echo(session: LegacySession, link: Link, item: int) -> None:
    await session.expect(link, session.call("echo", {"text": "soak"}), b'"text":"soak"', "echo")


async def _list(session: LegacySession, link: Link, item: int) -> None:
    await session.expect(link, session.request("tools/list"), b'"name":"echo"', "tools/list")


async def _ping(session: LegacySession, link: Link, item: int) -> None:
    await session.expect(link, session.request("ping"), b'"result":{}', "ping")


async def _streamed(session: LegacySession, link: Link, item: int) -> None:
    """`notify` with a progress token: the answer is an SSE stream of progress, log message and result."""
    body = await session.expect(link, session.call("notify", progress=True), b'"result"', "notify")
    if not all(part in body for part in SSE_PARTS):
        raise Unhealthy(f"notify answered no SSE stream of progress, log message and result: {body[:200]!r}")


async def _cancelled(session: LegacySession, link: Link, item: int) -> None:
    """`hang` on a connection of its own, cancelled with notifications/cancelled once it runs; its stream ends."""
    request_id = session.new_id()
    caller = await Link.open(session.port)
    try:
        caller.writer.write(session.call("hang", progress=True, request_id=request_id))
        await caller.until(b'"notifications/progress"')
        cancel = session.notification("notifications/cancelled", {"requestId": request_id, "reason": "soak"})
        await session.expect(link, cancel, b"", "notifications/cancelled", status=202)
        body = await caller.rest()  # no response: the stream ends, or the connection
        if b'"result"' in body:
            raise Unhealthy(f"a cancelled hang answered: {body[-200:]!r}")
    finally:
        caller.close()


async def _get_dropped(session: LegacySession, link: Link, item: int) -> None:
    """A session of its own opens its GET stream and drops it (FIN or RST, in turn), then ends.

    Its own session: a session has one GET stream, and the server learns of a drop only later."""
    own = await LegacySession.open(link, session.port)
    stream = await Link.open(session.port)
    try:
        await _stream_head(stream, own.get())
    finally:
        stream.close(reset=item % 2 == 1)
    await own.expect(link, own.delete(), b"", "DELETE")


async def _resumed(session: LegacySession, last_event: str, wanted: bytes) -> None:
    """Resume a call's stream with GET and Last-Event-ID; the rest must end with the call's result."""
    link = await Link.open(session.port)
    try:
        await session.expect(link, session.get(last_event), wanted, f"GET after event {last_event}")
    finally:
        link.close()


async def _dropped_and_resumed(session: LegacySession, link: Link, item: int) -> None:
    """`drip`'s stream, dropped by the client after its first progress event (FIN or RST), then resumed."""
    caller = await Link.open(session.port)
    try:
        caller.writer.write(session.call("drip", progress=True))
        last_event = _progress_event_id(await caller.until(b'"notifications/progress"'))
    finally:
        caller.close(reset=item % 2 == 1)
    await _resumed(session, last_event, b"dripped")


async def _closed_and_resumed(session: LegacySession, link: Link, item: int) -> None:
    """`polled`'s stream, ended by the server after its first progress event, then resumed."""
    caller = await Link.open(session.port)
    try:
        first = await session.expect(caller, session.call("polled", progress=True), b'"notifications/progress"', "polled")
        last_event = _progress_event_id(first)
    finally:
        caller.close()
    await _resumed(session, last_event, b"polled")


def _uri(number: int) -> str:
    return f"soak://note/{number % SUBSCRIBED_URIS}"


async def _subscribe(session: LegacySession, link: Link, item: int) -> None:
    await session.expect(link, session.request("resources/subscribe", {"uri": _uri(item)}), b'"result":{}', "subscribe")


async def _unsubscribe(session: LegacySession, link: Link, item: int) -> None:
    await session.expect(link, session.request("resources/unsubscribe", {"uri": _uri(item + 7)}), b'"result":{}',
                         "unsubscribe")


async def _touch(session: LegacySession, link: Link, item: int) -> None:
    """A change to a resource the session follows: its GET stream hears of it (unless another connection
    of the session let go of it in between)."""
    await _subscribe(session, link, item)
    await session.expect(link, session.call("touch", {"uri": _uri(item)}), b"touched", "touch")


SESSION_STEPS: tuple[Step, ...] = (_echo, _list, _ping, _streamed, _echo, _ping, _list, _streamed, _echo, _cancelled)
RESUME_STEPS: tuple[Step, ...] = (_get_dropped, _dropped_and_resumed, _closed_and_resumed)
SUBSCRIBE_STEPS: tuple[Step, ...] = (_subscribe, _unsubscribe, _subscribe, _unsubscribe, _touch)


async def _steps(session: LegacySession, steps: tuple[Step, ...], items: Iterator[int], tally: Tally) -> None:
    """One client: the next item's step, in turn, on a keep-alive connection (a new one after an error)."""
    link = await Link.open(session.port)
    try:
        for item in items:
            try:
                await steps[item % len(steps)](session, link, item)
            except (OSError, Unhealthy) as error:
                tally.error(f"{type(error).__name__}: {error}")
                link.close()
                link = await Link.open(session.port)
            tally.done += 1
    finally:
        link.close()


async def _census(link: Link, port: int, tally: Tally, rss: Callable[[], int]) -> None:
    """The server's count of resumable streams it keeps, of those nothing can resume, and its RSS (judged by `judge`)."""
    status, _, body = await link.ask(tool_call(port, "stats", {}))
    tally.rss_live = max(tally.rss_live, rss())
    if is_error(status, body):
        raise Unhealthy(f"stats answered {status}: {body[:200]!r}")
    census = json.loads(body)["result"]["structuredContent"]
    tally.unusable = max(tally.unusable, census["unusable_streams"])
    tally.streams = max(tally.streams, census["streams"])


async def _stream_head(link: Link, request: bytes) -> None:
    """Open an SSE stream: Unhealthy unless its head says 200 and text/event-stream."""
    link.writer.write(request)
    while b"\r\n\r\n" not in link.buffer:
        await link.more()
    if not link.buffer.startswith(b"HTTP/1.1 200 ") or b"text/event-stream" not in link.buffer.lower():
        raise Unhealthy(f"a GET stream answered {bytes(link.buffer[:200])!r}")


async def _listen(session: LegacySession) -> asyncio.Future[int]:
    """Open the session's GET stream; then read it until it ends (its session is deleted), in a task that
    gives the number of resource updates it carried."""
    link = await Link.open(session.port)
    try:
        await _stream_head(link, session.get())
    except BaseException:
        link.close()
        raise

    async def drain() -> int:
        updates, tail = 0, bytes(link.buffer)
        try:
            while not tail.endswith(b"0\r\n\r\n"):  # the last chunk: the stream ended
                data = await link.reader.read(1 << 16)
                if not data:
                    raise Unhealthy("the GET stream was cut before its session ended")
                updates += (tail[-40:] + data).count(b"resources/updated") - tail[-40:].count(b"resources/updated")
                tail = (tail + data)[-64:]
            return updates
        finally:
            link.close()

    return asyncio.ensure_future(drain())


async def in_session(port: int, count: int, connections: int, steps: tuple[Step, ...], rss: Callable[[], int],
                     listen: bool = False) -> Tally:
    """`count` steps over `connections` connections in one 2025-11-25 session (with its GET stream open:
    `listen`), then the census of its streams, then DELETE."""
    tally = Tally()
    link = await Link.open(port)
    try:
        session = await LegacySession.open(link, port)
        link.close()
        listener = await _listen(session) if listen else None
        items = iter(range(count))
        await asyncio.gather(*(_steps(session, steps, items, tally) for _ in range(connections)))
        link = await Link.open(port)  # a new one: the first would have idled past the server's keep-alive timeout
        await _census(link, port, tally, rss)
        await session.expect(link, session.delete(), b"", "DELETE")
        if listener is not None and await asyncio.wait_for(listener, REPLY_TIMEOUT) == 0:
            tally.error("the GET stream of a session with subscriptions carried no resource update")
    except (OSError, Unhealthy, asyncio.TimeoutError) as error:
        tally.error(f"{type(error).__name__}: {error}")
    finally:
        link.close()
    return tally


async def _abandon_or_end(port: int, item: int) -> None:
    """One session: a few calls (one streams), then DELETE (even items) or nothing: its idle timeout ends it."""
    link = await Link.open(port)
    try:
        session = await LegacySession.open(link, port)
        for step in (_echo, _streamed, _list)[: 1 + item % 3]:
            await step(session, link, item)
        if item % 2 == 0:
            await session.expect(link, session.delete(), b"", "DELETE")
    finally:
        link.close()


async def abandoned(port: int, count: int, concurrency: int, rss: Callable[[], int]) -> Tally:
    """Sessions opened, used, and ended or abandoned, `concurrency` at a time; then the census of their streams."""
    items = iter(range(count))
    tally = Tally()

    async def client() -> None:
        for item in items:
            try:
                await _abandon_or_end(port, item)
            except (OSError, Unhealthy) as error:
                tally.error(f"{type(error).__name__}: {error}")
            tally.done += 1

    await asyncio.gather(*(client() for _ in range(concurrency)))
    link = await Link.open(port)
    try:
        await _census(link, port, tally, rss)
    except (OSError, Unhealthy) as error:
        tally.error(f"{type(error).__name__}: {error}")
    finally:
        link.close()
    return tally


# -- measuring -----------------------------------------------------------------


async def watched(server: SoakServer, work: Awaitable[Tally], args: argparse.Namespace) -> tuple[Tally, int]:
    """Run a phase's work while sampling the server's RSS: its tally and the peak RSS."""
    task = asyncio.ensure_future(work)
    started, peak = time.monotonic(), server.rss()
    while not task.done():
        await asyncio.wait({task}, timeout=args.sample_interval)
        if not server.alive():
            task.cancel()
            raise Aborted(f"the server died (exit status {server.process.returncode})")
        if time.monotonic() - started > args.phase_timeout:
            task.cancel()
            raise Aborted(f"not done within --phase-timeout {args.phase_timeout:.0f} s")
        peak = max(peak, server.rss())
    return task.result(), peak


async def measure(server: SoakServer, phase: Phase, args: argparse.Namespace) -> None:
    """Run one phase, then settle and check the server's health and counters; Aborted if the soak cannot go on."""
    phase.rss_start = server.rss()
    started = time.monotonic()
    phase.tally, phase.rss_peak = await watched(server, phase.run(server.port, phase.count), args)
    phase.elapsed = time.monotonic() - started
    try:
        await sessions_expired(server.port, args)
        await asyncio.sleep(args.settle)
        phase.stats = await checkup(server.port)
    except (OSError, Unhealthy) as error:
        raise Aborted(f"health call after the phase failed: {error}") from None
    phase.rss_end = server.rss()
    phase.rss_peak = max(phase.rss_peak, phase.rss_end)


async def sessions_expired(port: int, args: argparse.Namespace) -> None:
    """Wait (a bounded while) for the server to hold no 2025-era session: abandoned ones end when idle."""
    deadline = time.monotonic() + args.session_idle_timeout + REAP_MARGIN
    while (await checkup(port))["sessions"] and time.monotonic() < deadline:
        await asyncio.sleep(args.sample_interval)


def judge(phase: Phase, baseline: dict[str, int], args: argparse.Namespace) -> None:
    """Add to `phase.problems` every pass criterion it violates."""
    tally = phase.tally
    if tally.done < phase.count:
        phase.problems.append(f"{tally.done} of {phase.count} done")
    if tally.errors:
        phase.problems.append(f"{tally.errors} errors ({'; '.join(tally.reasons)})")
    if phase.stats:
        if phase.stats["hang_running"]:
            phase.problems.append(f"{phase.stats['hang_running']} hang calls still running after their clients left")
        if tally.unusable > UNUSABLE_STREAMS:
            phase.problems.append(f"{tally.unusable:,} of {tally.streams:,} streams kept in sessions can no longer be "
                                  f"resumed (bound {UNUSABLE_STREAMS})")
        if phase.stats["sessions"]:
            phase.problems.append(f"{phase.stats['sessions']} sessions still live past the idle timeout")
        for counter in ("tasks", "fds"):
            if phase.stats[counter] > baseline[counter]:
                phase.problems.append(f"{counter} {phase.stats[counter]} > {baseline[counter]} after warm-up")
        if phase.object_growth > args.max_object_growth:
            phase.problems.append(f"{phase.object_growth:+,} live objects (bound {args.max_object_growth:,})")
    if phase.rss_end and phase.growth > args.max_growth_mib * MIB:
        phase.problems.append(f"RSS grew {phase.growth / MIB:+.1f} MiB (bound {args.max_growth_mib} MiB)")


def table(phases: list[Phase]) -> str:
    rows = ["| phase | count | done | errors | RSS start MiB | peak MiB | end MiB | growth MiB | live objects growth "
            "| unusable streams | elapsed s | per s | health after |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in phases:
        end, growth = (f"{p.rss_end / MIB:.1f}", f"{p.growth / MIB:+.1f}") if p.rss_end else ("-", "-")
        objects = f"{p.object_growth:+,}" if p.stats else "-"
        rate = f"{p.tally.done / p.elapsed:,.0f}" if p.elapsed else "-"
        rows.append(f"| {p.name} | {p.count:,} | {p.tally.done:,} | {p.tally.errors} | {p.rss_start / MIB:.1f} "
                    f"| {p.rss_peak / MIB:.1f} | {end} | {growth} | {objects} | {p.tally.unusable:,} "
                    f"| {p.elapsed:.1f} | {rate} | {'ok' if p.stats else 'FAILED'} |")
    return "\n".join(rows)


async def soak(server: SoakServer, phases: list[Phase], wave_size: int, args: argparse.Namespace) -> list[str]:
    """Warm up, then measure each phase; the problems found (none: a pass)."""
    await server.ready()
    print(f"# server started: {server.logged().strip() or 'nothing logged'}", file=sys.stderr)  # the random-key warning
    warm_start = server.rss()
    warm = {"sockets": WARMUP_WAVES * wave_size, **WARMUP}
    for phase in phases:
        print(f"# warm-up: {phase.name} x {min(phase.count, warm[phase.name]):,}", file=sys.stderr)
        try:
            tally, _ = await watched(server, phase.run(server.port, min(phase.count, warm[phase.name])), args)
        except Aborted as why:
            return [f"warm-up {phase.name}: {why}"]
        if tally.errors:
            return [f"warm-up {phase.name}: {tally.errors} errors ({'; '.join(tally.reasons)})"]
    await sessions_expired(server.port, args)
    await asyncio.sleep(args.settle)
    baseline = await checkup(server.port)
    print(f"# warm-up done: RSS {warm_start / MIB:.1f} -> {server.rss() / MIB:.1f} MiB; {baseline}", file=sys.stderr)
    problems = []
    previous = baseline
    for phase in phases:
        phase.objects_before = previous["objects"]
        try:
            await measure(server, phase, args)
        except Aborted as why:
            phase.problems.append(str(why))
        judge(phase, baseline, args)
        logged = server.logged()
        if logged:
            phase.problems.append(f"the server logged: {logged.strip()[-500:]}")
        problems += [f"{phase.name}: {why}" for why in phase.problems]
        print(f"# {phase.name}: {phase.tally.done:,} in {phase.elapsed:.1f} s, RSS {phase.rss_start / MIB:.1f} -> "
              f"{phase.rss_end / MIB:.1f} MiB (peak {phase.rss_peak / MIB:.1f}), {phase.stats}", file=sys.stderr)
        if not phase.stats:
            break  # aborted: what follows could not be trusted
        previous = phase.stats
    if phases and all(phase.rss_end for phase in phases):
        total = phases[-1].rss_end - phases[0].rss_start
        if total > args.max_total_growth_mib * MIB:
            problems.append(f"RSS grew {total / MIB:+.1f} MiB over all phases (bound {args.max_total_growth_mib} MiB)")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--sse", type=int, default=20_000)
    parser.add_argument("--disconnects", type=int, default=20_000)
    parser.add_argument("--sockets", type=int, default=10_000)
    parser.add_argument("--session", type=int, default=200_000, help="requests in one long 2025-11-25 session")
    parser.add_argument("--abandoned", type=int, default=20_000, help="2025-11-25 sessions opened, half never ended")
    parser.add_argument("--resume", type=int, default=20_000, help="GET streams dropped and calls dropped and resumed")
    parser.add_argument("--subscribe", type=int, default=100_000, help="subscribe, unsubscribe and touch requests")
    parser.add_argument("--connections", type=int, default=16, help="keep-alive connections of the calls and sse phases")
    parser.add_argument("--concurrency", type=int, default=16, help="disconnect cycles at a time")
    parser.add_argument("--max-connections", type=int, default=defaults.HTTP_MAX_CONNECTIONS, help="the server's limit")
    parser.add_argument("--header-timeout", type=float, default=defaults.HTTP_HEADER_TIMEOUT, help="the server's deadline")
    parser.add_argument("--session-idle-timeout", type=float, default=1.0,
                        help="the server's 2025-era session idle timeout (short: abandoned sessions expire in the run)")
    parser.add_argument("--max-sessions", type=int, default=10_000, help="the server's 2025-era session limit")
    parser.add_argument("--sample-interval", type=float, default=1.0, help="seconds between RSS samples")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of quiet before a phase's end is measured")
    parser.add_argument("--phase-timeout", type=float, default=1800.0)
    parser.add_argument("--max-growth-mib", type=float, default=2.0, help="pass bound on each phase's RSS growth")
    parser.add_argument("--max-total-growth-mib", type=float, default=4.0, help="pass bound on growth over all phases")
    parser.add_argument("--max-object-growth", type=int, default=1000,
                        help="pass bound on each phase's growth in live (gc-tracked) objects")
    parser.add_argument("--server", type=Path, default=SERVER, help="a server file taking soak_server.py's options")
    args = parser.parse_args()

    wave_size = args.max_connections - RESERVED_CONNECTIONS
    if wave_size < 1:
        parser.error(f"--max-connections must leave room for {RESERVED_CONNECTIONS} health connections")
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # a wave holds up to wave_size sockets here and there
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    cpus = sorted(os.sched_getaffinity(0))
    pin = shutil.which("taskset") is not None and len(cpus) >= 2
    if pin:
        os.sched_setaffinity(0, {cpus[1]})
    server = SoakServer(args.server, free_port(), args, cpus[0] if pin else None)
    phases = [phase for phase in (
        Phase("calls", args.calls, lambda port, n: calls(port, n, args.connections, args.phase_timeout)),
        Phase("sse", args.sse, lambda port, n: sse(port, n, args.connections, args.phase_timeout)),
        Phase("disconnects", args.disconnects, lambda port, n: disconnects(port, n, args.concurrency)),
        Phase("sockets", args.sockets, lambda port, n: sockets(port, n, wave_size, args.header_timeout)),
        Phase("session", args.session, lambda port, n: in_session(port, n, args.connections, SESSION_STEPS, server.rss)),
        Phase("abandoned", args.abandoned, lambda port, n: abandoned(port, n, args.concurrency, server.rss)),
        Phase("resume", args.resume, lambda port, n: in_session(port, n, args.concurrency, RESUME_STEPS, server.rss)),
        Phase("subscribe", args.subscribe,
              lambda port, n: in_session(port, n, args.connections, SUBSCRIBE_STEPS, server.rss, listen=True)),
    ) if phase.count > 0]
    try:
        problems = asyncio.run(soak(server, phases, wave_size, args))
    finally:
        server.close()
    placement = f"server on CPU {cpus[0]}, driver on CPU {cpus[1]}" if pin else "server and driver unpinned"
    print(f"Machine: {machine()}; {placement}.")
    print(table(phases))
    if problems:
        print("FAIL: " + "; ".join(problems))
        sys.exit(1)
    print(f"PASS: {', '.join(f'{p.name} {p.count:,}' for p in phases)}; RSS growth within {args.max_growth_mib} MiB "
          f"per phase and {args.max_total_growth_mib} MiB overall; no errors, every health call answered")


if __name__ == "__main__":
    main()
