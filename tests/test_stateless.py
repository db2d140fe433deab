"""Stateless 2025-era serving (`HttpConfig(stateless=True)`, `--stateless`) on a real 127.0.0.1 socket.

Each 2025-era POST stands on its own: `initialize` mints no session, any other
request is served at its `MCP-Protocol-Version`, and what needs a session is
refused with a specific error, never left hanging. Every message is checked
against the 2025-11-25 schema; both the built-in server and uvicorn serve.
"""

from __future__ import annotations

import gc

import anyio
import orjson
import pytest

from conftest import legacy, tool_call
from http_client import HttpClient, running
from mcpcore import Server
from mcpcore._runtime.session import Session
from servers import legacy_server

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_flavour")]
BASE = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def at(version: str) -> dict[str, str]:
    return {**BASE, "mcp-protocol-version": version}


async def test_initialize_mints_no_session_and_offers_nothing_that_needs_one() -> None:
    server = legacy_server.build()
    async with running(server, stateless=True) as http, HttpClient.connect(http) as client:
        reply = await client.post(legacy("initialize", 0, protocolVersion="2025-11-25", capabilities={},
                                         clientInfo={"name": "t", "version": "1"}), BASE, legacy=True)
        assert reply.status == 200 and "mcp-session-id" not in reply.headers
        result = reply.response["result"]
        assert result["protocolVersion"] == "2025-11-25"
        assert result["capabilities"]["tools"] == {} and result["capabilities"]["resources"] == {}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await client.post(initialized, at("2025-11-25"), legacy=True)).status == 202
        assert len(http.sessions) == 0
    assert not server.bus.subscribers  # the stand-in session an initialize attached was let go


async def test_each_request_stands_on_its_own_at_its_protocol_version() -> None:
    async with running(legacy_server.build(), stateless=True) as http, HttpClient.connect(http) as client:
        echoed = await client.post(legacy("tools/call", 1, name="echo", arguments={"text": "hi"}), at("2025-11-25"), legacy=True)
        assert echoed.response["result"]["content"] == [{"type": "text", "text": "hi"}]
        structured = await client.post(legacy("tools/call", 2, name="weather", arguments={"city": "Oslo"}),
                                       at("2025-06-18"), legacy=True)
        assert structured.response["result"]["structuredContent"] == {"city": "Oslo", "high": 21}
        # No header: the 2025-03-26 revision, which has no structured output.
        unversioned = await client.post(legacy("tools/call", 3, name="weather", arguments={"city": "Oslo"}), BASE, legacy=True)
        assert "structuredContent" not in unversioned.response["result"]
        streamed = await client.post(legacy("tools/call", 4, name="steps", _meta={"progressToken": "p"}),
                                     at("2025-11-25"), legacy=True)
        assert streamed.is_sse
        progress = [m["params"]["progress"] for m in streamed.messages if m.get("method") == "notifications/progress"]
        assert progress == [1, 2, 3]
        assert streamed.response["result"]["content"][0]["text"] == "done for None on 2025-11-25"
        logged = [m["params"] for m in streamed.messages if m.get("method") == "notifications/message"]
        assert [(m["level"], m["data"]) for m in logged] == [("info", "step 1"), ("info", "step 2"), ("info", "step 3")]
        assert (await client.post(legacy("ping", 5), at("2025-11-25"), legacy=True)).response["result"] == {}
        assert (await client.post(legacy("logging/setLevel", 6, level="debug"), at("2025-11-25"), legacy=True)).response["result"] == {}
        # The modern wire beside it, as always.
        modern = await client.post(tool_call(7, "echo", text="new"))
        assert modern.json["result"]["content"][0]["text"] == "new"
        assert len(http.sessions) == 0


async def test_an_unsupported_version_header_is_refused() -> None:
    async with running(legacy_server.build(), stateless=True) as http, HttpClient.connect(http) as client:
        reply = await client.post(legacy("tools/call", 1, name="echo", arguments={"text": "hi"}), at("1999-01-01"), legacy=True)
        assert reply.status == 400 and "Unsupported MCP-Protocol-Version '1999-01-01'" in reply.json["error"]["message"]
        assert reply.json["id"] == 1


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_get_and_delete_are_not_allowed(method: str) -> None:
    async with running(legacy_server.build(), stateless=True) as http, HttpClient.connect(http) as client:
        await client.send_request(method, "/mcp", {"accept": "text/event-stream", "mcp-session-id": "anything",
                                                   "mcp-protocol-version": "2025-11-25"})
        reply = await client.read_reply()
        assert reply.status == 405 and reply.headers["allow"] == "POST"
        assert "runs stateless" in reply.json["error"]["message"]


