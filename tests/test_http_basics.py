"""Streamable HTTP over a real socket: JSON for silent calls, SSE when notifications come first."""

from __future__ import annotations

import anyio
import pytest

from conftest import ROOT, meta, request
from http_client import HttpClient, running
from mcpcore._cli.main import load_target

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_flavour")]  # the built-in server, then uvicorn


@pytest.fixture
def echo_server():
    return load_target(str(ROOT / "examples" / "echo_server.py"))


async def test_a_silent_call_is_answered_with_one_json_body(echo_server) -> None:
    async with running(echo_server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(10):
            reply = await client.post(request("tools/call", 1, name="echo", arguments={"text": "hi"}))
            assert reply.status == 200 and not reply.chunked
            assert reply.headers["content-length"] == str(len(reply.body))
            assert reply.json["result"]["content"] == [{"type": "text", "text": "hi"}]


async def test_progress_before_the_result_upgrades_the_reply_to_sse(echo_server) -> None:
    async with running(echo_server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(10):
            reply = await client.post(request("tools/call", 7, _meta=meta(progressToken="p"), name="progress"))
            assert reply.status == 200 and reply.is_sse and reply.chunked
            assert reply.headers["cache-control"] == "no-cache"
            assert reply.headers["x-accel-buffering"] == "no"
            methods = [m.get("method") for m in reply.messages]
            assert methods == ["notifications/progress"] * 3 + [None]
            assert reply.messages[-1]["id"] == 7 and reply.messages[-1]["result"]["content"][0]["text"] == "done"


async def test_the_same_tool_without_a_progress_token_answers_plain_json(echo_server) -> None:
    async with running(echo_server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(10):
            reply = await client.post(request("tools/call", 8, name="progress"))
            assert not reply.is_sse
            assert reply.json["result"]["content"][0]["text"] == "done"


async def test_a_thousand_requests_share_one_keep_alive_connection(echo_server) -> None:
    async with running(echo_server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(60):
            for i in range(1000):
                reply = await client.post(request("tools/call", i, name="echo", arguments={"text": str(i)}))
                assert reply.json["id"] == i
                assert reply.json["result"]["content"][0]["text"] == str(i)
