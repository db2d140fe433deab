"""The seam between transports and the core: one `Call` and its `Writer`.

A transport parses one JSON-RPC message, asks the core for its `Route`, wraps
both in a `Call` with what it knows about the caller (request headers, peer
address, authenticated principal), and has `server.handle(call, writer)` run
in a task of its own. The writer decides the framing (a stdio line, a JSON
body, SSE events); the core only says which bytes are notifications and which
one is the final response. A call with a `session` is served on the
legacy wire that session negotiated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Protocol

if TYPE_CHECKING:
    from .._wire.protocol import Route
    from ..auth import AccessToken
    from .clientstate import Place

NO_HEADERS: Mapping[str, str] = MappingProxyType({})


class Writer(Protocol):
    """Where one call's output goes. `respond` is called exactly once, last.

    A transport whose calls all come from one client (stdio's process) also gives its writers a
    `client_place`: that client's state (`ctx.client_state`), looked up only by a call that uses it."""

    async def notify(self, message: bytes) -> None: ...

    async def respond(self, message: bytes, error_code: int | None = None) -> None:
        """Send the final response; `error_code` is set when it is a JSON-RPC error."""


class SessionTag(Protocol):
    """What a call shows of the 2025-era session it belongs to (`session.Session` is one)."""

    id: str | None  # None on stdio, where the process is the session
    one_request: bool  # a stateless server's stand-in, living for one request

    def client_place(self) -> Place:
        """Where its per-client state lives (`ctx.client_state`)."""


class Cancellable(Protocol):
    def cancel(self) -> Any: ...


@dataclass(slots=True, eq=False)
class Call:
    """One inbound JSON-RPC request plus transport facts about its sender."""

    message: dict[str, Any]
    route: Route | None = None  # set by the transport (or on first dispatch)
    headers: Mapping[str, str] = field(default_factory=lambda: NO_HEADERS)  # HTTP request headers, lower-case names, read-only
    peer: tuple[Any, ...] | None = None  # the HTTP client's socket address; None on stdio
    principal: str | None = None  # the authenticated caller's subject; None without authentication
    auth: AccessToken | None = None  # the verified token it came with
    session: SessionTag | None = None  # the legacy (2025-era) session it belongs to; None on the modern wire
    cancelled: bool = False  # set by `cancel()` only
    task: Cancellable | None = None  # what runs the call, set by the transport's runner

    @property
    def tool(self) -> str:
        """The registered tool a `tools/call` names; "" for other calls and unknown tools."""
        route = self.route
        return route.target.key if route is not None and route.target is not None else ""

    def cancel(self) -> None:
        """Cancel the call: nothing more is sent for it, and its task is cancelled."""
        self.cancelled = True
        if self.task is not None:
            self.task.cancel()
