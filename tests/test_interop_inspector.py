"""Interoperability with the MCP Inspector's command line (npm `@modelcontextprotocol/inspector`, pinned
in tests/interop/package.json) over the deprecated HTTP+SSE transport.

`mcp-inspector --cli URL --transport sse --method ...` connects, runs one method
and prints its result as JSON; here against a real server on 127.0.0.1 (the
built-in one and under uvicorn), and in tests/test_redis.py against two
processes behind a round-robin proxy. The `inspector_cli` fixture (conftest.py)
installs it with the machine's Node on first use; after that it runs offline.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import ROOT
from http_client import running
from servers import legacy_server

pytestmark = pytest.mark.anyio

# Each run: the method's options, and what its printed result must hold.
RUNS = {
    "tools/list": (["--method", "tools/list"], lambda found: {"echo", "greet", "steps"} <= {t["name"] for t in found["tools"]}),
    "tools/call": (["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=Ünïcode 🙂"],
                   lambda found: found["content"] == [{"type": "text", "text": "Ünïcode 🙂"}]),
    "resources/read": (["--method", "resources/read", "--uri", "demo://note"],
                       lambda found: found["contents"][0]["text"] == "Remember to drink water."),
    "prompts/get": (["--method", "prompts/get", "--prompt-name", "plan", "--prompt-args", "city=Rome"],
                    lambda found: found["messages"][0]["content"]["text"] == "Plan a trip to Rome."),
}


async def inspect(inspector_cli: list[str], url: str, home: Path, method: str) -> Any:
    """Run the Inspector's CLI once over HTTP+SSE (HOME in `home`: it keeps a catalog there); assert that
    what it printed holds the method's expected result."""
    options, holds = RUNS[method]
    with anyio.fail_after(60):
        result = await anyio.run_process([*inspector_cli, url, "--transport", "sse", *options], cwd=ROOT, check=False,
                                         env={**os.environ, "HOME": str(home)})
    assert result.returncode == 0, result.stderr.decode()
    found = json.loads(result.stdout)
    assert holds(found), found
    return found


@pytest.mark.parametrize("via", ["h11", "asgi"])
@pytest.mark.parametrize("method", list(RUNS))
async def test_the_inspector_cli_runs_each_method_over_http_sse(inspector_cli: list[str], tmp_path: Path, via: str,
                                                               method: str) -> None:
    async with running(legacy_server.build(), via=via) as http:
        await inspect(inspector_cli, f"http://127.0.0.1:{http.port}/sse", tmp_path, method)
        with anyio.fail_after(10):
            while len(http.sessions):  # it closed its stream when done: that ended its session
                await anyio.sleep(0.02)
