"""Prometheus metrics on their own listener, over a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import re
from typing import Any

import anyio
import orjson
import pytest

from conftest import request, tool_call
from http_client import HttpClient, mcp_headers, running
from mcpcore import Server

pytestmark = pytest.mark.anyio


def counted_server() -> Server:
    server = Server("counted", metrics=True)

    @server.tool
    async def echo(text: str) -> str:
        return text

    @server.tool
    async def hang() -> str:
        await anyio.sleep(60)
        return "never"

    return server


def samples(text: str) -> dict[str, float]:
    """`name{labels} value` lines by their series."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            found[series] = float(value)
    return found


async def scrape(http: Any, target: str = "/metrics", method: str = "GET") -> Any:
    stream = await anyio.connect_tcp("127.0.0.1", http.metrics_port)
    async with stream:
        client = HttpClient(stream, f"127.0.0.1:{http.metrics_port}")
        await client.send_request(method, target)
        return await client.read_reply()


async def test_calls_outcomes_refusals_and_gauges_are_counted() -> None:
    server = counted_server()
    async with running(server, metrics_port=0) as http:
        async with HttpClient.connect(http) as client:
            for request_id in (1, 2):
                await client.post(tool_call(request_id, "echo", text="hi"), mcp_headers(tool_call(request_id, "echo", text="hi")))
            missing = tool_call(3, "nope")
            assert (await client.post(missing, mcp_headers(missing))).json["error"]["code"] == -32602
            for n in range(20):  # made-up methods all count as "other"
                odd = request(f"made/up{n}", 10 + n)
                await client.post(odd, mcp_headers(odd))
            bad = tool_call(4, "echo", text="x")
            assert (await client.post(bad, {**mcp_headers(bad), "content-type": "text/plain"})).status == 415
        async with HttpClient.connect(http) as leaving:
            hang = tool_call(5, "hang")
            await leaving.send_request(headers=mcp_headers(hang), body=orjson.dumps(hang))
            with anyio.fail_after(10):
                while not http.runner.calls:
                    await anyio.sleep(0.01)
        with anyio.fail_after(10):
            while http.runner.calls:
                await anyio.sleep(0.01)
        reply = await scrape(http)
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = reply.body.decode()
    found = samples(text)
    assert found['mcpcore_calls_total{method="tools/call",tool="echo",outcome="ok"}'] == 2
    assert found['mcpcore_calls_total{method="tools/call",tool="",outcome="error"}'] == 1
    assert found['mcpcore_calls_total{method="other",tool="",outcome="error"}'] == 20
    assert found['mcpcore_calls_total{method="tools/call",tool="hang",outcome="cancelled"}'] == 1
    assert found['mcpcore_call_errors_total{code="-32602"}'] == 1 and found['mcpcore_call_errors_total{code="-32601"}'] == 20
    assert found['mcpcore_http_rejections_total{status="415"}'] == 1
    assert found['mcpcore_call_duration_seconds_count{method="tools/call"}'] == 4
    assert found['mcpcore_call_duration_seconds_bucket{method="tools/call",le="+Inf"}'] == 4
    assert found["mcpcore_in_flight_calls"] == 0 and found["mcpcore_http_connections"] >= 1
    assert len([s for s in found if s.startswith("mcpcore_calls_total")]) == 4
    assert re.search(r"^# TYPE mcpcore_call_duration_seconds histogram$", text, re.M)


async def test_metrics_stay_off_the_public_listener_and_their_own_serves_nothing_else() -> None:
    server = counted_server()
    async with running(server, metrics_port=0) as http:
        async with HttpClient.connect(http) as client:
            await client.send_request("GET", "/metrics")
            assert (await client.read_reply()).status == 404
        assert (await scrape(http, "/mcp")).status == 404
        assert (await scrape(http, method="POST")).status == 405


async def test_without_server_metrics_no_listener_opens() -> None:
    async with running(Server("plain"), metrics_port=0) as http:
        assert http.metrics_port is None and http.server.metrics is None
