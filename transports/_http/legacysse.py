"""The deprecated HTTP+SSE transport (protocol 2024-11-05), served beside Streamable HTTP.

Theory of operation. A client opens a stream with `GET` on `HttpConfig.sse_path`
(`/sse`). That request takes a session place as `initialize` does on the MCP
endpoint (`Sessions.reserve`: 503 when every place, or the principal's share, is
taken) and registers its `Session` at once, owned by the request's principal;
the answer is an SSE stream whose first event, `endpoint`, names the URL the
client POSTs its messages to: `sse_message_path?session_id=<id>`. Every message
the server sends the session goes out on that one stream as a `message` event:
each call's notifications, server-to-client requests and response (its writer
is a `Forward`), and the list changes and resource updates the session follows.

A POST to the message URL passes the checks a POST to the MCP endpoint does
(Origin, Host, Content-Type, size, the bearer token and its scopes, the body)
and must come from the principal that opened the stream (else 404, as for an
unknown session). Its message is taken by `HeldSession.take`: a request starts
a call (at most `MAX_CALLS` in flight per session), a notification is handled, a
client's response reaches the server-to-client request waiting for it; then the
POST is answered `202 Accepted`, long before the call ends. A session ends as
any 2025-era session does, after `session_idle_timeout` without a POST, and
also when its stream ends: the client closing it is what DELETE is on the MCP
endpoint (its calls are cancelled, its place given back). A draining server
lets the calls in flight answer on the stream, then ends it.

`Exchanging` is what this module uses of the request's `Exchange` (the exchange
imports this module, so it is named here by its shape).
"""

from __future__ import annotations

import asyncio
import logging
from types import MappingProxyType
from typing import Any, Awaitable, Callable, Mapping, Protocol, cast
from urllib.parse import quote

from mcpcore._runtime.call import Call
from mcpcore._runtime.defaults import HTTP_SSE_MAX_CALLS
from mcpcore._runtime.session import Session, Sessions, SessionsFull
from mcpcore._serving.server import Server
from mcpcore._wire.jsonrpc import INVALID_REQUEST, NOTIFICATION, RESPONSE, McpError
from mcpcore._wire.protocol import Route
from mcpcore.auth import AccessToken

from .._calls import CallRunner, Malformed, cancelled_request, read_message, take_response
from .config import HttpConfig
from .rules import Rejection, refusal, sse_session, sse_session_id
from .sse import sse_endpoint
from .writer import HttpWriter

log = logging.getLogger("mcpcore.transports.legacysse")

MAX_CALLS = HTTP_SSE_MAX_CALLS


def paths(config: HttpConfig) -> tuple[str, ...]:
    """The transport's two paths, stream first; () when it is off. Each must be a path of its own."""
    if not config.sse_path:
        return ()
    served = (config.sse_path, config.sse_message_path)
    if len(set(served)) < 2 or config.path in served or not all(path.startswith("/") for path in served):
        raise ValueError(f"the HTTP+SSE paths {served} must be two different paths starting with '/', neither the MCP "
                         f"endpoint {config.path!r} (set sse_path=None to serve no HTTP+SSE)")
    return served


class Endpointish(Protocol):
    """What this module reads of the endpoint (`exchange.Endpoint`)."""

    server: Server
    config: HttpConfig
    runner: CallRunner
    sessions: Sessions
    closing: bool


class Exchanging(Protocol):
    """What this module uses of one request's exchange (`exchange.Exchange`; see its hooks)."""

    endpoint: Endpointish
    peer: tuple[Any, ...] | None
    root_path: str
    _method: str
    _target: str
    _headers: dict[str, str]
    _body: bytearray
    _token: AccessToken | None

    @property
    def _principal(self) -> str | None: ...

    def _answer(self, rejection: Rejection, close: bool = False) -> None: ...

    def _next_cycle(self) -> bool: ...

    def _accepted(self) -> bool: ...

    def _stopping(self, request_id: Any) -> bool: ...

    def _forbidden(self, route: Route, message: dict[str, Any]) -> bool: ...

    def _sharing(self, work: Awaitable[Any], then: Callable[[Any], bool], request_id: Any = None) -> bool: ...

    def _open_stream(self, session: Session, body: Callable[[HttpWriter], Awaitable[None]],
                     ended: Callable[[HttpWriter], None]) -> bool: ...


def serve(exchange: Exchanging) -> bool:
    """A request on one of the transport's paths, its head checked (`rules.check_sse_head`) and its
    token verified: GET opens a stream, POST brings a message. True to read the next request."""
    if exchange._method == "GET":
        return _open(exchange)
    return _post(exchange)


# -- the stream ---------------------------------------------------------------


def _open(exchange: Exchanging) -> bool:
    """Register a session in a place of its own, and serve its stream."""
    endpoint = exchange.endpoint
    if endpoint.closing:
        return exchange._stopping(None)
    sessions = endpoint.sessions
    try:
        sessions.reserve(exchange._principal)
    except SessionsFull as full:
        exchange._answer(Rejection(503, full, None, (("retry-after", "1"),)))
        return exchange._next_cycle()
    held = HeldSession(endpoint, sessions.new(exchange._principal))
    sessions.add(held.session)
    uri = f"{quote(exchange.root_path.rstrip('/') + endpoint.config.sse_message_path)}?session_id={held.session.id}"
    token = exchange._token
    lifetime = None if token is None else token.lifetime()
    return exchange._open_stream(held.session, lambda writer: held.serve(writer, uri, lifetime), lambda writer: None)


