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
POST is answered `202 Accepted`, long before the call ends. A server that runs
stateless or answers JSON only serves neither path (404, saying why). A session ends as
any 2025-era session does, after `session_idle_timeout` without a POST, and
also when its stream ends: the client closing it is what DELETE is on the MCP
endpoint (its calls are cancelled, its place given back). A draining server
lets the calls in flight answer on the stream, then ends it.

Several processes sharing sessions (`SessionStore`, `--redis`). Only the process
holding the stream serves the session, and its copy is the whole truth: the
session records no change in the store. What the store keeps is a record saying
that the session lives, whose it is and that it is an HTTP+SSE one (`sse`),
saved when the stream opens (after the principal's share is counted there, as
for any session) and deleted when it ends; Redis expires it when idle. A POST
reads that record first, in whichever process it lands (restarting the idle
clock), and is refused as above from it; one that reached another process than
the holder is relayed there whole (`SessionStore.relay`: the message, the
request's headers but its Authorization, its peer and its verified token), and
the holder takes it as if it had arrived there (`HeldSession.relayed`; a request
it refuses is answered on the stream). The other process answers 202 once the
message is queued for Redis: a notification relayed so, then a request POSTed
straight to the holder, may in principle be taken in the other order.

`ExchangeShape` is what this module uses of the request's `Exchange` (the exchange
imports this module, so it is named here by its shape).
"""

from __future__ import annotations

import asyncio
import logging
from types import MappingProxyType
from typing import Any, Awaitable, Callable, Mapping, Protocol, cast
from urllib.parse import quote

from mcpcore._runtime.call import Call
from mcpcore._runtime.defaults import HTTP_SSE_MAX_CALLS, HTTP_SSE_PATH
from mcpcore._runtime.session import Session, SessionRecord, Sessions, SessionsFull, SessionStore, new_session_id
from mcpcore._serving.server import Server
from mcpcore._wire.jsonrpc import INVALID_REQUEST, NOTIFICATION, REQUEST, RESPONSE, McpError, encode_error
from mcpcore._wire.protocol import Route
from mcpcore.auth import AccessToken

from .._calls import CallRunner, Malformed, cancelled_request, read_message, take_response
from .config import HttpConfig
from .rules import Rejection, refusal, sse_session, sse_session_gone, sse_session_id
from .sse import sse_endpoint
from .writer import HttpWriter

log = logging.getLogger("mcpcore.transports.legacysse")

MAX_CALLS = HTTP_SSE_MAX_CALLS


def paths(config: HttpConfig) -> tuple[str, ...]:
    """The transport's two paths, stream first; () when it is off. Each must be a path of its own."""
    if not config.sse_path:
        return ()
    served = (config.sse_path, config.sse_message_path)
    taken = {config.path, config.health_path, config.ready_path} & set(served)
    if len(set(served)) < 2 or taken or not all(path.startswith("/") for path in served):
        raise ValueError(f"the HTTP+SSE paths {served} must be two different paths starting with '/', and neither the MCP "
                         f"endpoint {config.path!r} nor a probe's (set sse_path=None to serve no HTTP+SSE)")
    return served


class EndpointShape(Protocol):
    """What this module reads of the endpoint (`exchange.Endpoint`)."""

    server: Server
    config: HttpConfig
    runner: CallRunner
    sessions: Sessions
    closing: bool


class ExchangeShape(Protocol):
    """What this module uses of one request's exchange (`exchange.Exchange`; see its hooks)."""

    endpoint: EndpointShape
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


def serve(exchange: ExchangeShape) -> bool:
    """A request on one of the transport's paths, its head checked (`rules.check_sse_head`) and its
    token verified: GET opens a stream, POST brings a message. True to read the next request."""
    config = exchange.endpoint.config
    if config.stateless or config.json_response:
        return _refuse(exchange, _unserved(config))
    if exchange._method == "GET":
        return _open(exchange)
    return _post(exchange)


def _unserved(config: HttpConfig) -> Rejection:
    """404 where the server's switches leave no room for this transport, saying which."""
    why = ("runs stateless (--stateless, or --workers without --redis), and an HTTP+SSE session lives in the process holding its stream"
           if config.stateless else "answers JSON only (--json-response), and HTTP+SSE answers on a stream")
    return _not_found(config, f"this server {why}")


