"""Resumable SSE streams for 2025-11-25 sessions: event ids, a bounded store, `Last-Event-ID`.

A POST of such a session that streams (a notification before its result, or
`ctx.close_stream()`) opens with a priming event (an id, no data, `retry:`),
and every message on it is stored under an id `<stream>.<n>` in the session's
`StreamStore`; a call that streams nothing is answered with one JSON body, so
large results never meet a client's limit on one SSE event. A handler may end the HTTP
stream before its result (`ctx.close_stream()`): the call goes on, its
messages are only stored, and the client reconnects with `GET` and
`Last-Event-ID`, gets the stored messages after that id, then the rest as they
come, ending with the response.

What a session holds is bounded by what can still be resumed. A stream enters
the store's table only when it is primed (before that no event id was sent, so
nobody can resume it), and leaves it once it has ended (answered, or its call
ended unanswered) and none of its events is stored any more; an ended stream
lets go of its connection at once. The store keeps the most recent events of a
session, at most `max_events` of them and `max_bytes` of message bytes (the
newest event is kept whatever its size), each as an exact-size copy; an id
older than what is kept cannot be resumed (404). So a request's cost never
depends on how many came before it in its session.

Where processes share sessions (`SessionStore`), every event is also kept in the
shared store before it is sent, under an id that starts with a tag of the process,
so a `GET` with `Last-Event-ID` reaching another process is served from there
(`replay_kept`): the kept events after that id, then the rest as they are kept,
until the response.
"""

from __future__ import annotations

import collections
import itertools
import logging
from typing import Awaitable, Callable

import anyio

from mcpcore._runtime.defaults import HTTP_SESSION_EVENT_BYTES, HTTP_SESSION_EVENTS
from mcpcore._runtime.session import Session, SessionStore, StoredEvent
from mcpcore._wire.jsonrpc import McpError

from .writer import HttpWriter

log = logging.getLogger("mcpcore.transports.resume")

RETRY_MS = 100  # the reconnect delay the priming event asks for
MAX_EVENTS = HTTP_SESSION_EVENTS  # stored events per session
MAX_EVENT_BYTES = HTTP_SESSION_EVENT_BYTES  # stored message bytes per session (and the newest event)
Keep = Callable[[StoredEvent], Awaitable[None]]  # keeps an event in the shared store


class _Ended:
    """That a stream is over: set by every call's end, waited on only by a resumption, so the
    event loop's event behind it is made only when someone waits."""

    __slots__ = ("_over", "_event")

    def __init__(self) -> None:
        self._over = False
        self._event: anyio.Event | None = None

    def is_set(self) -> bool:
        return self._over

    def set(self) -> None:
        self._over = True
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        if not self._over:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()


class ResumableStream:
    """One call's output on a 2025-11-25 session: stored, and sent to whichever connection holds it."""

    def __init__(self, store: StreamStore, stream_id: str, sink: HttpWriter, close: Callable[[], None]) -> None:
        self.store = store
        self.stream_id = stream_id
        self.sink: HttpWriter | None = sink
        self._close_connection: Callable[[], None] | None = close
        self.final: tuple[bytes, str] | None = None  # the response, once recorded
        self.ended = _Ended()
        self.last = 0  # the number of its newest event
        self.stored = 0  # how many of its events the store holds (always its newest ones)
        self._primed = False

    def _record(self, message: bytes | None) -> str:
        self.last += 1
        event_id = f"{self.stream_id}.{self.last}"
        if message is not None:
            self.store.record(self, event_id, message)
        return event_id

    async def _kept(self, event_id: str, message: bytes, last: bool) -> HttpWriter | None:
        """Keep an event in the shared store, if there is one; then the connection to send it to: the one
        holding the stream when it was recorded, unless a resumption took the stream meanwhile (its
        backlog had the event)."""
        sink = self.sink
        if self.store.shared is not None:
            await self.store.keep((event_id, message, last))
        return sink if sink is self.sink else None

    async def _prime(self) -> None:
        """The first output opens the stream with its priming event (from then on it can be resumed)."""
        if not self._primed:
            self._primed = True
            self.store.streams[self.stream_id] = self
            event_id = self._record(None)
            sink = await self._kept(event_id, b"", False)
            if sink is not None:
                await sink.prime(event_id, RETRY_MS)

    async def notify(self, message: bytes) -> None:
        await self._prime()
        message = _exact(message)
        event_id = self._record(message)
        sink = await self._kept(event_id, message, False)
        if sink is not None:
            await sink.notify(message, event_id)

    async def respond(self, message: bytes, error_code: int | None = None) -> None:
        if not self._primed:  # nothing streamed: one plain JSON reply, as on any other wire
            sink = self.sink
            self.end()
            if sink is not None:
                await sink.respond(message, error_code)
            return
        message = _exact(message)
        event_id = self._record(message)
        self.final = (message, event_id)  # a resumption from now on ends with it
        sink = await self._kept(event_id, message, True)
        self.end()
        if sink is not None:
            await sink.respond(message, error_code, event_id)

    async def close_stream(self) -> None:
        """End the HTTP stream now (the client resumes with GET + Last-Event-ID); the call goes on."""
        await self._prime()
        sink, self.sink = self.sink, None
        if sink is not None:
            await sink.finish()
            if self._close_connection is not None:
                self._close_connection()

    def end(self) -> None:
        """The call is over (answered, or ended unanswered): let go of its connection, and leave
        the store's table once nothing of it can be resumed."""
        if self.ended.is_set():
            return
        self.ended.set()
        self.sink = self._close_connection = None
        self.store.release(self)

    async def resume(self, after: str, sink: HttpWriter) -> None:
        """Send what was stored after the event `after` to `sink`, then the rest as it comes."""
        backlog = self.store.after(self, after)
        final = None
        if self.final is not None:  # answered: the response ends the backlog
            if backlog and backlog[-1][1] == self.final[1]:
                final = backlog.pop()
        elif not self.ended.is_set():
            self.sink = sink  # live from here on; the backlog still goes out first
        await sink.replay(backlog, final)
        await self.ended.wait()
        if not sink.responded:
            await sink.finish()  # the client already had the response, or the call ended unanswered


