"""The stdio bound: the floor plus every per-call check a correct server makes, fused by hand.

Where the floor (`floor_stdio.py`) trusts its input, this one makes the checks no correct
stdio MCP server can skip on a `tools/call`, each in the cheapest form Python allows, in one
function with everything a tool's registration can decide decided there: a bound on the line,
a parse error answered, the JSON-RPC shape of the request, the `_meta` every 2026-07-28
request carries (protocol version, client capabilities, log level), the tool looked up, its
arguments held to its schema, the call registered for cancellation and run under a guard that
turns a failure into an error answer, its answer shaped as text content with the server's
result `_meta`. It is what any design of mcpcore's request path could at best reach: what
mcpcore spends above it is the price of its layers (routing, the `Call`, the `Context`,
the middleware and metrics seams), not of MCP. A measuring instrument, not a server to use.
"""

import asyncio

import orjson
from ceiling_stdio import main
from floor_stdio import META, TOOLS, Floor

LIMIT = 4 * 1024 * 1024
VERSIONS = frozenset({"2026-07-28"})
LEVELS = frozenset({"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"})
SCHEMAS = {"echo": (("text", str),)}  # each tool's parameters: name and exact JSON type, all required


class Bound(Floor):
    def __init__(self, output: asyncio.WriteTransport, done: asyncio.Future) -> None:
        super().__init__(output, done)
        self.running: dict = {}  # request id -> its task, for notifications/cancelled

    def data_received(self, data: bytes) -> None:
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        if len(self.rest) > LIMIT:
            self.rest = b""
            self.fail(None, -32600, "line too long")
        loop = asyncio.get_running_loop()
        for line in lines:
            if len(line) > LIMIT:
                self.fail(None, -32600, "line too long")
                continue
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                self.fail(None, -32700, "Parse error")
                continue
            if type(message) is not dict or message.get("jsonrpc") != "2.0":
                self.fail(None, -32600, "Invalid request")
                continue
            request_id, method = message.get("id"), message.get("method")
            if type(request_id) not in (int, str) or type(method) is not str:
                self.fail(None, -32600, "Invalid request")
                continue
            self.running[request_id] = loop.create_task(self.answer(request_id, method, message.get("params")))

    def fail(self, request_id: object, code: int, text: str) -> None:
        error = {"jsonrpc": "2.0", "error": {"code": code, "message": text}}
        if request_id is not None:
            error["id"] = request_id
        self.output.write(orjson.dumps(error) + b"\n")

    async def answer(self, request_id: object, method: str, params: object) -> None:
        try:
            if type(params) is not dict:
                return self.fail(request_id, -32602, "params must be an object")
            meta = params.get("_meta")
            if type(meta) is not dict or meta.get("io.modelcontextprotocol/protocolVersion") not in VERSIONS \
                    or type(meta.get("io.modelcontextprotocol/clientCapabilities")) is not dict:
                return self.fail(request_id, -32602, "bad _meta")
            level = meta.get("io.modelcontextprotocol/logLevel")
            if level is not None and level not in LEVELS:
                return self.fail(request_id, -32602, "bad log level")
            if method != "tools/call":  # the harness's first request (server/discover): any complete result
                result = {"resultType": "complete", "_meta": META}
            else:
                name, arguments = params.get("name"), params.get("arguments")
                tool, schema = TOOLS.get(name), SCHEMAS.get(name)
                if tool is None:
                    return self.fail(request_id, -32602, "unknown tool")
                if type(arguments) is not dict or len(arguments) != len(schema) \
                        or any(type(arguments.get(field)) is not kind for field, kind in schema):
                    return self.fail(request_id, -32602, "arguments do not match the schema")
                try:
                    text = await tool(**arguments)
                    result = {"content": [{"type": "text", "text": text}], "resultType": "complete", "_meta": META}
                except Exception as error:
                    result = {"content": [{"type": "text", "text": str(error)}], "isError": True,
                              "resultType": "complete", "_meta": META}
            self.output.write(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + b"\n")
        except Exception:
            self.fail(request_id, -32603, "Internal error")
        finally:
            self.running.pop(request_id, None)


if __name__ == "__main__":
    asyncio.run(main(Bound))
