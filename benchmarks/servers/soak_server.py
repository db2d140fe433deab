"""The server benchmarks/soak.py drives: echoes, a call that streams, a call that never ends, and counters.

    python benchmarks/servers/soak_server.py --port 8000 [--max-connections 1000] [--header-timeout 10]

Runs through `Server.run` (the same runner, signals and logging as `mcpcore run`),
which also lets the soak shorten the header deadline for quick runs. `stats` reports
what cannot be seen from outside: `hang` calls still running after their clients
hung up, the event loop's tasks, open file descriptors and live objects.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os

import anyio

from mcpcore import Context, Server, defaults

server = Server("soak", version="1.0.0")
HANGS = {"started": 0, "running": 0}


@server.tool
def echo(text: str) -> str:
    """Return the text (a sync tool: it runs in a worker thread)."""
    return text


@server.tool
async def echo_async(text: str) -> str:
    """Return the text (an async tool: it runs in the call's task)."""
    return text


@server.tool
async def notify(ctx: Context) -> str:
    """Send a progress notification and a log message before the result, so the reply is an SSE stream."""
    await ctx.progress(1, total=1)
    await ctx.info("almost done")
    return "done"


@server.tool
async def hang(ctx: Context) -> None:
    """Report progress, then wait for ever: only cancellation (the client hanging up) ends it."""
    HANGS["started"] += 1
    HANGS["running"] += 1
    try:
        await ctx.progress(0)
        await anyio.sleep_forever()
    finally:
        HANGS["running"] -= 1


@server.tool
async def stats() -> dict:
    """Counters after a full garbage collection (so uncollected cycles do not read as leaks)."""
    gc.collect()
    return {
        "hang_started": HANGS["started"],
        "hang_running": HANGS["running"],
        "tasks": len(asyncio.all_tasks()),
        "fds": len(os.listdir("/proc/self/fd")),
        "objects": len(gc.get_objects()),
    }


def main(app: Server = server) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-connections", type=int, default=defaults.HTTP_MAX_CONNECTIONS)
    parser.add_argument("--header-timeout", type=float, default=defaults.HTTP_HEADER_TIMEOUT)
    args = parser.parse_args()
    app.run("http", host="127.0.0.1", port=args.port, max_connections=args.max_connections,
            header_timeout=args.header_timeout, log_level="warning")


if __name__ == "__main__":
    main()
