"""`mcpcore proxy -- bash tests/upstreams/bash_server.sh`: the Bash upstream, which speaks only 2026-07-28
over stdio, served over HTTP by mcpcore as a real subprocess, and called by `mcpcore.client` in both eras
and by the official Python SDK client in the 2025 era (mcpcore.gateway, docs/gateway.md)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, AsyncIterator

import anyio
import pytest

from conftest import ROOT, legacy, request
from http_client import HttpClient, SseStream
from mcpcore._wire.jsonrpc import McpError
from mcpcore.client import Client
from mcpcore.skills import EXTENSION as SKILLS
from mcpcore.tasks import TASKS
from test_bash_upstream import command  # noqa: F401 (the fixture: the Bash upstream, skipped without bash and jq)
from test_legacy_http import initialize, session_headers

pytestmark = pytest.mark.anyio


@pytest.fixture
def upstream(command: list[str]) -> list[str]:  # noqa: F811 (the imported fixture)
    """`bash tests/upstreams/bash_server.sh`, as a user would write it after `mcpcore proxy --`."""
    return ["bash", *command]

BASH_SERVER = ROOT / "tests" / "upstreams" / "bash_server.sh"
ERAS = ["2026-07-28", "2025-11-25"]


@contextlib.asynccontextmanager
async def proxy(tmp_path: Path, upstream: list[str], *options: str) -> AsyncIterator[tuple[str, subprocess.Popen[Any]]]:
    """`mcpcore proxy --transport http --port 0 OPTIONS -- UPSTREAM` running; its URL and process."""
    log = tmp_path / "proxy.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "mcpcore", "proxy", "--transport", "http", "--port", "0",
                                    *options, "--", *upstream], stdin=subprocess.DEVNULL, stderr=stderr,
                                   start_new_session=True)
    try:
        url = None
        with anyio.fail_after(30):
            while url is None:
                found = re.search(r"serving '[^']*' at (\S+)", log.read_text())
                if found is None:
                    assert process.poll() is None, f"mcpcore proxy exited: {log.read_text()}"
                    await anyio.sleep(0.05)
                else:
                    url = found.group(1)
        yield url, process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def answer_name(params: dict[str, Any]) -> dict[str, Any]:
    assert "name" in params["requestedSchema"]["properties"]
    return {"action": "accept", "content": {"name": "Ada"}}


@pytest.mark.parametrize("era", ERAS)
async def test_the_upstream_is_served_as_if_local(tmp_path: Path, upstream: list[str], era: str) -> None:
    async with proxy(tmp_path, upstream) as (url, _):
        async with Client.http(url, era=era, elicit=answer_name) as client:
            with anyio.fail_after(30):
                assert [tool["name"] for tool in await client.list_tools()] == ["echo", "add", "slow", "ask"]
                assert (await client.call_tool("echo", {"text": "héllo «Bash»"})).text == "héllo «Bash»"
                added = await client.call_tool("add", {"a": 2, "b": 40})
                assert added.structured == {"sum": 42} or "42" in added.text
                wrong = await client.call_tool("add", {"a": "two"})
                assert wrong.is_error  # the upstream's own isError result, as it is
                asked = await client.call_tool("ask")
                assert "Ada" in asked.text and not asked.is_error
                uris = [resource["uri"] for resource in await client.list_resources()]
                assert uris == ["bash://upstream/greeting", "bash://upstream/readme"]
                [contents] = await client.read_resource("bash://upstream/greeting")
                assert contents["uri"] == "bash://upstream/greeting" and contents["text"]
                [greet] = await client.list_prompts()
                assert greet["arguments"][0] == {"name": "name", "description": "Who to greet", "required": True}
                got = await client.get_prompt("greet", {"name": "Ada"})
                assert "Ada" in str(got["messages"])


async def test_upstream_errors_keep_their_code_and_message(tmp_path: Path, upstream: list[str]) -> None:
    async with proxy(tmp_path, upstream) as (url, _):
        async with Client.http(url) as client:
            with anyio.fail_after(30):
                with pytest.raises(McpError) as unknown:
                    await client.read_resource("bash://upstream/nothing")
                upstream = Client.stdio(upstream)
                async with upstream:
                    with pytest.raises(McpError) as direct:
                        await upstream.read_resource("bash://upstream/nothing")
                assert (unknown.value.code, unknown.value.message) == (direct.value.code, direct.value.message)
                with pytest.raises(McpError) as asked_without_elicitation:
                    await client.call_tool("ask")
                assert asked_without_elicitation.value.code == -32021


async def test_many_calls_at_once_over_the_one_upstream_with_their_progress(tmp_path: Path, upstream: list[str]) -> None:
    async with proxy(tmp_path, upstream) as (url, _):
        async with Client.http(url) as client:
            with anyio.fail_after(60):
                results: dict[int, Any] = {}

                async def slow(index: int) -> None:
                    results[index] = await client.call_tool("slow", {"seconds": 0.2})

                async with anyio.create_task_group() as tasks:
                    for index in range(8):
                        tasks.start_soon(slow, index)
                assert sorted(results) == list(range(8))
                for outcome in results.values():
                    assert not outcome.is_error and "0.2" in outcome.text
                    [progress] = outcome.progress
                    assert progress["message"] == "sleeping 0.2 s"


async def test_a_cancelled_call_ends_and_the_gateway_goes_on(tmp_path: Path, upstream: list[str]) -> None:
    async with proxy(tmp_path, upstream) as (url, _):
        async with Client.http(url) as client:
            with anyio.fail_after(30):
                with anyio.move_on_after(0.5) as scope:
                    await client.call_tool("slow", {"seconds": 3})
                assert scope.cancelled_caught
                assert (await client.call_tool("echo", {"text": "after"})).text == "after"


@pytest.mark.parametrize("orphan", [False, True], ids=["alone", "with-a-child-holding-its-stdout"])
async def test_an_upstream_that_dies_fails_the_call_in_flight_and_comes_back(tmp_path: Path, upstream: list[str],
                                                                             orphan: bool) -> None:
    # With a child of its own that keeps its stdout open, no end of stream comes: its exit must be seen.
    if orphan:
        upstream = ["bash", "-c", 'sleep 60 & exec "$@"', "upstream", *upstream]
    async with proxy(tmp_path, upstream) as (url, process):
        async with Client.http(url) as client:
            with anyio.fail_after(60):
                assert (await client.call_tool("echo", {"text": "before"})).text == "before"
                upstream = _upstream_pid(process.pid)

                async def kill_soon() -> None:
                    await anyio.sleep(0.5)
                    os.kill(upstream, signal.SIGKILL)

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(kill_soon)
                    with pytest.raises(McpError) as failed:
                        await client.call_tool("slow", {"seconds": 10})
                assert failed.value.code == -32603
                assert "the upstream server went away during tools/call" in failed.value.message
                assert (await client.call_tool("echo", {"text": "again"})).text == "again"  # started again


async def test_a_hung_upstream_is_bounded_by_the_timeout(tmp_path: Path, upstream: list[str]) -> None:
    async with proxy(tmp_path, upstream, "--upstream-timeout", "1") as (url, _):
        async with Client.http(url) as client:
            with anyio.fail_after(30):
                with pytest.raises(McpError) as hung:
                    await client.call_tool("slow", {"seconds": 5})
                assert (hung.value.code, hung.value.message) == (
                    -32603, "the upstream server did not answer tools/call within 1 s")


def _upstream_pid(proxy_pid: int) -> int:
    """The upstream's process: the proxy's one child (bash running the script)."""
    children = Path(f"/proc/{proxy_pid}/task/{proxy_pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


async def test_the_official_python_client_in_the_2025_era(tmp_path: Path, upstream: list[str]) -> None:
    """The official SDK's client opens with `initialize`, which the Bash upstream does not know: the gateway
    answers it, and turns the upstream's `input_required` into a real elicitation request on the session."""
    sdk = pytest.importorskip("mcp", reason="the official SDK is in the test extra (pip install -e '.[test]')")
    sdk_types = pytest.importorskip("mcp_types")
    asked: list[Any] = []

    async def elicit(context: Any, params: Any) -> Any:
        asked.append(params)
        return sdk_types.ElicitResult(action="accept", content={"name": "Ada"})

    async with proxy(tmp_path, upstream) as (url, _):
        with anyio.fail_after(60):
            async with sdk.Client(url, mode="legacy", elicitation_callback=elicit, read_timeout_seconds=30) as client:
                assert client.protocol_version == "2025-11-25"
                echoed = await client.call_tool("echo", {"text": "through the gateway"})
                assert echoed.content[0].text == "through the gateway"  # type: ignore[union-attr]
                greeted = await client.call_tool("ask", {})
                assert greeted.content[0].text == "Hello, Ada!"  # type: ignore[union-attr]
    assert [params.message for params in asked] == ["What is your name?"]


