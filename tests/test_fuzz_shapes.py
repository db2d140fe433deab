"""A hostile client against the deployment shapes: random and broken messages, headers and preflights.

Seeded random operations against an in-process server on a real 127.0.0.1 socket (the
built-in server, then uvicorn): 2025-era messages to a stateless, JSON-only endpoint
with CORS on, CORS preflights with any method and headers from any origin, and
messages to the HTTP+SSE transport's message path for live, ended and made-up
sessions while streams open and drop. Whatever is sent, every answer is a 4xx (or
the 503 of a limit) with a JSON-RPC error, and afterwards the server still answers
and holds nothing: no session, no call, no subscriber.
"""

from __future__ import annotations

import collections
import random
import sys
from typing import Any

import anyio
import h11
import orjson
import pytest

from conftest import ROOT
from http_client import HttpClient, running
from servers import legacy_server

sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

import fuzz_inputs as gen  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_flavour")]
SEEDS = (11, 12)
STEPS = 200
PAGE = "http://127.0.0.1:5173"
ORIGINS = (PAGE, "http://127.0.0.1:5174", "https://evil.example", "null", "")
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2026-07-28", "1999-01-01", "")
METHODS = ("initialize", "ping", "tools/list", "tools/call", "resources/read", "resources/subscribe", "logging/setLevel",
           "prompts/get", "completion/complete", "notifications/initialized", "notifications/cancelled", "nope")
REQUEST_HEADERS = ("content-type", "mcp-method", "mcp-name", "mcp-session-id", "authorization", "last-event-id",
                   "x-custom", "cookie", "mcp-param-x", "traceparent", "")


def legacy_message(rng: random.Random) -> Any:
    """A 2025-era message, often broken."""
    method = rng.choice(METHODS)
    params: dict[str, Any] = {"name": rng.choice(("echo", "steps", "greet", "haiku", "nope")),
                              "arguments": rng.choice(({"text": "x"}, {}, {"text": 1}, None)),
                              "uri": rng.choice(("demo://note", "nope://x", "")), "level": rng.choice(("info", "loud")),
                              "protocolVersion": rng.choice(VERSIONS), "capabilities": rng.choice(({}, {"sampling": {}}, 3))}
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if not method.startswith("notifications/") or rng.random() < 0.2:
        message["id"] = rng.choice((rng.randrange(10**6), "a", None, 1.5, [], "mcpcore-x-1"))
    if rng.random() < 0.3:
        message = gen.mutate(message, rng)
    if rng.random() < 0.1:
        message = {"jsonrpc": "2.0", "id": rng.randrange(100), "result": {}}  # a response nothing waits for
    return message


def body_of(message: Any, rng: random.Random) -> bytes:
    data = gen.dumps(message)
    return gen.corrupt(data, rng) if rng.random() < 0.15 else data


def headers_for(rng: random.Random, base: dict[str, str]) -> dict[str, str]:
    headers = dict(base)
    if rng.random() < 0.7:
        headers["mcp-protocol-version"] = rng.choice(VERSIONS)
    if rng.random() < 0.5:
        headers["origin"] = rng.choice(ORIGINS)
    if rng.random() < 0.2:
        headers.pop(rng.choice(sorted(headers)), None)
    return headers


def refused_properly(status: int, body: bytes) -> None:
    """No answer is a server fault: 2xx, a 4xx, or a limit's 503; an error body is a JSON-RPC error."""
    assert status < 500 or status == 503, (status, body[:300])
    if status >= 400 and body:
        error = orjson.loads(body)
        assert isinstance(error["error"]["code"], int) and error["error"]["message"], body[:300]


async def exchange(http: Any, method: str, target: str, headers: dict[str, str], body: bytes = b"") -> int:
    """One request on a connection of its own (a refused head may close it), its answer checked; its status
    (0 when our client library would not write the head, so nothing reached the server)."""
    async with HttpClient.connect(http) as client:
        try:
            await client.send_request(method, target, headers, body)
        except h11.LocalProtocolError:
            return 0
        reply = await client.read_reply()
        refused_properly(reply.status, b"" if reply.is_sse else reply.body)
        return reply.status


