"""The Bash upstream (`tests/upstreams/bash_server.sh`): a real stdio MCP server in Bash and jq that
speaks only 2026-07-28, as the gateway's upstream. Each test runs it as a subprocess over real pipes,
through `mcpcore.testing.Client.stdio(strict=True)` or line by line (`stdio_client.serve`); either way
every message it writes is checked against the official schema. Skipped without bash or jq, unless
`MCPCORE_TEST_JQ=required` (as in CI): then it fails."""

from __future__ import annotations

import os
import shutil
from typing import Any

import anyio
import orjson
import pytest

from conftest import ROOT, legacy, meta, request, tool_call
from mcpcore._wire.jsonrpc import META_VERSION, McpError
from mcpcore.testing import Client
from stdio_client import serve

pytestmark = pytest.mark.anyio

BASH_SERVER = ROOT / "tests" / "upstreams" / "bash_server.sh"
SERVER_INFO = {"name": "bash-upstream", "version": "1.0.0"}
FORM = {"elicitation": {"form": {}}}


@pytest.fixture
def command() -> list[str]:
    missing = " and ".join(name for name in ("bash", "jq") if shutil.which(name) is None)
    if missing:
        if os.environ.get("MCPCORE_TEST_JQ") == "required":
            pytest.fail(f"{missing} not on PATH, and MCPCORE_TEST_JQ=required")
        pytest.skip(f"{missing} not on PATH (apt-get install jq): the Bash upstream is a Bash script that answers with jq")
    return [str(BASH_SERVER)]


async def test_discover_and_every_list(command: list[str]) -> None:
    async with Client.stdio(command, strict=True) as client:
        with anyio.fail_after(30):
            discover = await client.discover()
            assert discover["supportedVersions"] == ["2026-07-28"]
            assert discover["capabilities"] == {"tools": {}, "resources": {}, "prompts": {}}
            assert discover["_meta"]["io.modelcontextprotocol/serverInfo"] == SERVER_INFO
            assert [tool["name"] for tool in await client.list_tools()] == ["echo", "add", "slow", "ask"]
            assert [resource["uri"] for resource in await client.list_resources()] == [
                "bash://upstream/greeting", "bash://upstream/readme"]
            [greet] = await client.list_prompts()
            assert greet["name"] == "greet" and greet["arguments"][0] == {"name": "name", "description": "Who to greet",
                                                                         "required": True}
            listed = (await client.request("tools/list")).result
            assert (listed["ttlMs"], listed["cacheScope"]) == (60000, "public")


async def test_each_tool_resource_and_prompt(command: list[str]) -> None:
    async with Client.stdio(command, strict=True) as client:
        with anyio.fail_after(30):
            echoed = await client.call_tool("echo", {"text": "héllo\tdu «Bash»"})
            assert echoed.text == "héllo\tdu «Bash»" and not echoed.is_error
            added = await client.call_tool("add", {"a": 2, "b": 3.5})
            assert (added.text, added.structured) == ("5.5", {"sum": 5.5})
            slept = await client.call_tool("slow", {"seconds": 0.1})
            assert slept.text == "slept 0.1 s"
            assert [(p["progress"], p["total"]) for p in slept.progress] == [(0, 1)]  # before the sleep, with the token
            quiet = await client.call_tool("slow", {"seconds": 0}, progress=False)
            assert quiet.notifications == [] and quiet.text == "slept 0 s"
            [greeting] = await client.read_resource("bash://upstream/greeting")
            assert greeting == {"uri": "bash://upstream/greeting", "mimeType": "text/plain", "text": "Hello from Bash."}
            prompt = await client.get_prompt("greet", {"name": "Ada"})
            assert prompt["messages"] == [{"role": "user", "content": {"type": "text", "text": "Say hello to Ada."}}]


