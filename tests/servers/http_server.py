"""A server for the Streamable HTTP tests: header-mirrored arguments, log streams, tools that wait.

`build(probes)` returns a fresh `Server`; `Probes` holds the anyio events the
waiting tools use (create it inside the test's event loop).
"""

from __future__ import annotations

from typing import Any

import anyio

from mcpcore import Context, Server

HEADED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "flag": {"type": "boolean", "x-mcp-header": "Flag"},
    },
}


class Probes:
    """What the waiting tools signal and wait on."""

    def __init__(self) -> None:
        self.started = anyio.Event()  # a waiting tool is running
        self.release = anyio.Event()  # set by the test to let it return
        self.cancelled = anyio.Event()  # set when a waiting tool was cancelled
        self.finished = anyio.Event()  # set when a waiting tool returned normally


async def _wait(probes: Probes) -> str:
    probes.started.set()
    try:
        await probes.release.wait()
    except anyio.get_cancelled_exc_class():
        probes.cancelled.set()
        raise
    probes.finished.set()
    return "released"


def build(probes: Probes | None = None) -> Server:
    server = Server("http-tests", version="0.0.1")

    @server.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool
    def caller(ctx: Context) -> dict:
        """What the transport knows about the caller: request headers and peer address."""
        return {"agent": ctx.headers.get("user-agent"), "peer": list(ctx.peer or ()), "principal": ctx.principal}

    @server.tool(input_schema=HEADED_SCHEMA)
    def headed(region: str | None = None, count: int | None = None, flag: bool | None = None) -> str:
        """Arguments mirrored into Mcp-Param-Region, Mcp-Param-Count and Mcp-Param-Flag."""
        return f"region={region} count={count} flag={flag}"

    @server.tool(requires={"sampling": {}})
    def needs_sampling() -> str:
        """Needs the sampling client capability."""
        return "sampled"

    @server.tool
    async def chatty(ctx: Context) -> str:
        """Log two messages (only when the request set a log level), then answer."""
        await ctx.info("first line\nsecond line")
        await ctx.warning({"step": 2})
        return "logged"

    @server.tool
    async def block() -> str:
        """Wait until the test releases it; record cancellation."""
        assert probes is not None
        return await _wait(probes)

    @server.tool
    async def notify_then_block(ctx: Context) -> str:
        """Send one log notification (SSE from here on), then wait like `block`."""
        assert probes is not None
        await ctx.info("waiting")
        return await _wait(probes)

    @server.prompt
    def greet(name: str) -> str:
        """Greet someone."""
        return f"Hello, {name}!"

    @server.resource("demo://readme", mime_type="text/plain")
    def readme() -> str:
        """A short text."""
        return "read me"

    return server
