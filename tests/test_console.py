"""What `mcpcore run` says on the console: the start-up line for each mode, the random-key note where
it matters, a line on a terminal's stdio, what a Ctrl-C waits for (and that a second one forces), one
line per call at --log-level debug. Real processes, real sockets, real signals, a real pseudo-terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import anyio.abc
import orjson
import pytest

from conftest import ROOT, free_port, meta, request
from http_client import HttpClient, SseStream, mcp_headers
from stdio_client import SERVE_ECHO, serve

pytestmark = pytest.mark.anyio

ECHO = str(ROOT / "examples" / "echo_server.py")
MCPCORE = [sys.executable, "-m", "mcpcore"]
PORTABLE = os.environ.get("MCPCORE_PORTABLE") == "1"

HOLDING = """
import time

import anyio
from mcpcore import Context, Server

server = Server("holding")


@server.tool
async def hold(ctx: Context, seconds: float = 3600) -> str:
    await ctx.progress(0, total=1, message="started")
    await anyio.sleep(seconds)
    return f"held {seconds}"


@server.tool
def block() -> str:
    time.sleep(3600)
    return "blocked"
"""


async def _stderr_until(process: anyio.abc.Process, marker: str, seen: bytes = b"") -> bytes:
    assert process.stderr is not None
    while marker.encode() not in seen:
        chunk = await process.stderr.receive()
        seen += chunk
    return seen


async def _stopped(process: anyio.abc.Process) -> None:
    if process.returncode is None:
        process.kill()
    await process.wait()
    await process.aclose()


@pytest.mark.parametrize(("options", "said"), [
    ([], "/mcp (HTTP+SSE clients at /sse)"),
    (["--stateless"], "/mcp (stateless: 2025-era clients get no sessions; no HTTP+SSE)"),
    (["--json-response"], "/mcp (JSON-only answers; no HTTP+SSE)"),
    (["--sse-path", ""], "/mcp (no HTTP+SSE)"),
    pytest.param(["--workers", "2"], "/mcp (stateless: 2025-era clients get no sessions; no HTTP+SSE)",
                 marks=pytest.mark.skipif(PORTABLE, reason="the portable paths refuse --workers")),
])
async def test_the_start_up_line_says_what_each_mode_serves(options: list[str], said: str) -> None:
    process = await anyio.open_process([*MCPCORE, "run", ECHO, "--transport", "http", "--port", "0", *options],
                                       cwd=ROOT, stdin=subprocess.DEVNULL)
    try:
        with anyio.fail_after(30):
            seen = (await _stderr_until(process, said + "\n")).decode()
            banner = next(line for line in seen.splitlines() if "serving at" in line or "serving 'echo' at" in line)
            assert banner.endswith(said)
            process.send_signal(signal.SIGTERM)
            await process.wait()
    finally:
        await _stopped(process)


async def _all_stderr(options: list[str], env: dict[str, str]) -> str:
    """Run an HTTP server until it answers, stop it, and return everything it said on stderr."""
    port = free_port()
    process = await anyio.open_process([*MCPCORE, "run", ECHO, "--transport", "http", "--port", str(port), *options],
                                       cwd=ROOT, stdin=subprocess.DEVNULL, env={**os.environ, **env})
    try:
        with anyio.fail_after(30):
            while True:
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            assert process.stderr is not None
            seen = b"".join([chunk async for chunk in process.stderr])
            await process.wait()
    finally:
        await _stopped(process)
    return seen.decode()


async def test_one_process_with_a_random_key_is_told_so_at_debug_only() -> None:
    assert "random per-process key" in await _all_stderr(["--log-level", "debug"], {"MCPCORE_STATE_KEYS": ""})
    assert "random per-process key" not in await _all_stderr([], {"MCPCORE_STATE_KEYS": ""})


async def test_stdio_on_a_terminal_says_so_on_stderr_and_ctrl_d_stops_it() -> None:
    import pty

    terminal, tty = pty.openpty()
    try:
        with anyio.fail_after(30):
            process = await anyio.open_process([*MCPCORE, "run", ECHO], cwd=ROOT, stdin=tty)
            try:
                seen = await _stderr_until(process, "\n")
                assert seen.decode() == "mcpcore: serving 'echo' on stdio; Ctrl-D to stop\n"
                os.write(terminal, b"\x04")  # Ctrl-D: end of input
                assert await process.wait() == 0
                assert process.stdout is not None
                assert b"".join([chunk async for chunk in process.stdout]) == b""  # never on stdout
            finally:
                await _stopped(process)
    finally:
        os.close(terminal)
        os.close(tty)


async def test_stdio_from_a_client_says_nothing() -> None:
    async with serve(SERVE_ECHO, stderr=subprocess.PIPE) as client:
        with anyio.fail_after(20):
            await client.call("server/discover", 1)
            await client.close_stdin()
            assert await client.wait() == 0
            assert client.process.stderr is not None
            said = b"".join([chunk async for chunk in client.process.stderr]).decode()
    assert "on stdio" not in said


@pytest.mark.parametrize("tool", ["hold", "block"])
async def test_ctrl_c_says_what_it_waits_for_and_a_second_one_forces(tmp_path: Path, tool: str) -> None:
    target = tmp_path / "holding.py"
    target.write_text(textwrap.dedent(HOLDING))
    port = free_port()
    process = await anyio.open_process([*MCPCORE, "run", str(target), "--transport", "http", "--port", str(port),
                                        "--grace-period", "600"], cwd=ROOT, stdin=subprocess.DEVNULL)
    try:
        with anyio.fail_after(30):
            seen = await _stderr_until(process, "serving 'holding'")
            stream = await anyio.connect_tcp("127.0.0.1", port)
            async with stream:
                events = SseStream(HttpClient(stream, f"127.0.0.1:{port}"), method="tools/call")
                message = request("tools/call", 1, _meta=meta(progressToken="started"), name=tool, arguments={})
                if tool == "hold":
                    await events.open(message)
                    assert (await events.next() or {}).get("method") == "notifications/progress"  # it runs
                else:
                    await events.client.send_request("POST", "/mcp", mcp_headers(message), orjson.dumps(message))
                    await anyio.sleep(1)  # a sync tool says nothing while it blocks its thread
                process.send_signal(signal.SIGINT)
                seen = await _stderr_until(process, "stops at once)\n", seen)
                assert "mcpcore: stopping: waiting up to 600 s for 1 call in flight (Ctrl-C again stops at once)" in seen.decode()
                process.send_signal(signal.SIGINT)
                assert await process.wait() == 0  # long before the grace period or the tool ends
            assert process.stderr is not None
            seen += b"".join([chunk async for chunk in process.stderr])
        assert "Traceback" not in seen.decode()
    finally:
        await _stopped(process)


@pytest.mark.parametrize(("level", "lines"), [("debug", 1), ("info", 0)])
async def test_debug_logs_one_line_per_call(level: str, lines: int) -> None:
    async with serve([*SERVE_ECHO, "--log-level", level], stderr=subprocess.PIPE) as client:
        with anyio.fail_after(20):
            await client.call("tools/call", 1, name="echo", arguments={"text": "logged"})
            await client.close_stdin()
            assert await client.wait() == 0
            assert client.process.stderr is not None
            said = b"".join([chunk async for chunk in client.process.stderr]).decode()
    calls = [line for line in said.splitlines() if line.startswith("mcpcore: tools/call echo by -: ok in ")]
    assert len(calls) == lines and all(line.endswith(" ms") for line in calls), said


@pytest.mark.skipif(PORTABLE, reason="the portable paths refuse --workers")
async def test_a_terminals_ctrl_c_drains_the_workers(tmp_path: Path) -> None:
    target = tmp_path / "holding.py"
    target.write_text(textwrap.dedent(HOLDING))
    port = free_port()
    process = await anyio.open_process([*MCPCORE, "run", str(target), "--transport", "http", "--port", str(port),
                                        "--workers", "2"], cwd=ROOT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        with anyio.fail_after(60):
            await _stderr_until(process, "2 workers serving")
            while True:  # the workers take a moment to start after the socket is bound
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                    events = SseStream(HttpClient(stream, f"127.0.0.1:{port}"), method="tools/call")
                    await events.open(request("tools/call", 1, _meta=meta(progressToken="p"), name="hold",
                                              arguments={"seconds": 1.5}))
                    break
                except (OSError, AssertionError):
                    await anyio.sleep(0.1)
            async with stream:
                assert (await events.next() or {}).get("method") == "notifications/progress"
                os.killpg(process.pid, signal.SIGINT)  # as a terminal does: to the whole foreground group
                answer = await events.next()
            assert answer is not None and answer["result"]["content"][0]["text"] == "held 1.5"  # drained, not cut
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
        await _stopped(process)
