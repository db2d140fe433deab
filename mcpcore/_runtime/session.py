"""Legacy (2025-era) sessions: what `initialize` negotiated, and the way back to the client.

A `Session` is made by a transport for a client that opens with `initialize`
(over stdio, one for the process; over HTTP, one per `Mcp-Session-Id`). It
holds the negotiated version, the client's info and capabilities, the log
level set by `logging/setLevel`, and the resource URIs it subscribed to (a bus
`Subscriber`, so list changes and resource updates reach it like any
subscription). Server-to-client requests (`elicitation/create`,
`sampling/createMessage`, `roots/list`) go out through the writer of the call
that asks, and the client's responses come back through `deliver`.
A session also holds its client's state (`client_place`, read by `ctx.client_state`): in memory, dropped
when it closes, or for a shared session beside its record in the store, ended and expired with it.
`Sessions` is the HTTP transport's bounded registry with idle expiry: a place per
session, and for an authenticated principal a share of the places
(`max_sessions_per_principal`), taken by `reserve` and given back on every path
that ends a session (`end`), or that ends an `initialize` without one (`abandon`:
it failed, or its client left before the answer).

When several processes share sessions (`SessionStore`, `redisstate.py`), the
store's `SessionRecord` is the truth and each process's `Sessions` holds
copies: opened there, or adopted when a request for the session arrived.
A shared session records each change (`Session.change`) before the client
hears it took effect, and a client's response or cancellation for a call
running in another process is relayed there (the request ids of
server-to-client requests name the process that asked). An HTTP+SSE session
(the deprecated 2024-11-05 transport) is served only by the process holding
its stream, whose copy is the whole truth (it records no change): its record
only says that it lives, whose it is, and that it is one (`sse`), and the
other processes relay each message POSTed for it there, whole (`Session.inbox`).
"""

from __future__ import annotations

import itertools
import logging
import secrets
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterator, Protocol

import anyio
import orjson

from .._wire.jsonrpc import INVALID_REQUEST, McpError, encode_notification, is_request_id
from .call import Call, Writer
from .clientstate import Bucket, Place
from .defaults import HTTP_SESSION_SHARE
from .subscriptions import METHODS, PROMPTS, RESOURCES, TOOLS, Bus, Filter, Subscriber, deadline

log = logging.getLogger("mcpcore.session")

_CLIENT_REQUEST_IDS = itertools.count(1)
# Server-to-client request ids name this process: a response posted to another one is relayed here.
_ASKED_HERE = f"mcpcore-{secrets.token_hex(4)}-"

# An event of a resumable stream: its id, the message (empty for a priming event), whether it is the response.
StoredEvent = tuple[str, bytes, bool]

# What a stateless server's calls log at (the 2025 revisions let a server choose while no level is set).
ONE_REQUEST_LOG_LEVEL = "info"

# A change to a session's record: {"initialized": True}, {"level": name}, {"subscribe": uri} or {"unsubscribe": uri}.
SessionChange = dict[str, Any]


@dataclass(frozen=True)
class SessionRecord:
    """What processes sharing sessions keep of one: enough for any of them to serve it."""

    id: str
    principal: str | None
    version: str  # "" for an HTTP+SSE session (its record holds none of what initialize negotiates)
    client_info: dict[str, Any]
    capabilities: dict[str, Any]
    initialized: bool = False
    log_level: str | None = None
    uris: frozenset[str] = frozenset()
    revision: int = 0  # counts its changes: a copy never goes back to an older state
    sse: bool = False  # an HTTP+SSE session: only the process holding its stream serves it


class SessionStore(Protocol):
    """2025-era session records shared by several processes (`SharedState.sessions`; `redisstate.py`).

    Without one (one process), a `Sessions` registry is the whole truth and nothing
    waits on a store; with one, every request of a session reads its record first."""

    async def save(self, record: SessionRecord, ttl: float) -> None:
        """Store a new session's record, to expire after `ttl` seconds without use."""

    async def load(self, session_id: str, ttl: float) -> SessionRecord | None:
        """The record, its idle clock restarted; None once the session ended or expired."""

    async def claim(self, session_id: str, principal: str, share: int, ttl: float) -> None:
        """Count a session `principal` is opening among its sessions in every process (`SessionsFull`
        when it holds `share` already); the count forgets a session once its record is gone."""

    async def change(self, session_id: str, change: SessionChange, ttl: float) -> int:
        """Change the record, and tell the processes holding a copy (`Sessions.heard`); its new revision."""

    async def delete(self, session_id: str) -> None:
        """End the session in every process (its client state with it)."""

    def client_place(self, session_id: str, ttl: float) -> Place:
        """Where the session's client state lives: ended with it, expiring after `ttl` idle seconds as it does."""

    def relay(self, session_id: str, event: dict[str, Any]) -> None:
        """Pass `{"answer": response}`, `{"cancel": request_id}` or `{"post": message, ...}` (for an HTTP+SSE
        session) to the other processes (bounded, in order)."""

    def attach(self, sessions: Sessions) -> None:
        """Tell `sessions` what other processes do to the sessions it holds, as long as it lives."""

    async def keep_event(self, session_id: str, event: StoredEvent, ttl: float) -> None:
        """Keep an event of a session's resumable stream for any process to replay (the oldest leave past a bound)."""

    async def kept_events(self, session_id: str) -> tuple[list[StoredEvent], str]:
        """The session's kept events, oldest first, and the cursor after the newest."""

    async def next_events(self, session_id: str, cursor: str) -> tuple[list[StoredEvent], str]:
        """The events kept after `cursor` (waiting a second at most for one), and the cursor after them."""


