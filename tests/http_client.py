"""Test helpers for HTTP: a real server on 127.0.0.1 and an h11 client.

`running(server, **config)` serves on a free port in this event loop, with the
built-in server, or with the ASGI adapter under a real uvicorn when the test
runs in the `asgi` flavour (the `http_flavour` fixture in conftest.py);
`HttpClient` speaks HTTP/1.1 through h11 over a real socket, keeps the
connection alive across requests, and parses SSE bodies with its own parser.
Every JSON-RPC message received is checked against the wire schema.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

import anyio
import anyio.abc
import h11
import orjson

from conftest import VERSION
from mcpcore import Server
from mcpcore.transports import asgi
from mcpcore.transports.http import HttpConfig, HttpServer
from wire_schema import check, check_legacy

FLAVOURS = ("h11", "asgi")
flavour = "h11"  # what `running` serves with; the `http_flavour` fixture switches it per test


@contextlib.asynccontextmanager
async def running(server: Server, via: str | None = None, **config: Any) -> AsyncIterator[Any]:
    """A real HTTP server on 127.0.0.1 and a free port, stopped gracefully on exit.

    `via`: "h11" (the built-in server) or "asgi" (uvicorn); by default the test's flavour.
    """
    if (via or flavour) == "asgi":
        async with running_asgi(server, **config) as served:
            yield served
        return
    config.setdefault("port", 0)
    http = HttpServer(server, HttpConfig(**config))
    async with anyio.create_task_group() as tasks:
        await tasks.start(http.serve)
        try:
            yield http
        finally:
            http.stop()


class UnderUvicorn:
    """The ASGI app as a test sees a server: its `AsgiApp` attributes, `port`, and `stop()`."""

    def __init__(self, app: asgi.AsgiApp, uvicorn_server: Any, port: int) -> None:
        self.app, self.uvicorn, self.port = app, uvicorn_server, port
        self._stopping: asyncio.Task[None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    def stop(self) -> None:
        """Drain the app (`await app.aclose()`: streams end gracefully, calls get the grace period), then
        stop uvicorn. uvicorn alone would wait for open streams before telling the app it stops."""

        async def stop() -> None:
            await self.app.aclose()
            self.uvicorn.should_exit = True

        self._stopping = asyncio.get_running_loop().create_task(stop())


@contextlib.asynccontextmanager
async def under_uvicorn(app: Any, lifespan: str = "on", keep_alive: float = 5) -> AsyncIterator[tuple[Any, int]]:
    """Any ASGI app under a real uvicorn on 127.0.0.1 and a free port, in this event loop: (uvicorn, port)."""
    import uvicorn

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP: asyncio sets TCP_NODELAY
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    settings = uvicorn.Config(app, lifespan=lifespan, log_level="warning", http="h11", ws="none",
                              timeout_keep_alive=keep_alive, timeout_graceful_shutdown=2)
    served = uvicorn.Server(settings)
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(served.serve, [listener])
            with anyio.fail_after(10):
                while not served.started and not served.should_exit:  # should_exit: it refused to start
                    await anyio.sleep(0.005)
            try:
                yield served, listener.getsockname()[1]
            finally:
                served.should_exit = True
    finally:
        listener.close()


@contextlib.asynccontextmanager
async def running_asgi(server: Server, **config: Any) -> AsyncIterator[UnderUvicorn]:
    """`asgi.app(server)` under uvicorn. Options the ASGI server owns are uvicorn's (a keep-alive timeout)."""
    config.pop("port", None)
    keep_alive = config.pop("keep_alive_timeout", 5)
    app = asgi.app(server, **config)
    async with under_uvicorn(app, keep_alive=keep_alive) as (served, port):
        yield UnderUvicorn(app, served, port)


def parse_sse(body: bytes) -> list[dict[str, Any]]:
    """An independent SSE parser: events separated by blank lines, `data:` lines joined."""
    events = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data_lines, kind = [], "message"
        for line in block.split(b"\n"):
            if line.startswith(b":") or not line:
                continue
            name, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if name == b"data":
                data_lines.append(value)
            elif name == b"event":
                kind = value.decode()
        if data_lines and any(data_lines):  # an event with an empty data line only primes a resumable stream
            assert kind == "message", f"unexpected SSE event type {kind}"
            events.append(orjson.loads(b"\n".join(data_lines)))
    return events


