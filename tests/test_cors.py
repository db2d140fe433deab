"""CORS for browser-based clients (ADR 41): raw HTTP on 127.0.0.1 against the built-in server and the
ASGI adapter under uvicorn, the command line and settings, and a real headless Chromium calling the
server from a page of another origin (skipped without a chromium binary, unless
`MCPCORE_TEST_BROWSER=required`, as in CI: then it fails)."""

from __future__ import annotations

import asyncio
import contextlib
import html
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import orjson
import pytest

from conftest import VERSION, free_port, legacy, tool_call
from http_client import HttpClient, Reply, mcp_headers, running
from mcpcore import Context, Server
from mcpcore._cli.settings import load
from mcpcore.auth import AccessToken, Auth, StaticTokens
from mcpcore.transports import asgi
from mcpcore.transports.http import HttpConfig, HttpServer

pytestmark = pytest.mark.anyio

LIMIT = 10
APP = "http://127.0.0.1:5173"  # the page's origin the server lists
STRANGER = "http://127.0.0.1:5174"  # a loopback origin: it passes the Origin check, but is no CORS origin
FOREIGN = "https://evil.example"  # fails the Origin check too
TOKEN = "page-token"
RESOURCE = "http://127.0.0.1:8000/mcp"
LEGACY = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
CLIENT = {"name": "cors-tests", "version": "1"}
EXPOSED = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate, Retry-After"


def served(guarded: bool = False) -> Server:
    auth = Auth(StaticTokens({TOKEN: AccessToken("page")}), RESOURCE, ("https://auth.example.com",)) if guarded else None
    server = Server("cors", auth=auth, metrics=True)

    @server.tool
    async def echo(text: str) -> str:
        return text

    @server.tool
    async def steps(ctx: Context) -> str:
        await ctx.progress(1, 2)
        return "done"

    return server


def allowed_to(origin: str, reply: Reply) -> None:
    """The reply carries the CORS headers a page of `origin` needs to read it."""
    assert reply.headers["access-control-allow-origin"] == origin, reply.headers
    assert reply.headers["access-control-expose-headers"] == EXPOSED
    assert reply.headers["vary"] == "origin"
    assert "access-control-allow-credentials" not in reply.headers


def no_cors(reply: Reply) -> None:
    assert not [name for name in reply.headers if name.startswith("access-control-")], reply.headers


async def preflight(client: HttpClient, origin: str | None, method: str = "POST", headers: str | None = None,
                    target: str = "/mcp") -> Reply:
    asked = {"access-control-request-method": method}
    if origin is not None:
        asked["origin"] = origin
    if headers is not None:
        asked["access-control-request-headers"] = headers
    await client.send_request("OPTIONS", target, asked)
    return await client.read_reply()


def with_origin(message: dict[str, Any], origin: str, **extra: str) -> dict[str, str]:
    return mcp_headers(message, origin=origin, **extra)


# -- the preflight ------------------------------------------------------------


@pytest.mark.usefixtures("http_flavour")
async def test_a_listed_origins_preflight_is_answered_before_any_token() -> None:
    asked = "authorization,content-type,mcp-method,mcp-name,mcp-param-city,mcp-protocol-version"
    async with running(served(guarded=True), cors_origins=(APP,)) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await preflight(client, APP, "POST", asked)
            assert reply.status == 204 and reply.body == b"", reply.body
            allowed_to(APP, reply)
            assert reply.headers["access-control-allow-methods"] == "GET, POST, DELETE, OPTIONS"
            assert reply.headers["access-control-allow-headers"] == asked.replace(",", ", ")
            assert reply.headers["access-control-max-age"] == "7200"
            assert "content-length" not in reply.headers and "www-authenticate" not in reply.headers
            resumed = await preflight(client, APP, "GET", "Last-Event-ID, Mcp-Session-Id")
            assert resumed.status == 204 and resumed.headers["access-control-allow-headers"] == "last-event-id, mcp-session-id"
            bare = await preflight(client, APP, "DELETE")
            assert bare.status == 204 and "access-control-allow-headers" not in bare.headers


