"""Per-client state: a small JSON mapping a tool keeps for the client calling it (`ctx.client_state`).

Whose state a call sees (`Context.client_state` picks the place):
- a 2025-era session's (`Session.client_state`): it lives as long as the session, in memory or, for a
  session shared through Redis, beside the session's record, ended and expired with it;
- on stdio, the process's: the process serves one client;
- on the stateless wires (2026-07-28, and 2025-era `--stateless`), the caller's, named by its
  authenticated principal and the optional client-held key `_meta["dev.mcpcore/clientStateKey"]`,
  kept in the server's `StateStore` (this process's, or Redis's) until it is idle for `ttl`
  seconds. A place is a digest of both, so a key another principal presents names another place.

Everything is bounded (`ClientStateLimits`): a value's bytes, a client's keys and bytes, and the clients a
store keeps (a session's state is bounded by the sessions instead). Past a bound `set` raises
`ClientStateFull` (-32602 naming the bound) and changes nothing. Values cross as JSON (orjson), so
what a tool reads back is what a JSON round trip gives (a tuple comes back a list).
"""

from __future__ import annotations

import collections
import hashlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import orjson

from .._wire.jsonrpc import INVALID_PARAMS, McpError, invalid_params

CLIENT_STATE_KEY_META = "dev.mcpcore/clientStateKey"  # the `_meta` field a stateless client names its state with
_MISSING = object()


@dataclass(frozen=True)
class ClientStateLimits:
    """The bounds of per-client state (`Server(client_state=...)`)."""

    max_value_bytes: int = 16 * 1024  # one value, as JSON
    max_bytes: int = 64 * 1024  # one client's values together, as JSON
    max_keys: int = 64  # one client's keys
    max_key_length: int = 128  # characters of a key
    max_clients: int = 10_000  # stateless clients a store keeps (sessions' state is bounded by the sessions)
    ttl: float = 3600.0  # seconds a stateless client's state lives unused (a session's lives as the session)
    min_client_key_length: int = 16  # a client-held key is a bearer secret: long enough not to be guessed
    max_client_key_length: int = 256

    def __post_init__(self) -> None:
        if min(self.max_value_bytes, self.max_bytes, self.max_keys, self.max_key_length, self.max_clients) < 1:
            raise ValueError("client state limits must be at least 1")
        if self.ttl <= 0:
            raise ValueError("client state ttl must be positive")


class ClientStateFull(McpError):
    """A bound of per-client state would be passed: -32602, naming the bound; nothing was changed."""

    def __init__(self, bound: str, limit: int, message: str) -> None:
        super().__init__(INVALID_PARAMS, message, {"bound": bound, "limit": limit})


def refusal(bound: str, limits: ClientStateLimits) -> ClientStateFull:
    """The error for the bound a store found passed ("keys", "bytes" or "clients")."""
    if bound == "keys":
        return ClientStateFull("max_keys", limits.max_keys, f"This client's state holds {limits.max_keys} keys "
                               "already (the most it may): delete one first")
    if bound == "bytes":
        return ClientStateFull("max_bytes", limits.max_bytes, f"This client's state would pass {limits.max_bytes} "
                               "bytes of JSON (the most it may hold): delete or shrink a value first")
    return ClientStateFull("max_clients", limits.max_clients, f"The server keeps state for {limits.max_clients} "
                           "clients already; retry once some expire")


class Place(Protocol):
    """One client's state, as stored: JSON bytes by key."""

    async def read(self, key: str, limits: ClientStateLimits) -> bytes | None:
        """The value (None: none); a stored place's idle clock restarted."""

    async def write(self, key: str, value: bytes | None, limits: ClientStateLimits) -> None:
        """Set (None: delete) a value; `ClientStateFull` when a bound would be passed."""


class Bucket:
    """A client's state in this process's memory (a session's, stdio's, or a `LocalStateStore`'s)."""

    __slots__ = ("values", "size", "last_used")

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.size = 0  # bytes of its values
        self.last_used = 0.0

    async def read(self, key: str, limits: ClientStateLimits) -> bytes | None:
        return self.values.get(key)

    async def write(self, key: str, value: bytes | None, limits: ClientStateLimits) -> None:
        self.put(key, value, limits)

    def put(self, key: str, value: bytes | None, limits: ClientStateLimits) -> None:
        old = self.values.get(key)
        if value is None:
            if old is not None:
                del self.values[key]
                self.size -= len(old)
            return
        if old is None and len(self.values) >= limits.max_keys:
            raise refusal("keys", limits)
        size = self.size - (0 if old is None else len(old)) + len(value)
        if size > limits.max_bytes:
            raise refusal("bytes", limits)
        self.values[key] = value
        self.size = size


class StateStore(Protocol):
    """Where stateless clients' state is kept (`LocalStateStore`; `redisstate.RedisStateStore`), by scope."""

    async def read(self, scope: str, key: str, limits: ClientStateLimits) -> bytes | None:
        """The value (None: none), the scope's idle clock restarted."""

    async def write(self, scope: str, key: str, value: bytes | None, limits: ClientStateLimits) -> None:
        """Set (None: delete) a value, checked against every bound in one step."""


