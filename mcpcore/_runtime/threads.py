"""`ThreadPool`: where sync tools, resources and prompts run, off the event loop.

Theory of operation. A job is queued on one shared queue that every worker
thread takes from, so a busy thread goes straight on to the next job without
a hand-off, and a thread is started only when no idle one is left (up to
`max_threads`; a thread idle for `idle_timeout` seconds retires). A finished
job joins its loop's batch of results; only the job that opens a batch wakes
the loop, which then settles every future in it, so a burst of completions
costs one wake-up, not one each.

Cancelling the awaiting call (which cancels the job's future) drops a job not
yet started. A started one cannot be stopped: its thread is *abandoned* and
keeps counting against `max_threads` until the function returns, so cancelled
calls can never grow the thread count past the bound (`abandoned` says how many
are held). A worker reads the future's state for that; nothing else of the
future is touched off its loop.

Worker threads are claimed for anyio, so `anyio.from_thread.run(ctx.progress, 1)`
works from a sync function (a thread stays claimed for a loop from one of its
jobs to the next), and each job runs in a copy of the caller's contextvars.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import queue
import threading
from typing import Any, Callable

from anyio._core._eventloop import claim_worker_thread, get_async_backend  # the one way to serve anyio.from_thread

from .defaults import SYNC_IDLE_TIMEOUT, SYNC_MAX_THREADS

__all__ = ["ThreadPool"]

log = logging.getLogger("mcpcore.threads")


_Job = tuple  # (its future, the caller's context, fn, args, kwargs): made and taken apart in C, no class of ours
_NO_KWARGS: dict[str, Any] = {}  # never written to: `**` copies it


class ThreadPool:
    """Up to `max_threads` worker threads taking sync jobs from one queue."""

    def __init__(self, max_threads: int = SYNC_MAX_THREADS, idle_timeout: float = SYNC_IDLE_TIMEOUT) -> None:
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        self.max_threads = max_threads
        self.idle_timeout = idle_timeout
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0  # alive
        self._idle = 0  # waiting for a job and not yet promised one
        self._running: set[asyncio.Future[Any]] = set()  # the futures of the jobs running now
        self._batches: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
        self._backend: Any = None
        self._warned = False  # about every thread being abandoned, since the last one came back

    @property
    def threads(self) -> int:
        """Worker threads alive now."""
        return self._threads

    @property
    def abandoned(self) -> int:
        """Threads still running a function whose call was cancelled."""
        return sum(future.cancelled() for future in tuple(self._running))

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in a worker thread; cancelling the caller abandons (never kills) it."""
        return await self.submit(fn, args)

    def submit(self, fn: Callable[..., Any], args: tuple[Any, ...] = (), kwargs: dict[str, Any] = _NO_KWARGS) -> asyncio.Future[Any]:
        """`fn(*args, **kwargs)` queued for a worker thread, as a future of its value on this loop.

        Cancelling the future (as cancelling a task awaiting it does) drops a job not yet started,
        and abandons a started one (it runs on; threads.abandoned counts it). A worker reads the
        future's state only to know whether its caller has gone."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if self._backend is None:
            self._backend = get_async_backend()
        with self._lock:
            start = not self._idle and self._threads < self.max_threads
            if self._idle:
                self._idle -= 1
            elif start:
                self._threads += 1
            elif not self._warned and self.abandoned == self._threads:
                self._warned = True
                log.warning("all %d sync worker threads are held by cancelled calls; sync work waits", self._threads)
        if start:
            self._start_thread()
        self._jobs.put((future, contextvars.copy_context(), fn, args, kwargs))
        return future

    def _start_thread(self) -> None:
        try:
            threading.Thread(target=self._work, name="mcpcore sync worker", daemon=True).start()
        except BaseException:  # e.g. the OS refused a thread: this call fails, the pool stays consistent
            with self._lock:
                self._threads -= 1
            raise

    def _work(self) -> None:
        with contextlib.ExitStack() as claim:
            self._take_jobs(claim)

    def _take_jobs(self, claim: contextlib.ExitStack) -> None:
        """Run jobs until the thread retires. It stays claimed for a loop from one job of that loop to
        the next (`claim` holds it), not per job: that cost a context manager, an import and a token."""
        claimed: asyncio.AbstractEventLoop | None = None
        while True:
            try:
                future, context, fn, args, kwargs = self._jobs.get(timeout=self.idle_timeout)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # not promised to a queued job: retire
                        self._idle -= 1
                        self._threads -= 1
                        return
                continue
            self._running.add(future)  # before its state is read: a caller that goes from here on abandons it
            if future.cancelled():  # its caller went away while it was queued: never run
                with self._lock:
                    self._idle += 1
                    self._running.discard(future)
                del future, context, fn, args, kwargs
                continue
            loop = future.get_loop()
            if loop is not claimed:
                claim.close()
                claim.enter_context(claim_worker_thread(self._backend, loop))
                claimed = loop
            error: BaseException | None = None
            try:
                result = context.run(fn, *args, **kwargs)
            except BaseException as raised:
                result, error = None, raised
            with self._lock:
                self._idle += 1
                self._running.discard(future)
                if future.cancelled():  # an abandoned job came back
                    self._warned = False
                    log.debug("%s returned in a worker thread after its call was cancelled", fn)
                batch = self._batches.get(loop)
                if batch is None:
                    self._batches[loop] = [(future, result, error)]
                else:
                    batch.append((future, result, error))
            if batch is None:
                try:
                    loop.call_soon_threadsafe(self._settle, loop)
                except RuntimeError:  # that loop has closed: nobody is waiting
                    with self._lock:
                        self._batches.pop(loop, None)
            del future, context, fn, args, kwargs, result, error, batch

    def _settle(self, loop: asyncio.AbstractEventLoop) -> None:
        """On `loop`: hand every finished job in its batch to its caller."""
        with self._lock:
            batch = self._batches.pop(loop)
        for future, result, error in batch:
            if future.done():  # cancelled: its caller has gone
                continue
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)
