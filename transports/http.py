"""Streamable HTTP transport: an anyio TCP listener and one h11 connection per client.

Each POST carrying a request becomes one `server.handle` call with an
`HttpWriter`: the reply is a single JSON body unless a notification comes
first, in which case it upgrades to an SSE stream (ADR 2). While a call runs,
the connection is watched so a client disconnect cancels it. Limits (body,
headers, connections, in-flight calls, timeouts) are named fields of
`HttpConfig`; `HttpServer.stop()` drains in-flight calls within a grace period.
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import anyio
import anyio.abc
import h11
from anyio.streams.stapled import MultiListener

from mcpcore.call import Call
from mcpcore.server import Server
from mcpcore.wire import INVALID_REQUEST, NOTIFICATION, McpError, encode_error

from .httprules import Inbound, Policy, Rejection, check_body, check_head, check_mcp_headers, make_policy, status_for
from .sse import sse_comment, sse_event

JSON_HEADERS = [(b"content-type", b"application/json")]
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_READ_SIZE = 65536


@dataclass
class HttpConfig:
    """Every knob of the HTTP transport, with its default."""

    host: str = "127.0.0.1"
    port: int = 8000
    path: str = "/mcp"
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = 4 * 1024 * 1024
    max_header_bytes: int = 64 * 1024
    max_connections: int = 1000
    max_in_flight: int = 1024
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive_timeout: float = 30.0
    sse_keepalive: float = 15.0
    grace_period: float = 5.0
    reuse_port: bool = False


def _response(status: int, headers: list[tuple[bytes, bytes]]) -> h11.Response:
    return h11.Response(status_code=status, headers=headers, reason=HTTPStatus(status).phrase.encode())


class ClientGone(Exception):
    """The peer closed the connection or reset it."""


class _Link:
    """One h11 connection over one socket stream: sending and event reading."""

    def __init__(self, stream: anyio.abc.SocketStream, max_header_bytes: int) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=max_header_bytes)
        self.gone = False
        self._lock = anyio.Lock(fast_acquire=True)

    async def send(self, *events: Any) -> None:
        if self.gone:
            raise ClientGone
        data = b"".join(self.h11.send(event) or b"" for event in events)
        async with self._lock:
            try:
                await self.stream.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                self.gone = True
                raise ClientGone from None

    async def receive_more(self) -> None:
        try:
            data = await self.stream.receive(_READ_SIZE)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            data = b""
        if not data:
            self.gone = True
        self.h11.receive_data(data)

    async def next_event(self) -> Any:
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            if self.gone:
                raise ClientGone
            await self.receive_more()


class HttpWriter:
    """The per-request writer: Direct → (Sse →) Closed, as in DESIGN.md."""

    def __init__(self, link: _Link, call: Call, tasks: anyio.abc.TaskGroup, http: "HttpServer") -> None:
        self.link = link
        self.call = call
        self.tasks = tasks
        self.http = http
        self.state = "direct"
        self._last_write = 0.0

    async def _write(self, *events: Any) -> None:
        try:
            await self.link.send(*events)
        except ClientGone:
            self.call.cancelled = True
            raise anyio.get_cancelled_exc_class() from None
        self._last_write = anyio.current_time()

    async def notify(self, message: bytes) -> None:
        if self.call.cancelled:
            return
        if self.state == "closed":
            raise RuntimeError("notification after the response was sent")
        events: list[Any] = []
        if self.state == "direct":
            self.state = "sse"
            events.append(_response(200, self.http.closing_headers(SSE_HEADERS)))
            self.tasks.start_soon(self._keep_alive)
        events.append(h11.Data(data=sse_event(message)))
        await self._write(*events)

    async def respond(self, message: bytes, error_code: int | None = None) -> None:
        if self.call.cancelled:
            return
        if self.state == "closed":
            raise RuntimeError("a second response for one request")
        if self.state == "direct":
            headers = self.http.closing_headers(JSON_HEADERS + [(b"content-length", str(len(message)).encode())])
            events: list[Any] = [_response(status_for(error_code), headers), h11.Data(data=message)]
        else:
            events = [h11.Data(data=sse_event(message))]
        self.state = "closed"
        await self._write(*events, h11.EndOfMessage())

    async def _keep_alive(self) -> None:
        """A comment line on an idle SSE stream so proxies keep it open."""
        interval = self.http.config.sse_keepalive
        while self.state == "sse":
            await anyio.sleep(max(0.0, self._last_write + interval - anyio.current_time()))
            if self.state == "sse" and anyio.current_time() - self._last_write >= interval:
                await self._write(h11.Data(data=sse_comment()))


class HttpServer:
    """Serves one `Server` over Streamable HTTP until `stop()` (graceful) or cancellation."""

    def __init__(self, server: Server, config: HttpConfig | None = None) -> None:
        self.server = server
        self.config = config or HttpConfig()
        self.port = self.config.port
        self.policy: Policy = make_policy(
            self.config.host, self.config.port, self.config.path, self.config.allowed_hosts, self.config.allowed_origins,
            self.config.max_body_bytes,
        )
        self._stop = anyio.Event()
        self._connections = 0
        self._active = 0
        self._idle = anyio.Event()
        self._slots = anyio.Semaphore(self.config.max_in_flight, fast_acquire=True)
        self._closing = False

    @property
    def url(self) -> str:
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        return f"http://{host}:{self.port}{self.config.path}"

    def stop(self) -> None:
        """Stop accepting, end subscriptions gracefully, let in-flight calls finish
        (grace period), then return from `serve`."""
        self._stop.set()

    async def serve(self, *, task_status: anyio.abc.TaskStatus[HttpServer] = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(
            local_host=self.config.host, local_port=self.config.port, reuse_port=self.config.reuse_port, backlog=1024
        )
        self.port = _bound_port(listener)
        if self.config.port == 0:
            self.policy = make_policy(
                self.config.host, self.port, self.config.path, self.config.allowed_hosts, self.config.allowed_origins,
                self.config.max_body_bytes,
            )
        async with anyio.create_task_group() as connections:
            async with anyio.create_task_group() as accepting:
                accepting.start_soon(listener.serve, self._connection, connections)
                task_status.started(self)
                await self._stop.wait()
                accepting.cancel_scope.cancel()
            await listener.aclose()
            self._closing = True
            self.server.close_subscriptions()
            with anyio.move_on_after(self.config.grace_period):
                while self._active:
                    self._idle = anyio.Event()
                    await self._idle.wait()
            connections.cancel_scope.cancel()

    async def _connection(self, stream: anyio.abc.SocketStream) -> None:
        self._connections += 1
        link = _Link(stream, self.config.max_header_bytes)
        try:
            if self._connections > self.config.max_connections:
                busy = Rejection(503, McpError(INVALID_REQUEST, "Too many connections; retry shortly"), None, (("retry-after", "1"),))
                await self._send_rejection(link, busy, close=True)
                return
            await self._serve_link(link)
        except (ClientGone, h11.ProtocolError):
            pass
        except Exception:  # one broken connection must never take the server down
            traceback.print_exc(file=sys.stderr)
        finally:
            self._connections -= 1
            await stream.aclose()

    async def _serve_link(self, link: _Link) -> None:
        first = True
        while not self._closing:
            timeout = self.config.header_timeout if first else self.config.keep_alive_timeout
            first = False
            try:
                request = await self._next_request(link, timeout)
            except h11.RemoteProtocolError as error:
                status = 408 if error.error_status_hint == 408 else error.error_status_hint
                if link.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    await self._send_rejection(link, Rejection(status, McpError(INVALID_REQUEST, f"Bad request: {error}")), close=True)
                return
            if request is None:
                return
            try:
                keep = await self._exchange(link, request)
            except h11.RemoteProtocolError as error:  # e.g. a malformed chunked body
                if link.h11.our_state is h11.SEND_RESPONSE:
                    await self._send_rejection(link, Rejection(400, McpError(INVALID_REQUEST, f"Bad request: {error}")), close=True)
                return
            if not keep or link.h11.our_state is not h11.DONE or link.h11.their_state is not h11.DONE:
                return
            link.h11.start_next_cycle()

    async def _next_request(self, link: _Link, idle_timeout: float) -> h11.Request | None:
        """The next request head; None on a clean close or an idle timeout."""
        with anyio.move_on_after(idle_timeout):
            while True:
                event = link.h11.next_event()
                if isinstance(event, h11.Request):
                    return event
                if event is h11.NEED_DATA:
                    if link.gone:
                        return None
                    if link.h11.trailing_data[0] or link.h11.their_state is not h11.IDLE:
                        return await self._rest_of_head(link)
                    await link.receive_more()
                    continue
                return None  # ConnectionClosed or PAUSED
        if link.h11.trailing_data[0]:
            raise h11.RemoteProtocolError("Request headers took too long", error_status_hint=408)
        return None

    async def _rest_of_head(self, link: _Link) -> h11.Request | None:
        with anyio.move_on_after(self.config.header_timeout):
            event = await link.next_event()
            return event if isinstance(event, h11.Request) else None
        raise h11.RemoteProtocolError("Request headers took too long", error_status_hint=408)

    async def _exchange(self, link: _Link, request: h11.Request) -> bool:
        """Answer one request; False when the connection must close afterwards."""
        headers = _header_map(request.headers)
        head_only = request.method == b"HEAD"
        head_size = len(request.target) + sum(len(name) + len(value) + 4 for name, value in request.headers)
        if head_size > self.config.max_header_bytes:
            too_big = Rejection(431, McpError(INVALID_REQUEST, f"Headers exceed the limit of {self.config.max_header_bytes} bytes"))
            await self._send_rejection(link, too_big, close=True, head_only=head_only)
            return False
        method, target = request.method.decode("ascii", "replace"), request.target.decode("ascii", "replace")
        rejection = check_head(self.policy, method, target, headers)
        expects_continue = headers.get("expect", "").lower() == "100-continue"
        if rejection is not None:
            if rejection.status == 413 or expects_continue:  # do not read a body we refuse
                await self._send_rejection(link, rejection, close=True, head_only=head_only)
                return False
            unread = await self._read_body(link)  # bounded by the body limit and timeout
            if isinstance(unread, Rejection):
                rejection = unread
            await self._send_rejection(link, rejection, close=isinstance(unread, Rejection), head_only=head_only)
            return not isinstance(unread, Rejection)
        if expects_continue:
            await link.send(h11.InformationalResponse(status_code=100, headers=[]))
        body = await self._read_body(link)
        if isinstance(body, Rejection):
            await self._send_rejection(link, body, close=True)
            return False
        inbound = check_body(body)
        if isinstance(inbound, Rejection):
            await self._send_rejection(link, inbound)
            return True
        if inbound.kind == NOTIFICATION:
            await link.send(_response(202, self.closing_headers([(b"content-length", b"0")])), h11.EndOfMessage())
            return True
        tool = None
        if inbound.message["method"] == "tools/call":
            params = inbound.message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            tool = self.server.tools.get(name) if isinstance(name, str) else None
        mismatch = check_mcp_headers(headers, inbound.message, tool.headers if tool else ())
        if mismatch is not None:
            await self._send_rejection(link, mismatch)
            return True
        await self._call(link, inbound)
        return True

    async def _read_body(self, link: _Link) -> bytes | Rejection:
        limit = self.config.max_body_bytes
        parts: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.config.body_timeout):
            while True:
                event = await link.next_event()
                if isinstance(event, h11.Data):
                    size += len(event.data)
                    if size > limit:
                        return Rejection(413, McpError(INVALID_REQUEST, f"Body exceeds the limit of {limit} bytes"))
                    parts.append(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    return b"".join(parts)
                else:
                    raise ClientGone
        return Rejection(408, McpError(INVALID_REQUEST, "The request body took too long to arrive"))

    async def _call(self, link: _Link, inbound: Inbound) -> None:
        call = Call(inbound.message)
        await self._slots.acquire()
        self._active += 1
        try:
            async with anyio.create_task_group() as tasks:
                writer = HttpWriter(link, call, tasks, self)
                tasks.start_soon(self._watch_disconnect, link, call, tasks.cancel_scope)
                await self.server.handle(call, writer)
                tasks.cancel_scope.cancel()
        finally:
            self._slots.release()
            self._active -= 1
            if not self._active:
                self._idle.set()
        if call.cancelled:
            raise ClientGone

    async def _watch_disconnect(self, link: _Link, call: Call, scope: anyio.CancelScope) -> None:
        """Read ahead while a call runs; the peer closing cancels the call."""
        while not link.gone and len(link.h11.trailing_data[0]) < self.config.max_header_bytes + self.config.max_body_bytes:
            await link.receive_more()
        if link.gone:
            call.cancelled = True
            scope.cancel()
        else:
            await anyio.sleep_forever()

    def closing_headers(self, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        """Response headers, plus `Connection: close` once shutdown has begun."""
        return headers + [(b"connection", b"close")] if self._closing else list(headers)

    async def _send_rejection(self, link: _Link, rejection: Rejection, close: bool = False, head_only: bool = False) -> None:
        body = encode_error(rejection.request_id, rejection.error)
        headers = JSON_HEADERS + [(b"content-length", str(len(body)).encode())]
        headers += [(name.encode(), value.encode()) for name, value in rejection.headers]
        if close or self._closing:
            headers.append((b"connection", b"close"))
        events: list[Any] = [_response(rejection.status, headers)]
        if not head_only:  # a response to HEAD carries no body
            events.append(h11.Data(data=body))
        await link.send(*events, h11.EndOfMessage())


def _header_map(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in raw:
        key = name.decode("ascii")
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


def _bound_port(listener: Any) -> int:
    listeners = listener.listeners if isinstance(listener, MultiListener) else [listener]
    return listeners[0].extra(anyio.abc.SocketAttribute.local_port)


async def serve_http(server: Server, **options: Any) -> None:
    """Serve over HTTP until cancelled. Options are `HttpConfig` fields."""
    http = HttpServer(server, HttpConfig(**options))
    await http.serve()

