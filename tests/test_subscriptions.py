"""`subscriptions/listen`: acknowledgment, filtering, delivery, ending and limits.

Most rules run on both transports against `tests/servers/listen_server.py`:
stdio to a `mcpcore run` subprocess (all subscriptions share its stdout and are
told apart by `_meta["io.modelcontextprotocol/subscriptionId"]`), and HTTP in
process (one SSE stream per subscription, read event by event). Every message
received is checked against the wire schema.
"""

from __future__ import annotations

import contextlib
import sys
from collections import defaultdict
from itertools import count
from typing import Any, AsyncIterator, Awaitable, Callable

import anyio
import anyio.lowlevel
import h11
import orjson
import pytest

from conftest import ROOT, request
from http_client import HttpClient, SseStream, mcp_headers, running
from mcpcore._runtime.subscriptions import PROMPTS, RESOURCE, RESOURCES, TOOLS, Change, Filter, LocalBus, Subscriber
from mcpcore import Call
from memory import MemoryWriter, exchange
from servers import listen_server
from stdio_client import StdioClient, serve

pytestmark = pytest.mark.anyio

SUB_ID = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "listen-tests", "version": "0.0.1"}}
LISTEN_SERVER = ROOT / "tests" / "servers" / "listen_server.py"
TRANSPORTS = ["stdio", "http", "asgi"]  # asgi: the ASGI adapter under uvicorn
ALL_KINDS = {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}


def run_command(attr: str = "build", *extra: str) -> list[str]:
    return [sys.executable, "-m", "mcpcore", "run", f"{LISTEN_SERVER}:{attr}", *extra]


def listen(sub_id: Any, _meta: dict[str, Any] | None = None, **wanted: Any) -> dict[str, Any]:
    return request("subscriptions/listen", sub_id, _meta, notifications=wanted)


