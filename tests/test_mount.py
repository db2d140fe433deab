"""`server.mount(prefix, other)`: an mcpcore server in process, or a Gateway over the Bash upstream, served
under a prefix on a real HTTP server on 127.0.0.1 and in memory, in both eras (mcpcore/_serving/mount.py)."""

from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator

import anyio
import pytest

from conftest import legacy, request
from http_client import HttpClient, SseStream, running
from mcpcore import Context, Elicit, InputRequired, Server
from mcpcore.auth import AccessToken, Auth, StaticTokens
from mcpcore.client import Client
from mcpcore.gateway import Gateway
from mcpcore.middleware import Next
from mcpcore._runtime.call import Call
from mcpcore._wire.jsonrpc import McpError
from test_bash_upstream import command  # noqa: F401 (the fixture: the Bash upstream, skipped without bash and jq)
from test_legacy_http import initialize, session_headers

pytestmark = pytest.mark.anyio

ERAS = ["2026-07-28", "2025-11-25"]
WHERE = ["memory", "http"]
LIMIT = 30
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def weather(events: list[Any] | None = None, **options: Any) -> Server:
    """The server to mount: a tool that reports progress and logs, one that asks, a resource, a template,
    a prompt, and a lifespan that says when it starts and stops."""
    events = [] if events is None else events

    @contextlib.asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[str]:
        events.append("weather up")
        yield "weather-pool"
        events.append("weather down")

    server = Server("weather", lifespan=lifespan, **options)

    @server.tool
    async def forecast(city: str, ctx: Context) -> str:
        """Tomorrow's weather."""
        await ctx.progress(1, 2, "looking")
        await ctx.info(f"forecast for {city}")
        return f"sunny in {city} (from {ctx.lifespan})"

    @server.tool
    def ask(ctx: Context) -> str:
        answer = ctx.answer("name")
        if answer is None:
            raise InputRequired(name=Elicit("Who is asking?", NAME_FORM))
        return f"hello {answer.content['name']}" if answer.accepted else "no name"

    @server.resource("weather://today", mime_type="text/plain")
    def today() -> str:
        return "rain"

    @server.resource("weather://city/{name}")
    def city(name: str) -> str:
        return f"weather in {name}"

    @server.prompt
    def brief(city: str) -> str:
        return f"Brief me on {city}."

    return server


def answer_name(params: dict[str, Any]) -> dict[str, Any]:
    assert params["message"] == "Who is asking?"
    return {"action": "accept", "content": {"name": "Ada"}}


@contextlib.asynccontextmanager
async def connected(server: Server, where: str, era: str, **options: Any) -> AsyncIterator[Client]:
    """`mcpcore.testing`'s client in memory, or `mcpcore.client` over a real HTTP server on 127.0.0.1."""
    if where == "memory":
        async with Client(server, era=era, **options) as client:
            yield client
        return
    async with running(server) as http:
        async with Client.http(f"http://127.0.0.1:{http.port}/mcp", era=era, strict=True, **options) as client:
            yield client


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("where", WHERE)
async def test_a_mounted_servers_items_are_served_under_the_prefix_inside_its_lifespan(where: str, era: str) -> None:
    events: list[Any] = []

    @contextlib.asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[None]:
        events.append("front up")
        yield
        events.append("front down")

    front = Server("front", lifespan=lifespan)

    @front.tool
    def local(text: str) -> str:
        return text

    front.mount("weather", weather(events))
    async with connected(front, where, era, elicit=answer_name) as client:
        with anyio.fail_after(LIMIT):
            assert events == ["front up", "weather up"]
            tools = {tool["name"]: tool for tool in await client.list_tools()}
            assert list(tools) == ["local", "weather_forecast", "weather_ask"]
            assert tools["weather_forecast"]["description"] == "Tomorrow's weather."
            assert tools["weather_forecast"]["inputSchema"]["required"] == ["city"]
            outcome = await client.call_tool("weather_forecast", {"city": "Oslo"})
            assert outcome.text == "sunny in Oslo (from weather-pool)"
            assert [note["message"] for note in outcome.progress] == ["looking"]
            assert (await client.call_tool("weather_ask")).text == "hello Ada"
            assert [r["uri"] for r in await client.list_resources()] == ["weather+weather://today"]
            assert [t["uriTemplate"] for t in await client.list_resource_templates()] == ["weather+weather://city/{name}"]
            [today] = await client.read_resource("weather+weather://today")
            assert today == {"uri": "weather+weather://today", "mimeType": "text/plain", "text": "rain"}
            [oslo] = await client.read_resource("weather+weather://city/Oslo")
            assert oslo["uri"] == "weather+weather://city/Oslo" and oslo["text"] == "weather in Oslo"
            [prompt] = await client.list_prompts()
            assert prompt["name"] == "weather_brief"
            got = await client.get_prompt("weather_brief", {"city": "Oslo"})
            assert got["messages"][0]["content"]["text"] == "Brief me on Oslo."
            with pytest.raises(McpError) as unknown:
                await client.call_tool("forecast", {"city": "Oslo"})
            assert unknown.value.code == -32602  # only the served name reaches it
    assert events == ["front up", "weather up", "weather down", "front down"]


