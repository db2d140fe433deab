"""The portable paths (ADR 45), forced on Linux by MCPCORE_PORTABLE=1 as Windows takes them: stdio through
a socket pair fed by threads, SIGINT/SIGTERM caught by `signal.signal`, `--workers` refused. Real server
subprocesses over real pipes and a real socket; the detection itself is checked in process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import orjson
import pytest

from conftest import ROOT, free_port, meta, request
from http_client import HttpClient, SseStream
from stdio_client import SERVE_ECHO, serve

pytestmark = pytest.mark.anyio

SERVE_DEBUG = [*SERVE_ECHO, "--log-level", "debug"]
PORTABLE_LINES = ("stdin is bridged through a socket pair (MCPCORE_PORTABLE=1)",
                  "stdout is bridged through a socket pair (MCPCORE_PORTABLE=1)",
                  "SIGINT and SIGTERM are caught by signal.signal (MCPCORE_PORTABLE=1)")

HOLDING_SERVER = """
import anyio
from mcpcore import Context, Server

server = Server("holding")


@server.tool
async def hold(seconds: float, ctx: Context) -> str:
    '''Say it started (a progress notification), then answer after `seconds`.'''
    await ctx.progress(0, total=1, message="started")
    await anyio.sleep(seconds)
    return f"held {seconds}"