class WatchedBus(LocalBus):
    """The local bus, telling waiters whenever a subscriber attaches or detaches."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = anyio.Event()

    def attach(self, subscriber: Subscriber) -> None:
        super().attach(subscriber)
        self._poke()

    def detach(self, subscriber: Subscriber) -> None:
        super().detach(subscriber)
        self._poke()

    def _poke(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, predicate: Callable[[], bool]) -> None:
        with anyio.fail_after(5):
            while True:
                changed = self._changed
                if predicate():
                    return
                await changed.wait()


# -- reading streams ------------------------------------------------------


class Sub:
    """One open subscription as its client sees it."""

    def __init__(self, sub_id: Any, ack: dict[str, Any], read: Callable[[], Awaitable[dict[str, Any] | None]]) -> None:
        self.id = sub_id
        self.ack = ack
        self._read = read

    async def next(self) -> dict[str, Any] | None:
        """The next message of this subscription (None once its stream ended without one)."""
        with anyio.fail_after(5):
            message = await self._read()
        if message is not None:
            tag = message["params"]["_meta"] if "method" in message else message.get("result", {}).get("_meta", {})
            assert tag.get(SUB_ID) == self.id, message
        return message

    async def expect(self, method: str, **params: Any) -> dict[str, Any]:
        message = await self.next()
        assert message is not None and message.get("method") == method, message
        assert message["params"] == {"_meta": {SUB_ID: self.id}, **params}
        return message

    async def expect_end(self) -> None:
        """The graceful end: a complete result carrying the subscription id."""
        message = await self.next()
        assert message == {
            "jsonrpc": "2.0",
            "id": self.id,
            "result": {"resultType": "complete", "_meta": {**SERVER_INFO, SUB_ID: self.id}},
        }


class StdioHub:
    """Routes everything read from one stdio server: by subscription id, or by response id."""

    def __init__(self, client: StdioClient) -> None:
        self.client = client
        self.inbox: dict[Any, list[dict[str, Any]]] = defaultdict(list)

    async def next_for(self, key: Any) -> dict[str, Any]:
        while not self.inbox[key]:
            message = await self.client.read()
            routed = message["params"].get("_meta", {}).get(SUB_ID, "untagged") if "method" in message else message.get("id")
            self.inbox[routed].append(message)
        return self.inbox[key].pop(0)


# -- one client API over both transports ----------------------------------


class Side:
    """A client of the listen server on one transport."""

    kind: str

    def __init__(self) -> None:
        self._ids = count(1)

    async def listen(self, sub_id: Any, _meta: dict[str, Any] | None = None, **wanted: Any) -> Sub:
        """Open a subscription (`_meta`: the request's, when not the default one)."""
        raise NotImplementedError

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        raise NotImplementedError

    async def tool(self, tool_name: str, /, **arguments: Any) -> str:
        response = await self.call("tools/call", name=tool_name, arguments=arguments)
        return response["result"]["content"][0]["text"]

    async def shutdown(self) -> None:
        raise NotImplementedError


class StdioSide(Side):
    kind = "stdio"

    def __init__(self, client: StdioClient) -> None:
        super().__init__()
        self.client = client
        self.hub = StdioHub(client)

    async def listen(self, sub_id: Any, _meta: dict[str, Any] | None = None, **wanted: Any) -> Sub:
        await self.client.send(listen(sub_id, _meta, **wanted))
        return await _acknowledged(sub_id, lambda: self.hub.next_for(sub_id))

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        request_id = f"call-{next(self._ids)}"
        await self.client.send(request(method, request_id, **params))
        with anyio.fail_after(5):
            return await self.hub.next_for(request_id)

    async def cancel(self, sub: Sub) -> None:
        await self.client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": sub.id}})

    async def shutdown(self) -> None:
        await self.client.close_stdin()


class HttpSide(Side):
    kind = "http"

    def __init__(self, http: Any, caller: HttpClient, streams: contextlib.AsyncExitStack) -> None:
        super().__init__()
        self.http = http
        self.caller = caller
        self.streams = streams
        self.sse: dict[Any, SseStream] = {}

    async def listen(self, sub_id: Any, _meta: dict[str, Any] | None = None, **wanted: Any) -> Sub:
        connection = await self.streams.enter_async_context(HttpClient.connect(self.http))
        stream = SseStream(connection)
        await stream.open(listen(sub_id, _meta, **wanted))
        self.sse[sub_id] = stream
        return await _acknowledged(sub_id, stream.next)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        message = request(method, f"call-{next(self._ids)}", **params)
        with anyio.fail_after(5):
            reply = await self.caller.post(message)
        assert len(reply.messages) == 1
        return reply.messages[0]

    async def shutdown(self) -> None:
        self.http.stop()


async def _acknowledged(sub_id: Any, read: Callable[[], Awaitable[Any]]) -> Sub:
    with anyio.fail_after(5):
        ack = await read()
    assert ack["method"] == "notifications/subscriptions/acknowledged", ack
    assert ack["params"]["_meta"] == {SUB_ID: sub_id}
    return Sub(sub_id, ack, read)


@contextlib.asynccontextmanager
async def open_side(kind: str, attr: str = "build", **config: Any) -> AsyncIterator[Side]:
    if kind == "stdio":
        async with serve(run_command(attr)) as client:
            yield StdioSide(client)
    else:
        server = getattr(listen_server, attr)(bus=WatchedBus())
        async with running(server, via="asgi" if kind == "asgi" else "h11", **config) as http, \
                HttpClient.connect(http) as caller:
            async with contextlib.AsyncExitStack() as streams:
                side = HttpSide(http, caller, streams)
                side.server = server  # type: ignore[attr-defined]
                yield side


@pytest.fixture(params=TRANSPORTS)
async def side(request: pytest.FixtureRequest) -> AsyncIterator[Side]:
    async with open_side(request.param) as opened:
        yield opened


# -- acknowledgment -------------------------------------------------------


async def test_the_first_message_acknowledges_everything_this_server_offers(side: Side) -> None:
    sub = await side.listen("everything", **ALL_KINDS, resourceSubscriptions=["demo://b", "demo://a", "demo://unlisted"])
    assert sub.ack == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "_meta": {SUB_ID: "everything"},
            "notifications": {**ALL_KINDS, "resourceSubscriptions": ["demo://a", "demo://b", "demo://unlisted"]},
        },
    }


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_the_acknowledgment_omits_what_the_server_does_not_offer(kind: str) -> None:
    async with open_side(kind, "bare") as bare:
        sub = await bare.listen(7, **ALL_KINDS, resourceSubscriptions=["demo://a"])
        assert sub.ack["params"] == {"_meta": {SUB_ID: 7}, "notifications": {"toolsListChanged": True}}


