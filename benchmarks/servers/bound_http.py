"""The HTTP bound: the ceiling plus every check a correct 2026-07-28 Streamable HTTP server makes, fused by hand.

Where the ceiling (`ceiling_http.py`) answers every request with a fixed body, this one makes
the checks no correct server can skip on a `tools/call`, each in the cheapest form Python
allows, with everything a tool's registration can decide decided there: the path and method,
the Host and Origin allow-lists (DNS rebinding), Content-Type and Accept, a declared and an
actual bound on the body, the JSON-RPC shape, the MCP headers against the body
(`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, none repeated), the `_meta` every
2026-07-28 request carries, the tool looked up and its arguments held to its schema, the call
run in a task of its own (the connection goes on reading, so a peer that leaves cancels it)
under a guard that turns a failure into an error answer, and its answer shaped as text
content with the server's result `_meta`, its status and headers as HTTP wants them, framed
in one write on a kept-alive connection with h11's state machine told (as mcpcore does;
h11's own `send` checks and rebuilds every head, which costs more than every MCP check here). It is
what any design of mcpcore's HTTP request path could at best reach on h11: what mcpcore
spends above it is the price of its layers, not of MCP. A measuring instrument, not a server to use.

    python bound_http.py PORT
"""

import asyncio
import sys
from http import HTTPStatus

import h11
import orjson
from ceiling_http import Ceiling, main
from floor_stdio import META, TOOLS

PATH = b"/mcp"
LIMIT = 4 * 1024 * 1024
HOSTS = frozenset({b"127.0.0.1:8000", b"localhost:8000", b"[::1]:8000", b"127.0.0.1", b"localhost", b"[::1]"})
ORIGINS = frozenset({b"http://127.0.0.1:8000", b"http://localhost:8000"})
VERSIONS = frozenset({"2026-07-28"})
LEVELS = frozenset({"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"})
SCHEMAS = {"echo": (("text", str),)}  # each tool's parameters: name and exact JSON type, all required
MCP_HEADERS = frozenset({b"mcp-protocol-version", b"mcp-method", b"mcp-name"})
JSON = (b"content-type", b"application/json")
REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}


