"""The per-request HTTP writer: one JSON body, or an SSE stream once a notification comes first.

Theory of operation (as h11 does for its connection states). A writer is in
exactly one `WriterState`, and each thing that can happen to it is a
`WriterEvent`; `TRANSITIONS` maps (state, event) to the next state, and a pair
missing from it is a programming error (`WriterError`). A writer starts
DIRECT. A response there is sent as one `application/json` body with
Content-Length and the status its error code implies (CLOSED). A notification
there sends `200 text/event-stream` headers (chunked, `Cache-Control:
no-cache`, `X-Accel-Buffering: no`) and the notification as the first event
(STREAMING). While STREAMING, each notification is one event, idle streams get
a `:` comment every `keepalive` seconds, and the response is the last event
followed by the end of the chunked body (CLOSED). In CLOSED every send is an
error. A legacy session's standalone GET stream has no response: OPEN sends
the SSE headers at once (STREAMING) and FINISH ends the body (CLOSED). ABORT
comes from the connection when the peer left, or when the call ended without
its response: from then on sends are dropped silently (the call is being
cancelled), and a CLOSED writer stays CLOSED. A JSON-only writer (`dropped`
given: `--json-response`) never streams: a notification before the response
is handed to `dropped` to be counted, and the writer stays DIRECT.

The writer does no I/O of its own: it hands h11 events to its `Link` (the
connection) and gets everything else it needs passed in.
"""

from __future__ import annotations

import enum
from http import HTTPStatus
from typing import Any, Callable, Protocol

import h11
import orjson

from mcpcore._wire.jsonrpc import RATE_LIMITED
from mcpcore._wire.protocol import http_status

from .sse import sse_comment, sse_event, sse_priming

JSON_HEADERS = [(b"content-type", b"application/json")]
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class WriterState(enum.Enum):
    DIRECT = "direct"  # nothing sent yet
    STREAMING = "streaming"  # SSE headers and at least one event sent
    CLOSED = "closed"  # the response was sent
    ABORTED = "aborted"  # the peer left or the call ended unanswered; sends are dropped


class WriterEvent(enum.Enum):
    OPEN = "open"
    NOTIFY = "notify"
    RESPOND = "respond"
    FINISH = "finish"
    ABORT = "abort"


S, E = WriterState, WriterEvent
TRANSITIONS: dict[tuple[WriterState, WriterEvent], WriterState] = {
    (S.DIRECT, E.OPEN): S.STREAMING,
    (S.DIRECT, E.NOTIFY): S.STREAMING,
    (S.DIRECT, E.RESPOND): S.CLOSED,
    (S.DIRECT, E.ABORT): S.ABORTED,
    (S.STREAMING, E.NOTIFY): S.STREAMING,
    (S.STREAMING, E.RESPOND): S.CLOSED,
    (S.STREAMING, E.FINISH): S.CLOSED,
    (S.STREAMING, E.ABORT): S.ABORTED,
    (S.CLOSED, E.ABORT): S.CLOSED,
    (S.ABORTED, E.NOTIFY): S.ABORTED,
    (S.ABORTED, E.OPEN): S.ABORTED,
    (S.ABORTED, E.RESPOND): S.ABORTED,
    (S.ABORTED, E.FINISH): S.ABORTED,
    (S.ABORTED, E.ABORT): S.ABORTED,
}
del S, E


class WriterError(RuntimeError):
    """A send the writer's state does not allow (a bug in the caller)."""


HeadHeaders = Callable[[], "list[tuple[bytes, bytes]]"]


class Timer(Protocol):
    def cancel(self) -> None: ...


class Link(Protocol):
    """What a writer needs from its connection."""

    @property
    def gone(self) -> bool:
        """The peer closed the connection."""

    def head(self, status: int, headers: list[tuple[bytes, bytes]]) -> h11.Response:
        """The response head with what the connection adds: `Connection: close` on its last response
        (the server is shutting down), the CORS headers (`response_head` builds it)."""

    def send(self, *events: Any) -> None: ...

    def whole(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """A whole response with a Content-Length body, its head as `head` makes it."""

    async def drain(self) -> None: ...

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer: ...


def response_head(status: int, headers: list[tuple[bytes, bytes]], last: bool, built: bool = False) -> h11.Response:
    """A response head, with `Connection: close` when it is the connection's last.

    `built`: every header is one this module builds (constants, decimal lengths, session ids
    mcpcore mints), so h11's per-header regex checks are skipped (`_parsed`, as h11 does for
    heads it parsed itself); anything holding outside text must leave it False.
    """
    if last:
        headers = headers + [(b"connection", b"close")]
    return h11.Response(status_code=status, headers=headers, reason=REASONS.get(status, b""), _parsed=built)


REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}


def retry_after(message: bytes) -> bytes:
    """The `Retry-After` value a rate-limit error's `data.retryAfter` asks for (1 s if unreadable)."""
    data = orjson.loads(message).get("error", {}).get("data")
    seconds = data.get("retryAfter") if isinstance(data, dict) else None
    return str(seconds if isinstance(seconds, int) and not isinstance(seconds, bool) and seconds > 0 else 1).encode()


