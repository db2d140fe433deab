"""`mcpcore proxy -- python tests/upstreams/python_legacy_server.py`: the official Python SDK's server in
its handshake-only loop (it speaks only the 2025 era, and refuses `server/discover`) served over HTTP by
mcpcore as a real subprocess, to `mcpcore.client` in the 2026-07-28 era (its questions come as
`input_required`, the upstream call held open across the round) and in the 2025 era (real requests on
the session), and to the official Python SDK client in both eras (mcpcore._gateway.eras, docs/gateway.md)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import h11
import orjson
import pytest

from conftest import ROOT
from mcpcore._wire.jsonrpc import McpError
from mcpcore.client import Client
from test_gateway import ERAS, proxy

pytestmark = pytest.mark.anyio
pytest.importorskip("mcp", reason="the official SDK is in the test extra (pip install -e '.[test]')")

UPSTREAM = [sys.executable, str(ROOT / "tests" / "upstreams" / "python_legacy_server.py")]


def answer_name(params: dict[str, Any]) -> dict[str, Any]:
    assert params["message"] == "What is your name?" and "name" in params["requestedSchema"]["properties"]
    return {"action": "accept", "content": {"name": "Ada"}}


def answer_model(params: dict[str, Any]) -> dict[str, Any]:
    [message] = params["messages"]
    return {"role": "assistant", "content": {"type": "text", "text": f"42, to {message['content']['text']}"},
            "model": "test-model"}


@pytest.mark.parametrize("era", ERAS)
async def test_a_2025_only_upstream_is_served_in_both_eras(tmp_path: Path, era: str) -> None:
    async with proxy(tmp_path, UPSTREAM) as (url, _):
        async with Client.http(url, era=era, elicit=answer_name, sample=answer_model, roots=["file:///work"],
                               log_level="info") as client:
            with anyio.fail_after(60):
                if era == "2026-07-28":
                    discovered = await client.discover()
                    assert discovered["instructions"] == "A 2025-era test upstream."
                    assert "tools" in discovered["capabilities"]
                names = {tool["name"] for tool in await client.list_tools()}
                assert names == {"echo", "ask_name", "asking", "ask_model", "ask_roots", "slow_steps", "grow"}
                assert (await client.call_tool("echo", {"text": "héllo"})).text == "héllo"
                assert (await client.call_tool("ask_name")).text == "hello Ada"
                assert (await client.call_tool("ask_model", {"question": "everything"})).text == \
                    "the model said: 42, to everything"
                assert (await client.call_tool("ask_roots")).text == "file:///work"
                stepped = await client.call_tool("slow_steps", {"steps": 3})
                assert stepped.text == "3 steps"
                assert [(p["progress"], p["total"]) for p in stepped.progress] == [(1, 3), (2, 3), (3, 3)]
                assert [log["data"] for log in stepped.logs] == ["step 1", "step 2", "step 3"]


async def test_the_2026_client_gets_input_required_with_sealed_state_and_the_call_stays_open(tmp_path: Path) -> None:
    """One round at a time by hand: the upstream's elicitation comes as `input_required`; the retry with the
    answer finishes the same upstream call (a fresh call would ask again); a replayed retry is refused."""
    async with proxy(tmp_path, UPSTREAM) as (url, _):
        async with Client.http(url, elicit=answer_name) as client:
            with anyio.fail_after(60):
                await client.list_tools()
                asked = await client.send("tools/call", {"name": "ask_name", "arguments": {}})
                assert asked["resultType"] == "input_required"
                [(name, request)] = asked["inputRequests"].items()
                assert request["method"] == "elicitation/create"
                assert request["params"]["message"] == "What is your name?"
                assert "held" not in asked["requestState"]  # sealed: the key does not show
                retry = {"name": "ask_name", "arguments": {}, "requestState": asked["requestState"],
                         "inputResponses": {name: {"action": "accept", "content": {"name": "Grace"}}}}
                done = await client.send("tools/call", retry)
                assert done["content"][0]["text"] == "hello Grace"
                with pytest.raises(McpError) as replayed:
                    await client.send("tools/call", retry)
                assert replayed.value.code == -32600
                assert "no longer held" in replayed.value.message


async def test_a_client_that_cannot_answer_gets_the_upstreams_answer_to_that(tmp_path: Path) -> None:
    """A client without the elicitation capability: the upstream's request gets an error, and the upstream's
    own handling of it (the SDK fails the call with that error) comes back as it is."""
    async with proxy(tmp_path, UPSTREAM) as (url, _):
        async with Client.http(url) as client:
            with anyio.fail_after(60):
                with pytest.raises(McpError) as refused:
                    await client.call_tool("ask_name")
                assert (refused.value.code, refused.value.message) == (
                    -32601, "the calling client cannot answer elicitation/create (it declared no elicitation capability)")
                assert (await client.call_tool("echo", {"text": "after"})).text == "after"


async def test_a_client_that_never_retries_has_its_upstream_call_cancelled(tmp_path: Path) -> None:
    async with proxy(tmp_path, UPSTREAM, "--upstream-hold", "0.5", "--log-level", "info") as (url, _):
        async with Client.http(url, elicit=answer_name) as client:
            with anyio.fail_after(60):
                await client.list_tools()
                asked = await client.send("tools/call", {"name": "ask_name", "arguments": {}})
                assert asked["resultType"] == "input_required"
                assert (await client.call_tool("asking")).structured == {"result": 1}  # held open upstream
                log = tmp_path / "proxy.log"
                while "was not retried by its client within 0.5 s: cancelled" not in log.read_text():
                    await anyio.sleep(0.05)
                assert (await client.call_tool("asking")).structured == {"result": 0}  # not held upstream
                [name] = asked["inputRequests"]
                retry = {"name": "ask_name", "arguments": {}, "requestState": asked["requestState"],
                         "inputResponses": {name: {"action": "accept", "content": {"name": "Late"}}}}
                with pytest.raises(McpError) as late:
                    await client.send("tools/call", retry)
                assert (late.value.code, late.value.message) == (-32600, (
                    "the upstream call this retry answers is no longer held (answered already, or not retried "
                    "within 0.5 s)"))
                assert (await client.call_tool("ask_name")).text == "hello Ada"  # the upstream goes on


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_official_python_client_through_the_gateway(tmp_path: Path, mode: str) -> None:
    sdk = pytest.importorskip("mcp")
    sdk_types = pytest.importorskip("mcp_types")

    async def elicit(context: Any, params: Any) -> Any:
        return sdk_types.ElicitResult(action="accept", content={"name": "Ada"})

    async def sample(context: Any, params: Any) -> Any:
        return sdk_types.CreateMessageResult(role="assistant", model="sdk-model",
                                             content=sdk_types.TextContent(type="text", text="yes"))

    async with proxy(tmp_path, UPSTREAM) as (url, _):
        with anyio.fail_after(60):
            async with sdk.Client(url, mode=mode, elicitation_callback=elicit, sampling_callback=sample,
                                  read_timeout_seconds=30) as client:
                assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
                named = await client.call_tool("ask_name", {})
                assert named.content[0].text == "hello Ada"  # type: ignore[union-attr]
                sampled = await client.call_tool("ask_model", {"question": "ok?"})
                assert sampled.content[0].text == "the model said: yes"  # type: ignore[union-attr]


async def test_several_calls_asking_at_once_are_told_apart_only_when_one_is_running(tmp_path: Path) -> None:
    """A request on stdio names no call: while one call waits for its client, another call's question is
    still known to be that call's; each of two calls held at once gets its own answer, the later one first."""
    async with proxy(tmp_path, UPSTREAM) as (url, _):
        async with Client.http(url, elicit=answer_name) as client:
            with anyio.fail_after(60):
                await client.list_tools()
                first = await client.send("tools/call", {"name": "ask_name", "arguments": {}})
                second = await client.send("tools/call", {"name": "ask_name", "arguments": {}})
                assert first["resultType"] == second["resultType"] == "input_required"
                for state, who in ((second["requestState"], "Second"), (first["requestState"], "First")):
                    [name] = (first if state == first["requestState"] else second)["inputRequests"]
                    retry = {"name": "ask_name", "arguments": {}, "requestState": state,
                             "inputResponses": {name: {"action": "accept", "content": {"name": who}}}}
                    assert (await client.send("tools/call", retry))["content"][0]["text"] == f"hello {who}"



