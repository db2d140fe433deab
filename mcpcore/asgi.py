"""`mcpcore.asgi.app(server)`: the server as an ASGI 3 application (mcpcore.transports.asgi builds it).

Imported only when asked for, so the core never loads a transport unless it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._serving.server import Server
    from .transports.asgi import AsgiApp


def app(server: "Server", **options: Any) -> "AsgiApp":
    """An ASGI application serving `server` under uvicorn, hypercorn or granian, or mounted in
    Starlette or FastAPI. Options are `HttpConfig` fields, less those the ASGI server owns
    (host, port, connection limits, head and keep-alive timeouts)."""
    from .transports.asgi import app as build

    return build(server, **options)


__all__ = ["app"]
