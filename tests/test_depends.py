"""`Depends`: dependencies declared in a signature, made per call, hidden from clients, cleaned up however
the call ends; through a real server (the in-memory test client, and real HTTP)."""

import contextlib
import threading
from typing import Annotated, Any, AsyncIterator, Iterator

import anyio
import orjson
import pytest

from conftest import tool_call
from http_client import HttpClient, mcp_headers, running
from mcpcore import Context, Depends, InvalidParams, Server, ToolError
from mcpcore.testing import Client

pytestmark = pytest.mark.anyio

LIMIT = 10


class Db:
    """A stand-in connection that records what happened to it."""

    def __init__(self, events: list[str], name: str = "db") -> None:
        self.events, self.name = events, name

    def query(self, text: str) -> str:
        self.events.append(f"query {text}")
        return f"{self.name}:{text}"


def with_db(events: list[str]) -> Any:
    """An async generator factory: opens per call, commits on success, rolls back on failure, always closes."""

    async def open_db(ctx: Context) -> AsyncIterator[Db]:
        events.append("open")
        try:
            yield Db(events, ctx.lifespan["name"] if ctx.lifespan else "db")
            events.append("commit")
        except Exception as error:
            events.append(f"rollback {type(error).__name__}")
            raise
        finally:
            events.append("close")

    return open_db


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_a_tool_gets_its_dependency_per_call_and_the_client_never_sees_it(era: str) -> None:
    events: list[str] = []
    server = Server("deps")
    open_db = with_db(events)

    @server.tool
    async def lookup(text: str, db: Db = Depends(open_db)) -> str:
        return db.query(text)

    @server.tool
    def lookup_sync(text: str, db: Annotated[Db, Depends(open_db)]) -> str:
        assert threading.current_thread() is not threading.main_thread()  # the function ran in a worker thread
        return db.query(text)

    async with Client(server, era=era) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        for name in ("lookup", "lookup_sync"):
            assert tools[name]["inputSchema"] == {
                "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False,
            }
        assert (await client.call_tool("lookup", {"text": "a"})).text == "db:a"
        assert (await client.call_tool("lookup_sync", {"text": "b"})).text == "db:b"
        refused = await client.call_tool("lookup", {"text": "c", "db": "mine"})
    assert refused.is_error and "db" in refused.text  # a client cannot pass it
    assert events == ["open", "query a", "commit", "close", "open", "query b", "commit", "close"]


async def test_nested_dependencies_are_made_once_per_call_and_cleaned_up_last_made_first() -> None:
    events: list[str] = []
    made: list[str] = []

    async def settings(ctx: Context) -> dict[str, str]:
        made.append("settings")
        return {"prefix": ctx.lifespan["prefix"]}

    def connection(config: dict[str, str] = Depends(settings)) -> Iterator[str]:
        made.append("connection")
        yield f"{config['prefix']}-conn"
        events.append("connection closed")

    async def repository(conn: Annotated[str, Depends(connection)], config: dict[str, str] = Depends(settings)) -> AsyncIterator[str]:
        made.append("repository")
        yield f"repo({conn}, {config['prefix']})"
        events.append("repository closed")

    @contextlib.asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[dict[str, str]]:
        yield {"prefix": "p"}

    server = Server("deps", lifespan=lifespan)

    @server.tool
    async def use(repo: str = Depends(repository), conn: str = Depends(connection)) -> str:
        return f"{repo} {conn}"

    async with Client(server) as client:
        assert (await client.call_tool("use")).text == "repo(p-conn, p) p-conn"
        assert made == ["settings", "connection", "repository"]  # each once, though asked for twice
        assert events == ["repository closed", "connection closed"]
        assert (await client.call_tool("use")).text == "repo(p-conn, p) p-conn"
    assert made == ["settings", "connection", "repository"] * 2  # a new call makes them anew


async def test_a_failing_tool_rolls_back_and_closes_and_the_model_reads_the_error() -> None:
    events: list[str] = []
    server = Server("deps")

    @server.tool
    async def breaks(db: Db = Depends(with_db(events))) -> str:
        raise ToolError("no such row")

    @server.tool
    def breaks_sync(db: Db = Depends(with_db(events))) -> str:
        raise ValueError("bug")

    async with Client(server) as client:
        failed = await client.call_tool("breaks")
        assert failed.is_error and failed.text == "no such row"
        assert events == ["open", "rollback ToolError", "close"]
        events.clear()
        assert (await client.call_tool("breaks_sync")).is_error
        assert events == ["open", "rollback ValueError", "close"]


