"""`mcpcore.testing.Client`: a user's in-memory client, on both eras, with its callbacks and strict mode."""

from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator

import pytest

from mcpcore import Context, Elicit, InputRequired, ListRoots, McpError, Sample, Server
from mcpcore.testing import Client

pytestmark = pytest.mark.anyio

ERAS = ["2026-07-28", "2025-11-25", "2025-06-18"]
FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def app(events: list[str] | None = None) -> Server:
    @contextlib.asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[dict[str, str]]:
        if events is not None:
            events.append("start")
        yield {"greeting": "hello"}
        if events is not None:
            events.append("stop")

    server = Server("tested", version="2.0.0", page_size=2, lifespan=lifespan)

    @server.tool
    def echo(text: str) -> str:
        """Say it back."""
        return text

    @server.tool
    async def steps(ctx: Context) -> str:
        await ctx.progress(1, total=2, message="half")
        await ctx.info("working")
        await ctx.progress(2, total=2)
        return ctx.lifespan["greeting"]

    @server.tool
    def greet(ctx: Context) -> str:
        answer = ctx.answer("name")
        if answer is None:
            raise InputRequired(name=Elicit("Your name?", FORM))
        return f"Hello, {answer.content['name']}!" if answer.accepted else "declined"

    @server.tool
    def summarize(ctx: Context) -> str:
        summary, roots = ctx.answer("summary"), ctx.answer("roots")
        if summary is None or roots is None:
            raise InputRequired(summary=Sample("Summarize"), roots=ListRoots())
        return f"{summary.text} over {', '.join(root.uri for root in roots)}"

    @server.tool
    def fails() -> str:
        raise ValueError("inside")

    @server.resource("demo://note", mime_type="text/plain")
    def note() -> str:
        return "a note"

    @server.prompt
    def ask(topic: str) -> str:
        """Ask about a topic."""
        return f"Tell me about {topic}"

    return server


@pytest.mark.parametrize("era", ERAS)
async def test_calls_lists_reads_and_prompts_on_every_era(era: str) -> None:
    events: list[str] = []
    async with Client(app(events), era=era, strict=True) as client:
        assert events == ["start"]
        assert (await client.call_tool("echo", {"text": "hi"})).text == "hi"
        tools = await client.list_tools()  # three pages of two
        assert [t["name"] for t in tools] == ["echo", "steps", "greet", "summarize", "fails"]
        assert (await client.read_resource("demo://note"))[0]["text"] == "a note"
        prompt = await client.get_prompt("ask", {"topic": "owls"})
        assert prompt["messages"][0]["content"]["text"] == "Tell me about owls"
        assert [p["name"] for p in await client.list_prompts()] == ["ask"]
        info = await client.discover()
        assert "tools" in info["capabilities"]
    assert events == ["start", "stop"]


@pytest.mark.parametrize("era", ERAS)
async def test_progress_and_logs_reach_the_callbacks_and_the_outcome(era: str) -> None:
    heard: list[Any] = []
    async with Client(app(), era=era, on_progress=heard.append, log_level="info", strict=True) as client:
        outcome = await client.call_tool("steps")
    assert outcome.text == "hello"
    assert [p["progress"] for p in outcome.progress] == [1, 2] and heard == outcome.progress
    assert outcome.progress[0]["message"] == "half"
    assert [log["data"] for log in outcome.logs] == ["working"]


@pytest.mark.parametrize("era", ERAS)
async def test_elicitation_is_answered_by_the_callback(era: str) -> None:
    asked: list[dict[str, Any]] = []

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"name": "Ada"}}

    async with Client(app(), era=era, elicit=elicit, strict=True) as client:
        assert (await client.call_tool("greet")).text == "Hello, Ada!"
    assert asked[0]["message"] == "Your name?" and asked[0]["requestedSchema"] == FORM


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_sampling_and_roots_are_answered_too(era: str) -> None:
    def sample(params: dict[str, Any]) -> dict[str, Any]:
        assert params["messages"][0]["content"]["text"] == "Summarize"
        return {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "test"}

    async with Client(app(), era=era, sample=sample, roots=["file:///work"], strict=True) as client:
        assert (await client.call_tool("summarize")).text == "short over file:///work"


async def test_a_client_without_the_callback_gets_the_servers_missing_capability_error() -> None:
    async with Client(app()) as client:
        with pytest.raises(McpError) as refused:
            await client.call_tool("greet")
    assert refused.value.code == -32021 and refused.value.data["requiredCapabilities"] == {"elicitation": {"form": {}}}


async def test_protocol_errors_raise_and_tool_errors_do_not() -> None:
    async with Client(app()) as client:
        with pytest.raises(McpError) as unknown:
            await client.call_tool("nope")
        assert unknown.value.code == -32602
        failed = await client.call_tool("fails")
    assert failed.is_error and "inside" in failed.text


