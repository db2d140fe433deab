"""State several mcpcore processes share on one Redis: the change bus, the task store, 2025-era
sessions, per-client state, idempotent tools' results, the key check.

`Server(store=RedisState("redis://host:6379/0"))` (or `mcpcore run --redis URL`, or
`MCPCORE_REDIS_URL`) gives the server a `RedisBus`, a `RedisTaskStore`, a
`RedisSessionStore` and a `RedisStateStore`, so any process behind a load balancer can
answer any request: a change announced in one process reaches the `subscriptions/listen`
streams of all of them, a task created in one is polled, answered and cancelled in any
other, a 2025-era session opened in one is served by all, and a client's state
(`ctx.client_state`) written in one is read in all. Needs the
`redis` package (`pip install 'mcpcore[redis]'`), imported only here.

Theory of operation. `RedisState` is entered with the server's lifespan: it
connects (an unreachable Redis refuses the start with the URL in the message),
checks that this process's requestState keys are those of the processes already
running, and runs the bus's two loops. `RedisBus.publish` delivers to this
process's subscribers at once and queues the change for the others (an ordered
set, so repeats coalesce and the queue is bounded); the sender publishes it on
one channel, the receiver delivers what other processes published. When Redis is
lost, both loops retry with back-off; changes heard while the receiver was away
are unknown, so on reconnection every local subscription is told that everything
it follows may have changed (clients re-read), and a sender that had to drop
changes asks every process to do the same. The task store keeps each record as
JSON under a key that Redis expires at the task's TTL, creates it with a script that
checks the limits and writes it in one step, changes it with optimistic transactions
(WATCH/MULTI), and counts tasks with two sorted sets scored by expiry (and a hash of
owners, so that an expired task leaves both). The session store keeps
a hash per session (expired by Redis when idle) and a set of each authenticated
principal's sessions (counted, against its share, by a script that first drops the
sessions whose hash is gone; expired with the last of them), tells changes, ends and relayed
client responses on a second channel the bus's receiver also hears, keeps the
events of resumable streams in a Redis Stream per session, and watches the copies
this process holds for an expiry nobody tells. Per-client state is a hash per client
written by one script that checks every bound; a session's lives and ends with the
session's hash, a stateless client's expires on its own and is counted in a sorted set.
The rests of results cut to their budget are a hash each (owner and pages) Redis expires
at their TTL, written by one script that first drops the oldest until the bounds hold.
A Redis error in a request is `StateUnavailable` (-32603 saying so), never a hang:
every command has a timeout.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import hmac
import logging
import secrets
import time
import weakref
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator

import anyio
import orjson
import redis.asyncio as redis
from redis.exceptions import RedisError, WatchError

from ._runtime.clientstate import ClientStateLimits, refusal
from ._runtime.defaults import HTTP_SESSION_EVENTS
from ._runtime.idempotency import Claim, IdempotencyLimits, LocalOnceStore
from ._runtime.results import ResultStoreLimits
from ._runtime.session import SessionChange, SessionRecord, Sessions, StoredEvent, share_taken
from ._runtime.subscriptions import Change, LocalBus, Subscriber, on_the_loop
from ._wire.jsonrpc import INTERNAL_ERROR, McpError
from .taskstore import RecordChange, TaskRecord, TooManyTasks

if TYPE_CHECKING:
    from ._serving.server import Server

__all__ = ["RedisBus", "RedisOnceStore", "RedisSessionStore", "RedisState", "RedisStateStore", "RedisTaskStore",
           "StateUnavailable"]

log = logging.getLogger(__name__)

_EVERYTHING = "*"  # on the channel: every process tells its subscribers that anything may have changed
_RETRY_SECONDS = (0.1, 0.2, 0.5, 1.0, 2.0)  # back-off while Redis is away, the last one repeated
_KEY_SECONDS = 60  # the running processes' signing key stays named this long after the last one stops


class StateUnavailable(McpError):
    """Redis could not be reached for a request that needs the shared state."""

    def __init__(self, what: str, error: BaseException) -> None:
        super().__init__(INTERNAL_ERROR, f"The shared state (Redis) is unreachable, so {what} failed; try again shortly",
                         {"reason": f"{type(error).__name__}: {error}"})


class RedisState:
    """The shared state of the processes of one server on one Redis (see the module docstring).

    `prefix` namespaces every key and the channel, so servers may share a Redis;
    `timeout` bounds every command; `max_pending` bounds the changes waiting for Redis,
    `max_relayed` the clients' responses and cancellations waiting to be relayed, `max_events`
    (about: Redis trims whole blocks) the resumable stream events kept per session."""

    def __init__(self, url: str, *, prefix: str = "mcpcore", timeout: float = 2.0, max_pending: int = 10_000,
                 max_relayed: int = 1000, max_events: int = HTTP_SESSION_EVENTS) -> None:
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        self.client: Any = redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        self.bus = RedisBus(self, max_pending)
        self.tasks = RedisTaskStore(self)
        self.client_states = RedisStateStore(self)
        self.idempotency = RedisOnceStore(self)
        self.results = RedisResultStore(self)
        self.sessions = RedisSessionStore(self, max_relayed, max_events)
        self._loops: list[asyncio.Task[None]] = []
        self._signing = ""  # the fingerprint of the key this process seals with

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    async def start(self, server: Server) -> None:
        """Connect, check the key ring, run the bus; raise a clear error when Redis is unreachable."""
        try:
            await self.client.ping()
        except (RedisError, OSError) as error:
            raise ConnectionError(f"Redis at {self.url} is unreachable: {error}") from error
        await self._check_keys(server)
        self.bus.running = True
        loops = (self.bus.send, self.bus.receive, self._announce_key, self.sessions.send, self.sessions.watch)
        self._loops = [asyncio.get_running_loop().create_task(loop()) for loop in loops]

    async def aclose(self) -> None:
        """Send what is still queued for the other processes (a second at most), then disconnect."""
        with anyio.move_on_after(1.0):
            while self.bus.pending:
                await anyio.sleep(0.01)
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        self._loops = []
        self.bus.running = False
        await self.client.aclose()

    async def _check_keys(self, server: Server) -> None:
        """Refuse a random requestState key, and a key ring that cannot open what the others seal."""
        require_configured_keys(server)
        mine = [_fingerprint(key) for key in server.sealer.keys]
        published = await self.client.get(self.key("state-key"))
        if published is not None and published.decode() not in mine:
            raise ValueError("the processes already running seal requestState with a key this process does not hold: "
                             "give every process the same MCPCORE_STATE_KEYS (rotate by adding the new key second "
                             "everywhere, then moving it first)")
        self._signing = mine[0]
        await self.client.set(self.key("state-key"), self._signing, ex=_KEY_SECONDS)

    async def _announce_key(self) -> None:
        """Keep this process's signing key named in Redis while it runs (it lapses once all have stopped)."""
        while True:
            await anyio.sleep(_KEY_SECONDS / 3)
            try:
                await self.client.set(self.key("state-key"), self._signing, ex=_KEY_SECONDS)
            except (RedisError, OSError):
                pass  # the bus's loops say that Redis is away