def switched_off(config: HttpConfig, path: str) -> Rejection | None:
    """404 saying so for the transport's usual paths when it is switched off (`sse_path` ''); else None."""
    if config.sse_path or path not in (HTTP_SSE_PATH, config.sse_message_path):
        return None
    return _not_found(config, "this server serves no HTTP+SSE (2024-11-05) transport (sse_path is off)")


def _not_found(config: HttpConfig, why: str) -> Rejection:
    served = f"use Streamable HTTP at {config.path} (protocol 2025-03-26 and later)"
    return Rejection(404, McpError(INVALID_REQUEST, f"Not found: {why}; {served}"))


def _refuse(exchange: ExchangeShape, rejection: Rejection) -> bool:
    exchange._answer(rejection)
    return exchange._next_cycle()


# -- the stream ---------------------------------------------------------------


def _open(exchange: ExchangeShape) -> bool:
    """Register a session in a place of its own (in the shared store too, if any), and serve its stream."""
    endpoint = exchange.endpoint
    if endpoint.closing:
        return exchange._stopping(None)
    sessions = endpoint.sessions
    try:
        sessions.reserve(exchange._principal)
    except SessionsFull as full:
        return _refuse(exchange, Rejection(503, full, None, (("retry-after", "1"),)))
    held = HeldSession(endpoint, Session(new_session_id(), exchange._principal, ttl=sessions.idle_timeout))
    token = exchange._token
    lifetime = None if token is None else token.lifetime()
    uri = f"{quote(exchange.root_path.rstrip('/') + endpoint.config.sse_message_path)}?session_id={held.session.id}"

    def stream(_: Any = None) -> bool:
        if endpoint.closing:  # began to close while the session was being shared: it ends unopened
            return exchange._sharing(held.end(), lambda _: exchange._stopping(None))
        return exchange._open_stream(held.session, lambda writer: held.serve(writer, uri, lifetime), lambda writer: None)

    if sessions.store is None:
        sessions.add(held.session)
        return stream()
    return exchange._sharing(held.share(sessions.store), stream)


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
    message POSTed for it is taken here (`take`; `relayed` from another process)."""

    def __init__(self, endpoint: EndpointShape, session: Session) -> None:
        self.endpoint = endpoint
        self.session = session
        self.writer: HttpWriter | None = None  # the stream, once its endpoint event is out
        self._quiet: asyncio.Event | None = None  # set when the last call in flight ends (while draining)
        self._answering: set[asyncio.Task[None]] = set()  # refusals of relayed requests, on their way out
        session.outbox = self.send
        session.inbox = self
        session.streaming = True

    async def share(self, store: SessionStore) -> None:
        """Count the session in the principal's share across processes, store its record, then hold it
        here; whatever fails, or the client leaving meanwhile, gives back what it took."""
        sessions, session = self.endpoint.sessions, self.session
        claim = sessions.claim(session)
        if claim is not None:
            await claim  # refused or cut short, it gave the place back
        try:
            await store.save(SessionRecord(session.id, session.principal, "", {}, {}, sse=True), sessions.idle_timeout)  # type: ignore[arg-type]
        except BaseException:
            forgetting = sessions.abandon(session)
            if forgetting is not None:
                await asyncio.shield(forgetting)
            raise
        sessions.add(session)

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
            await self.end()

    async def end(self) -> None:
        """End the session as DELETE does: here (its calls cancelled, its place given back), then in the
        shared store, if any (which goes on if the caller is cancelled)."""
        sessions = self.endpoint.sessions
        sessions.end(self.session)
        if sessions.store is not None:
            await asyncio.shield(self._forget(sessions.store))

    async def _forget(self, store: SessionStore) -> None:
        try:
            await store.delete(self.session.id)  # type: ignore[arg-type]
        except McpError as unreachable:  # the other processes refuse its messages once its record expires
            log.warning("the record of HTTP+SSE session %s stays in the shared store until it expires: %s",
                        self.session.id, unreachable.message)

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
             token: AccessToken | None, route: Route | None = None) -> Rejection | None:
        """Take a message POSTed for the session (None), or say why a request or response is refused."""
        session = self.session
        if kind == RESPONSE:
            problem = take_response(message, session)
            return None if problem is None else refusal(problem)
        if kind == NOTIFICATION:
            if message["method"] == "notifications/cancelled":
                session.cancel(cancelled_request(message))
            else:
                changed = self.endpoint.server.dispatcher.legacy.notified(session, message)
                assert changed is None  # the session records nothing in a shared store (its `store` is None)
            return None
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
        """Take a message another process relayed (`relay_event`); a request refused is answered on the stream."""
        kind, message, auth = event["kind"], event["post"], event["auth"]
        token = None if auth is None else AccessToken(auth["subject"], auth["client_id"], frozenset(auth["scopes"]),
                                                      auth["expires_at"], auth["claims"])
        peer = None if event["peer"] is None else tuple(event["peer"])
        refused = self.take(kind, message, event["headers"], peer, token)
        if refused is None:
            return
        if kind != REQUEST:  # a response nobody waits for: the process that took the POST cannot say so now
            log.debug("dropped a relayed %s for session %s: %s", kind, self.session.id, refused.error.message)
            return
        answer = asyncio.get_running_loop().create_task(self.send(encode_error(message["id"], refused.error)))
        self._answering.add(answer)
        answer.add_done_callback(self._answering.discard)


def relay_event(kind: str, message: dict[str, Any], headers: Mapping[str, str], peer: tuple[Any, ...] | None,
                token: AccessToken | None) -> dict[str, Any]:
    """What another process relays to the holder of a session's stream: the message and the facts of the
    request that brought it, as JSON (the verified token's fields, and no Authorization header)."""
    auth = None if token is None else {"subject": token.subject, "client_id": token.client_id,
                                       "scopes": sorted(token.scopes), "expires_at": token.expires_at,
                                       "claims": dict(token.claims)}
    return {"post": message, "kind": kind, "headers": {k: v for k, v in headers.items() if k != "authorization"},
            "peer": None if peer is None else list(peer), "auth": auth}


# -- a message ------------------------------------------------------------------


def _post(exchange: ExchangeShape) -> bool:
    """A message for a session: checked against the session held here, or (sharing sessions) its record."""
    sessions = exchange.endpoint.sessions
    session_id = sse_session_id(exchange._target)
    if isinstance(session_id, Rejection):
        return _refuse(exchange, session_id)
    if sessions.store is None:
        found = sse_session(session_id, sessions, exchange._principal)
        if isinstance(found, Rejection):
            return _refuse(exchange, found)
        return _take(exchange, session_id, cast(HeldSession, found.inbox))
    return exchange._sharing(sessions.store.load(session_id, sessions.idle_timeout),
                             lambda record: _take_shared(exchange, session_id, record))


def _take_shared(exchange: ExchangeShape, session_id: str, record: SessionRecord | None) -> bool:
    held_here = exchange.endpoint.sessions.follow(session_id, record)  # ended here if the record is gone
    if record is None or not record.sse or record.principal != exchange._principal:
        return _refuse(exchange, sse_session_gone())
    return _take(exchange, session_id, None if held_here is None else cast("HeldSession | None", held_here.inbox))


def _take(exchange: ExchangeShape, session_id: str, held: HeldSession | None) -> bool:
    """The message, taken by `held` (then 202), relayed to the process holding the stream (None: another
    process), or refused."""
    endpoint = exchange.endpoint
    inbound = read_message(exchange._body)
    exchange._body = bytearray()
    if isinstance(inbound, Malformed):
        return _refuse(exchange, refusal(inbound.error, inbound.request_id))
    kind, message = inbound
    route = None
    if kind == REQUEST:
        if endpoint.closing:
            return exchange._stopping(message["id"])
        route = endpoint.server.route(message)
        if exchange._token is not None and exchange._forbidden(route, message):
            return exchange._next_cycle()
    if held is None:
        relay = relay_event(kind, message, exchange._headers, exchange.peer, exchange._token)
        endpoint.sessions.store.relay(session_id, relay)  # type: ignore[union-attr]
        return exchange._accepted()
    refused = held.take(kind, message, exchange._headers, exchange.peer, exchange._token, route)
    if refused is not None:
        return _refuse(exchange, refused)
    return exchange._accepted()