@pytest.mark.usefixtures("http_flavour")
async def test_a_preflight_from_an_unlisted_origin_or_for_other_things_is_refused_without_cors_headers() -> None:
    async with running(served(guarded=True), cors_origins=(APP,)) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            for origin in (STRANGER, FOREIGN, None):
                refused = await preflight(client, origin, "POST", "content-type")
                assert refused.status == 403 and refused.json["error"]["code"] == -32600, (origin, refused.body)
                no_cors(refused)
                assert refused.headers["vary"] == "origin"
            assert "not listed with --cors-origin" in (await preflight(client, STRANGER)).json["error"]["message"]
            for method, headers, named in (("PUT", None, "'PUT'"), ("POST", "content-type, x-secret", "'x-secret'"),
                                           ("POST", "mcp-name, cookie", "'cookie'")):
                refused = await preflight(client, APP, method, headers)
                assert refused.status == 403 and named in refused.json["error"]["message"], refused.body
            await client.send_request("OPTIONS", "/mcp", {"origin": APP})  # not a preflight
            unasked = await client.read_reply()
            assert unasked.status == 403 and "Access-Control-Request-Method is missing" in unasked.json["error"]["message"]
            async with await anyio.connect_tcp("127.0.0.1", http.port) as stream:  # DNS rebinding: a page of
                rebound = f"rebound.example:{http.port}"                          # a name that now leads here
                rebound_reply = await preflight(HttpClient(stream, rebound), f"http://{rebound}", "POST", "content-type")
                assert rebound_reply.status == 421
                no_cors(rebound_reply)
    assert http.server.metrics.rejections[403] == 8  # counted as every refusal is
    assert http.server.metrics.rejections[421] == 1


@pytest.mark.usefixtures("http_flavour")
async def test_without_cors_options_stays_405_and_no_answer_says_anything_of_cors() -> None:
    async with running(served(), allowed_origins=(APP,)) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            refused = await preflight(client, APP, "POST", "content-type")
            assert refused.status == 405 and refused.headers["allow"] == "GET, POST, DELETE"
            message = tool_call(1, "echo", text="hi")
            answered = await client.post(message, with_origin(message, APP))  # --allow-origin alone: no CORS
            assert answered.status == 200 and "vary" not in answered.headers
            no_cors(answered)


@pytest.mark.usefixtures("http_flavour")
async def test_the_resource_metadata_preflight_is_open_to_any_page() -> None:
    async with running(served(guarded=True)) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await preflight(client, FOREIGN, "GET", "mcp-protocol-version",
                                    target="/.well-known/oauth-protected-resource/mcp")
            assert reply.status == 204 and reply.headers["access-control-allow-origin"] == "*"
            assert reply.headers["access-control-allow-headers"] == "*"
            assert reply.headers["access-control-allow-methods"] == "GET, HEAD"


# -- answers to a listed origin -------------------------------------------------


@pytest.mark.usefixtures("http_flavour")
async def test_every_answer_to_a_listed_origin_carries_the_cors_headers_on_the_2026_wire() -> None:
    async with running(served(guarded=True), cors_origins=(APP,)) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            message = tool_call(1, "echo", text="hi")
            unauthorized = await client.post(message, with_origin(message, APP))
            assert unauthorized.status == 401 and unauthorized.headers["www-authenticate"].startswith("Bearer ")
            allowed_to(APP, unauthorized)
            bearer = {"authorization": f"Bearer {TOKEN}"}
            answered = await client.post(message, with_origin(message, APP, **bearer))
            assert answered.status == 200 and answered.response["result"]["content"][0]["text"] == "hi"
            allowed_to(APP, answered)
            streamed = tool_call(2, "steps")
            streamed["params"]["_meta"]["progressToken"] = "p"
            stream = await client.post(streamed, with_origin(streamed, APP, **bearer))
            assert stream.is_sse and stream.response["result"]["content"][0]["text"] == "done"
            allowed_to(APP, stream)
            note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9, "_meta": message["params"]["_meta"]}}
            accepted = await client.post(note, with_origin(note, APP, **bearer))
            assert accepted.status == 202
            allowed_to(APP, accepted)
            mismatch = await client.post(message, with_origin(message, APP, **bearer, **{"mcp-name": "other"}))
            assert mismatch.status == 400 and mismatch.response["error"]["code"] == -32020
            allowed_to(APP, mismatch)
            plain = await client.post(message, mcp_headers(message, **bearer))  # no Origin: a plain client
            assert plain.status == 200 and plain.headers["vary"] == "origin"
            no_cors(plain)
            stranger = await client.post(message, with_origin(message, STRANGER, **bearer))
            assert stranger.status == 200 and stranger.headers["vary"] == "origin"  # loopback: passes the Origin check
            no_cors(stranger)


