"""`Lifespan`: the app's start-up and shut-down code, run once however many transports serve.

`Server(lifespan=fn)` takes a function of the server that returns an async
context manager, typically an `@asynccontextmanager` generator that opens a
database pool, yields it and closes it. Every transport enters
`server.lifespan` before it serves and leaves it after its in-flight calls have
drained; the first entry runs the start-up, the last exit the shut-down, so
stdio and HTTP serving one server in one process share one pool. What the
start-up yields is `ctx.lifespan` in every call. A shared state
(`Server(store=...)`) is started before the app's start-up and closed after its
shut-down; the servers mounted on it (`Server.mount`, the `within` hook) start after its
start-up and stop before its shut-down. Work that outlives the request
that started it (a task's rounds) is `spawn`ed into the lifespan: it is cancelled
and awaited when the last transport leaves, before the shut-down code runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, AsyncContextManager, Callable, Coroutine, Generic, Protocol, TypeVar

import anyio

log = logging.getLogger("mcpcore.lifespan")

__all__ = ["Lifespan", "StartupError"]


class SharedStart(Protocol):
    """What the lifespan does with the state a server shares with other processes (`SharedState`)."""

    async def start(self, server: Any) -> None: ...

    async def aclose(self) -> None: ...


class Host(Protocol):
    """What the lifespan reads of its server (`Server` is one): a name for its messages, its shared state,
    and the check of what was registered, run before the start-up."""

    name: str

    @property
    def store(self) -> SharedStart | None: ...

    def check(self) -> None:
        """Raise ValueError for what was registered but cannot be served."""


S = TypeVar("S", bound=Host)


class StartupError(RuntimeError):
    """The lifespan's start-up raised: the server must not serve."""


class Lifespan(Generic[S]):
    """A reference-counted entry into the app's lifespan context manager."""

    def __init__(self, server: S, factory: Callable[[S], AsyncContextManager[Any]] | None,
                 within: Callable[[], AsyncContextManager[None]] | None = None) -> None:
        self._server = server
        self._factory = factory
        self._within = within  # entered after the start-up, left before the shut-down (the servers mounted on it)
        self._users = 0
        self._stack: contextlib.AsyncExitStack | None = None
        self._lock = anyio.Lock()
        self.value: Any = None  # what the start-up yielded, while entered
        self._background: set[asyncio.Task[None]] = set()  # spawned, not finished

    @property
    def entered(self) -> bool:
        """Start-up has finished and shut-down has not begun."""
        return self._users > 0

    async def __aenter__(self) -> Any:
        async with self._lock:
            if self._users == 0:
                try:
                    self._server.check()
                except ValueError as error:  # a registration mistake, said whole: no traceback
                    raise StartupError(f"server {self._server.name!r} cannot serve: {error}") from None
                stack = contextlib.AsyncExitStack()
                shared = self._server.store
                if shared is not None:  # the state shared with other processes: before the app's start-up
                    try:
                        await shared.start(self._server)
                    except Exception as error:  # a configuration error, said whole: no traceback
                        raise StartupError(f"server {self._server.name!r} cannot use its shared state: {error}") from None
                    stack.push_async_callback(shared.aclose)
                try:
                    if self._factory is not None:
                        self.value = await stack.enter_async_context(self._factory(self._server))
                    if self._within is not None:
                        await stack.enter_async_context(self._within())
                except Exception as error:
                    await stack.aclose()
                    raise StartupError(
                        f"the lifespan of server {self._server.name!r} failed at start-up: {type(error).__name__}: {error}"
                    ) from error
                self._stack = stack
            self._users += 1
            return self.value

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` in the background until it ends or the server stops (asyncio tasks, not a task
        group: the first transport to enter and the last to leave need not be one task)."""
        if self._users == 0:
            work.close()
            raise RuntimeError("background work needs a running server (inside `async with server.lifespan`)")
        job = asyncio.get_running_loop().create_task(work)
        self._background.add(job)
        job.add_done_callback(self._finished)

    def _finished(self, job: asyncio.Task[None]) -> None:
        self._background.discard(job)
        if not job.cancelled() and job.exception() is not None:  # said now, not at garbage collection
            log.error("background work of server %r failed", self._server.name, exc_info=job.exception())

    async def _stop_background(self) -> None:
        jobs = list(self._background)
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)

    async def __aexit__(self, *exc_info: Any) -> None:
        with anyio.CancelScope(shield=True):  # shut-down runs even when serving was cancelled
            async with self._lock:
                self._users -= 1
                if self._users == 0:
                    await self._stop_background()
                    if self._stack is not None:
                        stack, self._stack = self._stack, None
                        try:
                            await stack.aclose()
                        finally:
                            self.value = None
