"""JSON-only answers (`HttpConfig(json_response=True)`, `--json-response`) on a real 127.0.0.1 socket.

No answer is ever an SSE stream: a call's notifications are dropped and counted,
what cannot work without a stream is refused saying why, and multi round-trip
requests on the 2026-07-28 wire, which need none, work as ever. Both the built-in
server and uvicorn serve; every message is checked against its era's schema.
"""

from __future__ import annotations

from typing import Any

import pytest

from conftest import legacy, meta, request, tool_call
from http_client import HttpClient, running
from servers import legacy_server

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_flavour")]
BASE = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
ELICITATION = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}


def json_only(reply: Any) -> dict[str, Any]:
    assert reply.headers["content-type"] == "application/json" and not reply.chunked, reply.headers
    return reply.json


async def test_notifications_are_dropped_and_counted_on_the_modern_wire() -> None:
    server = legacy_server.build(metrics=True)
    async with running(server, json_response=True) as http, HttpClient.connect(http) as client:
        message = request("tools/call", 1, _meta=meta(progressToken="p", **{"io.modelcontextprotocol/logLevel": "info"}),
                          name="steps", arguments={})
        answer = json_only(await client.post(message))
        assert answer["result"]["content"][0]["text"].startswith("done for")
    assert server.metrics is not None and server.metrics.dropped_notifications == 6  # three progress, three logs
    assert b"mcpcore_notifications_dropped_total 6" in server.metrics.render({})


async def test_multi_round_trip_requests_need_no_stream() -> None:
    async with running(legacy_server.build(), json_response=True) as http, HttpClient.connect(http) as client:
        first = json_only(await client.post(request("tools/call", 1, _meta=meta(**ELICITATION), name="greet", arguments={})))
        assert first["result"]["resultType"] == "input_required"
        retry = request("tools/call", 2, _meta=meta(**ELICITATION), name="greet", arguments={},
                        requestState=first["result"]["requestState"],
                        inputResponses={"name": {"action": "accept", "content": {"name": "Ada"}}})
        assert json_only(await client.post(retry))["result"]["content"][0]["text"] == "Hello, Ada!"


async def test_a_subscription_stream_is_refused() -> None:
    async with running(legacy_server.build(), json_response=True) as http, HttpClient.connect(http) as client:
        listen = request("subscriptions/listen", 1, notifications={"toolsListChanged": True})
        reply = await client.post(listen)
        assert reply.status == 400 and "answers JSON only" in json_only(reply)["error"]["message"]
        assert json_only(await client.post(tool_call(2, "echo", text="on")))["result"]["content"][0]["text"] == "on"


async def test_a_session_is_served_in_json_and_refuses_what_needs_a_stream() -> None:
    server = legacy_server.build(metrics=True)
    async with running(server, json_response=True) as http, HttpClient.connect(http) as client:
        opened = await client.post(legacy("initialize", 0, protocolVersion="2025-11-25", capabilities={"elicitation": {}}),
                                   BASE, legacy=True)
        session = {**BASE, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        assert (await client.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session, legacy=True)).status == 202
        stepped = await client.post(legacy("tools/call", 1, name="steps", _meta={"progressToken": "p"}), session, legacy=True)
        assert json_only(stepped)["result"]["content"][0]["text"] == "done for None on 2025-11-25"
        asked = await client.post(legacy("tools/call", 2, name="greet", arguments={}), session, legacy=True)
        error = json_only(asked)["error"]
        assert error["code"] == -32600 and "needs an SSE stream" in error["message"]
        await client.send_request("GET", "/mcp", {"accept": "text/event-stream", **session})
        streamed = await client.read_reply()
        assert streamed.status == 405 and streamed.headers["allow"] == "POST, DELETE"
        await client.send_request("DELETE", "/mcp", session)
        assert (await client.read_reply()).status == 200
    assert server.metrics is not None and server.metrics.dropped_notifications == 3  # the progress (no log level set)