class Inbox(Protocol):
    """Where the messages of an HTTP+SSE session are taken: on the process holding its stream."""

    def relayed(self, event: dict[str, Any]) -> None:
        """Take a message another process relayed (`Sessions.heard`)."""


class SessionsFull(McpError):
    """Every session place, or the principal's share of them, is taken: HTTP 503 with Retry-After."""

    def __init__(self, message: str) -> None:
        super().__init__(INVALID_REQUEST, message)


def share_taken(share: int) -> SessionsFull:
    return SessionsFull(f"Too many open sessions for this principal (max_sessions_per_principal {share}); "
                        "end one with DELETE or retry later")


class _Pending:
    """One server-to-client request waiting for the client's response."""

    __slots__ = ("done", "response")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.response: dict[str, Any] | None = None


class Session:
    """One legacy client: negotiated at `initialize`, served until it ends."""

    def __init__(
        self, session_id: str | None = None, principal: str | None = None,
        outbox: Callable[[bytes], Awaitable[None]] | None = None, store: SessionStore | None = None,
        ttl: float = 0.0,
    ) -> None:
        self.id = session_id
        self.principal = principal
        self.store = store  # shared with other processes: its record lives there, expiring after `ttl` idle seconds
        self.ttl = ttl
        # Where the session's own messages go (a cancelled call's writer sends nothing more);
        # None: the asking call's writer.
        self.outbox = outbox
        self.inbox: Inbox | None = None  # an HTTP+SSE session's (the deprecated 2024-11-05 transport)
        self.version: str | None = None  # set by a successful initialize
        self.client_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.initialized = False  # notifications/initialized arrived
        self.log_level: str | None = None
        self.closed = False
        self.streaming = False  # its standalone stream (HTTP GET) is open
        self.calls: dict[Any, Call] = {}  # its requests in flight, by id (for notifications/cancelled)
        self._uris: set[str] = set()  # the resources it follows (its subscriber's filter holds this set)
        self._following = 0  # subscribes being recorded in the shared store: counted against the bound meanwhile
        self.changes = Subscriber(Filter(frozenset(), self._uris))  # list changes and subscribed URIs
        self.revision = 0  # of the shared record this copy reflects
        self._pending: dict[str, _Pending] = {}
        self._bus: Bus | None = None
        self.last_seen = 0.0
        self.one_request = False  # a stateless server's stand-in, for one HTTP POST (`for_one_request`)
        self.cannot_ask: str | None = None  # why server-to-client requests cannot reach its client, if they cannot
        self._client_place: Place | None = None  # its client state (`ctx.client_state`), made on first use

    @classmethod
    def for_one_request(cls, principal: str | None, version: str | None) -> Session:
        """A stateless server's stand-in for a session, living for one POST: negotiated by the `initialize`
        it carries, or taken as negotiated at `version` and initialized. Nothing reaches it after its
        answer, so it follows nothing and asks the client nothing (the answer could reach another process);
        no `logging/setLevel` can last, so its calls log at `ONE_REQUEST_LOG_LEVEL` and above."""
        session = cls(principal=principal)
        session.one_request = True
        session.log_level = ONE_REQUEST_LOG_LEVEL
        session.cannot_ask = "needs a session: this server runs stateless, and the client's answer could reach another process"
        if version is not None:
            session.version, session.initialized = version, True
        return session

    def client_place(self) -> Place:
        """Its client state: in this process's memory, or (shared) beside its record in the store."""
        if self._client_place is None:
            self._client_place = Bucket() if self.store is None else self.store.client_place(self.id, self.ttl)  # type: ignore[arg-type]
        return self._client_place

    @property
    def negotiated(self) -> bool:
        return self.version is not None

    def open(self, version: str, params: dict[str, Any], offered: dict[str, bool], bus: Bus) -> None:
        """Record what `initialize` negotiated; changes of what is offered follow from now on."""
        self.version = version
        info, capabilities = params.get("clientInfo"), params.get("capabilities")
        self.client_info = info if isinstance(info, dict) else {}
        self.capabilities = capabilities if isinstance(capabilities, dict) else {}
        kinds = frozenset(kind for kind in (TOOLS, PROMPTS, RESOURCES) if offered.get(kind))
        self.changes.filter = Filter(kinds, self._uris)
        self._bus = bus
        bus.attach(self.changes)

    def subscribe(self, uri: str, follow: bool) -> None:
        """Follow (or stop following) `notifications/resources/updated` for `uri`."""
        if follow:
            self._uris.add(uri)
        else:
            self._uris.discard(uri)

    def follows(self, uri: str) -> bool:
        return uri in self._uris

    @property
    def followed(self) -> int:
        """How many resource URIs it follows, or is about to (subscribes still being recorded)."""
        return len(self._uris) + self._following

    # -- the shared record ----------------------------------------------------

    def change(self, change: SessionChange) -> Awaitable[None] | None:
        """Make a change; for a shared session, the awaitable that records it first (None: done)."""
        if self.store is None:
            self.apply(change)
            return None
        return self._record_change(change)

    async def _record_change(self, change: SessionChange) -> None:
        following = int("subscribe" in change)  # counted from the check to the change: concurrent ones see it
        self._following += following
        try:
            revision = await self.store.change(self.id, change, self.ttl)  # type: ignore[union-attr, arg-type]
        finally:
            self._following -= following
        self.apply(change, revision)

    def apply(self, change: SessionChange, revision: int | None = None) -> None:
        """A change made here, or told by the process that made it (`revision`: the record's after it;
        a copy that already reflects it, having read the record since, is left as it is)."""
        if revision is not None:
            if revision <= self.revision:
                return
            self.revision = revision
        if change.get("initialized"):
            self.initialized = self.negotiated
        if "level" in change:
            self.log_level = change["level"]
        for key, follow in (("subscribe", True), ("unsubscribe", False)):
            if key in change:
                self.subscribe(change[key], follow)

    async def share(self) -> None:
        """Store the record of a session that just negotiated; if the store fails, nothing was negotiated."""
        try:
            await self.store.save(self.record(), self.ttl)  # type: ignore[union-attr]
        except BaseException:
            self.version = None  # a failed initialize mints no session
            if self._bus is not None:
                self._bus.detach(self.changes)
            raise

    def record(self) -> SessionRecord:
        assert self.id is not None and self.version is not None
        return SessionRecord(self.id, self.principal, self.version, self.client_info, self.capabilities,
                             self.initialized, self.log_level, frozenset(self._uris))

    def follow(self, record: SessionRecord) -> None:
        """Take the record's changeable state (another process may have changed it), unless it is older
        than what this copy reflects (read before a change told since), or it is an HTTP+SSE session's
        (which holds none)."""
        if record.revision < self.revision or record.sse:
            return
        self.revision = record.revision
        self.initialized, self.log_level = record.initialized, record.log_level
        if self._uris != record.uris:
            self._uris.clear()
            self._uris.update(record.uris)

    def cancel(self, request_id: Any) -> None:
        """`notifications/cancelled` for a request of this session, running here or (shared) elsewhere."""
        call = self.calls.get(request_id)
        if call is not None:
            call.cancel()
        elif self.store is not None and request_id is not None:
            self.store.relay(self.id, {"cancel": request_id})  # type: ignore[arg-type]

    def close(self) -> None:
        """The session ended: cancel its calls, wake whoever waits on it."""
        self.closed = True
        self._client_place = None  # a local session's state ends with it (a shared one's, with its record)
        self.changes.close()
        if self._bus is not None:
            self._bus.detach(self.changes)
        for call in list(self.calls.values()):
            call.cancel()
        for pending in self._pending.values():
            pending.done.set()

    async def forward(self, send: Callable[[bytes], Awaitable[None]], lifetime: float | None = None) -> None:
        """Send list changes and updates of subscribed resources until the session ends, or for
        `lifetime` seconds at most (what is left of the token of the stream's request)."""
        until = deadline(lifetime)
        while (changes := await self.changes.next(until)) is not None:
            for change in changes:
                await send(encode_notification(METHODS[change.kind], {"uri": change.uri} if change.uri else {}))

    # -- server-to-client requests ------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None, writer: Writer, timeout: float) -> dict[str, Any]:
        """Send a request to the client on `writer` and wait for its result (McpError for an error)."""
        request_id = f"{_ASKED_HERE}{next(_CLIENT_REQUEST_IDS)}"
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        pending = self._pending[request_id] = _Pending()
        tell = self.outbox or writer.notify
        try:
            await writer.notify(orjson.dumps(message))
            with anyio.fail_after(timeout):
                await pending.done.wait()
        except TimeoutError:
            await tell(_cancelled(request_id, f"no answer within {timeout:g} s"))
            raise McpError(INVALID_REQUEST, f"The client did not answer {method} within {timeout:g} s") from None
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await tell(_cancelled(request_id, "the request that asked was cancelled"))
            raise
        finally:
            del self._pending[request_id]
        response = pending.response
        if response is None:
            raise McpError(INVALID_REQUEST, f"The session ended before the client answered {method}")
        if "error" in response:
            error = response["error"] if isinstance(response["error"], dict) else {}
            code = error.get("code")
            raise McpError(code if isinstance(code, int) else INVALID_REQUEST, f"The client refused {method}: {error.get('message', '')}")
        result = response.get("result")
        return result if isinstance(result, dict) else {}

    def deliver(self, response: dict[str, Any]) -> bool:
        """A response from the client: True when a request of ours was waiting for it (or, for a
        shared session, when another process asked it: relayed there)."""
        if self.take(response):
            return True
        request_id = response.get("id")
        asked_elsewhere = isinstance(request_id, str) and request_id.startswith("mcpcore-") and not request_id.startswith(_ASKED_HERE)
        if self.store is None or not asked_elsewhere:
            return False
        self.store.relay(self.id, {"answer": response})  # type: ignore[arg-type]
        return True

    def take(self, response: dict[str, Any]) -> bool:
        """A response for a request this process asked: True when it was waiting for it."""
        request_id = response.get("id")
        pending = self._pending.get(request_id) if is_request_id(request_id) else None
        if pending is None or pending.done.is_set():
            return False
        pending.response = response
        pending.done.set()
        return True


