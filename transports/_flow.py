"""Write flow control for asyncio protocols: `await drain()` while the transport is paused."""

from __future__ import annotations

import asyncio


class WriteFlow(asyncio.Protocol):
    """Tracks `pause_writing`/`resume_writing`; `drain()` waits while writing is paused."""

    _drained: asyncio.Future[None] | None = None

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        """Also call it when the connection is lost, so no writer waits forever."""
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    async def drain(self) -> None:
        if self._drained is not None:
            # Shielded: several writers may wait on the one future, and a cancelled
            # waiter must not cancel it for the others.
            await asyncio.shield(self._drained)
