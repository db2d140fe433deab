"""Streamable HTTP transport: h11 connection state machines on asyncio protocols.

Each TCP connection is a `_Connection` (an `asyncio.Protocol`) that feeds bytes
to one `h11.Connection`, pulls events synchronously and hands each request's
head, body and end to the `Exchange` it is (`_http/exchange.py`, shared with the
ASGI adapter): the validation ladder (`_http/rules.py`) runs there, and a
request becomes a `Call` submitted to the shared `CallRunner` (`_calls.py`)
with an `HttpWriter` (`_http/writer.py`), which answers with one JSON body
unless a notification comes first, in which case it upgrades to an SSE
stream (ADR 2). The peer
closing the connection cancels the call. Owning the socket callbacks keeps the hot
path free of per-request task groups and stream wrappers (ADR 11); anyio still
runs the server and everything inside a call. Limits (body, headers,
connections, in-flight calls, timeouts) are named fields of `HttpConfig`;
`HttpServer.stop()` drains in-flight calls within a grace period.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import anyio
import anyio.abc
import h11

from mcpcore._serving.server import Server
from mcpcore._wire.jsonrpc import INVALID_REQUEST, McpError

from ._flow import WriteFlow
from ._http.config import HttpConfig
from ._http.exchange import GET_ONLY, Endpoint, Exchange, Fixed
from ._http.rules import Rejection, public_bind_refusal
from ._http.writer import REASONS

log = logging.getLogger(__name__)


class _Connection(WriteFlow, Exchange):
    """One client connection: h11 events in, one request at a time, responses out."""

    def __init__(self, http: "HttpServer", metrics_only: bool = False) -> None:
        Exchange.__init__(self, http)
        self.http = http
        self.metrics_only = metrics_only  # on the metrics listener: GET /metrics and nothing else
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=http.config.max_header_bytes)
        self.transport: asyncio.Transport | None = None
        self.deadline: float | None = None  # checked by the server's sweeper (no timer per request)
        self._reading_paused = False
        self._write_blocked = False  # reading paused because our answers are not being read
        self._phase: str | None = None  # what the current deadline is for: "head", "body" or "idle"

    # -- asyncio callbacks ------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = tuple(peer) if isinstance(peer, (tuple, list)) else None
        self.http.connections.add(self)
        if len(self.http.connections) > self.http.config.max_connections:
            busy = Rejection(503, McpError(INVALID_REQUEST, "Too many connections; retry shortly"), None, (("retry-after", "1"),))
            self._refuse_now(busy)
            return
        self._phase = "head"
        self._set_timer(self.http.config.header_timeout)

    def data_received(self, data: bytes) -> None:
        self.h11.receive_data(data)
        if not self.serving:
            self._advance()
        elif len(self.h11.trailing_data[0]) > self.http.config.max_header_bytes + self.http.config.max_body_bytes:
            self._pause_reading()  # a pipelining client far ahead of us

    def eof_received(self) -> bool | None:
        self.h11.receive_data(b"")
        if not self.serving:
            self._advance()
        else:
            self._lost()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost()
        self.http.connections.discard(self)
        self.resume_writing()

    # -- writing (the writer's `Link`) -----------------------------------

    def send(self, *events: Any) -> None:
        if self.gone or self.transport is None:
            return
        send = self.h11.send
        self.transport.write(b"".join([send(event) or b"" for event in events]))

    def whole(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """A whole response in one write, its bytes framed here rather than by h11's `send` (which
        checks and rebuilds every head, a third of an answer's cost); h11 is then told the response
        went out (`_answered`). Only for the common case: a POST on a connection h11 keeps alive,
        no CORS headers, the server not closing; anything else goes through h11."""
        states = getattr(self.h11, "_cstate", None)  # h11's own state machine: private, so only where it is found
        if (states is None or self._cors is not None or self.gone or self.transport is None or self.http.closing
                or self._method != "POST" or self.h11.our_state is not h11.SEND_RESPONSE or not states.keep_alive):
            return super().whole(status, headers, body)
        lines = b"".join([name + b": " + value + b"\r\n" for name, value in headers])
        self.transport.write(b"HTTP/1.1 %d %s\r\n%s\r\n%s" % (status, REASONS.get(status, b""), lines, body))
        _answered(self.h11)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # -- reading ------------------------------------------------------

    def _lost(self) -> None:
        super()._lost()
        self._cancel_timer()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_blocked and not self.gone:  # the peer reads again: so do we
            self._write_blocked = False
            self._resume_reading()
            if not self.serving:
                self._advance()

    def _advance(self) -> None:
        """Pull events until one needs more data or starts a call, or the peer stops reading."""
        try:
            while not self.gone:
                if self._drained is not None:  # answers pile up unread: read no more until they drain
                    self._write_blocked = True
                    self._pause_reading()
                    return
                event = self.h11.next_event()
                if event is h11.NEED_DATA:
                    self._waiting()
                    return
                if event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
                    if isinstance(event, h11.ConnectionClosed) or self.h11.their_state is h11.CLOSED:
                        self.close()
                    return
                if isinstance(event, h11.Request):
                    self._on_request(event)
                elif isinstance(event, h11.Data):
                    self._on_body(event.data)
                elif isinstance(event, h11.EndOfMessage) and not self._on_end():
                    return
        except h11.RemoteProtocolError as error:
            status = error.error_status_hint
            self._refuse_now(Rejection(status, McpError(INVALID_REQUEST, f"Bad request: {error}")))
        except Exception:  # one broken connection must never take the server down
            log.exception("fault on an HTTP connection from %s; closing it", self.peer)
            self.close()

    def _waiting(self) -> None:
        """Arm the deadline that fits what we are waiting for, once per phase.

        A head and a body each get one total deadline from their first byte; more
        bytes do not extend it, so a client trickling one byte at a time still times out.
        """
        config = self.http.config
        if self.h11.their_state is h11.SEND_BODY:
            phase, seconds = "body", config.body_timeout
        elif self.h11.trailing_data[0]:
            phase, seconds = "head", config.header_timeout
        elif self.http.closing:
            self.close()  # idle while shutting down
            return
        else:
            phase, seconds = "idle", config.keep_alive_timeout
        if phase != self._phase:
            self._phase = phase
            self._set_timer(seconds)

    def _on_request(self, request: h11.Request) -> None:
        method, target = request.method.decode("ascii", "replace"), request.target.decode("ascii", "replace")
        if self._on_head(method, target, request.headers.raw_items()) and self._expects_continue:
            if self._fixed is None and self._refusal is None:
                self.send(h11.InformationalResponse(status_code=100, headers=[]))

    def _on_end(self) -> bool:
        self.deadline, self._phase = None, None
        return self._serve()

    def _next_cycle(self) -> bool:
        """After a response: ready for the next request, or close. True to keep reading."""
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE and not self.http.closing:
            self.h11.start_next_cycle()
            return True
        self.close()
        return False

    def _read_on(self) -> None:
        self._resume_reading()
        self._advance()

    # -- refusals and timers --------------------------------------------

    def _fixed_answer(self, method: str, path: str) -> Fixed | None:
        if self.metrics_only:  # GET /metrics or nothing: no MCP rule applies
            return self._metrics_answer(method, path)
        return super()._fixed_answer(method, path)

    def _metrics_answer(self, method: str, path: str) -> Fixed:
        if path != "/metrics":
            return Fixed(404, b'{"status":"not found: this listener serves GET /metrics only"}')
        if method not in ("GET", "HEAD"):
            return GET_ONLY
        return Fixed(200, self.http.render_metrics(), (), b"text/plain; version=0.0.4; charset=utf-8")

    def _refuse_now(self, rejection: Rejection) -> None:
        """Answer (if the state machine still allows it) and close the connection."""
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            try:
                self._answer(rejection, close=True)
            except h11.LocalProtocolError:
                pass
        self.close()
        self.gone = True

    def _set_timer(self, seconds: float) -> None:
        self.deadline = self.loop.time() + seconds

    def _cancel_timer(self) -> None:
        self.deadline = None

    def timed_out(self) -> None:
        if self.serving:
            return
        if self.h11.their_state is h11.SEND_BODY or self.h11.trailing_data[0]:
            self._refuse_now(Rejection(408, McpError(INVALID_REQUEST, "The request took too long to arrive")))
        else:
            self.close()  # idle keep-alive connection

    def _pause_reading(self) -> None:
        if not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()


def _answered(connection: h11.Connection) -> None:
    """Move h11's state machine past a whole response written without its `send` (a Response,
    then EndOfMessage, as `send` would; `tests/test_http_framing.py` holds the two alike)."""
    states = connection._cstate
    states.process_event(h11.SERVER, h11.Response)
    states.process_event(h11.SERVER, h11.EndOfMessage)
    connection.client_is_waiting_for_100_continue = False


class HttpServer(Endpoint):
    """Serves one `Server` over Streamable HTTP until `stop()` (graceful) or cancellation.

    Runs on anyio's asyncio backend (it owns asyncio protocols for speed).
    """

    def __init__(self, server: Server, config: HttpConfig | None = None) -> None:
        config = config or HttpConfig()
        refusal = public_bind_refusal(config.host, config.allowed_hosts)
        if refusal is not None:
            raise ValueError(refusal)
        super().__init__(server, config)
        self.connections: set[_Connection] = set()
        self.metrics_port: int | None = None  # the metrics listener's port, once listening
        self._stop = anyio.Event()

    def render_metrics(self) -> bytes:
        """The server's counters with this transport's live gauges (Prometheus text format)."""
        assert self.server.metrics is not None
        return self.server.metrics.render(self.gauges(len(self.connections)))

    @property
    def url(self) -> str:
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        return f"http://{host}:{self.port}{self.config.path}"

    def stop(self) -> None:
        """Stop accepting, end subscriptions gracefully, let in-flight calls finish
        (grace period), then return from `serve`."""
        self._stop.set()

    async def serve(self, *, task_status: anyio.abc.TaskStatus[HttpServer] = anyio.TASK_STATUS_IGNORED) -> None:
        """Enter the server's lifespan, listen, and serve until `stop()`; the lifespan ends after the drain."""
        async with self.server.lifespan:
            await self._listen_and_serve(task_status)

    async def _listen_and_serve(self, task_status: anyio.abc.TaskStatus[HttpServer]) -> None:
        loop = asyncio.get_running_loop()
        if self.config.listen_fd is not None:
            inherited = socket.socket(fileno=self.config.listen_fd)
            listener = await loop.create_server(lambda: _Connection(self), sock=inherited, backlog=1024)
        else:
            listener = await loop.create_server(lambda: _Connection(self), self.config.host, self.config.port, backlog=1024)
        sockets = listener.sockets or []
        self.port = sockets[0].getsockname()[1] if sockets else self.config.port
        self.policy = self.policy_for(self.config.host, self.port)
        metrics = None
        if self.server.metrics is not None and self.config.metrics_port is not None:
            metrics = await loop.create_server(lambda: _Connection(self, metrics_only=True), self.config.metrics_host,
                                               self.config.metrics_port)
            self.metrics_port = (metrics.sockets or [None])[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            task_status.started(self)
            async with anyio.create_task_group() as sweeping:
                sweeping.start_soon(self._sweep)
                await self._stop.wait()
                listener.close()
                await self._drain()
                sweeping.cancel_scope.cancel()
        finally:
            listener.close()
            if metrics is not None:
                metrics.close()
            self.runner.cancel_all()
            self.sessions.end_all()
            for connection in list(self.connections):
                connection.close()

    async def _sweep(self) -> None:
        """Expire connections past their deadline (slow heads or bodies, idle keep-alive)."""
        c = self.config
        interval = min(1.0, max(0.01, min(c.header_timeout, c.body_timeout, c.keep_alive_timeout) / 4))
        while True:
            await anyio.sleep(interval)
            now = asyncio.get_running_loop().time()
            for connection in list(self.connections):
                if connection.deadline is not None and connection.deadline <= now:
                    connection.deadline = None
                    connection.timed_out()
            self.sessions.expire()

    async def _drain(self) -> None:
        self.closing = True
        for connection in list(self.connections):
            if not connection.serving and not connection.h11.trailing_data[0]:
                connection.close()  # idle: nothing to finish
        await self.drain()


async def serve_http(server: Server, **options: Any) -> None:
    """Serve over HTTP until cancelled. Options are `HttpConfig` fields."""
    await HttpServer(server, HttpConfig(**options)).serve()
