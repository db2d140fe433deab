"""Idempotent tools: a tool declared `idempotent` runs at most once per (caller, tool, key) in a window.

The key is the request's `_meta["dev.mcpcore/idempotencyKey"]`, else a SHA-256 digest of the canonical
JSON of the arguments. The caller is the authenticated principal, else the 2025-era session, else the
stdio process (one client); an anonymous stateless caller has an entry only when it presents a key, a
bearer secret then. `Idempotency.once` claims the entry in the server's `OnceStore` (this process's
`LocalOnceStore`, or Redis's with `--redis`): the claimant runs the tool and stores its result; a repeat
meanwhile waits for it, and a repeat after it gets the stored result. A run that ends without a result
(a JSON-RPC error, a question for the client, a cancellation, a crash) releases the claim, and a
waiter runs the tool itself. Bounded: results kept at most `window` seconds, by count and bytes.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import math
import secrets
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

import anyio
import orjson

from .._wire.jsonrpc import invalid_params

IDEMPOTENCY_KEY_META = "dev.mcpcore/idempotencyKey"  # the `_meta` field a client names a call's entry with

log = logging.getLogger("mcpcore.idempotency")


@dataclass(frozen=True)
class IdempotencyLimits:
    """The bounds of idempotent tools' stored results (`Server(idempotency=...)`)."""

    window: float = 300.0  # seconds a result is kept (a tool's `idempotent=SECONDS` overrides it)
    max_entries: int = 10_000  # results kept in one process
    max_bytes: int = 32 * 1024 * 1024  # their bytes together, as JSON, in one process
    max_result_bytes: int = 1024 * 1024  # one result, as JSON: a larger one is returned and not kept
    max_key_length: int = 256  # characters of an idempotency key
    min_anonymous_key_length: int = 16  # an anonymous caller's key is a bearer secret: long enough not to be guessed
    lease: float = 10.0  # seconds a Redis claim outlives its process (renewed while the tool runs)

    def __post_init__(self) -> None:
        if min(self.max_entries, self.max_bytes, self.max_result_bytes, self.max_key_length) < 1:
            raise ValueError("idempotency limits must be at least 1")
        if not (0 < self.window < math.inf and 0 < self.lease < math.inf):
            raise ValueError("an idempotency window and lease must be positive numbers of seconds")


class Claim(Protocol):
    """The right to run an entry's tool, held by one call until it settles."""

    async def settle(self, data: bytes | None, window: float) -> None:
        """Keep `data` (a result, as JSON) for `window` seconds, or (None) let another caller run the tool;
        to the end even in a cancelled call (the waiters depend on it)."""


class OnceStore(Protocol):
    """Where entries are claimed and results kept (`LocalOnceStore`; `redisstate.RedisOnceStore`)."""

    async def claim(self, key: str, limits: IdempotencyLimits) -> bytes | Claim | None:
        """The stored result; or a claim (the caller runs the tool); or None (another call runs it now)."""

    async def wait(self, key: str, attempt: int) -> None:
        """Until the call running `key` may have settled (`attempt` counts the waits so far)."""


class LocalOnceStore:
    """Entries in this process: running ones with an event their waiters wait on, results in insertion
    order, the oldest dropped past `max_entries` or `max_bytes` (and any found past its window)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._running: dict[str, anyio.Event | None] = {}  # key → what its waiters wait on (made by the first)
        self._stored: collections.OrderedDict[str, tuple[float, bytes]] = collections.OrderedDict()  # key → (until, data)
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._stored)

    async def claim(self, key: str, limits: IdempotencyLimits) -> bytes | Claim | None:
        if key in self._running:
            return None
        stored = self._stored.get(key)
        if stored is not None:
            if stored[0] > self._clock():
                return stored[1]
            self._drop(key)
        self._running[key] = None
        return _LocalClaim(self, key, limits)

    async def wait(self, key: str, attempt: int) -> None:
        if key in self._running:
            running = self._running[key]
            if running is None:
                running = self._running[key] = anyio.Event()
            await running.wait()

    def settle(self, key: str, data: bytes | None, window: float, limits: IdempotencyLimits) -> None:
        if data is not None:
            now = self._clock()
            self._stored[key] = (now + window, data)
            self.bytes += len(data)
            while self._stored and (len(self._stored) > limits.max_entries or self.bytes > limits.max_bytes
                                    or next(iter(self._stored.values()))[0] <= now):
                self._drop(next(iter(self._stored)))
        waited = self._running.pop(key)
        if waited is not None:
            waited.set()

    def _drop(self, key: str) -> None:
        self.bytes -= len(self._stored.pop(key)[1])


class _LocalClaim:
    __slots__ = ("_store", "_key", "_limits")

    def __init__(self, store: LocalOnceStore, key: str, limits: IdempotencyLimits) -> None:
        self._store, self._key, self._limits = store, key, limits

    async def settle(self, data: bytes | None, window: float) -> None:
        self._store.settle(self._key, data, window, self._limits)


Scope = tuple[str, str]  # whose entries: ("principal", subject), ("session", id), ("process", id), ("anonymous", "")


class Idempotency:
    """A server's idempotent tools: their bounds, and where entries live (`store`)."""

    def __init__(self, limits: IdempotencyLimits | None = None, store: OnceStore | None = None) -> None:
        self.limits = limits or IdempotencyLimits()
        self.store: OnceStore = store or LocalOnceStore()
        self.process = secrets.token_hex(16)  # names this process as a caller (stdio: the process is the client)

    def entry(self, scope: Scope | None, tool: str, meta: dict[str, Any], arguments: dict[str, Any]) -> str | None:
        """The entry a call names: a digest of its caller, tool and key (or arguments); None for an anonymous
        caller without a key (nothing tells it from another client). -32602 for a malformed key."""
        key = meta.get(IDEMPOTENCY_KEY_META)
        limits = self.limits
        if key is not None:
            least = 1 if scope is not None else limits.min_anonymous_key_length
            if not (isinstance(key, str) and least <= len(key) <= limits.max_key_length):
                anonymous = " (a random one: an anonymous caller's key is its only name)" if scope is None else ""
                raise invalid_params(f"_meta {IDEMPOTENCY_KEY_META!r} must be a string of {least} to "
                                     f"{limits.max_key_length} characters{anonymous}", {"field": IDEMPOTENCY_KEY_META})
            named = ["key", key]
        elif scope is None:
            return None
        else:
            named = ["arguments", hashlib.sha256(orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)).hexdigest()]
        return hashlib.sha256(orjson.dumps([*(scope or ("anonymous", "")), tool, *named])).hexdigest()

    async def once(self, tool: str, window: float | None, key: str | None,
                   run: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """The tool's result for entry `key`: stored, waited for, or run here and stored."""
        if key is None:
            return await run()
        store, attempt = self.store, 0
        while True:
            found = await store.claim(key, self.limits)
            if found is None:
                await store.wait(key, attempt)
                attempt += 1
            elif isinstance(found, bytes):
                return orjson.loads(found)
            else:
                break
        try:
            result = await run()
        except BaseException:
            await found.settle(None, 0.0)  # a cancelled call too: its waiters run the tool
            raise
        data = orjson.dumps(result)
        kept: bytes | None = data
        if len(data) > self.limits.max_result_bytes:
            log.warning("idempotent tool %r: its result has %d bytes, over max_result_bytes (%d): returned, not "
                        "stored (a repeat runs the tool again)", tool, len(data), self.limits.max_result_bytes)
            kept = None
        await found.settle(kept, window or self.limits.window)
        return result
