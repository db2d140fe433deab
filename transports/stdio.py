"""stdio transport: newline-delimited JSON-RPC on stdin/stdout.

`open_stdio(server).serve()` reads lines and hands each to the shared
`CallRunner` (`_calls.py`), which runs each request in its own task (at most
`max_in_flight` at once: while calls are held it stops reading, so nothing is
dropped); replies and notifications are written one whole line at a time. The protocol
owns private duplicates of fds 0 and 1; fd 1 itself is pointed at stderr so
`print()`, logging and child processes can never corrupt the stream. The
pipes are driven by asyncio pipe transports (ADR 11); an fd the event loop
cannot poll (a regular file, /dev/null, any pipe on Windows; every fd under
`MCPCORE_PORTABLE=1`) is bridged into a socket pair by a copying thread (ADR 45).
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import selectors
import signal
import socket
import stat
import sys
import threading
from typing import Any, Awaitable, Callable, Iterator

import anyio

from mcpcore._runtime.call import Call
from mcpcore._runtime.clientstate import Bucket
from mcpcore._runtime.defaults import (
    PORTABLE_ENV, STDIO_GRACE_PERIOD, STDIO_MAX_HELD, STDIO_MAX_IN_FLIGHT, STDIO_MAX_LINE_BYTES, portable_forced,
)
from mcpcore._runtime.session import Session
from mcpcore._serving.server import Server
from mcpcore._wire.jsonrpc import INVALID_REQUEST, NOTIFICATION, REQUEST, RESPONSE, McpError, encode_error
from mcpcore._wire.protocol import claims_modern

from ._calls import EAGER_TASKS, CallRunner, Inbound, Malformed, cancelled_request, read_message, take_response
from ._flow import WriteFlow

log = logging.getLogger(__name__)



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


def _make_blocking(fd: int) -> None:
    """A copying thread waits on its fd: an inherited O_NONBLOCK would end the copy at once."""
    try:
        os.set_blocking(fd, True)
    except (AttributeError, OSError):  # Windows before 3.12 has no set_blocking (and no O_NONBLOCK to undo)
        pass


def _copy_in(source: int, sock: socket.socket) -> None:
    try:
        _make_blocking(source)
        while chunk := os.read(source, 1 << 16):
            sock.sendall(chunk)  # waits while the loop's side is full: reading pauses there, so here too
    except OSError:
        pass
    finally:
        sock.close()  # EOF for the loop, or the loop closed its side first


def _copy_out(sock: socket.socket, target: int) -> None:
    try:
        _make_blocking(target)
        while chunk := sock.recv(1 << 16):
            view = memoryview(chunk)
            while view:
                view = view[os.write(target, view) :]
    except OSError:
        pass
    finally:
        os.close(target)
        sock.close()  # the loop's transport sees it as a lost connection: nobody reads our answers


def _can_poll(fd: int) -> bool:
    """Whether the event loop can drive `fd` as a pipe. Only POSIX loops have pipe transports that poll
    (Windows' proactor needs overlapped handles, which an inherited stdin is not), and their selector
    must accept the fd (pipes, sockets, ttys do; /dev/null and regular files do not). Probed here, not by
    trying `connect_read_pipe`: that registers the fd in a later callback, where a refusal is only logged."""
    if os.name != "posix":
        return False
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
        return True
    except (OSError, ValueError):
        return False


def hung_up(fd: int) -> bool:
    """Whether the writer of pipe `fd` has closed it, even with unread bytes still in it (POLLHUP)."""
    if not hasattr(select, "poll"):  # no poll(): EOF is seen once the bytes before it are read
        return False
    poller = select.poll()
    poller.register(fd, select.POLLIN)  # POLLHUP is reported whatever was asked for
    return any(events & select.POLLHUP for _, events in poller.poll(0))


CORK_BYTES = 1 << 16  # gathered answers are written once they reach this size
HANGUP_POLL_SECONDS = 0.25  # how often a paused reader looks for the client's hang-up


def bridge(fd: int, reading: bool) -> tuple[socket.socket, threading.Thread]:
    """The portable path: a socket for the event loop (every loop drives sockets, Windows' proactor
    included), copied from `fd` (reading) or into a duplicate of it by a daemon thread.

    Socket buffers are bounded and the thread copies one chunk at a time, so back-pressure holds both
    ways: a paused reader stops the thread reading `fd`, and a client that stops reading stops the
    thread, then the socket, then the transport (`pause_writing`). EOF crosses as the thread closing
    its end; the loop's end closing makes the thread's next copy fail, which ends it."""
    ours, theirs = socket.socketpair()
    copy, args = (_copy_in, (fd, theirs)) if reading else (_copy_out, (theirs, os.dup(fd)))
    thread = threading.Thread(target=copy, args=args, daemon=True, name="mcpcore-stdio-bridge")
    _start_without_signals(thread)
    return ours, thread


def _start_without_signals(thread: threading.Thread) -> None:
    """Start `thread` with SIGINT and SIGTERM blocked in it (a thread inherits the mask it starts with), so
    the kernel hands them to the loop's thread: `signal.signal`'s handler (the portable path's) runs only
    there, and a signal left with a thread blocked reading would wait for its next byte."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks, and no such hand-off
        thread.start()
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM))
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _Output(WriteFlow):
    """Flow control for the output pipe; `resumed` runs when a full pipe drains, `lost` once nobody reads it."""

    broken = False

    def __init__(self, resumed: Callable[[], None], lost: Callable[[], None]) -> None:
        self.resumed = resumed
        self.lost = lost

    def resume_writing(self) -> None:
        super().resume_writing()
        self.resumed()

    def connection_lost(self, exc: Exception | None) -> None:
        self.broken = True
        self.resume_writing()
        self.lost()


