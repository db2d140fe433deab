"""Interoperability with the official TypeScript SDK v1 client (npm `@modelcontextprotocol/sdk`, pinned).

`tests/interop/ts_client.mjs` drives every feature (tools with a 1 MiB argument
and Unicode text, a resource, a prompt, progress, an elicitation answered by its
request handler) over stdio (it spawns `mcpcore run`), over HTTP (a real
server on 127.0.0.1) and over the deprecated HTTP+SSE transport (its
`SSEClientTransport`, on the built-in server and under uvicorn). The client speaks
the initialize handshake only, so this is the 2025-11-25 era. Its npm package is installed into `tests/interop/` with
the machine's Node on first use (the `ts_client` fixture, in conftest.py: tests/test_redis.py
drives it through a round-robin proxy too). Through the gateway (`mcpcore proxy` in front of the same server
over stdio), the elicitation is the gateway's translation of the upstream's `input_required` result.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from conftest import ROOT
from http_client import running
from servers import legacy_server

pytestmark = pytest.mark.anyio


def expect_every_feature(output: bytes, greeting: str | None = "Hello, Ada!", server: str = "legacy-tests") -> dict:
    """What the client saw, checked (the elicitation's greeting too, unless `greeting` is None)."""
    seen = json.loads(output.decode().strip().splitlines()[-1])
    assert seen["server"]["name"] == server and (server != "legacy-tests" or seen["server"]["version"] == "0.0.1")
    assert {"echo", "greet", "steps"} <= set(seen["tools"])
    assert seen["bigRoundTrip"] is True and seen["unicode"] is True
    assert seen["resource"] == "Remember to drink water." and seen["prompt"] == "Plan a trip to Rome."
    assert seen["progress"] == [1, 2, 3]
    assert greeting is None or seen["greeting"] == greeting
    return seen


async def test_the_typescript_client_over_stdio(ts_client: list[str]) -> None:
    command = [*ts_client, "stdio", sys.executable, "-m", "mcpcore", "run", str(ROOT / "tests" / "servers" / "legacy_server.py")]
    with anyio.fail_after(60):
        result = await anyio.run_process(command, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr.decode()
    expect_every_feature(result.stdout)


async def test_the_typescript_client_over_http(ts_client: list[str]) -> None:
    async with running(legacy_server.build()) as http:
        with anyio.fail_after(60):
            result = await anyio.run_process([*ts_client, "http", http.url], cwd=ROOT, check=False)
        assert len(http.sessions) == 0  # the client's DELETE on close ended its session
    assert result.returncode == 0, result.stderr.decode()
    assert expect_every_feature(result.stdout)["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize("via", ["h11", "asgi"])
async def test_the_typescript_client_over_http_sse(ts_client: list[str], via: str) -> None:
    async with running(legacy_server.build(), via=via) as http:
        with anyio.fail_after(60):
            result = await anyio.run_process([*ts_client, "sse", f"http://127.0.0.1:{http.port}/sse"], cwd=ROOT,
                                             check=False)
            while len(http.sessions):  # the client closed its stream: that ended its session
                await anyio.sleep(0.02)
    assert result.returncode == 0, result.stderr.decode()
    assert expect_every_feature(result.stdout)["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_the_typescript_client_through_the_gateway(ts_client: list[str], tmp_path: Path, transport: str) -> None:
    from test_gateway import proxy

    upstream = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "tests" / "servers" / "legacy_server.py")]
    async with proxy(tmp_path, upstream) as (url, _):
        target = url if transport == "http" else url.rsplit("/", 1)[0] + "/sse"
        with anyio.fail_after(60):
            result = await anyio.run_process([*ts_client, transport, target], cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr.decode()
    assert expect_every_feature(result.stdout, server=f"proxy:{Path(sys.executable).name}")["protocolVersion"] == "2025-11-25"