class Bound(Ceiling):
    def connection_made(self, transport):
        super().connection_made(transport)
        self.headers: dict = {}
        self.body = bytearray()
        self.refused: tuple | None = None  # (status, code, message): answered once the body is read
        self.call: asyncio.Task | None = None

    def data_received(self, data):
        self.conn.receive_data(data)
        if self.call is None:
            self.advance()

    def connection_lost(self, exc):
        if self.call is not None:
            self.call.cancel()

    def advance(self):
        conn = self.conn
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            kind = type(event)
            if kind is h11.Request:
                self.head(event)
            elif kind is h11.Data:
                self.body += event.data
                if len(self.body) > LIMIT:
                    return self.fail(413, None, -32600, "body too large", close=True)
            elif kind is h11.EndOfMessage:
                if self.refused is not None:
                    self.fail(self.refused[0], None, -32600, self.refused[1])
                    continue
                body, self.body = self.body, bytearray()
                if not self.serve(body):
                    return
            elif kind is h11.ConnectionClosed:
                self.transport.close()
                return

    def head(self, request):
        """The checks that need no body; a refusal is answered once the body is read."""
        headers = {}
        for name, value in request.headers:  # names lower-cased by h11
            if name in headers and name in MCP_HEADERS:
                self.refused = (400, "repeated MCP header")
                return
            headers[name] = value
        self.headers, self.refused = headers, None
        if request.method != b"POST" or request.target != PATH:
            self.refused = (405 if request.target == PATH else 404, "not the MCP endpoint")
        elif headers.get(b"host") not in HOSTS:
            self.refused = (421, "host not served")
        elif b"origin" in headers and headers[b"origin"] not in ORIGINS:
            self.refused = (403, "origin not allowed")
        elif headers.get(b"content-type") != b"application/json" \
                and headers.get(b"content-type", b"").split(b";")[0].strip().lower() != b"application/json":
            self.refused = (415, "not JSON")
        elif headers.get(b"accept") != b"application/json, text/event-stream" \
                and not (b"application/json" in headers.get(b"accept", b"") and b"text/event-stream" in headers[b"accept"]):
            self.refused = (406, "must accept JSON and SSE")  # the form clients send, else a cruder look
        elif int(headers.get(b"content-length", b"0")) > LIMIT:
            self.refused = (413, "body too large")

    def fail(self, status, request_id, code, text, close=False):
        error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}
        self.write(status, orjson.dumps(error))
        if close:
            self.transport.close()

    def write(self, status, body):
        conn = self.conn
        if conn._cstate.keep_alive:  # framed here in one write, h11's state machine told (as mcpcore does)
            self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                                 % (status, REASONS.get(status, b""), len(body), body))
            conn._cstate.process_event(h11.SERVER, h11.Response)
            conn._cstate.process_event(h11.SERVER, h11.EndOfMessage)
        else:
            self.transport.write(
                conn.send(h11.Response(status_code=status, headers=[JSON, (b"content-length", b"%d" % len(body))]))
                + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))
        conn.start_next_cycle()

    def serve(self, body):
        """A whole request: checked, then its call started. True to read on at once."""
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            self.fail(400, None, -32700, "Parse error")
            return True
        if type(message) is not dict or message.get("jsonrpc") != "2.0":
            self.fail(400, None, -32600, "Invalid request")
            return True
        request_id, method, params = message.get("id"), message.get("method"), message.get("params")
        if type(request_id) not in (int, str) or type(method) is not str:
            self.fail(400, None, -32600, "Invalid request")
            return True
        headers = self.headers
        if type(params) is not dict:
            self.fail(400, request_id, -32602, "params must be an object")
            return True
        meta = params.get("_meta")
        if type(meta) is not dict or meta.get("io.modelcontextprotocol/protocolVersion") not in VERSIONS \
                or type(meta.get("io.modelcontextprotocol/clientCapabilities")) is not dict:
            self.fail(400, request_id, -32602, "bad _meta")
            return True
        level = meta.get("io.modelcontextprotocol/logLevel")
        if level is not None and level not in LEVELS:
            self.fail(400, request_id, -32602, "bad log level")
            return True
        if headers.get(b"mcp-protocol-version", b"").decode() != meta["io.modelcontextprotocol/protocolVersion"] \
                or headers.get(b"mcp-method", b"").decode() != method:
            self.fail(400, request_id, -32020, "header mismatch")
            return True
        if method != "tools/call":
            self.fail(400, request_id, -32601, "method not found")
            return True
        name, arguments = params.get("name"), params.get("arguments")
        if type(name) is not str or headers.get(b"mcp-name", b"").decode() != name:
            self.fail(400, request_id, -32020, "header mismatch")
            return True
        tool, schema = TOOLS.get(name), SCHEMAS.get(name)
        if tool is None:
            self.fail(400, request_id, -32602, "unknown tool")
            return True
        if type(arguments) is not dict or len(arguments) != len(schema) \
                or any(type(arguments.get(field)) is not kind for field, kind in schema):
            self.fail(400, request_id, -32602, "arguments do not match the schema")
            return True
        self.call = asyncio.get_running_loop().create_task(self.answer(request_id, tool, arguments))
        return False

    async def answer(self, request_id, tool, arguments):
        try:
            try:
                text = await tool(**arguments)
                result = {"content": [{"type": "text", "text": text}], "resultType": "complete", "_meta": META}
            except Exception as error:
                result = {"content": [{"type": "text", "text": str(error)}], "isError": True,
                          "resultType": "complete", "_meta": META}
            self.write(200, orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}))
        except Exception:
            self.fail(500, request_id, -32603, "Internal error")
        finally:
            self.call = None
        self.advance()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), Bound))