def mcp_headers(message: dict[str, Any], **extra: str) -> dict[str, str]:
    """The headers a conforming client sends for a message."""
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": VERSION,
    }
    if "method" in message:
        headers["mcp-method"] = message["method"]
        params = message.get("params") or {}
        name = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}.get(message["method"])
        if name and isinstance(params.get(name), str):
            headers["mcp-name"] = params[name]
    headers.update(extra)
    return headers


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    chunked: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_sse(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")

    @property
    def json(self) -> dict[str, Any]:
        assert self.headers.get("content-type") == "application/json", self.headers
        return orjson.loads(self.body)

    @property
    def response(self) -> dict[str, Any]:
        """The JSON-RPC response, from a JSON body or as the last event of a stream."""
        assert self.messages, self.body
        return self.messages[-1]


class HttpClient:
    """One keep-alive HTTP/1.1 connection driven by h11."""

    def __init__(self, stream: anyio.abc.SocketStream, host: str) -> None:
        self.stream = stream
        self.host = host
        self.conn = h11.Connection(h11.CLIENT)

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, http: HttpServer) -> AsyncIterator["HttpClient"]:
        stream = await anyio.connect_tcp("127.0.0.1", http.port)
        try:
            yield cls(stream, f"127.0.0.1:{http.port}")
        finally:
            await stream.aclose()

    async def _next(self) -> Any:
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            try:
                data = await self.stream.receive()
            except anyio.EndOfStream:
                data = b""
            self.conn.receive_data(data)

    async def send_request(
        self, method: str = "POST", target: str = "/mcp", headers: dict[str, str] | None = None, body: bytes = b""
    ) -> None:
        fields = [("host", self.host)] + list((headers or {}).items())
        if method == "POST" or body:
            fields.append(("content-length", str(len(body))))
        data = self.conn.send(h11.Request(method=method, target=target, headers=fields))
        if body:
            data += self.conn.send(h11.Data(data=body))
        data += self.conn.send(h11.EndOfMessage())
        await self.stream.send(data)

    async def read_reply(self) -> Reply:
        response = await self._next()
        while isinstance(response, h11.InformationalResponse):
            response = await self._next()
        assert isinstance(response, h11.Response), response
        headers = {k.decode(): v.decode() for k, v in response.headers}
        body = b""
        while True:
            event = await self._next()
            if isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
        reply = Reply(response.status_code, headers, body, headers.get("transfer-encoding") == "chunked")
        if reply.is_sse:
            reply.messages = parse_sse(body)
        elif body and headers.get("content-type") == "application/json":
            reply.messages = [orjson.loads(body)]
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()
        return reply

    async def post(self, message: Any, headers: dict[str, str] | None = None, raw: bytes | None = None, legacy: bool = False) -> Reply:
        """POST a message (with conforming headers unless given) and read the reply.

        `legacy`: a 2025-era session's message, checked against the 2025-11-25 schema.
        """
        body = raw if raw is not None else orjson.dumps(message)
        await self.send_request("POST", "/mcp", headers if headers is not None else mcp_headers(message), body)
        reply = await self.read_reply()
        method = message.get("method") if isinstance(message, dict) else None
        for item in reply.messages:
            (check_legacy if legacy else check)(item, method)
        return reply


class SseStream:
    """An SSE response on its own HTTP connection, read event by event.

    `open` POSTs a message (a listen stream by default); `open_get` opens a
    2025-era session's standalone stream. Each event is schema-checked with
    `checker` (the 2026 rules for `method`, or the 2025-11-25 rules).
    """

    def __init__(self, client: HttpClient, method: str = "subscriptions/listen", legacy: bool = False) -> None:
        self.client = client
        self.method = method
        self.checker = check_legacy if legacy else check
        self.event_ids: list[str] = []  # the `id:` of every event, in order
        self.raw = b""
        self.comments = 0
        self.ended = False
        self._buffer = b""

    async def open(self, message: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, str]:
        await self.client.send_request("POST", "/mcp", headers or mcp_headers(message), orjson.dumps(message))
        return await self._head()

    async def open_get(self, headers: dict[str, str]) -> dict[str, str]:
        await self.client.send_request("GET", "/mcp", {"accept": "text/event-stream", **headers})
        return await self._head()

    async def _head(self) -> dict[str, str]:
        response = await self.client._next()
        assert isinstance(response, h11.Response), response
        headers = {k.decode(): v.decode() for k, v in response.headers}
        assert response.status_code == 200 and headers["content-type"] == "text/event-stream", (response, headers)
        return headers

    async def next(self) -> dict[str, Any] | None:
        while True:
            if b"\n\n" in self._buffer:
                block, self._buffer = self._buffer.split(b"\n\n", 1)
                lines = block.split(b"\n")
                self.event_ids += [line[4:].decode() for line in lines if line.startswith(b"id: ")]
                if all(line.startswith(b":") for line in lines):
                    self.comments += 1
                    continue
                if not any(line.startswith(b"data: ") and line[6:] for line in lines):
                    continue  # a priming event: an id and no data
                (message,) = parse_sse(block + b"\n\n")
                return self.checker(message, self.method)
            if self.ended:
                return None
            try:
                event = await self.client._next()
            except h11.RemoteProtocolError:
                event = h11.ConnectionClosed()
            if isinstance(event, h11.Data):
                self._buffer += event.data
                self.raw += event.data
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                self.ended = True
