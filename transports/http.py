"""Streamable HTTP transport: h11 connection state machines on asyncio protocols.

Each TCP connection is a `_Connection` (an `asyncio.Protocol`) that feeds bytes
to one `h11.Connection` and pulls events synchronously. A complete POST runs
the validation ladder (`httprules.py`); a request then becomes a `Call`
submitted to the shared `CallRunner` (`calls.py`) with an `HttpWriter`
(`httpwriter.py`), which answers with one JSON body unless a notification
comes first, in which case it upgrades to an SSE stream (ADR 2). The peer
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
import time
import weakref
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Awaitable, Callable

import anyio
import anyio.abc
import h11
import orjson

from mcpcore import defaults
from mcpcore.auth import AccessToken, Auth, AuthFailure
from mcpcore.call import Call
from mcpcore.protocol import Route
from mcpcore.server import Server
from mcpcore.session import Session, Sessions, new_session_id
from mcpcore.wire import INVALID_REQUEST, NOTIFICATION, REQUEST, RESPONSE, McpError, encode_error

from .calls import CallRunner, cancelled_request
from .flow import WriteFlow
from .httprules import (
    Policy,
    Rejection,
    check_body,
    check_head,
    check_mcp_headers,
    is_legacy,
    legacy_session,
    make_policy,
    public_bind_refusal,
)
from .httpwriter import HttpWriter, Timer, response_head
from .resume import StreamStore

log = logging.getLogger(__name__)


@dataclass
class HttpConfig:
    """Every knob of the HTTP transport, with its default."""

    host: str = defaults.HTTP_HOST
    port: int = defaults.HTTP_PORT
    path: str = defaults.HTTP_PATH
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = defaults.HTTP_MAX_BODY_BYTES
    max_body_chunks: int = defaults.HTTP_MAX_BODY_CHUNKS
    max_header_bytes: int = defaults.HTTP_MAX_HEADER_BYTES
    max_connections: int = defaults.HTTP_MAX_CONNECTIONS
    max_in_flight: int = defaults.HTTP_MAX_IN_FLIGHT
    header_timeout: float = defaults.HTTP_HEADER_TIMEOUT
    body_timeout: float = defaults.HTTP_BODY_TIMEOUT
    keep_alive_timeout: float = defaults.HTTP_KEEP_ALIVE_TIMEOUT
    sse_keepalive: float = defaults.HTTP_SSE_KEEPALIVE
    grace_period: float = defaults.HTTP_GRACE_PERIOD
    max_sessions: int = defaults.HTTP_MAX_SESSIONS
    session_idle_timeout: float = defaults.HTTP_SESSION_IDLE_TIMEOUT
    health_path: str | None = defaults.HTTP_HEALTH_PATH  # None: no liveness probe
    ready_path: str | None = defaults.HTTP_READY_PATH  # None: no readiness probe
    listen_fd: int | None = None  # an inherited listening socket (worker processes)
    metrics_host: str = "127.0.0.1"  # where `Server(metrics=True)` serves GET /metrics: its own listener,
    metrics_port: int | None = None  # never the public one (None: counted but not served)


_NONE_REPEATED: frozenset[str] = frozenset()


def _session_header(session: Session) -> list[tuple[bytes, bytes]]:
    return [(b"mcp-session-id", session.id.encode())]  # type: ignore[union-attr]


def _header_map(raw: list[tuple[bytes, bytes]]) -> tuple[dict[str, str], int, frozenset[str]]:
    """Request headers by lower-case name (repeats joined with ", "), their size in bytes,
    and the names that came more than once."""
    headers: dict[str, str] = {}
    repeated: set[str] = set()
    size = 0
    for name, value in raw:
        size += len(name) + len(value) + 4
        key = name.decode("ascii").lower()
        text = value.decode("latin-1")
        if key in headers:
            repeated.add(key)
            headers[key] = f"{headers[key]}, {text}"
        else:
            headers[key] = text
    return headers, size, frozenset(repeated) if repeated else _NONE_REPEATED


@dataclass(frozen=True)
class Fixed:
    """An answer that needs no MCP processing: a health probe's, or the resource metadata."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: bytes = b"application/json"