@pytest.mark.parametrize("name, arguments, says", [
    ("echo", {}, "echo needs the argument text, a string"),
    ("add", {"a": "2", "b": 3}, "add needs the arguments a and b, both numbers"),
    ("slow", {"seconds": 61}, "slow needs the argument seconds, a number from 0 to 60"),
    ("slow", {"seconds": "1; rm -rf /"}, "slow needs the argument seconds, a number from 0 to 60"),
])
async def test_bad_arguments_are_tool_execution_errors(command: list[str], name: str, arguments: dict[str, Any],
                                                       says: str) -> None:
    async with Client.stdio(command, strict=True) as client:
        with anyio.fail_after(30):
            outcome = await client.call_tool(name, arguments)
            assert outcome.is_error and outcome.text == says


@pytest.mark.parametrize("answer, says", [
    ({"action": "accept", "content": {"name": "Ada"}}, "Hello, Ada!"),
    ({"action": "decline"}, "No name: the user chose to decline."),
])
async def test_ask_round_trips_through_the_elicit_callback(command: list[str], answer: dict[str, Any],
                                                           says: str) -> None:
    asked: list[dict[str, Any]] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return answer

    async with Client.stdio(command, elicit=elicit, strict=True) as client:
        with anyio.fail_after(30):
            assert (await client.call_tool("ask")).text == says
    assert asked == [{"mode": "form", "message": "What is your name?", "requestedSchema": {
        "type": "object", "properties": {"name": {"type": "string", "title": "Name"}}, "required": ["name"]}}]


async def test_ask_asks_again_until_it_has_a_name(command: list[str]) -> None:
    answers = iter([{"action": "accept", "content": {}}, {"action": "accept", "content": {"name": "Bo"}}])
    async with Client.stdio(command, elicit=lambda params: next(answers), strict=True) as client:
        with anyio.fail_after(30):
            assert (await client.call_tool("ask")).text == "Hello, Bo!"


@pytest.mark.parametrize("method, params, code, data", [
    ("tools/call", {"name": "nope"}, -32602, None),
    ("tools/call", {"name": "ask"}, -32021, {"requiredCapabilities": FORM}),  # the client declared no elicitation
    ("tools/call", {"name": "echo", "arguments": "text"}, -32602, None),
    ("resources/read", {"uri": "bash://upstream/nothing"}, -32602, {"uri": "bash://upstream/nothing"}),
    ("prompts/get", {"name": "nope"}, -32602, None),
    ("prompts/get", {"name": "greet"}, -32602, None),
    ("completion/complete", {}, -32601, None),
    ("ping", {}, -32601, None),  # removed in 2026-07-28
    ("tools/list\u0000", {}, -32601, None),  # matches no method exactly
    ("tools/list", {"_meta": {META_VERSION: "2025-11-25"}}, -32022,
     {"supported": ["2026-07-28"], "requested": "2025-11-25"}),
])
async def test_errors_have_the_codes_the_spec_gives(command: list[str], method: str, params: dict[str, Any],
                                                    code: int, data: Any) -> None:
    async with Client.stdio(command, strict=True) as client:
        with anyio.fail_after(30):
            with pytest.raises(McpError) as raised:
                await client.request(method, params)
            assert (raised.value.code, raised.value.data) == (code, data)
            assert (await client.call_tool("echo", {"text": "still here"})).text == "still here"


# -- line by line over raw pipes ---------------------------------------------------------------


async def test_a_line_that_is_not_json_gets_a_parse_error_without_an_id(command: list[str]) -> None:
    async with serve(command) as client:
        with anyio.fail_after(30):
            await client.send_raw(b"{not json\n")
            assert await client.read() == {"jsonrpc": "2.0", "error": {
                "code": -32700, "message": "Parse error: the line is not one JSON value"}}
            assert (await client.call("server/discover", 1))["result"]["supportedVersions"] == ["2026-07-28"]