async def test_a_mounted_tools_log_messages_reach_the_caller() -> None:
    front = Server("front")
    front.mount("weather", weather())
    async with Client(front) as client:
        with anyio.fail_after(LIMIT):
            outcome = await client.request("tools/call", {"name": "weather_forecast", "arguments": {"city": "Rome"},
                                                           "_meta": {"io.modelcontextprotocol/logLevel": "info"}})
            assert [log["data"] for log in outcome.logs] == ["forecast for Rome"]


async def test_a_name_the_mounting_server_has_is_refused_at_mount_time_unless_replace() -> None:
    front = Server("front")

    @front.tool(name="weather_forecast")
    def mine() -> str:
        return "mine"

    other = weather()
    with pytest.raises(ValueError, match="would serve 'weather_forecast', which server 'front' already has"):
        front.mount("weather", other)
    assert [tool.key for tool in front.tools] == ["weather_forecast"] and not front.mounts  # nothing half-mounted
    with pytest.raises(ValueError, match="a mount prefix is a letter"):
        front.mount("my_weather", other)  # its '_' would make `my_weather_x` ambiguous
    with pytest.raises(ValueError, match="would loop"):
        front.mount("self", front)
    front.mount("weather", other, replace=True)
    with pytest.raises(ValueError, match="already mounted at 'weather'"):
        front.mount("weather", weather())
    with pytest.raises(ValueError, match="already registered"):
        front.add_tool(mine, name="weather_ask")  # registration is refused the same way
    with pytest.raises(ValueError, match="would loop"):
        other.mount("front", front)
    async with Client(front) as client:
        with anyio.fail_after(LIMIT):
            assert (await client.call_tool("weather_forecast", {"city": "Oslo"})).text.startswith("sunny in Oslo")


async def test_a_replacement_that_cannot_be_mounted_leaves_the_mount_it_would_replace() -> None:
    front, long_named = Server("front"), Server("long")
    front.mount("weather", weather())

    @long_named.tool(name="x" * 126)
    def far() -> str:
        return "far"

    with pytest.raises(ValueError, match="mounting at 'weather'"):  # weather_xxx… is past 128 characters
        front.mount("weather", long_named, replace=True)
    assert "weather_forecast" in [tool.key for tool in front.tools] and "weather" in front.mounts
    async with Client(front) as client:
        with anyio.fail_after(LIMIT):
            assert (await client.call_tool("weather_forecast", {"city": "Oslo"})).text.startswith("sunny in Oslo")


@pytest.mark.parametrize("era", ERAS)
async def test_the_mounting_servers_middleware_is_outermost_and_the_mounted_one_sees_its_own_names(era: str) -> None:
    seen: list[tuple[str, Any, Any]] = []

    def recorder(who: str) -> Any:
        async def record(call: Call, call_next: Next) -> bytes:
            params = call.message.get("params") or {}
            seen.append((who, call.message.get("method"), params.get("name") or params.get("uri")))
            return await call_next(call)

        return record

    front = Server("front", middleware=[recorder("front")])
    front.mount("weather", weather(middleware=[recorder("weather")]))
    async with connected(front, "http", era, elicit=answer_name) as client:
        with anyio.fail_after(LIMIT):
            await client.list_tools()  # which arguments an HTTP request mirrors in headers
            seen.clear()
            await client.call_tool("weather_forecast", {"city": "Oslo"})
            await client.read_resource("weather+weather://city/Oslo")
            assert seen == [("front", "tools/call", "weather_forecast"), ("weather", "tools/call", "forecast"),
                            ("front", "resources/read", "weather+weather://city/Oslo"),
                            ("weather", "resources/read", "weather://city/Oslo")]
            seen.clear()
            assert (await client.call_tool("weather_ask")).text == "hello Ada"  # asked through both
            assert ("weather", "tools/call", "ask") in seen


