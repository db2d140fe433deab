"""Real clients against stateless 2025-era serving, in the shapes it is for.

The TypeScript SDK v1 client against `mcpcore run --workers 2` with no Redis (the
kernel spreads its connections over both workers), and the official Python SDK
client in legacy mode against two `--stateless` processes behind a round-robin
proxy (two consecutive requests never reach the same process): every feature that
needs no session works, and the elicitation, which does, is refused saying why.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from typing import Any, Iterator

import anyio
import pytest

from conftest import ROOT, free_port
from process_group import stop_gracefully, wait_until_accepting
from round_robin_proxy import RoundRobinProxy
from test_interop_ts_sdk import expect_every_feature

pytestmark = pytest.mark.anyio
SERVER = str(ROOT / "tests" / "servers" / "legacy_server.py")
UNICODE = "line\u2028separator, nul \x00, emoji 🙂🚀"


@contextlib.contextmanager
def serving(*options: str) -> Iterator[int]:
    """`mcpcore run` of the dual-era test server over HTTP with `options`; its port, once it accepts."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "mcpcore", "run", SERVER, "--transport", "http", "--port", str(port),
                                *options], cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        wait_until_accepting(port)
        yield port
    finally:
        stop_gracefully(process, 20)


async def test_the_typescript_client_against_two_workers_without_redis(ts_client: list[str]) -> None:
    with serving("--workers", "2") as port:
        with anyio.fail_after(90):
            result = await anyio.run_process([*ts_client, "http-stateless", f"http://127.0.0.1:{port}/mcp"], cwd=ROOT,
                                             check=False)
    assert result.returncode == 0, result.stderr.decode()
    seen = expect_every_feature(result.stdout, greeting=None)
    assert seen["protocolVersion"] == "2025-11-25"
    assert seen["greeting"].startswith("refused: ") and "needs a session" in seen["greeting"]


async def test_the_python_client_against_stateless_processes_behind_a_proxy() -> None:
    pytest.importorskip("mcp", reason="the official SDK is in the test extra (pip install -e '.[test]')")
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    with serving("--stateless") as first, serving("--stateless") as second:
        async with RoundRobinProxy([first, second]) as proxy:
            with anyio.fail_after(90):
                async with Client(f"http://127.0.0.1:{proxy.port}/mcp", mode="legacy", read_timeout_seconds=30) as client:
                    assert client.protocol_version == "2025-11-25"
                    names = [tool.name for tool in (await client.list_tools()).tools]
                    assert {"echo", "greet", "steps"} <= set(names)
                    big = "x" * (1024 * 1024)
                    echoed: Any = await client.call_tool("echo", {"text": big})
                    assert echoed.content[0].text == big
                    unicode: Any = await client.call_tool("echo", {"text": UNICODE})
                    assert unicode.content[0].text == UNICODE
                    note: Any = await client.read_resource("demo://note")
                    assert note.contents[0].text == "Remember to drink water."
                    prompt: Any = await client.get_prompt("plan", {"city": "Rome"})
                    assert prompt.messages[0].content.text == "Plan a trip to Rome."
                    progress: list[float] = []

                    async def on_progress(done: float, total: float | None, message: str | None) -> None:
                        progress.append(done)

                    stepped: Any = await client.call_tool("steps", {}, progress_callback=on_progress)
                    assert stepped.content[0].text == "done for None on 2025-11-25"  # no session: the client info is unknown
                    assert progress == [1, 2, 3]
                    with pytest.raises(MCPError, match="needs a session"):
                        await client.call_tool("greet", {})
        assert set(proxy.served) == {first, second}  # the requests were spread over both processes
