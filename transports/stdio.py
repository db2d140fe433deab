"""stdio transport: newline-delimited JSON-RPC on stdin/stdout.

`serve_stdio(server)` reads lines, runs each request in its own task (at most
`max_in_flight` at once: when full it stops reading, so nothing is dropped),
and writes replies and notifications one whole line at a time. The protocol
owns private duplicates of fds 0 and 1; fd 1 itself is pointed at stderr so
`print()`, logging and child processes can never corrupt the stream.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from typing import Any

import anyio
import orjson

from mcpcore.call import Call
from mcpcore.server import Server
from mcpcore.wire import (
    INVALID_REQUEST,
    NOTIFICATION,
    PARSE_ERROR,
    RESPONSE,
    McpError,
    classify,
    encode_error,
    readable_id,
)

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_IN_FLIGHT = 128
DEFAULT_GRACE_PERIOD = 2.0
_READ_SIZE = 256 * 1024


def claim_stdio() -> tuple[int, int]:
    """Take fds 0/1 for the protocol; leave fd 0 on /dev/null and fd 1 on stderr."""
    sys.stdout.flush()
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol_in, protocol_out


class _Fd:
    """Async reads and writes on one fd; waits on the event loop when it would block."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._was_blocking = os.get_blocking(fd)
        # Regular files are always ready and cannot be polled; others go non-blocking.
        self._pollable = not stat.S_ISREG(os.fstat(fd).st_mode)
        if self._pollable:
            os.set_blocking(fd, False)

    def restore(self) -> None:
        if self._pollable:
            os.set_blocking(self.fd, self._was_blocking)

    async def read(self) -> bytes:
        while True:
            try:
                return os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)

    async def write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self.fd)


class LineWriter:
    """Writes whole lines; concurrent writers never interleave."""

    def __init__(self, out: _Fd) -> None:
        self._out = out
        self._lock = anyio.Lock(fast_acquire=True)
        self.broken = False

    async def write(self, message: bytes) -> None:
        if self.broken:
            return
        async with self._lock:
            try:
                await self._out.write_all(message + b"\n")
            except (BrokenPipeError, ConnectionResetError):
                self.broken = True


@dataclass(slots=True)
class _CallWriter:
    """One call's view of stdout: silent once the call was cancelled."""

    lines: LineWriter
    call: Call

    async def notify(self, message: bytes) -> None:
        if not self.call.cancelled:
            await self.lines.write(message)

    async def respond(self, message: bytes, error_code: int | None = None) -> None:
        if not self.call.cancelled:
            await self.lines.write(message)


class StdioSession:
    """Reads requests from one input fd and serves them until EOF."""

    def __init__(
        self,
        server: Server,
        in_fd: int,
        out_fd: int,
        *,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        grace_period: float = DEFAULT_GRACE_PERIOD,
    ) -> None:
        self.server = server
        self._in = _Fd(in_fd)
        self._out = _Fd(out_fd)
        self.lines = LineWriter(self._out)
        self.max_line_bytes = max_line_bytes
        self.grace_period = grace_period
        self._slots = anyio.Semaphore(max_in_flight, fast_acquire=True)
        self._in_flight: dict[Any, tuple[Call, anyio.CancelScope]] = {}
        self._drained = anyio.Event()
        self._reading = anyio.CancelScope()

    def stop(self) -> None:
        """Stop reading as if stdin had closed: drain in-flight calls, then return."""
        self._reading.cancel()

    async def serve(self) -> None:
        try:
            async with anyio.create_task_group() as tasks:
                with self._reading:
                    await self._read_until_eof(tasks)
                await self._drain()
                tasks.cancel_scope.cancel()
        finally:
            self._in.restore()
            self._out.restore()

    async def _drain(self) -> None:
        """After EOF: end subscriptions gracefully, let in-flight calls finish
        within the grace period, then cancel them."""
        self.server.close_subscriptions()
        self._drained = anyio.Event()
        if self._in_flight:
            with anyio.move_on_after(self.grace_period):
                await self._drained.wait()
        for call, scope in list(self._in_flight.values()):
            call.cancelled = True
            scope.cancel()

    async def _read_until_eof(self, tasks: anyio.abc.TaskGroup) -> None:
        parts: list[bytes] = []  # the current, still unterminated line
        size = 0
        discarding = False  # inside a line already rejected as oversized
        while not self.lines.broken:
            chunk = await self._in.read()
            if not chunk:
                break
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                piece = chunk[start:end]
                start = end + 1
                if discarding:
                    discarding = False
                elif size + len(piece) > self.max_line_bytes:
                    await self._reject_oversized()
                else:
                    await self._accept(b"".join(parts) + piece if parts else piece, tasks)
                parts.clear()
                size = 0
            if start < len(chunk) and not discarding:
                parts.append(chunk[start:])
                size += len(chunk) - start
                if size > self.max_line_bytes:
                    await self._reject_oversized()
                    parts.clear()
                    size, discarding = 0, True
        if parts:
            await self._accept(b"".join(parts), tasks)

    async def _reject_oversized(self) -> None:
        error = McpError(INVALID_REQUEST, f"Message exceeds the maximum line size of {self.max_line_bytes} bytes")
        await self.lines.write(encode_error(None, error))

    async def _accept(self, line: bytes, tasks: anyio.abc.TaskGroup) -> None:
        if not line.strip():
            return
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError as error:
            await self.lines.write(encode_error(None, McpError(PARSE_ERROR, f"Parse error: {error}")))
            return
        try:
            kind = classify(message)
        except McpError as error:
            await self.lines.write(encode_error(readable_id(message), error))
            return
        if kind == NOTIFICATION:
            self._notified(message)
        elif kind != RESPONSE:
            await self._start(message, tasks)

    def _notified(self, message: dict[str, Any]) -> None:
        if message["method"] == "notifications/cancelled":
            params = message.get("params")
            entry = self._in_flight.get(params.get("requestId")) if isinstance(params, dict) else None
            if entry is not None:
                call, scope = entry
                call.cancelled = True
                scope.cancel()

    async def _start(self, message: dict[str, Any], tasks: anyio.abc.TaskGroup) -> None:
        request_id = message["id"]
        if request_id in self._in_flight:
            error = McpError(INVALID_REQUEST, f"Request id {request_id!r} is already in flight; ids must be unique")
            await self.lines.write(encode_error(request_id, error))
            return
        await self._slots.acquire()
        call = Call(message)
        scope = anyio.CancelScope()
        self._in_flight[request_id] = (call, scope)
        tasks.start_soon(self._run, call, scope)

    async def _run(self, call: Call, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                await self.server.handle(call, _CallWriter(self.lines, call))
        finally:
            del self._in_flight[call.message["id"]]
            self._slots.release()
            if not self._in_flight:
                self._drained.set()


def open_stdio(server: Server, *, in_fd: int | None = None, out_fd: int | None = None, **options: Any) -> StdioSession:
    """A session on the given fds, or on the process's claimed stdin/stdout (see `claim_stdio`).

    Options: max_in_flight, max_line_bytes, grace_period.
    """
    if in_fd is None or out_fd is None:
        in_fd, out_fd = claim_stdio()
    return StdioSession(server, in_fd, out_fd, **options)


async def serve_stdio(server: Server, **options: Any) -> None:
    """Serve `server` over stdio until EOF on the input (options as for `open_stdio`)."""
    await open_stdio(server, **options).serve()