class StreamStore:
    """The recent events of one session, and its streams that can still be resumed, by id."""

    def __init__(self, max_events: int = MAX_EVENTS, max_bytes: int = MAX_EVENT_BYTES, prefix: str = "",
                 shared: Keep | None = None) -> None:
        self._events: collections.deque[tuple[ResumableStream, str, bytes]] = collections.deque()
        self._max_events = max_events
        self._max_bytes = max_bytes
        self.size = 0  # bytes of the stored messages
        self._ids = itertools.count(1)
        self._prefix = prefix  # names the process, when several serve one session
        self.shared = shared
        self.streams: dict[str, ResumableStream] = {}  # primed, and not yet past resuming

    def open(self, sink: HttpWriter, close: Callable[[], None]) -> ResumableStream:
        return ResumableStream(self, f"{self._prefix}s{next(self._ids)}", sink, close)

    def record(self, stream: ResumableStream, event_id: str, message: bytes) -> None:
        """Store an event, letting the oldest go while the store holds too many or too much."""
        self._events.append((stream, event_id, message))
        self.size += len(message)
        stream.stored += 1
        while len(self._events) > 1 and (len(self._events) > self._max_events or self.size > self._max_bytes):
            old, _, dropped = self._events.popleft()
            self.size -= len(dropped)
            old.stored -= 1
            if old.ended.is_set():
                self.release(old)

    def release(self, stream: ResumableStream) -> None:
        """An ended stream leaves the table once none of its events is stored."""
        if stream.stored == 0:
            self.streams.pop(stream.stream_id, None)

    async def keep(self, event: StoredEvent) -> None:
        """Keep an event in the shared store too (before it is sent: the client may resume anywhere)."""
        try:
            await self.shared(event)  # type: ignore[misc]
        except McpError as unreachable:  # the call goes on; only a resumption elsewhere misses the event
            log.warning("event %s is not in the shared store, so only this process can replay it: %s",
                        event[0], unreachable.message)

    def after(self, stream: ResumableStream, event_id: str) -> list[tuple[bytes, str]]:
        """The stored events of `stream` that came after `event_id`, oldest first."""
        number = _number(event_id)
        return [(message, eid) for owner, eid, message in self._events if owner is stream and _number(eid) > number]

    def find(self, event_id: str) -> ResumableStream | None:
        """The stream an event id belongs to, if it can still be resumed from there."""
        stream = self.streams.get(_stream_of(event_id))
        if stream is None:
            return None
        oldest = stream.last - stream.stored + 1  # its stored events are its newest ones
        return stream if _resumable(_number(event_id), oldest, stream.last) else None


def _exact(message: bytes) -> bytes:
    """An exact-size copy of a message kept for resumption: the serializer's buffer is larger (about 4 KiB)."""
    return bytes(memoryview(message))


def kept_after(kept: list[StoredEvent], event_id: str) -> list[StoredEvent] | None:
    """The kept events of `event_id`'s stream that came after it; None when the stream cannot be
    resumed from there (events after it already left the store, or it was never sent)."""
    stream_id, number = _stream_of(event_id), _number(event_id)
    mine = [event for event in kept if _stream_of(event[0]) == stream_id]
    numbers = [_number(kept_id) for kept_id, _, _ in mine]
    if not numbers or not _resumable(number, min(numbers), max(numbers)):
        return None
    return [event for event in mine if _number(event[0]) > number]


async def replay_kept(store: SessionStore, session: Session, event_id: str, backlog: list[StoredEvent], cursor: str,
                      sink: HttpWriter) -> None:
    """Send the rest of a stream another process serves, from the shared store: `backlog`, then the
    events kept after `cursor` as they come, until its response (or the session's end)."""
    stream_id = _stream_of(event_id)
    events, opened = backlog, False
    while True:
        final = next(((message, kept_id) for kept_id, message, last in events if last), None)
        sent = [(message, kept_id) for kept_id, message, last in events if message and not last]
        if sent or final is not None or not opened:
            await sink.replay(sent, final)
            opened = True
        if final is not None:
            return
        if session.closed:
            await sink.finish()
            return
        try:
            batch, cursor = await store.next_events(session.id, cursor)  # type: ignore[arg-type]
        except McpError as unreachable:  # the stream breaks off; the client may resume again
            log.warning("a resumed stream of session events ends early: %s", unreachable.message)
            return
        events = [event for event in batch if _stream_of(event[0]) == stream_id]


def _stream_of(event_id: str) -> str:
    return event_id.rpartition(".")[0]


def _resumable(number: int, oldest: int, last: int) -> bool:
    """Whether a stream can go on after its event `number`: every event after it is still stored
    (the oldest stored comes right after it or earlier), and it was sent."""
    return oldest - 1 <= number <= last


def _number(event_id: str) -> int:
    tail = event_id.rpartition(".")[2]
    return int(tail) if tail.isdigit() else -1