async def test_a_mounted_items_scopes_are_required() -> None:
    tokens = {"reader": AccessToken("ann", "c", frozenset({"base"})),
              "writer": AccessToken("bo", "c", frozenset({"base", "notes:write"}))}
    front = Server("front", auth=Auth(StaticTokens(tokens), "http://127.0.0.1:8000/mcp", ("https://auth.example.com",),
                                      scopes=("base",)))
    notes = Server("notes")

    @notes.tool(scopes=["notes:write"])
    def write(text: str) -> str:
        return f"wrote {text}"

    front.mount("notes", notes)
    async with running(front) as http:
        url = f"http://127.0.0.1:{http.port}/mcp"
        async with Client.http(url, token="reader") as reader, Client.http(url, token="writer") as writer:
            with anyio.fail_after(LIMIT):
                with pytest.raises(McpError, match="notes:write"):
                    await reader.call_tool("notes_write", {"text": "x"})
                assert (await writer.call_tool("notes_write", {"text": "x"})).text == "wrote x"


class Listener:
    """A real HTTP client's change stream: a 2026 `subscriptions/listen` (following `FOLLOWED` from the start),
    or a 2025-era session's GET stream (following it once `follow` subscribes: a session follows only what is
    there)."""

    def __init__(self, stream: SseStream, client: HttpClient, session_id: str | None) -> None:
        self.stream, self.client, self.session_id = stream, client, session_id

    async def follow(self) -> None:
        if self.session_id is not None:
            headers = session_headers(self.session_id)
            reply = await self.client.post(legacy("resources/subscribe", 1, uri=FOLLOWED), headers, legacy=True)
            assert reply.response["result"] == {}, reply.response

    async def next_method(self) -> str:
        with anyio.fail_after(LIMIT):
            message = await self.stream.next()
        assert message is not None
        return message["method"]


FOLLOWED = "weather+weather://today"


@contextlib.asynccontextmanager
async def listening(http: Any, era: str) -> AsyncIterator[Listener]:
    async with HttpClient.connect(http) as client, HttpClient.connect(http) as side:
        with anyio.fail_after(LIMIT):
            session_id = None
            if era == "2026-07-28":
                stream = SseStream(side)
                await stream.open(request("subscriptions/listen", "changes", notifications={
                    "toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True,
                    "resourceSubscriptions": [FOLLOWED]}))
                assert (await stream.next())["method"] == "notifications/subscriptions/acknowledged"  # type: ignore[index]
            else:
                session_id = await initialize(client)
                stream = SseStream(side, legacy=True)
                await stream.open_get(session_headers(session_id))
        yield Listener(stream, client, session_id)


@pytest.mark.parametrize("era", ERAS)
async def test_mount_unmount_and_the_mounted_servers_changes_are_announced_to_the_mounting_servers_clients(
        era: str) -> None:
    front = Server("front")

    @front.tool
    def local() -> str:
        return "local"

    @front.prompt
    def hello() -> str:  # so the client is told of prompt changes before anything is mounted
        return "hello"

    front.offers_resources = True  # and of resource changes
    other = weather()
    async with running(front) as http, listening(http, era) as changes:
        url = f"http://127.0.0.1:{http.port}/mcp"
        async with Client.http(url, era=era) as client:
            with anyio.fail_after(LIMIT):
                front.mount("weather", other)
                assert {await changes.next_method() for _ in range(3)} == {
                    "notifications/tools/list_changed", "notifications/prompts/list_changed",
                    "notifications/resources/list_changed"}
                assert (await client.call_tool("weather_forecast", {"city": "Oslo"})).text.startswith("sunny")

                @other.tool
                def radar() -> str:
                    return "radar"

                assert await changes.next_method() == "notifications/tools/list_changed"
                assert "weather_radar" in [tool["name"] for tool in await client.list_tools()]
                assert (await client.call_tool("weather_radar")).text == "radar"
                await changes.follow()
                other.notify_resource_updated("weather://today")
                with anyio.fail_after(LIMIT):
                    updated = await changes.stream.next()
                assert updated is not None and updated["method"] == "notifications/resources/updated"
                assert updated["params"]["uri"] == FOLLOWED
                other.remove_tool("radar")
                assert await changes.next_method() == "notifications/tools/list_changed"
                front.unmount("weather")
                assert {await changes.next_method() for _ in range(3)} == {
                    "notifications/tools/list_changed", "notifications/prompts/list_changed",
                    "notifications/resources/list_changed"}
                assert [tool["name"] for tool in await client.list_tools()] == ["local"]
                other.add_tool(lambda: "late", name="late")
                with anyio.move_on_after(0.3):  # no longer followed: nothing is announced for it
                    assert await changes.stream.next() is None
                with pytest.raises(McpError):
                    await client.call_tool("weather_forecast", {"city": "Oslo"})


