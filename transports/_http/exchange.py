"""One HTTP request's MCP handling, shared by the built-in h11 server and the ASGI adapter.

Theory of operation. An `Endpoint` holds what outlives a request: the
`Server`, the configuration and its `Policy`, the CORS origins, the `CallRunner`,
the legacy sessions and their resumable stream stores, and whether the endpoint is
closing. An `Exchange` is one request's life on a connection, fed the way a
sans-IO state machine is: `_on_head` with the request line and headers,
`_on_body` with each piece of body, then `_serve` once the body has ended.
It answers what needs no call (a probe, the metadata, a CORS preflight, a refusal)
at once, verifies the bearer token, and otherwise starts a `Call` with an `HttpWriter`
whose `Link` it is; every response head goes through `head`, which adds the CORS
headers the request's Origin gets. The exchange emits h11 event objects (a `Response`,
`Data`, `EndOfMessage`) through `send`; the h11 connection turns them into
bytes, the ASGI adapter into `http.response.*` messages. What differs
between the two is left to a few hooks: `send`, `close`, `_refuse_now`
(answer if still possible, then end the connection), `_next_cycle` (the
answer is complete: True when the connection may read the next request) and
`_read_on` (read on after an answer that came later). What must wait on I/O
before the request can go on (the token check, a shared session's record)
pauses the exchange (`_pause`): a task does the I/O, then the request is
served on from where it stopped. A request on the paths of the deprecated
HTTP+SSE transport goes to `legacysse.py` once its token is verified.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import weakref
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Awaitable, Callable, cast

import h11
import orjson

from mcpcore._runtime.call import Call
from mcpcore._runtime.session import Session, Sessions, SessionsFull, SessionStore, StoredEvent
from mcpcore._serving.server import Server
from mcpcore._wire.jsonrpc import (
    INVALID_REQUEST,
    LEGACY_VERSIONS,
    NOTIFICATION,
    REQUEST,
    RESPONSE,
    McpError,
    encode_error,
)
from mcpcore._wire.protocol import Route, http_status
from mcpcore.auth import AccessToken, Auth, AuthFailure, VerifierUnavailable
from mcpcore.routes import CustomRoute, HttpRequest

from .._calls import CallRunner, Malformed, cancelled_request, read_message
from . import legacysse
from .cors import MAX_AGE, Cors
from .resume import ResumableStream, StreamStore, kept_after, replay_kept
from .rules import (
    Policy,
    Rejection,
    check_body,
    check_head,
    check_mcp_headers,
    check_origin_and_host,
    check_route_head,
    check_sse_head,
    is_legacy,
    legacy_session,
    make_policy,
    sessionless_stream,
    unsupported_legacy_version,
)
from .writer import HttpWriter, Timer, response_head

log = logging.getLogger("mcpcore.transports.exchange")

_NONE_REPEATED: frozenset[str] = frozenset()


def _unavailable(error: McpError, request_id: Any) -> Rejection:
    """A refusal to retry shortly: every session place (or the principal's share) taken is 503,
    the shared state unreachable is the status of its error."""
    status = 503 if isinstance(error, SessionsFull) else http_status(error.code)
    return Rejection(status, error, request_id, (("retry-after", "1"),))


def _session_header(session: Session) -> list[tuple[bytes, bytes]]:
    return [(b"mcp-session-id", session.id.encode())]  # type: ignore[union-attr]


# Headers whose values clients repeat on every request (never a credential or a session id):
# their decoded form is kept, up to a bound, so a request pays a look-up instead of decoding.
_REPEATED_VALUES = frozenset({"host", "content-type", "accept", "content-length", "mcp-protocol-version", "mcp-method",
                              "mcp-name", "user-agent", "accept-encoding", "connection"})
_DECODED: dict[tuple[bytes, bytes], tuple[str, str, int]] = {}
_DECODED_MAX = 512  # entries; a full table starts again, so no client can fill it for good
_DECODED_LONGEST = 128  # bytes of a value kept: the repeated ones are short, and no entry is large


def _decode_header(name: bytes, value: bytes) -> tuple[str, str, int]:
    """A header as `header_map` keeps it: lower-case name, value, size in bytes."""
    decoded = (name.decode("ascii").lower(), value.decode("latin-1"), len(name) + len(value) + 4)
    if decoded[0] in _REPEATED_VALUES and len(value) <= _DECODED_LONGEST:
        if len(_DECODED) >= _DECODED_MAX:
            _DECODED.clear()
        _DECODED[name, value] = decoded
    return decoded


def header_map(raw: Any) -> tuple[dict[str, str], int, frozenset[str]]:
    """Request headers by lower-case name (repeats joined with ", "), their size in bytes,
    and the names that came more than once."""
    headers: dict[str, str] = {}
    repeated: set[str] = set()
    size = 0
    cached = _DECODED.get
    for name, value in raw:
        key, text, length = cached((name, value)) or _decode_header(name, value)
        size += length
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


VERDICT_SECONDS = 60.0  # how long a connection reuses a verified token without asking the verifier again
VERIFIER_UNAVAILABLE = AuthFailure(503, "", "The access token could not be verified now; retry shortly")
# `_reply`'s arguments when a custom route fails
_ROUTE_FAILED = (500, b'{"error":"the route failed; see the server log"}', (), False, b"application/json")
GET_ONLY = Fixed(405, b'{"status":"method not allowed"}', (("allow", "GET, HEAD"),))  # probes, metadata, metrics
# The resource metadata is public: any page may read it, with any header but a token (no credentials).
METADATA_PREFLIGHT = Fixed(204, b"", (("access-control-allow-origin", "*"), ("access-control-allow-methods", "GET, HEAD"),
                                      ("access-control-allow-headers", "*"), ("access-control-max-age", MAX_AGE)))


class Endpoint:
    """What outlives one request: the server, the limits, the call runner, the legacy sessions."""

    def __init__(self, server: Server, config: Any) -> None:
        self.server = server
        self.config = config  # an `HttpConfig`
        self.port: int = config.port
        self.cors = Cors(config.cors_origins) if config.cors_origins else None  # ValueError for a malformed origin
        self.policy: Policy = self.policy_for(config.host, self.port)
        self.runner = CallRunner(server, max_in_flight=config.max_in_flight, grace_period=config.grace_period)
        # A shared state may share no sessions; a stateless endpoint keeps none.
        shared = None if config.stateless else getattr(server.store, "sessions", None)
        self.sessions = Sessions(config.max_sessions, config.session_idle_timeout, time.monotonic, shared,
                                 config.max_sessions_per_principal)
        self.stores: weakref.WeakKeyDictionary[Session, StreamStore] = weakref.WeakKeyDictionary()
        # Shared sessions: event ids name this process, so two processes never mint the same one.
        self.stream_prefix = "" if shared is None else f"{secrets.token_hex(4)}-"
        auth = server.auth
        self.metadata = None if auth is None else orjson.dumps(auth.metadata())  # RFC 9728, served as is
        self.metadata_paths = () if auth is None else auth.metadata_paths
        self.closing = False
        self.sse_paths = legacysse.paths(config)  # the deprecated HTTP+SSE transport's, () when it is off
        taken = {config.path, config.health_path, config.ready_path, *self.metadata_paths, *self.sse_paths} & set(
            server.custom_routes)
        if taken:
            raise ValueError(f"custom route {sorted(taken)[0]!r} is a path the HTTP transport serves itself")

    def policy_for(self, host: str, port: int) -> Policy:
        c = self.config
        origins = c.allowed_origins if self.cors is None else c.allowed_origins + self.cors.origins  # one allow-list
        return make_policy(host, port, c.path, c.allowed_hosts, origins, c.max_body_bytes)

    @property
    def ready(self) -> bool:
        """Serving, with the lifespan entered, and not draining (the readiness probe's answer)."""
        return self.server.lifespan.entered and not self.closing

    def stream_store(self, session: Session) -> StreamStore:
        """The resumable streams of a 2025-11-25 session."""
        store = self.stores.get(session)
        if store is None:
            # The id, not the session: a store holding its session would never leave `stores` (weak keys).
            shared, session_id, ttl = self.sessions.store, session.id, session.ttl
            keep = None if shared is None else lambda event: shared.keep_event(session_id, event, ttl)  # type: ignore[arg-type]
            store = self.stores[session] = StreamStore(prefix=self.stream_prefix, shared=keep)
        return store

    def dropped(self) -> None:
        """A JSON-only answer left a notification out (`HttpConfig.json_response`)."""
        metrics = self.server.metrics
        if metrics is not None:
            metrics.notification_dropped()

    def gauges(self, connections: int) -> dict[str, tuple[str, float]]:
        """The live gauges `/metrics` shows beside the server's counters."""
        threads = self.server.threads
        return {
            "mcpcore_in_flight_calls": ("Calls running or waiting for a slot.", len(self.runner.calls)),
            "mcpcore_http_connections": ("Open HTTP connections.", connections),
            "mcpcore_sessions": ("Live 2025-era sessions.", len(self.sessions)),
            "mcpcore_subscriptions": ("Open subscriptions/listen streams.", len(self.server.subscriptions)),
            "mcpcore_worker_threads": ("Worker threads for sync functions.", threads.threads),
            "mcpcore_abandoned_threads": ("Worker threads still running a cancelled call.", threads.abandoned),
        }

    async def drain(self) -> None:
        """Stop taking calls, end the standalone streams, let in-flight calls finish (grace period)."""
        self.closing = True
        for session in self.sessions:
            session.changes.close()
        await self.runner.drain()
        self.sessions.end_all()


class Exchange:
    """One request at a time on one connection (see the module docstring for the hooks)."""

    def __init__(self, endpoint: Endpoint, peer: tuple[Any, ...] | None = None) -> None:
        self.endpoint = endpoint
        self.loop = asyncio.get_running_loop()
        self.peer = peer
        self.root_path = ""  # the prefix the endpoint is mounted under (ASGI's root_path), for URLs it names
        self.policy = endpoint.policy
        self.gone = False
        self.call: Call | None = None  # the request being served (held or running)
        self.writer: HttpWriter | None = None
        self.stream: asyncio.Task[None] | None = None  # a legacy session's GET stream, or a custom route running
        self.verifying: asyncio.Task[None] | None = None  # a pause (`_pause`): checking the token, reading a record
        self._synced = False  # the current request's shared session record was read
        self._opening: Session | None = None  # the session the current initialize may open
        self._method = ""
        self._target = ""
        self._custom: CustomRoute | None = None  # the custom route the current request is for
        self._sse = False  # the current request is for the HTTP+SSE transport (legacysse.py)
        self._headers: dict[str, str] = {}
        self._repeated = _NONE_REPEATED
        self._body = bytearray()  # one buffer: a body in tiny chunks must not cost an object per chunk
        self._body_size = 0  # every byte, kept or dropped
        self._body_chunks = 0
        self._refusal: Rejection | None = None  # answer once the refused request's body is read
        self._fixed: Fixed | None = None  # a probe's or the metadata's answer, sent once its request has ended
        self._token: AccessToken | None = None  # the current request's verified token
        self._verdict: tuple[str, AccessToken, float] | None = None  # (header, token, when): the last verified
        self._cors: list[tuple[bytes, bytes]] | None = None  # what every answer to this request adds (CORS on)

    # -- the hooks ----------------------------------------------------------

    def send(self, *events: Any) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _refuse_now(self, rejection: Rejection) -> None:
        raise NotImplementedError

    def _next_cycle(self) -> bool:
        raise NotImplementedError

    def _read_on(self) -> None:
        raise NotImplementedError

    # -- the writer's `Link` ------------------------------------------------

    def head(self, status: int, headers: list[tuple[bytes, bytes]], last: bool = False, built: bool = True) -> h11.Response:
        """Every response head the endpoint sends: with the CORS headers when CORS is on, and
        `Connection: close` when it is the connection's last (`built`: see `response_head`)."""
        if self._cors is not None:
            headers = headers + self._cors
        return response_head(status, headers, last or self.endpoint.closing, built)

    def whole(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.send(self.head(status, headers), h11.Data(data=body), h11.EndOfMessage())

    def time(self) -> float:
        return self.loop.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return self.loop.call_later(delay, callback)

    @property
    def serving(self) -> bool:
        """A call, a standalone stream or a token check has this connection (no next request is read meanwhile)."""
        return self.call is not None or self.stream is not None or self.verifying is not None

    def _lost(self) -> None:
        """The peer is gone: cancel whatever it asked for."""
        self.gone = True
        if self.writer is not None:
            self.writer.abort()
        if self.call is not None and (self.call.session is None or cast(Session, self.call.session).one_request):
            self.call.cancel()  # in a kept legacy session only notifications/cancelled cancels
        if self.stream is not None:
            self.stream.cancel()
        if self.verifying is not None:
            self.verifying.cancel()

    # -- reading --------------------------------------------------------------

    def _on_head(self, method: str, target: str, raw_headers: Any) -> bool:
        """A request line and headers arrived. False when it was refused at once (do not read its body)."""
        self._method, self._target, self._token, self._synced = method, target, None, False
        self._headers, head_size, self._repeated = header_map(raw_headers)
        self._body, self._body_size, self._body_chunks, self._refusal = bytearray(), 0, 0, None
        path = target.split("?", 1)[0]
        cors, endpoint = self.endpoint.cors, self.endpoint
        served = path == endpoint.config.path or path in endpoint.sse_paths  # the MCP endpoint's paths
        self._cors = cors.answer_headers(self._headers.get("origin")) if cors is not None and served else None
        limit = self.endpoint.config.max_header_bytes
        if head_size + len(target) > limit:
            self._refuse_now(Rejection(431, McpError(INVALID_REQUEST, f"Bad request: headers exceed the limit of {limit} bytes")))
            return False
        self._fixed = self._fixed_answer(method, path)
        if self._fixed is not None:
            return True
        self._custom = route = self._custom_route(path)
        self._sse = path in self.endpoint.sse_paths
        if route is not None:
            refusal = check_route_head(self.policy, method, route, self._headers)
        elif method == "OPTIONS" and cors is not None and self._cors is not None:
            refusal = self._preflight(cors)
        elif self._sse:
            refusal = check_sse_head(self.policy, method, path == self.endpoint.config.sse_path, self._headers)
        else:
            refusal = legacysse.switched_off(self.endpoint.config, path) or check_head(self.policy, method, target, self._headers)
        if refusal is not None and (refusal.status == 413 or self._expects_continue):
            self._refuse_now(refusal)  # do not read a body we refuse
            return False
        self._refusal = refusal  # if any: read (and drop) the body, then answer and keep the connection
        return True

    def _preflight(self, cors: Cors) -> Rejection | None:
        """A CORS preflight: Origin and Host checked, then answered (204) before any token is asked for."""
        refusal = check_origin_and_host(self.policy, self._headers)
        if refusal is not None:
            return refusal
        answer = cors.preflight(self._headers)
        if isinstance(answer, Rejection):
            return answer
        self._fixed = Fixed(204, b"", answer)
        return None

    @property
    def _expects_continue(self) -> bool:
        return self._headers.get("expect", "").lower() == "100-continue"

    def _on_body(self, data: bytes) -> bool:
        """A piece of the body arrived. False when the request was refused (read no more)."""
        config = self.endpoint.config
        self._body_chunks += 1
        self._body_size += len(data)
        if self._body_size > config.max_body_bytes:
            limit = config.max_body_bytes
            self._refuse_now(Rejection(413, McpError(INVALID_REQUEST, f"Body exceeds the limit of {limit} bytes")))
            return False
        if self._body_chunks > config.max_body_chunks:  # each chunk costs parsing time: bound their number
            why = f"Body arrives in more than {config.max_body_chunks} chunks; send larger chunks"
            self._refuse_now(Rejection(400, McpError(INVALID_REQUEST, why)))
            return False
        if self._refusal is None and self._fixed is None:
            self._body += data
        return True

    def _fixed_answer(self, method: str, path: str) -> Fixed | None:
        """The answer to a liveness or readiness probe or a resource metadata request (or its CORS preflight); None for
        other paths. No Host, Origin or MCP rule applies: a load balancer probes by address,
        a browser-based client fetches the public metadata cross-origin, and neither reveals a thing."""
        config, endpoint = self.endpoint.config, self.endpoint
        if path == config.path:
            return None
        metadata = endpoint.metadata is not None and path in endpoint.metadata_paths
        if not (metadata or path in (config.health_path, config.ready_path)):
            return None
        if method not in ("GET", "HEAD"):
            return METADATA_PREFLIGHT if metadata and method == "OPTIONS" else GET_ONLY
        if metadata:
            return Fixed(200, endpoint.metadata, (("access-control-allow-origin", "*"),))  # type: ignore[arg-type]
        if path == config.ready_path and not endpoint.ready:
            return Fixed(503, b'{"status":"draining"}')
        return Fixed(200, b'{"status":"ok"}')

    def _custom_route(self, path: str) -> CustomRoute | None:
        routes = self.endpoint.server.custom_routes
        if not routes:
            return None
        return None if path == self.endpoint.config.path else routes.get(path)

    def _serve(self) -> bool:
        """A whole request arrived: answer it now or start its call. True to keep reading."""
        if self._fixed is not None:
            fixed = self._fixed
            self._reply(fixed.status, fixed.body, fixed.headers, content_type=fixed.content_type)
            return self._next_cycle()
        if self._refusal is not None:
            self._answer(self._refusal)
            return self._next_cycle()
        auth, custom = self.endpoint.server.auth, self._custom
        if auth is not None and self._token is None and not (custom is not None and custom.public):
            self._token = self._remembered(self._headers.get("authorization"))
            if self._token is None:
                self._verify(auth)  # then back here
                return False
        if custom is not None:
            return self._serve_route(custom)
        if self._sse:
            return legacysse.serve(self)
        if self._method != "POST":
            return self._session_request(self._method)
        session_id = self._headers.get("mcp-session-id")
        if session_id and self.endpoint.sessions.store is not None and not self._synced:
            inbound = read_message(self._body)  # shared: a legacy message or response reads its record first
            if not isinstance(inbound, Malformed) and (inbound.kind == RESPONSE or is_legacy(inbound.message, self._headers)):
                return self._sync(session_id, self._serve, inbound.message["id"] if inbound.kind == REQUEST else None)
        session = self.endpoint.sessions.get(session_id) if session_id else None
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
        if self.endpoint.closing:
            return self._stopping(message["id"])
        route = self.endpoint.server.route(message)
        mismatch = check_mcp_headers(self._headers, message, route, self._repeated)
        if mismatch is not None:
            self._answer(mismatch)
            return self._next_cycle()
        if self._token is not None and self._forbidden(route, message):
            return self._next_cycle()
        if route.long_lived and self.endpoint.config.json_response:
            why = f"{route.method} is answered with an SSE stream, and this server answers JSON only (--json-response)"
            self._answer(Rejection(400, McpError(INVALID_REQUEST, why), message["id"]))
            return self._next_cycle()
        self._start(self._call(message, route), self._writer())
        return False

    def _writer(self, head_headers: Callable[[], list[tuple[bytes, bytes]]] | None = None) -> HttpWriter:
        """The writer of a call's answer: JSON only when so configured (its notifications dropped and counted)."""
        endpoint = self.endpoint
        return HttpWriter(self, endpoint.config.sse_keepalive, head_headers,
                          endpoint.dropped if endpoint.config.json_response else None)

    def _serve_route(self, route: CustomRoute) -> bool:
        """Run a custom route's function in a task (a sync one on the worker pool), then answer."""
        path, _, query = self._target.partition("?")
        request = HttpRequest(self._method, path, query, MappingProxyType(self._headers), bytes(self._body), self.peer,
                              self._token)
        self._body = bytearray()
        threads = self.endpoint.server.threads

        async def serve() -> None:
            try:
                value = await route.fn(request) if route.is_async else await threads.run(route.fn, request)
                response = route.answer(value)
                body, content_type = response.encoded()
                answer = (response.status, body, tuple(response.headers.items()), False, content_type.encode())
            except Exception:
                log.exception("the custom route %s failed", route.path)
                answer = _ROUTE_FAILED
            finally:
                self.stream = None
            if self.gone:
                return
            try:
                self._reply(*answer)
            except (h11.LocalProtocolError, ValueError, TypeError):  # a header h11 refuses: nothing was sent
                log.exception("the custom route %s answered what HTTP cannot carry", route.path)
                try:
                    self._reply(*_ROUTE_FAILED)
                except h11.LocalProtocolError:  # the connection's state machine is past answering
                    self.close()
                    return
            if self._next_cycle():
                self._read_on()

        self.stream = self.loop.create_task(serve())
        return False

    @property
    def _principal(self) -> str | None:
        return None if self._token is None else self._token.subject

    def _call(self, message: dict[str, Any], route: Route, session: Session | None = None) -> Call:
        token = self._token
        subject = None if token is None else token.subject
        return Call(message, route, MappingProxyType(self._headers), self.peer, subject, token, session=session)

    # -- authorization ----------------------------------------------------

    def _remembered(self, authorization: str | None) -> AccessToken | None:
        """The token this connection's previous request verified, when this one sends the same header
        (a keep-alive client pays the signature check once), while it is unexpired and for a minute at most."""
        verdict = self._verdict
        if verdict is None or authorization is None or verdict[0] != authorization:
            return None
        token, verified_at = verdict[1], verdict[2]
        if self.loop.time() - verified_at > VERDICT_SECONDS or (
                token.expires_at is not None and token.expires_at <= time.time()):
            self._verdict = None
            return None
        return token

    def _pause(self, work: Awaitable[Any], then: Callable[[Any], bool]) -> bool:
        """Wait for `work` in a task (nothing more is read meanwhile), then go on with `then(its result)`,
        which answers True to read the next request."""

        async def wait() -> None:
            try:
                result = await work
            finally:
                self.verifying = None
            if not self.gone and then(result):
                self._read_on()

        self.verifying = self.loop.create_task(wait())
        return False

    def _verify(self, auth: Auth) -> None:
        """Check the request's bearer token in a task (a verifier may do I/O), then go on with the request."""

        async def verify() -> AccessToken | AuthFailure:
            try:
                return await auth.authenticate(self._headers.get("authorization"))
            except VerifierUnavailable as why:  # its key server is down, say: not the client's fault
                log.debug("the token verifier cannot decide now: %s", why)
                return VERIFIER_UNAVAILABLE
            except Exception:  # a verifier's defect, not the client's fault either
                log.exception("the token verifier failed")
                return VERIFIER_UNAVAILABLE

        def verified(verdict: AccessToken | AuthFailure) -> bool:
            if isinstance(verdict, AuthFailure):
                self._refuse_token(verdict)
                return self._next_cycle()
            self._token = verdict
            self._verdict = (self._headers.get("authorization") or "", verdict, self.loop.time())
            return self._serve()

        self._pause(verify(), verified)

    def _refuse_token(self, failure: AuthFailure, request_id: Any = None) -> None:
        headers = (("www-authenticate", failure.challenge),) if failure.challenge else (("retry-after", "1"),)
        self._answer(Rejection(failure.status, McpError(INVALID_REQUEST, failure.message), request_id, headers))

    def _forbidden(self, route: Route, message: dict[str, Any]) -> bool:
        """Answer 403 when the token lacks a scope the request's tool, prompt or resource requires."""
        server = self.endpoint.server
        if server.auth is None or self._token is None:  # a token means auth is set
            return False
        needed = server.dispatcher.required_scopes(route, message)
        failure = server.auth.check_scopes(self._token, needed) if needed else None
        if failure is None:
            return False
        self._refuse_token(failure, message["id"])
        return True

    def _start(self, call: Call, writer: HttpWriter) -> None:
        self.call, self.writer = call, writer
        self.endpoint.runner.submit(call, writer, self._finished)

    def _accepted(self) -> bool:
        """202: a notification, or a response, taken."""
        self.send(self.head(202, [(b"content-length", b"0")]), h11.EndOfMessage())
        return self._next_cycle()

    def _stopping(self, request_id: Any) -> bool:
        stopping = Rejection(503, McpError(INVALID_REQUEST, "The server is shutting down; retry elsewhere"), request_id)
        self._answer(stopping, close=True)
        self.close()
        return False

    # -- the legacy (2025-era) wire ---------------------------------------

    def _legacy(self, kind: str, message: dict[str, Any]) -> bool:
        """A legacy POST: `initialize` opens a session, anything else needs a live one."""
        if self.endpoint.config.stateless:
            return self._stateless(kind, message)
        sessions = self.endpoint.sessions
        opening = kind == REQUEST and message["method"] == "initialize" and "mcp-session-id" not in self._headers
        if opening:
            if self.endpoint.closing:
                return self._stopping(message["id"])
            try:
                sessions.reserve(self._principal)
            except SessionsFull as full:
                self._answer(_unavailable(full, message["id"]))
                return self._next_cycle()
            session = sessions.new(self._principal)
            claim = sessions.claim(session)
            if claim is not None:  # shared: the principal's share is counted in the store first
                return self._sharing(claim, lambda _: self._open(session, message), message["id"])
            return self._open(session, message)
        found = legacy_session(self._headers, sessions, message.get("id"), self._principal)
        if isinstance(found, Rejection):
            self._answer(found)
            return self._next_cycle()
        return self._in_session(found, kind, message)

    def _stateless(self, kind: str, message: dict[str, Any]) -> bool:
        """A legacy POST on a stateless endpoint: served in a session of its own that ends with it
        (`initialize` mints no id; any other request is taken as initialized, at its
        `MCP-Protocol-Version`, or 2025-03-26 without one, as the 2025-06-18 revision says)."""
        if kind == NOTIFICATION:
            return self._accepted()  # nothing to record, and no call here to cancel
        if message["method"] == "initialize":
            version = None
        else:
            version = self._headers.get("mcp-protocol-version", "2025-03-26")
            if version not in LEGACY_VERSIONS:
                self._answer(unsupported_legacy_version(version, message["id"]))
                return self._next_cycle()
        return self._in_session(Session.for_one_request(self._principal, version), kind, message)

    def _open(self, session: Session, message: dict[str, Any]) -> bool:
        """Run the `initialize` that may open `session` (in the place reserved for it)."""
        if self.endpoint.closing:  # began to close while the place was counted: give it back
            self._give_back(session, lambda: None)
            return self._stopping(message["id"])
        self._opening = session
        return self._in_session(session, REQUEST, message)

    def _in_session(self, session: Session, kind: str, message: dict[str, Any]) -> bool:
        """A legacy message of `session` (or of the one its initialize opens)."""
        if kind == NOTIFICATION:
            recording = self._legacy_notification(session, message)
            if recording is not None:  # a shared session's change, recorded before the 202
                return self._sharing(recording, lambda _: self._accepted())
            return self._accepted()
        if self.endpoint.closing:
            return self._stopping(message["id"])
        if message["id"] in session.calls:
            error = McpError(INVALID_REQUEST, f"Request id {message['id']!r} is already in flight in this session")
            self._answer(Rejection(400, error, message["id"]))
            return self._next_cycle()
        route = self.endpoint.server.route(message)
        if self._token is not None and self._forbidden(route, message):
            return self._next_cycle()
        call = self._call(message, route, session)
        session.calls[message["id"]] = call
        sink = self._writer(self._session_headers)
        streams = not self.endpoint.config.json_response
        if not streams and session.cannot_ask is None:  # set here, where any process's copy of the session is served
            session.cannot_ask = "needs an SSE stream, and this server answers JSON only (--json-response)"
        if streams and session.version == "2025-11-25" and not session.one_request:  # resumable: SSE with event ids (resume.py)
            self.call, self.writer = call, sink
            stream = self.endpoint.stream_store(session).open(sink, self.close)
            self.endpoint.runner.submit(call, stream, lambda call: self._finished(call, stream))
        else:
            self._start(call, sink)
        return False

    def _legacy_notification(self, session: Session, message: dict[str, Any]) -> Awaitable[None] | None:
        if message["method"] == "notifications/cancelled":
            session.cancel(cancelled_request(message))
            return None
        return self.endpoint.server.dispatcher.legacy.notified(session, message)

    def _sync(self, session_id: str, then: Callable[[], bool], request_id: Any = None) -> bool:
        """Read the shared record of the session named (a pause), bring the copy held here in line
        with it (adopting one from another process), then serve the request on."""
        sessions = self.endpoint.sessions

        async def read() -> None:
            record = await sessions.store.load(session_id, sessions.idle_timeout)  # type: ignore[union-attr]
            if sessions.follow(session_id, record) is None and record is not None and not record.sse:
                sessions.adopt(self.endpoint.server.dispatcher.legacy.mirror(record, sessions))

        def read_on(_: None) -> bool:
            self._synced = True
            return then()

        return self._sharing(read(), read_on, request_id)

    def _sharing(self, work: Awaitable[Any], then: Callable[[Any], bool], request_id: Any = None) -> bool:
        """Pause for the shared state; when it is unreachable, answer its error (-32603 naming Redis)."""

        async def attempt() -> Any:
            try:
                return await work
            except McpError as unreachable:
                return unreachable

        def go_on(result: Any) -> bool:
            if isinstance(result, McpError):
                self._answer(_unavailable(result, request_id))
                return self._next_cycle()
            return then(result)

        return self._pause(attempt(), go_on)

    def _session_headers(self) -> list[tuple[bytes, bytes]]:
        """`Mcp-Session-Id` on a legacy response; an initialize that negotiated registers its session here,
        before the client can learn the id."""
        session = cast("Session | None", self.call.session if self.call is not None else None)  # what _legacy gave it
        if session is None or session.id is None:
            return []
        if self._opening is session:
            if not session.negotiated:
                return []  # a failed initialize mints nothing
            self.endpoint.sessions.add(session)
            self._opening = None
        return _session_header(session)

    def _session_request(self, method: str) -> bool:
        """GET opens a session's standalone stream; DELETE ends the session."""
        config = self.endpoint.config
        if config.stateless or (method == "GET" and config.json_response):
            why = (f"{method} serves 2025-era sessions, and this server runs stateless (it keeps none): POST each request"
                   if config.stateless else "GET opens an SSE stream, and this server answers JSON only (--json-response)")
            allowed = "POST" if config.stateless else "POST, DELETE"
            self._answer(Rejection(405, McpError(INVALID_REQUEST, why), None, (("allow", allowed),)))
            return self._next_cycle()
        sessions = self.endpoint.sessions
        session_id = self._headers.get("mcp-session-id")
        if session_id and sessions.store is not None and not self._synced:
            return self._sync(session_id, lambda: self._session_request(method))
        found = legacy_session(self._headers, sessions, principal=self._principal)
        if isinstance(found, Rejection):
            if method == "GET" and session_id is None and self._headers.get("mcp-protocol-version") is None:
                found = sessionless_stream(config.path, config.sse_path if self.endpoint.sse_paths else None)
            self._answer(found)
            return self._next_cycle()
        if method == "DELETE":
            if sessions.store is not None:  # ended in every process first
                return self._sharing(sessions.store.delete(found.id), lambda _: self._deleted(found))  # type: ignore[arg-type]
            return self._deleted(found)
        last_event = self._headers.get("last-event-id")
        if last_event is not None:
            return self._resume(found, last_event)
        if found.streaming:
            self._answer(Rejection(409, McpError(INVALID_REQUEST, "This session's GET stream is already open")))
            return self._next_cycle()
        if self.endpoint.closing:
            return self._stopping(None)
        found.streaming = True
        lifetime = None if self._token is None else self._token.lifetime()

        async def forward(writer: HttpWriter) -> None:  # list changes and resource updates, while the token lasts
            await writer.open()
            await found.forward(writer.notify, lifetime)
            await writer.finish()

        def closed(_: HttpWriter) -> None:
            found.streaming = False

        return self._open_stream(found, forward, closed)

    def _deleted(self, session: Session) -> bool:
        self.endpoint.sessions.end(session)
        self.endpoint.stores.pop(session, None)
        self.send(self.head(200, [(b"content-length", b"0")]), h11.EndOfMessage())
        return self._next_cycle()

    def _resume(self, session: Session, last_event: str) -> bool:
        """GET with Last-Event-ID: the rest of a stream, after that event."""
        store = self.endpoint.stores.get(session)
        stream = store.find(last_event) if store is not None else None
        if stream is None:
            shared = self.endpoint.sessions.store
            if shared is None:
                return self._unresumable(last_event)
            # Served elsewhere (or here, and no longer in memory): from the events the shared store kept.
            return self._sharing(shared.kept_events(session.id),  # type: ignore[arg-type]
                                 lambda kept: self._resume_kept(shared, session, last_event, *kept))

        def let_go(writer: HttpWriter) -> None:
            if stream.sink is writer:
                stream.sink = None

        return self._open_stream(session, lambda writer: stream.resume(last_event, writer), let_go)

    def _resume_kept(self, shared: SessionStore, session: Session, last_event: str, kept: list[StoredEvent],
                     cursor: str) -> bool:
        backlog = kept_after(kept, last_event)
        if backlog is None:
            return self._unresumable(last_event)
        return self._open_stream(session, lambda writer: replay_kept(shared, session, last_event, backlog, cursor, writer),
                                 lambda writer: None)

    def _unresumable(self, last_event: str) -> bool:
        why = f"Cannot resume after event {last_event!r}: it is unknown to this session or no longer stored"
        self._answer(Rejection(404, McpError(INVALID_REQUEST, why)))
        return self._next_cycle()

    def _open_stream(
        self, session: Session, body: Callable[[HttpWriter], Awaitable[None]], ended: Callable[[HttpWriter], None]
    ) -> bool:
        """Serve a GET stream of `session` in a task: `body` writes it, `ended` cleans up after it
        (the session or the peer ended it); then the connection reads on, or closes."""
        writer = HttpWriter(self, self.endpoint.config.sse_keepalive, lambda: _session_header(session))
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

    def _finished(self, call: Call, stream: ResumableStream | None = None) -> None:
        """The call ended: read the next request, or close if its response is incomplete."""
        if stream is not None:  # answered or not, its stream is over
            stream.end()
        writer = self.writer
        self.call = self.writer = None
        if call.session is not None:
            session = cast(Session, call.session)
            session.calls.pop(call.message["id"], None)
            if session.one_request:
                session.close()  # an initialize attached it to the server's changes
        opening, self._opening = self._opening, None
        if opening is not None:  # an initialize whose session was not registered: it failed, or its client left
            self._give_back(opening, lambda: self._after(writer))
        else:
            self._after(writer)

    def _give_back(self, session: Session, then: Callable[[], None]) -> None:
        """Give back what the session of an initialize took (`Sessions.abandon`), then go on; a shared
        one is forgotten in the store first (even if the client leaves meanwhile)."""
        forgetting = self.endpoint.sessions.abandon(session)
        if forgetting is None:
            then()
            return

        def after(_: None) -> bool:
            then()
            return False

        self._pause(asyncio.shield(forgetting), after)

    def _after(self, writer: HttpWriter | None) -> None:
        if writer is None or not writer.responded or self.gone:
            if writer is not None:
                writer.abort()
            self.close()
        elif self._next_cycle():
            self._read_on()

    # -- answers the transport makes itself ----------------------------------

    def _answer(self, rejection: Rejection, close: bool = False) -> None:
        metrics = self.endpoint.server.metrics
        if metrics is not None:
            metrics.rejected(rejection.status)
        self._reply(rejection.status, encode_error(rejection.request_id, rejection.error), rejection.headers, close)

    def _reply(
        self, status: int, body: bytes, extra: tuple[tuple[str, str], ...] = (), close: bool = False,
        content_type: bytes = b"application/json",
    ) -> None:
        """An answer the transport makes itself (a refusal, a probe, the metadata, the metrics, a preflight's 204)."""
        headers = [] if status == 204 else [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
        headers += [(name.encode(), value.encode()) for name, value in extra]
        events: list[Any] = [self.head(status, headers, close, built=False)]
        if self._method != "HEAD" and body:  # a reply to HEAD has no body
            events.append(h11.Data(data=body))
        self.send(*events, h11.EndOfMessage())

