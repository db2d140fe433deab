"""`subscriptions/listen`: the bus between change announcers and open subscriptions.

A `Bus` carries `Change`s (a list changed, a resource was updated) to every
attached `Subscriber`. Each subscriber has a mailbox that coalesces: at most
one pending notification per kind (and per subscribed URI), so it is bounded
by its filter, a slow reader never blocks the announcer or other subscribers,
and nothing it asked for is lost — repeats merge into one notification.
`LocalBus` is the in-process bus; one shared by several processes would
implement the same three methods over a broker (see ADRS.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import anyio

TOOLS, PROMPTS, RESOURCES, RESOURCE = "toolsListChanged", "promptsListChanged", "resourcesListChanged", "resource"
METHODS = {
    TOOLS: "notifications/tools/list_changed",
    PROMPTS: "notifications/prompts/list_changed",
    RESOURCES: "notifications/resources/list_changed",
    RESOURCE: "notifications/resources/updated",
}


@dataclass(frozen=True)
class Change:
    """Something subscribers may want to hear about; `uri` only for resource updates."""

    kind: str
    uri: str | None = None


@dataclass(frozen=True)
class Filter:
    """What one subscription honours (the acknowledged filter)."""

    kinds: frozenset[str]
    uris: frozenset[str]

    def wants(self, change: Change) -> bool:
        if change.kind == RESOURCE:
            return change.uri in self.uris
        return change.kind in self.kinds

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {kind: True for kind in (TOOLS, PROMPTS, RESOURCES) if kind in self.kinds}
        if self.uris:
            wire["resourceSubscriptions"] = sorted(self.uris)
        return wire


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

    def close(self) -> None:
        """End the subscription gracefully: `next` returns None."""
        self.closed = True
        self._wake.set()

    async def next(self) -> list[Change] | None:
        """The pending changes, oldest first; None once closed."""
        while not self._pending and not self.closed:
            self._wake = anyio.Event()
            await self._wake.wait()
        if self.closed:
            return None
        changes = list(self._pending)
        self._pending.clear()
        return changes


class Bus(Protocol):
    """Carries changes from announcers to subscribers."""

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
        try:
            anyio.get_current_task()
        except RuntimeError:  # called from a worker thread: deliver on the event loop
            anyio.from_thread.run_sync(self._deliver, change)
        else:
            self._deliver(change)

    def _deliver(self, change: Change) -> None:
        for subscriber in list(self.subscribers):
            subscriber.offer(change)
