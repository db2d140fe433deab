"""The 2025-era wire over stdio: a process whose first request is `initialize` serves one session.

Every message the server sends is validated against the 2025-11-25 schema.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest

from conftest import LEGACY_VERSIONS, ROOT, legacy, request
from stdio_client import StdioClient, serve

pytestmark = pytest.mark.anyio

SERVE_LEGACY = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "tests" / "servers" / "legacy_server.py")]
CLIENT = {"name": "legacy-client", "version": "1.0"}


async def call(client: StdioClient, method: str, request_id: Any = 1, **params: Any) -> dict[str, Any]:
    await client.send(legacy(method, request_id, **params))
    return await client.response_to(request_id)


async def opened(client: StdioClient, version: str = "2025-11-25", capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    """initialize, then notifications/initialized; the initialize result."""
    reply = await call(client, "initialize", 0, protocolVersion=version, capabilities=capabilities or {}, clientInfo=CLIENT)
    await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return reply["result"]


@pytest.mark.parametrize(("asked", "answered"), [(v, v) for v in LEGACY_VERSIONS] + [("2099-01-01", "2025-11-25")])
async def test_initialize_answers_a_supported_version_with_itself_and_an_unknown_one_with_the_newest(asked: str, answered: str) -> None:
    async with serve(SERVE_LEGACY, legacy=True) as client:
        with anyio.fail_after(10):
            result = await opened(client, asked)
    assert result["protocolVersion"] == answered
    assert result["serverInfo"] == {"name": "legacy-tests", "version": "0.0.1"}
    assert result["instructions"] == "Tools for both eras."
    assert {"tools", "resources", "prompts", "logging"} <= set(result["capabilities"])


async def test_before_initialized_only_ping_is_served_and_a_second_initialize_is_refused() -> None:
    async with serve(SERVE_LEGACY, legacy=True) as client:
        with anyio.fail_after(10):
            await call(client, "initialize", 0, protocolVersion="2025-11-25", capabilities={}, clientInfo=CLIENT)
            early = await call(client, "tools/list", 1)
            assert early["error"]["code"] == -32600 and "notifications/initialized" in early["error"]["message"]
            assert (await call(client, "ping", 2))["result"] == {}
            await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            again = await call(client, "initialize", 3, protocolVersion="2025-11-25", capabilities={}, clientInfo=CLIENT)
            assert again["error"]["code"] == -32600 and "already initialized" in again["error"]["message"]


async def test_the_same_tools_answer_with_legacy_shaped_results() -> None:
    async with serve(SERVE_LEGACY, legacy=True) as client:
        with anyio.fail_after(10):
            await opened(client)
            assert (await call(client, "ping", 1))["result"] == {}
            assert (await call(client, "logging/setLevel", 2, level="info"))["result"] == {}
            tools = (await call(client, "tools/list", 3))["result"]
            assert "echo" in [t["name"] for t in tools["tools"]] and "ttlMs" not in tools
            echoed = (await call(client, "tools/call", 4, name="echo", arguments={"text": "héllo\u2028\x00🙂"}))["result"]
            assert echoed == {"content": [{"type": "text", "text": "héllo\u2028\x00🙂"}]}
            weather = (await call(client, "tools/call", 5, name="weather", arguments={"city": "Oslo"}))["result"]
            assert weather["structuredContent"] == {"city": "Oslo", "high": 21}
            read = (await call(client, "resources/read", 6, uri="demo://note"))["result"]
            assert read == {"contents": [{"uri": "demo://note", "mimeType": "text/plain", "text": "Remember to drink water."}]}
            missing = await call(client, "resources/read", 7, uri="demo://nothing")
            assert missing["error"]["code"] == -32002 and missing["error"]["data"] == {"uri": "demo://nothing"}
            prompt = (await call(client, "prompts/get", 8, name="plan", arguments={"city": "Rome"}))["result"]
            assert prompt["messages"][0]["content"]["text"] == "Plan a trip to Rome."
            for gone in ("server/discover", "subscriptions/listen"):
                assert (await call(client, gone, 9))["error"]["code"] == -32601


async def test_a_2025_03_26_session_gets_no_structured_output_or_output_schemas() -> None:
    async with serve(SERVE_LEGACY, legacy=True) as client:
        with anyio.fail_after(10):
            await opened(client, "2025-03-26")
            tools = (await call(client, "tools/list", 1))["result"]["tools"]
            assert not [t for t in tools if "outputSchema" in t]
            weather = (await call(client, "tools/call", 2, name="weather", arguments={"city": "Oslo"}))["result"]
            assert "structuredContent" not in weather and weather["content"][0]["text"] == '{"city":"Oslo","high":21}'


async def test_progress_and_log_messages_follow_the_session_log_level() -> None:
    async with serve(SERVE_LEGACY, legacy=True) as client:
        with anyio.fail_after(10):
            await opened(client)
            await client.send(legacy("tools/call", 1, name="steps", arguments={}, _meta={"progressToken": "p"}))
            reply = await client.response_to(1)
            quiet = [m["method"] for m in client.received if "method" in m]
            assert quiet == ["notifications/progress"] * 3  # no log level set: no log messages
            assert reply["result"]["content"][0]["text"] == "done for legacy-client on 2025-11-25"
            await call(client, "logging/setLevel", 2, level="info")
            client.received.clear()
            await call(client, "tools/call", 3, name="steps", arguments={})
            assert [m["params"]["data"] for m in client.received if m.get("method") == "notifications/message"] == [
                "step 1", "step 2", "step 3"]


async def test_an_elicitation_becomes_a_request_to_the_client_and_its_answer_re_enters_the_tool() -> None:
    async with serve(SERVE_LEGACY, legacy=True) as client:
        with anyio.fail_after(10):
            await opened(client, capabilities={"elicitation": {}})
            await client.send(legacy("tools/call", 1, name="greet", arguments={}))
            asked = await client.read()
            assert asked["method"] == "elicitation/create" and asked["params"]["message"] == "What is your name?"
            assert asked["params"]["requestedSchema"]["required"] == ["name"]
            await client.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "Ada"}}})
            reply = await client.response_to(1)
            assert reply["result"]["content"][0]["text"] == "Hello, Ada!"


async def test_sampling_for_a_2025_06_18_session_and_a_refusal_without_the_capability() -> None:
    async with serve(SERVE_LEGACY, legacy=True) as client:
        with anyio.fail_after(10):
            await opened(client, "2025-06-18", capabilities={"sampling": {}})
            await client.send(legacy("tools/call", 1, name="haiku", arguments={}))
            asked = await client.read()
            assert asked["method"] == "sampling/createMessage" and asked["params"]["maxTokens"] == 50
            answer = {"role": "assistant", "content": {"type": "text", "text": "old pond"}, "model": "m", "stopReason": "endTurn"}
            await client.send({"jsonrpc": "2.0", "id": asked["id"], "result": answer})
            assert (await client.response_to(1))["result"]["content"][0]["text"] == "The model wrote: old pond"
            refused = await call(client, "tools/call", 2, name="greet", arguments={})  # no elicitation capability
            assert refused["error"]["code"] == -32021


async def test_cancelling_a_call_waiting_for_the_client_tells_the_client_to_drop_its_request() -> None:
    async with serve(SERVE_LEGACY, legacy=True) as client:
        with anyio.fail_after(10):
            await opened(client, capabilities={"elicitation": {}})
            await client.send(legacy("tools/call", 1, name="greet", arguments={}))
            asked = await client.read()
            await client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
            dropped = await client.read()
            assert dropped["method"] == "notifications/cancelled" and dropped["params"]["requestId"] == asked["id"]
            assert (await call(client, "ping", 2))["result"] == {}  # and nothing was sent for the cancelled call


async def test_subscribed_resources_and_list_changes_reach_the_client_unsolicited() -> None:
    async with serve(SERVE_LEGACY, legacy=True) as client:
        with anyio.fail_after(10):
            await opened(client)
            assert (await call(client, "resources/subscribe", 1, uri="demo://note"))["result"] == {}
            await call(client, "tools/call", 2, name="touch", arguments={"uri": "demo://note"})
            await call(client, "tools/call", 3, name="touch", arguments={"uri": "demo://other"})
            await call(client, "tools/call", 4, name="add_tool", arguments={"name": "fresh"})
            await call(client, "ping", 5)
            seen = [(m["method"], m.get("params")) for m in client.received if "method" in m]
            assert ("notifications/resources/updated", {"uri": "demo://note"}) in seen
            assert ("notifications/resources/updated", {"uri": "demo://other"}) not in seen
            assert ("notifications/tools/list_changed", {}) in seen
            await call(client, "resources/unsubscribe", 6, uri="demo://note")
            client.received.clear()
            await call(client, "tools/call", 7, name="touch", arguments={"uri": "demo://note"})
            await call(client, "ping", 8)
            assert not [m for m in client.received if m.get("method") == "notifications/resources/updated"]


async def test_the_first_request_fixes_the_era_of_the_process() -> None:
    async with serve(SERVE_LEGACY, legacy=True) as client:
        with anyio.fail_after(10):
            await opened(client)
            modern = await call(client, "tools/list", 1, _meta=request("tools/list")["params"]["_meta"])
            assert modern["error"]["code"] == -32600 and "2025-era session" in modern["error"]["message"]
    async with serve(SERVE_LEGACY) as client:
        with anyio.fail_after(10):
            first = await client.call("tools/list", 1)
            assert "result" in first
            late = await call(client, "initialize", 2, protocolVersion="2025-11-25", capabilities={}, clientInfo=CLIENT)
            assert late["error"]["code"] == -32600 and "stateless 2026-07-28 wire" in late["error"]["message"]


async def test_a_client_refusing_a_request_makes_the_tool_call_an_error_result() -> None:
    async with serve(SERVE_LEGACY, legacy=True) as client:
        with anyio.fail_after(10):
            await opened(client, capabilities={"elicitation": {}})
            await client.send(legacy("tools/call", 1, name="greet", arguments={}))
            asked = await client.read()
            await client.send({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -1, "message": "user closed the dialog"}})
            reply = await client.response_to(1)
    assert reply["result"]["isError"] is True
    assert "user closed the dialog" in reply["result"]["content"][0]["text"]