@pytest.mark.usefixtures("http_flavour")
async def test_a_2025_session_from_a_listed_origin_reads_its_session_id() -> None:
    async with running(served(), cors_origins=(APP,)) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            opening = legacy("initialize", 0, protocolVersion="2025-11-25", capabilities={}, clientInfo=CLIENT)
            opened = await client.post(opening, {**LEGACY, "origin": APP}, legacy=True)
            assert opened.status == 200 and opened.headers["mcp-session-id"]
            allowed_to(APP, opened)
            session = {**LEGACY, "origin": APP, "mcp-session-id": opened.headers["mcp-session-id"],
                       "mcp-protocol-version": "2025-11-25"}
            initialized = await client.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session, legacy=True)
            assert initialized.status == 202
            allowed_to(APP, initialized)
            called = await client.post(legacy("tools/call", 1, name="echo", arguments={"text": "in session"}), session,
                                       legacy=True)
            assert called.response["result"]["content"][0]["text"] == "in session"
            allowed_to(APP, called)
            stepped = legacy("tools/call", 2, name="steps", arguments={}, _meta={"progressToken": "p"})
            streamed = await client.post(stepped, session, legacy=True)
            assert streamed.is_sse and streamed.response["result"]["content"][0]["text"] == "done"
            allowed_to(APP, streamed)
            await client.send_request("DELETE", "/mcp", session)
            deleted = await client.read_reply()
            assert deleted.status == 200
            allowed_to(APP, deleted)
            gone = await client.post(legacy("tools/list", 3), session, legacy=True)
            assert gone.status == 404
            allowed_to(APP, gone)


@pytest.mark.usefixtures("http_flavour")
async def test_a_cors_origin_passes_the_origin_check_and_a_foreign_one_does_not() -> None:
    app = "https://app.example"  # not loopback: without the listing it would be refused
    async with running(served(), cors_origins=(app,)) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            message = tool_call(1, "echo", text="hi")
            answered = await client.post(message, with_origin(message, app))
            assert answered.status == 200
            allowed_to(app, answered)
            refused = await client.post(message, with_origin(message, FOREIGN))
            assert refused.status == 403 and "Origin" in refused.json["error"]["message"]
            no_cors(refused)
            assert (await preflight(client, FOREIGN)).status == 403


# -- configuration ----------------------------------------------------------------


@pytest.mark.parametrize("origin", ["*", " * ", "null", "app.example", "https://app.example/", "https://app.example/mcp",
                                    "ftp://app.example", "https://user@app.example", "https://app.example:99999",
                                    "https://app.example?x", "http://[::1"])
def test_a_malformed_origin_or_a_wildcard_is_refused_at_start(origin: str) -> None:
    with pytest.raises(ValueError, match="CORS origin") as refused:
        HttpServer(served(), HttpConfig(cors_origins=(origin,)))
    if origin.strip() == "*":
        assert "session ids" in str(refused.value) and "DNS rebinding" in str(refused.value)
    with pytest.raises(ValueError, match="CORS origin"):
        asgi.app(served(), cors_origins=(origin,))


def test_origins_are_kept_as_browsers_send_them() -> None:
    listed = ("HTTPS://App.Example:443", "http://127.0.0.1:80", "http://[::1]:5173", "https://app.example")
    cors = HttpServer(served(), HttpConfig(cors_origins=listed)).cors
    assert cors is not None and cors.origins == ("https://app.example", "http://127.0.0.1", "http://[::1]:5173")


def test_the_settings_give_cors_origins_as_a_list(tmp_path: Path) -> None:
    (tmp_path / "mcpcore.toml").write_text('cors-origin = "https://a.example"\n')
    assert load({"cors_origins": str}, {}, tmp_path) == {"cors_origins": ["https://a.example"]}
    from_env = load({"cors_origins": str}, {"MCPCORE_CORS_ORIGIN": "https://a.example, https://b.example"}, tmp_path)
    assert from_env == {"cors_origins": ["https://a.example", "https://b.example"]}