async def test_strict_mode_catches_a_message_that_breaks_the_schema() -> None:
    server = Server("sloppy")

    @server.tool
    async def half(ctx: Context) -> str:
        await ctx.progress("half")  # type: ignore[arg-type]  # progress must be a number
        return "done"

    async with Client(server) as lenient:
        assert (await lenient.call_tool("half", progress=True)).progress[0]["progress"] == "half"
    async with Client(server, strict=True) as strict:
        with pytest.raises(Exception, match="'half' is not of type 'number'"):
            await strict.call_tool("half", progress=True)


def test_the_sync_client_needs_no_event_loop() -> None:
    with Client(app()).sync() as client:
        assert client.call_tool("echo", {"text": "plain"}).text == "plain"
        assert [t["name"] for t in client.list_tools()][:2] == ["echo", "steps"]


async def test_principal_and_token_reach_the_tool() -> None:
    from mcpcore.auth import AccessToken

    server = Server("who")

    @server.tool
    def whoami(ctx: Context) -> str:
        return f"{ctx.principal} {sorted(ctx.auth.scopes) if ctx.auth else None}"

    async with Client(server, auth=AccessToken("alice", scopes=frozenset({"read"}))) as client:
        assert (await client.call_tool("whoami")).text == "alice ['read']"


PLUGIN_CONFTEST = '''
import pytest
from mcpcore import Server

pytest_plugins = ["mcpcore.pytest_plugin"]


@pytest.fixture
def mcp_server():
    server = Server("mine")

    @server.tool
    def add(a: int, b: int) -> int:
        return a + b

    return server


@pytest.fixture
def mcp_client_options():
    return {"strict": True}
'''

PLUGIN_TESTS = '''
import pytest


@pytest.mark.anyio
async def test_async(mcp_client):
    assert (await mcp_client.call_tool("add", {"a": 2, "b": 3})).text == "5"


def test_sync(mcp_sync_client):
    assert mcp_sync_client.call_tool("add", {"a": 1, "b": 1}).text == "2"


@pytest.fixture
def anyio_backend():
    return "asyncio"
'''


def test_the_pytest_plugin_gives_a_users_suite_its_client(tmp_path: Any) -> None:
    import subprocess
    import sys

    (tmp_path / "conftest.py").write_text(PLUGIN_CONFTEST)
    (tmp_path / "test_mine.py").write_text(PLUGIN_TESTS)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_the_same_client_drives_a_server_in_a_subprocess_over_stdio(era: str) -> None:
    import sys

    from conftest import ROOT

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Grace"}}

    heard: list[Any] = []
    command = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "ask_server.py")]
    async with Client.stdio(command, era=era, elicit=elicit, strict=True) as client:
        assert (await client.call_tool("greet")).text == "Hello, Grace!"
        assert (await client.read_resource("demo://note"))[0]["text"] == "Remember to drink water."
        with pytest.raises(McpError):
            await client.call_tool("touch", {"uri": ""})
    echo = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "echo_server.py")]
    async with Client.stdio(echo, era=era, on_progress=heard.append, strict=True) as client:
        assert (await client.call_tool("progress")).text == "done"
    assert [p["progress"] for p in heard] == [1, 2, 3]


@pytest.mark.usefixtures("http_flavour")
@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25", "2025-06-18"])
async def test_the_same_client_drives_a_server_at_a_url(era: str) -> None:
    from conftest import ROOT
    from http_client import running
    from mcpcore._cli.main import load_target
    from servers.http_server import build

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Lin"}}

    async with running(load_target(str(ROOT / "examples" / "ask_server.py"))) as http:
        async with Client.http(f"http://127.0.0.1:{http.port}/mcp", era=era, elicit=elicit, strict=True) as client:
            assert (await client.call_tool("greet")).text == "Hello, Lin!"
            assert (await client.read_resource("demo://note"))[0]["text"] == "Remember to drink water."
    heard: list[Any] = []
    async with running(build()) as http:
        async with Client.http(f"http://127.0.0.1:{http.port}/mcp", era=era, on_log=heard.append, log_level="info",
                               strict=True) as client:
            headed = await client.call_tool("headed", {"region": "é-west", "count": 3, "flag": True})  # Mcp-Param-*
            assert headed.text and not headed.is_error, headed.text
            assert (await client.call_tool("chatty")).text == "logged"
    assert [log["data"] for log in heard][:1] == ["first line\nsecond line"]


async def test_the_url_client_sends_its_token() -> None:
    from http_client import running
    from mcpcore.auth import AccessToken, Auth, StaticTokens

    server = Server("guarded", auth=Auth(StaticTokens({"t": AccessToken("ada")}), "http://127.0.0.1:8000/mcp",
                                          ("https://auth.example.com",)))

    @server.tool
    def whoami(ctx: Context) -> str:
        return str(ctx.principal)

    async with running(server) as http:
        async with Client.http(f"http://127.0.0.1:{http.port}/mcp", token="t", strict=True) as client:
            assert (await client.call_tool("whoami")).text == "ada"
        async with Client.http(f"http://127.0.0.1:{http.port}/mcp") as anonymous:
            with pytest.raises(McpError, match="Authorization required"):
                await anonymous.call_tool("whoami")


