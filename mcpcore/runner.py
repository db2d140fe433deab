"""Running a server in this process: the composition root of core and transports.

The only place in `mcpcore` that imports `transports` (lazily). It serves until
the transport ends (stdin EOF) or SIGINT/SIGTERM arrives, then returns.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from typing import Any, Awaitable, Callable

import anyio

from .server import Server

TRANSPORTS = ("stdio",)


async def _until_signal(serve: Callable[[], Awaitable[None]]) -> None:
    async with anyio.create_task_group() as tasks:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    tasks.cancel_scope.cancel()
                    return

        tasks.start_soon(stop_on_signal)
        await serve()
        tasks.cancel_scope.cancel()


def run(server: Server, transport: str = "stdio", **options: Any) -> None:
    """Serve until the transport ends or a signal arrives."""
    if transport == "stdio":
        from transports.stdio import serve_stdio

        serve = functools.partial(serve_stdio, server, **options)
    else:
        raise ValueError(f"unknown transport {transport!r}; choose one of {', '.join(TRANSPORTS)}")
    anyio.run(_until_signal, serve)
    # A cancelled sync tool may still occupy a worker thread; do not wait for it.
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.stderr.flush()
        os._exit(0)