async def test_kinds_set_to_false_or_left_out_are_not_acknowledged(side: Side) -> None:
    sub = await side.listen("some", toolsListChanged=False, promptsListChanged=True)
    assert sub.ack["params"]["notifications"] == {"promptsListChanged": True}
    empty = await side.listen("none")
    assert empty.ack["params"]["notifications"] == {}


# -- delivery -------------------------------------------------------------


async def test_each_subscription_gets_only_the_types_it_asked_for(side: Side) -> None:
    tools = await side.listen("tools-only", toolsListChanged=True)
    updates = await side.listen("a-only", resourceSubscriptions=["demo://a"])
    assert await side.tool("touch", uri="demo://a") == "touched demo://a"
    assert await side.tool("add_tool", name="extra") == "added tool extra"
    await tools.expect("notifications/tools/list_changed")
    await updates.expect("notifications/resources/updated", uri="demo://a")
    await side.shutdown()
    await tools.expect_end()
    await updates.expect_end()


async def test_a_change_reaches_open_streams_announced_from_a_call_or_a_worker_thread(side: Side) -> None:
    sub = await side.listen("fast", toolsListChanged=True, resourceSubscriptions=["demo://a"])
    for trigger, method, params in [
        (lambda: side.tool("touch", uri="demo://a"), "notifications/resources/updated", {"uri": "demo://a"}),
        (lambda: side.tool("add_tool", name="quick"), "notifications/tools/list_changed", {}),  # from a worker thread
    ]:
        await trigger()
        await sub.expect(method, **params)


async def test_a_change_is_forwarded_without_waiting_for_any_timer() -> None:
    """Delivery is event-driven: once every task is blocked, the notification was already sent."""
    server = listen_server.build()
    writer = MemoryWriter("subscriptions/listen")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.handle, Call(listen("evented", resourceSubscriptions=["demo://a"])), writer)
        await anyio.wait_all_tasks_blocked()
        assert [n["method"] for n in writer.notifications] == ["notifications/subscriptions/acknowledged"]
        server.notify_resource_updated("demo://a")
        await anyio.wait_all_tasks_blocked()
        assert writer.notifications[-1]["method"] == "notifications/resources/updated"
        assert writer.notifications[-1]["params"]["uri"] == "demo://a"
        server.close_subscriptions()
    assert writer.response is not None and writer.response["result"]["resultType"] == "complete"


async def test_adding_and_removing_tools_and_prompts_announces_list_changed(side: Side) -> None:
    sub = await side.listen("catalog", toolsListChanged=True, promptsListChanged=True)
    assert await side.tool("add_tool", name="fresh") == "added tool fresh"
    await sub.expect("notifications/tools/list_changed")
    listed = await side.call("tools/list")
    assert "fresh" in [t["name"] for t in listed["result"]["tools"]]
    assert await side.tool("fresh") == "I am fresh"

    assert await side.tool("remove_tool", name="fresh") == "removed tool fresh"
    await sub.expect("notifications/tools/list_changed")
    listed = await side.call("tools/list")
    assert "fresh" not in [t["name"] for t in listed["result"]["tools"]]

    assert await side.tool("add_prompt", name="later") == "added prompt later"
    await sub.expect("notifications/prompts/list_changed")
    prompt = await side.call("prompts/get", name="later")
    assert prompt["result"]["messages"][0]["content"]["text"] == "prompt later"

    assert await side.tool("remove_prompt", name="later") == "removed prompt later"
    await sub.expect("notifications/prompts/list_changed")
    await side.shutdown()
    await sub.expect_end()


