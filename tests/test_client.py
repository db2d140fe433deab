"""`mcpcore.client`: many requests at once on one client, over a real subprocess, a real HTTP server
(both eras) and the HTTP+SSE transport; cancellation, a server that dies, and a 2025-era server's
question answered while other calls go on."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import pytest

from conftest import ROOT
from http_client import running
from mcpcore.client import Client
from servers.client_server import build

pytestmark = pytest.mark.anyio

SERVE = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "tests" / "servers" / "client_server.py")]
CALLS = 8


async def meet_all(client: Client, group: str) -> dict[str, Any]:
    """`CALLS` calls of `meet` at once (none returns before all are in); each label → its outcome."""
    outcomes: dict[str, Any] = {}

    async def one(label: str) -> None:
        outcomes[label] = await client.call_tool("meet", {"label": label, "group": group, "expected": CALLS})

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            for index in range(CALLS):
                tasks.start_soon(one, f"call-{index}")
    return outcomes


def assert_each_got_its_own(outcomes: dict[str, Any]) -> None:
    assert sorted(outcomes) == [f"call-{index}" for index in range(CALLS)]
    for label, outcome in outcomes.items():
        assert outcome.text == label
        assert [(p["progress"], p["message"]) for p in outcome.progress] == [(1, label), (2, label)]


async def tally(client: Client, **wanted: int) -> None:
    """Wait (bounded) until the server's `tally` says `wanted`."""
    with anyio.fail_after(20):
        while not wanted.items() <= (await client.call_tool("tally")).structured.items():
            await anyio.sleep(0.02)


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_many_calls_at_once_over_one_subprocess_each_get_their_own_result_and_progress(era: str) -> None:
    unowned: list[dict[str, Any]] = []
    async with Client.stdio(SERVE, era=era, log_level="info", on_notification=unowned.append, strict=True) as client:
        outcomes = await meet_all(client, "stdio")
    assert_each_got_its_own(outcomes)
    # the logs name no request: with several in flight none can own them, so the client-wide listener hears them
    logs = [n["params"]["data"] for n in unowned if n["method"] == "notifications/message"]
    assert len(logs) + sum(len(outcome.logs) for outcome in outcomes.values()) == CALLS
    assert all(log.endswith(f"met {CALLS}") for log in logs)


async def test_a_cancelled_call_sends_notifications_cancelled_and_the_others_finish() -> None:
    async with Client.stdio(SERVE, strict=True) as client:
        async with anyio.create_task_group() as tasks:
            scope = anyio.CancelScope()

            async def hang() -> None:
                with scope:
                    await client.call_tool("hang")
                    raise AssertionError("hang returned")

            tasks.start_soon(hang)
            await tally(client, hanging=1)
            others = meet_all(client, "after-cancel")
            scope.cancel()
            assert_each_got_its_own(await others)
        await tally(client, hanging=0, cancelled=1)  # the server heard notifications/cancelled and stopped the call
        assert (await client.call_tool("echo", {"text": "still here"})).text == "still here"


async def test_a_server_that_dies_mid_call_fails_every_pending_call_clearly() -> None:
    failures: list[BaseException] = []

    async def call(client: Client, name: str, arguments: dict[str, Any] | None = None) -> None:
        try:
            await client.call_tool(name, arguments)
        except ConnectionError as error:
            failures.append(error)

    async with Client.stdio(SERVE) as client:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call, client, "hang")
                tasks.start_soon(call, client, "hang")
                tasks.start_soon(call, client, "crash", {"after": 2})
        assert len(failures) == 3
        assert all("the server closed its stdout (exit status 3)" in str(error) for error in failures)
        with pytest.raises(ConnectionError, match="exit status 3"):
            await client.call_tool("echo", {"text": "late"})


# A stdio server that reads one request, closes its stdin, says so, and runs on without answering.
CLOSES_STDIN = """
import os, sys, time
sys.stdin.buffer.readline()
os.close(0)
print('{"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "closed"}}', flush=True)
time.sleep(60)
"""


async def test_a_server_that_closes_its_stdin_fails_every_call_in_flight_not_only_the_next() -> None:
    closed = anyio.Event()
    failures: list[BaseException] = []

    async def call(client: Client, text: str) -> None:
        try:
            await client.call_tool("echo", {"text": text})
        except ConnectionError as error:
            failures.append(error)

    async with Client.stdio([sys.executable, "-c", CLOSES_STDIN], on_log=lambda _: closed.set()) as client:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call, client, "read, never answered")
                await closed.wait()
                tasks.start_soon(call, client, "finds the stdin closed")
    assert len(failures) == 2
    assert all("the server's stdin is closed: every request in flight failed" in str(error) for error in failures)


async def test_a_2025_session_answers_the_servers_question_while_other_calls_go_on() -> None:
    """The elicitation is answered in a task of its own: the answer waits for a call made after the question,
    which a reader blocked on the question could never finish."""
    question = Question("Ada")
    async with Client.stdio(SERVE, era="2025-11-25", elicit=question.elicit, strict=True) as client:
        assert await question.asked_while_calling(client) == {"hold": "released", "greet": "Hello, Ada!", "echo": "meanwhile"}


class Question:
    """An elicitation answered only once a call made after it has finished: a client whose reader
    waited on the answer could never finish that call."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.asked, self.quick_done = anyio.Event(), anyio.Event()

    async def elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.set()
        await self.quick_done.wait()
        return {"action": "accept", "content": {"name": self.name}}

    async def asked_while_calling(self, client: Client) -> dict[str, str]:
        """`hold` and `greet` (which asks), and `echo` once the question is out: each one's text."""
        results: dict[str, str] = {}

        async def call(name: str) -> None:
            results[name] = (await client.call_tool(name)).text

        async def quick() -> None:
            await self.asked.wait()
            results["echo"] = (await client.call_tool("echo", {"text": "meanwhile"})).text
            self.quick_done.set()

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call, "hold")
                tasks.start_soon(call, "greet")
                tasks.start_soon(quick)
        return results


