"""What both transports do with a message once it is framed: classify it, run it, drain.

Theory of operation. A transport cuts its input into messages (a stdio line,
an HTTP body) and hands each to `read_message`, which parses and classifies
it: a request, a notification, a response from the client, or `Malformed`
(the error to answer). A request becomes a `Call` carrying the core's `Route`
and goes to `CallRunner.submit` with its writer and a `done` callback. The
runner keeps an in-flight window: up to `max_in_flight` calls run, each in a
task of its own; later ones are held in arrival order and start as slots free (the transport
stops reading once its limit of held calls is reached, so nothing is dropped and
the bound is real, while cancellations and EOF behind fewer are still seen).
With `eager` (which a transport may change between submits), a call's task takes its
first step at once, inside `submit` (3.12's `eager_start`; `step_now` before it): a call
that never waits is answered without a pass of the event loop.
Long-lived calls (open subscriptions) run outside the window, bounded by their
own limit, so they never starve ordinary calls or a cancellation. `Call.cancel`
is the only way a call is cancelled: a held call is then dropped unstarted. A
handler that raises past `server.handle` is logged and the call counts as
failed (`done` sees that no response was sent). `drain` ends subscriptions,
gives the rest the grace period, then cancels what is left and waits for it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import sys
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Callable

import anyio
import orjson

from mcpcore._runtime.call import Call, Writer
from mcpcore._runtime.session import Session
from mcpcore._serving.server import Server
from mcpcore._wire.jsonrpc import (
    INVALID_REQUEST,
    MAX_NESTING,
    PARSE_ERROR,
    McpError,
    classify,
    is_request_id,
    readable_id,
    too_deep,
)

log = logging.getLogger("mcpcore.transports.calls")

Done = Callable[[Call], None]

EAGER_TASKS = sys.version_info >= (3, 12)  # asyncio.Task(..., eager_start=True)


class Inbound(tuple):  # type: ignore[type-arg]
    """A parsed message, `Inbound((kind, message))`: a request, a notification or a response
    (`classify`'s verdict). A tuple made in C, as one is made for every message (a NamedTuple's
    `__new__` is a Python function, a frozen dataclass sets each field through `object.__setattr__`)."""

    __slots__ = ()
    kind: str = property(itemgetter(0))  # type: ignore[assignment]
    message: dict[str, Any] = property(itemgetter(1))  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class Malformed:
    """A message that cannot be served: the error to answer, with the id if one was readable."""

    error: McpError
    request_id: Any = None
    kind: str | None = None  # what it is, when that was readable (a notification or response gets no answer on stdio)


def read_message(data: bytes | bytearray) -> Inbound | Malformed:
    """Parse and classify one framed JSON-RPC message."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        return Malformed(McpError(PARSE_ERROR, f"Parse error: {error}"))
    try:
        kind = classify(message)
    except McpError as error:
        return Malformed(error, readable_id(message))
    # Fewer brackets than the bound cannot nest past it (a C-speed count spares the walk), and
    # valid JSON that nests past it closes what it opens, so it is longer than twice the bound
    # (a short message is not even counted); orjson writes at most 254 levels, and Python
    # recurses at most 1000.
    if len(data) > 2 * MAX_NESTING and data.count(b"{") + data.count(b"[") > MAX_NESTING and too_deep(message):
        why = f"The message nests arrays and objects deeper than {MAX_NESTING} levels"
        return Malformed(McpError(INVALID_REQUEST, why), readable_id(message), kind)
    return Inbound((kind, message))


def take_response(message: dict[str, Any], session: Session | None) -> McpError | None:
    """A response from the client: None once delivered to the request waiting for it, else why not.

    Only a legacy session's server-to-client requests wait for responses.
    """
    if session is None:
        return McpError(INVALID_REQUEST, "Send requests or notifications; this server accepts no responses")
    if session.deliver(message):
        return None
    return McpError(INVALID_REQUEST, f"No request of this server is waiting for a response with id {message.get('id')!r}")


def cancelled_request(message: dict[str, Any]) -> Any:
    """The request id a `notifications/cancelled` names, or None when it names no valid id."""
    params = message.get("params")
    request_id = params.get("requestId") if isinstance(params, dict) else None
    return request_id if is_request_id(request_id) else None