def require_configured_keys(server: Server) -> None:
    """Refuse random requestState keys: processes on other hosts (or restarted ones) could not open them."""
    if not server.sealer.configured:
        raise ValueError("processes sharing a Redis need one requestState key ring, and this one is random: "
                         "set MCPCORE_STATE_KEYS (or Server(state_keys=...)) to the same keys in every process")


def _fingerprint(key: bytes) -> str:
    """Names a key without revealing it."""
    return hmac.new(key, b"mcpcore state key", hashlib.sha256).hexdigest()[:16]


class RedisBus:
    """The `Bus` of several processes: this process's subscribers, and Redis pub/sub to the others."""

    def __init__(self, state: RedisState, max_pending: int) -> None:
        self._state = state
        self._channel = state.key("changes")
        self._local = LocalBus()
        self._origin = secrets.token_hex(8)  # our own messages come back on the channel: ignored
        self._pending: dict[Change, None] = {}  # for the others, oldest first; repeats coalesce
        self._max_pending = max_pending
        self._dropped = False  # the others missed changes: tell them to resync
        self._outbox = _Outbox("publish changes to")
        # What the receiver hears, by channel, and who learns that it may have missed messages.
        self._listeners: dict[str, Callable[[bytes], None]] = {self._channel: self._heard}
        self._missed: list[Callable[[], None]] = [self._resync_subscribers]
        self.running = False  # between the state's start and its close: only then do changes go to Redis

    def listen(self, channel: str, heard: Callable[[bytes], None], missed: Callable[[], None]) -> None:
        """Hear `channel` too (before the receiver runs); `missed` runs after each reconnection."""
        self._listeners[channel] = heard
        self._missed.append(missed)

    @property
    def pending(self) -> bool:
        """Whether changes still wait to be sent to the other processes."""
        return bool(self._pending) or self._dropped

    def attach(self, subscriber: Subscriber) -> None:
        self._local.attach(subscriber)

    def detach(self, subscriber: Subscriber) -> None:
        self._local.detach(subscriber)

    def publish(self, change: Change) -> None:
        """Deliver here at once, and to the other processes through Redis (safe from worker threads).

        Before the state starts (a tool registered at import, with no event loop yet) or after it
        closes, the change is offered to this process's subscribers alone, as a `LocalBus` does: no
        client sees what a process that does not serve offers, so the others need not hear of it."""
        if self.running:
            on_the_loop(self._publish, change)
        else:
            self._local.publish(change)

    def _publish(self, change: Change) -> None:
        self._local.deliver(change)
        if change not in self._pending and len(self._pending) >= self._max_pending:
            self._pending.clear()  # bounded: what was dropped becomes one "resync everything"
            self._dropped = True
        self._pending[change] = None
        self._outbox.wake()

    async def send(self) -> None:
        """Publish the queued changes, retrying while Redis is away (the queue keeps them)."""
        await self._outbox.run(lambda: self.pending, self._flush, lambda: len(self._pending))

    async def _flush(self) -> None:
        if self._dropped:
            await self._state.client.publish(self._channel, orjson.dumps({"o": self._origin, "k": _EVERYTHING}))
            self._dropped = False
        while self._pending:
            change = next(iter(self._pending))
            del self._pending[change]  # first: the same change made again meanwhile is sent again
            try:
                message = {"o": self._origin, "k": change.kind, "u": change.uri}
                await self._state.client.publish(self._channel, orjson.dumps(message))
            except BaseException:
                self._pending.setdefault(change, None)
                raise

    async def receive(self) -> None:
        """Deliver what the other processes publish; after a reconnection, resync every subscriber."""
        failures = 0
        while True:
            pubsub = self._state.client.pubsub()
            try:
                await pubsub.subscribe(*self._listeners)
                if failures:
                    log.warning("reconnected to Redis after %d failed attempts: changes announced elsewhere "
                                "meanwhile are unknown, so every open subscription here is told everything changed", failures)
                    for missed in self._missed:
                        missed()
                failures = 0
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message is not None:
                        self._listeners[message["channel"].decode()](message["data"])
            except (RedisError, OSError) as error:
                if failures == 0:
                    log.warning("lost the Redis change channel (%s); retrying", error)
                await _back_off(failures)
                failures += 1
            finally:
                with anyio.CancelScope(shield=True):
                    await pubsub.aclose()

    def _heard(self, data: bytes) -> None:
        try:
            message = orjson.loads(data)
            if message["o"] == self._origin:
                return
            if message["k"] == _EVERYTHING:
                self._resync_subscribers()
            else:
                self._local.deliver(Change(message["k"], message.get("u")))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            log.warning("ignored a malformed message on the Redis change channel: %r", data[:200])

    def _resync_subscribers(self) -> None:
        for subscriber in list(self._local.subscribers):
            subscriber.resync()