"""


@pytest.fixture
def portable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPCORE_PORTABLE", "1")  # the server processes inherit it


@pytest.fixture
def native(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPCORE_PORTABLE", raising=False)  # also when CI runs this file with it set


@pytest.fixture
def holding(tmp_path: Path) -> list[str]:
    target = tmp_path / "holding_server.py"
    target.write_text(textwrap.dedent(HOLDING_SERVER))
    return [sys.executable, "-m", "mcpcore", "run", str(target)]


def echo(request_id: int, text: str) -> dict[str, Any]:
    return request("tools/call", request_id, name="echo", arguments={"text": text})


def hold(request_id: int, seconds: float) -> dict[str, Any]:
    started = meta(progressToken="started")  # the call's first message says it runs
    return request("tools/call", request_id, _meta=started, name="hold", arguments={"seconds": seconds})


async def test_the_variable_takes_every_portable_path_in_the_server_process(portable: None) -> None:
    async with serve(SERVE_DEBUG, stderr=subprocess.PIPE) as client:
        with anyio.fail_after(20):
            reply = await client.call("tools/call", 1, name="echo", arguments={"text": "bridged"})
            await client.close_stdin()
            assert await client.wait() == 0
            assert client.process.stderr is not None
            errors = b"".join([chunk async for chunk in client.process.stderr]).decode()
    assert reply["result"]["content"][0]["text"] == "bridged"
    assert all(line in errors for line in PORTABLE_LINES), errors


async def test_without_the_variable_pipes_and_signals_take_the_native_paths(native: None) -> None:
    async with serve(SERVE_DEBUG, stderr=subprocess.PIPE) as client:
        with anyio.fail_after(20):
            await client.call("tools/call", 1, name="echo", arguments={"text": "native"})
            await client.close_stdin()
            assert await client.wait() == 0
            assert client.process.stderr is not None
            errors = b"".join([chunk async for chunk in client.process.stderr]).decode()
    assert "bridged" not in errors and "signal.signal" not in errors, errors


async def test_stdin_eof_crosses_the_bridge_a_last_line_without_newline_included(portable: None) -> None:
    async with serve() as client:
        with anyio.fail_after(20):
            await client.send(echo(1, "one"))
            client.methods[2] = "tools/call"
            await client.send_raw(orjson.dumps(echo(2, "last")))  # no newline: EOF ends the line
            await client.close_stdin()
            answers = [await client.response_to(1), await client.response_to(2)]
            assert client.process.stdout is not None
            rest = b"".join([chunk async for chunk in client.process.stdout])  # ends: stdout's EOF crossed back
            assert await client.wait() == 0
    assert [a["result"]["content"][0]["text"] for a in answers] == ["one", "last"] and rest == b""


def test_a_client_closing_our_stdout_ends_the_session(portable: None) -> None:
    process = subprocess.Popen(SERVE_ECHO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(orjson.dumps(echo(1, "read")) + b"\n")
        process.stdin.flush()
        assert b'"read"' in process.stdout.readline()
        process.stdout.close()
        process.stdin.write(orjson.dumps(echo(2, "unread")) + b"\n")  # its answer finds nobody
        process.stdin.flush()
        assert process.wait(30) == 0  # with stdin still open
    finally:
        process.kill()
        process.wait()


async def test_a_client_that_stops_reading_stops_the_server_reading_and_loses_no_answer(portable: None) -> None:
    """Every buffer on the way is bounded, so the server stops taking requests well before the cap."""
    text = "x" * 3000
    cap = 5000  # 15 MB of requests: a server that buffered without bound would take them all
    async with serve() as client:
        with anyio.fail_after(120):
            sent = 0
            while sent < cap:
                with anyio.move_on_after(1) as waited:  # the whole line stays queued in our pipe writer
                    await client.send(echo(sent, text))
                sent += 1
                if waited.cancelled_caught:
                    break
            assert sent < cap
            answered = {(await client.read())["id"] for _ in range(sent)}
            await client.close_stdin()
            assert await client.wait() == 0
    assert answered == set(range(sent))


async def test_a_one_mebibyte_line_crosses_the_bridge_unchanged(portable: None) -> None:
    text = "0123456789abcdef" * (1 << 16)
    async with serve() as client:
        with anyio.fail_after(30):
            reply = await client.call("tools/call", 1, name="echo", arguments={"text": text})
    assert reply["result"]["content"][0]["text"] == text


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
async def test_a_signal_drains_the_stdio_call_in_flight(portable: None, holding: list[str], signal_name: str) -> None:
    async with serve(holding) as client:
        with anyio.fail_after(20):
            await client.send(hold(1, 0.5))
            assert (await client.read())["method"] == "notifications/progress"  # the call is running
            client.process.send_signal(getattr(signal, signal_name))
            reply = await client.response_to(1)
            assert await client.wait() == 0
    assert reply["result"]["content"][0]["text"] == "held 0.5"


async def test_a_second_signal_stops_without_waiting_for_the_grace_period(portable: None, holding: list[str]) -> None:
    async with serve([*holding, "--grace-period", "600"]) as client:
        with anyio.fail_after(20):
            await client.send(hold(1, 3600))
            await client.read()
            client.process.send_signal(signal.SIGTERM)
            while client.process.returncode is None:  # two signals sent close together may arrive as one
                client.process.send_signal(signal.SIGTERM)
                with anyio.move_on_after(0.5):
                    await client.wait()
            assert client.process.returncode == 0 and client.process.stdout is not None
            rest = b"".join([chunk async for chunk in client.process.stdout])
    assert rest == b""  # the held call was cancelled: it sends nothing


async def test_a_signal_drains_the_http_call_in_flight(portable: None, holding: list[str]) -> None:
    port = free_port()
    command = [*holding, "--transport", "http", "--port", str(port)]
    process = await anyio.open_process(command, cwd=ROOT)
    try:
        with anyio.fail_after(20):
            while True:
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                    break
                except OSError:
                    await anyio.sleep(0.05)
            async with stream:
                events = SseStream(HttpClient(stream, f"127.0.0.1:{port}"), method="tools/call")
                await events.open(hold(1, 0.5))
                first = await events.next()
                assert first is not None and first["method"] == "notifications/progress"
                process.send_signal(signal.SIGTERM)
                reply = await events.next()
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        await process.aclose()
    assert reply is not None and reply["result"]["content"][0]["text"] == "held 0.5"


def test_workers_are_refused_in_one_line_saying_what_to_do_instead(portable: None) -> None:
    command = [*SERVE_ECHO, "--transport", "http", "--port", "0", "--workers", "2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, cwd=ROOT)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("mcpcore: --workers hands one listening socket to its worker processes")
    assert "MCPCORE_PORTABLE=1" in result.stderr and "process manager or load balancer" in result.stderr


# -- the detection, as a platform without the native paths answers it ---------------------------------


def test_off_posix_no_fd_is_driven_as_a_pipe_and_workers_are_refused(native: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpcore.transports import _workers, stdio

    read_end, write_end = os.pipe()
    try:
        on_posix = stdio._can_poll(read_end)
        with monkeypatch.context() as patched:  # only around the calls: pytest itself reads os.name
            patched.setattr(os, "name", "nt")
            elsewhere, refusal = stdio._can_poll(read_end), _workers.unsupported()
    finally:
        os.close(read_end)
        os.close(write_end)
    assert on_posix and not elsewhere
    assert refusal is not None and f"and {sys.platform} cannot do that" in refusal


async def test_a_loop_without_signal_handlers_gets_them_through_the_signal_module(
    native: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcpcore._cli.runner import _stop_on_signals

    def no_signal_handlers(*args: object) -> None:
        raise NotImplementedError  # as asyncio's loops on Windows

    monkeypatch.setattr(asyncio.get_running_loop(), "add_signal_handler", no_signal_handlers)
    before = signal.getsignal(signal.SIGTERM)
    stopped = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_stop_on_signals, stopped.set, tasks.cancel_scope, SimpleNamespace(calls=()), 5.0)
            while signal.getsignal(signal.SIGTERM) is before:  # installed: sending it is safe now
                await anyio.sleep(0.01)
            os.kill(os.getpid(), signal.SIGTERM)
            await stopped.wait()  # the first one stops gracefully
            os.kill(os.getpid(), signal.SIGTERM)
            await anyio.sleep_forever()  # the second one cancels the scope
    assert signal.getsignal(signal.SIGTERM) is before