async def test_a_2025_era_initialize_gets_unsupported_protocol_version(command: list[str]) -> None:
    opening = legacy("initialize", 0, protocolVersion="2025-11-25", capabilities={},
                     clientInfo={"name": "mcp-proxy", "version": "0.13.0"})
    async with serve(command) as client:
        with anyio.fail_after(30):
            await client.send(opening)
            error = (await client.read())["error"]
            assert error["code"] == -32022
            assert error["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}


async def test_a_2025_era_client_fails_at_start_told_which_version_to_speak(command: list[str]) -> None:
    with anyio.fail_after(30), pytest.raises(McpError) as raised:
        async with Client.stdio(command, era="2025-11-25", strict=True):
            pass
    assert (raised.value.code, raised.value.data["supported"]) == (-32022, ["2026-07-28"])


@pytest.mark.parametrize("line, code", [
    (b"[]", -32600),
    (b'[{"jsonrpc":"2.0","id":1,"method":"server/discover"}]', -32600),
    (b'{"jsonrpc":"1.0","id":1,"method":"server/discover"}', -32600),
    (b'{"jsonrpc":"2.0","id":null,"method":"server/discover"}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"result":{}}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"server/discover"}', -32602),
    (b'{"jsonrpc":"2.0","id":1,"method":"nope","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}', -32602),
])
async def test_malformed_requests_get_a_specific_error(command: list[str], line: bytes, code: int) -> None:
    async with serve(command) as client:
        with anyio.fail_after(30):
            await client.send_raw(line + b"\n")
            assert (await client.read())["error"]["code"] == code


async def test_a_forged_request_state_fails_the_call(command: list[str]) -> None:
    forged = request("tools/call", 1, _meta=meta(**{"io.modelcontextprotocol/clientCapabilities": FORM}), name="ask",
                     requestState="forged", inputResponses={"user_name": {"action": "accept", "content": {"name": "x"}}})
    async with serve(command) as client:
        with anyio.fail_after(30):
            await client.send(forged)
            assert (await client.read())["error"] == {"code": -32602, "message": "requestState is not one this server issued"}


async def test_requests_in_flight_are_answered_in_order_and_notifications_not_at_all(command: list[str]) -> None:
    lines = [tool_call(1, "slow", seconds=0.2),
             {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
             tool_call(2, "echo", text="two"), request("tools/list", "three"), tool_call(4, "add", a=1, b=3)]
    async with serve(command) as client:
        with anyio.fail_after(30):
            client.methods.update((message["id"], message["method"]) for message in lines if "id" in message)
            await client.send_raw(b"".join(orjson.dumps(message) + b"\n" for message in lines) + b"\n  \n")
            received = [await client.read() for _ in range(4)]
            assert [message["id"] for message in received] == [1, 2, "three", 4]  # the cancel came too late for 1
            assert received[0]["result"]["content"][0]["text"] == "slept 0.2 s"
            assert (await client.call("server/discover", 5))["id"] == 5  # the blank line got no answer either


async def test_a_server_killed_mid_sleep_closes_its_stdout_at_once(command: list[str]) -> None:
    async with serve(command) as client:
        with anyio.fail_after(10):  # slow sleeps 30 s: its stdout must not stay open that long
            await client.send(request("tools/call", 1, _meta=meta(progressToken="p"), name="slow", arguments={"seconds": 30}))
            assert (await client.read())["method"] == "notifications/progress"  # sent just before the sleep
            client.process.terminate()
            assert client.process.stdout is not None
            with pytest.raises(anyio.EndOfStream):
                await client.process.stdout.receive()


async def test_end_of_input_ends_the_server_after_the_last_line(command: list[str]) -> None:
    async with serve(command) as client:
        with anyio.fail_after(30):
            client.methods[7] = "tools/call"
            await client.send_raw(orjson.dumps(tool_call(7, "echo", text="last")))  # no newline before EOF
            await client.close_stdin()
            assert (await client.read())["result"]["content"][0]["text"] == "last"
            assert await client.wait() == 0
