"""A server whose `hold` tool streams one progress notification, then waits until `release` is called:
a live SSE stream for as long as the benchmark wants one (benchmarks/stream_memory.py)."""

import anyio

from mcpcore import Context, Server

server = Server("hold", version="1.0.0")
_gate: anyio.Event | None = None


def _opened() -> anyio.Event:
    global _gate
    if _gate is None:
        _gate = anyio.Event()
    return _gate


@server.tool
async def hold(ctx: Context) -> str:
    """Report progress once (the answer becomes an SSE stream), then wait for `release`."""
    gate = _opened()
    await ctx.progress(1, total=2)
    await gate.wait()
    return "done"


@server.tool
async def release() -> str:
    """Let every held call answer."""
    global _gate
    _opened().set()
    _gate = None
    return "released"


@server.tool
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text
