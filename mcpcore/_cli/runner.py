"""Running a server in this process: the composition root of core and transports.

The only place in `mcpcore` that imports `mcpcore.transports` (lazily, so the
core imports no I/O code). It serves until the transport ends (stdin EOF) or a
signal arrives: the first SIGINT/SIGTERM stops gracefully (HTTP drains in-flight
calls), a second one stops at once; where the event loop cannot install signal
handlers (Windows) they are caught with `signal.signal` instead (ADR 45). It also
sets up logging for a running server (`logs.configure`) and starts worker
processes for the CLI.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from collections import deque
from contextlib import ExitStack
from typing import Any, AsyncIterator, Callable, Sequence

import anyio
import anyio.abc

from .._runtime.defaults import PORTABLE_ENV, SUPERVISOR_ENV, portable_forced
from .._serving.server import Server
from ..logs import DEFAULT_LEVEL, configure

TRANSPORTS = ("stdio", "http")
log = logging.getLogger("mcpcore.runner")


class _HandledSignals:
    """Signals caught by `signal.signal`, for loops without signal handlers (Windows): the handler runs
    in the main thread between bytecodes, maybe while the loop waits, so it only hands the signal to
    the loop with `call_soon_threadsafe` (which also wakes it)."""

    def __init__(self, *signals: int) -> None:
        self.loop = asyncio.get_running_loop()
        self.signals = signals
        self.previous: dict[int, Any] = {}
        self.received: deque[int] = deque(maxlen=2)  # only a first and a second one mean anything
        self.arrived = asyncio.Event()

    def __enter__(self) -> _HandledSignals:
        self.previous = {signum: signal.signal(signum, self._handle) for signum in self.signals}
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        self.loop.call_soon_threadsafe(self._deliver, signum)

    def _deliver(self, signum: int) -> None:
        self.received.append(signum)
        self.arrived.set()

    def __aiter__(self) -> _HandledSignals:
        return self

    async def __anext__(self) -> int:
        while not self.received:
            self.arrived.clear()
            await self.arrived.wait()
        return self.received.popleft()


def signal_receiver(stack: ExitStack, signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> AsyncIterator[int]:
    """`signals` as they arrive: through the loop's signal handlers, or `signal.signal` where the loop has
    none (Windows) or `MCPCORE_PORTABLE=1` says so. The loop's handlers also wake it when the kernel hands
    a signal to another thread (a worker asleep in a sync tool), which `anyio.run`'s own SIGINT handler,
    run only by the main thread between bytecodes, would leave waiting."""
    if portable_forced():
        why = f"{PORTABLE_ENV}=1"
    else:
        try:
            return stack.enter_context(anyio.open_signal_receiver(*signals))
        except NotImplementedError:
            why = "the event loop has no signal handlers"
    log.debug("%s %s caught by signal.signal (%s)", " and ".join(signal.Signals(s).name for s in signals),
              "is" if len(signals) == 1 else "are", why)
    return stack.enter_context(_HandledSignals(*signals))


async def _stop_on_signals(stop: Callable[[], None], scope: anyio.CancelScope, calls: Any, grace_period: float) -> None:
    """The first signal stops gracefully (saying what it waits for), a second one cancels everything.
    `calls`: the transport's `CallRunner`, whose calls are the ones waited for."""
    with ExitStack() as stack:
        first = True
        async for signum in signal_receiver(stack):
            if first:
                _say_stopping(len(calls.calls), grace_period, signum)
                stop()
                first = False
            else:
                log.info("stopping at once: the calls still running are cancelled")
                scope.cancel()


def _say_stopping(in_flight: int, grace_period: float, signum: int) -> None:
    if not in_flight:
        return
    again = "Ctrl-C again" if signum == signal.SIGINT else "a second SIGTERM"
    log.info("stopping: waiting up to %g s for %d call%s in flight (%s stops at once)",
             grace_period, in_flight, "" if in_flight == 1 else "s", again)


async def _stop_when_orphaned(stop: Callable[[], None]) -> None:
    """A worker stops once its supervisor is gone (it names itself, so a death before we got here counts)."""
    named = os.environ.get(SUPERVISOR_ENV, "")
    parent = int(named) if named.isdigit() else os.getppid()
    while os.getppid() == parent:
        await anyio.sleep(1)
    stop()


