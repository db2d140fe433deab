"""`ThreadPool`: where sync tools, resources and prompts run, off the event loop.

Theory of operation. A job is queued on one shared queue that every worker
thread takes from, so a busy thread goes straight on to the next job without
a hand-off, and a thread is started only when no idle one is left (up to
`max_threads`; a thread idle for `idle_timeout` seconds retires). A finished
job joins its loop's batch of results; only the job that opens a batch wakes
the loop, which then settles every future in it, so a burst of completions
costs one wake-up, not one each. The wake-up is an `eventfd` per loop where
there is one (`_Waker`), else `call_soon_threadsafe`.

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
import os
import queue
import threading
import weakref
from typing import Any, Callable

from anyio._core._eventloop import claim_worker_thread, get_async_backend  # the one way to serve anyio.from_thread

from .defaults import SYNC_IDLE_TIMEOUT, SYNC_MAX_THREADS, portable_forced

__all__ = ["ThreadPool"]

log = logging.getLogger("mcpcore.threads")


_Job = tuple  # (its future, the caller's context, fn, args, kwargs, its loop's waker): made and taken apart in C
_NO_KWARGS: dict[str, Any] = {}  # never written to: `**` copies it
_Finished = tuple  # (a job's future, its value, what it raised)


class _Waker:
    """How worker threads wake one loop for its finished jobs, and the batch waiting for it.

    An `eventfd` the loop reads (`add_reader`) where there is one: a wake-up is one write and
    one read. Else the loop's `call_soon_threadsafe`, whose self-pipe costs a `Handle` per
    wake-up and a `BlockingIOError` raised and caught in each read of it. It holds no reference
    to its loop: the pool keeps wakers by weak reference to their loops, and a loop's `eventfd`
    is closed once the loop is gone (no job, hence no worker, refers to it by then)."""

    __slots__ = ("fd", "batch")

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        self.batch: list[_Finished] | None = None  # set under the pool's lock


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
        self._wakers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waker] = weakref.WeakKeyDictionary()
        self._last: tuple[Callable[[], Any], _Waker | None] = (lambda: None, None)  # the last loop (weakly) and its waker
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
        last_loop, waker = self._last
        if last_loop() is not loop:
            waker = self._waker_for(loop)
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
        self._jobs.put((future, contextvars.copy_context(), fn, args, kwargs, waker))
        return future

    def _waker_for(self, loop: asyncio.AbstractEventLoop) -> _Waker:
        try:
            waker = self._wakers.get(loop)
            if waker is None:
                waker = self._wakers[loop] = _Waker(None)
                waker.fd = self._eventfd(loop, waker)
            self._last = (weakref.ref(loop), waker)
        except TypeError:  # a loop that takes no weak reference: woken through call_soon_threadsafe
            waker = _Waker(None)
        return waker

    def _eventfd(self, loop: asyncio.AbstractEventLoop, waker: _Waker) -> int | None:
        """An `eventfd` that wakes `loop` for `waker`'s batch, closed when the loop is gone; None where
        there is none (not Linux, `MCPCORE_PORTABLE=1`) or the loop reads no file descriptors."""
        if not hasattr(os, "eventfd") or portable_forced():
            return None
        fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        try:
            loop.add_reader(fd, self._settle, waker)
        except NotImplementedError:  # e.g. a proactor loop
            os.close(fd)
            return None
        weakref.finalize(loop, os.close, fd)
        return fd

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
                future, context, fn, args, kwargs, waker = self._jobs.get(timeout=self.idle_timeout)
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
                del future, context, fn, args, kwargs, waker
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
                batch = waker.batch
                if batch is None:
                    waker.batch = [(future, result, error)]
                else:
                    batch.append((future, result, error))
            if batch is None:  # this job opened the batch: wake the loop
                if waker.fd is not None:
                    os.eventfd_write(waker.fd, 1)
                else:
                    try:
                        loop.call_soon_threadsafe(self._settle, waker)
                    except RuntimeError:  # that loop has closed: nobody is waiting
                        with self._lock:
                            waker.batch = None
            del future, context, fn, args, kwargs, waker, result, error, batch

    def _settle(self, waker: _Waker) -> None:
        """On its loop: hand every finished job in `waker`'s batch to its caller."""
        if waker.fd is not None:
            try:
                os.eventfd_read(waker.fd)  # before the batch is taken: a wake-up written after it is the next batch's
            except BlockingIOError:  # nothing was written (none is expected): the batch says what there is
                pass
        with self._lock:
            batch, waker.batch = waker.batch, None
        for future, result, error in batch or ():
            if future.done():  # cancelled: its caller has gone
                continue
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error if not isinstance(error, StopIteration) else _stopped(error))


def _stopped(error: StopIteration) -> RuntimeError:
    """What a function that raised `StopIteration` raises to its caller: a future refuses that
    exception (it would end the awaiting coroutine as if it returned), as a generator does."""
    wrapped = RuntimeError(f"the sync function raised StopIteration{f': {error}' if str(error) else ''}")
    wrapped.__cause__ = error
    return wrapped