async def test_resource_updates_reach_only_subscriptions_following_that_uri(side: Side) -> None:
    a = await side.listen("follows-a", resourceSubscriptions=["demo://a"])
    b = await side.listen("follows-b", resourceSubscriptions=["demo://b"])
    both = await side.listen("follows-both", resourceSubscriptions=["demo://a", "demo://b"], resourcesListChanged=True)
    await side.tool("touch", uri="demo://a")
    await a.expect("notifications/resources/updated", uri="demo://a")
    await both.expect("notifications/resources/updated", uri="demo://a")
    await side.tool("touch", uri="demo://b")
    await b.expect("notifications/resources/updated", uri="demo://b")
    await both.expect("notifications/resources/updated", uri="demo://b")
    await side.tool("touch", uri="demo://elsewhere")
    await side.tool("add_tool", name="noise")  # nobody here asked for tools
    await side.shutdown()
    for sub in (a, b, both):
        await sub.expect_end()


async def test_two_subscriptions_on_one_stdio_process_are_told_apart_by_id() -> None:
    async with open_side("stdio") as opened:
        assert isinstance(opened, StdioSide)
        first = await opened.listen("alpha", toolsListChanged=True)
        second = await opened.listen(2, toolsListChanged=True, resourceSubscriptions=["demo://b"])
        await opened.tool("add_tool", name="shared")
        await opened.tool("touch", uri="demo://b")
        await first.expect("notifications/tools/list_changed")
        await second.expect("notifications/tools/list_changed")
        await second.expect("notifications/resources/updated", uri="demo://b")
        await opened.shutdown()
        await first.expect_end()
        await second.expect_end()
        with anyio.fail_after(5):
            assert await opened.client.wait() == 0
        tagged = [m for m in opened.client.received if "method" in m]
        assert sorted(str(m["params"]["_meta"][SUB_ID]) for m in tagged) == ["2", "2", "2", "alpha", "alpha"]


async def test_a_listen_id_already_in_flight_on_stdio_is_refused() -> None:
    async with open_side("stdio") as opened:
        assert isinstance(opened, StdioSide)
        await opened.listen("dup", toolsListChanged=True)
        await opened.client.send(listen("dup", toolsListChanged=True))
        with anyio.fail_after(5):
            error = await opened.hub.next_for("dup")
        assert error["error"]["code"] == -32600
        assert "already in flight" in error["error"]["message"]


# -- a stalled reader ------------------------------------------------------


async def test_a_stalled_http_reader_does_not_delay_another_subscriber() -> None:
    big = [f"demo://big/{i}/" + "x" * 256 * 1024 for i in range(16)]  # 4 MiB of notifications per round
    bus = WatchedBus()
    server = listen_server.build(bus=bus)
    async with running(server, max_body_bytes=16 * 1024 * 1024) as http:
        async with HttpClient.connect(http) as stalled_link, HttpClient.connect(http) as lively_link:
            message = listen("stalled", resourceSubscriptions=big)
            await stalled_link.send_request("POST", "/mcp", mcp_headers(message), orjson.dumps(message))  # never read
            lively = SseStream(lively_link)
            await lively.open(listen("lively", resourceSubscriptions=["demo://a"]))
            assert (await lively.next())["method"] == "notifications/subscriptions/acknowledged"
            await bus.until(lambda: len(server.subscriptions) == 2)
            (stalled,) = [s for s in server.subscriptions if s.filter.uris == frozenset(big)]

            async def round_trip() -> None:
                """Announce every big URI and demo://a; demo://a must reach `lively` all the same."""
                for uri in big:
                    server.notify_resource_updated(uri)
                server.notify_resource_updated("demo://a")
                with anyio.fail_after(5):  # a hang guard: a blocked lively stream never gets it
                    note = await lively.next()
                assert note is not None and note["params"]["uri"] == "demo://a"

            rounds = full = 0
            while full < 3:  # until its writer is stuck on a full socket: changes pile up round after round
                await round_trip()
                full = full + 1 if len(stalled._pending) == len(big) else 0
                rounds += 1
                assert rounds < 64, "the stalled stream never filled up"
            for _ in range(5):  # the stalled writer stays stuck while lively gets every change
                await round_trip()
                assert len(stalled._pending) == len(big)  # repeats coalesce: one pending per URI
    # leaving the connections closed the stalled stream; the server stopped without it


# -- the mailbox ------------------------------------------------------------


