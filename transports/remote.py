"""Channels from `mcpcore.testing.Client` to a server outside this process: a subprocess over stdio,
or a URL over Streamable HTTP.

A channel has four methods the client calls: `open`, `close`, `exchange` (send a
request; hand every message that comes before its response to `heard`, sending
back the reply `heard` returns for a server-to-client request; return the
response) and `notify`. The client sends one request at a time, so whatever
arrives meanwhile belongs to that request.

Over HTTP each message is one POST on a connection of its own (driven by h11),
with the headers a conforming client sends: `MCP-Protocol-Version`, `Mcp-Method`,
`Mcp-Name`, and the `Mcp-Param-*` mirrors of a tool's `x-mcp-header` arguments
(learned from `tools/list`); a 2025-era session adds `Mcp-Session-Id`, and a
server-to-client request in a response stream is answered with a POST of its own.
"""

from __future__ import annotations

import base64
import os
import subprocess
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from urllib.parse import urlsplit

import anyio
import h11
import orjson

from mcpcore import tasks
from mcpcore._wire.protocol import NAME_FIELDS
from mcpcore._wire.toolheaders import HeaderParam, header_params

Heard = Callable[[dict[str, Any]], Awaitable["dict[str, Any] | None"]]


class StdioChannel:
    """A server in a subprocess, over its stdin and stdout (one JSON-RPC message per line)."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None, cwd: str | None) -> None:
        self.command, self.env, self.cwd = list(command), env, cwd
        self.process: Any = None
        self._buffer = b""

    async def open(self) -> None:
        env = None if self.env is None else {**os.environ, **self.env}
        self.process = await anyio.open_process(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                stderr=None, env=env, cwd=self.cwd)

    async def close(self) -> None:
        if self.process is None:
            return
        await self.process.stdin.aclose()  # the server's cue to end
        with anyio.move_on_after(5):
            await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()

    async def _write(self, message: dict[str, Any]) -> None:
        await self.process.stdin.send(orjson.dumps(message) + b"\n")

    async def _line(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            try:
                self._buffer += await self.process.stdout.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise AssertionError(f"the server closed its stdout (exit status {self.process.returncode})") from None
        line, self._buffer = self._buffer.split(b"\n", 1)
        return orjson.loads(line)

    async def exchange(self, message: dict[str, Any], heard: Heard, legacy: bool) -> dict[str, Any] | None:
        await self._write(message)
        while True:
            received = await self._line()
            if received.get("id") == message["id"] and "method" not in received:
                return received
            reply = await heard(received)
            if reply is not None:
                await self._write(reply)

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

    def learn(self, tools: Sequence[dict[str, Any]]) -> None:
        for tool in tools:
            try:
                self.tools[tool["name"]] = header_params(tool["name"], tool.get("inputSchema") or {})
            except (ValueError, TypeError):  # a server's bad annotation is the server's to report
                self.tools[tool["name"]] = ()

    async def open(self) -> None:
        pass  # a connection per message

    async def close(self) -> None:
        if self.session_id is not None:  # end the 2025-era session
            async for _ in self._send("DELETE", b"", {}):
                pass

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
        return response

    async def notify(self, message: dict[str, Any]) -> None:
        async for _ in self._send("POST", orjson.dumps(message), self._headers(message)):
            pass

    async def _send(self, method: str, body: bytes, headers: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        """One HTTP request; the JSON-RPC messages of its answer (a JSON body, or each SSE event)."""
        fields = [("host", self.authority), *headers.items(), *self.extra.items()]
        if body:
            fields.append(("content-length", str(len(body))))
        elif method == "DELETE" and self.session_id is not None:
            fields.append(("mcp-session-id", self.session_id))
        connection = h11.Connection(h11.CLIENT)
        stream = await anyio.connect_tcp(self.host, self.port, tls=self.tls)
        async with stream:
            data = connection.send(h11.Request(method=method, target=self.target, headers=fields))
            data += connection.send(h11.Data(data=body)) if body else b""
            await stream.send(data + (connection.send(h11.EndOfMessage()) or b""))

            async def next_event() -> Any:
                while True:
                    event = connection.next_event()
                    if event is not h11.NEED_DATA:
                        return event
                    try:
                        connection.receive_data(await stream.receive())
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        connection.receive_data(b"")

            head = await next_event()
            while isinstance(head, h11.InformationalResponse):
                head = await next_event()
            assert isinstance(head, h11.Response), f"no HTTP response to {method}: {head!r}"
            answer = {k.decode().lower(): v.decode() for k, v in head.headers}
            if "mcp-session-id" in answer:
                self.session_id = answer["mcp-session-id"]
            streaming = answer.get("content-type", "").startswith("text/event-stream")
            buffer = b""
            while True:
                event = await next_event()
                if isinstance(event, h11.Data):
                    buffer += event.data
                    if streaming:
                        while b"\n\n" in buffer.replace(b"\r\n", b"\n"):
                            buffer = buffer.replace(b"\r\n", b"\n")
                            block, buffer = buffer.split(b"\n\n", 1)
                            data = b"\n".join(line[5:].lstrip(b" ") for line in block.split(b"\n") if line.startswith(b"data:"))
                            if data:
                                yield orjson.loads(data)
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    break
            if not streaming and buffer and answer.get("content-type", "").startswith("application/json"):
                yield orjson.loads(buffer)
            elif not streaming and head.status_code >= 400:
                raise AssertionError(f"{method} got HTTP {head.status_code} without a JSON-RPC answer: {buffer[:200]!r}")