# -- an mcpcore upstream (tests/servers/client_server.py over stdio): what the Bash one cannot show ---------

PYTHON_UPSTREAM = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "tests" / "servers" / "client_server.py")]


@pytest.mark.parametrize("era", ERAS)
async def test_calls_that_only_finish_together_run_at_once_with_their_progress(tmp_path: Path, era: str) -> None:
    async with proxy(tmp_path, PYTHON_UPSTREAM) as (url, _):
        async with Client.http(url, era=era, log_level="info") as client:
            with anyio.fail_after(60):
                outcomes: dict[str, Any] = {}

                async def meet(label: str) -> None:
                    outcomes[label] = await client.call_tool("meet", {"label": label, "group": era, "expected": 8})

                async with anyio.create_task_group() as tasks:
                    for index in range(8):
                        tasks.start_soon(meet, f"call-{index}")
                assert sorted(outcomes) == [f"call-{index}" for index in range(8)]
                for label, outcome in outcomes.items():
                    assert outcome.text == label
                    assert [(p["progress"], p["message"]) for p in outcome.progress] == [(1, label), (2, label)]
                # A log names no request: the upstream's logs reach the caller while its call is alone upstream.
                alone = await client.call_tool("meet", {"label": "alone", "group": f"{era}-alone", "expected": 1})
                assert [log["data"] for log in alone.logs] == ["alone met 1"]


