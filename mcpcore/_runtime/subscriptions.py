"""`subscriptions/listen`: the bus between change announcers and open subscriptions.

A `Bus` carries `Change`s (a list changed, a resource was updated) to every
attached `Subscriber`. Each subscriber has a mailbox that coalesces: at most
one pending notification per kind (and per subscribed URI), so it is bounded
by its filter, a slow reader never blocks the announcer or other subscribers,
and nothing it asked for is lost — repeats merge into one notification. A
change whose notification carries current state (a task's) is described when
it is sent, by the describer its kind registered, so coalesced repeats send the
latest state once.
`LocalBus` is the in-process bus; one shared by several processes would
implement the same three methods over a broker (see ADRS.md). `Subscriptions`
is one server's registry of open subscriptions and runs `subscriptions/listen`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import AbstractSet, Any, Awaitable, Callable, Iterator, Protocol

import anyio

from .._wire.jsonrpc import INVALID_REQUEST, McpError, invalid_params

log = logging.getLogger("mcpcore.subscriptions")

Send = Callable[[str, dict[str, Any]], Awaitable[None]]
TOOLS, PROMPTS, RESOURCES, RESOURCE = "toolsListChanged", "promptsListChanged", "resourcesListChanged", "resource"
TASK = "task"  # a task's status changed (the Tasks extension): `uri` is its id
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
METHODS = {
    TOOLS: "notifications/tools/list_changed",
    PROMPTS: "notifications/prompts/list_changed",
    RESOURCES: "notifications/resources/list_changed",
    RESOURCE: "notifications/resources/updated",
    TASK: "notifications/tasks",
}
Describe = Callable[[str], Awaitable["dict[str, Any] | None"]]  # a change's subject → its notification's params; None: gone


@dataclass(frozen=True)
class Change:
    """Something subscribers may want to hear about; `uri` only for resource updates."""

    kind: str
    uri: str | None = None


@dataclass(frozen=True)
class Filter:
    """What one subscription honours (the acknowledged filter)."""

    kinds: frozenset[str]
    uris: AbstractSet[str]  # a 2025-era session's own set, which it changes in place (a subscribe is O(1))
    task_ids: frozenset[str] = frozenset()

    @classmethod
    def honoured(cls, wanted: Any, offered: dict[str, bool], max_uris: int, task_ids: frozenset[str] = frozenset()) -> "Filter":
        """A requested filter, checked (-32602), limited to the kinds the server offers."""
        if not isinstance(wanted, dict):
            raise invalid_params('subscriptions/listen needs a "notifications" filter object')
        kinds = set()
        for kind, available in offered.items():
            flag = wanted.get(kind, False)
            if not isinstance(flag, bool):
                raise invalid_params(f"notifications.{kind} must be a boolean")
            if flag and available:
                kinds.add(kind)
        uris = wanted.get("resourceSubscriptions", [])
        if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
            raise invalid_params("notifications.resourceSubscriptions must be a list of URI strings")
        if len(uris) > max_uris:
            raise invalid_params(f"A subscription may follow at most {max_uris} resource URIs")
        return cls(frozenset(kinds), frozenset(uris) if offered.get(RESOURCES) else frozenset(), task_ids)

    def wants(self, change: Change) -> bool:
        if change.kind == RESOURCE:
            return change.uri in self.uris
        if change.kind == TASK:
            return change.uri in self.task_ids
        return change.kind in self.kinds

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {kind: True for kind in (TOOLS, PROMPTS, RESOURCES) if kind in self.kinds}
        if self.uris:
            wire["resourceSubscriptions"] = sorted(self.uris)
        if self.task_ids:
            wire["taskIds"] = sorted(self.task_ids)
        return wire


def deadline(lifetime: float | None) -> float:
    """When (anyio's clock) a stream that may last `lifetime` more seconds ends: a stream outlives
    no token that allowed it (`AccessToken.lifetime`); None: it lasts until closed."""
    return math.inf if lifetime is None else anyio.current_time() + lifetime


class Subscriber:
    """One open subscription's coalescing mailbox."""

    def __init__(self, honoured: Filter) -> None:
        self.filter = honoured
        self._pending: dict[Change, None] = {}  # insertion-ordered set
        self._wake = anyio.Event()
        self.closed = False

    def offer(self, change: Change) -> None:
        """Queue a change if wanted; never blocks (repeats coalesce)."""
        if self.filter.wants(change):
            self._pending[change] = None
            self._wake.set()

    def followed(self) -> Iterator[Change]:
        """A change for each thing it follows: every kind, URI and task."""
        yield from (Change(kind) for kind in self.filter.kinds)
        yield from (Change(RESOURCE, uri) for uri in self.filter.uris)
        yield from (Change(TASK, task_id) for task_id in self.filter.task_ids)

    def resync(self) -> None:
        """Queue a notification for everything it follows (changes may have been missed: clients re-read)."""
        for change in self.followed():
            self.offer(change)

    def close(self) -> None:
        """End the subscription gracefully: `next` returns None."""
        self.closed = True
        self._wake.set()

    async def forward(self, subscription_id: Any, send: Send, describers: dict[str, Describe], until: float = math.inf) -> None:
        """Acknowledge, then send each change tagged with the subscription id until closed or `until`."""
        tag = {SUBSCRIPTION_ID: subscription_id}
        await send("notifications/subscriptions/acknowledged", {"_meta": tag, "notifications": self.filter.to_wire()})
        while (changes := await self.next(until)) is not None:
            for change in changes:
                params: dict[str, Any] = {"_meta": tag}
                describe = describers.get(change.kind)
                if describe is not None:
                    try:
                        described = await describe(change.uri or "")
                    except McpError as error:  # a shared store briefly away: one notification lost, not the stream
                        log.warning("a %s notification was not sent: %s", change.kind, error.message)
                        continue
                    if described is None:
                        continue
                    params.update(described)
                elif change.uri is not None:
                    params["uri"] = change.uri
                await send(METHODS[change.kind], params)

    async def next(self, until: float = math.inf) -> list[Change] | None:
        """The pending changes, oldest first; None once closed, or once `until` (anyio's clock) has come:
        a stream's reader stops there (its token expired) while the mailbox may serve another."""
        while not self._pending and not self.closed and anyio.current_time() < until:
            self._wake = anyio.Event()
            with anyio.move_on_at(until):
                await self._wake.wait()
        if self.closed or anyio.current_time() >= until:
            return None
        changes = list(self._pending)
        self._pending.clear()
        return changes


class Bus(Protocol):
    """Carries changes from announcers to subscribers (anything with `offer(change)` and `resync()`)."""

    def attach(self, subscriber: Subscriber) -> None: ...

    def detach(self, subscriber: Subscriber) -> None: ...

    def publish(self, change: Change) -> None: ...


class LocalBus:
    """The in-process bus. `publish` is safe from the event loop and from worker threads."""

    def __init__(self) -> None:
        self.subscribers: set[Subscriber] = set()

    def attach(self, subscriber: Subscriber) -> None:
        self.subscribers.add(subscriber)

    def detach(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)

    def publish(self, change: Change) -> None:
        if not self.subscribers:
            return  # e.g. registration before the server runs
        on_the_loop(self.deliver, change)

    def deliver(self, change: Change) -> None:
        """Offer a change to every attached subscriber (on the event loop)."""
        for subscriber in list(self.subscribers):
            subscriber.offer(change)


def on_the_loop(work: Callable[..., None], *args: Any) -> None:
    """`work(*args)` on the event loop: at once from the loop, through anyio from a worker thread
    (a sync tool announcing a change, or mounting a server)."""
    try:
        anyio.get_current_task()
    except RuntimeError:
        anyio.from_thread.run_sync(work, *args)
    else:
        work(*args)


class Subscriptions:
    """One server's open subscriptions: the bus they hear changes on, and their caps."""

    def __init__(self, bus: Bus, max_subscriptions: int, max_uris: int) -> None:
        self.bus = bus
        self.max_subscriptions = max_subscriptions
        self.max_uris = max_uris
        self.describers: dict[str, Describe] = {}  # by change kind: notifications that carry current state
        self._open: set[Subscriber] = set()

    def __len__(self) -> int:
        return len(self._open)

    def __iter__(self) -> Iterator[Subscriber]:
        return iter(list(self._open))

    async def listen(
        self, wanted: Any, offered: dict[str, bool], subscription_id: Any, send: Send, task_ids: frozenset[str] = frozenset(),
        lifetime: float | None = None,
    ) -> dict[str, Any]:
        """Serve one `subscriptions/listen` until `close_all`, or for `lifetime` seconds at most (what is
        left of the caller's token: no one hears of changes past the token that allowed it); return its
        `complete` result. `task_ids`: the tasks it may follow (the Tasks extension checked they are the caller's)."""
        until = deadline(lifetime)
        honoured = Filter.honoured(wanted, offered, self.max_uris, task_ids)
        if len(self._open) >= self.max_subscriptions:
            raise McpError(INVALID_REQUEST, f"Too many open subscriptions (limit {self.max_subscriptions}); close one first")
        subscriber = Subscriber(honoured)
        for change in subscriber.followed():  # what carries state (a task) is sent as it is now, right after
            if change.kind in self.describers:  # the acknowledgement: a change made before the listen is not missed
                subscriber.offer(change)
        self._open.add(subscriber)
        self.bus.attach(subscriber)
        try:
            await subscriber.forward(subscription_id, send, self.describers, until)
        finally:
            self.bus.detach(subscriber)
            self._open.discard(subscriber)
        return {"_meta": {SUBSCRIPTION_ID: subscription_id}}

    def close_all(self) -> None:
        """End every open subscription gracefully (each gets its final result)."""
        for subscriber in list(self._open):
            subscriber.close()