class HttpWriter:
    """One request's writer (see the module docstring for its states)."""

    def __init__(self, link: Link, keepalive: float, head_headers: HeadHeaders | None = None,
                 dropped: Callable[[], None] | None = None) -> None:
        self.link = link
        self.keepalive = keepalive
        self.head_headers = head_headers  # extra response headers, read when the head is sent
        self.dropped = dropped  # JSON only: told of each notification not sent
        self.state = WriterState.DIRECT
        self._last_write = 0.0
        self._ticker: Timer | None = None

    @property
    def responded(self) -> bool:
        """Whether the whole response was handed to the connection."""
        return self.state is WriterState.CLOSED

    def _advance(self, event: WriterEvent) -> WriterState:
        """Take `event`; return the state it was taken in."""
        before = self.state
        if before is not WriterState.ABORTED and event is not WriterEvent.ABORT and self.link.gone:
            before = self.abort()  # the peer left: the call is being cancelled
        after = TRANSITIONS.get((before, event))
        if after is None:
            raise WriterError(f"cannot {event.value} a writer in state {before.value}")
        self.state = after
        return before

    async def open(self, first: bytes = b"") -> None:
        """Send the SSE headers now (a stream that may stay silent for a while), and `first` (an event, framed)."""
        if self._advance(WriterEvent.OPEN) is not WriterState.ABORTED:
            await self._write([self._stream_head(), h11.Data(data=first)] if first else [self._stream_head()])

    async def prime(self, event_id: str, retry_ms: int) -> None:
        """Open a resumable stream: the SSE headers and a priming event (an id, no data, `retry:`)."""
        if self._advance(WriterEvent.OPEN) is not WriterState.ABORTED:
            await self._write([self._stream_head(), h11.Data(data=sse_priming(event_id, retry_ms))])

    async def notify(self, message: bytes, event_id: str | None = None) -> None:
        if self.dropped is not None and self.state is WriterState.DIRECT:
            self.dropped()
            return
        before = self._advance(WriterEvent.NOTIFY)
        if before is WriterState.ABORTED:
            return
        events: list[Any] = [self._stream_head()] if before is WriterState.DIRECT else []
        events.append(h11.Data(data=sse_event(message, event_id)))
        await self._write(events)

    async def replay(self, events: list[tuple[bytes, str]], final: tuple[bytes, str] | None) -> None:
        """Send stored events (opening the stream if need be) and, if the response is among them, end it.

        Everything goes to the connection before the first await, so live events sent after
        this call starts come after the replayed ones.
        """
        before = self._advance(WriterEvent.OPEN if self.state is WriterState.DIRECT else WriterEvent.NOTIFY)
        if before is WriterState.ABORTED:
            return
        out: list[Any] = [self._stream_head()] if before is WriterState.DIRECT else []
        out += [h11.Data(data=sse_event(message, event_id)) for message, event_id in events]
        if final is not None:
            self.state = TRANSITIONS[(self.state, WriterEvent.RESPOND)]
            self._stop_ticking()
            out += [h11.Data(data=sse_event(*final)), h11.EndOfMessage()]
        await self._write(out)

    async def finish(self) -> None:
        """End a stream that carries no response (a standalone GET stream)."""
        if self._advance(WriterEvent.FINISH) is not WriterState.ABORTED:
            self._stop_ticking()
            await self._write([h11.EndOfMessage()])

    def _head(self, status: int, headers: list[tuple[bytes, bytes]]) -> h11.Response:
        if self.head_headers is not None:
            headers = headers + self.head_headers()
        return self.link.head(status, headers)

    def _stream_head(self) -> h11.Response:
        self._ticker = self.link.call_later(self.keepalive, self._tick)
        return self._head(200, SSE_HEADERS)

    async def respond(self, message: bytes, error_code: int | None = None, event_id: str | None = None) -> None:
        before = self._advance(WriterEvent.RESPOND)
        if before is WriterState.ABORTED:
            return
        self._stop_ticking()
        if before is WriterState.DIRECT:  # one JSON body: the connection frames it whole
            headers = JSON_HEADERS + [(b"content-length", b"%d" % len(message))]
            if error_code == RATE_LIMITED:
                headers.append((b"retry-after", retry_after(message)))
            if self.head_headers is not None:
                headers += self.head_headers()
            self.link.whole(http_status(error_code), headers, message)
            self._last_write = self.link.time()
            await self.link.drain()
            return
        await self._write([h11.Data(data=sse_event(message, event_id)), h11.EndOfMessage()])

    def abort(self) -> WriterState:
        """The peer left, or the call ended without a response: drop whatever comes later."""
        self.state = TRANSITIONS[(self.state, WriterEvent.ABORT)]
        self._stop_ticking()
        return self.state

    async def _write(self, events: list[Any]) -> None:
        self.link.send(*events)
        self._last_write = self.link.time()
        await self.link.drain()

    def _stop_ticking(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None

    def _tick(self) -> None:
        """A comment line on an idle SSE stream so proxies keep it open."""
        if self.state is not WriterState.STREAMING or self.link.gone:
            self._ticker = None
            return
        idle = self.link.time() - self._last_write
        if idle >= self.keepalive * 0.99:
            self.link.send(h11.Data(data=sse_comment()))
            self._last_write = self.link.time()
            idle = 0.0
        self._ticker = self.link.call_later(max(self.keepalive - idle, 0.001), self._tick)