async def test_a_question_while_another_call_runs_on_stdio_cannot_be_placed(tmp_path: Path) -> None:
    """Two calls running upstream, neither waiting for its client: a stdio request names no call, so the
    gateway refuses to guess, and the upstream's tool gets that error; the other call is not disturbed."""
    started = anyio.Event()
    async with proxy(tmp_path, UPSTREAM) as (url, _):
        async with Client.http(url, elicit=answer_name, on_progress=lambda params: started.set()) as client:
            with anyio.fail_after(60):
                await client.list_tools()
                outcomes: dict[str, Any] = {}

                async def steps() -> None:
                    outcomes["steps"] = await client.call_tool("slow_steps", {"steps": 100})

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(steps)
                    await started.wait()
                    with pytest.raises(McpError) as unplaced:
                        await client.call_tool("ask_name")
                assert (unplaced.value.code, unplaced.value.message) == (
                    -32603, "the gateway cannot tell which of 2 calls in flight sent elicitation/create "
                            "(a request on stdio names no call)")
                assert outcomes["steps"].text == "100 steps"


async def test_over_http_each_question_comes_with_its_call() -> None:
    """A 2025-era upstream over Streamable HTTP (mcpcore's own, asked on a session): its question comes in the
    response stream of the call that asked, so it is placed even while another call runs (`hold`, which only
    returns once `greet` has its answer)."""
    from http_client import running
    from mcpcore.gateway import Gateway
    from servers.client_server import build

    async with running(build()) as upstream:
        gateway = Gateway(lambda: Client.http(upstream.url, era="2025-11-25"), name="front", timeout=30)
        async with running(gateway.server) as front, Client.http(front.url, elicit=answer_name) as client:
            with anyio.fail_after(60):
                outcomes: dict[str, str] = {}

                async def call(name: str) -> None:
                    outcomes[name] = (await client.call_tool(name)).text

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(call, "hold")
                    while len(gateway.held.calls) != 1:  # hold is in flight upstream
                        await anyio.sleep(0.02)
                    tasks.start_soon(call, "greet")
                assert outcomes == {"hold": "released", "greet": "Hello, Ada!"}