@pytest.mark.usefixtures("http_flavour")
@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_many_calls_at_once_over_http_in_each_era(era: str) -> None:
    async with running(build()) as http:
        async with Client.http(f"http://127.0.0.1:{http.port}/mcp", era=era, log_level="info", strict=True) as client:
            outcomes = await meet_all(client, "http")
    assert_each_got_its_own(outcomes)
    for label, outcome in outcomes.items():  # over HTTP each call's stream is its own: so are its logs
        assert [log["data"] for log in outcome.logs] == [f"{label} met {CALLS}"]


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_cancelled_call_over_http_or_http_sse_is_stopped_on_the_server(transport: str) -> None:
    """Over Streamable HTTP its connection is closed; over HTTP+SSE `notifications/cancelled` is POSTed."""
    async with running(build()) as http:
        url = f"http://127.0.0.1:{http.port}"
        async with (Client.http(f"{url}/mcp") if transport == "http" else Client.sse(f"{url}/sse", era="2025-11-25")) as client:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(client.call_tool, "hang")
                    await tally(client, hanging=1)
                    tasks.cancel_scope.cancel()
            await tally(client, hanging=0, cancelled=1)


@pytest.mark.usefixtures("http_flavour")
@pytest.mark.parametrize("era", ["2024-11-05", "2025-11-25"])
async def test_the_http_sse_transport_carries_calls_at_once_and_the_servers_questions(era: str) -> None:
    question = Question("Lin")
    async with running(build()) as http:
        async with Client.sse(f"http://127.0.0.1:{http.port}/sse", era=era, elicit=question.elicit, strict=True) as client:
            assert client.server_info["serverInfo"]["name"] == "client-tests"
            outcomes = await meet_all(client, "sse")
            results = await question.asked_while_calling(client)
            assert [tool["name"] for tool in await client.list_tools()][:2] == ["meet", "hang"]
    assert_each_got_its_own(outcomes)
    assert results == {"hold": "released", "greet": "Hello, Lin!", "echo": "meanwhile"}


async def test_an_sse_url_that_opens_no_session_is_a_clear_error() -> None:
    async with running(build()) as http:
        with pytest.raises(ConnectionError, match="opened no HTTP\\+SSE session"):
            async with Client.sse(f"http://127.0.0.1:{http.port}/mcp"):
                pass


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_many_calls_at_once_in_memory(era: str) -> None:
    async with Client(build(), era=era, strict=True) as client:
        assert_each_got_its_own(await meet_all(client, "memory"))


@pytest.mark.usefixtures("http_flavour")
@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_http_requests_one_after_another_share_a_keep_alive_connection(era: str) -> None:
    async with running(build(), keep_alive_timeout=0.2) as http:
        async with Client.http(f"http://127.0.0.1:{http.port}/mcp", era=era, strict=True) as client:
            peers = {(await client.call_tool("peer")).text for _ in range(5)}
            assert len(peers) == 1 and peers != {"None"}
            at_once: set[str] = set()

            async def one() -> None:
                at_once.add((await client.call_tool("meet", {"label": "x", "group": "peers", "expected": 3})).text)
                at_once.add((await client.call_tool("peer")).text)

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tasks:
                    for _ in range(3):
                        tasks.start_soon(one)
            assert len(at_once - {"x"}) >= 2  # calls at once take connections of their own
            await anyio.sleep(0.5)  # past the server's keep-alive timeout: it closes the idle connections
            assert (await client.call_tool("echo", {"text": "again"})).text == "again"  # sent on a new one


STATELESS_ASKER = r'''
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    params = message.get("params", {})
    if "inputResponses" not in params:  # ask, giving no requestState (the spec makes it optional)
        result = {"resultType": "input_required",
                  "inputRequests": {"q": {"method": "elicitation/create", "params": {"message": "name?",
                                    "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}}}}}}
    else:  # the retry: report the params as received
        result = {"content": [{"type": "text", "text": json.dumps(params, sort_keys=True)}]}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
'''


async def test_a_retry_carries_no_request_state_when_the_server_gave_none(tmp_path: Any) -> None:
    script = tmp_path / "asker.py"
    script.write_text(STATELESS_ASKER)

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"n": "Ada"}}

    with anyio.fail_after(20):
        async with Client.stdio([sys.executable, str(script)], elicit=answer) as client:
            sent = (await client.request("tools/call", {"name": "x", "arguments": {}})).result
    retried = json.loads(sent["content"][0]["text"])
    assert retried["inputResponses"] == {"q": {"action": "accept", "content": {"n": "Ada"}}}
    assert "requestState" not in retried


OLDER_SERVER = r'''
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if message["method"] == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "older", "version": "1"}}
    else:
        result = {"content": [{"type": "text", "text": "ok"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
'''


async def test_a_session_speaks_the_version_the_server_answered_initialize_with(tmp_path: Any) -> None:
    """A server that supports only an older 2025-era revision answers `initialize` with it; the session is
    then that revision's (its MCP-Protocol-Version header over HTTP, its schema when strict)."""
    script = tmp_path / "older.py"
    script.write_text(OLDER_SERVER)
    with anyio.fail_after(20):
        async with Client.stdio([sys.executable, str(script)], era="2025-11-25") as client:
            assert client.era == "2025-06-18"
            assert (await client.call_tool("x")).text == "ok"