def test_the_mailbox_keeps_one_pending_notification_per_kind_and_uri() -> None:
    subscriber = Subscriber(Filter(frozenset({TOOLS, PROMPTS}), frozenset({"demo://a", "demo://b"})))
    for _ in range(1000):
        subscriber.offer(Change(TOOLS))
        subscriber.offer(Change(RESOURCE, "demo://b"))
        subscriber.offer(Change(RESOURCE, "demo://a"))
    subscriber.offer(Change(PROMPTS))
    subscriber.offer(Change(RESOURCES))  # not wanted
    subscriber.offer(Change(RESOURCE, "demo://c"))  # not followed
    assert list(subscriber._pending) == [
        Change(TOOLS), Change(RESOURCE, "demo://b"), Change(RESOURCE, "demo://a"), Change(PROMPTS)
    ]


async def test_the_mailbox_hands_over_pending_changes_oldest_first_and_empties() -> None:
    subscriber = Subscriber(Filter(frozenset({TOOLS}), frozenset({"demo://a"})))
    subscriber.offer(Change(RESOURCE, "demo://a"))
    subscriber.offer(Change(TOOLS))
    subscriber.offer(Change(RESOURCE, "demo://a"))
    assert await subscriber.next() == [Change(RESOURCE, "demo://a"), Change(TOOLS)]
    assert subscriber._pending == {}


async def test_the_mailbox_waits_for_a_change_and_wakes_on_it() -> None:
    subscriber = Subscriber(Filter(frozenset({TOOLS}), frozenset()))
    got: list[Any] = []

    async def reader() -> None:
        got.append(await subscriber.next())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(reader)
            await anyio.lowlevel.checkpoint()
            subscriber.offer(Change(PROMPTS))  # not wanted: no wake-up
            subscriber.offer(Change(TOOLS))
    assert got == [[Change(TOOLS)]]


async def test_a_closed_mailbox_returns_none_even_with_changes_pending() -> None:
    subscriber = Subscriber(Filter(frozenset({TOOLS}), frozenset()))
    subscriber.offer(Change(TOOLS))
    subscriber.close()
    assert subscriber.closed is True
    with anyio.fail_after(5):
        assert await subscriber.next() is None


def test_a_filter_wants_kinds_and_followed_uris_and_writes_itself_sorted() -> None:
    honoured = Filter(frozenset({TOOLS, RESOURCES}), frozenset({"z://1", "a://2"}))
    assert honoured.wants(Change(TOOLS)) and honoured.wants(Change(RESOURCES))
    assert not honoured.wants(Change(PROMPTS))
    assert honoured.wants(Change(RESOURCE, "a://2")) and not honoured.wants(Change(RESOURCE, "a://3"))
    assert honoured.to_wire() == {"toolsListChanged": True, "resourcesListChanged": True, "resourceSubscriptions": ["a://2", "z://1"]}
    assert Filter(frozenset(), frozenset()).to_wire() == {}


async def test_the_local_bus_delivers_from_the_loop_and_from_worker_threads() -> None:
    bus = LocalBus()
    subscriber = Subscriber(Filter(frozenset({TOOLS, PROMPTS}), frozenset()))
    bus.publish(Change(TOOLS))  # nobody attached yet: dropped
    bus.attach(subscriber)
    assert subscriber._pending == {}
    bus.publish(Change(TOOLS))
    await anyio.to_thread.run_sync(bus.publish, Change(PROMPTS))
    assert list(subscriber._pending) == [Change(TOOLS), Change(PROMPTS)]
    bus.detach(subscriber)
    bus.publish(Change(RESOURCES))
    assert list(subscriber._pending) == [Change(TOOLS), Change(PROMPTS)]


# -- ending ---------------------------------------------------------------