SILENT_BEFORE_INITIALIZE = r'''
import json, sys
initialized = False
for line in sys.stdin:
    message = json.loads(line)
    method, answer = message.get("method"), None
    if method == "initialize":
        initialized = True
        answer = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "quiet", "version": "1"}}
    elif method == "tools/list" and initialized:
        answer = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call" and initialized:
        answer = {"content": [{"type": "text", "text": message["params"]["arguments"]["text"]}]}
    if answer is not None and "id" in message:  # anything else, before initialize above all, is not answered
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer}), flush=True)
'''


async def test_an_upstream_silent_to_the_probe_is_taken_for_a_2025_era_one(tmp_path: Path) -> None:
    """The spec's other legacy outcome: no answer to `server/discover` within the bound (here the 1 s timeout)."""
    from mcpcore.gateway import Gateway

    script = tmp_path / "quiet_server.py"
    script.write_text(SILENT_BEFORE_INITIALIZE)
    gateway = Gateway(lambda: Client.stdio([sys.executable, str(script)]), name="front", timeout=1)
    async with Client(gateway.server) as client:
        with anyio.fail_after(30):
            assert (await client.call_tool("echo", {"text": "late but there"})).text == "late but there"
            assert gateway.client is not None and gateway.client.era == "2025-06-18"  # the version its initialize answered


@pytest.mark.parametrize("era", ERAS)
async def test_a_list_change_announced_during_a_call_is_followed(tmp_path: Path, era: str) -> None:
    """The upstream's `tools/list_changed` comes with the call that made it (the only one in flight): it is
    the gateway's to follow, not the call's to drop."""
    async with proxy(tmp_path, UPSTREAM) as (url, _):
        async with Client.http(url, era=era) as client:
            with anyio.fail_after(60):
                assert (await client.call_tool("grow", {"name": "late"})).text == "grown"
                while "late" not in {tool["name"] for tool in await client.list_tools()}:
                    await anyio.sleep(0.05)
                assert (await client.call_tool("late")).text == "I am late"