def step_now(loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> bool:
    """Before Python 3.12's `eager_start`, the same effect: take the step `create_task` just queued, now.

    On asyncio's own loop that step is the last handle of the ready queue; it runs here with
    the running task (if any) stepped aside, as 3.12 does for an eager task. On any other loop
    (uvloop keeps its queue in C) the step stays queued: a lazy start, one pass later (False)."""
    ready = getattr(loop, "_ready", None)
    if not ready or getattr(ready[-1]._callback, "__self__", None) is not task:
        return False
    handle = ready.pop()
    running = asyncio.tasks._current_tasks.get(loop)  # what `current_task` reads, without its frame
    if running is not None:
        asyncio.tasks._leave_task(loop, running)
    try:
        handle._run()
    finally:
        if running is not None:
            asyncio.tasks._enter_task(loop, running)
    return True


class CallRunner:
    """Runs one transport's calls within an in-flight window (see the module docstring)."""

    def __init__(self, server: Server, *, max_in_flight: int, grace_period: float, eager: bool = False) -> None:
        self.server = server
        self.eager = eager
        self.max_in_flight = max_in_flight
        self.grace_period = grace_period
        self.calls: set[Call] = set()  # running or held
        self._held: collections.deque[tuple[Call, Writer, Done]] = collections.deque()
        self._counted = 0  # running calls that use the window
        self._starting = False  # inside `_start_held`
        self._changed: anyio.Event | None = None  # while draining: set whenever a call ends

    @property
    def held(self) -> int:
        """How many calls wait for a slot (a transport stops reading when too many do)."""
        return len(self._held)

    def submit(self, call: Call, writer: Writer, done: Done) -> bool:
        """Run `call` now if the window has room (or it is long-lived), else hold it (False)."""
        assert call.route is not None, "the transport routes a call before submitting it"
        self.calls.add(call)
        if not call.route.long_lived and (self._held or self._counted >= self.max_in_flight):
            self._held.append((call, writer, done))
            return False
        self._start(call, writer, done)
        return True

    def _start(self, call: Call, writer: Writer, done: Done) -> None:
        counted = not call.route.long_lived  # type: ignore[union-attr]
        if counted:
            self._counted += 1
        coroutine = self._run(call, writer, done, counted)
        loop = asyncio.get_running_loop()
        if self.eager and EAGER_TASKS:
            asyncio.Task(coroutine, loop=loop, eager_start=True)  # type: ignore[call-arg]
        elif self.eager:
            call.task = task = asyncio.Task(coroutine, loop=loop)  # as 3.12's: no factory, no frame of the loop's
            if not step_now(loop, task):  # handed over as its first step runs, here...
                call.task = None  # ... or, on a loop that runs the step itself, once it has started (`_run`)
        elif loop.get_task_factory() is None:
            asyncio.Task(coroutine, loop=loop)  # what `create_task` would make, without its frames
        else:
            loop.create_task(coroutine)

    async def _run(self, call: Call, writer: Writer, done: Done, counted: bool) -> None:
        # Only a running task is handed to the call: a task cancelled before its first step
        # would never run this body (nor its `finally`); until here `Call.cancel` just marks it.
        if call.task is None:
            call.task = asyncio.current_task()
        try:
            if not call.cancelled:
                await self.server.handle(call, writer)
        except asyncio.CancelledError:
            pass  # `Call.cancel` did it: nothing more is sent
        except Exception:
            log.exception("a call failed outside its handler's error handling: %r", call.message.get("id"))
        finally:
            if counted:
                self._counted -= 1
            self._end(call, done)
            if self._held:
                self._start_held()

    def _end(self, call: Call, done: Done) -> None:
        self.calls.discard(call)
        if self._changed is not None:
            self._changed.set()
        done(call)

    def _start_held(self) -> None:
        """A slot freed up: start held calls in order (dropping cancelled ones).

        An eager call that ends at once frees its slot from inside this loop: the loop
        goes on with the next one rather than starting it a level deeper."""
        if self._starting or not self._held:
            return
        self._starting = True
        try:
            while self._held and self._counted < self.max_in_flight:
                call, writer, done = self._held.popleft()
                if call.cancelled:
                    self._end(call, done)
                else:
                    self._start(call, writer, done)
        finally:
            self._starting = False

    def cancel_all(self) -> None:
        """Cancel every call, running or held (held ones end at once)."""
        for call in list(self.calls):
            call.cancel()
        while self._held:
            call, _, done = self._held.popleft()
            self._end(call, done)

    async def drain(self) -> None:
        """End subscriptions gracefully, let calls finish within the grace period,
        then cancel the rest and wait until every call has ended."""
        self.server.close_subscriptions()
        with anyio.move_on_after(self.grace_period):
            await self._until_idle()
        self.cancel_all()
        await self._until_idle()

    async def _until_idle(self) -> None:
        while self.calls:
            self._changed = anyio.Event()
            await self._changed.wait()
        self._changed = None
