"""Channels from `mcpcore.client.Client` to a server outside this process: a subprocess over stdio,
a URL over Streamable HTTP, or a URL over the deprecated HTTP+SSE transport (2024-11-05).

A channel has the methods the client calls: `open(answer, unowned)`, `close`,
`exchange` (send a request, hand every message that comes for it to `heard`,
return its response) and `notify`. Many exchanges may run at once.

Over stdio and HTTP+SSE every message of the server arrives on one stream, so one
reader task routes them (`Multiplexer`): a response to the request waiting for
its id, a progress notification to the request whose `progressToken` it names,
any other notification to the one request in flight (with none or several in
flight no request can own it: it goes to `unowned`), and a server-to-client
request (a 2025-era session's elicitation, sampling, roots or ping) to `answer`
in a task of its own, whose reply is sent back, so it blocks nothing else. A
cancelled exchange sends `notifications/cancelled`; a server that goes away fails
every request waiting with a `ConnectionError` saying so.

Over Streamable HTTP each message is one POST (driven by h11) on a connection
no other request is using: an idle keep-alive one (at most `IDLE_CONNECTIONS`
are kept; one the server closed meanwhile is replaced) or a new one, so
exchanges run side by side, and a cancelled one closes its connection (the
server's cue to cancel). The POST carries the headers a conforming client
sends: `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, and the `Mcp-Param-*`
mirrors of a tool's `x-mcp-header` arguments (learned from `tools/list`); a
2025-era session adds `Mcp-Session-Id`, and a server-to-client request in a
response stream is answered with a POST of its own. A 404 to a request that named
a session is `SessionExpired` (the client opens a new session and retries once).
A server that cannot be reached, or whose connection breaks before an answer's
head, is a `ConnectionError` that also sets `gone`: no stream's end would say so
(a gateway reconnects once it is set). A connection that breaks in the middle of
an answer fails that request only: an intermediary's idle timeout on one long
stream says nothing of the server, and a server really gone is found by the
next request.

`transport_at(url)` is the specification's backwards-compatibility probe: a URL
that answers a POST with 404 or 405 serves the HTTP+SSE transport, not
Streamable HTTP.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import subprocess
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from urllib.parse import urljoin, urlsplit

import anyio
import anyio.abc
import h11
import orjson

from mcpcore import tasks
from mcpcore._runtime.subscriptions import SUBSCRIPTION_ID
from mcpcore._wire.jsonrpc import LATEST_VERSION, META_CAPABILITIES, META_VERSION, SessionExpired
from mcpcore._wire.protocol import LONG_LIVED_METHODS, NAME_FIELDS
from mcpcore._wire.toolheaders import HeaderParam, header_params

log = logging.getLogger("mcpcore.client")

Heard = Callable[[dict[str, Any]], Awaitable["dict[str, Any] | None"]]  # a message for one request → a reply, if due
Answer = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]  # a server-to-client request → the response to send
Unowned = Callable[[dict[str, Any]], Awaitable[None]]  # a notification no request in flight owns
Send = Callable[[dict[str, Any]], Awaitable[None]]
IDLE_CONNECTIONS = 16  # keep-alive connections an HTTP channel keeps for its next requests
NOT_STREAMABLE_HTTP = (404, 405)  # answers to a POST that mean the URL serves HTTP+SSE (the spec's examples)


class _Waiting:
    """One request in flight on a shared stream: what it hears, and its response once it comes."""

    def __init__(self, request_id: Any, token: Any, heard: Heard, long_lived: bool = False) -> None:
        self.id, self.token, self.heard = request_id, token, heard
        self.long_lived = long_lived  # a subscriptions/listen: it owns only the notifications tagged with its id
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()  # an Event's work, without its wrapper
        self.response: dict[str, Any] | None = None
        self.error: BaseException | None = None

    def finish(self, response: dict[str, Any] | None = None, error: BaseException | None = None) -> None:
        if not self.done.done():
            self.response, self.error = response, error
            self.done.set_result(None)


class Multiplexer:
    """Many requests over one stream of server messages (see the module docstring)."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.waiting: dict[Any, _Waiting] = {}
        self.broken: ConnectionError | None = None  # set once the server is gone: every later request fails so
        self.answer: Answer | None = None
        self.unowned: Unowned | None = None
        self.tasks: anyio.abc.TaskGroup | None = None
        self.gone: anyio.Event | None = None  # set once the server is gone (made in `start`, inside the event loop)

    async def start(self, answer: Answer | None, unowned: Unowned | None) -> None:
        """Open the task group the reader and the answers to server requests run in (left in `stop`)."""
        self.answer, self.unowned = answer, unowned
        self.gone = anyio.Event()
        self.tasks = anyio.create_task_group()
        await self.tasks.__aenter__()

    async def stop(self) -> None:
        if self.tasks is not None:
            self.tasks.cancel_scope.cancel()
            await self.tasks.__aexit__(None, None, None)
            self.tasks = None
        self.fail(ConnectionError("the client was closed"))

    async def exchange(self, message: dict[str, Any], heard: Heard) -> dict[str, Any]:
        """Send a request and wait for its response; a cancelled wait tells the server."""
        if self.broken is not None:
            raise self.broken
        token = ((message.get("params") or {}).get("_meta") or {}).get("progressToken")
        long_lived = message.get("method") in LONG_LIVED_METHODS
        waiting = self.waiting[message["id"]] = _Waiting(message["id"], token, heard, long_lived)
        try:
            await self.send(message)
            await waiting.done
        except anyio.get_cancelled_exc_class():
            if self.broken is None and self.tasks is not None:
                # Sent from the channel's own tasks: a caller cancelled natively (asyncio's `task.cancel()`, as
                # a server cancels the call that made this request) would cancel it even in a shielded scope.
                self.tasks.start_soon(self._cancel, message["id"])
            raise
        finally:
            self.waiting.pop(message["id"], None)
        if waiting.error is not None:
            raise waiting.error
        assert waiting.response is not None
        return waiting.response

    async def route_bytes(self, data: bytes | str, where: str) -> None:
        """One message as the server framed it (a line, an event's data), parsed and routed; not JSON is logged."""
        try:
            received = orjson.loads(data)
        except orjson.JSONDecodeError:
            log.warning("the server sent %s that is not JSON: %r", where, data[:200])
            return
        if isinstance(received, dict):
            await self.route(received)

    async def _cancel(self, request_id: Any) -> None:
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": request_id, "reason": "cancelled by the client"}}
        with anyio.move_on_after(5):
            try:
                await self.send(cancel)
            except ConnectionError:
                pass  # the server is gone: nothing left to cancel

    async def route(self, received: dict[str, Any]) -> None:
        """One message of the server, to whom it belongs."""
        if "method" in received and "id" in received:
            assert self.tasks is not None
            self.tasks.start_soon(self._reply, received)
        elif "method" in received:
            owner = self._owner(received)
            if owner is None:
                if self.unowned is not None:
                    try:
                        await self.unowned(received)
                    except Exception:
                        log.exception("a listener failed on %s", received.get("method"))
                return
            try:
                await owner.heard(received)
            except Exception as error:  # the request's own listener failed: the request fails with it
                owner.finish(error=error)
        else:
            waiting = self.waiting.get(received.get("id"))
            if waiting is None and received.get("id") is None and len(self.waiting) == 1:
                waiting = next(iter(self.waiting.values()))  # an error the server could not tie to an id
            if waiting is not None:
                waiting.finish(received)  # else: the late answer to a request cancelled meanwhile

    def _owner(self, notification: dict[str, Any]) -> _Waiting | None:
        params = notification.get("params") or {}
        if notification["method"] == "notifications/progress":
            return next((w for w in self.waiting.values() if w.token is not None and w.token == params.get("progressToken")),
                        None)
        meta = params.get("_meta")
        subscription = meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        if subscription is not None and subscription in self.waiting:
            return self.waiting[subscription]  # a listen's notification names it
        calls = [waiting for waiting in self.waiting.values() if not waiting.long_lived]
        return calls[0] if len(calls) == 1 else None

    async def _reply(self, asked: dict[str, Any]) -> None:
        if self.answer is None:
            reply = {"jsonrpc": "2.0", "id": asked["id"],
                     "error": {"code": -32601, "message": f"this client answers no {asked['method']}"}}
        else:
            reply = await self.answer(asked)
        try:
            await self.send(reply)
        except ConnectionError:
            pass  # the server is gone; the requests waiting fail with it

    def fail(self, error: ConnectionError) -> None:
        """The server is gone: every request waiting, and every later one, fails with `error`."""
        if self.broken is None:
            self.broken = error
        if self.gone is not None:
            self.gone.set()
        for waiting in list(self.waiting.values()):
            waiting.finish(error=error)