class _Outbox:
    """The loop that empties one queue into Redis: it waits for work, sends, and backs off while
    Redis is away (the queue keeps what was not sent; `flush` takes an item out once it is)."""

    def __init__(self, what: str) -> None:
        self._what = what  # for the log: "cannot <what> Redis"
        self._wake = anyio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self, waiting: Callable[[], bool], flush: Callable[[], Awaitable[None]], queued: Callable[[], int]) -> None:
        failures = 0
        while True:
            if not waiting():
                self._wake = anyio.Event()
                await self._wake.wait()
            try:
                await flush()
                failures = 0
            except (RedisError, OSError) as error:
                if failures == 0:
                    log.warning("cannot %s Redis (%s); %d queued, retrying", self._what, error, queued())
                await _back_off(failures)
                failures += 1


async def _back_off(failures: int) -> None:
    """Wait before the next try after `failures` failed ones."""
    await anyio.sleep(_RETRY_SECONDS[min(failures, len(_RETRY_SECONDS) - 1)])


@contextlib.contextmanager
def _reaching(what: str) -> Iterator[None]:
    """A Redis error inside is `StateUnavailable`, naming `what` failed."""
    try:
        yield
    except (RedisError, OSError) as error:
        raise StateUnavailable(what, error) from error


def _ms_left(expires_at: float | None) -> int | None:
    """A key's PX for an expiry time (None: the key never expires)."""
    return None if expires_at is None else max(1, round((expires_at - time.time()) * 1000))


def _score(expires_at: float | None) -> str:
    """A task's score in the indexes: its expiry time, exactly (never: +inf)."""
    return "+inf" if expires_at is None else repr(expires_at)


# A task's creation, in one step no other client's command comes between (Redis runs a script whole):
# the record is refused when it exists or a limit is reached (counting as `count` does), else it is
# written and indexed as `RedisTaskStore._index` indexes it.
# KEYS: the record, all tasks by expiry, its principal's tasks by expiry, the owners.
# ARGV: the record's JSON, its PX ('' never expires), its expiry score, its id, its principal, now,
# the limit in all and per principal ('' none). Returns "created", "exists", or the limit reached.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 'exists' end
for index, limit in ipairs({ARGV[7], ARGV[8]}) do
    if limit ~= '' and redis.call('ZCOUNT', KEYS[index + 1], '(' .. ARGV[6], '+inf') >= tonumber(limit) then
        return limit
    end
