"""`mcpcore proxy URL`: a remote server (a real mcpcore HTTP server on 127.0.0.1, at its Streamable HTTP
endpoint `/mcp` and its HTTP+SSE one `/sse`) served by `mcpcore proxy` as a real subprocess, over stdio
and over HTTP, driven by `mcpcore.client` in both eras and by the official Python SDK's stdio client
(mcpcore/_cli/proxy.py, mcpcore.gateway, docs/gateway.md)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import anyio
import anyio.abc
import pytest

from http_client import running
from mcpcore import Context, Server
from mcpcore._wire.jsonrpc import McpError
from mcpcore.auth import AccessToken, Auth, StaticTokens
from mcpcore.client import Client
from servers.client_server import build
from test_gateway import proxy

pytestmark = pytest.mark.anyio

ERAS = ["2026-07-28", "2025-11-25"]
ENDPOINTS = ["/mcp", "/sse"]  # the upstream's Streamable HTTP endpoint, and its HTTP+SSE stream


def proxy_command(url: str, *options: str) -> list[str]:
    """`mcpcore proxy OPTIONS URL`, served over stdio (the default)."""
    return [sys.executable, "-m", "mcpcore", "proxy", *options, url]


def at(http: Any, endpoint: str, port: int | None = None) -> str:
    return f"http://127.0.0.1:{port or http.port}{endpoint}"


def answer_name(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ada"}}


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("era", ERAS)
async def test_a_remote_server_is_served_over_stdio(era: str, endpoint: str) -> None:
    async with running(build(), via="h11") as http:
        async with Client.stdio(proxy_command(at(http, endpoint)), era=era, elicit=answer_name) as client:
            with anyio.fail_after(60):
                assert "echo" in [tool["name"] for tool in await client.list_tools()]
                assert (await client.call_tool("echo", {"text": "héllo «remote»"})).text == "héllo «remote»"
                met = await client.call_tool("meet", {"label": "one", "group": f"{era}{endpoint}", "expected": 1})
                assert met.text == "one" and [p["progress"] for p in met.progress] == [1, 2]
                if endpoint == "/mcp":  # the upstream asks on the 2026 wire (input_required), which the gateway translates
                    assert (await client.call_tool("greet")).text == "Hello, Ada!"
                with anyio.move_on_after(0.5):  # cancelled: the upstream's call ends too
                    await client.call_tool("hang")
                while (await client.call_tool("tally")).structured != {"hanging": 0, "cancelled": 1}:
                    await anyio.sleep(0.02)
        if endpoint == "/sse":
            assert not http.sessions  # it was a 2025-era session over HTTP+SSE, ended with the proxy


async def test_the_official_python_sdk_stdio_client() -> None:
    sdk = pytest.importorskip("mcp", reason="the official SDK is in the test extra (pip install -e '.[test]')")
    from mcp.client.stdio import StdioServerParameters

    async with running(build(), via="h11") as http:
        command = StdioServerParameters(command=sys.executable, args=proxy_command(at(http, "/mcp"))[1:])
        with anyio.fail_after(60):
            async with sdk.Client(command, mode="legacy", read_timeout_seconds=30) as client:
                assert client.protocol_version == "2025-11-25"
                assert "echo" in [tool.name for tool in (await client.list_tools()).tools]
                echoed = await client.call_tool("echo", {"text": "through the proxy"})
                assert echoed.content[0].text == "through the proxy"  # type: ignore[union-attr]


@pytest.mark.parametrize("era", ERAS)
async def test_a_remote_server_is_served_over_http(tmp_path: Path, era: str) -> None:
    """`--transport http` and the usual run options; here in front of the upstream's HTTP+SSE endpoint."""
    async with running(build(), via="h11") as http:
        async with proxy(tmp_path, [], "--upstream-transport", "sse", at(http, "/sse")) as (url, _):
            async with Client.http(url, era=era) as client:
                with anyio.fail_after(60):
                    assert (await client.call_tool("echo", {"text": "over HTTP"})).text == "over HTTP"


class Upstream:
    """A real mcpcore HTTP server on 127.0.0.1 in a task of its own, to stop and start again on its port."""

    def __init__(self, tasks: anyio.abc.TaskGroup) -> None:
        self.tasks, self.port = tasks, 0
        self._stop = self._stopped = anyio.Event()

    async def start(self, make: Callable[[], Server] = build) -> Any:
        self._stop, self._stopped = anyio.Event(), anyio.Event()
        http = await self.tasks.start(self._serve, make)
        self.port = http.port
        return http

    async def stop(self) -> None:
        self._stop.set()
        await self._stopped.wait()

    async def _serve(self, make: Callable[[], Server], *, task_status: anyio.abc.TaskStatus[Any]) -> None:
        try:
            async with running(make(), via="h11", port=self.port, grace_period=1) as http:
                task_status.started(http)
                await self._stop.wait()
        finally:
            self._stopped.set()


