"""`--workers N`: processes sharing one port, restarted when they die, stopped together."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import anyio
import pytest

from conftest import ROOT, free_port, meta, request
from http_client import HttpClient

pytestmark = pytest.mark.anyio

ELICITATION = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.add(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


class _Port:
    def __init__(self, port: int) -> None:
        self.port = port


async def wait_for(predicate, seconds: float = 15.0) -> None:
    with anyio.fail_after(seconds):
        while not predicate():
            await anyio.sleep(0.05)


async def test_workers_share_a_port_restart_when_killed_and_stop_together() -> None:
    port = free_port()
    command = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "ask_server.py"),
               "--transport", "http", "--port", str(port), "--workers", "2"]
    supervisor = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE)
    try:
        await wait_for(lambda: len(children_of(supervisor.pid)) == 2)

        def accepting() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return True
            except OSError:
                return False

        await wait_for(accepting)
        # A sealed requestState from one connection (any worker) verifies on another (any worker).
        for _ in range(6):
            async with HttpClient.connect(_Port(port)) as client:  # type: ignore[arg-type]
                first = await client.post(request("tools/call", 1, _meta=meta(**ELICITATION), name="greet"))
            state = first.json["result"]["requestState"]
            async with HttpClient.connect(_Port(port)) as client:  # type: ignore[arg-type]
                retry = request("tools/call", 2, _meta=meta(**ELICITATION), name="greet", requestState=state,
                                inputResponses={"name": {"action": "accept", "content": {"name": "Ada"}}})
                answer = await client.post(retry)
            assert answer.json["result"]["content"][0]["text"] == "Hello, Ada!"
        # Without --redis a 2025-era client is served stateless, whichever worker each request reaches.
        plain = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        opening = {"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}}}
        touching = {"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "touch", "arguments": {"uri": "demo://note"}}}
        for _ in range(4):
            async with HttpClient.connect(_Port(port)) as client:  # type: ignore[arg-type]
                opened = await client.post(opening, plain, legacy=True)
            assert opened.status == 200 and "mcp-session-id" not in opened.headers, opened.body
            async with HttpClient.connect(_Port(port)) as client:  # type: ignore[arg-type]
                touched = await client.post(touching, {**plain, "mcp-protocol-version": "2025-11-25"}, legacy=True)
            assert touched.status == 200 and touched.response["result"]["content"][0]["text"] == "touched", touched.body
        victim = sorted(children_of(supervisor.pid))[0]
        os.kill(victim, signal.SIGKILL)
        await wait_for(lambda: victim not in children_of(supervisor.pid) and len(children_of(supervisor.pid)) == 2)
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(30) == 0  # 1 if a worker had to be killed instead of stopping gracefully
        assert children_of(supervisor.pid) == set()
        assert "2025-era clients are served stateless" in supervisor.stderr.read().decode()  # type: ignore[union-attr]
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()


def test_workers_need_the_http_transport() -> None:
    result = subprocess.run([sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "echo_server.py"),
                             "--workers", "2"], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "--workers needs --transport http" in result.stderr