async def test_a_cancelled_call_is_cancelled_upstream(tmp_path: Path) -> None:
    async with proxy(tmp_path, PYTHON_UPSTREAM) as (url, _):
        async with Client.http(url) as client:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(client.call_tool, "hang")
                    while (await client.call_tool("tally")).structured != {"hanging": 1, "cancelled": 0}:
                        await anyio.sleep(0.02)
                    tasks.cancel_scope.cancel()
                while (await client.call_tool("tally")).structured != {"hanging": 0, "cancelled": 1}:
                    await anyio.sleep(0.02)


async def test_an_upstream_that_exits_fails_every_call_in_flight(tmp_path: Path) -> None:
    async with proxy(tmp_path, PYTHON_UPSTREAM) as (url, _):
        async with Client.http(url) as client:
            with anyio.fail_after(60):
                failures: list[McpError] = []

                async def hang() -> None:
                    with pytest.raises(McpError) as failed:
                        await client.call_tool("hang")
                    failures.append(failed.value)

                async with anyio.create_task_group() as tasks:
                    for _ in range(3):
                        tasks.start_soon(hang)
                    with pytest.raises(McpError):
                        await client.call_tool("crash", {"after": 3})
                assert len(failures) == 3
                assert {(error.code, error.message.split(" (")[0]) for error in failures} == {
                    (-32603, "the upstream server went away during tools/call")}
                assert (await client.call_tool("echo", {"text": "back"})).text == "back"