class LocalStateStore:
    """Stateless clients' state in this process: at most `max_clients` buckets, each dropped `ttl`
    seconds after its last use (the least recently used first: one ttl for all keeps them in order)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: collections.OrderedDict[str, Bucket] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def _bucket(self, scope: str, limits: ClientStateLimits) -> Bucket | None:
        now = self._clock()
        while self._buckets:
            oldest = next(iter(self._buckets.values()))
            if now - oldest.last_used <= limits.ttl:
                break
            self._buckets.popitem(last=False)
        bucket = self._buckets.get(scope)
        if bucket is not None:
            bucket.last_used = now
            self._buckets.move_to_end(scope)
        return bucket

    async def read(self, scope: str, key: str, limits: ClientStateLimits) -> bytes | None:
        bucket = self._bucket(scope, limits)
        return None if bucket is None else bucket.values.get(key)

    async def write(self, scope: str, key: str, value: bytes | None, limits: ClientStateLimits) -> None:
        bucket = self._bucket(scope, limits)
        if bucket is None:
            if value is None:
                return
            if len(self._buckets) >= limits.max_clients:
                raise refusal("clients", limits)
            bucket = Bucket()
            bucket.put(key, value, limits)  # refused before the bucket is kept
            bucket.last_used = self._clock()
            self._buckets[scope] = bucket
            return
        bucket.put(key, value, limits)
        if not bucket.values:
            del self._buckets[scope]  # an empty state takes no place


class ScopedPlace:
    """A stateless client's place in a `StateStore`."""

    __slots__ = ("store", "scope")

    def __init__(self, store: StateStore, scope: str) -> None:
        self.store = store
        self.scope = scope

    async def read(self, key: str, limits: ClientStateLimits) -> bytes | None:
        return await self.store.read(self.scope, key, limits)

    async def write(self, key: str, value: bytes | None, limits: ClientStateLimits) -> None:
        await self.store.write(self.scope, key, value, limits)


def stateless_scope(principal: str | None, meta: dict[str, Any], limits: ClientStateLimits) -> str:
    """The place of a stateless caller: its principal and client-held key, digested (-32602 when it
    names neither, or the key is not a string of a bounded length)."""
    key = meta.get(CLIENT_STATE_KEY_META)
    if key is not None and not (isinstance(key, str) and
                                limits.min_client_key_length <= len(key) <= limits.max_client_key_length):
        raise invalid_params(f"_meta {CLIENT_STATE_KEY_META!r} must be a string of {limits.min_client_key_length} "
                             f"to {limits.max_client_key_length} characters (a random one, kept by the client)")
    if key is None and principal is None:
        raise invalid_params(
            "This call keeps per-client state, and nothing names the client: a stateless request needs an "
            f"authenticated principal or _meta {CLIENT_STATE_KEY_META!r} (a random key the client keeps), "
            "or a 2025-era session")
    return "client:" + hashlib.sha256(orjson.dumps([principal, key])).hexdigest()


class ClientState:
    """A client's state as a tool sees it: `await get(key)`, `await set(key, value)`, `await delete(key)`.

    Async because the state may live in Redis; each method is one step (no read-modify-write
    lock across calls: two concurrent calls of one client setting one key leave one of the values)."""

    __slots__ = ("_place", "_limits")

    def __init__(self, place: Place, limits: ClientStateLimits) -> None:
        self._place = place
        self._limits = limits

    def _checked(self, key: Any) -> str:
        if not isinstance(key, str) or not key:
            raise TypeError(f"a client state key is a non-empty string, not {key!r}")
        if len(key) > self._limits.max_key_length:
            raise ClientStateFull("max_key_length", self._limits.max_key_length, f"A client state key may have at "
                                  f"most {self._limits.max_key_length} characters; this one has {len(key)}")
        return key

    async def get(self, key: str, default: Any = None) -> Any:
        """The value stored under `key`, or `default`."""
        stored = await self._place.read(self._checked(key), self._limits)
        return default if stored is None else orjson.loads(stored)

    async def set(self, key: str, value: Any) -> None:
        """Store a JSON value (`TypeError` for one orjson cannot write; `ClientStateFull` past a bound)."""
        key = self._checked(key)
        data = orjson.dumps(value)
        if len(data) > self._limits.max_value_bytes:
            raise ClientStateFull("max_value_bytes", self._limits.max_value_bytes, f"A client state value may "
                                  f"have at most {self._limits.max_value_bytes} bytes of JSON; this one has {len(data)}")
        await self._place.write(key, data, self._limits)

    async def delete(self, key: str) -> None:
        """Forget `key` (nothing happens if it is not set)."""
        await self._place.write(self._checked(key), None, self._limits)


class SessionPlace(Protocol):
    """What the client state reads of a call's 2025-era session (`session.Session` is one)."""

    one_request: bool  # a stateless server's stand-in: no session to keep state in

    def client_place(self) -> Place: ...


class ClientStates:
    """A server's per-client state: its bounds, and where stateless clients' state is kept."""

    def __init__(self, limits: ClientStateLimits | None = None, store: StateStore | None = None) -> None:
        self.limits = limits or ClientStateLimits()
        self.store: StateStore = store or LocalStateStore()

    def of(self, session: SessionPlace | None, place: Place | None, principal: str | None,
           meta: dict[str, Any]) -> ClientState:
        """The state of a call's client: its session's, its transport's (`place`: stdio's), or the
        stateless caller's (-32602 when it names none)."""
        if session is not None and not session.one_request:
            place = session.client_place()
        elif place is None:
            place = ScopedPlace(self.store, stateless_scope(principal, meta, self.limits))
        return ClientState(place, self.limits)
