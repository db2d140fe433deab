"""The HTTP writer's state machine (transports/_http/writer.py) against a fake connection, no sockets."""

from __future__ import annotations

import itertools
from typing import Any, Callable

import h11
import pytest

from mcpcore.transports._http.writer import TRANSITIONS, HttpWriter, WriterError, WriterEvent, WriterState, response_head

pytestmark = pytest.mark.anyio

KEEPALIVE = 15.0


class FakeTimer:
    def __init__(self, delay: float, callback: Callable[[], None]) -> None:
        self.delay, self.callback, self.cancelled = delay, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class FakeLink:
    """Records what the writer hands over; the test moves the clock and fires timers."""

    def __init__(self) -> None:
        self.gone = False
        self.added: list[tuple[bytes, bytes]] = []  # what the connection adds to every head
        self.events: list[Any] = []
        self.now = 100.0
        self.timers: list[FakeTimer] = []
        self.drains = 0

    def head(self, status: int, headers: list[tuple[bytes, bytes]]) -> h11.Response:
        return response_head(status, headers + self.added, False, built=True)

    def send(self, *events: Any) -> None:
        self.events.extend(events)

    def whole(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.send(self.head(status, headers), h11.Data(data=body), h11.EndOfMessage())

    async def drain(self) -> None:
        self.drains += 1

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(delay, callback)
        self.timers.append(timer)
        return timer

    def heads(self) -> list[h11.Response]:
        return [e for e in self.events if isinstance(e, h11.Response)]

    def data(self) -> list[bytes]:
        return [e.data for e in self.events if isinstance(e, h11.Data)]


def headers_of(response: h11.Response) -> dict[bytes, bytes]:
    return dict(response.headers)


async def writer_in(state: WriterState) -> tuple[HttpWriter, FakeLink]:
    """A writer brought to `state` through its public methods."""
    link = FakeLink()
    writer = HttpWriter(link, KEEPALIVE)
    if state is WriterState.STREAMING:
        await writer.notify(b'{"n":1}')
    elif state is WriterState.CLOSED:
        await writer.respond(b'{"r":1}')
    elif state is WriterState.ABORTED:
        writer.abort()
    assert writer.state is state
    link.events.clear()
    return writer, link


async def take(writer: HttpWriter, event: WriterEvent) -> None:
    if event is WriterEvent.OPEN:
        await writer.open()
    elif event is WriterEvent.NOTIFY:
        await writer.notify(b'{"n":2}')
    elif event is WriterEvent.RESPOND:
        await writer.respond(b'{"r":2}')
    elif event is WriterEvent.FINISH:
        await writer.finish()
    else:
        writer.abort()


# -- the table ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("state", "event"), sorted(TRANSITIONS, key=lambda pair: (pair[0].value, pair[1].value)))
async def test_every_legal_transition_lands_where_the_table_says(state: WriterState, event: WriterEvent) -> None:
    writer, _ = await writer_in(state)
    await take(writer, event)
    assert writer.state is TRANSITIONS[(state, event)]


ILLEGAL = [pair for pair in itertools.product(WriterState, WriterEvent) if pair not in TRANSITIONS]


def test_the_only_illegal_transitions_are_sends_after_the_end_opening_twice_and_finishing_unopened() -> None:
    assert set(ILLEGAL) == {
        (WriterState.CLOSED, WriterEvent.OPEN),
        (WriterState.CLOSED, WriterEvent.NOTIFY),
        (WriterState.CLOSED, WriterEvent.RESPOND),
        (WriterState.CLOSED, WriterEvent.FINISH),
        (WriterState.STREAMING, WriterEvent.OPEN),
        (WriterState.DIRECT, WriterEvent.FINISH),
    }


@pytest.mark.parametrize(("state", "event"), ILLEGAL)
async def test_every_illegal_transition_raises_and_sends_nothing(state: WriterState, event: WriterEvent) -> None:
    writer, link = await writer_in(state)
    with pytest.raises(WriterError, match=f"cannot {event.value} a writer in state {state.value}"):
        await take(writer, event)
    assert writer.state is state and link.events == []


# -- what each transition sends -----------------------------------------------------------------------


async def test_a_response_first_is_one_json_body_with_content_length() -> None:
    writer, link = await writer_in(WriterState.DIRECT)
    await writer.respond(b'{"jsonrpc":"2.0","id":1,"result":{}}')
    (head,) = link.heads()
    assert head.status_code == 200
    assert headers_of(head) == {b"content-type": b"application/json", b"content-length": b"36"}
    assert link.data() == [b'{"jsonrpc":"2.0","id":1,"result":{}}']
    assert isinstance(link.events[-1], h11.EndOfMessage) and writer.responded and link.drains == 1


@pytest.mark.parametrize(("code", "status"), [(-32700, 400), (-32602, 400), (-32020, 400), (-32601, 404), (-32603, 500), (-1, 200)])
async def test_an_error_response_first_gets_the_status_its_code_implies(code: int, status: int) -> None:
    writer, link = await writer_in(WriterState.DIRECT)
    await writer.respond(b"{}", code)
    assert link.heads()[0].status_code == status


async def test_a_notification_first_opens_an_sse_stream_and_arms_the_keepalive() -> None:
    writer, link = await writer_in(WriterState.DIRECT)
    await writer.notify(b'{"n":1}')
    (head,) = link.heads()
    assert head.status_code == 200
    assert headers_of(head) == {b"content-type": b"text/event-stream", b"cache-control": b"no-cache", b"x-accel-buffering": b"no"}
    assert link.data() == [b'event: message\ndata: {"n":1}\n\n']
    assert [t.delay for t in link.timers] == [KEEPALIVE]


async def test_while_streaming_notifications_and_the_response_are_events_then_the_body_ends() -> None:
    writer, link = await writer_in(WriterState.STREAMING)
    await writer.notify(b'{"n":2}')
    await writer.respond(b'{"r":1}')
    assert link.heads() == []
    assert link.data() == [b'event: message\ndata: {"n":2}\n\n', b'event: message\ndata: {"r":1}\n\n']
    assert isinstance(link.events[-1], h11.EndOfMessage)
    assert link.timers[0].cancelled


@pytest.mark.parametrize("first", ["notify", "respond"])
async def test_the_connection_adds_its_own_headers_to_the_head(first: str) -> None:
    writer, link = await writer_in(WriterState.DIRECT)
    link.added = [(b"connection", b"close"), (b"access-control-allow-origin", b"https://app.example")]
    await (writer.notify(b"{}") if first == "notify" else writer.respond(b"{}"))
    head = headers_of(link.heads()[0])
    assert head[b"connection"] == b"close" and head[b"access-control-allow-origin"] == b"https://app.example"


@pytest.mark.parametrize("state", [WriterState.DIRECT, WriterState.STREAMING])
async def test_after_the_peer_left_sends_are_dropped_silently(state: WriterState) -> None:
    writer, link = await writer_in(state)
    link.gone = True
    await writer.notify(b"{}")
    await writer.respond(b"{}")
    assert link.events == [] and writer.state is WriterState.ABORTED and not writer.responded


async def test_abort_stops_the_keepalive_and_a_closed_writer_stays_closed() -> None:
    writer, link = await writer_in(WriterState.STREAMING)
    writer.abort()
    assert link.timers[0].cancelled and writer.state is WriterState.ABORTED
    closed, _ = await writer_in(WriterState.CLOSED)
    closed.abort()
    assert closed.state is WriterState.CLOSED and closed.responded


# -- keep-alive comments -------------------------------------------------------------------------------


async def test_an_idle_stream_gets_a_comment_and_the_timer_is_armed_again() -> None:
    writer, link = await writer_in(WriterState.STREAMING)
    link.now += KEEPALIVE
    link.timers[-1].callback()
    assert link.data() == [b": keep-alive\n\n"]
    assert link.timers[-1].delay == KEEPALIVE


async def test_a_stream_that_wrote_recently_gets_no_comment_until_it_is_idle_long_enough() -> None:
    writer, link = await writer_in(WriterState.STREAMING)
    link.now += 10
    await writer.notify(b"{}")
    link.events.clear()
    link.now += 5
    link.timers[-1].callback()
    assert link.data() == [] and link.timers[-1].delay == pytest.approx(10)


async def test_the_keepalive_ends_with_the_stream() -> None:
    writer, link = await writer_in(WriterState.STREAMING)
    tick = link.timers[-1].callback
    await writer.respond(b"{}")
    link.events.clear()
    timers = len(link.timers)
    tick()  # a tick already queued when the response went out
    assert link.events == [] and len(link.timers) == timers


# -- standalone streams (legacy GET) and extra head headers --------------------------------------------


async def test_open_sends_the_sse_head_at_once_and_finish_ends_the_body() -> None:
    writer, link = await writer_in(WriterState.DIRECT)
    await writer.open()
    assert [h.status_code for h in link.heads()] == [200] and link.data() == []
    await writer.notify(b'{"n":1}')
    await writer.finish()
    assert link.data() == [b'event: message\ndata: {"n":1}\n\n'] and isinstance(link.events[-1], h11.EndOfMessage)
    assert link.timers[0].cancelled and writer.state is WriterState.CLOSED


@pytest.mark.parametrize("first", ["open", "notify", "respond"])
async def test_head_headers_are_read_when_the_head_is_sent(first: str) -> None:
    link = FakeLink()
    extra: list[tuple[bytes, bytes]] = []
    writer = HttpWriter(link, KEEPALIVE, lambda: list(extra))
    extra.append((b"mcp-session-id", b"abc"))  # known only once the call has run
    await {"open": writer.open, "notify": lambda: writer.notify(b"{}"), "respond": lambda: writer.respond(b"{}")}[first]()
    assert headers_of(link.heads()[0])[b"mcp-session-id"] == b"abc"
