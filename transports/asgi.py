"""An ASGI 3 application serving a `Server`: the built-in server's MCP handling under any ASGI server.

Theory of operation. `AsgiApp` is an `Endpoint` (_http/exchange.py), so it has the
built-in server's call runner, sessions, limits and rules. Each `http` scope
becomes an `_AsgiExchange` fed from `receive()` exactly as the h11 connection
feeds its own: the head, each body message, the end. The h11 event objects
the exchange emits are turned into `http.response.start` / `http.response.body`
messages and queued; the request's own task sends them in order (`_pump`),
and `drain()` waits until the queue is sent, so a client that reads slowly
holds its writer back as it does on the built-in server. Once the body is in,
a watcher waits on `receive()` for `http.disconnect`, which cancels the call
as a closed connection does. No ASGI framework is imported.

The lifespan (the server's `lifespan=` and the idle-session sweep) runs in a
task of its own, entered on `lifespan.startup` when the ASGI server sends it,
or else on the first request: an app mounted in Starlette or FastAPI never
sees lifespan events, and needs no set-up to serve. `lifespan.shutdown` (or
passing `AsgiApp.lifespan` to the parent app) drains as the built-in server
does: new calls get 503, standalone streams end, in-flight calls get the grace period.

The ASGI server owns the sockets, so the options about them (host, port,
connection count, head and keep-alive timeouts) are refused here; the Host
allow-list is checked against the address each request arrived on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from dataclasses import fields
from typing import Any, AsyncIterator, Awaitable, Callable, MutableMapping

import anyio
import h11

from mcpcore._serving.server import Server
from mcpcore._wire.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, McpError

from ._http.config import HttpConfig
from ._http.exchange import Endpoint, Exchange
from ._http.rules import Policy, Rejection, public_bind_refusal

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# What the ASGI server decides, not this app.
SERVER_OWNED = ("host", "port", "listen_fd", "max_connections", "header_timeout", "keep_alive_timeout",
                "metrics_host", "metrics_port")
MAX_UNSENT = 16  # messages queued for the ASGI server before a writer waits for them to be sent
_MAX_POLICIES = 64  # one per local address requests arrive on; a few in practice


def _route_path(scope: Scope) -> str:
    """The path below the mount point (Starlette's rule: `root_path` is the mount prefix)."""
    path, root = scope.get("path", "/"), scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        path = path[len(root):]
    return path or "/"


class _AsgiExchange(Exchange):
    """One ASGI request: h11 events out as ASGI messages, `http.disconnect` as the peer leaving."""

    def __init__(self, app: AsgiApp, scope: Scope, send: Send) -> None:
        client = scope.get("client")
        super().__init__(app, tuple(client) if client else None)
        found = app.policy_at(scope.get("server"))
        self.policy_refusal = found if isinstance(found, str) else None  # why this address is not served
        if isinstance(found, Policy):
            self.policy = found
        self.root_path = scope.get("root_path", "")
        self._send = send
        self._outbox: collections.deque[Message] = collections.deque()
        self._idle: asyncio.Future[None] | None = None  # the pump waits on it for something to do
        self._flushed: asyncio.Future[None] | None = None
        self._started = False  # a response head was queued
        self._complete = False  # the response's last body message was queued
        self._ended = False  # the exchange is over: send what is queued, then return

    # -- the hooks ----------------------------------------------------------

    def send(self, *events: Any) -> None:
        if self.gone or self._complete:
            return
        for event in events:
            if isinstance(event, h11.Response):
                self._started = True
                self._outbox.append({"type": "http.response.start", "status": event.status_code,
                                     "headers": list(event.headers)})
            elif isinstance(event, h11.Data):
                self._outbox.append({"type": "http.response.body", "body": event.data, "more_body": True})
            elif isinstance(event, h11.EndOfMessage):
                self._complete = True
                last = self._outbox[-1] if self._outbox else None
                if last is not None and last["type"] == "http.response.body":
                    last["more_body"] = False
                else:
                    self._outbox.append({"type": "http.response.body", "body": b"", "more_body": False})
            # an h11.InformationalResponse (100 Continue) is the ASGI server's to send
        self._wake()

    def close(self) -> None:
        """End the exchange; a stream that was cut short still ends its chunked body cleanly."""
        if self._started and not self._complete and not self.gone:
            self.send(h11.EndOfMessage())
        self._ended = True
        self._wake()

    def _refuse_now(self, rejection: Rejection) -> None:
        if not self._started:
            self._answer(rejection, close=True)
        self.close()
        self.gone = True

    def _next_cycle(self) -> bool:
        self._ended = True
        self._wake()
        return False  # one request per exchange: the ASGI server reads the next one

    def _read_on(self) -> None:
        """Never reached: `_next_cycle` never asks to read on."""

    def _lost(self) -> None:
        """The peer left (or the request's task was cancelled): cancel what it asked for, end the exchange."""
        super()._lost()
        if self._flushed is not None and not self._flushed.done():
            self._flushed.set_result(None)  # a writer waiting to drain goes on (its sends are dropped now)
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        if self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    async def drain(self) -> None:
        """Wait while more than a few messages wait unsent: the ASGI server's `send` holds them back
        for a slow reader, and the writer then waits here (a bounded queue, as on the built-in server)."""
        if len(self._outbox) > MAX_UNSENT and not self.gone:
            if self._flushed is None:
                self._flushed = self.loop.create_future()
            await asyncio.shield(self._flushed)

    # -- running ------------------------------------------------------------

    async def run(self, scope: Scope, receive: Receive) -> None:
        query = scope.get("query_string", b"")
        path = _route_path(scope)
        target = path + ("?" + query.decode("latin-1") if query else "")
        method = scope["method"]
        if self.policy_refusal is not None and self._fixed_answer(method, path) is None:  # probes still answer
            self._method = method
            self._refuse_now(Rejection(421, McpError(INVALID_REQUEST, self.policy_refusal)))
        elif self._on_head(method, target, scope.get("headers", ())) and await self._read_body(receive):
            self._serve()
        await self._pump(receive)

    async def _read_body(self, receive: Receive) -> bool:
        """Feed the body to the exchange. False when the request was refused, was too slow, or the peer left.

        The ASGI server bounds the head but not the body: one total deadline does, as on the
        built-in server. A timer that cancels this task costs a third of what a cancel scope does."""
        task = asyncio.current_task()
        assert task is not None
        late = False

        def too_late() -> None:
            nonlocal late
            late = True
            task.cancel()

        timer = self.loop.call_later(self.endpoint.config.body_timeout, too_late)
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    self._lost()
                    self.close()
                    return False
                body = message.get("body", b"")
                if body and not self._on_body(body):
                    return False
                if not message.get("more_body", False):
                    return True
        except asyncio.CancelledError:
            if not late:
                raise
            if hasattr(task, "uncancel"):  # Python 3.11+: the cancel was ours, and is spent
                task.uncancel()
            self._refuse_now(Rejection(408, McpError(INVALID_REQUEST, "The request took too long to arrive")))
            return False
        finally:
            timer.cancel()

    async def _pump(self, receive: Receive) -> None:
        """Send queued messages in order until the exchange ends, watching for the peer leaving."""
        watcher = self.loop.create_task(self._watch(receive)) if not self._ended else None
        try:
            while True:
                while self._outbox:
                    message = self._outbox.popleft()
                    try:
                        await self._send(message)
                    except OSError:  # the ASGI server's word for a peer that left
                        self._lost()
                        self._outbox.clear()
                if self._flushed is not None:
                    self._flushed.set_result(None)
                    self._flushed = None
                if self._ended:
                    return
                self._idle = self.loop.create_future()
                await self._idle
        finally:
            if watcher is not None:
                watcher.cancel()

    async def _watch(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        if not self._complete:
            self._lost()
            self._wake()


class AsgiApp(Endpoint):
    """An ASGI 3 application for `server` (see the module docstring); build it with `app(server, ...)`."""

    def __init__(self, server: Server, config: HttpConfig) -> None:
        super().__init__(server, config)
        self.requests = 0  # in progress, shown as the connections gauge
        self._policies: dict[tuple[str, int], Policy | str] = {}
        self._life: asyncio.Task[None] | None = None  # holds the server's lifespan
        self._entered: asyncio.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self.metrics = MetricsApp(self)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan_events(receive, send)
            return
        if kind != "http":
            raise RuntimeError(f"mcpcore serves ASGI http (and lifespan) scopes, not {kind!r}")
        self.requests += 1
        exchange = _AsgiExchange(self, scope, send)
        try:
            problem = await self._start_once()
            if problem is not None:
                exchange._method = scope["method"]
                exchange._answer(Rejection(503, McpError(INTERNAL_ERROR, problem), None, (("retry-after", "1"),)))
                exchange._next_cycle()
                await exchange._pump(receive)
            else:
                await exchange.run(scope, receive)
        finally:
            self.requests -= 1
            if not exchange._ended:  # this task was cancelled (a timeout, a forced shutdown): so is the call
                exchange._lost()

    def policy_at(self, address: Any) -> Policy | str:
        """The Host/Origin policy for requests arriving on local `address`, or why none may be served there."""
        host, port = (address[0], address[1]) if address else (self.config.host, self.config.port)
        found = self._policies.get((host, port))
        if found is None:
            refusal = None if address is None else public_bind_refusal(host, self.config.allowed_hosts)
            found = self.policy_for(host, port) if refusal is None else f"Host not served: {refusal}"
            if len(self._policies) < _MAX_POLICIES:
                self._policies[(host, port)] = found
        return found

    # -- the lifespan ---------------------------------------------------------

    async def start(self) -> None:
        """Enter the server's lifespan (once; later calls wait for the first). Raises what it raised."""
        if self._entered is None or (self._entered.done() and self._entered.exception() is not None):
            self._entered = asyncio.get_running_loop().create_future()
            self._stop = asyncio.Event()
            self._life = asyncio.get_running_loop().create_task(self._hold(self._entered, self._stop))
        await asyncio.shield(self._entered)

    async def aclose(self) -> None:
        """Drain (new calls get 503, in-flight ones the grace period), then leave the lifespan."""
        if self._life is not None and self._stop is not None:
            self._stop.set()
            with contextlib.suppress(Exception):
                await self._life

    @contextlib.asynccontextmanager
    async def lifespan(self, _parent: Any = None) -> AsyncIterator[None]:
        """For a parent app's lifespan (`FastAPI(lifespan=mcp.lifespan)`): start with it, drain when it stops."""
        await self.start()
        try:
            yield
        finally:
            await self.aclose()

    async def _start_once(self) -> str | None:
        """Start on the first request; why the server cannot serve, if it cannot."""
        if self._entered is not None and self._entered.done() and self._entered.exception() is None:
            return None
        try:
            await self.start()
        except Exception as error:
            log.error("the server's lifespan failed to start: %s", error)
            return f"The server could not start: {error}"
        return None

    async def _hold(self, entered: asyncio.Future[None], stop: asyncio.Event) -> None:
        try:
            async with self.server.lifespan:
                entered.set_result(None)
                async with anyio.create_task_group() as sweeping:
                    sweeping.start_soon(self._expire_sessions)
                    await stop.wait()
                    await self.drain()
                    sweeping.cancel_scope.cancel()
        except BaseException as error:
            if entered.done():
                raise
            entered.set_exception(error if isinstance(error, Exception) else RuntimeError("cancelled while starting"))

    async def _expire_sessions(self) -> None:
        while True:
            await anyio.sleep(1.0)
            self.sessions.expire()

    async def _lifespan_events(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        try:
            await self.start()
        except Exception as error:
            await send({"type": "lifespan.startup.failed", "message": str(error)})
            return
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        await self.aclose()
        await send({"type": "lifespan.shutdown.complete"})


class MetricsApp:
    """An ASGI app for GET /metrics (Prometheus text) of one `AsgiApp`: `AsgiApp.metrics`.
    Mount it where only your scraper reaches (it is not behind the MCP rules or auth)."""

    def __init__(self, endpoint: AsgiApp) -> None:
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        metrics, method = self.endpoint.server.metrics, scope.get("method")
        if metrics is None:
            status, body, kind = 404, b"metrics are off: Server(metrics=True)\n", b"text/plain"
        elif method not in ("GET", "HEAD"):
            status, body, kind = 405, b"method not allowed\n", b"text/plain"
        else:
            body = metrics.render(self.endpoint.gauges(self.endpoint.requests))
            status, kind = 200, b"text/plain; version=0.0.4; charset=utf-8"
        headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})


def app(server: Server, **options: Any) -> AsgiApp:
    """An ASGI 3 application serving `server`. Options are `HttpConfig` fields, less those the ASGI server owns."""
    owned = sorted(set(options) & set(SERVER_OWNED))
    if owned:
        raise TypeError(f"{', '.join(owned)}: the ASGI server owns the sockets; configure it there")
    known = {f.name for f in fields(HttpConfig)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(f"unknown option(s) {', '.join(unknown)}; the options are HttpConfig fields")
    return AsgiApp(server, HttpConfig(**options))


__all__ = ["AsgiApp", "MetricsApp", "app"]