async def preflight(http: Any, rng: random.Random) -> int:
    asked = {"origin": rng.choice(ORIGINS), "access-control-request-method": rng.choice(("POST", "GET", "PUT", "", "DELETE"))}
    if rng.random() < 0.8:
        asked["access-control-request-headers"] = ",".join(rng.sample(REQUEST_HEADERS, rng.randrange(1, 4)))
    if rng.random() < 0.2:
        asked.pop(rng.choice(sorted(asked)))
    return await exchange(http, "OPTIONS", rng.choice(("/mcp", "/messages?session_id=x", "/sse", "/elsewhere")), asked)


@pytest.mark.parametrize("seed", SEEDS)
async def test_a_stateless_json_only_endpoint_with_cors_survives_a_hostile_client(seed: int) -> None:
    rng = random.Random(seed)
    server = legacy_server.build()
    statuses: collections.Counter[int] = collections.Counter()
    async with running(server, stateless=True, json_response=True, cors_origins=(PAGE,)) as http:
        with anyio.fail_after(120):
            for _ in range(STEPS):
                if rng.random() < 0.25:
                    statuses[await preflight(http, rng)] += 1
                else:
                    method = rng.choice(("POST",) * 8 + ("GET", "DELETE"))
                    body = body_of(legacy_message(rng), rng) if method == "POST" else b""
                    statuses[await exchange(http, method, "/mcp", headers_for(rng, JSON), body)] += 1
            assert statuses[200] and statuses[202] and statuses[204] and statuses[400] and statuses[403], statuses
            while http.runner.calls:
                await anyio.sleep(0.01)
            async with HttpClient.connect(http) as client:
                await client.send_request("GET", "/healthz")
                assert (await client.read_reply()).status == 200
        assert len(http.sessions) == 0
    assert not server.bus.subscribers


class Streams:
    """HTTP+SSE streams opened and dropped at random; the message URLs they named."""

    def __init__(self, http: Any) -> None:
        self.http = http
        self.open: list[tuple[Any, Any]] = []  # (client context, client)
        self.uris: list[str] = []

    async def start(self) -> None:
        context = HttpClient.connect(self.http)
        client = await context.__aenter__()
        await client.send_request("GET", "/sse", {"accept": "text/event-stream"})
        head = await client._next()
        if not isinstance(head, h11.Response) or head.status_code != 200:  # every place taken: refused, and closed
            await context.__aexit__(None, None, None)
            return
        first = b""
        while b"\n\n" not in first:
            first += (await client._next()).data
        self.uris.append(first.split(b"data: ", 1)[1].split(b"\n", 1)[0].decode())
        self.open.append((context, client))

    async def drop(self, rng: random.Random) -> None:
        context, _ = self.open.pop(rng.randrange(len(self.open)))
        await context.__aexit__(None, None, None)

    async def close(self) -> None:
        while self.open:
            context, _ = self.open.pop()
            await context.__aexit__(None, None, None)


@pytest.mark.parametrize("seed", SEEDS)
async def test_the_http_sse_transport_survives_a_hostile_client(seed: int) -> None:
    rng = random.Random(seed)
    server = legacy_server.build()
    statuses: collections.Counter[int] = collections.Counter()
    async with running(server, max_sessions=4) as http:
        streams = Streams(http)
        try:
            with anyio.fail_after(120):
                for _ in range(STEPS):
                    pick = rng.random()
                    if pick < 0.1:
                        await streams.start()
                    elif pick < 0.15 and streams.open:
                        await streams.drop(rng)
                    else:
                        made_up = "/messages?session_id=" + rng.choice(("", "x", "%00", "a" * 300))
                        target = rng.choice(streams.uris) if streams.uris and rng.random() < 0.8 else made_up
                        method = "POST" if rng.random() < 0.9 else rng.choice(("GET", "PUT", "DELETE"))
                        headers = headers_for(rng, {"content-type": "application/json"})
                        statuses[await exchange(http, method, target, headers, body_of(legacy_message(rng), rng))] += 1
                assert statuses[202] and statuses[400] and statuses[404] and statuses[405], statuses
        finally:
            await streams.close()
        with anyio.fail_after(30):  # every stream is gone: its session ends, its calls end
            while len(http.sessions) or http.runner.calls:
                await anyio.sleep(0.01)
        async with HttpClient.connect(http) as client:
            await client.send_request("GET", "/healthz")
            assert (await client.read_reply()).status == 200
    assert not server.bus.subscribers