def _cancelled(request_id: str, reason: str) -> bytes:
    params = {"requestId": request_id, "reason": reason}
    return orjson.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})


def new_session_id() -> str:
    """A cryptographically random id of visible ASCII (URL-safe base64)."""
    return secrets.token_urlsafe(24)


class Sessions:
    """The live sessions of one HTTP endpoint: bounded in number, expired when idle.

    With a `store`, these are copies of shared records: one idle here is forgotten here
    (unless its standalone stream is open here), and the store says when one ended; the
    principals' shares are counted there (`claim`), across processes.
    `per_principal`: the sessions one authenticated principal may hold (None: a tenth of `limit`)."""

    def __init__(self, limit: int, idle_timeout: float, clock: Callable[[], float],
                 store: SessionStore | None = None, per_principal: int | None = None) -> None:
        self.limit = limit
        self.per_principal = max(1, limit // HTTP_SESSION_SHARE) if per_principal is None else per_principal
        self.idle_timeout = idle_timeout
        self.clock = clock
        self.store = store
        self._live: dict[str, Session] = {}
        self._reserved = 0  # places held for sessions being initialized
        self._held: dict[str, int] = {}  # places reserved or live, by principal (without a store: it counts them)
        if store is not None:
            store.attach(self)

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._live.values()))

    def new(self, principal: str | None) -> Session:
        """A session for an `initialize` to open (shared when the registry has a store)."""
        return Session(new_session_id(), principal, store=self.store, ttl=self.idle_timeout)

    def reserve(self, principal: str | None) -> None:
        """Hold a place for a session `principal` is initializing (`SessionsFull` when every place,
        or the principal's share, is taken).

        Reserved places count against the limits, so concurrent `initialize` requests
        cannot overshoot them; `add` keeps the place for the session, `abandon` gives it back.
        """
        if self.limit == 0:
            raise SessionsFull("This server opens no 2025-era sessions (max_sessions=0): use protocol 2026-07-28, "
                               "or ask its operator for --stateless or a session limit")
        self.expire()
        if len(self._live) + self._reserved >= self.limit:
            raise SessionsFull(f"Too many open sessions (limit {self.limit}); retry later or end one with DELETE")
        owner = self._counted(principal)
        if owner is not None:
            if self._held.get(owner, 0) >= self.per_principal:
                raise share_taken(self.per_principal)
            self._held[owner] = self._held.get(owner, 0) + 1
        self._reserved += 1

    def _counted(self, principal: str | None) -> str | None:
        """The principal, when this registry counts its sessions (anonymous ones have no share; with a
        store, the store counts them)."""
        return principal if self.store is None else None

    def _let_go(self, principal: str | None) -> None:
        """A place the principal held is free again."""
        owner = self._counted(principal)
        if owner is not None:
            left = self._held[owner] - 1
            if left:
                self._held[owner] = left
            else:
                del self._held[owner]

    def claim(self, session: Session) -> Awaitable[None] | None:
        """With a store, what counts a new session of an authenticated principal there, against its
        share in every process (`SessionsFull`; then the place is given back). None: nothing to await."""
        if self.store is None or session.principal is None:
            return None
        return self._claim(session)

    async def _claim(self, session: Session) -> None:
        try:
            await self.store.claim(session.id, session.principal, self.per_principal, self.idle_timeout)  # type: ignore[union-attr, arg-type]
        except BaseException as failed:
            self._reserved -= 1
            session.close()
            if not isinstance(failed, SessionsFull):  # cut short (the client left, Redis failed): it may be counted
                with anyio.CancelScope(shield=True):
                    await self._forget(session)
            raise

    def add(self, session: Session) -> None:
        """Register a session that just negotiated, in the place `reserve` held for it."""
        assert session.id is not None and self._reserved > 0
        self._reserved -= 1
        self.adopt(session)

    def abandon(self, session: Session) -> Awaitable[None] | None:
        """An initialize that held a place ended without registering its session (it failed, or its
        client left before the answer): give back the place, the principal's share and the session's
        subscriber; with a store, the awaitable that forgets what the store has of it (None: done)."""
        self._reserved -= 1
        self._let_go(session.principal)
        session.close()
        return None if self.store is None else self._forget(session)

    async def _forget(self, session: Session) -> None:
        try:
            await self.store.delete(session.id)  # type: ignore[union-attr, arg-type]
        except McpError as unreachable:  # its record (if it was stored) expires after the idle timeout
            log.warning("the record of session %s, whose initialize did not open it, stays in the shared store "
                        "until it expires: %s", session.id, unreachable.message)

    def adopt(self, session: Session) -> None:
        """Hold a copy of a session another process opened (never refused: the session exists)."""
        assert session.id is not None
        session.last_seen = self.clock()
        self._live[session.id] = session

    def get(self, session_id: str) -> Session | None:
        """The live session with this id (its idle clock restarts), or None."""
        session = self._live.get(session_id)
        if session is not None:
            if self._idle(session, self.clock()):
                self.end(session)
                return None
            session.last_seen = self.clock()
        return session

    def _idle(self, session: Session, now: float) -> bool:
        """Past its idle time with no call in flight (a shared one's open stream keeps its copy here)."""
        return now - session.last_seen > self.idle_timeout and not session.calls and not (
            self.store is not None and session.streaming)

    def end(self, session: Session) -> None:
        """End a live session here: its place, its principal's share and its subscriber are free again."""
        if session.id is not None and self._live.get(session.id) is session:
            del self._live[session.id]
            self._let_go(session.principal)
        session.close()

    def expire(self) -> None:
        """End the sessions idle for longer than `idle_timeout` (none with a call in flight)."""
        now = self.clock()
        for session in list(self._live.values()):
            if self._idle(session, now):
                self.end(session)

    def end_all(self) -> None:
        for session in list(self._live.values()):
            self.end(session)

    # -- what other processes did (with a store) --------------------------------

    def follow(self, session_id: str, record: SessionRecord | None) -> Session | None:
        """Bring the copy held here in line with the shared record (ended when it is gone); None: none held."""
        session = self._live.get(session_id)
        if session is not None:
            if record is None:
                self.end(session)
                return None
            session.follow(record)
            session.last_seen = self.clock()
        return session

    def held(self) -> list[Session]:
        """The copies whose end the store must watch: a call in flight or the standalone stream open."""
        return [session for session in self._live.values() if session.calls or session.streaming]

    def heard(self, session_id: str, event: dict[str, Any]) -> None:
        """Another process ended a session, changed its record, or relayed a response, a cancellation or
        (for an HTTP+SSE session held here) a message POSTed there."""
        session = self._live.get(session_id)
        if session is None:
            return
        if event.get("end"):
            self.end(session)
        elif "post" in event:
            if session.inbox is not None:
                session.inbox.relayed(event)
        elif "answer" in event:
            if isinstance(event["answer"], dict):
                session.take(event["answer"])
        elif "cancel" in event:
            call = session.calls.get(event["cancel"])
            if call is not None:
                call.cancel()
        elif "change" in event:
            session.apply(event["change"], event["revision"])
