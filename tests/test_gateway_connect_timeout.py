"""The gateway's bound on starting its upstream (`--upstream-connect-timeout`, `Gateway(connect_timeout=)`):
a remote upstream that accepts TCP and never answers, or a stdio one that never answers its handshake, stops
`mcpcore proxy` at start with one line naming the upstream and the option; at a restart such a start fails
and is retried after the back-off, while calls waiting for it fail within the request timeout
(mcpcore.gateway, docs/gateway.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from mcpcore._wire.jsonrpc import McpError
from mcpcore.client import Client
from mcpcore.gateway import Gateway

pytestmark = pytest.mark.anyio

SILENT = "import sys\nfor line in sys.stdin:\n    pass\n"  # reads every message, answers none, ends with its stdin

QUITTING = r'''
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    method, answer = message.get("method"), None
    if method == "initialize":
        answer = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "q", "version": "1"}}
    elif method == "tools/list":
        answer = {"tools": [{"name": name, "inputSchema": {"type": "object"}} for name in ("echo", "quit")]}
    elif method == "tools/call" and message["params"]["name"] == "quit":
        sys.exit(0)
    elif method == "tools/call":
        answer = {"content": [{"type": "text", "text": message["params"]["arguments"]["text"]}]}
    if "id" in message and "method" in message:
        reply = {"result": answer} if answer is not None else {"error": {"code": -32601, "message": "Method not found"}}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}), flush=True)
'''


async def _proxy_fails(*arguments: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """`mcpcore proxy --transport http --port 0 ARGUMENTS`, which must exit non-zero: its last line of stderr."""
    with anyio.fail_after(60):
        done = await anyio.run_process([sys.executable, "-m", "mcpcore", "proxy", "--transport", "http", "--port", "0",
                                        *arguments], check=False, stdin=None, cwd=cwd,
                                       env=None if env is None else {**os.environ, **env})
    assert done.returncode == 1, done.stderr.decode()
    assert b"serving" not in done.stderr
    return done.stderr.decode().strip().splitlines()[-1]


async def test_a_remote_upstream_that_accepts_and_never_answers_stops_the_start(tmp_path: Path) -> None:
    held: list[anyio.abc.SocketStream] = []

    async def accept_and_say_nothing(stream: anyio.abc.SocketStream) -> None:
        held.append(stream)
        await anyio.sleep_forever()

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener, anyio.create_task_group() as tasks:
        tasks.start_soon(listener.serve, accept_and_say_nothing)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        last = await _proxy_fails("--upstream-connect-timeout", "1", f"http://127.0.0.1:{port}/mcp")
        tasks.cancel_scope.cancel()
    assert held  # it did reach the listener
    assert last == (f"mcpcore: the lifespan of server 'proxy:127.0.0.1:{port}' failed at start-up: UpstreamDidNotStart: "
                    "the upstream server did not start: it did not answer its handshake and lists within 1 s "
                    "(--upstream-connect-timeout, or Gateway(connect_timeout=...))")


@pytest.mark.parametrize("given", ["option", "environment", "mcpcore.toml"])
async def test_a_stdio_upstream_that_never_answers_its_handshake_stops_the_start(tmp_path: Path, given: str) -> None:
    script = tmp_path / "silent_server.py"
    script.write_text(SILENT)
    upstream = ("--", sys.executable, str(script))
    if given == "option":
        last = await _proxy_fails("--upstream-connect-timeout", "0.5", *upstream)
    elif given == "environment":
        last = await _proxy_fails(*upstream, env={"MCPCORE_UPSTREAM_CONNECT_TIMEOUT": "0.5"})
    else:
        (tmp_path / "mcpcore.toml").write_text("upstream_connect_timeout = 0.5\n")
        last = await _proxy_fails(*upstream, cwd=tmp_path)
    assert last.startswith(f"mcpcore: the lifespan of server 'proxy:{os.path.basename(sys.executable)}' failed at "
                           "start-up: UpstreamDidNotStart: the upstream server did not start: it did not answer its "
                           "handshake and lists within 0.5 s (--upstream-connect-timeout")


async def test_a_restart_that_never_answers_fails_is_retried_and_holds_no_call(tmp_path: Path) -> None:
    """The upstream quits; its restarts hang in the handshake (each closed, its process ended, and tried
    again after the back-off); a call meanwhile fails within the request timeout; once a start answers,
    the gateway serves again."""
    from http_client import running

    quitting, silent = tmp_path / "quitting_server.py", tmp_path / "silent_server.py"
    quitting.write_text(QUITTING)
    silent.write_text(SILENT)
    made: list[Client] = []
    hanging = {"now": False}

    def connect() -> Client:
        made.append(Client.stdio([sys.executable, str(silent if hanging["now"] else quitting)]))
        return made[-1]

    # bounds generous enough for a Python upstream's start on a loaded machine
    gateway = Gateway(connect, name="front", timeout=2, connect_timeout=3, restart_delays=(0.05,))
    async with running(gateway.server, via="h11") as front, Client.http(front.url) as client:
        with anyio.fail_after(60):
            assert (await client.call_tool("echo", {"text": "first"})).text == "first"
            hanging["now"] = True
            with pytest.raises(McpError) as gone:
                await client.call_tool("quit")
            assert "the upstream server went away during tools/call" in gone.value.message
            while len(made) < 3:  # a start that hung, and the next under way
                await anyio.sleep(0.02)
            with pytest.raises(McpError) as waited:
                await client.call_tool("echo", {"text": "meanwhile"})
            assert (waited.value.code, waited.value.message) == (
                -32603, "the upstream server is not available (not back within 2 s)")
            process: Any = made[1]._channel.process  # the hung start was closed: its process ended
            while process.returncode is None:
                await anyio.sleep(0.02)
            hanging["now"] = False
            while True:
                try:
                    assert (await client.call_tool("echo", {"text": "back"})).text == "back"
                    break
                except McpError as error:
                    assert error.message == "the upstream server is not available (not back within 2 s)"