class _ExitHeard(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's protocol for a subprocess, saying when it exits: `Process.wait` also waits for its pipes to
    close, which a child of the server holding its stdout would keep open."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=2 ** 16, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


class StdioChannel:
    """A server in a subprocess, over its stdin and stdout (one JSON-RPC message per line)."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None, cwd: str | None) -> None:
        self.command, self.env, self.cwd = list(command), env, cwd
        self.process: asyncio.subprocess.Process | None = None  # asyncio's own: anyio's streams add a loop turn per write
        self._exited = asyncio.Event()  # its protocol's, made in `open`
        self._outgoing: list[bytes] | None = None  # lines gathered for the writer task; None: the next goes straight out
        self._queued: anyio.Event | None = None  # set by a straight write: the writer task's cue (made in `open`)
        self._mux = Multiplexer(self._write)

    async def open(self, answer: Answer | None = None, unowned: Unowned | None = None) -> None:
        env = None if self.env is None else {**os.environ, **self.env}
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(lambda: _ExitHeard(loop), *self.command, stdin=subprocess.PIPE,
                                                         stdout=subprocess.PIPE, stderr=None, env=env, cwd=self.cwd)
        self.process, self._exited = asyncio.subprocess.Process(transport, protocol, loop), protocol.exited
        self._queued = anyio.Event()
        await self._mux.start(answer, unowned)
        assert self._mux.tasks is not None
        self._mux.tasks.start_soon(self._read)
        self._mux.tasks.start_soon(self._watch)
        self._mux.tasks.start_soon(self._send_queued)

    async def close(self) -> None:
        if self.process is None:
            return
        stdin = self.process.stdin
        assert stdin is not None
        with contextlib.suppress(OSError, RuntimeError):  # a pipe the server closed (RuntimeError: uvloop's)
            if self._outgoing:  # gathered, not yet taken by the writer task: they still go, in order
                data = b"".join(self._outgoing)
                self._outgoing.clear()
                stdin.write(data)
                await stdin.drain()
            stdin.close()  # the server's cue to end
            await stdin.wait_closed()
        with anyio.move_on_after(5):
            await self._exited.wait()
        if self.process.returncode is None:
            self.process.kill()
            await self._exited.wait()
        await self._mux.stop()

    async def _write(self, message: dict[str, Any]) -> None:
        """One message as one line. The first of a turn of the event loop goes straight out; those after it in the
        same turn are gathered and sent together by the writer task, so that many calls at once cost one write
        and one wake-up of the server (whose answers then come together too), while a lone call waits for nothing.
        Lines go out whole and in order: each write hands all of its bytes to the pipe's transport at once."""
        if self._mux.broken is not None:
            raise self._mux.broken
        line = orjson.dumps(message) + b"\n"
        if self._outgoing is not None:
            if not self._outgoing:
                assert self._queued is not None
                self._queued.set()  # the first line gathered wakes the writer task
            self._outgoing.append(line)
            return
        self._outgoing = []
        asyncio.get_running_loop().call_soon(self._end_turn)
        await self._send(line)

    def _end_turn(self) -> None:
        """The turn of a straight write is over: with nothing gathered, the next write goes straight out (a
        lone call wakes no task); with lines gathered, the writer task takes them and ends the gathering."""
        if not self._outgoing:
            self._outgoing = None

    async def _send_queued(self) -> None:
        """The writer task: what was gathered after a straight write goes out in one write."""
        assert self._queued is not None
        while True:
            await self._queued.wait()
            self._queued = anyio.Event()
            gathered, self._outgoing = self._outgoing, None
            if gathered:
                try:
                    await self._send(b"".join(gathered))
                except ConnectionError:
                    return  # every request in flight failed with it

    async def _send(self, data: bytes) -> None:
        """A stdin that cannot be written fails every request in flight: nothing more can reach the server."""
        assert self.process is not None and self.process.stdin is not None
        try:
            if self.process.stdin.is_closing():
                raise BrokenPipeError
            self.process.stdin.write(data)
            await self.process.stdin.drain()
        except (OSError, RuntimeError):  # a pipe the server closed (RuntimeError: uvloop's)
            self._mux.fail(ConnectionError("the server's stdin is closed: every request in flight failed"))
            raise self._mux.broken from None

    async def _watch(self) -> None:
        """A server that exits fails the requests in flight, even while a child of its own keeps its stdout
        open (so that no end of stream comes): the reader says so first when the end comes with the exit."""
        await self._exited.wait()
        assert self.process is not None and self._mux.gone is not None
        status = self.process.returncode
        with anyio.move_on_after(1):
            await self._mux.gone.wait()
        self._mux.fail(ConnectionError(f"the server exited (exit status {status}): every request in flight failed"))

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        buffer = b""
        while True:
            try:
                chunk = await self.process.stdout.read(65536)
            except OSError:
                break
            if not chunk:
                break
            buffer += chunk
            if b"\n" in chunk:
                *lines, buffer = buffer.split(b"\n")  # one split per chunk, however many lines it ends
                for line in lines:
                    if line.strip():
                        await self._mux.route_bytes(line, "a line")
        with anyio.move_on_after(1):
            await self._exited.wait()
        status = self.process.returncode
        self._mux.fail(ConnectionError(f"the server closed its stdout ({'still running' if status is None else f'exit status {status}'}): "
                                       f"every request in flight failed"))

    @property
    def gone(self) -> anyio.Event | None:
        """Set once the server is gone (`Client.wait_gone`)."""
        return self._mux.gone

    async def exchange(self, message: dict[str, Any], heard: Heard, legacy: bool) -> dict[str, Any] | None:
        return await self._mux.exchange(message, heard)

    async def notify(self, message: dict[str, Any]) -> None:
        await self._write(message)


def header_value(value: Any) -> str:
    """A value as an MCP header carries it: visible ASCII as is, anything else as `=?base64?...?=`."""
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    if text.isascii() and text.isprintable() and text == text.strip():
        return text
    return f"=?base64?{base64.b64encode(text.encode()).decode()}?="


class HttpChannel:
    """A server at a Streamable HTTP URL (see the module docstring)."""

    wants_tools = True  # the client tells it each tool's input schema (for the Mcp-Param-* headers)

    def __init__(self, url: str, headers: Mapping[str, str] | None, version: str,
                 name_fields: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"an MCP endpoint URL is http:// or https://, not {url!r}")
        self.tls = parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port or (443 if self.tls else 80)
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.authority = parts.netloc
        self.extra = dict(headers or {})
        self.version = version
        # method → the params field Mcp-Name mirrors: the core's and the Tasks extension's, then the caller's
        self.name_fields = {**tasks.NAME_FIELDS, **NAME_FIELDS, **(name_fields or {})}
        self.session_id: str | None = None
        self.tools: dict[str, tuple[HeaderParam, ...]] = {}
        self._idle: list[tuple[Any, h11.Connection]] = []  # keep-alive connections no request uses now
        self._gone: anyio.Event | None = None  # made in `open`, inside the event loop

    def learn(self, tools: Sequence[dict[str, Any]]) -> None:
        for tool in tools:
            try:
                self.tools[tool["name"]] = header_params(tool["name"], tool.get("inputSchema") or {})
            except (ValueError, TypeError):  # a server's bad annotation is the server's to report
                self.tools[tool["name"]] = ()

    async def open(self, answer: Answer | None = None, unowned: Unowned | None = None) -> None:
        # A connection per message; a server request comes in the response stream of the request it serves.
        self._gone = anyio.Event()

    @property
    def gone(self) -> anyio.Event | None:
        """Set once a request could not reach the server, or its connection broke before an answer's head."""
        return self._gone

    def _lost(self, error: str) -> ConnectionError:
        """The server is out of reach: `gone` is set, and the error to raise says why."""
        if self._gone is not None:
            self._gone.set()
        return ConnectionError(error)

    async def close(self) -> None:
        try:
            if self.session_id is not None:  # end the 2025-era session
                async for _ in self._send("DELETE", b"", {}):
                    pass
        finally:
            while self._idle:
                await self._idle.pop()[0].aclose()

    def _headers(self, message: dict[str, Any]) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if message.get("method") != "initialize" and "result" not in message and "error" not in message:
            headers["mcp-protocol-version"] = self.version
        method = message.get("method")
        if method is not None and self.session_id is None:  # the 2026 wire mirrors the body in headers
            headers["mcp-method"] = method
            params = message.get("params") or {}
            name = params.get(self.name_fields.get(method, ""))
            if isinstance(name, str):
                headers["mcp-name"] = header_value(name)
            if method == "tools/call":
                for param in self.tools.get(params.get("name"), ()):
                    value = param.value_in(params.get("arguments"))
                    if value is not None:
                        headers[f"mcp-param-{param.header.lower()}"] = header_value(value)
        return headers

    async def exchange(self, message: dict[str, Any], heard: Heard, legacy: bool) -> dict[str, Any] | None:
        headers = self._headers(message)
        if legacy and message["method"] == "initialize":
            headers.pop("mcp-protocol-version", None)
        response = None
        async for received in self._send("POST", orjson.dumps(message), headers):
            if "method" not in received and (received.get("id") == message["id"] or "id" not in received):
                response = received  # the stream may still close after it; read on to its end
                continue
            reply = await heard(received)
            if reply is not None:
                async for _ in self._send("POST", orjson.dumps(reply), self._headers(reply)):
                    pass
        if response is None:
            raise ConnectionError(f"{self.authority} ended its answer to {message['method']} without a response")
        return response

    async def notify(self, message: dict[str, Any]) -> None:
        async for _ in self._send("POST", orjson.dumps(message), self._headers(message)):
            pass

    async def _send(self, method: str, body: bytes, headers: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        """One HTTP request; the JSON-RPC messages of its answer (a JSON body, or each SSE event)."""
        async for _, data in self._events(method, self.target, body, headers):
            yield orjson.loads(data)

    async def _events(self, method: str, target: str, body: bytes,
                      headers: dict[str, str]) -> AsyncIterator[tuple[str, bytes]]:
        """One HTTP request: each SSE event of its answer as (event, data), or its JSON body as ("json",
        body). An answer of 400 or more with neither is a `ConnectionError`. The connection goes back to the
        idle ones (at most `IDLE_CONNECTIONS`) when its answer was read to the end and both sides may go on;
        a request cancelled or left half-read closes it."""
        stream, connection, head = await self._start(self._request(method, target, body, headers), body)
        kept = False
        try:
            if head.status_code == 404 and method == "POST" and "mcp-session-id" in headers:
                raise SessionExpired(headers["mcp-session-id"])
            answer = {k.decode().lower(): v.decode() for k, v in head.headers}
            if "mcp-session-id" in answer:
                self.session_id = answer["mcp-session-id"]
            streaming = answer.get("content-type", "").startswith("text/event-stream")
            buffer = b""
            while True:
                try:
                    event = await _next_event(stream, connection)
                except (h11.RemoteProtocolError, anyio.BrokenResourceError, OSError) as error:
                    raise ConnectionError(f"the connection to {self.authority} broke during the answer to {method}: "
                                          f"{error}") from None
                if isinstance(event, h11.Data):
                    buffer += event.data
                    if streaming:
                        buffer = buffer.replace(b"\r\n", b"\n")
                        while b"\n\n" in buffer:
                            block, buffer = buffer.split(b"\n\n", 1)
                            lines = block.split(b"\n")
                            name = next((line[6:].strip().decode() for line in lines if line.startswith(b"event:")),
                                        "message")
                            data = b"\n".join(line[5:].lstrip(b" ") for line in lines if line.startswith(b"data:"))
                            if data:
                                yield name, data
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    break
            if connection.our_state is h11.DONE and connection.their_state is h11.DONE \
                    and len(self._idle) < IDLE_CONNECTIONS:
                connection.start_next_cycle()
                self._idle.append((stream, connection))
                kept = True
            if not streaming and buffer and answer.get("content-type", "").startswith("application/json"):
                yield "json", buffer
            elif not streaming and head.status_code >= 400:
                raise ConnectionError(f"{method} got HTTP {head.status_code} without a JSON-RPC answer: {buffer[:200]!r}")
        finally:
            if not kept:
                with anyio.CancelScope(shield=True):
                    await stream.aclose()

    def _request(self, method: str, target: str, body: bytes, headers: dict[str, str]) -> h11.Request:
        fields = [("host", self.authority), *headers.items(), *self.extra.items()]
        if body:
            fields.append(("content-length", str(len(body))))
        elif method == "DELETE" and self.session_id is not None:
            fields.append(("mcp-session-id", self.session_id))
        return h11.Request(method=method, target=target, headers=fields)

    async def status_of(self, message: dict[str, Any]) -> int:
        """The HTTP status a POST of `message` is answered with (the answer itself is not read)."""
        body = orjson.dumps(message)
        stream, _, head = await self._start(self._request("POST", self.target, body, self._headers(message)), body)
        with anyio.CancelScope(shield=True):
            await stream.aclose()
        return head.status_code

    async def _start(self, request: h11.Request, body: bytes) -> tuple[Any, h11.Connection, h11.Response]:
        """Send `request` on an idle connection, or a new one, and read its answer's head. An idle connection the
        server closed meanwhile (nothing of an answer came) is dropped and the request sent on a new one."""
        while True:
            reused = bool(self._idle)
            if reused:
                stream, connection = self._idle.pop()
            else:
                try:
                    stream = await anyio.connect_tcp(self.host, self.port, tls=self.tls)
                except OSError as error:
                    raise self._lost(f"cannot reach {self.authority}: {error}") from None
                connection = h11.Connection(h11.CLIENT)
            try:
                data = connection.send(request)
                data += connection.send(h11.Data(data=body)) if body else b""
                await stream.send(data + (connection.send(h11.EndOfMessage()) or b""))
                head = await _next_event(stream, connection)
                while isinstance(head, h11.InformationalResponse):
                    head = await _next_event(stream, connection)
            except BaseException as error:
                with anyio.CancelScope(shield=True):
                    await stream.aclose()
                if reused and isinstance(error, (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError,
                                                 h11.RemoteProtocolError)):
                    continue
                if isinstance(error, h11.RemoteProtocolError):
                    raise ConnectionError(f"{self.authority} broke HTTP: {error}") from None
                if isinstance(error, (anyio.BrokenResourceError, anyio.EndOfStream, OSError)):
                    raise self._lost(f"the connection to {self.authority} broke before an answer: {error}") from None
                raise
            if isinstance(head, h11.Response):
                return stream, connection, head
            with anyio.CancelScope(shield=True):
                await stream.aclose()
            if not reused:
                raise ConnectionError(f"no HTTP response to {request.method.decode()} from {self.authority}: {head!r}")


async def _next_event(stream: Any, connection: h11.Connection) -> Any:
    """The next h11 event of a connection, reading as needed (the peer's close is an event too)."""
    while True:
        event = connection.next_event()
        if event is not h11.NEED_DATA:
            return event
        try:
            connection.receive_data(await stream.receive())
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            connection.receive_data(b"")


def _refusal(body: bytes) -> str:
    """What a JSON answer in place of a stream says: its JSON-RPC error's message, or the start of the body."""
    with contextlib.suppress(orjson.JSONDecodeError, KeyError, TypeError):
        return str(orjson.loads(body)["error"]["message"])
    return repr(body[:200])


class SseChannel(HttpChannel):
    """A server at an HTTP+SSE URL (2024-11-05: `GET /sse`, whose `endpoint` event names where to POST)."""

    wants_tools = False  # a 2025-era session: no Mcp-Param-* headers

    def __init__(self, url: str, headers: Mapping[str, str] | None, version: str) -> None:
        super().__init__(url, headers, version)
        self.url = url
        self.endpoint = ""  # the message URL's path and query, from the stream's first event
        self._mux = Multiplexer(self._post)

    async def open(self, answer: Answer | None = None, unowned: Unowned | None = None) -> None:
        await self._mux.start(answer, unowned)
        assert self._mux.tasks is not None
        opened = anyio.Event()
        self._mux.tasks.start_soon(self._read, opened)
        try:
            with anyio.fail_after(30):
                await opened.wait()
            if self._mux.broken is not None:
                raise self._mux.broken
        except BaseException:
            await self._mux.stop()
            raise

    async def close(self) -> None:
        await self._mux.stop()  # closing the stream ends the session

    async def _read(self, opened: anyio.Event) -> None:
        error = ConnectionError(f"the server ended the HTTP+SSE stream of {self.url}")
        try:
            async for name, data in self._events("GET", self.target, b"", {"accept": "text/event-stream"}):
                if name == "endpoint":
                    parts = urlsplit(urljoin(self.url, data.decode().strip()))
                    if (parts.hostname, parts.port or (443 if self.tls else 80)) != (self.host, self.port):
                        error = ConnectionError(f"the server named an endpoint on another host: {data[:200]!r}")
                        break
                    self.endpoint = parts.path + (f"?{parts.query}" if parts.query else "")
                    opened.set()
                elif name == "message" and self.endpoint:
                    await self._mux.route_bytes(data, "an event")
                elif name == "json":  # a refusal (401, 404, ...) with a JSON-RPC error instead of a stream
                    error = ConnectionError(f"the server refused the HTTP+SSE stream: {_refusal(data)}")
                    break
        except ConnectionError as refused:
            error = refused
        if not self.endpoint:
            error = ConnectionError(f"{self.url} opened no HTTP+SSE session (no endpoint event): {error}")
        self._mux.fail(error)
        opened.set()

    async def _post(self, message: dict[str, Any]) -> None:
        async for _, data in self._events("POST", self.endpoint, orjson.dumps(message), {"content-type": "application/json"}):
            await self._mux.route(orjson.loads(data))  # a refusal (400 with a JSON-RPC error); else 202, and the rest comes on the stream

    @property
    def gone(self) -> anyio.Event | None:
        """Set once the server is gone (`Client.wait_gone`)."""
        return self._mux.gone

    async def exchange(self, message: dict[str, Any], heard: Heard, legacy: bool) -> dict[str, Any] | None:
        return await self._mux.exchange(message, heard)

    async def notify(self, message: dict[str, Any]) -> None:
        await self._post(message)


async def transport_at(url: str, headers: Mapping[str, str] | None = None) -> str:
    """"sse" when `url` answers a Streamable HTTP POST with 404 or 405, as a server of the HTTP+SSE transport does
    (the specification's backwards-compatibility rule: a GET there opens its stream); else "http". A server out of
    reach raises `ConnectionError`."""
    channel = HttpChannel(url, headers, LATEST_VERSION)
    discover = {"jsonrpc": "2.0", "id": 0, "method": "server/discover",
                "params": {"_meta": {META_VERSION: LATEST_VERSION, META_CAPABILITIES: {}}}}
    return "sse" if await channel.status_of(discover) in NOT_STREAMABLE_HTTP else "http"
