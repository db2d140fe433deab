"""The server benchmarks/soak.py drives: echoes, calls that stream, a call that never ends, resources, and counters.

    python benchmarks/servers/soak_server.py --port 8000 [--max-connections 1000] [--header-timeout 10]
        [--session-idle-timeout 1800] [--max-sessions 1000]

Runs through `Server.run` (the same runner, signals and logging as `mcpcore run`),
which also lets the soak shorten the header deadline and the 2025-era session idle
timeout for quick runs. `stats` reports what cannot be seen from outside: `hang`
calls still running after their clients hung up, the event loop's tasks, open file
descriptors, live objects, and the 2025-era sessions with their resumable streams
(`stream_census`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os

from typing import Any

import anyio

from mcpcore import Context, Server
from mcpcore._runtime import defaults
from mcpcore.transports._http.exchange import Endpoint

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
async def drip(ctx: Context) -> str:
    """Progress, a log message, more progress, then the result: a stream a client can drop and resume."""
    await ctx.progress(1, total=2)
    await ctx.info("half way")
    await ctx.progress(2, total=2)
    return "dripped"


@server.tool
async def polled(ctx: Context) -> str:
    """Progress, then the server ends the HTTP stream; the rest (progress, result) only after a resume."""
    await ctx.progress(1, total=2)
    await ctx.close_stream()
    await ctx.progress(2, total=2)
    return "polled"


@server.tool
def touch(uri: str) -> str:
    """Announce that a resource changed (its subscribers hear of it on their GET stream)."""
    server.notify_resource_updated(uri)
    return "touched"


@server.resource("soak://note/{number}", mime_type="text/plain")
def note(number: int) -> str:
    """A resource to subscribe to."""
    return f"note {number}"


def stream_census(endpoint: Endpoint) -> dict[str, int]:
    """The 2025-era sessions an endpoint holds, their resumable streams, and how many of those nothing
    can use any more: more streams than its calls in flight and those with events still stored
    (a `Last-Event-ID` can resume only those) means the store keeps what it should have let go."""
    streams = unusable = 0
    for session, store in list(endpoint.stores.items()):
        stored = sum(1 for stream in store.streams.values() if store.after(stream, f"{stream.stream_id}.0"))
        usable = len(session.calls) + stored
        streams += len(store.streams)
        unusable += max(0, len(store.streams) - usable)
    return {"sessions": len(endpoint.sessions), "streams": streams, "unusable_streams": unusable}


def _endpoint() -> Endpoint:
    """The endpoint `Server.run` built (this process serves one)."""
    return next(thing for thing in gc.get_objects() if isinstance(thing, Endpoint))


@server.tool
async def stats() -> dict[str, Any]:
    """Counters after a full garbage collection (so uncollected cycles do not read as leaks)."""
    gc.collect()
    return {
        "hang_started": HANGS["started"],
        "hang_running": HANGS["running"],
        "tasks": len(asyncio.all_tasks()),
        "fds": len(os.listdir("/proc/self/fd")),
        "objects": len(gc.get_objects()),
        **stream_census(_endpoint()),
    }


def main(app: Server = server) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-connections", type=int, default=defaults.HTTP_MAX_CONNECTIONS)
    parser.add_argument("--header-timeout", type=float, default=defaults.HTTP_HEADER_TIMEOUT)
    parser.add_argument("--session-idle-timeout", type=float, default=defaults.HTTP_SESSION_IDLE_TIMEOUT)
    parser.add_argument("--max-sessions", type=int, default=defaults.HTTP_MAX_SESSIONS)
    args = parser.parse_args()
    app.run("http", host="127.0.0.1", port=args.port, max_connections=args.max_connections,
            header_timeout=args.header_timeout, session_idle_timeout=args.session_idle_timeout,
            max_sessions=args.max_sessions, log_level="warning")


if __name__ == "__main__":
    main()
