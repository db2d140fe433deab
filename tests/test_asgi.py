"""The ASGI adapter where it differs from the built-in server: mounting, its lifespan, its options.

Everything the two share (the validation ladder, both eras, the JSON/SSE writer, disconnects,
limits, auth) is tested by the HTTP suites, which run each test on both (`http_flavour`).
Here: real uvicorn and hypercorn servers on 127.0.0.1, Starlette and FastAPI apps around the
adapter, and a few direct calls of the ASGI callable where only the scope can say it
(a request arriving on a public address).
"""

from __future__ import annotations

import contextlib
import socket
from types import SimpleNamespace
from typing import Any, AsyncIterator

import anyio
import orjson
import pytest

from conftest import free_port, legacy, request, tool_call
from http_client import HttpClient, Reply, mcp_headers, under_uvicorn
from mcpcore import Context, Server, asgi
from wire_schema import check

pytestmark = pytest.mark.anyio


def living_server(events: list[str], failures: int = 0) -> Server:
    """A server whose lifespan records its start and stop, and fails its first `failures` starts."""

    @contextlib.asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[dict[str, str]]:
        events.append("start")
        if events.count("start") <= failures:
            raise ConnectionRefusedError("the database is not up yet")
        yield {"pool": "open"}
        events.append("stop")

    server = Server("asgi-tests", lifespan=lifespan)

    @server.tool
    async def pool(ctx: Context) -> str:
        return ctx.lifespan["pool"]

    @server.tool
    async def steps(ctx: Context) -> str:
        await ctx.progress(1, total=2)
        await ctx.progress(2, total=2)
        return "done"

    return server


async def post(client: HttpClient, message: dict[str, Any], target: str = "/mcp") -> Reply:
    await client.send_request("POST", target, mcp_headers(message), orjson.dumps(message))
    reply = await client.read_reply()
    for item in reply.messages:
        check(item, message["method"])
    return reply


def at(port: int) -> SimpleNamespace:
    return SimpleNamespace(port=port)  # what HttpClient.connect needs of a server


async def test_mounted_under_a_prefix_in_starlette_it_starts_on_the_first_request() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    events: list[str] = []
    parent = Starlette(routes=[Mount("/tools", app=asgi.app(living_server(events), path="/"))])
    async with under_uvicorn(parent) as (_, port), HttpClient.connect(at(port)) as client:
        assert events == []  # Starlette does not pass lifespan events to a mount
        reply = await post(client, tool_call(1, "pool"), target="/tools/")
        assert reply.status == 200 and reply.response["result"]["content"][0]["text"] == "open"
        assert events == ["start"]
        await client.send_request("GET", "/tools/healthz")
        assert (await client.read_reply()).json == {"status": "ok"}
    assert events == ["start"]  # uvicorn stopped the parent; the mount's lifespan never heard of it


async def test_mounted_under_a_prefix_the_http_sse_stream_names_its_message_url_under_it() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from test_legacy_sse import Stream, handshake

    parent = Starlette(routes=[Mount("/tools", app=asgi.app(living_server([])))])
    async with under_uvicorn(parent) as (_, port), HttpClient.connect(at(port)) as opener:
        async with HttpClient.connect(at(port)) as client:
            stream = Stream(opener)
            uri = await stream.open(target="/tools/sse")
            assert uri.startswith("/tools/messages?session_id=")
            assert (await handshake(client, stream, uri))["serverInfo"]["name"] == "asgi-tests"