end
if ARGV[2] == '' then redis.call('SET', KEYS[1], ARGV[1]) else redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
redis.call('HSET', KEYS[4], ARGV[4], ARGV[5])
return 'created'
"""


class RedisTaskStore:
    """A `TaskStore` on Redis: one JSON value per task, expired by Redis at the task's TTL."""

    def __init__(self, state: RedisState) -> None:
        self._state = state
        self._create = state.client.register_script(_CREATE)  # run by its SHA, sent whole the first time

    def _key(self, task_id: str) -> str:
        return self._state.key("task", task_id)

    def _owned_key(self, principal: str | None) -> str:
        return self._state.key("tasks-of", principal or "")

    async def create(self, record: TaskRecord, *, max_tasks: int | None = None,
                     max_tasks_per_principal: int | None = None) -> None:
        """The limits' check, the record and its indexes in one script: concurrent creates through
        any processes never pass a limit, and no failure leaves a record unindexed."""
        px = _ms_left(record.expires_at)
        keys = (self._key(record.task_id), self._state.key("tasks"), self._owned_key(record.principal),
                self._state.key("task-owners"))
        args = (orjson.dumps(record.to_json()), "" if px is None else px, _score(record.expires_at), record.task_id,
                record.principal or "", repr(time.time()),
                *("" if limit is None else limit for limit in (max_tasks, max_tasks_per_principal)))
        with _reaching("creating the task"):
            outcome = (await self._create(keys=keys, args=args)).decode()
        if outcome == "exists":
            raise ValueError(f"task {record.task_id!r} exists")
        if outcome != "created":
            raise TooManyTasks(int(outcome))

    def _index(self, pipe: Any, record: TaskRecord) -> None:
        """Score the record in both indexes by its expiry, and name its owner for `expire` (as `_CREATE` does)."""
        score = _score(record.expires_at)
        pipe.zadd(self._state.key("tasks"), {record.task_id: score})
        pipe.zadd(self._owned_key(record.principal), {record.task_id: score})
        pipe.hset(self._state.key("task-owners"), record.task_id, record.principal or "")

    async def get(self, task_id: str) -> TaskRecord | None:
        with _reaching("reading the task"):
            data = await self._state.client.get(self._key(task_id))
        record = None if data is None else TaskRecord.from_json(orjson.loads(data))
        return None if record is None or record.expired(time.time()) else record  # Redis's expiry lags ours a little

    async def update(self, task_id: str, change: RecordChange) -> tuple[TaskRecord, TaskRecord] | None:
        key = self._key(task_id)
        with _reaching("updating the task"):
            async with self._state.client.pipeline(transaction=True) as pipe:
                while True:  # optimistic: retried when another process wrote the record meanwhile
                    try:
                        await pipe.watch(key)
                        data = await pipe.get(key)
                        if data is None:
                            return None
                        before = TaskRecord.from_json(orjson.loads(data))
                        after = change(before) or before
                        if after == before:
                            await pipe.unwatch()
                            return before, before
                        pipe.multi()
                        if after.expires_at == before.expires_at:
                            pipe.set(key, orjson.dumps(after.to_json()), keepttl=True)
                        else:  # the TTL changed: the key's expiry and the indexes follow
                            pipe.set(key, orjson.dumps(after.to_json()), px=_ms_left(after.expires_at))
                            self._index(pipe, after)
                        await pipe.execute()
                        return before, after
                    except WatchError:
                        continue

    async def delete(self, task_id: str) -> None:
        client = self._state.client
        with _reaching("deleting the task"):
            owner = await client.hget(self._state.key("task-owners"), task_id)  # still there once the record expired
            async with client.pipeline(transaction=True) as pipe:
                pipe.delete(self._key(task_id))
                pipe.zrem(self._state.key("tasks"), task_id)
                pipe.hdel(self._state.key("task-owners"), task_id)
                if owner is not None:
                    pipe.zrem(self._owned_key(owner.decode() or None), task_id)
                await pipe.execute()

    async def expire(self, now: float) -> list[str]:
        """Redis expires the records itself; this forgets them in the indexes and names them."""
        with _reaching("expiring tasks"):
            gone = [task_id.decode() for task_id in await self._state.client.zrangebyscore(self._state.key("tasks"), "-inf", now)]
        for task_id in gone:  # the record is mostly gone already; deleted too, for a `now` ahead of Redis's clock
            await self.delete(task_id)
        return gone

    async def count(self, principal: str | None) -> tuple[int, int]:
        """The records not yet expired (the indexes keep expired ones until `expire` names them)."""
        now = time.time()
        with _reaching("counting tasks"):
            async with self._state.client.pipeline(transaction=True) as pipe:
                for index in (self._state.key("tasks"), self._owned_key(principal)):
                    pipe.zcount(index, f"({now}", "+inf")
                stored, owned = await pipe.execute()
        return stored, owned



# A session's hash: its fixed part as JSON, then one field per changeable fact (a change is one HSET or HDEL),
# and its principal (the owner), whose set of sessions lives as long as the longest-lived of them.
_RECORD, _INITIALIZED, _LEVEL, _URI, _REVISION, _OWNER = "record", "initialized", "level", "uri:", "revision", "owner"