async def test_listen_hears_list_changes_and_updates_of_the_resources_it_follows() -> None:
    server = app()
    async with Client(server, strict=True) as client:
        async with client.listen(tools=True, uris=["demo://note"]) as subscription:
            assert subscription.acknowledged["notifications"]["resourceSubscriptions"] == ["demo://note"]

            @server.tool
            def late() -> str:
                return "added"

            assert (await subscription.next())["method"] == "notifications/tools/list_changed"
            server.notify_resource_updated("demo://other")
            server.notify_resource_updated("demo://note")
            updated = await subscription.next()
            assert updated["method"] == "notifications/resources/updated" and updated["params"]["uri"] == "demo://note"
        assert len(server.subscriptions) == 0  # leaving the block ended it
        assert (await client.call_tool("late")).text == "added"


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_calls_progress_is_kept_without_asking_and_progress_false_asks_for_none(era: str) -> None:
    async with Client(app(), era=era, strict=True) as client:
        outcome = await client.call_tool("steps")
        quiet = await client.call_tool("steps", progress=False)
    assert [(p["progress"], p["total"]) for p in outcome.progress] == [(1, 2), (2, 2)]
    assert outcome.progress[0]["message"] == "half"
    assert quiet.text == "hello" and quiet.progress == []


@pytest.mark.usefixtures("http_flavour")
async def test_a_tool_calls_progress_is_kept_over_http_too() -> None:
    from conftest import ROOT
    from http_client import running
    from mcpcore._cli.main import load_target

    async with running(load_target(str(ROOT / "examples" / "echo_server.py"))) as http:
        async with Client.http(f"http://127.0.0.1:{http.port}/mcp", strict=True) as client:
            outcome = await client.call_tool("progress")
    assert outcome.text == "done"
    assert [p["message"] for p in outcome.progress] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]


def completing() -> Server:
    server = Server("completing")

    @server.prompt
    def greet(name: str, language: str = "en") -> str:
        return f"Hello, {name}"

    @server.resource("file:///{path}")
    def read(path: str) -> str:
        return path

    @server.completion(prompt="greet", argument="name")
    def names(value: str, arguments: dict[str, str]) -> list[str]:
        known = ["Ada", "Alan", "Alonzo"] if arguments.get("language", "en") == "en" else ["Ängel"]
        return [name for name in known if name.startswith(value)]

    @server.completion(resource="file:///{path}", argument="path")
    def paths(value: str) -> list[str]:
        return [path for path in ["src/a.py", "src/b.py", "tests/"] if path.startswith(value)]

    return server


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_complete_names_its_target_as_the_completion_decorator_does(era: str) -> None:
    async with Client(completing(), era=era, strict=True) as client:
        assert await client.complete(prompt="greet", argument="name", value="Al") == ["Alan", "Alonzo"]
        assert await client.complete(prompt="greet", argument="name", value="", context={"language": "de"}) == ["Ängel"]
        assert await client.complete(resource="file:///{path}", argument="path", value="src/") == ["src/a.py", "src/b.py"]
        assert await client.complete(prompt="greet", argument="name") == ["Ada", "Alan", "Alonzo"]  # value: ""
        raw = await client.complete({"type": "ref/prompt", "name": "greet"}, "name", "Ad")  # the raw form still works
        assert raw == ["Ada"]


@pytest.mark.parametrize(("call", "message"), [
    ({"prompt": "greet", "resource": "file:///{path}", "argument": "name"},
     "complete() takes exactly one of prompt=NAME, resource=URI_TEMPLATE or a raw ref; got prompt= and resource="),
    ({"ref": {"type": "ref/prompt", "name": "greet"}, "prompt": "greet", "argument": "name"},
     "complete() takes exactly one of prompt=NAME, resource=URI_TEMPLATE or a raw ref; got ref and prompt="),
    ({"argument": "name", "value": "A"},
     "complete() takes exactly one of prompt=NAME, resource=URI_TEMPLATE or a raw ref; got none"),
    ({"ref": "greet", "argument": "name"},
     "complete(): a raw ref is a mapping ({'type': 'ref/prompt', 'name': ...}); for a prompt or template by name "
     "say prompt='greet' or resource='greet'"),
    ({"prompt": "greet", "value": "A"}, "complete() needs argument=: the name of the argument to complete"),
])
async def test_complete_with_a_wrong_mix_of_targets_is_a_clear_type_error(call: dict[str, Any], message: str) -> None:
    async with Client(completing(), strict=True) as client:
        with pytest.raises(TypeError) as raised:
            await client.complete(**call)
    assert str(raised.value) == message
