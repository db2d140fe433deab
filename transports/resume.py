"""Resumable SSE streams for 2025-11-25 sessions: event ids, a bounded store, `Last-Event-ID`.

A POST of such a session that streams (a notification before its result, or
`ctx.close_stream()`) opens with a priming event (an id, no data, `retry:`),
and every message on it is stored under an id `<stream>.<n>` in the session's
`StreamStore`; a call that streams nothing is answered with one JSON body, so
large results never meet a client's limit on one SSE event. A handler may end the HTTP
stream before its result (`ctx.close_stream()`): the call goes on, its
messages are only stored, and the client reconnects with `GET` and
`Last-Event-ID`, gets the stored messages after that id, then the rest as they
come, ending with the response. The store keeps the most recent
`max_events` events of a session; an id older than that cannot be resumed (404).
The store is the process's own: where processes share sessions, its event ids
start with a tag of the process, and one from another process is refused (404).
"""

from __future__ import annotations

import collections
import itertools
from typing import Callable

import anyio

from .httpwriter import HttpWriter

RETRY_MS = 100  # the reconnect delay the priming event asks for
MAX_EVENTS = 256  # stored events per session


class ResumableStream:
    """One call's output on a 2025-11-25 session: stored, and sent to whichever connection holds it."""

    def __init__(self, store: StreamStore, stream_id: str, sink: HttpWriter, close: Callable[[], None]) -> None:
        self.store = store
        self.stream_id = stream_id
        self.sink: HttpWriter | None = sink
        self._close_connection = close
        self.final: tuple[bytes, str] | None = None  # the response, once sent
        self.ended = anyio.Event()
        self.last = 0  # the number of its newest event
        self._primed = False

    def _record(self, message: bytes | None) -> str:
        self.last += 1
        event_id = f"{self.stream_id}.{self.last}"
        if message is not None:
            self.store.record(self.stream_id, event_id, message)
        return event_id

    async def _prime(self) -> None:
        """The first output opens the stream with its priming event."""
        if not self._primed:
            self._primed = True
            if self.sink is not None:
                await self.sink.prime(self._record(None), RETRY_MS)

    async def notify(self, message: bytes) -> None:
        await self._prime()
        event_id = self._record(message)
        if self.sink is not None:
            await self.sink.notify(message, event_id)

    async def respond(self, message: bytes, error_code: int | None = None) -> None:
        if not self._primed:  # nothing streamed: one plain JSON reply, as on any other wire
            self.ended.set()
            if self.sink is not None:
                await self.sink.respond(message, error_code)
            return
        event_id = self._record(message)
        self.final = (message, event_id)
        self.ended.set()
        if self.sink is not None:
            await self.sink.respond(message, error_code, event_id)

    async def close_stream(self) -> None:
        """End the HTTP stream now (the client resumes with GET + Last-Event-ID); the call goes on."""
        await self._prime()
        sink, self.sink = self.sink, None
        if sink is not None:
            await sink.finish()
            self._close_connection()

    async def resume(self, after: str, sink: HttpWriter) -> None:
        """Send what was stored after the event `after` to `sink`, then the rest as it comes."""
        backlog = [(message, event_id) for event_id, message in self.store.after(self.stream_id, after)]
        final = None
        if self.final is None:
            self.sink = sink  # live from here on; the backlog still goes out first
        elif backlog and backlog[-1][1] == self.final[1]:
            final = backlog.pop()
        elif after != self.final[1]:
            final = self.final  # the response left the store; it is kept apart
        await sink.replay(backlog, final)
        await self.ended.wait()
        if not sink.responded:
            await sink.finish()  # the client already had the response


class StreamStore:
    """The recent events of one session, and its resumable streams by id."""

    def __init__(self, max_events: int = MAX_EVENTS, prefix: str = "") -> None:
        self._events: collections.deque[tuple[str, str, bytes]] = collections.deque(maxlen=max_events)
        self._ids = itertools.count(1)
        self._prefix = prefix  # names the process, when several serve one session
        self.streams: dict[str, ResumableStream] = {}

    def open(self, sink: HttpWriter, close: Callable[[], None]) -> ResumableStream:
        stored = {sid for sid, _, _ in self._events}
        for stream_id, old in list(self.streams.items()):  # ended, and nothing left to replay
            if old.final is not None and stream_id not in stored:
                del self.streams[stream_id]
        stream = ResumableStream(self, f"{self._prefix}s{next(self._ids)}", sink, close)
        self.streams[stream.stream_id] = stream
        return stream

    def record(self, stream_id: str, event_id: str, message: bytes) -> None:
        self._events.append((stream_id, event_id, message))

    def after(self, stream_id: str, event_id: str) -> list[tuple[str, bytes]]:
        """The stored events of `stream_id` that came after `event_id`, oldest first."""
        number = _number(event_id)
        return [(eid, message) for sid, eid, message in self._events if sid == stream_id and _number(eid) > number]

    def find(self, event_id: str) -> ResumableStream | None:
        """The stream an event id belongs to, if it can still be resumed from there."""
        stream = self.streams.get(event_id.rpartition(".")[0])
        if stream is None:
            return None
        number = _number(event_id)
        oldest = min((_number(eid) for sid, eid, _ in self._events if sid == stream.stream_id), default=stream.last + 1)
        if number < oldest - 1 or number > stream.last:
            return None  # events after it were already dropped, or it was never sent
        return stream



def _number(event_id: str) -> int:
    tail = event_id.rpartition(".")[2]
    return int(tail) if tail.isdigit() else -1