class CuttingRelay:
    """A TCP relay on 127.0.0.1 to an upstream port that cuts a connection once its answer carries `marker`
    (as an intermediary's idle timeout cuts one stream), and keeps every byte it passed each way.
    It names the upstream's port in each request's Host (a loopback server serves only its own), as a
    reverse proxy would; a request's head comes in one piece here."""

    def __init__(self, tasks: anyio.abc.TaskGroup, marker: bytes) -> None:
        self.tasks, self.marker = tasks, marker
        self.asked, self.passed, self.cuts, self.port, self.upstream = b"", b"", 0, 0, 0
        self.cut_at = 0  # how much had been asked when it cut

    async def start(self) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        self.tasks.start_soon(listener.serve, self._relay)

    async def seen(self, text: bytes) -> None:
        while text not in self.passed:
            await anyio.sleep(0.01)

    async def _relay(self, client: anyio.abc.SocketStream) -> None:
        async with client, await anyio.connect_tcp("127.0.0.1", self.upstream) as upstream:
            async with anyio.create_task_group() as pumps:
                async def up() -> None:
                    async for chunk in client:
                        self.asked += chunk
                        await upstream.send(chunk.replace(b"host: 127.0.0.1:%d" % self.port,
                                                          b"host: 127.0.0.1:%d" % self.upstream))

                async def down() -> None:
                    async for chunk in upstream:
                        await client.send(chunk)
                        self.passed += chunk
                        if self.marker in self.passed[-len(chunk) - len(self.marker):]:
                            self.cuts, self.cut_at = self.cuts + 1, len(self.asked)
                            pumps.cancel_scope.cancel()  # both sockets close: the answer ends midway

                pumps.start_soon(up)
                pumps.start_soon(down)


async def test_an_answer_broken_midway_fails_its_call_only() -> None:
    """The gateway's other calls in flight go on, on the same upstream client: it does not reconnect."""
    async with anyio.create_task_group() as tasks:
        relay = CuttingRelay(tasks, b'"cut-me"')
        await relay.start()
        async with running(build(), via="h11") as http:
            relay.upstream = http.port
            async with Client.stdio(proxy_command(f"http://127.0.0.1:{relay.port}/mcp")) as client:
                with anyio.fail_after(60):
                    stayed: list[str] = []

                    async def stay() -> None:
                        stayed.append((await client.call_tool("meet", {"label": "stay", "group": "g", "expected": 2})).text)

                    async with anyio.create_task_group() as calls:
                        calls.start_soon(stay)
                        await relay.seen(b'"stay"')  # its progress came through: it is in flight
                        with pytest.raises(McpError) as broken:
                            await client.call_tool("meet", {"label": "cut-me", "group": "alone", "expected": 2})
                        assert "broke during the answer to POST" in broken.value.message and relay.cuts == 1
                        joined = await client.call_tool("meet", {"label": "join", "group": "g", "expected": 2})
                    assert (joined.text, stayed) == ("join", ["stay"])
                    assert b'"server/discover"' not in relay.asked[relay.cut_at:]  # no reconnection after the cut
        tasks.cancel_scope.cancel()


def with_a_new_tool() -> Server:
    """The upstream as it comes back: one tool more, which the gateway lists once it has reconnected."""
    server = build()

    @server.tool
    def added() -> str:
        return "new"

    return server


@pytest.mark.parametrize("endpoint", ENDPOINTS)
async def test_an_upstream_stopped_and_started_again_is_reconnected(endpoint: str) -> None:
    async with anyio.create_task_group() as tasks:
        upstream = Upstream(tasks)
        http = await upstream.start()
        command = proxy_command(at(http, endpoint), "--upstream-timeout", "2")
        async with Client.stdio(command) as client:
            with anyio.fail_after(90):
                assert (await client.call_tool("echo", {"text": "before"})).text == "before"
                await upstream.stop()
                with pytest.raises(McpError) as down:
                    await client.call_tool("echo", {"text": "while down"})
                assert down.value.code == -32603
                assert down.value.message.startswith(("the upstream server went away during tools/call",
                                                      "the upstream server is not available (not back within 2 s)"))
                await upstream.start(with_a_new_tool)
                while True:  # the gateway reconnects after its back-off; meanwhile a call waits, then says so
                    try:
                        assert (await client.call_tool("echo", {"text": "after"})).text == "after"
                        break
                    except McpError as waited:
                        assert waited.message == "the upstream server is not available (not back within 2 s)"
                assert "added" in [tool["name"] for tool in await client.list_tools()]  # its lists were read again
        await upstream.stop()


