"""What a 2025-11-25 session keeps for resumption stays bounded by what can still be resumed.

Each test drives a real server on 127.0.0.1 (the built-in one, then the ASGI adapter under
uvicorn) and looks at the session's stream store afterwards: a request that streamed
nothing leaves nothing, a cancelled call leaves nothing once its events are gone, a kept
event costs about its size, and a session's events have a byte bound.
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import anyio
import orjson
import pytest

from conftest import legacy
from http_client import HttpClient, SseStream, running
from mcpcore import Context, Server
from mcpcore._runtime.defaults import HTTP_SESSION_EVENT_BYTES, HTTP_SESSION_EVENTS
from mcpcore.transports._http.resume import StreamStore
from test_legacy_http import initialize, session_headers

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_flavour")]
LIMIT = 30
CALLS = HTTP_SESSION_EVENTS + 44  # more than a session's store can hold


def build() -> Server:
    server = Server("stream-bounds")
    release = anyio.Event()

    @server.tool
    def echo(text: str) -> str:
        """Return the text."""
        return text

    @server.tool
    async def chatty(count: int, size: int, ctx: Context) -> str:
        """`count` progress notifications, each with a message of `size` characters."""
        for step in range(count):
            await ctx.progress(step + 1, total=count, message="x" * size)
        return "said"

    @server.tool
    async def stuck() -> str:
        """Waits until the test lets it go (or it is cancelled), streaming nothing."""
        await release.wait()
        return "free"

    @server.tool
    async def stuck_streaming(ctx: Context) -> str:
        """Streams one notification, then waits until cancelled."""
        await ctx.progress(1, total=2)
        await release.wait()
        return "free"

    return server


def store_of(http: Any, session_id: str) -> StreamStore:
    return http.stores[http.sessions.get(session_id)]


async def opened(http: Any) -> str:
    async with HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            return await initialize(client)


async def test_requests_that_stream_nothing_leave_no_stream_in_the_session() -> None:
    async with running(build()) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            session_id = await initialize(client)
            headers = session_headers(session_id)
            for number in range(CALLS):
                message = [legacy("ping", number), legacy("tools/list", number),
                           legacy("tools/call", number, name="echo", arguments={"text": "hi"})][number % 3]
                reply = await client.post(message, headers, legacy=True)
                assert reply.status == 200 and "result" in reply.response
        store = store_of(http, session_id)
        assert store.streams == {} and store.size == 0


async def test_each_request_on_a_new_connection_leaves_no_stream_either() -> None:
    async with running(build()) as http:
        session_id = await opened(http)
        for number in range(50):
            async with HttpClient.connect(http) as client:
                with anyio.fail_after(LIMIT):
                    assert (await client.post(legacy("ping", number), session_headers(session_id), legacy=True)).status == 200
        assert store_of(http, session_id).streams == {}


async def cancelled(http: Any, session_id: str, request_id: int) -> None:
    """Cancel a call of the session (notifications/cancelled), and wait until it has ended."""
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
    async with HttpClient.connect(http) as client:
        assert (await client.post(note, session_headers(session_id), legacy=True)).status == 202
    while request_id in http.sessions.get(session_id).calls:
        await anyio.sleep(0.005)


async def test_a_call_cancelled_before_it_streamed_leaves_no_stream() -> None:
    async with running(build()) as http:
        session_id = await opened(http)
        for number in range(1, 60):
            async with HttpClient.connect(http) as caller:
                with anyio.fail_after(LIMIT):
                    await caller.send_request("POST", "/mcp", session_headers(session_id),
                                              orjson.dumps(legacy("tools/call", number, name="stuck", arguments={})))
                    while number not in http.sessions.get(session_id).calls:
                        await anyio.sleep(0.005)
                    await cancelled(http, session_id, number)
        assert store_of(http, session_id).streams == {}


async def test_a_cancelled_call_that_streamed_leaves_once_its_events_are_gone() -> None:
    async with running(build()) as http:
        session_id = await opened(http)
        for number in range(1, CALLS + 1):
            async with HttpClient.connect(http) as caller:
                stream = SseStream(caller, "tools/call", legacy=True)
                with anyio.fail_after(LIMIT):
                    call = legacy("tools/call", number, name="stuck_streaming", arguments={}, _meta={"progressToken": number})
                    await stream.open(call, session_headers(session_id))
                    assert (await stream.next())["method"] == "notifications/progress"  # type: ignore[index]
                    await cancelled(http, session_id, number)
        streams = store_of(http, session_id).streams
        # Every ended stream left holds an event that is still stored; the rest left the table.
        assert len(streams) == HTTP_SESSION_EVENTS and all(s.stored == 1 and s.ended.is_set() for s in streams.values())


async def test_a_kept_event_costs_about_its_size() -> None:
    async with running(build()) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            session_id = await initialize(client)
            call = legacy("tools/call", 1, name="chatty", arguments={"count": HTTP_SESSION_EVENTS, "size": 10},
                          _meta={"progressToken": "p"})
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                stream = SseStream(client, "tools/call", legacy=True)
                await stream.open(call, session_headers(session_id))
                while (await stream.next()) is not None:
                    pass
                del stream
                gc.collect()
                grown = tracemalloc.get_traced_memory()[0] - before
            finally:
                tracemalloc.stop()
        store = store_of(http, session_id)
        assert len(store.after(next(iter(store.streams.values())), "s1.0")) == HTTP_SESSION_EVENTS
        # 256 events of ~130 bytes: ~33 KiB of messages; kept as the serializer returned them, ~1 MiB.
        assert grown < 4 * store.size + 64 * 1024, (grown, store.size)


async def test_a_sessions_events_are_bounded_in_bytes_and_the_oldest_leave() -> None:
    size = HTTP_SESSION_EVENT_BYTES // 3
    async with running(build()) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            session_id = await initialize(client)
            stream = SseStream(client, "tools/call", legacy=True)
            call = legacy("tools/call", 1, name="chatty", arguments={"count": 6, "size": size}, _meta={"progressToken": "p"})
            await stream.open(call, session_headers(session_id))
            while (await stream.next()) is not None:
                pass
        store = store_of(http, session_id)
        assert HTTP_SESSION_EVENT_BYTES // 2 < store.size <= HTTP_SESSION_EVENT_BYTES
        first_progress = stream.event_ids[1]
        async with HttpClient.connect(http) as resumer:
            with anyio.fail_after(LIMIT):
                await resumer.send_request("GET", "/mcp", {**session_headers(session_id), "last-event-id": first_progress})
                assert (await resumer.read_reply()).status == 404  # what came after it is no longer all there