ASKING_BESIDE_A_COMPLETION = r'''
import json, sys

def send(message):
    print(json.dumps({"jsonrpc": "2.0", **message}), flush=True)

def said(response):  # what the gateway answered to a question, as text
    error = response.get("error")
    return f"refused {error['code']}: {error['message']}" if error else f"answered {response['result'].get('action')}"

held = {}  # a request this server answers later: "call" (a tool call), "completion"
for line in sys.stdin:
    message = json.loads(line)
    method, params = message.get("method"), message.get("params") or {}
    if method == "server/discover":
        send({"id": message["id"], "error": {"code": -32601, "message": "Method not found"}})
    elif method == "initialize":
        send({"id": message["id"], "result": {"protocolVersion": "2025-11-25", "serverInfo": {"name": "asker", "version": "1"},
                                              "capabilities": {"tools": {}, "prompts": {}, "completions": {}}}})
    elif method == "tools/list":
        send({"id": message["id"], "result": {"tools": [{"name": name, "inputSchema": {"type": "object"}}
                                                        for name in ("wait", "ask")]}})
    elif method == "prompts/list":
        send({"id": message["id"], "result": {"prompts": [{"name": "greet", "arguments": [{"name": "name"}]}]}})
    elif method == "tools/call" and params["name"] == "wait":  # answered once the completion has its answer
        held["call"] = message["id"]
    elif method == "tools/call":  # ask: its own question, while the held completion is in flight
        held["call"] = message["id"]
        send({"id": "for-the-call", "method": "elicitation/create",
              "params": {"message": "Which name, for the call?", "requestedSchema": {"type": "object", "properties": {}}}})
    elif method == "completion/complete":
        held["completion"] = message["id"]
        if params["argument"]["value"] == "ask":  # the completion's own question, while the held call is in flight
            send({"id": "for-the-completion", "method": "elicitation/create",
                  "params": {"message": "Which name, for the completion?", "requestedSchema": {"type": "object", "properties": {}}}})
    elif message.get("id") in ("for-the-call", "for-the-completion") and "method" not in message:
        answer = said(message)
        send({"id": held.pop("completion"), "result": {"completion": {"values": [answer] if message["id"] == "for-the-completion" else ["done"]}}})
        send({"id": held.pop("call"), "result": {"content": [{"type": "text", "text": answer if message["id"] == "for-the-call" else "released"}]}})
'''

UNPLACED = "refused -32603: the gateway cannot tell which of 2 calls in flight sent elicitation/create (a request on stdio names no call)"


@pytest.mark.parametrize("asker", ["the completion", "the call"])
async def test_a_question_beside_a_completion_on_stdio_reaches_no_other_caller(tmp_path: Path, asker: str) -> None:
    """A `completion/complete` and a tool call in flight at once on a 2025-era stdio upstream, the upstream asks
    a question for one of them: a stdio request names neither, so the upstream gets an error, and the tool's
    caller is never asked (it was, as the only call the gateway counted, before the completion counted too)."""
    from http_client import running
    from mcpcore.gateway import Gateway

    script = tmp_path / "asker.py"
    script.write_text(ASKING_BESIDE_A_COMPLETION)
    gateway = Gateway(lambda: Client.stdio([sys.executable, str(script)]), name="front", timeout=30)
    asked: list[str] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        return {"action": "accept", "content": {}}

    async with running(gateway.server, via="h11") as front, Client.http(front.url, elicit=elicit) as client:
        outcomes = await _call_beside_a_completion(gateway, client, asker)
        assert asked == []
        if asker == "the completion":
            assert outcomes == {"call": "released", "completion": [UNPLACED]}
        else:
            assert outcomes == {"call": UNPLACED, "completion": ["done"]}


async def _call_beside_a_completion(gateway: Any, client: Client, asker: str) -> dict[str, Any]:
    """A tool call and a completion in flight upstream at once, the one that asks started second; what each got."""
    outcomes: dict[str, Any] = {}

    async def call(tool: str) -> None:
        outcomes["call"] = (await client.call_tool(tool)).text

    async def complete(value: str) -> None:
        outcomes["completion"] = await client.complete(prompt="greet", argument="name", value=value)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tasks:
            if asker == "the completion":
                tasks.start_soon(call, "wait")
                while len(gateway.held.calls) != 1:  # the tool call is in flight upstream
                    await anyio.sleep(0.02)
                tasks.start_soon(complete, "ask")
            else:
                tasks.start_soon(complete, "hold")
                while len(gateway.held.plain) != 1:  # the completion is in flight upstream
                    await anyio.sleep(0.02)
                tasks.start_soon(call, "ask")
    return outcomes