@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
async def test_subscriptions_are_refused(method: str) -> None:
    async with running(legacy_server.build(), stateless=True) as http, HttpClient.connect(http) as client:
        reply = await client.post(legacy(method, 1, uri="demo://note"), at("2025-11-25"), legacy=True)
        error = reply.response["error"]
        assert error["code"] == -32601 and "runs stateless" in error["message"]


@pytest.mark.parametrize("tool", ["greet", "haiku"])
async def test_a_call_that_would_ask_the_client_is_refused(tool: str) -> None:
    async with running(legacy_server.build(), stateless=True) as http, HttpClient.connect(http) as client:
        reply = await client.post(legacy("tools/call", 1, name=tool, arguments={}), at("2025-11-25"), legacy=True)
        error = reply.response["error"]
        assert error["code"] == -32600 and "needs a session" in error["message"]
        # and the server goes on serving
        again = await client.post(legacy("tools/call", 2, name="echo", arguments={"text": "still"}), at("2025-11-25"), legacy=True)
        assert again.response["result"]["content"][0]["text"] == "still"


async def test_a_client_response_is_refused() -> None:
    async with running(legacy_server.build(), stateless=True) as http, HttpClient.connect(http) as client:
        reply = await client.post({"jsonrpc": "2.0", "id": "mcpcore-x-1", "result": {}}, at("2025-11-25"), legacy=True)
        assert reply.status == 400


async def test_a_closed_connection_cancels_its_call() -> None:
    server = Server("stateless-cancel")
    started, ended = anyio.Event(), []

    @server.tool
    async def wait() -> str:
        """Wait until cancelled."""
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            ended.append("cancelled")
        return "never"

    async with running(server, stateless=True) as http:
        async with HttpClient.connect(http) as client:
            await client.send_request("POST", "/mcp", at("2025-11-25"),
                                      orjson.dumps(legacy("tools/call", 1, name="wait", arguments={})))
            with anyio.fail_after(10):
                await started.wait()
        with anyio.fail_after(10):  # the call is cancelled, and leaves the runner
            while not ended or http.runner.calls:
                await anyio.sleep(0.01)
        assert ended == ["cancelled"]


async def test_sessions_stay_unused_under_many_initializes() -> None:
    server = legacy_server.build()
    async with running(server, stateless=True, max_sessions=1) as http, HttpClient.connect(http) as client:
        for number in range(20):  # far past the session limit: nothing is kept, so nothing fills up
            reply = await client.post(legacy("initialize", number, protocolVersion="2025-06-18", capabilities={}), BASE, legacy=True)
            assert reply.status == 200 and reply.response["result"]["protocolVersion"] == "2025-06-18"
        assert len(http.sessions) == 0
    assert not server.bus.subscribers


async def test_nothing_is_kept_after_many_requests_of_every_kind() -> None:
    """A hostile mix (initialize, calls that stream, refusals, a call whose client hangs up) leaves no session,
    no subscriber, no call and no stand-in alive."""
    server = legacy_server.build()
    async with running(server, stateless=True) as http:
        async with HttpClient.connect(http) as client:
            for number in range(60):
                for message in (legacy("initialize", number, protocolVersion="2025-11-25", capabilities={}),
                                legacy("tools/call", number, name="steps", _meta={"progressToken": number}),
                                legacy("resources/subscribe", number, uri="demo://note"),
                                legacy("tools/call", number, name="greet", arguments={})):
                    reply = await client.post(message, at("2025-11-25"), legacy=True)
                    assert reply.response["id"] == number  # answered (refusals too, with their own status)
        for number in range(20):  # hang up in the middle of a call that streams
            async with HttpClient.connect(http) as client:
                await client.send_request("POST", "/mcp", at("2025-11-25"),
                                          orjson.dumps(legacy("tools/call", number, name="steps", _meta={"progressToken": 1})))
        with anyio.fail_after(10):
            while http.runner.calls:
                await anyio.sleep(0.01)
        gc.collect()
        assert not [thing for thing in gc.get_objects() if isinstance(thing, Session)]
        assert len(http.sessions) == 0 and not server.bus.subscribers