async def _serve(server: Server, transport: str, options: dict[str, Any]) -> None:
    if transport == "http":  # built first: a refused configuration raises plainly, not in a task group
        from ..transports.http import HttpConfig, HttpServer

        http = HttpServer(server, HttpConfig(**options))
    # Entered before any task group, so a failing start-up raises plainly; the transport's own
    # entry then only counts (the start-up runs once).
    async with server.lifespan, anyio.create_task_group() as tasks:
        if transport == "http":
            config = http.config
            tasks.start_soon(_stop_on_signals, http.stop, tasks.cancel_scope, http.runner, config.grace_period)
            async with anyio.create_task_group() as serving:
                await serving.start(http.serve)
                a_worker = config.listen_fd is not None  # one of several; its supervisor says where they serve
                if not a_worker:
                    log.info("serving %r at %s%s", server.name, http.url,
                             shape(config.stateless, config.json_response, config.sse_path, http.sessions.store is not None))
                if a_worker or SUPERVISOR_ENV in os.environ:  # stop with the supervisor
                    tasks.start_soon(_stop_when_orphaned, http.stop)
                if not server.sealer.configured:  # said at start, while someone reads it
                    # It matters where several processes serve one server; one process alone loses nothing,
                    # so there it is a debug line, not noise on every start.
                    log.log(logging.WARNING if a_worker else logging.DEBUG,
                            "requestState is sealed with a random per-process key; set MCPCORE_STATE_KEYS "
                            "(or Server(state_keys=...)) so that several server processes accept each other's state")
        else:
            from ..transports.stdio import open_stdio

            on_a_terminal = _on_a_terminal()  # asked first: the transport takes fd 0 over
            session = open_stdio(server, **options)
            tasks.start_soon(_stop_on_signals, session.stop, tasks.cancel_scope, session.runner, session.grace_period)
            if on_a_terminal:  # else a client launched us, and reads no banner
                log.info("serving %r on stdio; Ctrl-D to stop", server.name)
            await session.serve()
        tasks.cancel_scope.cancel()


def shape(stateless: bool, json_response: bool, sse_path: str | None, shared: bool = False) -> str:
    """What the start-up line adds about how 2025-era and old (HTTP+SSE) clients are served;
    `shared`: 2025-era sessions live in a store the server's processes share (`--redis`)."""
    notes = []
    if stateless:
        notes.append("stateless: 2025-era clients get no sessions")
    elif shared:
        notes.append("2025-era sessions shared with the other processes")
    if json_response:
        notes.append("JSON-only answers")
    if notes or not sse_path:
        notes.append("no HTTP+SSE")
    else:
        notes.append(f"HTTP+SSE clients at {sse_path}")
    return f" ({'; '.join(notes)})"


def _on_a_terminal() -> bool:
    try:
        return os.isatty(0)
    except OSError:
        return False


def _open_standard_fds() -> None:
    """Put /dev/null on a closed fd 0, 1 or 2 before anything else can take its number.

    Otherwise the event loop's own selector may become "stdin", and a closed stdin
    must read as an immediate end of input, a closed stdout as a discarded one.
    """
    for fd, flags in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, flags)  # the lowest free number: `fd` itself


def _has_uvloop() -> bool:
    """uvloop is used when installed (the `mcpcore[uvloop]` extra); it is never required."""
    import importlib.util

    return importlib.util.find_spec("uvloop") is not None


def run(
    server: Server, transport: str = "stdio", *, log_level: str = DEFAULT_LEVEL, log_format: str = "text", **options: Any
) -> None:
    """Serve until the transport ends or a signal arrives."""
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}; choose one of {', '.join(TRANSPORTS)}")
    configure(log_level, log_format)
    if log_level == "debug":  # one line per call; installed only here, so it costs nothing at other levels
        from ..middleware import access_log

        server.middleware = (access_log(level=logging.DEBUG), *server.middleware)
    _open_standard_fds()
    anyio.run(_serve, server, transport, options, backend_options={"use_uvloop": _has_uvloop()})
    # A cancelled sync tool may still occupy a worker thread; do not wait for it.
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.stderr.flush()
        os._exit(0)


def run_workers(
    worker_args: Sequence[str], host: str, port: int, workers: int, path: str, log_level: str, allowed_hosts: tuple[str, ...],
    log_format: str = "text", shared: bool = False, served: str = "",
) -> int:
    """Supervise `workers` HTTP worker processes on one socket; return the exit status.
    `shared`: the workers share state on Redis (`--redis`); without it, say what stays per worker.
    `served`: what the start-up line adds about the clients served (`shape`)."""
    from ..transports._workers import supervise, unsupported
    from ..transports.http import public_bind_refusal

    refusal = public_bind_refusal(host, allowed_hosts) or unsupported()
    if refusal is not None:
        raise ValueError(refusal)  # before binding: every worker would refuse it, or none could start

    configure(log_level, log_format)
    if not shared:
        log.warning("each worker keeps its own state: 2025-era clients are served stateless (no sessions, so no "
                    "GET stream, resources/subscribe or server-to-client requests), and a subscriptions/listen stream "
                    "hears only the changes its worker announces; run with --redis URL to share them")
    return supervise(worker_args, host, port, workers, path, served)