async def test_a_stdio_cancel_ends_the_subscription_and_nothing_more_is_sent_for_it() -> None:
    async with open_side("stdio") as opened:
        assert isinstance(opened, StdioSide)
        cancelled = await opened.listen("cancel-me", toolsListChanged=True, resourceSubscriptions=["demo://a"])
        kept = await opened.listen("keep-me", toolsListChanged=True, resourceSubscriptions=["demo://a"])
        await opened.cancel(cancelled)
        await opened.tool("touch", uri="demo://a")
        await opened.tool("add_tool", name="after")
        await kept.expect("notifications/resources/updated", uri="demo://a")
        await kept.expect("notifications/tools/list_changed")
        await opened.shutdown()
        await kept.expect_end()
        with anyio.fail_after(5):
            assert await opened.client.wait() == 0
            assert opened.client.process.stdout is not None
            assert b"".join([chunk async for chunk in opened.client.process.stdout]) == b""
        about_cancelled = [
            m for m in opened.client.received
            if m.get("id") == "cancel-me" or m.get("params", {}).get("_meta", {}).get(SUB_ID) == "cancel-me"
        ]
        assert [m["method"] for m in about_cancelled] == ["notifications/subscriptions/acknowledged"]


async def test_an_http_disconnect_ends_the_subscription() -> None:
    bus = WatchedBus()
    server = listen_server.build(bus=bus)
    async with running(server) as http, HttpClient.connect(http) as caller:
        async with HttpClient.connect(http) as link:
            stream = SseStream(link)
            await stream.open(listen("leaving", toolsListChanged=True))
            assert (await stream.next())["method"] == "notifications/subscriptions/acknowledged"
            assert len(server.subscriptions) == 1 and len(bus.subscribers) == 1
        await bus.until(lambda: not bus.subscribers)
        assert len(server.subscriptions) == 0
        reply = await caller.post(request("tools/call", 1, name="add_tool", arguments={"name": "nobody_hears"}))
        assert reply.json["result"]["content"][0]["text"] == "added tool nobody_hears"


async def test_stdio_eof_ends_every_open_subscription_with_a_complete_result() -> None:
    async with open_side("stdio") as opened:
        assert isinstance(opened, StdioSide)
        subs = [await opened.listen(sub_id, toolsListChanged=True) for sub_id in ("one", 2, "three")]
        await opened.shutdown()
        for sub in subs:
            await sub.expect_end()
        with anyio.fail_after(5):
            assert await opened.client.wait() == 0


async def test_http_stop_ends_every_open_subscription_with_a_complete_result() -> None:
    async with open_side("http") as opened:
        assert isinstance(opened, HttpSide)
        subs = [await opened.listen(sub_id, resourceSubscriptions=["demo://a"]) for sub_id in ("one", 2)]
        await opened.shutdown()
        for sub in subs:
            await sub.expect_end()
            assert await sub.next() is None  # and the stream ends
            assert opened.sse[sub.id].ended


# -- limits and malformed filters -----------------------------------------


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_more_open_subscriptions_than_the_limit_is_an_error(kind: str) -> None:
    async with open_side(kind, "limited") as limited:
        await limited.listen("s1", toolsListChanged=True)
        await limited.listen("s2", toolsListChanged=True)
        error = await limited.call("subscriptions/listen", notifications={"toolsListChanged": True})
        assert error["error"] == {
            "code": -32600,
            "message": "Too many open subscriptions (limit 2); close one first",
        }


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_following_more_uris_than_the_limit_is_invalid_params(kind: str) -> None:
    async with open_side(kind, "limited") as limited:
        four = ["demo://a", "demo://b", "demo://c", "demo://d"]
        error = await limited.call("subscriptions/listen", notifications={"resourceSubscriptions": four})
        assert error["error"] == {"code": -32602, "message": "A subscription may follow at most 3 resource URIs"}
        sub = await limited.listen("three", resourceSubscriptions=four[:3])
        assert sub.ack["params"]["notifications"]["resourceSubscriptions"] == four[:3]


@pytest.mark.parametrize(
    "notifications, message",
    [
        (None, 'subscriptions/listen needs a "notifications" filter object'),
        ([], 'subscriptions/listen needs a "notifications" filter object'),
        ({"toolsListChanged": "yes"}, "notifications.toolsListChanged must be a boolean"),
        ({"promptsListChanged": 1}, "notifications.promptsListChanged must be a boolean"),
        ({"resourcesListChanged": None}, "notifications.resourcesListChanged must be a boolean"),
        ({"resourceSubscriptions": "demo://a"}, "notifications.resourceSubscriptions must be a list of URI strings"),
        ({"resourceSubscriptions": ["demo://a", 3]}, "notifications.resourceSubscriptions must be a list of URI strings"),
    ],
)
async def test_a_malformed_filter_is_invalid_params(notifications: Any, message: str) -> None:
    params: dict[str, Any] = {} if notifications is None else {"notifications": notifications}
    writer = await exchange(listen_server.build(), request("subscriptions/listen", 1, **params))
    assert writer.notifications == []
    assert writer.response is not None and writer.response["error"] == {"code": -32602, "message": message}