async def test_in_fastapi_beside_its_routes_with_the_lifespan_passed_on() -> None:
    from fastapi import FastAPI

    events: list[str] = []
    mcp = asgi.app(living_server(events))
    parent = FastAPI(lifespan=mcp.lifespan)

    @parent.get("/hello")
    def hello() -> dict[str, str]:
        return {"hello": "world"}

    parent.mount("/", mcp)
    async with under_uvicorn(parent) as (_, port), HttpClient.connect(at(port)) as client:
        assert events == ["start"]  # entered with the parent, before any request
        await client.send_request("GET", "/hello")
        assert (await client.read_reply()).json == {"hello": "world"}
        streamed = await post(client, tool_call(2, "steps"))
        assert streamed.status == 200 and streamed.response["result"]["content"][0]["text"] == "done"
        opened = legacy("initialize", 3, protocolVersion="2025-06-18", capabilities={}, clientInfo={"name": "t", "version": "0"})
        await client.send_request("POST", "/mcp", {"content-type": "application/json",
                                                   "accept": "application/json, text/event-stream"}, orjson.dumps(opened))
        initialized = await client.read_reply()
        assert initialized.status == 200 and initialized.headers["mcp-session-id"]
        assert initialized.json["result"]["protocolVersion"] == "2025-06-18"
    assert events == ["start", "stop"]  # left when the parent's lifespan ended


async def test_progress_upgrades_the_reply_to_sse_through_the_adapter() -> None:
    events: list[str] = []
    message = tool_call(4, "steps")
    message["params"]["_meta"]["progressToken"] = "p"
    async with under_uvicorn(asgi.app(living_server(events))) as (_, port), HttpClient.connect(at(port)) as client:
        reply = await post(client, message)
    assert reply.is_sse and reply.chunked
    assert [m.get("method") for m in reply.messages] == ["notifications/progress", "notifications/progress", None]
    assert reply.response["result"]["content"][0]["text"] == "done"


async def test_a_lifespan_that_fails_on_the_first_request_answers_503_and_is_tried_again() -> None:
    events: list[str] = []
    mcp = asgi.app(living_server(events, failures=1))
    async with under_uvicorn(mcp, lifespan="off") as (_, port), HttpClient.connect(at(port)) as client:
        refused = await post(client, tool_call(1, "pool"))
        assert refused.status == 503 and refused.headers["retry-after"] == "1"
        assert "the database is not up yet" in refused.json["error"]["message"]
        served = await post(client, tool_call(2, "pool"))
        assert served.status == 200 and served.response["result"]["content"][0]["text"] == "open"
    assert events == ["start", "start"]


async def test_uvicorn_does_not_start_when_the_lifespan_fails() -> None:
    import uvicorn

    events: list[str] = []
    served = uvicorn.Server(uvicorn.Config(asgi.app(living_server(events, failures=1)), lifespan="on", log_level="critical"))
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        with pytest.raises(SystemExit) as exited:
            await served.serve([listener])
    assert exited.value.code == 3 and not served.started  # uvicorn's exit code for a failed start-up
    assert events == ["start"]


async def test_shutdown_lets_an_in_flight_call_finish_and_answers_new_ones_503() -> None:
    release = anyio.Event()
    server = Server("draining")

    @server.tool
    async def slow() -> str:
        await release.wait()
        return "finished"

    mcp = asgi.app(server, grace_period=10)
    async with under_uvicorn(mcp) as (_, port), HttpClient.connect(at(port)) as busy, \
            HttpClient.connect(at(port)) as late:
        await busy.send_request("POST", "/mcp", mcp_headers(tool_call(1, "slow")), orjson.dumps(tool_call(1, "slow")))
        with anyio.fail_after(5):
            while not mcp.runner.calls:
                await anyio.sleep(0.01)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(mcp.aclose)
            with anyio.fail_after(5):
                while not mcp.closing:
                    await anyio.sleep(0.01)
            refused = await post(late, tool_call(2, "slow"))
            assert refused.status == 503 and refused.headers["connection"] == "close"
            async with HttpClient.connect(at(port)) as prober:
                await prober.send_request("GET", "/readyz")
                assert (await prober.read_reply()).status == 503  # not ready while draining
            release.set()
        finished = await busy.read_reply()
    assert finished.status == 200 and finished.json["result"]["content"][0]["text"] == "finished"


