"""Tools run in worker processes (`isolate=True`), for tests/test_isolate.py: a worker imports this file,
so it imports nothing but mcpcore. `server` is what `mcpcore run tests/isolated_tools.py` serves."""

from __future__ import annotations

import os
import time
from typing import Any

from mcpcore import Context, Server, ToolError

MIB = 1024 * 1024


def worker_pid() -> int:
    """The process it ran in."""
    return os.getpid()


def add(a: int, b: int) -> dict[str, Any]:
    return {"sum": a + b, "pid": os.getpid()}


async def add_async(a: int, b: int) -> dict[str, Any]:
    return {"sum": a + b, "pid": os.getpid()}


def hang(ctx: Context) -> str:
    """Says its pid as progress, then never returns (as a hung sync tool does)."""
    ctx.progress(0, message=str(os.getpid()))
    time.sleep(1000)
    return "never"


def hog(ctx: Context) -> int:
    ctx.progress(0, message=str(os.getpid()))
    return len(bytearray(2 * 1024 * MIB))


def chatty(ctx: Context, steps: int) -> str:
    """Reports progress and logs from a sync function (no await in a worker)."""
    for step in range(steps):
        ctx.progress(step + 1, steps, f"step {step + 1}")
    ctx.info({"pid": os.getpid()})
    return "done"


async def chatty_async(ctx: Context) -> str:
    await ctx.progress(1, 1)
    await ctx.warning("careful")
    return "done"


def unserialisable() -> Any:
    return object()


def allocate(mib: int) -> dict[str, int]:
    """Holds `mib` MiB for a moment."""
    return {"bytes": len(bytearray(mib * MIB)), "pid": os.getpid()}


def refuse(why: str) -> str:
    if why == "tool":
        raise ToolError("not today")
    raise ValueError("a bug")


def make_server(**options: Any) -> Server:
    server = Server("isolated", **options)
    server.add_tool(worker_pid, isolate=True)
    server.add_tool(add, isolate=True)
    server.add_tool(add_async, isolate=True)
    server.add_tool(hang, isolate=True, timeout=1.5)
    server.add_tool(hang, name="hang_untimed", isolate=True)
    server.add_tool(hog, isolate=True, memory=256 * MIB)
    server.add_tool(chatty, isolate=True)
    server.add_tool(chatty_async, isolate=True)
    server.add_tool(unserialisable, isolate=True)
    server.add_tool(allocate, isolate=True)
    server.add_tool(allocate, name="allocate_capped", isolate=True, memory=256 * MIB)
    server.add_tool(refuse, isolate=True)
    return server


server = make_server()
