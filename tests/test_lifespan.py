"""Lifespan (start-up once, shut-down after the drain) and the HTTP health probes.

HTTP tests run a real server on 127.0.0.1; stdio and start-up failure run a real
`mcpcore run` subprocess over real pipes.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import orjson
import pytest

from conftest import tool_call
from http_client import HttpClient, mcp_headers, running
from mcpcore import Context, Server
from stdio_client import serve

pytestmark = pytest.mark.anyio

LIFESPAN_SERVER = '''
import contextlib, sys
from mcpcore import Context, Server

@contextlib.asynccontextmanager
async def lifespan(server):
    print("started", file=sys.stderr, flush=True)
    yield {"greeting": "hello from " + server.name}
    print("stopped", file=sys.stderr, flush=True)

server = Server("life", lifespan=lifespan)

@server.tool
async def greet(ctx: Context) -> str:
    return ctx.lifespan["greeting"]
'''


def recording_server(events: list[str]) -> Server:
    @contextlib.asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[dict[str, str]]:
        events.append("start")
        yield {"pool": "open"}
        events.append("stop")

    server = Server("life", lifespan=lifespan)

    @server.tool
    async def pool(ctx: Context) -> str:
        return ctx.lifespan["pool"]

    @server.tool
    async def slow(ctx: Context) -> str:
        events.append("slow started")
        await anyio.sleep(1.0)  # long enough for the drain to be observed, short beside the grace period
        events.append("slow finished")
        return "slow"

    return server


async def test_tools_reach_the_lifespan_value_and_shut_down_waits_for_the_drain() -> None:
    events: list[str] = []
    server = recording_server(events)
    async with running(server, grace_period=5) as http:
        assert events == ["start"] and server.lifespan.entered
        async with HttpClient.connect(http) as client:
            reply = await client.post(tool_call(1, "pool"), mcp_headers(tool_call(1, "pool")))
            assert reply.response["result"]["content"][0]["text"] == "open"
            await client.send_request(headers=mcp_headers(tool_call(2, "slow")), body=orjson.dumps(tool_call(2, "slow")))
            with anyio.fail_after(10):
                while "slow started" not in events:
                    await anyio.sleep(0.01)
            http.stop()
            assert (await client.read_reply()).response["result"]["content"][0]["text"] == "slow"
    assert events == ["start", "slow started", "slow finished", "stop"] and not server.lifespan.entered


async def test_two_transports_in_one_process_share_one_start_up() -> None:
    events: list[str] = []
    server = recording_server(events)
    async with running(server), running(server):
        assert events == ["start"]
    assert events == ["start", "stop"]


async def test_a_stdio_server_enters_its_lifespan_before_serving_and_leaves_it_at_eof(tmp_path: Path) -> None:
    target = tmp_path / "life.py"
    target.write_text(LIFESPAN_SERVER)
    command = [sys.executable, "-m", "mcpcore", "run", str(target)]
    async with serve(command, stderr=subprocess.PIPE) as client:
        reply = await client.call("tools/call", 1, name="greet", arguments={})
        assert reply["result"]["content"][0]["text"] == "hello from life"
        await client.close_stdin()
        assert await client.wait() == 0
        assert client.process.stderr is not None
        stderr = (await client.process.stderr.receive()).decode()
        with contextlib.suppress(anyio.EndOfStream):
            while True:
                stderr += (await client.process.stderr.receive()).decode()
    assert stderr.index("started") < stderr.index("stopped")


@pytest.mark.parametrize("transport", [[], ["--transport", "http", "--port", "0"]])
def test_a_failing_start_up_stops_the_server_with_a_clear_message(tmp_path: Path, transport: list[str]) -> None:
    target = tmp_path / "broken.py"
    target.write_text(textwrap.dedent('''
        import contextlib
        from mcpcore import Server

        @contextlib.asynccontextmanager
        async def lifespan(server):
            raise ConnectionRefusedError("the database at db:5432 refused the connection")
            yield

        server = Server("broken", lifespan=lifespan)
    '''))
    result = subprocess.run([sys.executable, "-m", "mcpcore", "run", str(target), *transport],
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last == ("mcpcore: the lifespan of server 'broken' failed at start-up: "
                    "ConnectionRefusedError: the database at db:5432 refused the connection")
    assert "Traceback" in result.stderr and "serving" not in result.stderr


async def probe(client: HttpClient, method: str, target: str, host: str | None = None) -> tuple[int, Any]:
    if host is not None:
        client.host = host
    await client.send_request(method, target)
    reply = await client.read_reply()
    return reply.status, orjson.loads(reply.body) if reply.body else None


async def test_health_and_readiness_probes_answer_whatever_the_host() -> None:
    server = Server("probed")
    async with running(server, allowed_hosts=("mcp.example.com",)) as http, HttpClient.connect(http) as client:
        assert await probe(client, "GET", "/healthz", host="10.0.0.7:8000") == (200, {"status": "ok"})
        assert await probe(client, "GET", "/readyz?verbose=1") == (200, {"status": "ok"})
        assert (await probe(client, "HEAD", "/readyz"))[0] == 200
        assert await probe(client, "POST", "/healthz") == (405, {"status": "method not allowed"})
        assert (await probe(client, "GET", "/metrics"))[0] == 404


async def test_readiness_turns_503_once_draining() -> None:
    events: list[str] = []
    server = recording_server(events)  # its slow call keeps the drain going
    async with running(server, grace_period=5) as http, HttpClient.connect(http) as busy, HttpClient.connect(http) as client:
        await busy.send_request(headers=mcp_headers(tool_call(1, "slow")), body=orjson.dumps(tool_call(1, "slow")))
        await client.stream.send(b"GET /readyz HTTP/1.1\r\n")  # mid-request: the drain lets it finish
        with anyio.fail_after(10):
            while "slow started" not in events:
                await anyio.sleep(0.01)
        http.stop()
        with anyio.fail_after(10):
            while not http.closing:  # the drain has begun
                await anyio.sleep(0.01)
        await client.stream.send(f"Host: {client.host}\r\n\r\n".encode())
        reply = await client.read_reply()
        assert (await busy.read_reply()).status == 200
    assert reply.status == 503 and orjson.loads(reply.body) == {"status": "draining"}


async def test_probe_paths_can_be_moved_or_turned_off() -> None:
    server = Server("quiet")
    async with running(server, health_path="/live", ready_path=None) as http, HttpClient.connect(http) as client:
        assert (await probe(client, "GET", "/live"))[0] == 200
        assert (await probe(client, "GET", "/readyz"))[0] == 404


async def test_background_work_that_fails_is_logged_when_it_fails(caplog: pytest.LogCaptureFixture) -> None:
    server = Server("background")
    failed = anyio.Event()

    async def broken() -> None:
        failed.set()
        raise RuntimeError("broken on purpose")

    async with server.lifespan:
        server.lifespan.spawn(broken())
        await failed.wait()
        await anyio.sleep(0.05)  # its done-callback runs on the next loop pass
    assert any(record.levelname == "ERROR" and "background work of server 'background' failed" in record.getMessage()
               and record.exc_info and "broken on purpose" in str(record.exc_info[1]) for record in caplog.records)