# Count a session a principal opens, unless its share is taken: its sessions whose hash is gone or names
# no owner (ended, expired, or remade by a change racing a DELETE) leave its set first. The new session's
# hash lives for the claim window until `save` gives it the idle time, so a claim whose initialize never
# finished (its clean-up failed with Redis away) is not counted for long. KEYS: the principal's set, the new
# session's hash. ARGV: the share, the idle time in ms, the session id, the key prefix of session hashes, the
# principal, the claim window in ms. 1: counted, 0: share taken.
_CLAIM = """
local live = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('HEXISTS', ARGV[4] .. id, 'owner') == 1 then live = live + 1 else redis.call('SREM', KEYS[1], id) end
end
if live >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[2], 'owner', ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
redis.call('SADD', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
CLAIM_SECONDS = 60.0  # how long a claimed place waits for its initialize to be saved (capped by the idle time)
# Read a session's hash and restart its idle clock, its client state's and its owner's set's (in one round
# trip: every request of a session reads its record). KEYS: the session's hash, its client state's. ARGV: the
# idle time in ms, the key prefix of principals' sets.
_LOAD = """
local fields = redis.call('HGETALL', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner then redis.call('PEXPIRE', ARGV[2] .. owner, ARGV[1]) end
return fields
"""
_WATCH_SECONDS = 1.0  # how often the sessions held here are checked for an end told nowhere (an expiry)


class RedisSessionStore:
    """A `SessionStore` on Redis: a hash per session that Redis expires when idle, one channel that
    tells the other processes a change, an end, or a client's response or cancellation, and a Redis
    Stream per session of its resumable streams' events, trimmed to about `max_events`."""

    def __init__(self, state: RedisState, max_relayed: int, max_events: int) -> None:
        self._state = state
        self._max_events = max_events
        self._channel = state.key("sessions")
        self._origin = secrets.token_hex(8)  # our own messages come back on the channel: ignored
        self._registries: weakref.WeakSet[Sessions] = weakref.WeakSet()
        self._relayed: collections.deque[bytes] = collections.deque(maxlen=max_relayed)
        self._outbox = _Outbox("relay responses through")
        self._reread = False  # the channel was lost: changes told meanwhile are unknown
        self._claim = state.client.register_script(_CLAIM)
        self._load = state.client.register_script(_LOAD)
        state.bus.listen(self._channel, self._heard, self._missed)

    def _key(self, session_id: str) -> str:
        return self._state.key("session", session_id)

    def _owned_key(self, principal: str) -> str:
        return self._state.key("sessions-of", principal)

    def _events_key(self, session_id: str) -> str:
        return self._state.key("session-events", session_id)

    def _state_key(self, session_id: str) -> str:
        return self._state.client_states.key(_SESSION_SCOPE + session_id)

    def client_place(self, session_id: str, ttl: float) -> RedisPlace:
        return RedisPlace(self._state.client_states, _SESSION_SCOPE + session_id, ttl)

    def _told(self, session_id: str, event: dict[str, Any]) -> bytes:
        return orjson.dumps({"o": self._origin, "s": session_id, "e": event})

    def attach(self, sessions: Sessions) -> None:
        self._registries.add(sessions)

    async def save(self, record: SessionRecord, ttl: float) -> None:
        fixed = {"principal": record.principal, "version": record.version, "clientInfo": record.client_info,
                 "capabilities": record.capabilities}
        if record.sse:
            fixed["sse"] = True
        fields: dict[str, Any] = {_RECORD: orjson.dumps(fixed)}
        if record.initialized:
            fields[_INITIALIZED] = "1"
        if record.log_level is not None:
            fields[_LEVEL] = record.log_level
        if record.principal is not None:
            fields[_OWNER] = record.principal
        fields.update({_URI + uri: "" for uri in record.uris})
        key = self._key(record.id)
        with _reaching("opening the session"):
            async with self._state.client.pipeline(transaction=True) as pipe:
                pipe.hset(key, mapping=fields)
                pipe.pexpire(key, _ms(ttl))
                await pipe.execute()

    async def claim(self, session_id: str, principal: str, share: int, ttl: float) -> None:
        with _reaching("counting the principal's sessions"):
            counted = await self._claim(keys=[self._owned_key(principal), self._key(session_id)],
                                        args=[share, _ms(ttl), session_id, self._key(""), principal,
                                              _ms(min(ttl, CLAIM_SECONDS))])
        if not counted:
            raise share_taken(share)

    async def load(self, session_id: str, ttl: float) -> SessionRecord | None:
        with _reaching("reading the session"):
            found = await self._load(keys=[self._key(session_id), self._state_key(session_id)],
                                     args=[_ms(ttl), self._owned_key("")])
        return _session_record(session_id, dict(zip(found[::2], found[1::2])))

    async def change(self, session_id: str, change: SessionChange, ttl: float) -> int:
        key = self._key(session_id)
        with _reaching("changing the session"):
            async with self._state.client.pipeline(transaction=True) as pipe:
                pipe.hincrby(key, _REVISION, 1)
                if change.get("initialized"):
                    pipe.hset(key, _INITIALIZED, "1")
                if "level" in change:
                    pipe.hset(key, _LEVEL, change["level"])
                if "subscribe" in change:
                    pipe.hset(key, _URI + change["subscribe"], "")
                if "unsubscribe" in change:
                    pipe.hdel(key, _URI + change["unsubscribe"])
                pipe.pexpire(key, _ms(ttl))  # a change racing a DELETE leaves a hash without its record: no session
                revision = (await pipe.execute())[0]
            # Told before the client hears the change took effect, in order with the changes channel.
            await self._state.client.publish(self._channel, self._told(session_id, {"change": change, "revision": revision}))
        return revision

    async def delete(self, session_id: str) -> None:
        with _reaching("ending the session"):
            async with self._state.client.pipeline(transaction=True) as pipe:
                pipe.delete(self._key(session_id), self._events_key(session_id), self._state_key(session_id))
                pipe.publish(self._channel, self._told(session_id, {"end": True}))
                await pipe.execute()

    async def keep_event(self, session_id: str, event: StoredEvent, ttl: float) -> None:
        key = self._events_key(session_id)
        event_id, message, final = event
        with _reaching("keeping the stream's event"):
            async with self._state.client.pipeline(transaction=True) as pipe:
                pipe.xadd(key, {"i": event_id, "m": message, "f": "1" if final else ""}, maxlen=self._max_events,
                          approximate=True)
                pipe.pexpire(key, _ms(ttl))
                await pipe.execute()

    async def kept_events(self, session_id: str) -> tuple[list[StoredEvent], str]:
        with _reaching("reading the session's stream events"):
            entries = await self._state.client.xrange(self._events_key(session_id))
        return [_stored_event(fields) for _, fields in entries], entries[-1][0].decode() if entries else "0-0"

    async def next_events(self, session_id: str, cursor: str) -> tuple[list[StoredEvent], str]:
        block_ms = max(1, min(1000, round(self._state.timeout * 500)))  # within the command timeout
        with _reaching("following the session's stream events"):
            found = await self._state.client.xread({self._events_key(session_id): cursor}, count=100, block=block_ms)
        entries = found[0][1] if found else []
        return [_stored_event(fields) for _, fields in entries], entries[-1][0].decode() if entries else cursor

    def relay(self, session_id: str, event: dict[str, Any]) -> None:
        if len(self._relayed) == self._relayed.maxlen:
            log.warning("more than %d responses wait to be relayed to other processes; dropped the oldest",
                        self._relayed.maxlen)
        self._relayed.append(self._told(session_id, event))
        self._outbox.wake()

    async def send(self) -> None:
        """Publish the relayed responses and cancellations, in order, retrying while Redis is away."""
        await self._outbox.run(lambda: bool(self._relayed), self._flush, lambda: len(self._relayed))

    async def _flush(self) -> None:
        while self._relayed:
            await self._state.client.publish(self._channel, self._relayed[0])
            self._relayed.popleft()

    def _heard(self, data: bytes) -> None:
        try:
            message = orjson.loads(data)
            if message["o"] == self._origin:
                return
            for sessions in list(self._registries):
                sessions.heard(message["s"], message["e"])
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            log.warning("ignored a malformed message on the Redis sessions channel: %r", data[:200])

    def _missed(self) -> None:
        self._reread = True

    async def watch(self) -> None:
        """End the copies held here of sessions that expired (no process tells that), keep alive those
        with a call in flight, and after a reconnection reread every copy (its changes were missed)."""
        while True:
            timeouts = [sessions.idle_timeout / 4 for sessions in list(self._registries)]
            await anyio.sleep(min([_WATCH_SECONDS, *timeouts]))
            try:
                reread, self._reread = self._reread, False
                for sessions in list(self._registries):
                    await self._check(sessions, reread)
            except (RedisError, OSError):
                self._reread = self._reread or reread  # the bus's loops say that Redis is away; nothing ends meanwhile

    async def _check(self, sessions: Sessions, reread: bool) -> None:
        held = list(sessions) if reread else sessions.held()
        if not held:
            return
        async with self._state.client.pipeline(transaction=False) as pipe:
            for session in held:
                (pipe.hgetall if reread else pipe.exists)(self._key(session.id))  # type: ignore[arg-type]
            for session in held:  # a call in flight keeps its session, and its place in its principal's share
                if session.calls:
                    pipe.pexpire(self._key(session.id), _ms(sessions.idle_timeout))  # type: ignore[arg-type]
                    pipe.pexpire(self._state_key(session.id), _ms(sessions.idle_timeout))  # type: ignore[arg-type]
                    if session.principal is not None:
                        pipe.pexpire(self._owned_key(session.principal), _ms(sessions.idle_timeout))
            found = await pipe.execute()
        for session, there in zip(held, found):
            if reread:
                sessions.follow(session.id, _session_record(session.id, there))  # type: ignore[arg-type]
            elif not there:
                sessions.follow(session.id, None)  # type: ignore[arg-type]


# Per-client state (`ctx.client_state`): a hash per client, its values under "v:" + key beside their total
# size ("size", present while any value is), expired by Redis when idle; a session's lives as its session
# (its load and its end touch it too), a stateless client's for the limits' ttl, counted in a sorted set of
# those clients by expiry. KEYS: the client's hash, the set. ARGV: "set" or "del", the key, the value, the
# idle time in ms, the most keys, the most bytes, the most clients ('': a session's, not counted), the
# client's scope (its member in the set). Returns "ok", or the bound a set would pass.
_STATE_WRITE = """
local field = 'v:' .. ARGV[2]
local old = redis.call('HGET', KEYS[1], field)
local size = tonumber(redis.call('HGET', KEYS[1], 'size') or '0')
local counted = ARGV[7] ~= ''
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] == 'del' then
  if not old then return 'ok' end
  if redis.call('HLEN', KEYS[1]) <= 2 then
    redis.call('DEL', KEYS[1])
    if counted then redis.call('ZREM', KEYS[2], ARGV[8]) end
    return 'ok'
  end
  redis.call('HDEL', KEYS[1], field)
  redis.call('HSET', KEYS[1], 'size', size - #old)
else
  if counted and redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
    if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[7]) then return 'clients' end
  end
  if not old and redis.call('HLEN', KEYS[1]) - 1 >= tonumber(ARGV[5]) then return 'keys' end
  size = size - (old and #old or 0) + #ARGV[3]
  if size > tonumber(ARGV[6]) then return 'bytes' end
  redis.call('HSET', KEYS[1], field, ARGV[3], 'size', size)
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if counted then redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[8]) end
return 'ok'
"""
# Read a value and restart the client's idle clock (a stateless client's also in the set, if it is there).
# KEYS: the client's hash, the set. ARGV: the key, the idle time in ms, the client's scope ('': a session's).
_STATE_READ = """
local value = redis.call('HGET', KEYS[1], 'v:' .. ARGV[1])
if redis.call('PEXPIRE', KEYS[1], ARGV[2]) == 1 and ARGV[3] ~= '' then
  local t = redis.call('TIME')
  redis.call('ZADD', KEYS[2], 'XX', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2]), ARGV[3])
end
return value
"""
_SESSION_SCOPE = "session:"  # a session's client state, by its id


class RedisStateStore:
    """A `StateStore` on Redis: each client's state a hash Redis expires when idle, written and checked
    against every bound by one script (concurrent writes through any processes never pass one)."""

    def __init__(self, state: RedisState) -> None:
        self._state = state
        self._index = state.key("client-states")
        self._write = state.client.register_script(_STATE_WRITE)
        self._read = state.client.register_script(_STATE_READ)

    def key(self, scope: str) -> str:
        return self._state.key("client-state", scope)

    async def read(self, scope: str, key: str, limits: ClientStateLimits) -> bytes | None:
        return await self.read_in(scope, key, limits.ttl, counted=True)

    async def write(self, scope: str, key: str, value: bytes | None, limits: ClientStateLimits) -> None:
        await self.write_in(scope, key, value, limits, limits.ttl, counted=True)

    async def read_in(self, scope: str, key: str, ttl: float, counted: bool) -> bytes | None:
        """`read` in a place living `ttl` idle seconds, among the counted clients or not (a session's)."""
        with _reaching("reading the client state"):
            return await self._read(keys=[self.key(scope), self._index], args=[key, _ms(ttl), scope if counted else ""])

    async def write_in(self, scope: str, key: str, value: bytes | None, limits: ClientStateLimits, ttl: float,
                       counted: bool) -> None:
        args = ["del" if value is None else "set", key, value or b"", _ms(ttl), limits.max_keys, limits.max_bytes,
                limits.max_clients if counted else "", scope]
        with _reaching("writing the client state"):
            outcome = (await self._write(keys=[self.key(scope), self._index], args=args)).decode()
        if outcome != "ok":
            raise refusal(outcome, limits)


class RedisPlace:
    """A 2025-era session's client state on Redis: it lives as its session (`RedisSessionStore`)."""

    __slots__ = ("_store", "_scope", "_ttl")

    def __init__(self, store: RedisStateStore, scope: str, ttl: float) -> None:
        self._store, self._scope, self._ttl = store, scope, ttl

    async def read(self, key: str, limits: ClientStateLimits) -> bytes | None:
        return await self._store.read_in(self._scope, key, self._ttl, counted=False)

    async def write(self, key: str, value: bytes | None, limits: ClientStateLimits) -> None:
        await self._store.write_in(self._scope, key, value, limits, self._ttl, counted=False)


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _stored_event(fields: dict[bytes, bytes]) -> StoredEvent:
    return fields[b"i"].decode(), fields[b"m"], fields[b"f"] == b"1"


def _session_record(session_id: str, fields: dict[bytes, bytes]) -> SessionRecord | None:
    """A session's hash read back (None: no session, or only what a change racing its DELETE left)."""
    fixed = fields.get(_RECORD.encode())
    if fixed is None:
        return None
    known = orjson.loads(fixed)
    prefix = _URI.encode()
    uris = frozenset(name[len(prefix):].decode() for name in fields if name.startswith(prefix))
    level = fields.get(_LEVEL.encode())
    return SessionRecord(session_id, known["principal"], known["version"], known["clientInfo"], known["capabilities"],
                         _INITIALIZED.encode() in fields, None if level is None else level.decode(), uris,
                         int(fields.get(_REVISION.encode(), 0)), known.get("sse", False))


# Idempotent tools' entries (`_runtime/idempotency.py`): a key per entry holding 'r:' and its claimant's token
# while the tool runs (expiring after the lease unless renewed), then 'd:' and the result (expiring after the
# window); a sorted set of the stored entries scored by expiry bounds their count across the fleet.
_ONCE_CLAIM = """
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, 2) == 'd:' then return v end
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

# KEYS: the entry, the index. ARGV: the claimant's token, 'd:' and the result ('': release), the window in ms,
# the most results kept. Returns 0 when the claim was lost (its lease lapsed and another took it), 2 when full.
_ONCE_SETTLE = """
local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
  return 1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  redis.call('DEL', KEYS[1])
  return 2
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', window)
redis.call('ZADD', KEYS[2], now + window, KEYS[1])
if redis.call('PTTL', KEYS[2]) < window then redis.call('PEXPIRE', KEYS[2], window) end
return 1
"""

_ONCE_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
"""

_ONCE_RETRY_SECONDS = 1.0  # while Redis is away, how long entries are kept per process before it is tried again


class RedisOnceStore:
    """Idempotent tools' entries shared by every process (`OnceStore`): a claim is a key set if absent, with a
    lease its claimant renews while the tool runs, so a dead process's claim lapses and a waiter takes it over;
    waiters poll with back-off. While Redis is unreachable the entries are kept per process (one warning
    line), and Redis is tried again a second later."""

    def __init__(self, state: RedisState) -> None:
        self._state = state
        self._claim = state.client.register_script(_ONCE_CLAIM)
        self._settle = state.client.register_script(_ONCE_SETTLE)
        self._renew = state.client.register_script(_ONCE_RENEW)
        self._index = state.key("once-index")
        self.local = LocalOnceStore()
        self._away_until: float | None = None

    def key(self, entry: str) -> str:
        return self._state.key("once", entry)

    async def claim(self, key: str, limits: IdempotencyLimits) -> bytes | Claim | None:
        if self._away_until is not None:
            now = time.monotonic()
            if now < self._away_until:
                return await self.local.claim(key, limits)
            self._away_until = now + _ONCE_RETRY_SECONDS  # this call tries Redis again; the others meanwhile stay local
        token = "r:" + secrets.token_hex(16)
        try:
            found = await self._claim(keys=[self.key(key)], args=[token, _ms(limits.lease)])
        except (RedisError, OSError) as error:
            if self._away_until is None:
                log.warning("idempotent tools: Redis is unreachable (%s); results are kept per process until it "
                            "returns", error)
            self._away_until = time.monotonic() + _ONCE_RETRY_SECONDS
            return await self.local.claim(key, limits)
        if self._away_until is not None:
            self._away_until = None
            log.warning("idempotent tools: Redis is back; results are shared by every process again")
        if isinstance(found, bytes):
            return found[2:]
        return _RedisClaim(self, key, token, limits) if found == 1 else None

    async def wait(self, key: str, attempt: int) -> None:
        if self._away_until is not None:
            await self.local.wait(key, attempt)
        else:
            await anyio.sleep(min(0.01 * 2 ** attempt, 0.25))

    async def keep(self, key: str, token: str, lease: float) -> None:
        """Renew a claim while its tool runs (cancelled when it settles); stop once it is lost."""
        while True:
            await asyncio.sleep(lease / 3)
            try:
                if not await self._renew(keys=[self.key(key)], args=[token, _ms(lease)]):
                    return
            except (RedisError, OSError):
                pass  # the claim lapses after its lease if Redis stays away

    async def settle(self, key: str, token: str, data: bytes | None, window: float, limits: IdempotencyLimits) -> None:
        stored = b"" if data is None else b"d:" + data
        try:
            done = await self._settle(keys=[self.key(key), self._index],
                                      args=[token, stored, _ms(window), limits.max_entries])
        except (RedisError, OSError) as error:
            log.warning("idempotent tools: Redis is unreachable (%s); a result was returned and not stored", error)
            return
        if done == 2:
            log.warning("idempotent tools: Redis holds max_entries (%d) results already; a result was returned and "
                        "not stored", limits.max_entries)


class _RedisClaim:
    __slots__ = ("_store", "_key", "_token", "_limits", "_renewer")

    def __init__(self, store: RedisOnceStore, key: str, token: str, limits: IdempotencyLimits) -> None:
        self._store, self._key, self._token, self._limits = store, key, token, limits
        self._renewer = asyncio.get_running_loop().create_task(store.keep(key, token, limits.lease))

    async def settle(self, data: bytes | None, window: float) -> None:
        self._renewer.cancel()
        with anyio.CancelScope(shield=True):  # a cancelled call still settles (bounded by the command timeout)
            await self._store.settle(self._key, self._token, data, window, self._limits)


# Keep a cut result's rest, dropping expired rests, then the oldest, until the bounds hold. KEYS: the index
# (a sorted set of rest ids scored by expiry), their sizes (a hash; field '' holds the total), the rest's hash.
# ARGV: the id, the TTL in ms, the most rests, the most bytes, its size, its owner, the key prefix of rests'
# hashes, then its pages (page 2 first).
_RESULT_PUT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local size = tonumber(ARGV[5])
local total = tonumber(redis.call('HGET', KEYS[2], '') or '0')
local function drop(id)
  total = total - tonumber(redis.call('HGET', KEYS[2], id) or '0')
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[1], id)
  redis.call('DEL', ARGV[7] .. id)
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do drop(id) end
while redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) or total + size > tonumber(ARGV[4]) do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #oldest == 0 then break end
  drop(oldest[1])
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], size, '', total + size)
redis.call('HSET', KEYS[3], 'o', ARGV[6])
for i = 8, #ARGV do redis.call('HSET', KEYS[3], tostring(i - 6), ARGV[i]) end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
return 1
"""


class RedisResultStore:
    """A `ResultStore` on Redis: any process serves the pages of a result another one cut."""

    def __init__(self, state: RedisState) -> None:
        self._state = state
        self._put = state.client.register_script(_RESULT_PUT)

    async def put(self, rest_id: str, owner: str, pages: list[bytes], limits: ResultStoreLimits) -> bool:
        size = sum(map(len, pages))
        if size > limits.max_bytes:
            return False
        keys = [self._state.key("results"), self._state.key("result-sizes"), self._state.key("result", rest_id)]
        args = [rest_id, _ms(limits.ttl), limits.max_entries, limits.max_bytes, size, owner,
                self._state.key("result", ""), *pages]
        with _reaching("keeping the rest of a result"):
            await self._put(keys=keys, args=args)
        return True

    async def page(self, rest_id: str, number: int) -> tuple[str, bytes] | None:
        with _reaching("reading the rest of a result"):
            owner, page = await self._state.client.hmget(self._state.key("result", rest_id), "o", str(number))
        return None if owner is None or page is None else (owner.decode(), page)