def test_proxy_needs_the_upstreams_command() -> None:
    result = subprocess.run([sys.executable, "-m", "mcpcore", "proxy", "--transport", "http"], capture_output=True,
                            text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    assert result.stderr.strip() == ("mcpcore: proxy needs an upstream: its URL (mcpcore proxy http://127.0.0.1:8000/mcp) "
                                     "or its command after -- (mcpcore proxy -- python server.py)")


def test_an_upstream_that_cannot_start_stops_the_proxy_saying_why(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-server")
    result = subprocess.run([sys.executable, "-m", "mcpcore", "proxy", "--transport", "http", "--port", "0", "--",
                             missing], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("mcpcore: the lifespan of server 'proxy:no-such-server' failed at start-up: "
                           "UpstreamDidNotStart: the upstream server did not start: ")
    assert missing in last and "serving" not in result.stderr


async def test_the_python_api_fronts_any_client_in_process() -> None:
    """`Gateway(connect).server` is a plain `Server`: here in memory, in front of an mcpcore server in memory."""
    from mcpcore.gateway import Gateway
    from servers.client_server import build

    gateway = Gateway(lambda: Client(build()), name="front", timeout=10)
    async with Client(gateway.server, era="2025-11-25") as client:
        with anyio.fail_after(30):
            assert "echo" in [tool["name"] for tool in await client.list_tools()]
            assert (await client.call_tool("echo", {"text": "in memory"})).text == "in memory"
            assert client.server_info["serverInfo"]["name"] == "front"


# -- what changes while the upstream runs, completions and tasks (tests/upstreams/changing_server.py, the example) --

CHANGING_UPSTREAM = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "tests" / "upstreams" / "changing_server.py")]
EVERYTHING_UPSTREAM = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "everything_server.py")]


@contextlib.asynccontextmanager
async def connection(url: str) -> AsyncIterator[HttpClient]:
    """A raw HTTP connection to the proxy at `url` (for listen and GET streams, read event by event)."""
    async with HttpClient.connect(SimpleNamespace(port=int(url.rsplit(":", 1)[1].split("/")[0]))) as link:
        yield link


@pytest.mark.parametrize("era", ERAS)
async def test_completions_are_the_upstreams(tmp_path: Path, era: str) -> None:
    async with proxy(tmp_path, CHANGING_UPSTREAM) as (url, _):
        async with Client.http(url, era=era) as client:
            with anyio.fail_after(30):
                assert "completions" in (await client.discover())["capabilities"]
                assert await client.complete(prompt="greet", argument="name", value="A") == ["Ada", "Alan"]
                assert await client.complete(resource="demo://people/{name}", argument="name", value="g") == ["Grace"]
                with pytest.raises(McpError) as unknown:
                    await client.complete(prompt="nobody", argument="name", value="A")
                assert unknown.value.code == -32602


async def test_a_tool_the_upstream_adds_is_announced_on_listen_streams_listed_and_served(tmp_path: Path) -> None:
    async with proxy(tmp_path, CHANGING_UPSTREAM) as (url, _), connection(url) as link:
        async with Client.http(url) as client:
            with anyio.fail_after(30):
                stream = SseStream(link)
                await stream.open(request("subscriptions/listen", "watch", notifications={"toolsListChanged": True}))
                assert (await stream.next())["method"] == "notifications/subscriptions/acknowledged"  # type: ignore[index]
                assert (await client.call_tool("add_tool", {"name": "fresh"})).text == "added"
                changed = await stream.next()
                assert changed is not None and changed["method"] == "notifications/tools/list_changed"
                assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "watch"
                assert "fresh" in [tool["name"] for tool in await client.list_tools()]  # read again before announced
                assert (await client.call_tool("fresh")).text == "I am fresh"


async def test_a_listen_streams_resource_subscription_hears_the_upstreams_updates(tmp_path: Path) -> None:
    async with proxy(tmp_path, CHANGING_UPSTREAM) as (url, _), connection(url) as link:
        async with Client.http(url) as client:
            with anyio.fail_after(30):
                stream = SseStream(link)
                await stream.open(request("subscriptions/listen", "notes",
                                          notifications={"resourceSubscriptions": ["demo://note"]}))
                assert (await stream.next())["method"] == "notifications/subscriptions/acknowledged"  # type: ignore[index]
                await client.call_tool("touch", {"uri": "demo://elsewhere"})  # not followed: not heard
                await client.call_tool("touch", {"uri": "demo://note"})
                updated = await stream.next()
                assert updated is not None and updated["method"] == "notifications/resources/updated"
                assert updated["params"]["uri"] == "demo://note"