class _AskingOverHttp:
    """A 2025-era Streamable HTTP upstream on 127.0.0.1, by hand (h11): a question comes in the response stream
    of the request it is for. `wait` answers once the completion is done, `ask` asks in its own stream; a
    completion of "ask" asks in its own stream, of "hold" answers once `ask` is done."""

    def __init__(self) -> None:
        self.replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.done = {"call": anyio.Event(), "completion": anyio.Event()}

    async def serve(self, stream: anyio.abc.SocketStream) -> None:
        connection = h11.Connection(h11.SERVER)
        async with stream:
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    try:
                        connection.receive_data(await stream.receive())
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        return
                    continue
                if not isinstance(event, h11.Request):
                    return
                body = b""
                while not isinstance(event := connection.next_event(), h11.EndOfMessage):
                    if event is h11.NEED_DATA:
                        connection.receive_data(await stream.receive())
                    elif isinstance(event, h11.Data):
                        body += event.data
                await self._answer(connection, stream, orjson.loads(body) if body else {})
                if connection.our_state is not h11.DONE:
                    return
                connection.start_next_cycle()

    async def _answer(self, connection: h11.Connection, stream: anyio.abc.SocketStream, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params") or {}
        plain = {"server/discover": {"error": {"code": -32601, "message": "Method not found"}},
                 "initialize": {"result": {"protocolVersion": "2025-11-25", "serverInfo": {"name": "asker", "version": "1"},
                                           "capabilities": {"tools": {}, "prompts": {}, "completions": {}}}},
                 "tools/list": {"result": {"tools": [{"name": name, "inputSchema": {"type": "object"}} for name in ("wait", "ask")]}},
                 "prompts/list": {"result": {"prompts": [{"name": "greet", "arguments": [{"name": "name"}]}]}}}
        if method in plain or "id" not in message or "method" not in message:
            if "method" not in message and message.get("id") in self.replies:
                self.replies[message["id"]].set_result(message)
            answer = orjson.dumps({"jsonrpc": "2.0", "id": message.get("id"), **plain[method]}) if method in plain else b""
            headers = [("content-type", "application/json"), ("mcp-session-id", "s1"), ("content-length", str(len(answer)))]
            await stream.send(connection.send(h11.Response(status_code=200 if answer else 202, headers=headers))
                              + connection.send(h11.Data(data=answer)) + connection.send(h11.EndOfMessage()))
            return
        await stream.send(connection.send(h11.Response(status_code=200, headers=[("content-type", "text/event-stream")])))

        async def event(sent: dict[str, Any]) -> None:
            await stream.send(connection.send(h11.Data(data=b"data: " + orjson.dumps({"jsonrpc": "2.0", **sent}) + b"\n\n")))

        async def asked(key: str, text: str) -> str:
            self.replies[key] = asyncio.get_running_loop().create_future()
            await event({"id": key, "method": "elicitation/create",
                         "params": {"message": text, "requestedSchema": {"type": "object", "properties": {}}}})
            reply = await self.replies[key]
            error = reply.get("error")
            return f"refused {error['code']}: {error['message']}" if error else f"answered {reply['result']['action']}"

        if method == "tools/call" and params["name"] == "wait":
            await self.done["completion"].wait()
            result: dict[str, Any] = {"content": [{"type": "text", "text": "released"}]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": await asked("for-the-call", "Which name, for the call?")}]}
            self.done["call"].set()
        elif params["argument"]["value"] == "ask":
            result = {"completion": {"values": [await asked("for-the-completion", "Which name, for the completion?")]}}
            self.done["completion"].set()
        else:
            await self.done["call"].wait()
            result = {"completion": {"values": ["done"]}}
        await event({"id": message["id"], "result": result})
        await stream.send(connection.send(h11.EndOfMessage()))


@pytest.mark.parametrize("asker", ["the completion", "the call"])
async def test_over_http_a_question_beside_a_completion_reaches_only_its_own_caller(asker: str) -> None:
    """Over Streamable HTTP a question names its request by the stream it comes in: one for the tool call
    reaches that call's caller while a completion is in flight; one for the completion is refused (a
    completion relays none), and the tool call's caller beside it is not asked."""
    from http_client import running
    from mcpcore.gateway import Gateway

    upstream = _AskingOverHttp()
    asked: list[str] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        return {"action": "accept", "content": {}}

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener, anyio.create_task_group() as serving:
        serving.start_soon(listener.serve, upstream.serve)
        url = f"http://127.0.0.1:{listener.extra(anyio.abc.SocketAttribute.local_port)}/mcp"
        gateway = Gateway(lambda: Client.http(url), name="front", timeout=30)
        async with running(gateway.server, via="h11") as front, Client.http(front.url, elicit=elicit) as client:
            outcomes = await _call_beside_a_completion(gateway, client, asker)
        serving.cancel_scope.cancel()
    if asker == "the completion":
        assert asked == []
        assert outcomes == {"call": "released", "completion": [
            "refused -32601: the gateway relays elicitation/create only during a tool call, a resource read or a "
            "prompt, not during completion/complete"]}
    else:
        assert asked == ["Which name, for the call?"]
        assert outcomes == {"call": "answered accept", "completion": ["done"]}