async def test_a_failing_factory_is_the_calls_failure_and_what_it_opened_is_closed() -> None:
    events: list[str] = []
    server = Server("deps")

    def broken(db: Db = Depends(with_db(events))) -> str:
        raise RuntimeError("cannot connect")

    @server.tool
    async def uses(value: str = Depends(broken)) -> str:
        return value

    async with Client(server) as client:
        failed = await client.call_tool("uses")
    assert failed.is_error and "cannot connect" in failed.text
    assert events == ["open", "rollback RuntimeError", "close"]


async def test_a_failing_clean_up_fails_a_call_that_succeeded() -> None:
    server = Server("deps")

    def flaky() -> Iterator[int]:
        yield 1
        raise OSError("flush failed")

    @server.tool
    async def uses(value: int = Depends(flaky)) -> int:
        return value

    async with Client(server) as client:
        failed = await client.call_tool("uses")
    assert failed.is_error and "flush failed" in failed.text


async def test_a_cancelled_call_still_cleans_up_and_its_clean_up_may_await() -> None:
    events: list[str] = []
    entered = anyio.Event()
    server = Server("deps")

    async def slow_close() -> AsyncIterator[str]:
        events.append("open")
        try:
            yield "resource"
        finally:
            await anyio.sleep(0)  # a clean-up that awaits, inside a cancelled call
            events.append("closed")

    @server.tool
    async def waits(held: str = Depends(slow_close)) -> str:
        entered.set()
        await anyio.sleep_forever()
        return held

    async with Client(server) as client:
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call_tool, "waits")
                await entered.wait()
                tasks.cancel_scope.cancel()
    assert events == ["open", "closed"]


async def test_a_cancelled_sync_tool_keeps_its_dependency_until_its_abandoned_thread_returns() -> None:
    events: list[str] = []
    entered, release, closed = anyio.Event(), threading.Event(), anyio.Event()
    server = Server("deps")

    async def connection() -> AsyncIterator[str]:
        events.append("open")
        try:
            yield "conn"
        finally:  # the call was cancelled: its CancelledError is raised at the yield
            events.append("closed")
            closed.set()

    @server.tool
    def blocks(ctx: Context, conn: str = Depends(connection)) -> str:
        anyio.from_thread.run_sync(entered.set)
        release.wait(LIMIT)
        events.append(f"used {conn} after the cancel")
        return conn

    async with Client(server) as client:
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call_tool, "blocks")
                await entered.wait()
                tasks.cancel_scope.cancel()
            assert events == ["open"]  # the call is over, but its thread still holds the connection
            release.set()
            await closed.wait()
    assert events == ["open", "used conn after the cancel", "closed"]


async def test_dependencies_in_resources_templates_prompts_and_completions_are_hidden_from_their_arguments() -> None:
    calls: list[str] = []

    def caller(ctx: Context) -> str:
        calls.append("made")
        return ctx.principal or "nobody"

    def cities() -> list[str]:
        return ["Paris", "Porto", "Prague"]

    server = Server("deps")

    @server.resource("demo://who")
    def who(user: str = Depends(caller)) -> str:
        return f"hello {user}"

    @server.resource("demo://items/{item_id}")
    async def item(item_id: int, user: Annotated[str, Depends(caller)]) -> str:
        return f"{user} reads {item_id + 1}"

    @server.prompt
    def trip(city: str, user: str = Depends(caller)) -> str:
        return f"{user} goes to {city}"

    @server.completion(prompt="trip", argument="city")
    async def complete_city(ctx: Context, value: str, known: list[str] = Depends(cities)) -> list[str]:
        return [f"{city} ({ctx.principal})" for city in known if city.startswith(value)]

    async with Client(server, principal="ada") as client:
        assert (await client.read_resource("demo://who"))[0]["text"] == "hello ada"
        assert (await client.read_resource("demo://items/41"))[0]["text"] == "ada reads 42"
        [prompt] = await client.list_prompts()
        assert prompt["arguments"] == [{"name": "city", "required": True}]
        assert (await client.get_prompt("trip", {"city": "Oslo"}))["messages"][0]["content"]["text"] == "ada goes to Oslo"
        with pytest.raises(InvalidParams, match="has no argument 'user'"):
            await client.get_prompt("trip", {"city": "Oslo", "user": "mallory"})
        assert await client.complete({"type": "ref/prompt", "name": "trip"}, "city", "Pr") == ["Prague (ada)"]
    assert calls == ["made"] * 3


