"""The deprecated HTTP+SSE transport (2024-11-05) on a real 127.0.0.1 socket, beside `/mcp`.

`GET /sse` opens a session's stream (its first event `endpoint` names the message
URL); each message is POSTed there and answered 202, its answers travel on the
stream. The checks of the MCP endpoint, the session bounds, subject binding,
idle expiry and the clean-up when the stream ends, on the built-in server and
under uvicorn. Every message on a stream is checked against the 2025-11-25 schema.
"""

from __future__ import annotations

from typing import Any

import anyio
import h11
import orjson
import pytest

from http_client import HttpClient, running
from mcpcore import Server
from mcpcore.auth import AccessToken, Auth, StaticTokens
from mcpcore.transports._http import legacysse
from mcpcore.transports.http import HttpConfig, HttpServer
from servers import legacy_server
from wire_schema import check_legacy

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_flavour")]  # the built-in server, then uvicorn
LIMIT = 10
JSON = {"content-type": "application/json"}
CLIENT = {"name": "legacy-sse", "version": "1"}


def legacy(method: str, request_id: Any = None, **params: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    if params:
        message["params"] = params
    return message


class Stream:
    """`GET /sse` on a connection of its own, read event by event."""

    def __init__(self, client: HttpClient) -> None:
        self.client = client
        self.comments = 0
        self.ended = False
        self._buffer = b""

    async def open(self, headers: dict[str, str] | None = None, target: str = "/sse") -> str:
        """Open the stream; the message URL its `endpoint` event names."""
        await self.client.send_request("GET", target, {"accept": "text/event-stream", **(headers or {})})
        response = await self.client._next()
        assert response.status_code == 200, response
        assert dict(response.headers)[b"content-type"] == b"text/event-stream"
        kind, data = await self.event()  # type: ignore[misc]
        assert kind == "endpoint"
        return data.decode()

    async def event(self, comments: bool = False) -> tuple[str, bytes] | None:
        """The next event, (its name, its data), or with `comments` the next comment too (":", its text);
        None once the stream ended."""
        while True:
            if b"\n\n" in self._buffer:
                block, self._buffer = self._buffer.split(b"\n\n", 1)
                lines = block.split(b"\n")
                if all(line.startswith(b":") for line in lines):
                    self.comments += 1
                    if comments:
                        return ":", block[1:].strip()
                    continue
                fields = dict(line.split(b": ", 1) for line in lines)
                return fields[b"event"].decode(), fields[b"data"]
            if self.ended:
                return None
            event = await self.client._next()
            if isinstance(event, h11.Data):
                self._buffer += event.data
            else:
                self.ended = True

    async def message(self, method: str | None = None) -> dict[str, Any]:
        """The next `message` event (skipping none), checked against the 2025-11-25 schema."""
        got = await self.event()
        assert got is not None, "the stream ended"
        assert got[0] == "message", got
        return check_legacy(orjson.loads(got[1]), method)


async def post(client: HttpClient, uri: str, message: Any, headers: dict[str, str] | None = None,
               raw: bytes | None = None) -> Any:
    await client.send_request("POST", uri, JSON if headers is None else headers,
                              orjson.dumps(message) if raw is None else raw)
    return await client.read_reply()


async def handshake(client: HttpClient, stream: Stream, uri: str, capabilities: dict[str, Any] | None = None,
                    headers: dict[str, str] | None = None) -> dict[str, Any]:
    """initialize, then notifications/initialized, through `uri`; the initialize result."""
    opening = legacy("initialize", 0, protocolVersion="2024-11-05", capabilities=capabilities or {}, clientInfo=CLIENT)
    assert (await post(client, uri, opening, {**JSON, **(headers or {})})).status == 202
    answer = await stream.message("initialize")
    assert answer["id"] == 0
    assert (await post(client, uri, legacy("notifications/initialized"), {**JSON, **(headers or {})})).status == 202
    return answer["result"]


class Gate:
    """What the `blocked` tool waits on, and what it tells."""

    def __init__(self) -> None:
        self.started, self.release, self.cancelled = anyio.Event(), anyio.Event(), anyio.Event()


def gated(gate: Gate, **options: Any) -> Server:
    server = legacy_server.build(**options)

    async def blocked() -> str:
        """Wait for the test to release it."""
        gate.started.set()
        try:
            await gate.release.wait()
        except anyio.get_cancelled_exc_class():
            gate.cancelled.set()
            raise
        return "released"

    server.add_tool(blocked)
    return server


async def test_the_stream_opens_with_the_endpoint_event_and_carries_every_answer_while_posts_get_202() -> None:
    async with running(legacy_server.build()) as http:
        async with HttpClient.connect(http) as opener, HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                stream = Stream(opener)
                uri = await stream.open()
                path, _, query = uri.partition("?")
                assert path == "/messages" and query.startswith("session_id=") and len(http.sessions) == 1
                result = await handshake(client, stream, uri, {"elicitation": {}})
                assert result["protocolVersion"] == "2024-11-05" and "resultType" not in result
                listed = await post(client, uri, legacy("tools/list", 1))
                assert listed.status == 202 and listed.body == b""
                assert "echo" in [tool["name"] for tool in (await stream.message("tools/list"))["result"]["tools"]]
                assert (await post(client, uri, legacy("logging/setLevel", 5, level="info"))).status == 202
                assert (await stream.message("logging/setLevel"))["result"] == {}
                steps = legacy("tools/call", 2, name="steps", arguments={}, _meta={"progressToken": "p"})
                assert (await post(client, uri, steps)).status == 202
                heard = [await stream.message("tools/call") for _ in range(7)]
                assert [m.get("method") for m in heard[:6]] == ["notifications/progress", "notifications/message"] * 3
                assert heard[-1]["id"] == 2 and heard[-1]["result"]["content"][0]["text"].startswith("done for")
                assert (await post(client, uri, legacy("tools/call", 3, name="greet", arguments={}))).status == 202
                asked = await stream.message("tools/call")
                assert asked["method"] == "elicitation/create"
                answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
                assert (await post(client, uri, answer)).status == 202
                greeted = await stream.message("tools/call")
                assert greeted["id"] == 3 and greeted["result"]["content"][0]["text"] == "Hello, Ada!"
                stale = await post(client, uri, answer)
                assert stale.status == 400 and stale.response["error"]["code"] == -32600  # nothing waits for it now
                await post(client, uri, legacy("tools/call", 4, name="add_tool", arguments={"name": "fresh"}))
                changed = {(await stream.message()).get("method") for _ in range(2)}
                assert changed == {"notifications/tools/list_changed", None}  # the change, and the call's answer


async def test_a_message_needs_the_session_id_of_a_live_session() -> None:
    async with running(legacy_server.build()) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            missing = await post(client, "/messages", legacy("ping", 1))
            assert missing.status == 400 and "session_id" in missing.response["error"]["message"]
            unknown = await post(client, "/messages?session_id=no-such-session", legacy("ping", 1))
            assert unknown.status == 404 and unknown.response["error"]["code"] == -32600
            async with HttpClient.connect(http) as opener:
                uri = await Stream(opener).open()
                assert (await post(client, uri, legacy("ping", 2))).status == 202
            for _ in range(100):  # the stream's end is the session's
                if not len(http.sessions):
                    break
                await anyio.sleep(0.02)
            assert (await post(client, uri, legacy("ping", 3))).status == 404


async def test_a_message_passes_the_checks_of_the_mcp_endpoint() -> None:
    async with running(legacy_server.build(), max_body_bytes=1000) as http:
        async with HttpClient.connect(http) as opener, HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                uri = await Stream(opener).open()
                assert (await post(client, uri, legacy("ping", 1), {"content-type": "text/plain"})).status == 415
                unparsable = await post(client, uri, None, raw=b"{not json")
                assert unparsable.status == 400 and unparsable.response["error"]["code"] == -32700
                batch = await post(client, uri, [legacy("ping", 1)])
                assert batch.status == 400 and batch.response["error"]["code"] == -32600
                foreign = await post(client, uri, legacy("ping", 1), {**JSON, "origin": "https://evil.example"})
                assert foreign.status == 403
                too_big = await post(client, uri, legacy("tools/call", 2, name="echo", arguments={"text": "x" * 2000}))
                assert too_big.status == 413
        async with HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                await client.send_request("GET", uri, {"accept": "text/event-stream"})
                wrong = await client.read_reply()
                assert wrong.status == 405 and wrong.headers["allow"] == "POST"
                await client.send_request("POST", "/sse", JSON, b"{}")
                wrong = await client.read_reply()
                assert wrong.status == 405 and wrong.headers["allow"] == "GET"
                await client.send_request("GET", "/sse", {"origin": "https://evil.example"})
                assert (await client.read_reply()).status == 403


PEOPLE = {f"{name}-token": AccessToken(name, "client", frozenset()) for name in ("alice", "bob")}


def guarded(**options: Any) -> Server:
    return legacy_server.build(auth=Auth(StaticTokens(PEOPLE), "http://127.0.0.1:8000/mcp", ("https://auth.example.com",)),
                               **options)


def as_(person: str) -> dict[str, str]:
    return {"authorization": f"Bearer {person}-token"}


async def test_only_the_principal_that_opened_the_stream_may_post_to_its_session() -> None:
    async with running(guarded()) as http:
        async with HttpClient.connect(http) as opener, HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                await client.send_request("GET", "/sse", {"accept": "text/event-stream"})
                refused = await client.read_reply()
                assert refused.status == 401 and "www-authenticate" in refused.headers
                stream = Stream(opener)
                uri = await stream.open(as_("alice"))
                assert (await post(client, uri, legacy("ping", 1))).status == 401
                stranger = await post(client, uri, legacy("ping", 1), {**JSON, **as_("bob")})
                assert stranger.status == 404  # as if there were no such session
                await handshake(client, stream, uri, headers=as_("alice"))
                assert (await post(client, uri, legacy("ping", 2), {**JSON, **as_("alice")})).status == 202
                assert (await stream.message("ping"))["id"] == 2
                await client.send_request("POST", "/mcp", {**JSON, "accept": "application/json, text/event-stream",
                                                           "mcp-session-id": uri.rpartition("=")[2], **as_("alice")},
                                          orjson.dumps(legacy("ping", 3)))
                assert (await client.read_reply()).status == 404  # an HTTP+SSE session is not served on /mcp


async def test_a_stream_lasts_while_the_token_that_opened_it_does() -> None:
    import time

    brief = {"brief-token": AccessToken("carol", "client", frozenset(), expires_at=time.time() + 1)}
    server = legacy_server.build(auth=Auth(StaticTokens(brief), "http://127.0.0.1:8000/mcp", ("https://auth.example.com",)))
    async with running(server) as http, HttpClient.connect(http) as opener:
        with anyio.fail_after(LIMIT):
            stream = Stream(opener)
            await stream.open(as_("brief"))
            assert len(http.sessions) == 1
            assert await stream.event() is None  # its token expired: the stream, and its session, ended
            assert len(http.sessions) == 0


async def test_streams_take_session_places_and_a_full_server_answers_503() -> None:
    async with running(guarded(), max_sessions=20, max_sessions_per_principal=1) as http:
        async with HttpClient.connect(http) as first, HttpClient.connect(http) as second, HttpClient.connect(http) as other:
            with anyio.fail_after(LIMIT):
                await Stream(first).open(as_("alice"))
                await second.send_request("GET", "/sse", as_("alice"))
                refused = await second.read_reply()
                assert refused.status == 503 and refused.headers["retry-after"] == "1"
                assert "max_sessions_per_principal 1" in refused.response["error"]["message"]
                await Stream(other).open(as_("bob"))  # another principal is not locked out
                assert len(http.sessions) == 2
        async with HttpClient.connect(http) as again:
            with anyio.fail_after(LIMIT):
                for _ in range(100):  # both streams ended: their places are free
                    if not len(http.sessions):
                        break
                    await anyio.sleep(0.02)
                await Stream(again).open(as_("alice"))
    async with running(legacy_server.build(), max_sessions=1) as http:
        async with HttpClient.connect(http) as first, HttpClient.connect(http) as second:
            with anyio.fail_after(LIMIT):
                await Stream(first).open()
                await second.send_request("GET", "/sse")
                full = await second.read_reply()
                assert full.status == 503 and "Too many open sessions (limit 1)" in full.response["error"]["message"]


async def test_closing_the_stream_ends_the_session_cancels_its_calls_and_frees_its_place() -> None:
    gate = Gate()
    async with running(gated(gate), max_sessions=1) as http, HttpClient.connect(http) as client:
        async with HttpClient.connect(http) as opener:
            with anyio.fail_after(LIMIT):
                stream = Stream(opener)
                uri = await stream.open()
                await handshake(client, stream, uri)
                assert (await post(client, uri, legacy("tools/call", 1, name="blocked", arguments={}))).status == 202
                await gate.started.wait()
        with anyio.fail_after(LIMIT):
            await gate.cancelled.wait()
            while len(http.sessions):
                await anyio.sleep(0.02)
            assert (await post(client, uri, legacy("ping", 2))).status == 404
            async with HttpClient.connect(http) as opener:
                await Stream(opener).open()  # the one place is free again


async def test_a_request_id_in_flight_is_refused_and_so_are_requests_past_the_sessions_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(legacysse, "MAX_CALLS", 2)
    gate = Gate()
    async with running(gated(gate)) as http:
        async with HttpClient.connect(http) as opener, HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                stream = Stream(opener)
                uri = await stream.open()
                await handshake(client, stream, uri)
                assert (await post(client, uri, legacy("tools/call", 1, name="blocked", arguments={}))).status == 202
                again = await post(client, uri, legacy("tools/call", 1, name="echo", arguments={"text": "x"}))
                assert again.status == 400 and "already in flight" in again.response["error"]["message"]
                assert (await post(client, uri, legacy("tools/call", 2, name="blocked", arguments={}))).status == 202
                over = await post(client, uri, legacy("ping", 3))
                assert over.status == 503 and over.headers["retry-after"] == "1"
                cancel = legacy("notifications/cancelled", requestId=1)
                assert (await post(client, uri, cancel)).status == 202
                gate.release.set()
                assert (await stream.message("tools/call"))["id"] == 2  # the cancelled call sent nothing
                assert (await post(client, uri, legacy("ping", 3))).status == 202
                assert (await stream.message("ping"))["id"] == 3


async def test_an_idle_session_expires_and_its_stream_ends() -> None:
    async with running(legacy_server.build(), session_idle_timeout=0.3) as http, HttpClient.connect(http) as opener:
        with anyio.fail_after(LIMIT):
            stream = Stream(opener)
            await stream.open()
            assert await stream.event() is None
            assert len(http.sessions) == 0


async def test_an_idle_stream_gets_keepalive_comments() -> None:
    async with running(legacy_server.build(), sse_keepalive=0.05) as http, HttpClient.connect(http) as opener:
        with anyio.fail_after(LIMIT):
            stream = Stream(opener)
            await stream.open()
            assert [await stream.event(comments=True) for _ in range(2)] == [(":", b"keep-alive")] * 2


async def test_a_draining_server_lets_the_calls_in_flight_answer_on_the_stream_then_ends_it() -> None:
    gate = Gate()
    async with running(gated(gate)) as http:
        async with HttpClient.connect(http) as opener, HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                stream = Stream(opener)
                uri = await stream.open()
                await handshake(client, stream, uri)
                assert (await post(client, uri, legacy("tools/call", 1, name="blocked", arguments={}))).status == 202
                await gate.started.wait()
                http.stop()
                while not http.closing:  # draining: the stream stays open for the call
                    await anyio.sleep(0.01)
                gate.release.set()
                assert (await stream.message("tools/call"))["result"]["content"][0]["text"] == "released"
                assert await stream.event() is None


async def test_the_transport_is_switched_off_with_no_stream_path() -> None:
    async with running(legacy_server.build(), sse_path=None) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            await client.send_request("GET", "/sse", {"accept": "text/event-stream"})
            assert (await client.read_reply()).status == 404
            assert (await post(client, "/messages?session_id=x", legacy("ping", 1))).status == 404


@pytest.mark.parametrize(("switch", "why"), [("stateless", "runs stateless"), ("json_response", "answers JSON only")])
async def test_a_stateless_or_json_only_server_serves_no_http_sse(switch: str, why: str) -> None:
    async with running(legacy_server.build(), **{switch: True}) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            await client.send_request("GET", "/sse", {"accept": "text/event-stream"})
            refused = await client.read_reply()
            assert refused.status == 404 and why in refused.response["error"]["message"]
            assert (await post(client, "/messages?session_id=x", legacy("ping", 1))).status == 404
            assert len(http.sessions) == 0


async def test_the_paths_are_configurable() -> None:
    async with running(legacy_server.build(), sse_path="/events", sse_message_path="/events/post") as http:
        async with HttpClient.connect(http) as opener, HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                stream = Stream(opener)
                uri = await stream.open(target="/events")
                assert uri.startswith("/events/post?session_id=")
                await handshake(client, stream, uri)


@pytest.mark.builtin_http("the paths are checked where the endpoint is made")
def test_the_transports_paths_must_be_paths_of_their_own() -> None:
    server = legacy_server.build()
    for clash in ({"sse_message_path": "/sse"}, {"sse_path": "/mcp"}, {"sse_message_path": "messages"},
                  {"sse_path": "/healthz"}):
        with pytest.raises(ValueError, match="HTTP\\+SSE paths"):
            HttpServer(server, HttpConfig(**clash))
    server.custom_route("/sse")(lambda request: "mine")
    with pytest.raises(ValueError, match="'/sse'"):
        HttpServer(server, HttpConfig())
    HttpServer(server, HttpConfig(sse_path=None))  # switched off, the path is the route's


@pytest.mark.parametrize("off", [{"sse_path": None}, {"sse_path": ""}])
async def test_the_switched_off_transport_says_so_and_where_clients_go_instead(off: dict[str, Any]) -> None:
    async with running(legacy_server.build(), **off) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            await client.send_request("GET", "/sse", {"accept": "text/event-stream"})
            for refused in (await client.read_reply(), await post(client, "/messages?session_id=x", legacy("ping", 1))):
                assert refused.status == 404
                assert refused.response["error"]["message"] == (
                    "Not found: this server serves no HTTP+SSE (2024-11-05) transport (sse_path is off); "
                    "use Streamable HTTP at /mcp (protocol 2025-03-26 and later)")


@pytest.mark.parametrize(("config", "where"), [
    ({}, "an HTTP+SSE (2024-11-05) client opens its stream with GET /sse"),
    ({"sse_path": None}, "this server serves no HTTP+SSE (2024-11-05) transport"),
])
async def test_a_get_on_the_endpoint_without_a_session_says_what_is_served_where(config: dict[str, Any], where: str) -> None:
    async with running(legacy_server.build(), **config) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            await client.send_request("GET", "/mcp", {"accept": "text/event-stream"})  # as an HTTP+SSE client would
            refused = await client.read_reply()
    assert refused.status == 400
    assert refused.response["error"]["message"] == (
        "GET /mcp opens a 2025-era session's stream, so the Mcp-Session-Id header is required (send initialize first); "
        f"2026-07-28 clients POST each request to /mcp; {where}")
