"""The seam between transports and the core: one `Call` and its `Writer`.

A transport parses one JSON-RPC message, wraps it in a `Call` with what it
knows about the caller, and awaits `server.handle(call, writer)`. The writer
decides the framing (a stdio line, a JSON body, SSE events); the core only
says which bytes are notifications and which one is the final response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class Writer(Protocol):
    """Where one call's output goes. `respond` is called exactly once, last."""

    async def notify(self, message: bytes) -> None: ...

    async def respond(self, message: bytes, error_code: int | None = None) -> None:
        """Send the final response; `error_code` is set when it is a JSON-RPC error."""


@dataclass(slots=True)
class Call:
    """One inbound JSON-RPC message plus transport facts about its sender."""

    message: dict[str, Any]
    principal: str | None = None
    cancelled: bool = False