class _Input(asyncio.Protocol):
    def __init__(self, session: "StdioSession") -> None:
        self.session = session

    def data_received(self, data: bytes) -> None:
        self.session.feed(data)

    def eof_received(self) -> bool | None:
        self.session.last_line()
        self.session.end_of_input()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.session.end_of_input()


class _Done:
    """An awaitable with nothing to wait for: what a cancelled call's `respond` returns."""

    def __await__(self) -> Iterator[None]:
        return iter(())


_NOTHING = _Done()


class _CallWriter:
    """One call's view of stdout: whole lines, silent once the call was cancelled."""

    __slots__ = ("session", "call")

    def __init__(self, session: "StdioSession", call: Call) -> None:
        self.session = session
        self.call = call

    async def notify(self, message: bytes) -> None:
        if not self.call.cancelled:
            await self.session.write(message)

    def respond(self, message: bytes, error_code: int | None = None) -> Awaitable[None]:
        """The session's write, awaited by the caller (no frame of the writer's around it)."""
        return self.session.write(message) if not self.call.cancelled else _NOTHING

    @property
    def client_place(self) -> Bucket:
        """The process's one client's state (`ctx.client_state`): read only by a call that uses it."""
        return self.session.client_state


class StdioSession:
    """Reads requests from one input fd and serves them until EOF or `stop()`."""

    def __init__(
        self,
        server: Server,
        in_fd: int,
        out_fd: int,
        *,
        max_in_flight: int = STDIO_MAX_IN_FLIGHT,
        max_line_bytes: int = STDIO_MAX_LINE_BYTES,
        grace_period: float = STDIO_GRACE_PERIOD,
        max_held: int = STDIO_MAX_HELD,
    ) -> None:
        self.server = server
        self.in_fd, self.out_fd = in_fd, out_fd
        self.max_line_bytes = max_line_bytes
        self.max_held = max_held  # cancellations and EOF behind fewer held requests are still read
        self.grace_period = grace_period
        # One reader, so nothing waits behind an eager first step but the next line (ADR 13).
        self.runner = CallRunner(server, max_in_flight=max_in_flight, grace_period=grace_period, eager=True)
        self.calls: dict[Any, Call] = {}  # by request id: running or held
        self.era: str | None = None  # fixed by the first request: "modern", or "legacy" after initialize
        self.session: Session | None = None  # the process's legacy session
        self.client_state = Bucket()  # the one client's state on the 2026-07-28 wire (`ctx.client_state`)
        self._forwarder: asyncio.Task[None] | None = None  # list changes and updates to a legacy client
        self._parts: list[bytes] = []  # the current, still unterminated line
        self._corked: list[bytes] | None = None  # answers gathered while a chunk of several lines is served
        self._corked_bytes = 0
        self._size = 0
        self._discarding = False  # inside a line already rejected as oversized
        self._input: asyncio.ReadTransport | None = None
        self._paused = False  # reading paused by a bound (`_pause`), not by the end of input
        self._output: asyncio.WriteTransport | None = None
        self._out = _Output(self._read_more, self._abandon)
        self._ended = anyio.Event()
        self._watcher: asyncio.Task[None] | None = None  # looks for a hang-up while reading is paused

    # -- lifecycle ------------------------------------------------------

    def stop(self) -> None:
        """Stop reading as if stdin had closed: drain in-flight calls, then return."""
        self.end_of_input()

    def end_of_input(self) -> None:
        if self._input is not None:
            self._input.pause_reading()
        self._ended.set()

    async def serve(self) -> None:
        """Enter the server's lifespan and serve until EOF or `stop()`; the lifespan ends after the drain."""
        async with self.server.lifespan:
            await self._serve()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        piped: dict[int, bool] = {}  # fds driven as pipes, and whether they were blocking before
        out_bridge: threading.Thread | None = None
        try:
            self._output, out_bridge = await self._connect(loop, self.out_fd, False, piped)
            self._input, _ = await self._connect(loop, self.in_fd, True, piped)
            await self._ended.wait()
            if self.session is not None:
                self.session.changes.close()  # no more unsolicited messages
            await self.runner.drain()
            if self.session is not None:
                self.session.close()
            self._uncork()
            await self._flush()
        finally:
            if self._watcher is not None:
                self._watcher.cancel()
            if out_bridge is not None:
                if self._output is not None and not self._out.broken:
                    self._output.write_eof()  # at once when flushed: the thread copies the rest, then ends
                out_bridge.join(self.grace_period)  # let the copy into stdout finish
            for transport in (self._input, self._output):
                if transport is not None:
                    transport.close()
            for fd, was_blocking in piped.items():
                try:
                    os.set_blocking(fd, was_blocking)
                except OSError:
                    pass

    async def _connect(
        self, loop: asyncio.AbstractEventLoop, fd: int, reading: bool, piped: dict[int, bool]
    ) -> tuple[Any, threading.Thread | None]:
        """A transport on `fd` (ADR 11): a pipe transport where the loop can poll it, else a socket
        transport on a bridge (ADR 45), with the bridge's thread."""
        protocol: asyncio.Protocol = _Input(self) if reading else self._out
        forced = portable_forced()
        if not forced and _can_poll(fd):
            piped[fd] = os.get_blocking(fd)
            file = os.fdopen(fd, "rb" if reading else "wb", buffering=0, closefd=False)
            connect = loop.connect_read_pipe if reading else loop.connect_write_pipe
            transport, _ = await connect(lambda: protocol, file)
            return transport, None
        sock, thread = bridge(fd, reading)
        why = f"{PORTABLE_ENV}=1" if forced else "the event loop cannot poll it"
        log.debug("%s is bridged through a socket pair (%s)", "stdin" if reading else "stdout", why)
        transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock)
        return transport, thread

    async def _flush(self) -> None:
        with anyio.move_on_after(self.grace_period):
            while self._output is not None and self._output.get_write_buffer_size() and not self._out.broken:
                await self.drain()
                await anyio.sleep(0.01)

    # -- output -------------------------------------------------------

    async def write(self, message: bytes) -> None:
        """Write one message as one line (lines never interleave)."""
        if self._out.broken or self._output is None:
            self._abandon()
            return
        self._write_now(message)
        if self._out._drained is not None:  # only a full pipe makes a writer wait
            await self._out.drain()

    def _abandon(self) -> None:
        """Nobody reads our output any more (stdout closed): stop serving."""
        self.end_of_input()
        self.runner.cancel_all()

    async def drain(self) -> None:
        await self._out.drain()

    def _write_now(self, message: bytes) -> None:
        if self._out.broken or self._output is None:
            return
        corked = self._corked
        if corked is None:
            self._output.write(message + b"\n")
            return
        corked.append(message)
        self._corked_bytes += len(message)
        if self._corked_bytes >= CORK_BYTES:
            self._write_corked()

    def _write_corked(self) -> None:
        """Write the gathered lines in one go (one system call instead of one per line)."""
        corked = self._corked
        if corked and not self._out.broken and self._output is not None:
            corked.append(b"")
            self._output.write(b"\n".join(corked))
        if corked is not None:
            corked.clear()
        self._corked_bytes = 0

    def _uncork(self) -> None:
        self._write_corked()
        self._corked = None

    # -- input --------------------------------------------------------

    def feed(self, chunk: bytes) -> None:
        """Split a chunk of input into lines and accept each complete one; read no more
        while the answers written for them wait in a full output pipe.

        The answers to a chunk of several lines are gathered (up to `CORK_BYTES`) and written
        together once the calls it started have taken their first step: a pipelining client
        gets them in one write instead of one system call per answer. Before Python 3.12 those
        calls start together, a pass later, not eagerly one by one (ADR 13): their answers wait
        for that write anyway, and a sync tool's job handed to a worker per line fought the rest
        of the parsing for the GIL; 3.12's own eager start is cheap enough to keep.
        """
        end = chunk.find(b"\n")
        if end == len(chunk) - 1 and not self._parts and not self._discarding and end <= self.max_line_bytes:
            self.runner.eager = True  # one whole line, a lockstep client's: its newline is whitespace to the parser
            self._line(chunk)
        else:
            cork = self._corked is None and end < len(chunk) - 1  # more after the first line
            if cork:
                self._corked = []
            self.runner.eager = EAGER_TASKS or not cork
            self._lines(chunk)
            if cork:
                asyncio.get_running_loop().call_soon(self._uncork)  # queued behind the first steps of its calls
        if self._out._drained is not None and self._input is not None:
            self._pause()
            self._watch_for_hangup()

    def _watch_for_hangup(self) -> None:
        """Reading waits for our unread answers, so EOF would go unseen: look for the client's
        hang-up meanwhile, and take it as the end of input (the lines still unread are dropped)."""
        if self._watcher is None:  # stdin itself, bridged or not: a bridge's thread waits on the full socket
            self._watcher = asyncio.get_running_loop().create_task(self._watch(self.in_fd))

    async def _watch(self, fd: int) -> None:
        try:
            while self._out._drained is not None and not self._ended.is_set():
                if hung_up(fd):
                    log.info("stdin closed while our answers wait unread: ending the session")
                    self.end_of_input()
                    return
                await anyio.sleep(HANGUP_POLL_SECONDS)
        finally:
            self._watcher = None

    def _lines(self, chunk: bytes) -> None:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:end]
            start = end + 1
            if self._discarding:
                self._discarding = False
            elif self._size + len(piece) > self.max_line_bytes:
                self._reject_oversized()
            else:
                self._line(b"".join(self._parts) + piece if self._parts else piece)
            if self._parts:  # (`_size` counts what they hold)
                self._parts.clear()
                self._size = 0
        if start < len(chunk) and not self._discarding:
            self._parts.append(chunk[start:])
            self._size += len(chunk) - start
            if self._size > self.max_line_bytes:
                self._reject_oversized()
                self._parts.clear()
                self._size, self._discarding = 0, True

    def last_line(self) -> None:
        """At EOF, a final line without a newline still counts."""
        if self._parts and not self._discarding:
            self._line(b"".join(self._parts))
        self._parts.clear()

    def _reject_oversized(self) -> None:
        error = McpError(INVALID_REQUEST, f"Message exceeds the maximum line size of {self.max_line_bytes} bytes")
        self._write_now(encode_error(None, error))

    def _line(self, line: bytes) -> None:
        if not line or line.isspace():  # a blank line (no copy made to find out)
            return
        inbound = read_message(line)
        if inbound.__class__ is Inbound and inbound.kind == REQUEST:  # the commonest, first
            self._submit(inbound.message)
        elif isinstance(inbound, Malformed) and inbound.kind in (NOTIFICATION, RESPONSE):  # never answered (JSON-RPC 2.0)
            log.warning("dropped a %s from the client: %s", inbound.kind, inbound.error.message)
        elif isinstance(inbound, Malformed):
            self._write_now(encode_error(inbound.request_id, inbound.error))
        elif inbound.kind == NOTIFICATION:
            self._notified(inbound.message)  # never held: a cancellation may be what frees the window
        elif inbound.kind == RESPONSE:
            problem = take_response(inbound.message, self.session)
            if problem is not None:  # a response cannot be answered: say so in the log
                log.warning("dropped a response from the client (id %r): %s", inbound.message.get("id"), problem.message)

    def _notified(self, message: dict[str, Any]) -> None:
        if message["method"] == "notifications/cancelled":
            call = self.calls.get(cancelled_request(message))
            if call is not None:
                call.cancel()
        elif self.session is not None and not claims_modern(message):
            self.server.dispatcher.legacy.notified(self.session, message)

    def _era_refusal(self, message: dict[str, Any]) -> McpError | None:
        """The first request fixes the era of the process; say so to a request of the other one."""
        legacy = message["method"] == "initialize" and not claims_modern(message)
        if self.era is None:
            self.era = "legacy" if legacy else "modern"
            if legacy:
                self.session = Session(outbox=self.write)
            return None
        if self.era == "modern" and legacy:
            return McpError(INVALID_REQUEST, "This process serves the stateless 2026-07-28 wire (its first request was not "
                            "initialize); a 2025-era session cannot be opened on it: start a new process")
        if self.era == "legacy" and claims_modern(message):
            return McpError(INVALID_REQUEST, "This process serves a 2025-era session opened by initialize; requests "
                            "claiming protocol 2026-07-28 in _meta need a process of their own")
        return None

    def _submit(self, message: dict[str, Any]) -> None:
        request_id = message["id"]
        if request_id in self.calls:
            error = McpError(INVALID_REQUEST, f"Request id {request_id!r} is already in flight; ids must be unique")
            self._write_now(encode_error(request_id, error))
            return
        refusal = None if self.era == "modern" and message["method"] != "initialize" else self._era_refusal(message)
        if refusal is not None:
            self._write_now(encode_error(request_id, refusal))
            return
        call = self.calls[request_id] = Call(message, self.server.route(message), session=self.session)
        held = not self.runner.submit(call, _CallWriter(self, call), self._finished)
        if held and self.runner.held >= self.max_held and self._input is not None:
            self._pause()  # enough read ahead: read again once the held calls start

    def _finished(self, call: Call) -> None:
        del self.calls[call.message["id"]]
        if self.session is not None and self.session.negotiated and self._forwarder is None:
            self._forwarder = asyncio.get_running_loop().create_task(self.session.forward(self.write))
        self._read_more()

    def _pause(self) -> None:
        """Read no more until `_read_more` finds the bound that paused reading lifted."""
        self._paused = True
        self._input.pause_reading()  # type: ignore[union-attr]

    def _read_more(self) -> None:
        """Read input again, unless `max_held` calls wait for a slot or our output is not being read
        (after each call: at once when no bound paused reading, the usual case)."""
        if not self._paused:
            return
        blocked = self.runner.held >= self.max_held or self._out._drained is not None
        if not blocked and self._input is not None and not self._ended.is_set():
            self._paused = False
            self._input.resume_reading()


def open_stdio(server: Server, *, in_fd: int | None = None, out_fd: int | None = None, **options: Any) -> StdioSession:
    """A session on the given fds, or on the process's claimed stdin/stdout (see `claim_stdio`).

    Options: max_in_flight, max_line_bytes, grace_period, max_held.
    """
    if in_fd is None or out_fd is None:
        in_fd, out_fd = claim_stdio()
    return StdioSession(server, in_fd, out_fd, **options)