@contextlib.contextmanager
def command_line(folder: Path, *args: str) -> Any:
    """`mcpcore run ARGS` in `folder` until it says it serves; stopped (its process group) on exit."""
    process = subprocess.Popen([sys.executable, "-m", "mcpcore", "run", *args], cwd=folder, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        assert process.stderr is not None
        for line in process.stderr:  # ends at the line, or when the process exits
            if "serving 'cors'" in line:
                break
        else:
            raise AssertionError(f"exited with {process.wait()} without serving")
        yield process
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


async def test_the_command_line_and_the_file_list_origins(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text('from mcpcore import Server\nserver = Server("cors")\n')
    port = free_port()
    (tmp_path / "mcpcore.toml").write_text(f'target = "server.py"\ntransport = "http"\nport = {port}\nlog_level = "info"\n'
                                           f'cors_origin = ["{STRANGER}"]\n')
    with command_line(tmp_path, "--cors-origin", APP):  # the command line beats the file
        stream = await anyio.connect_tcp("127.0.0.1", port)
        async with stream:
            client = HttpClient(stream, f"127.0.0.1:{port}")
            with anyio.fail_after(LIMIT):
                listed = await preflight(client, APP, "POST", "content-type")
                assert listed.status == 204 and listed.headers["access-control-allow-origin"] == APP
                assert (await preflight(client, STRANGER)).status == 403
    refused = subprocess.run([sys.executable, "-m", "mcpcore", "run", "--cors-origin", "*"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert refused.returncode == 1 and "mcpcore: a CORS origin of '*' is refused" in refused.stderr, refused.stderr
    stdio = subprocess.run([sys.executable, "-m", "mcpcore", "run", "server.py", "--transport", "stdio", "--cors-origin", APP],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert stdio.returncode == 1 and re.search(r"--cors-origin\b.* needs --transport http", stdio.stderr), stdio.stderr


# -- a real browser -----------------------------------------------------------------

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>mcpcore CORS</title></head><body><pre id="out">pending</pre><script>
const MCP = "%(mcp)s";
const BASE = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"};
const BEARER = {"Authorization": "Bearer %(token)s"};
const META = {"io.modelcontextprotocol/protocolVersion": "%(version)s", "io.modelcontextprotocol/clientCapabilities": {}};

async function answer(response) {  // a JSON body, or the last event of an SSE stream
  const text = await response.text();
  if (!(response.headers.get("content-type") || "").startsWith("text/event-stream")) return text ? JSON.parse(text) : null;
  const events = text.split("\\n\\n").map(block => block.split("\\n").filter(line => line.startsWith("data:"))
    .map(line => line.slice(5).trim()).join("\\n")).filter(data => data);
  return JSON.parse(events[events.length - 1]);
}

async function post(message, headers) {
  const response = await fetch(MCP, {method: "POST", headers: {...BASE, ...headers}, body: JSON.stringify(message)});
  return {status: response.status, session: response.headers.get("mcp-session-id"),
          challenge: response.headers.get("www-authenticate"), body: await answer(response)};
}

async function run() {
  const out = {};
  const call = {jsonrpc: "2.0", id: 1, method: "tools/call",
                params: {name: "echo", arguments: {text: "from the page"}, _meta: META}};
  const modern = {"MCP-Protocol-Version": "%(version)s", "Mcp-Method": "tools/call", "Mcp-Name": "echo"};
  if (%(stranger)s) {
    return {modern: await post(call, {...modern, ...BEARER})};
  }
  out.unauthorized = await post(call, modern);
  out.modern = await post(call, {...modern, ...BEARER});
  const init = {jsonrpc: "2.0", id: 2, method: "initialize",
                params: {protocolVersion: "2025-11-25", capabilities: {}, clientInfo: {name: "page", version: "1"}}};
  out.initialize = await post(init, BEARER);
  const session = {...BEARER, "Mcp-Session-Id": out.initialize.session, "MCP-Protocol-Version": "2025-11-25"};
  out.initialized = await post({jsonrpc: "2.0", method: "notifications/initialized"}, session);
  out.session = await post({jsonrpc: "2.0", id: 3, method: "tools/call",
                            params: {name: "echo", arguments: {text: "in the session"}}}, session);
  out.deleted = (await fetch(MCP, {method: "DELETE", headers: session})).status;
  return out;
}

function show(found) { document.getElementById("out").textContent = JSON.stringify(found); }
run().then(show, error => show({error: error.name, message: error.message}));
</script></body></html>
"""


@contextlib.asynccontextmanager
async def pages(count: int) -> AsyncIterator[tuple[list[int], dict[int, bytes]]]:
    """Static HTTP servers on `count` free 127.0.0.1 ports: each answers any GET with the page set for its port."""
    content: dict[int, bytes] = {}

    def handler(port: int) -> Any:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await reader.readuntil(b"\r\n\r\n")
                body = content.get(port, b"")
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n"
                             b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))
                await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        return serve

    listeners, ports = [], []
    try:
        for _ in range(count):
            port = free_port()
            listeners.append(await asyncio.start_server(handler(port), "127.0.0.1", port))
            ports.append(port)
        yield ports, content
    finally:
        for listener in listeners:
            listener.close()


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("MCPCORE_TEST_BROWSER") == "required":
        pytest.fail("chromium is not installed, and MCPCORE_TEST_BROWSER=required")
    pytest.skip("no chromium binary on PATH: the real-browser CORS test needs the OS package chromium")


async def dump_dom(browser: str, url: str, profile: Path) -> dict[str, Any]:
    """Load `url` in headless Chromium until the page settles, and what its script wrote in <pre id=out>."""
    command = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
               f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom", url]
    process = await anyio.open_process(command, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    dom = b""
    try:
        with anyio.fail_after(60):
            assert process.stdout is not None
            async for chunk in process.stdout:
                dom += chunk
            await process.wait()
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    found = re.search(r'<pre id="out">(.*?)</pre>', dom.decode())
    assert found is not None, dom[-2000:]
    return orjson.loads(html.unescape(found.group(1)))


@pytest.mark.usefixtures("http_flavour")
async def test_a_page_in_chromium_calls_from_a_listed_origin_in_both_eras_and_another_is_blocked(tmp_path: Path) -> None:
    browser = chromium()
    async with pages(2) as ([listed, unlisted], content):
        origin = f"http://127.0.0.1:{listed}"
        async with running(served(guarded=True), cors_origins=(origin,)) as http:
            mcp = f"http://127.0.0.1:{http.port}/mcp"
            content[listed] = (PAGE % {"mcp": mcp, "token": TOKEN, "version": VERSION, "stranger": "false"}).encode()
            content[unlisted] = (PAGE % {"mcp": mcp, "token": TOKEN, "version": VERSION, "stranger": "true"}).encode()
            got = await dump_dom(browser, f"http://127.0.0.1:{listed}/page.html", tmp_path / "listed")
            assert "error" not in got, got
            assert got["unauthorized"]["status"] == 401 and got["unauthorized"]["challenge"].startswith("Bearer ")
            assert got["modern"]["status"] == 200
            assert got["modern"]["body"]["result"]["content"] == [{"type": "text", "text": "from the page"}]
            assert got["initialize"]["status"] == 200 and got["initialize"]["session"]
            assert got["initialize"]["body"]["result"]["protocolVersion"] == "2025-11-25"
            assert got["initialized"]["status"] == 202
            assert got["session"]["status"] == 200 and got["session"]["session"] == got["initialize"]["session"]
            assert got["session"]["body"]["result"]["content"] == [{"type": "text", "text": "in the session"}]
            assert got["deleted"] == 200
            metrics = http.server.metrics
            refused_before = metrics.rejections[403]
            blocked = await dump_dom(browser, f"http://127.0.0.1:{unlisted}/page.html", tmp_path / "unlisted")
            assert blocked["error"] == "TypeError", blocked  # the browser refused to send it
            assert metrics.rejections[403] == refused_before + 1  # its preflight, refused by the server


@pytest.mark.usefixtures("http_flavour")
async def test_the_http_sse_transport_answers_a_listed_origin_too() -> None:
    async with running(served(), cors_origins=(APP,)) as http:
        async with HttpClient.connect(http) as opener, HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                asked = await preflight(client, APP, "POST", "content-type", target="/messages?session_id=x")
                assert asked.status == 204
                allowed_to(APP, asked)
                await opener.send_request("GET", "/sse", {"accept": "text/event-stream", "origin": APP})
                head = await opener._next()
                headers = {name.decode(): value.decode() for name, value in head.headers}
                assert head.status_code == 200 and headers["access-control-allow-origin"] == APP
                assert headers["access-control-expose-headers"] == EXPOSED
                endpoint = b""
                while b"\n\n" not in endpoint:
                    endpoint += (await opener._next()).data
                uri = endpoint.split(b"data: ", 1)[1].split(b"\n", 1)[0].decode()
                await client.send_request("POST", uri, {**LEGACY, "origin": APP}, orjson.dumps(
                    {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": CLIENT}}))
                taken = await client.read_reply()
                assert taken.status == 202
                allowed_to(APP, taken)
                stranger = await preflight(client, STRANGER, "POST", "content-type", target="/messages?session_id=x")
                assert stranger.status == 403
                no_cors(stranger)