def test_a_template_variable_cannot_be_a_dependency() -> None:
    server = Server("deps")
    with pytest.raises(ValueError, match=r"has no parameter for \['user'\]"):
        @server.resource("demo://as/{user}")
        def as_user(user: str = Depends(lambda: "x")) -> str:
            return user


def test_a_dependency_cycle_is_refused_at_registration_naming_the_path() -> None:
    def first(value: int = Depends(lambda: 0)) -> int:
        return value

    def a(b_value: int = Depends(first)) -> int:
        return b_value

    def b(a_value: int = Depends(a)) -> int:
        return a_value

    first.__defaults__ = (Depends(b),)  # first -> b -> a -> first
    server = Server("deps")
    with pytest.raises(ValueError, match=r"dependency cycle: looped\(\) -> first\(\) -> b\(\) -> a\(\) -> first\(\)"):
        @server.tool
        def looped(value: int = Depends(first)) -> int:
            return value


def test_a_factory_parameter_nothing_can_fill_is_refused_at_registration() -> None:
    def needs_name(name: str) -> str:
        return name

    server = Server("deps")
    with pytest.raises(ValueError, match=r"dependency tool\(\) -> needs_name\(\): parameter 'name' needs a value"):
        @server.tool
        def tool(value: str = Depends(needs_name)) -> str:
            return value
    with pytest.raises(TypeError, match="Depends"):
        Depends("not callable")  # type: ignore[arg-type]


def test_a_generator_that_yields_twice_fails_the_call() -> None:
    def twice() -> Iterator[int]:
        yield 1
        yield 2

    server = Server("deps")

    @server.tool
    def uses(value: int = Depends(twice)) -> int:
        return value

    with Client(server).sync() as client:
        failed = client.call_tool("uses")
    assert failed.is_error and "yielded more than once" in failed.text


async def test_over_http_a_dependency_reads_a_request_header() -> None:
    def tenant(ctx: Context) -> str:
        name = ctx.headers.get("x-tenant")
        if name is None:
            raise ToolError("send an X-Tenant header")
        return name

    server = Server("deps")

    @server.tool
    async def whoami(who: str = Depends(tenant)) -> str:
        return f"tenant {who}"

    async with running(server) as http:
        url = f"http://127.0.0.1:{http.port}/mcp"
        with anyio.fail_after(LIMIT):
            async with Client.http(url, headers={"x-tenant": "acme"}) as client:
                assert (await client.call_tool("whoami")).text == "tenant acme"
                [tool] = await client.list_tools()
                assert tool["inputSchema"]["properties"] == {}
            async with Client.http(url) as anonymous:
                assert (await anonymous.call_tool("whoami")).text == "send an X-Tenant header"


async def test_over_http_a_dropped_connection_cancels_the_call_and_its_dependency_is_cleaned_up() -> None:
    events: list[str] = []
    entered, closed = anyio.Event(), anyio.Event()
    server = Server("deps")

    async def held() -> AsyncIterator[str]:
        events.append("open")
        try:
            yield "resource"
        finally:
            events.append("closed")
            closed.set()

    @server.tool
    async def waits(value: str = Depends(held)) -> str:
        entered.set()
        await anyio.sleep_forever()
        return value

    async with running(server) as http:
        with anyio.fail_after(LIMIT):
            async with HttpClient.connect(http) as client:
                message = tool_call(1, "waits")
                await client.send_request("POST", "/mcp", mcp_headers(message), orjson.dumps(message))
                await entered.wait()
            await closed.wait()  # the connection is gone: the call was cancelled, the clean-up ran
    assert events == ["open", "closed"]