async def test_an_unreachable_url_stops_the_proxy_at_start_saying_why() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free, and nothing listens there once closed
    url = f"http://127.0.0.1:{port}/mcp"
    result = subprocess.run(proxy_command(url), capture_output=True, text=True, timeout=60, stdin=subprocess.PIPE)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"mcpcore: the lifespan of server 'proxy:127.0.0.1:{port}' failed at start-up: "
                           f"UpstreamDidNotStart: the upstream server did not start: cannot reach 127.0.0.1:{port}")
    assert result.stdout == ""


def guarded() -> Server:
    """An upstream that takes only the bearer token `s3cret`, and says whose call it serves."""
    server = Server("guarded", auth=Auth(StaticTokens({"s3cret": AccessToken("the-gateway")}),
                                         "http://127.0.0.1/mcp", ("https://auth.example.com",)))

    @server.tool
    def whoami(ctx: Context) -> str:
        return str(ctx.principal)

    return server


@pytest.mark.parametrize(("endpoint", "given"), [("/mcp", "environment"), ("/sse", "command line")])
async def test_headers_reach_the_upstream(endpoint: str, given: str) -> None:
    async with running(guarded(), via="h11") as http:
        header = "Authorization: Bearer s3cret"
        options = ["--upstream-header", header] if given == "command line" else []
        env = {"MCPCORE_UPSTREAM_HEADERS": f"X-Unused: 1\n{header}\n"} if given == "environment" else None
        async with Client.stdio(proxy_command(at(http, endpoint), *options), env=env) as client:
            with anyio.fail_after(60):
                assert (await client.call_tool("whoami")).text == "the-gateway"
        with anyio.fail_after(60):  # without the header: refused by the upstream, said in the one line
            refused = await anyio.run_process(proxy_command(at(http, endpoint)), check=False)
        last = refused.stderr.decode().strip().splitlines()[-1]
        assert refused.returncode == 1
        assert "the upstream server did not start: " in last
        assert last.endswith("Authorization required: send a bearer token")  # the upstream's 401, as it said it


async def test_a_2025_session_the_server_forgot_is_opened_again() -> None:
    """A 404 for the session (here: the server was restarted) opens a new one, and the request is sent again."""
    async with anyio.create_task_group() as tasks:
        upstream = Upstream(tasks)
        http = await upstream.start()
        async with Client.http(http.url, era="2025-11-25") as client:
            with anyio.fail_after(60):
                assert (await client.call_tool("echo", {"text": "first"})).text == "first"
                old = client._channel.session_id
                await upstream.stop()
                again = await upstream.start()
                assert (await client.call_tool("echo", {"text": "second"})).text == "second"
                assert client._channel.session_id not in (None, old) and len(again.sessions) == 1
        await upstream.stop()


async def test_a_renewed_2025_session_is_set_up_again_and_its_lists_read_again() -> None:
    """The gateway's upstream session forgotten (the server restarted, one tool more): the 404 opens a new
    session, which gets the gateway's log level again, and the lists are read again."""
    from mcpcore.gateway import Gateway

    async with anyio.create_task_group() as tasks:
        upstream = Upstream(tasks)
        http = await upstream.start()
        gateway = Gateway(lambda: Client.http(http.url, era="2025-11-25"), name="front", timeout=30)
        async with running(gateway.server) as front, Client.http(front.url) as client:
            with anyio.fail_after(60):
                assert (await client.call_tool("echo", {"text": "first"})).text == "first"
                await upstream.stop()
                again = await upstream.start(with_a_new_tool)
                assert (await client.call_tool("echo", {"text": "second"})).text == "second"
                assert [session.log_level for session in again.sessions] == ["debug"]
            with anyio.fail_after(10):
                while "added" not in [tool["name"] for tool in await client.list_tools()]:
                    await anyio.sleep(0.02)
        await upstream.stop()


@pytest.mark.parametrize(("arguments", "said"), [
    (["http://127.0.0.1:1/mcp", "--", "python", "server.py"], "proxy takes one upstream: a URL or a command after --, not both"),
    (["server.py"], "proxy takes an http:// or https:// URL, not 'server.py' (a command goes after --: "
                    "mcpcore proxy -- server.py)"),
    (["--upstream-header", "Authorization: x", "--", "python", "server.py"],
     "--upstream-header and --upstream-transport need an upstream URL"),
    (["--upstream-header", "Bearer s3cret", "http://127.0.0.1:1/mcp"],
     "--upstream-header: a header is 'Name: value'; one has no ':'"),
    (["--upstream-header", "Host: elsewhere", "http://127.0.0.1:1/mcp"], "--upstream-header: Host is set by mcpcore itself"),
])
def test_the_command_line_says_what_is_wrong(arguments: list[str], said: str) -> None:
    result = subprocess.run([sys.executable, "-m", "mcpcore", "proxy", *arguments], capture_output=True, text=True,
                            timeout=60, stdin=subprocess.DEVNULL, env={**os.environ, "MCPCORE_UPSTREAM_HEADERS": ""})
    assert (result.returncode, result.stderr.strip()) == (1, f"mcpcore: {said}")