async def test_options_the_asgi_server_owns_are_refused_by_name() -> None:
    with pytest.raises(TypeError, match="port: the ASGI server owns the sockets"):
        asgi.app(Server("x"), port=8000)
    with pytest.raises(TypeError, match="keep_alive_timeout, max_connections: the ASGI server owns"):
        asgi.app(Server("x"), max_connections=5, keep_alive_timeout=1)
    with pytest.raises(TypeError, match="unknown option.* max_bodies"):
        asgi.app(Server("x"), max_bodies=1)


async def call_app(app: Any, scope: dict[str, Any], body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """Call an ASGI app directly with one request; its status, headers and body."""
    sent: list[dict[str, Any]] = []
    requests = [{"type": "http.request", "body": body, "more_body": False}]
    finished = anyio.Event()

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            finished.set()

    with anyio.fail_after(5):
        await app(scope, receive, send)
    start = sent[0]
    headers = {name.decode(): value.decode() for name, value in start["headers"]}
    return start["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


def scope_for(message: dict[str, Any], server: tuple[str, int], host: str, path: str = "/mcp") -> dict[str, Any]:
    headers = [(k.encode(), v.encode()) for k, v in mcp_headers(message, host=host).items()]
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"", "headers": headers,
            "server": server, "client": ("198.51.100.7", 50000)}


async def test_a_request_on_a_public_address_needs_the_host_names_to_allow() -> None:
    message = tool_call(1, "pool")
    public = ("192.0.2.10", 8000)
    open_app = asgi.app(living_server([]))
    status, _, body = await call_app(open_app, scope_for(message, public, "mcp.example.com"), orjson.dumps(message))
    assert status == 421 and "allowed_hosts" in orjson.loads(body)["error"]["message"]
    probe = dict(scope_for(message, public, "10.0.0.1"), method="GET", path="/healthz")
    assert (await call_app(open_app, probe))[0] == 200  # a load balancer's probe still answers
    named_app = asgi.app(living_server([]), allowed_hosts=("mcp.example.com",))
    status, _, body = await call_app(named_app, scope_for(message, public, "mcp.example.com"), orjson.dumps(message))
    assert status == 200 and orjson.loads(body)["result"]["content"][0]["text"] == "open"
    status, _, _ = await call_app(named_app, scope_for(message, public, "evil.example"), orjson.dumps(message))
    assert status == 421


async def test_the_metrics_app_serves_prometheus_text_where_it_is_mounted() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount, Route

    server = Server("measured", metrics=True)

    @server.tool
    def echo(text: str) -> str:
        return text

    mcp = asgi.app(server)
    parent = Starlette(routes=[Route("/internal/metrics", mcp.metrics), Mount("/", app=mcp)])
    async with under_uvicorn(parent) as (_, port), HttpClient.connect(at(port)) as client:
        assert (await post(client, tool_call(1, "echo", text="hi"))).status == 200
        await client.send_request("GET", "/internal/metrics")
        scraped = await client.read_reply()
    assert scraped.status == 200 and scraped.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'mcpcore_calls_total{method="tools/call",tool="echo",outcome="ok"} 1' in scraped.body.decode()


async def test_under_hypercorn_too() -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    events: list[str] = []
    config = Config()
    port = free_port()
    config.bind = [f"127.0.0.1:{port}"]
    config.loglevel = "WARNING"
    stop = anyio.Event()
    progress = tool_call(2, "steps")
    progress["params"]["_meta"]["progressToken"] = 7
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: serve(asgi.app(living_server(events)), config, shutdown_trigger=stop.wait))
        try:
            with anyio.fail_after(10):
                while True:
                    try:
                        await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                        break
                    except OSError:
                        await anyio.sleep(0.02)
            async with HttpClient.connect(at(port)) as client:
                plain = await post(client, tool_call(1, "pool"))
                streamed = await post(client, progress)
        finally:
            stop.set()
    assert plain.status == 200 and plain.json["result"]["content"][0]["text"] == "open"
    assert streamed.is_sse and streamed.response["result"]["content"][0]["text"] == "done"
    assert events == ["start", "stop"]