async def test_unmount_while_serving_lets_calls_in_flight_finish_then_stops_the_mounted_server() -> None:
    events: list[Any] = []
    other = weather(events)
    release = anyio.Event()
    entered = anyio.Event()

    @other.tool
    async def slow() -> str:
        entered.set()
        await release.wait()
        return "finished"

    front = Server("front")

    @front.tool
    def local() -> str:
        return "local"

    async with running(front) as http:
        url = f"http://127.0.0.1:{http.port}/mcp"
        async with Client.http(url) as client:
            with anyio.fail_after(LIMIT):
                front.mount("weather", other)  # while serving: its lifespan starts in the background
                assert (await client.call_tool("weather_forecast", {"city": "Oslo"})).text.endswith("(from weather-pool)")
                assert events == ["weather up"]
                results: list[str] = []

                async def call_slow() -> None:
                    results.append((await client.call_tool("weather_slow")).text)

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(call_slow)
                    await entered.wait()
                    front.unmount("weather")
                    assert [tool["name"] for tool in await client.list_tools()] == ["local"]
                    await anyio.sleep(0.05)
                    assert events == ["weather up"]  # still up: a call is in flight
                    release.set()
                assert results == ["finished"]
                while events == ["weather up"]:
                    await anyio.sleep(0.01)
                assert events == ["weather up", "weather down"]
    with pytest.raises(KeyError, match="nothing is mounted at 'weather'"):
        front.unmount("weather")


@pytest.mark.parametrize("era", ERAS)
async def test_a_gateway_over_the_bash_upstream_is_mounted_like_a_server(command: list[str], era: str) -> None:  # noqa: F811
    front = Server("front")

    @front.tool
    def local() -> str:
        return "local"

    front.mount("bash", Gateway(lambda: Client.stdio(["bash", *command]), timeout=20))
    async with connected(front, "http", era, elicit=lambda params: {"action": "accept", "content": {"name": "Ada"}}) \
            as client:
        with anyio.fail_after(LIMIT):
            names = [tool["name"] for tool in await client.list_tools()]
            assert names == ["local", "bash_echo", "bash_add", "bash_slow", "bash_ask"]
            assert (await client.call_tool("bash_echo", {"text": "héllo"})).text == "héllo"
            slow = await client.call_tool("bash_slow", {"seconds": 0.1})
            assert [note["message"] for note in slow.progress] == ["sleeping 0.1 s"]
            asked = await client.call_tool("bash_ask")
            assert "Ada" in asked.text and not asked.is_error
            uris = [resource["uri"] for resource in await client.list_resources()]
            assert uris == ["bash+bash://upstream/greeting", "bash+bash://upstream/readme"]
            [greeting] = await client.read_resource("bash+bash://upstream/greeting")
            assert greeting["uri"] == "bash+bash://upstream/greeting" and greeting["text"]
            got = await client.get_prompt("bash_greet", {"name": "Ada"})
            assert "Ada" in str(got["messages"])


def test_what_the_mounted_server_registers_after_the_mount_and_before_serving_is_served() -> None:
    front, other = Server("front"), weather()
    front.mount("weather", other)

    @other.tool
    def radar() -> str:  # no event loop yet (as at import time): caught up when the front starts serving
        return "radar"

    other.remove_prompt("brief")

    async def serve() -> None:
        async with Client(front) as client:
            with anyio.fail_after(LIMIT):
                assert (await client.call_tool("weather_radar")).text == "radar"
                with pytest.raises(McpError, match="prompts/list"):
                    await client.list_prompts()  # it had one prompt: none is offered now

    anyio.run(serve)
