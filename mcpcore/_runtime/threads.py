"""`ThreadPool`: where sync tools, resources and prompts run, off the event loop.

Theory of operation. A job is queued on one shared queue that every worker
thread takes from, so a busy thread goes straight on to the next job without
a hand-off, and a thread is started only when no idle one is left (up to
`max_threads`; a thread idle for `idle_timeout` seconds retires). A finished
job joins its loop's batch of results; only the job that opens a batch wakes
the loop, which then settles every future in it, so a burst of completions
costs one wake-up, not one each.

Cancelling the awaiting call drops a job not yet started. A started one cannot
be stopped: its thread is *abandoned* and keeps counting against
`max_threads` until the function returns, so cancelled calls can never grow
the thread count past the bound (`abandoned` says how many are held).

Worker threads are claimed for anyio, so `anyio.from_thread.run(ctx.progress, 1)`
works from a sync function, and each job runs in a copy of the caller's
contextvars.
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


class _Job:
    __slots__ = ("loop", "future", "context", "fn", "args", "result", "error", "started", "finished", "dropped")

    def __init__(self, loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.context = contextvars.copy_context()
        self.fn = fn
        self.args = args
        self.result: Any = None
        self.error: BaseException | None = None
        # Set under the pool's lock:
        self.started = False  # a worker has begun it
        self.finished = False  # the function has returned or raised
        self.dropped = False  # its caller went away


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
        self._abandoned = 0  # running a job whose caller was cancelled
        self._batches: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
        self._backend: Any = None
        self._warned = False  # about every thread being abandoned, since the last one came back

    @property
    def threads(self) -> int:
        """Worker threads alive now."""
        return self._threads

    @property
    def abandoned(self) -> int:
        """Threads still running a function whose call was cancelled."""
        return self._abandoned

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in a worker thread; cancelling the caller abandons (never kills) it."""
        job = _Job(asyncio.get_running_loop(), fn, args)
        if self._backend is None:
            self._backend = get_async_backend()
        with self._lock:
            start = not self._idle and self._threads < self.max_threads
            if self._idle:
                self._idle -= 1
            elif start:
                self._threads += 1
            elif self._abandoned == self._threads and not self._warned:
                self._warned = True
                log.warning("all %d sync worker threads are held by cancelled calls; sync work waits", self._threads)
        if start:
            self._start_thread()
        self._jobs.put(job)
        try:
            return await job.future
        except BaseException:
            self._drop(job)
            raise

    def _start_thread(self) -> None:
        try:
            threading.Thread(target=self._work, name="mcpcore sync worker", daemon=True).start()
        except BaseException:  # e.g. the OS refused a thread: this call fails, the pool stays consistent
            with self._lock:
                self._threads -= 1
            raise

    def _drop(self, job: _Job) -> None:
        with self._lock:
            job.dropped = True
            if job.started and not job.finished:
                self._abandoned += 1
                log.debug("a cancelled call left %s running in a worker thread (%d abandoned)", job.fn, self._abandoned)

    def _work(self) -> None:
        with contextlib.ExitStack() as claim:
            self._take_jobs(claim)

    def _take_jobs(self, claim: contextlib.ExitStack) -> None:
        """Run jobs until the thread retires. It stays claimed for a loop from one job of that loop to
        the next (`claim` holds it), not per job: that cost a context manager, an import and a token."""
        claimed: asyncio.AbstractEventLoop | None = None
        while True:
            try:
                job = self._jobs.get(timeout=self.idle_timeout)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # not promised to a queued job: retire
                        self._idle -= 1
                        self._threads -= 1
                        return
                continue
            with self._lock:
                job.started = not job.dropped
            if job.started:
                if job.loop is not claimed:
                    claim.close()
                    claim.enter_context(claim_worker_thread(self._backend, job.loop))
                    claimed = job.loop
                try:
                    job.result = job.context.run(job.fn, *job.args)
                except BaseException as error:
                    job.error = error
            with self._lock:
                self._idle += 1
                job.finished = True
                if job.dropped and job.started:
                    self._abandoned -= 1
                    self._warned = False
                batch = self._batches.get(job.loop)
                if batch is None:
                    self._batches[job.loop] = [job]
                else:
                    batch.append(job)
            if batch is None:
                try:
                    job.loop.call_soon_threadsafe(self._settle, job.loop)
                except RuntimeError:  # that loop has closed: nobody is waiting
                    with self._lock:
                        self._batches.pop(job.loop, None)
            del job, batch

    def _settle(self, loop: asyncio.AbstractEventLoop) -> None:
        """On `loop`: hand every finished job in its batch to its caller."""
        with self._lock:
            batch = self._batches.pop(loop)
        for job in batch:
            if job.future.done():
                continue
            if job.error is None:
                job.future.set_result(job.result)
            else:
                job.future.set_exception(job.error)