class Forward:
    """A call's writer: everything it sends goes out on its session's stream."""

    __slots__ = ("held",)

    def __init__(self, held: HeldSession) -> None:
        self.held = held

    async def notify(self, message: bytes) -> None:
        await self.held.send(message)

    async def respond(self, message: bytes, error_code: int | None = None) -> None:
        await self.held.send(message)


class HeldSession:
    """An HTTP+SSE session on the process holding its stream: what it sends goes out there, and each
    message POSTed for it is taken here."""

    def __init__(self, endpoint: Endpointish, session: Session) -> None:
        self.endpoint = endpoint
        self.session = session
        self.writer: HttpWriter | None = None  # the stream, once its endpoint event is out
        self._quiet: asyncio.Event | None = None  # set when the last call in flight ends (while draining)
        session.outbox = self.send
        session.inbox = self
        session.streaming = True

    async def serve(self, writer: HttpWriter, uri: str, lifetime: float | None) -> None:
        """The stream: the endpoint event, then the session's messages until it ends (or, at most, for
        `lifetime` seconds: while the token that opened it lasts); then the session ends with it."""
        try:
            await writer.open(sse_endpoint(uri))
            self.writer = writer
            await self.session.forward(self.send, lifetime)
            if self.endpoint.closing:  # draining: the calls in flight answer on this stream first
                await self._calls_over()
            await writer.finish()
        finally:
            self.endpoint.sessions.end(self.session)

    async def send(self, message: bytes) -> None:
        """One message on the stream; dropped once the stream is over (the session is ending)."""
        writer = self.writer
        if writer is not None and not writer.responded:
            await writer.notify(message)

    async def _calls_over(self) -> None:
        while self.session.calls:
            self._quiet = asyncio.Event()
            await self._quiet.wait()

    def _call_ended(self, call: Call) -> None:
        self.session.calls.pop(call.message["id"], None)
        if self._quiet is not None and not self.session.calls:
            self._quiet.set()

    def take(self, kind: str, message: dict[str, Any], headers: Mapping[str, str], peer: tuple[Any, ...] | None,
             token: AccessToken | None, route: Route | None = None) -> Rejection | Awaitable[None] | None:
        """Take a message POSTed for the session: None when it is taken, what to await first when taking
        it changes the shared record (a notification), or why a request is refused."""
        session = self.session
        if kind == RESPONSE:
            problem = take_response(message, session)
            return None if problem is None else refusal(problem)
        if kind == NOTIFICATION:
            if message["method"] == "notifications/cancelled":
                session.cancel(cancelled_request(message))
                return None
            return self.endpoint.server.dispatcher.legacy.notified(session, message)
        request_id = message["id"]
        if self.endpoint.closing:
            return Rejection(503, McpError(INVALID_REQUEST, "The server is shutting down; retry elsewhere"), request_id)
        if request_id in session.calls:
            return Rejection(400, McpError(INVALID_REQUEST, f"Request id {request_id!r} is already in flight in this session"),
                             request_id)
        if len(session.calls) >= MAX_CALLS:
            why = f"This session has {MAX_CALLS} requests in flight; wait for an answer before sending more"
            return Rejection(503, McpError(INVALID_REQUEST, why), request_id, (("retry-after", "1"),))
        call = Call(message, route or self.endpoint.server.route(message), MappingProxyType(dict(headers)), peer,
                    None if token is None else token.subject, token, session=session)
        session.calls[request_id] = call
        self.endpoint.runner.submit(call, Forward(self), self._call_ended)
        return None

    def relayed(self, event: dict[str, Any]) -> None:
        """A message POSTed to another process for this session (`Sessions.heard`)."""
        raise NotImplementedError


# -- a message ------------------------------------------------------------------


def _post(exchange: Exchanging) -> bool:
    """A message for a session held here: taken (then 202), or refused."""
    endpoint = exchange.endpoint
    found = sse_session_id(exchange._target)
    if isinstance(found, str):
        found = sse_session(found, endpoint.sessions, exchange._principal)
    if isinstance(found, Rejection):
        exchange._answer(found)
        return exchange._next_cycle()
    inbound = read_message(exchange._body)
    exchange._body = bytearray()
    if isinstance(inbound, Malformed):
        exchange._answer(refusal(inbound.error, inbound.request_id))
        return exchange._next_cycle()
    kind, message = inbound
    route = None
    if kind not in (RESPONSE, NOTIFICATION):
        if endpoint.closing:
            return exchange._stopping(message["id"])
        route = endpoint.server.route(message)
        if exchange._token is not None and exchange._forbidden(route, message):
            return exchange._next_cycle()
    outcome = cast(HeldSession, found.inbox).take(kind, message, exchange._headers, exchange.peer, exchange._token, route)
    if isinstance(outcome, Rejection):
        exchange._answer(outcome)
        return exchange._next_cycle()
    if outcome is not None:  # a shared session's change, recorded before the 202
        return exchange._sharing(outcome, lambda _: exchange._accepted())
    return exchange._accepted()
