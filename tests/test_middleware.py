"""Middleware order and short-circuits, the access log and the rate limiter, over real HTTP and stdio."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from conftest import tool_call
from http_client import HttpClient, mcp_headers, running
from mcpcore import Call, McpError, Server, ToolError
from mcpcore.auth import AccessToken, Auth, StaticTokens
from mcpcore.middleware import Next, RateLimiter, access_log
from stdio_client import serve

pytestmark = pytest.mark.anyio


def with_echo(server: Server, ran: list[str] | None = None) -> Server:
    @server.tool
    async def echo(text: str) -> str:
        if ran is not None:
            ran.append(text)
        return text

    return server


async def test_the_first_middleware_is_outermost_and_sees_the_encoded_result() -> None:
    seen: list[str] = []

    def named(name: str) -> Any:
        async def middleware(call: Call, call_next: Next) -> bytes:
            seen.append(f"{name} in {call.message['method']}")
            result = await call_next(call)
            seen.append(f"{name} out {orjson.loads(result)['content'][0]['text']}")
            return result

        return middleware

    server = with_echo(Server("ordered", middleware=[named("outer"), named("inner")]))
    async with running(server) as http, HttpClient.connect(http) as client:
        reply = await client.post(tool_call(1, "echo", text="hi"), mcp_headers(tool_call(1, "echo", text="hi")))
    assert reply.response["result"]["content"][0]["text"] == "hi"
    assert seen == ["outer in tools/call", "inner in tools/call", "inner out hi", "outer out hi"]


async def test_a_middleware_can_answer_with_an_error_instead_of_running_the_call() -> None:
    async def deny_writes(call: Call, call_next: Next) -> bytes:
        if call.message["params"].get("arguments", {}).get("text") == "forbidden":
            raise McpError(-32602, "That text is not allowed here")
        return await call_next(call)

    ran: list[str] = []
    server = with_echo(Server("guard", middleware=[deny_writes]), ran)
    async with running(server) as http, HttpClient.connect(http) as client:
        denied = await client.post(tool_call(1, "echo", text="forbidden"), mcp_headers(tool_call(1, "echo", text="forbidden")))
        allowed = await client.post(tool_call(2, "echo", text="fine"), mcp_headers(tool_call(2, "echo", text="fine")))
    assert denied.status == 400 and denied.json["error"]["message"] == "That text is not allowed here"
    assert allowed.response["result"]["content"][0]["text"] == "fine" and ran == ["fine"]


async def test_the_access_log_has_one_record_per_call(caplog: pytest.LogCaptureFixture) -> None:
    server = with_echo(Server("logged", middleware=[access_log()]))

    @server.tool
    def refuse() -> str:
        raise ToolError("no")

    async with running(server) as http, HttpClient.connect(http) as client:
        with caplog.at_level(logging.INFO, logger="mcpcore.access"):
            await client.post(tool_call(7, "echo", text="x"), mcp_headers(tool_call(7, "echo", text="x")))
            missing = tool_call(8, "nope")
            await client.post(missing, mcp_headers(missing))
            await client.post(tool_call(9, "refuse"), mcp_headers(tool_call(9, "refuse")))
    records = [r for r in caplog.records if r.name == "mcpcore.access"]
    assert [(r.request_id, r.method, r.tool, r.outcome) for r in records] == [  # type: ignore[attr-defined]
        (7, "tools/call", "echo", "ok"), (8, "tools/call", "", "error -32602"), (9, "tools/call", "refuse", "tool error")]
    assert all(r.duration_ms >= 0 for r in records) and records[0].getMessage().startswith("tools/call echo by -: ok in ")  # type: ignore[attr-defined]
    assert records[1].getMessage().startswith("tools/call nope by -: error -32602 in ")  # the name the client sent


async def test_over_the_rate_a_caller_gets_429_with_retry_after_and_others_go_on() -> None:
    tokens = {"a": AccessToken("alice"), "b": AccessToken("bob")}
    auth = Auth(StaticTokens(tokens), "http://127.0.0.1:8000/mcp", ("https://auth.example.com",))
    server = with_echo(Server("limited", auth=auth, middleware=[RateLimiter(rate=0.01, burst=2)]))
    async with running(server) as http, HttpClient.connect(http) as client:
        def as_(token: str, request_id: int) -> tuple[dict[str, Any], dict[str, str]]:
            message = tool_call(request_id, "echo", text="x")
            return message, {**mcp_headers(message), "authorization": f"Bearer {token}"}

        statuses = [(await client.post(*as_("a", n))).status for n in range(2)]
        limited = await client.post(*as_("a", 3))
        other = await client.post(*as_("b", 4))
    assert statuses == [200, 200] and other.status == 200
    assert limited.status == 429 and int(limited.headers["retry-after"]) >= 1
    error = limited.json["error"]
    assert error["code"] == 429 and error["data"]["retryAfter"] == int(limited.headers["retry-after"])


async def test_on_stdio_the_limit_is_a_json_rpc_error_saying_when_to_retry(tmp_path: Path) -> None:
    target = tmp_path / "limited.py"
    target.write_text(
        "from mcpcore import Server\nfrom mcpcore.middleware import RateLimiter\n"
        "server = Server('limited', middleware=[RateLimiter(rate=0.01, burst=1)])\n"
        "@server.tool\nasync def echo(text: str) -> str:\n    return text\n"
    )
    async with serve([sys.executable, "-m", "mcpcore", "run", str(target)]) as client:
        first = await client.call("tools/call", 1, name="echo", arguments={"text": "x"})
        second = await client.call("tools/call", 2, name="echo", arguments={"text": "x"})
    assert first["result"]["content"][0]["text"] == "x"
    assert second["error"]["code"] == 429 and second["error"]["data"]["retryAfter"] >= 1
    assert "retry in" in second["error"]["message"]


def test_the_bucket_refills_at_its_rate_and_keeps_a_bounded_number_of_callers() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=2.0, burst=2, max_callers=3, clock=lambda: now[0])
    assert [limiter.take("k") for _ in range(3)] == [0.0, 0.0, 0.5]
    now[0] = 0.5  # one token back
    assert limiter.take("k") == 0.0 and limiter.take("k") == pytest.approx(0.5)
    for key in ("a", "b", "c", "d"):
        limiter.take(key)
    assert len(limiter._buckets) == 3 and "k" not in limiter._buckets
    with pytest.raises(ValueError):
        RateLimiter(rate=0, burst=1)