async def test_a_malformed_filter_is_invalid_params_on_the_wire(side: Side) -> None:
    error = await side.call("subscriptions/listen", notifications={"toolsListChanged": "yes"})
    assert error["error"]["code"] == -32602
    assert await side.tool("echo", text="still serving") == "still serving"


# -- keep-alive -----------------------------------------------------------


async def test_an_idle_http_listen_stream_gets_keep_alive_comments() -> None:
    async with open_side("http", sse_keepalive=0.05) as opened:
        assert isinstance(opened, HttpSide)
        sub = await opened.listen("quiet", toolsListChanged=True)
        stream = opened.sse["quiet"]
        with anyio.fail_after(5):
            while stream.comments < 3:
                event = await stream.client._next()
                assert isinstance(event, h11.Data)
                stream._buffer += event.data
                stream.raw += event.data
                while b"\n\n" in stream._buffer:
                    block, stream._buffer = stream._buffer.split(b"\n\n", 1)
                    assert block == b": keep-alive", block
                    stream.comments += 1
        assert stream.raw.count(b": keep-alive\n\n") == 3
        await opened.tool("add_tool", name="wake")
        await sub.expect("notifications/tools/list_changed")


# -- found bugs -----------------------------------------------------------


async def test_a_cancel_is_still_read_when_subscriptions_fill_the_stdio_in_flight_window() -> None:
    async with serve(run_command("build", "--max-in-flight", "2")) as client:
        opened = StdioSide(client)
        first = await opened.listen("s1", toolsListChanged=True)
        await opened.listen("s2", toolsListChanged=True)
        await client.send(request("tools/call", "echo", name="echo", arguments={"text": "through"}))
        await opened.cancel(first)
        with anyio.fail_after(3):
            reply = await opened.hub.next_for("echo")
        assert reply["result"]["content"][0]["text"] == "through"


async def test_a_listen_that_arrives_during_shutdown_does_not_hold_it_for_the_grace_period() -> None:
    server = listen_server.build(bus=WatchedBus())
    started, release = anyio.Event(), anyio.Event()

    async def hold() -> str:
        started.set()
        await release.wait()
        return "held"

    server.add_tool(hold, name="hold")
    async with running(server, grace_period=3) as http, HttpClient.connect(http) as busy:
        async with HttpClient.connect(http) as other, HttpClient.connect(http) as early_link:
            hold_call = request("tools/call", "hold", name="hold")
            await busy.send_request("POST", "/mcp", mcp_headers(hold_call), orjson.dumps(hold_call))
            await started.wait()
            early = SseStream(early_link)
            await early.open(listen("early", toolsListChanged=True))
            await early.next()
            late = await anyio.connect_tcp("127.0.0.1", http.port)
            message = listen("late", toolsListChanged=True)
            body = orjson.dumps(message)
            head = f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{http.port}\r\ncontent-length: {len(body)}\r\n" + "".join(
                f"{name}: {value}\r\n" for name, value in mcp_headers(message).items()
            ) + "\r\n"
            await late.send(head[:24].encode())
            # a full round trip on another connection: the partial head above was read before it
            assert (await other.post(request("tools/call", 1, name="echo", arguments={"text": "x"}))).status == 200
            http.stop()
            assert (await early.next())["result"]["_meta"][SUB_ID] == "early"  # close_subscriptions() has run
            await late.send(head[24:].encode() + body)
            release.set()
            assert (await busy.read_reply()).messages[0]["result"]["content"][0]["text"] == "held"
            received = b""
            with anyio.fail_after(1.5):  # well inside the 3 s grace period
                with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                    while True:
                        received += await late.receive()
            await late.aclose()
            if b"notifications/subscriptions/acknowledged" in received:
                assert b'"resultType":"complete"' in received  # acknowledged, then ended gracefully