_GET_ONLY = Fixed(405, b'{"status":"method not allowed"}', (("allow", "GET, HEAD"),))  # probes, metadata, metrics


class _Connection(WriteFlow):
    """One client connection: h11 events in, one request at a time, responses out."""

    def __init__(self, http: "HttpServer", metrics_only: bool = False) -> None:
        self.http = http
        self.metrics_only = metrics_only  # on the metrics listener: GET /metrics and nothing else
        self.loop = asyncio.get_running_loop()
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=http.config.max_header_bytes)
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[Any, ...] | None = None
        self.gone = False
        self.call: Call | None = None  # the request being served (held or running)
        self.writer: HttpWriter | None = None
        self.stream: asyncio.Task[None] | None = None  # a legacy session's standalone GET stream
        self._opening: Session | None = None  # the session the current initialize may open
        self.deadline: float | None = None  # checked by the server's sweeper (no timer per request)
        self._reading_paused = False
        self._write_blocked = False  # reading paused because our answers are not being read
        self._request: h11.Request | None = None
        self._headers: dict[str, str] = {}
        self._repeated = _NONE_REPEATED
        self._phase: str | None = None  # what the current deadline is for: "head", "body" or "idle"
        self._body = bytearray()  # one buffer: a body in tiny chunks must not cost an object per chunk
        self._body_size = 0  # every byte, kept or dropped
        self._body_chunks = 0
        self._refusal: Rejection | None = None  # answer once the refused request's body is read
        self._fixed: Fixed | None = None  # a probe's or the metadata's answer, sent once its request has ended
        self._token: AccessToken | None = None  # the current request's verified token
        self.verifying: asyncio.Task[None] | None = None  # checking the current request's token

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

    @property
    def serving(self) -> bool:
        """A call or a standalone stream has this connection (no next request is read meanwhile)."""
        return self.call is not None or self.stream is not None or self.verifying is not None

    # -- writing (the writer's `Link`) -----------------------------------

    @property
    def last_response(self) -> bool:
        return self.http.closing

    def time(self) -> float:
        return self.loop.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return self.loop.call_later(delay, callback)

    def send(self, *events: Any) -> None:
        if self.gone or self.transport is None:
            return
        send = self.h11.send
        self.transport.write(b"".join([send(event) or b"" for event in events]))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # -- reading ------------------------------------------------------

    def _lost(self) -> None:
        """The peer is gone: cancel whatever it asked for."""
        self.gone = True
        self._cancel_timer()
        if self.writer is not None:
            self.writer.abort()
        if self.call is not None and self.call.session is None:
            self.call.cancel()  # on the legacy wire only notifications/cancelled cancels
        if self.stream is not None:
            self.stream.cancel()
        if self.verifying is not None:
            self.verifying.cancel()

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
                    self._on_head(event)
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

    def _on_head(self, request: h11.Request) -> None:
        self._request, self._token = request, None
        self._headers, head_size, self._repeated = _header_map(request.headers.raw_items())
        self._body, self._body_size, self._body_chunks, self._refusal = bytearray(), 0, 0, None
        if head_size + len(request.target) > self.http.config.max_header_bytes:
            limit = self.http.config.max_header_bytes
            raise h11.RemoteProtocolError(f"headers exceed the limit of {limit} bytes", error_status_hint=431)
        method, target = request.method.decode("ascii", "replace"), request.target.decode("ascii", "replace")
        self._fixed = self._metrics_answer(method, target) if self.metrics_only else self._fixed_answer(method, target)
        if self._fixed is not None:
            return
        refusal = check_head(self.http.policy, method, target, self._headers)
        expects_continue = self._headers.get("expect", "").lower() == "100-continue"
        if refusal is not None and (refusal.status == 413 or expects_continue):
            self._refuse_now(refusal)  # do not read a body we refuse
        elif refusal is not None:
            self._refusal = refusal  # read (and drop) the body, then answer and keep the connection
        elif expects_continue:
            self.send(h11.InformationalResponse(status_code=100, headers=[]))

    def _on_body(self, data: bytes) -> None:
        config = self.http.config
        self._body_chunks += 1
        self._body_size += len(data)
        if self._body_size > config.max_body_bytes:
            limit = config.max_body_bytes
            self._refuse_now(Rejection(413, McpError(INVALID_REQUEST, f"Body exceeds the limit of {limit} bytes")))
        elif self._body_chunks > config.max_body_chunks:  # each chunk costs parsing time: bound their number
            why = f"Body arrives in more than {config.max_body_chunks} chunks; send larger chunks"
            self._refuse_now(Rejection(400, McpError(INVALID_REQUEST, why)))
        elif self._refusal is None and self._fixed is None:
            self._body += data

    def _on_end(self) -> bool:
        """A whole request arrived: answer it now or start its call. True to keep reading."""
        self._cancel_timer()
        self._phase = None
        if self._fixed is not None:
            fixed = self._fixed
            self._reply(fixed.status, fixed.body, fixed.headers, content_type=fixed.content_type)
            return self._next_cycle()
        if self._refusal is not None:
            self._answer(self._refusal)
            return self._next_cycle()
        auth = self.http.server.auth
        if auth is not None and self._token is None:
            self._verify(auth)  # then back here
            return False
        assert self._request is not None
        if self._request.method != b"POST":
            return self._session_request(self._request.method)
        session_id = self._headers.get("mcp-session-id")
        session = self.http.sessions.get(session_id) if session_id else None
        inbound = check_body(self._body, session if session is not None and session.principal == self._principal else None)
        self._body = bytearray()
        if isinstance(inbound, Rejection):
            self._answer(inbound)
            return self._next_cycle()
        if inbound.kind == RESPONSE:  # delivered to the server-to-client request waiting for it
            return self._accepted()
        if is_legacy(inbound.message, self._headers):
            return self._legacy(inbound.kind, inbound.message)
        if inbound.kind != REQUEST:
            return self._accepted()
        message = inbound.message
        if self.http.closing:
            return self._stopping(message["id"])
        route = self.http.server.route(message)
        mismatch = check_mcp_headers(self._headers, message, route, self._repeated)
        if mismatch is not None:
            self._answer(mismatch)
            return self._next_cycle()
        if self._token is not None and self._forbidden(route, message["id"]):
            return self._next_cycle()
        self._start(self._call(message, route), HttpWriter(self, self.http.config.sse_keepalive))
        return False

    @property
    def _principal(self) -> str | None:
        return None if self._token is None else self._token.subject

    def _call(self, message: dict[str, Any], route: Route, session: Session | None = None) -> Call:
        token = self._token
        subject = None if token is None else token.subject
        return Call(message, route, MappingProxyType(self._headers), self.peer, subject, token, session=session)

    # -- authorization ----------------------------------------------------

    def _verify(self, auth: Auth) -> None:
        """Check the request's bearer token in a task (a verifier may do I/O), then go on with the request."""

        async def verify() -> None:
            try:
                verdict = await auth.authenticate(self._headers.get("authorization"))
            except Exception:  # a verifier that cannot decide (its key server is down, say) is not the client's fault
                log.exception("the token verifier failed")
                verdict = AuthFailure(503, "", "The access token could not be verified now; retry shortly")
            finally:
                self.verifying = None
            if self.gone:
                return
            if isinstance(verdict, AuthFailure):
                self._refuse_token(verdict)
                go_on = self._next_cycle()
            else:
                self._token = verdict
                go_on = self._on_end()
            if go_on:
                self._resume_reading()
                self._advance()

        self.verifying = self.loop.create_task(verify())

    def _refuse_token(self, failure: AuthFailure, request_id: Any = None) -> None:
        headers = (("www-authenticate", failure.challenge),) if failure.challenge else (("retry-after", "1"),)
        self._answer(Rejection(failure.status, McpError(INVALID_REQUEST, failure.message), request_id, headers))

    def _forbidden(self, route: Route, request_id: Any) -> bool:
        """Answer 403 when the token lacks a scope the route's tool requires."""
        auth, tool = self.http.server.auth, route.target
        if auth is None or self._token is None or tool is None or not tool.scopes:  # a token means auth is set
            return False
        failure = auth.check_scopes(self._token, tool.scopes)
        if failure is None:
            return False
        self._refuse_token(failure, request_id)
        return True

    def _start(self, call: Call, writer: HttpWriter) -> None:
        self.call, self.writer = call, writer
        self.http.runner.submit(call, writer, self._finished)

    def _accepted(self) -> bool:
        """202: a notification, or a response, taken."""
        self.send(response_head(202, [(b"content-length", b"0")], self.http.closing), h11.EndOfMessage())
        return self._next_cycle()

    def _stopping(self, request_id: Any) -> bool:
        stopping = Rejection(503, McpError(INVALID_REQUEST, "The server is shutting down; retry elsewhere"), request_id)
        self._answer(stopping, close=True)
        self.close()
        return False

    # -- the legacy (2025-era) wire ---------------------------------------

    def _legacy(self, kind: str, message: dict[str, Any]) -> bool:
        """A legacy POST: `initialize` opens a session, anything else needs a live one."""
        sessions = self.http.sessions
        opening = kind == REQUEST and message["method"] == "initialize" and "mcp-session-id" not in self._headers
        if opening:
            if self.http.closing:
                return self._stopping(message["id"])
            try:
                sessions.reserve()
            except McpError as full:
                self._answer(Rejection(503, full, message["id"], (("retry-after", "1"),)))
                return self._next_cycle()
            session = self._opening = Session(new_session_id(), principal=self._principal)
        else:
            found = legacy_session(self._headers, sessions, message.get("id"), self._principal)
            if isinstance(found, Rejection):
                self._answer(found)
                return self._next_cycle()
            session = found
        if kind == NOTIFICATION:
            self._legacy_notification(session, message)
            return self._accepted()
        if self.http.closing:
            return self._stopping(message["id"])
        if message["id"] in session.calls:
            error = McpError(INVALID_REQUEST, f"Request id {message['id']!r} is already in flight in this session")
            self._answer(Rejection(400, error, message["id"]))
            return self._next_cycle()
        route = self.http.server.route(message)
        if self._token is not None and self._forbidden(route, message["id"]):
            return self._next_cycle()
        call = self._call(message, route, session)
        session.calls[message["id"]] = call
        sink = HttpWriter(self, self.http.config.sse_keepalive, self._session_headers)
        if session.version == "2025-11-25":  # resumable: an SSE stream with event ids (resume.py)
            self.call, self.writer = call, sink
            self.http.runner.submit(call, self.http.stream_store(session).open(sink, self.close), self._finished)
        else:
            self._start(call, sink)
        return False

    def _legacy_notification(self, session: Session, message: dict[str, Any]) -> None:
        if message["method"] == "notifications/cancelled":
            call = session.calls.get(cancelled_request(message))
            if call is not None:
                call.cancel()
        else:
            self.http.server.dispatcher.legacy.notified(session, message)

    def _session_headers(self) -> list[tuple[bytes, bytes]]:
        """`Mcp-Session-Id` on a legacy response; an initialize that negotiated registers its session here,
        before the client can learn the id."""
        session = self.call.session if self.call is not None else None
        if session is None or session.id is None:
            return []
        if self._opening is session:
            if not session.negotiated:
                return []  # a failed initialize mints nothing
            self.http.sessions.add(session)
            self._opening = None
        return _session_header(session)

    def _session_request(self, method: bytes) -> bool:
        """GET opens a session's standalone stream; DELETE ends the session."""
        found = legacy_session(self._headers, self.http.sessions, principal=self._principal)
        if isinstance(found, Rejection):
            self._answer(found)
            return self._next_cycle()
        if method == b"DELETE":
            self.http.sessions.end(found)
            self.http.stores.pop(found, None)
            self.send(response_head(200, [(b"content-length", b"0")], self.http.closing), h11.EndOfMessage())
            return self._next_cycle()
        last_event = self._headers.get("last-event-id")
        if last_event is not None:
            return self._resume(found, last_event)
        if found.streaming:
            self._answer(Rejection(409, McpError(INVALID_REQUEST, "This session's GET stream is already open")))
            return self._next_cycle()
        if self.http.closing:
            return self._stopping(None)
        found.streaming = True

        async def forward(writer: HttpWriter) -> None:  # list changes and resource updates
            await writer.open()
            await found.forward(writer.notify)
            await writer.finish()

        def closed(_: HttpWriter) -> None:
            found.streaming = False

        return self._open_stream(found, forward, closed)

    def _resume(self, session: Session, last_event: str) -> bool:
        """GET with Last-Event-ID: the rest of a stream, after that event."""
        store = self.http.stores.get(session)
        stream = store.find(last_event) if store is not None else None
        if stream is None:
            why = f"Cannot resume after event {last_event!r}: it is unknown to this session or no longer stored"
            self._answer(Rejection(404, McpError(INVALID_REQUEST, why)))
            return self._next_cycle()

        def let_go(writer: HttpWriter) -> None:
            if stream.sink is writer:
                stream.sink = None

        return self._open_stream(session, lambda writer: stream.resume(last_event, writer), let_go)

    def _open_stream(
        self, session: Session, body: Callable[[HttpWriter], Awaitable[None]], ended: Callable[[HttpWriter], None]
    ) -> bool:
        """Serve a GET stream of `session` in a task: `body` writes it, `ended` cleans up after it
        (the session or the peer ended it); then the connection reads on, or closes."""
        writer = HttpWriter(self, self.http.config.sse_keepalive, lambda: _session_header(session))
        self.writer = writer

        async def serve() -> None:
            try:
                await body(writer)
            except asyncio.CancelledError:
                pass
            finally:
                ended(writer)
                self.stream = self.writer = None
                self._after(writer)

        self.stream = self.loop.create_task(serve())
        return False

    def _finished(self, call: Call) -> None:
        """The call ended: read the next request, or close if its response is incomplete."""
        writer = self.writer
        self.call = self.writer = None
        if call.session is not None:
            call.session.calls.pop(call.message["id"], None)
        if self._opening is not None:  # an initialize that did not negotiate
            self.http.sessions.release()
            self._opening = None
        self._after(writer)

    def _after(self, writer: HttpWriter | None) -> None:
        if writer is None or not writer.responded or self.gone:
            if writer is not None:
                writer.abort()
            self.close()
        elif self._next_cycle():
            self._resume_reading()
            self._advance()

    def _next_cycle(self) -> bool:
        """After a response: ready for the next request, or close. True to keep reading."""
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE and not self.http.closing:
            self.h11.start_next_cycle()
            return True
        self.close()
        return False

    # -- refusals and timers --------------------------------------------

    def _fixed_answer(self, method: str, target: str) -> Fixed | None:
        """The answer to a liveness or readiness probe or a resource metadata request; None for
        other paths. No Host, Origin or MCP rule applies: a load balancer probes by address,
        a browser-based client fetches the public metadata cross-origin, and neither reveals a thing."""
        config, http = self.http.config, self.http
        path = target.split("?", 1)[0]
        if path == config.path:
            return None
        metadata = http.metadata is not None and path in http.metadata_paths
        if not (metadata or path in (config.health_path, config.ready_path)):
            return None
        if method not in ("GET", "HEAD"):
            return _GET_ONLY
        if metadata:
            return Fixed(200, http.metadata, (("access-control-allow-origin", "*"),))  # type: ignore[arg-type]
        if path == config.ready_path and not http.ready:
            return Fixed(503, b'{"status":"draining"}')
        return Fixed(200, b'{"status":"ok"}')

    def _metrics_answer(self, method: str, target: str) -> Fixed:
        if target.split("?", 1)[0] != "/metrics":
            return Fixed(404, b'{"status":"not found: this listener serves GET /metrics only"}')
        if method not in ("GET", "HEAD"):
            return _GET_ONLY
        return Fixed(200, self.http.render_metrics(), (), b"text/plain; version=0.0.4; charset=utf-8")

    def _answer(self, rejection: Rejection, close: bool = False) -> None:
        metrics = self.http.server.metrics
        if metrics is not None:
            metrics.rejected(rejection.status)
        self._reply(rejection.status, encode_error(rejection.request_id, rejection.error), rejection.headers, close)

    def _reply(
        self, status: int, body: bytes, extra: tuple[tuple[str, str], ...] = (), close: bool = False,
        content_type: bytes = b"application/json",
    ) -> None:
        """An answer the transport makes itself (a refusal, a probe, the metadata, the metrics)."""
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
        headers += [(name.encode(), value.encode()) for name, value in extra]
        if close or self.http.closing:
            headers.append((b"connection", b"close"))
        events: list[Any] = [response_head(status, headers, False)]
        if self._request is None or self._request.method != b"HEAD":  # a reply to HEAD has no body
            events.append(h11.Data(data=body))
        self.send(*events, h11.EndOfMessage())

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