async def test_under_granian_in_a_process_of_its_own() -> None:
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from conftest import meta

    port = free_port()
    granian = Path(sys.executable).with_name("granian")
    command = [str(granian), "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
               "--working-dir", str(Path(__file__).parent / "servers"), "--log-level", "warning", "asgi_app:app"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        with anyio.fail_after(20):
            while True:
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    assert process.poll() is None, process.stderr.read() if process.stderr else b""
                    await anyio.sleep(0.05)
        async with HttpClient.connect(at(port)) as client:
            echoed = await post(client, tool_call(1, "echo", text="from granian"))
            logged = await post(client, request("tools/call", 2, name="chatty", arguments={},
                                                _meta=meta(**{"io.modelcontextprotocol/logLevel": "info"})))
            await client.send_request("GET", "/healthz")
            probed = await client.read_reply()
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert echoed.status == 200 and echoed.json["result"]["content"][0]["text"] == "from granian"
    assert logged.is_sse and [m.get("method") for m in logged.messages] == ["notifications/message"] * 2 + [None]
    assert probed.json == {"status": "ok"}


async def test_a_client_leaving_during_a_slow_route_or_token_check_ends_the_request() -> None:
    from mcpcore.auth import Auth
    from mcpcore.routes import HttpRequest

    started, cancelled = anyio.Event(), anyio.Event()

    async def hang() -> None:
        started.set()
        try:
            await anyio.sleep(60)
        finally:
            cancelled.set()

    class SlowVerifier:
        async def verify(self, token: str) -> Any:
            await hang()

    server = Server("slow", auth=Auth(SlowVerifier(), "http://127.0.0.1:8000/mcp", ("https://auth.example.com",)))

    @server.custom_route("/slow", public=True)
    async def slow(request: HttpRequest) -> str:
        await hang()
        return "never"

    app = asgi.app(server)
    message = tool_call(1, "pool")
    for scope in (dict(scope_for(message, ("127.0.0.1", 8000), "127.0.0.1:8000"), method="GET", path="/slow"),
                  dict(scope_for(message, ("127.0.0.1", 8000), "127.0.0.1:8000"), headers=[
                      *scope_for(message, ("127.0.0.1", 8000), "127.0.0.1:8000")["headers"], (b"authorization", b"Bearer t")])):
        started, cancelled = anyio.Event(), anyio.Event()
        requests = [{"type": "http.request", "body": orjson.dumps(message), "more_body": False}]

        async def receive() -> dict[str, Any]:
            if requests:
                return requests.pop()
            await started.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            raise AssertionError(f"nothing is sent to a client that left: {message}")

        with anyio.fail_after(5):
            await app(scope, receive, send)
            await cancelled.wait()
        assert app.requests == 0


async def test_cancelling_the_request_task_cancels_the_call_even_when_it_streams() -> None:
    ended = anyio.Event()
    server = Server("chatty")

    @server.tool
    async def flood(ctx: Context) -> str:
        try:
            for step in range(1000):
                await ctx.progress(step)
        finally:
            ended.set()
        return "done"

    app = asgi.app(server)
    message = tool_call(1, "flood")
    message["params"]["_meta"]["progressToken"] = "p"
    body = [{"type": "http.request", "body": orjson.dumps(message), "more_body": False}]
    stalled = anyio.Event()

    async def receive() -> dict[str, Any]:
        if body:
            return body.pop()
        await anyio.sleep_forever()
        return {}

    async def send(message: dict[str, Any]) -> None:  # a client that stops reading after the head
        if message["type"] == "http.response.body":
            stalled.set()
            await anyio.sleep_forever()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(app, scope_for(message, ("127.0.0.1", 8000), "127.0.0.1:8000"), receive, send)
            await stalled.wait()
            tasks.cancel_scope.cancel()
        await ended.wait()
        while app.runner.calls:
            await anyio.sleep(0.01)
