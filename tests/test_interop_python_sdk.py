"""Interoperability with the official Python SDK client (PyPI `mcp`, pinned in the test extra).

The real client connects to `tests/servers/legacy_server.py` over stdio (a
subprocess) and over HTTP (a real server on 127.0.0.1) in every mode it
offers: the initialize handshake (`legacy`), discovery with fallback (`auto`)
and the stateless wire pinned to 2026-07-28; and over the deprecated HTTP+SSE
transport (its `sse_client`, the handshake only) on the built-in server and under
uvicorn. Each run lists and calls tools
(a 1 MiB argument, text with U+2028, NUL and emoji), reads a resource, gets a
prompt, receives progress and answers an elicitation through its callback.
"""

from __future__ import annotations

import sys
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import anyio
import pytest

mcp = pytest.importorskip("mcp", reason="the official SDK is in the test extra (pip install -e '.[test]')")
mcp_types = pytest.importorskip("mcp_types")

from conftest import ROOT  # noqa: E402
from http_client import running  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.sse import sse_client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from servers import legacy_server  # noqa: E402

pytestmark = pytest.mark.anyio
MODES = ["legacy", "auto", "2026-07-28"]
# Each transport in each mode it serves: HTTP+SSE (on the built-in server, and under uvicorn) has no other.
RUNS = [(transport, mode) for transport in ("stdio", "http") for mode in MODES] + [("sse", "legacy"), ("sse-asgi", "legacy")]
UNICODE = "line\u2028separator, nul \x00, emoji 🙂🚀"


async def answer_elicitation(context: Any, params: Any) -> Any:
    return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})


@asynccontextmanager
async def connected(transport: str, mode: str) -> AsyncIterator[Client]:
    options: dict[str, Any] = {"mode": mode, "elicitation_callback": answer_elicitation, "read_timeout_seconds": 30}
    if transport == "stdio":
        command = StdioServerParameters(command=sys.executable, args=["-m", "mcpcore", "run", str(ROOT / "tests" / "servers" / "legacy_server.py")], cwd=str(ROOT))
        async with Client(command, **options) as client:
            yield client
    elif transport.startswith("sse"):
        async with running(legacy_server.build(), via="asgi" if transport == "sse-asgi" else "h11") as http:
            async with Client(sse_client(f"http://127.0.0.1:{http.port}/sse"), **options) as client:
                yield client
            with anyio.fail_after(10):  # closing the stream ended the session
                while len(http.sessions):
                    await anyio.sleep(0.02)
    else:
        async with running(legacy_server.build()) as http:
            async with Client(http.url, **options) as client:
                yield client


@pytest.mark.parametrize(("transport", "mode"), RUNS)
async def test_the_official_python_client_uses_every_feature(transport: str, mode: str) -> None:
    with anyio.fail_after(60):
        async with connected(transport, mode) as client:
            expected = "2026-07-28" if mode != "legacy" else "2025-11-25"
            assert client.protocol_version == expected
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert {"echo", "greet", "steps"} <= set(names)
            # Over HTTP+SSE every answer is an event, and this client takes none past 1 MiB.
            big = "x" * (1024 * 1024 if not transport.startswith("sse") else 1000 * 1000)
            echoed = await client.call_tool("echo", {"text": big})
            assert echoed.content[0].text == big  # type: ignore[union-attr]
            unicode = await client.call_tool("echo", {"text": UNICODE})
            assert unicode.content[0].text == UNICODE  # type: ignore[union-attr]
            note = await client.read_resource("demo://note")
            assert note.contents[0].text == "Remember to drink water."  # type: ignore[union-attr]
            prompt = await client.get_prompt("plan", {"city": "Rome"})
            assert prompt.messages[0].content.text == "Plan a trip to Rome."  # type: ignore[union-attr]
            progress: list[float] = []

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                progress.append(done)

            stepped = await client.call_tool("steps", {}, progress_callback=on_progress)
            assert stepped.content[0].text.startswith("done for")  # type: ignore[union-attr]
            assert progress == [1, 2, 3]
            greeted = await client.call_tool("greet", {})
            assert greeted.content[0].text == "Hello, Ada!"  # type: ignore[union-attr]