async def test_a_2025_session_hears_list_changes_and_its_subscriptions_on_its_get_stream(tmp_path: Path) -> None:
    async with proxy(tmp_path, CHANGING_UPSTREAM) as (url, _), connection(url) as link, connection(url) as side:
        with anyio.fail_after(30):
            session_id = await initialize(link)
            stream = SseStream(side, legacy=True)
            await stream.open_get(session_headers(session_id))
            subscribed = await link.post(legacy("resources/subscribe", 1, uri="demo://note"), session_headers(session_id),
                                         legacy=True)
            assert subscribed.response["result"] == {}
            async with Client.http(url) as client:  # another client changes the upstream
                await client.call_tool("add_tool", {"name": "fresh"})
                changed = await stream.next()
                assert changed is not None and changed["method"] == "notifications/tools/list_changed"
                await client.call_tool("touch", {"uri": "demo://note"})
            updated = await stream.next()
            assert updated is not None and updated["method"] == "notifications/resources/updated"
            assert updated["params"]["uri"] == "demo://note"


async def test_a_tool_the_upstream_runs_as_a_task_is_polled_through_the_gateway(tmp_path: Path) -> None:
    async with proxy(tmp_path, EVERYTHING_UPSTREAM) as (url, _):
        async with Client.http(url, extensions={TASKS: {}}) as client:
            with anyio.fail_after(30):
                assert TASKS in (await client.discover())["capabilities"]["extensions"]
                created = (await client.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.1}})).result
                assert created["resultType"] == "task" and created["status"] == "working"
                while (task := (await client.request("tasks/get", {"taskId": created["taskId"]})).result)["status"] == "working":
                    await anyio.sleep(0.05)
                assert task["status"] == "completed" and "job" in str(task["result"]["content"])
                with pytest.raises(McpError) as unknown:
                    await client.request("tasks/get", {"taskId": "no-such-task"})
                assert unknown.value.code == -32602
        async with Client.http(url) as plain:  # a client without the extension: the plain call, and -32021 for tasks/get
            with anyio.fail_after(30):
                assert "job" in (await plain.call_tool("slow_compute", {"seconds": 0.1})).text
                with pytest.raises(McpError) as undeclared:
                    await plain.request("tasks/get", {"taskId": created["taskId"]})
                assert undeclared.value.code == -32021


async def test_the_skills_extension_is_the_upstreams(tmp_path: Path) -> None:
    async with proxy(tmp_path, EVERYTHING_UPSTREAM) as (url, _):
        async with Client.http(url) as client, Client.stdio(EVERYTHING_UPSTREAM) as direct:
            with anyio.fail_after(30):
                assert (await client.discover())["capabilities"]["extensions"][SKILLS] == {"directoryRead": True}
                listed = (await client.request("skills/list")).result
                assert listed["skills"] and _unmeta(listed) == _unmeta((await direct.request("skills/list")).result)
                manifest = listed["skills"][0]["uri"]
                [contents] = await client.read_resource(manifest)  # the skill's files are the upstream's resources
                assert contents["uri"] == manifest and contents["text"] == (await direct.read_resource(manifest))[0]["text"]


def _unmeta(result: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in result.items() if key != "_meta"}  # serverInfo: the gateway's or the upstream's


async def test_answers_sent_without_request_state_reach_the_upstream(tmp_path: Path) -> None:
    """A retry that brings answers but no requestState: the upstream reads them by their shape, as mcpcore does."""
    async with proxy(tmp_path, EVERYTHING_UPSTREAM) as (url, _):
        async with Client.http(url, elicit=lambda params: {"action": "accept"}) as client:
            with anyio.fail_after(30):
                answered = await client.send("tools/call", {
                    "name": "test_input_required_result_elicitation", "arguments": {},
                    "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ada"}}, "unasked": {"x": 1}}})
                assert answered["resultType"] == "complete" and answered["content"][0]["text"] == "Hello, Ada!"
