"""The 2025-era Streamable HTTP wire on a real 127.0.0.1 socket, beside the stateless one.

Sessions (`Mcp-Session-Id`, DELETE, bounds, idle expiry), the standalone GET
stream, server-to-client requests on a call's stream, and era routing by body
first. Every message is checked against the schema of its era.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest

from conftest import VERSION, legacy, request
from http_client import HttpClient, SseStream, mcp_headers, running
from mcpcore.auth import AccessToken, Auth, StaticTokens
from mcpcore._runtime.call import Call
from mcpcore.middleware import Next
from mcpcore.transports._http.exchange import Exchange
from mcpcore.transports._http.resume import StreamStore
from servers import legacy_server
from test_subscriptions import WatchedBus

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_flavour")]  # the built-in server, then uvicorn
LIMIT = 10
BASE = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
CLIENT = {"name": "legacy-http", "version": "1"}


def session_headers(session_id: str, version: str = "2025-11-25") -> dict[str, str]:
    return {**BASE, "mcp-session-id": session_id, "mcp-protocol-version": version}


async def initialize(client: HttpClient, capabilities: dict[str, Any] | None = None, version: str = "2025-11-25") -> str:
    """Open a session (initialize, then notifications/initialized); its id."""
    reply = await client.post(legacy("initialize", 0, protocolVersion=version, capabilities=capabilities or {}, clientInfo=CLIENT),
                              BASE, legacy=True)
    assert reply.status == 200 and reply.response["result"]["protocolVersion"] == version, reply.body
    session_id = reply.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    accepted = await client.post(note, session_headers(session_id, version), legacy=True)
    assert accepted.status == 202 and accepted.body == b""
    return session_id


async def test_initialize_mints_a_visible_ascii_session_id_and_the_session_serves_requests() -> None:
    async with running(legacy_server.build()) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            session_id = await initialize(client)
            assert session_id and all(0x21 <= ord(c) <= 0x7E for c in session_id) and len(session_id) >= 16
            tools = await client.post(legacy("tools/list", 1), session_headers(session_id), legacy=True)
            assert "echo" in [t["name"] for t in tools.response["result"]["tools"]]
            echoed = await client.post(legacy("tools/call", 2, name="echo", arguments={"text": "hi"}), session_headers(session_id), legacy=True)
            assert echoed.response["result"] == {"content": [{"type": "text", "text": "hi"}]}
            assert echoed.headers["mcp-session-id"] == session_id


async def test_a_request_without_a_session_is_400_an_unknown_one_404_and_delete_ends_it() -> None:
    async with running(legacy_server.build()) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            missing = await client.post(legacy("tools/list", 1), {**BASE, "mcp-protocol-version": "2025-11-25"}, legacy=True)
            assert missing.status == 400 and "Mcp-Session-Id" in missing.response["error"]["message"]
            unknown = await client.post(legacy("tools/list", 2), session_headers("no-such-session"), legacy=True)
            assert unknown.status == 404 and unknown.response["error"]["code"] == -32600
            session_id = await initialize(client)
            await client.send_request("DELETE", "/mcp", session_headers(session_id))
            deleted = await client.read_reply()
            assert deleted.status == 200
            gone = await client.post(legacy("tools/list", 3), session_headers(session_id), legacy=True)
            assert gone.status == 404
            assert len(http.sessions) == 0


async def test_a_failed_initialize_mints_no_session() -> None:
    async with running(legacy_server.build()) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(legacy("initialize", 0, capabilities={}), BASE, legacy=True)
    assert reply.status == 400 and reply.response["error"]["code"] == -32602
    assert "mcp-session-id" not in reply.headers and len(http.sessions) == 0


async def test_sessions_are_bounded_and_a_flood_of_initialize_gets_a_clear_error() -> None:
    async with running(legacy_server.build(), max_sessions=3) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            ids = [await initialize(client) for _ in range(3)]
            for attempt in range(20):
                refused = await client.post(legacy("initialize", attempt, protocolVersion="2025-11-25", capabilities={}), BASE, legacy=True)
                assert refused.status == 503 and "Too many open sessions (limit 3)" in refused.response["error"]["message"]
            assert len(http.sessions) == 3
            await client.send_request("DELETE", "/mcp", session_headers(ids[0]))
            assert (await client.read_reply()).status == 200
            await initialize(client)  # a freed place can be taken again


async def test_idle_sessions_expire_and_are_freed() -> None:
    async with running(legacy_server.build(), session_idle_timeout=0.2, keep_alive_timeout=0.1) as http:
        async with HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                session_id = await initialize(client)
        with anyio.fail_after(LIMIT):  # the sweeper ends it; no request needed
            while len(http.sessions):
                await anyio.sleep(0.05)
        async with HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                gone = await client.post(legacy("ping", 1), session_headers(session_id), legacy=True)
        assert gone.status == 404


async def test_the_body_decides_the_era_and_legacy_traffic_needs_no_mcp_method_or_name() -> None:
    async with running(legacy_server.build()) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            modern = request("tools/call", 1, name="echo", arguments={"text": "modern"})
            stateless = await client.post(modern, mcp_headers(modern, **{"mcp-protocol-version": "2025-11-25"}))
            assert stateless.status == 400 and stateless.response["error"]["code"] == -32020  # modern by body; header disagrees
            assert (await client.post(modern)).response["result"]["resultType"] == "complete"
            session_id = await initialize(client)
            plain = await client.post(legacy("tools/call", 2, name="echo", arguments={"text": "x"}), session_headers(session_id), legacy=True)
            assert plain.status == 200  # no Mcp-Method, no Mcp-Name
            without_version = {**BASE, "mcp-session-id": session_id}  # treated as 2025-03-26
            assert (await client.post(legacy("ping", 3), without_version, legacy=True)).response["result"] == {}
            no_meta = await client.post(legacy("tools/list", 4), {**BASE, "mcp-protocol-version": VERSION, "mcp-method": "tools/list"})
            assert no_meta.status == 400 and no_meta.response["error"]["code"] == -32602  # a 2026 header stays modern


async def test_an_elicitation_travels_on_the_calls_stream_and_the_posted_answer_completes_it() -> None:
    async with running(legacy_server.build()) as http:
        async with HttpClient.connect(http) as client, HttpClient.connect(http) as answers:
            with anyio.fail_after(LIMIT):
                session_id = await initialize(client, {"elicitation": {}})
                stream = SseStream(client, "tools/call", legacy=True)
                await stream.open(legacy("tools/call", 7, name="greet", arguments={}), session_headers(session_id))
                asked = await stream.next()
                assert asked is not None and asked["method"] == "elicitation/create" and "mode" in asked["params"]
                answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
                taken = await answers.post(answer, session_headers(session_id), legacy=True)
                assert taken.status == 202
                final = await stream.next()
                assert final is not None and final["id"] == 7 and final["result"]["content"][0]["text"] == "Hello, Ada!"
                stale = await answers.post(answer, session_headers(session_id), legacy=True)
                assert stale.status == 400  # nothing waits for that id any more


async def test_the_standalone_stream_carries_list_changes_and_a_second_one_is_409() -> None:
    async with running(legacy_server.build()) as http:
        async with HttpClient.connect(http) as client, HttpClient.connect(http) as side, HttpClient.connect(http) as other:
            with anyio.fail_after(LIMIT):
                session_id = await initialize(client)
                stream = SseStream(side, legacy=True)
                head = await stream.open_get(session_headers(session_id))
                assert head["mcp-session-id"] == session_id
                await other.send_request("GET", "/mcp", {"accept": "text/event-stream", **session_headers(session_id)})
                assert (await other.read_reply()).status == 409
                await client.post(legacy("resources/subscribe", 1, uri="demo://note"), session_headers(session_id), legacy=True)
                await client.post(legacy("tools/call", 2, name="add_tool", arguments={"name": "fresh"}), session_headers(session_id), legacy=True)
                await client.post(legacy("tools/call", 3, name="touch", arguments={"uri": "demo://note"}), session_headers(session_id), legacy=True)
                seen = [await stream.next(), await stream.next()]
                assert [m["method"] for m in seen if m] == ["notifications/tools/list_changed", "notifications/resources/updated"]
                await client.send_request("DELETE", "/mcp", session_headers(session_id))
                assert (await client.read_reply()).status == 200
                assert await stream.next() is None  # ending the session ends its stream


async def test_dropping_a_legacy_post_stream_does_not_cancel_the_call() -> None:
    async with running(legacy_server.build()) as http:
        async with HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                session_id = await initialize(client, {"elicitation": {}})
        async with HttpClient.connect(http) as dropped:
            stream = SseStream(dropped, "tools/call", legacy=True)
            with anyio.fail_after(LIMIT):
                await stream.open(legacy("tools/call", 9, name="greet", arguments={}), session_headers(session_id))
                assert (await stream.next())["method"] == "elicitation/create"  # type: ignore[index]
        session = http.sessions.get(session_id)
        assert session is not None and 9 in session.calls  # still waiting: only notifications/cancelled cancels
        async with HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
                assert (await client.post(note, session_headers(session_id), legacy=True)).status == 202
                while 9 in session.calls:
                    await anyio.sleep(0.01)


async def test_a_2025_11_25_stream_is_resumable_after_the_handler_closes_it() -> None:
    async with running(legacy_server.build()) as http:
        async with HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                session_id = await initialize(client)
        async with HttpClient.connect(http) as polling:
            stream = SseStream(polling, "tools/call", legacy=True)
            with anyio.fail_after(LIMIT):
                await stream.open(legacy("tools/call", 5, name="polled", arguments={}, _meta={"progressToken": "t"}), session_headers(session_id))
                first = await stream.next()
                assert first is not None and first["method"] == "notifications/progress"
                assert await stream.next() is None  # the server ended the stream before the result
        priming, last = stream.event_ids[0], stream.event_ids[-1]
        assert priming.endswith(".1") and b"retry: 100" in stream.raw and b"id: " + priming.encode() + b"\nretry" in stream.raw
        async with HttpClient.connect(http) as resumed:
            rest = SseStream(resumed, "tools/call", legacy=True)
            with anyio.fail_after(LIMIT):
                await rest.open_get({**session_headers(session_id), "last-event-id": last})
                progress = await rest.next()
                result = await rest.next()
                assert await rest.next() is None
        assert progress is not None and progress["params"]["progress"] == 2
        assert result is not None and result["id"] == 5 and result["result"]["content"][0]["text"] == "polled"
        async with HttpClient.connect(http) as again:  # replayed from the store once more, from the same point
            replay = SseStream(again, "tools/call", legacy=True)
            with anyio.fail_after(LIMIT):
                await replay.open_get({**session_headers(session_id), "last-event-id": last})
                assert [(await replay.next()) is not None, (await replay.next())["id"]] == [True, 5]  # type: ignore[index]
        async with HttpClient.connect(http) as unknown:
            with anyio.fail_after(LIMIT):
                await unknown.send_request("GET", "/mcp", {"accept": "text/event-stream", **session_headers(session_id), "last-event-id": "s99.1"})
                assert (await unknown.read_reply()).status == 404


async def test_older_sessions_keep_plain_json_replies() -> None:
    async with running(legacy_server.build()) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            session_id = await initialize(client, version="2025-06-18")
            reply = await client.post(legacy("tools/call", 1, name="echo", arguments={"text": "x"}), session_headers(session_id, "2025-06-18"), legacy=True)
    assert reply.headers["content-type"] == "application/json"


async def test_a_stream_whose_events_all_left_the_store_cannot_be_resumed_from_an_old_id() -> None:
    store = StreamStore(max_events=2)
    stream = store.open(None, lambda: None)  # type: ignore[arg-type]
    for _ in range(3):  # s1.1 primes it, then s1.2 .. s1.4, sent without a connection
        await stream.notify(b"{}")
    other = store.open(None, lambda: None)  # type: ignore[arg-type]
    for _ in range(2):  # pushes every s1 event out of the store
        await other.notify(b"{}")
    assert store.find("s1.2") is None and store.find("s1.4") is stream  # after the newest: nothing missed
    assert store.find("s1.9") is None  # never sent
    stream.end()  # its call ended unanswered: with nothing of it stored, it is gone
    assert store.find("s1.4") is None and list(store.streams) == ["s2"]


class HeldAnswers:
    """Middleware holding each `initialize`'s answer (its session already negotiated) until `release`,
    so a test can make the client leave first; `lost` is set when an exchange has seen its peer leave."""

    def __init__(self) -> None:
        self.negotiated, self.release, self.lost = anyio.Event(), anyio.Event(), anyio.Event()

    async def __call__(self, call: Call, call_next: Next) -> bytes:
        answer = await call_next(call)
        if call.message["method"] == "initialize":
            self.negotiated.set()
            await self.release.wait()
        return answer

    def watch_peers(self, monkeypatch: pytest.MonkeyPatch) -> None:
        seen_leaving = Exchange._lost

        def lost(exchange: Exchange) -> None:
            seen_leaving(exchange)
            self.lost.set()

        monkeypatch.setattr(Exchange, "_lost", lost)

    def rearm(self) -> None:
        self.negotiated, self.release, self.lost = anyio.Event(), anyio.Event(), anyio.Event()


OPEN = legacy("initialize", 0, protocolVersion="2025-11-25", capabilities={}, clientInfo=CLIENT)


async def test_an_initialize_whose_client_left_before_its_answer_gives_back_everything_it_took(
        monkeypatch: pytest.MonkeyPatch) -> None:
    held, bus = HeldAnswers(), WatchedBus()
    held.watch_peers(monkeypatch)
    server = legacy_server.build(bus=bus, middleware=[held])
    async with running(server, max_sessions=2) as http:
        for _ in range(3):  # more than max_sessions: each left place must be free again
            async with HttpClient.connect(http) as client:
                await client.send_request("POST", "/mcp", BASE, orjson.dumps(OPEN))
                with anyio.fail_after(LIMIT):
                    await held.negotiated.wait()
            with anyio.fail_after(LIMIT):
                await held.lost.wait()  # the server saw the client leave; now the answer is written
                held.release.set()
                await bus.until(lambda: len(bus.subscribers) == len(http.sessions) == 0)
            held.rearm()
        held.release.set()  # from here on answers go out at once
        async with HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                ids = [await initialize(client) for _ in range(2)]
        assert len(http.sessions) == len(bus.subscribers) == 2 and len(set(ids)) == 2


async def test_a_failed_initialize_and_a_deleted_session_leave_no_subscriber_on_the_bus() -> None:
    bus = WatchedBus()
    async with running(legacy_server.build(bus=bus)) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            failed = await client.post(legacy("initialize", 0, capabilities={}), BASE, legacy=True)
            assert failed.status == 400 and len(bus.subscribers) == 0
            session_id = await initialize(client)
            assert len(bus.subscribers) == 1
            await client.send_request("DELETE", "/mcp", session_headers(session_id))
            assert (await client.read_reply()).status == 200
            assert len(bus.subscribers) == len(http.sessions) == 0


PEOPLE = {f"{name}-token": AccessToken(name, "client", frozenset()) for name in ("alice", "bob")}


def guarded() -> Any:
    return legacy_server.build(auth=Auth(StaticTokens(PEOPLE), "http://127.0.0.1:8000/mcp", ("https://auth.example.com",)))


def as_(person: str, headers: dict[str, str]) -> dict[str, str]:
    return {**headers, "authorization": f"Bearer {person}-token"}


async def open_as(client: HttpClient, person: str) -> Any:
    return await client.post(OPEN, as_(person, BASE), legacy=True)


async def test_one_principal_holds_only_its_share_of_the_sessions_and_gets_each_place_back() -> None:
    async with running(guarded(), max_sessions=20) as http, HttpClient.connect(http) as client:  # share: a tenth
        with anyio.fail_after(LIMIT):
            for attempt in range(3):  # failed initializes take nothing for good
                bad = await client.post(legacy("initialize", attempt, capabilities={}), as_("alice", BASE), legacy=True)
                assert bad.status == 400
            first, second = await open_as(client, "alice"), await open_as(client, "alice")
            assert first.status == second.status == 200
            refused = await open_as(client, "alice")
            assert refused.status == 503 and refused.headers["retry-after"] == "1"
            assert refused.response["error"]["code"] == -32600
            assert "max_sessions_per_principal 2" in refused.response["error"]["message"]
            assert (await open_as(client, "bob")).status == 200  # another principal is not locked out
            ended = as_("alice", session_headers(first.headers["mcp-session-id"]))
            await client.send_request("DELETE", "/mcp", ended)
            assert (await client.read_reply()).status == 200
            assert (await open_as(client, "alice")).status == 200  # the ended session's place is hers again
            assert len(http.sessions) == 3


async def test_the_share_is_configurable_and_anonymous_clients_have_none() -> None:
    async with running(guarded(), max_sessions=20, max_sessions_per_principal=1) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            assert (await open_as(client, "alice")).status == 200
            assert "max_sessions_per_principal 1" in (await open_as(client, "alice")).response["error"]["message"]
    async with running(legacy_server.build(), max_sessions=3) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):  # no auth: no principal, so only max_sessions bounds them
            assert [(await client.post(OPEN, BASE, legacy=True)).status for _ in range(4)] == [200, 200, 200, 503]


async def test_a_session_follows_only_resources_as_many_as_a_subscription_may_and_a_repeat_counts_once() -> None:
    server = legacy_server.build(max_subscription_uris=3)

    @server.resource("demo://notes/{name}")
    def named(name: str) -> str:
        return f"note {name}"

    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            session_id = await initialize(client)
            headers = session_headers(session_id)

            async def subscribe(request_id: int, uri: str, method: str = "resources/subscribe") -> Any:
                return await client.post(legacy(method, request_id, uri=uri), headers, legacy=True)

            missing = await subscribe(1, "demo://nothing/" + "x" * 4000)
            assert missing.status == 200 and missing.response["error"]["code"] == -32002
            assert missing.response["error"]["data"] == {"uri": "demo://nothing/" + "x" * 4000}
            for request_id, uri in enumerate(["demo://note", "demo://notes/a", "demo://note", "demo://notes/b"], 2):
                assert (await subscribe(request_id, uri)).response["result"] == {}  # a static resource or a template's
            full = await subscribe(6, "demo://notes/c")
            assert full.response["error"]["code"] == -32602 and "at most 3 resource URIs" in full.response["error"]["message"]
            too_long = await subscribe(7, "demo://notes/" + "y" * 4096)
            assert too_long.response["error"]["code"] == -32602
            assert (await subscribe(8, "demo://notes/a", "resources/unsubscribe")).response["result"] == {}
            assert (await subscribe(9, "demo://notes/never-followed", "resources/unsubscribe")).response["result"] == {}
            assert (await subscribe(10, "demo://notes/c")).response["result"] == {}  # a place freed by unsubscribing
            session = http.sessions.get(session_id)
            assert session is not None and session.followed == 3