class HttpServer:
    """Serves one `Server` over Streamable HTTP until `stop()` (graceful) or cancellation.

    Runs on anyio's asyncio backend (it owns asyncio protocols for speed).
    """

    def __init__(self, server: Server, config: HttpConfig | None = None) -> None:
        self.server = server
        self.config = config or HttpConfig()
        refusal = public_bind_refusal(self.config.host, self.config.allowed_hosts)
        if refusal is not None:
            raise ValueError(refusal)
        self.port = self.config.port
        self.policy: Policy = self._policy(self.port)
        self.connections: set[_Connection] = set()
        self.runner = CallRunner(server, max_in_flight=self.config.max_in_flight, grace_period=self.config.grace_period)
        self.sessions = Sessions(self.config.max_sessions, self.config.session_idle_timeout, time.monotonic)
        self.stores: weakref.WeakKeyDictionary[Session, StreamStore] = weakref.WeakKeyDictionary()
        auth = server.auth
        self.metadata = None if auth is None else orjson.dumps(auth.metadata())  # RFC 9728, served as is
        self.metadata_paths = () if auth is None else auth.metadata_paths
        self.metrics_port: int | None = None  # the metrics listener's port, once listening
        self.closing = False
        self._stop = anyio.Event()

    def _policy(self, port: int) -> Policy:
        c = self.config
        return make_policy(c.host, port, c.path, c.allowed_hosts, c.allowed_origins, c.max_body_bytes)

    def render_metrics(self) -> bytes:
        """The server's counters with this transport's live gauges (Prometheus text format)."""
        metrics = self.server.metrics
        assert metrics is not None
        threads = self.server.threads
        return metrics.render({
            "mcpcore_in_flight_calls": ("Calls running or waiting for a slot.", len(self.runner.calls)),
            "mcpcore_http_connections": ("Open HTTP connections.", len(self.connections)),
            "mcpcore_sessions": ("Live 2025-era sessions.", len(self.sessions)),
            "mcpcore_subscriptions": ("Open subscriptions/listen streams.", len(self.server.subscriptions)),
            "mcpcore_worker_threads": ("Worker threads for sync functions.", threads.threads),
            "mcpcore_abandoned_threads": ("Worker threads still running a cancelled call.", threads.abandoned),
        })

    @property
    def ready(self) -> bool:
        """Serving, with the lifespan entered, and not draining (the readiness probe's answer)."""
        return self.server.lifespan.entered and not self.closing

    @property
    def url(self) -> str:
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        return f"http://{host}:{self.port}{self.config.path}"

    def stream_store(self, session: Session) -> StreamStore:
        """The resumable streams of a 2025-11-25 session."""
        store = self.stores.get(session)
        if store is None:
            store = self.stores[session] = StreamStore()
        return store

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
        self.policy = self._policy(self.port)
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
        for session in self.sessions:
            session.changes.close()  # standalone streams end
        await self.runner.drain()
        self.sessions.end_all()


async def serve_http(server: Server, **options: Any) -> None:
    """Serve over HTTP until cancelled. Options are `HttpConfig` fields."""
    await HttpServer(server, HttpConfig(**options)).serve()
