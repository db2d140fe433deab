"""Dependencies: values a function declares in its signature and gets made for each call.

`Depends(factory)` as a parameter's default, or in `Annotated[T, Depends(factory)]`,
marks a parameter the client never sees: each call gets what `factory` returns. A factory
may take the `Context` and other dependencies. The graph is read once, at registration,
where a cycle or a factory parameter nothing can fill is refused. Per call, each factory
runs once (its value shared by everything in the call that needs it), on the event loop,
before the function; a generator factory's code after its `yield` runs when the call
ends, however it ends: the call's exception is raised at the `yield`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import typing
from dataclasses import dataclass
from typing import Any, Callable

import anyio

from .._runtime.defaults import DEPENDENCY_CLEANUP_TIMEOUT
from .._runtime.threads import ThreadPool
from .context import Context
from .typeschema import split_annotated

log = logging.getLogger("mcpcore.depends")


class Depends:
    """A parameter made per call by `factory`: `db: Db = Depends(open_db)`, or `Annotated[Db, Depends(open_db)]`."""

    __slots__ = ("factory",)

    def __init__(self, factory: Callable[..., Any]) -> None:
        if not callable(factory):
            raise TypeError(f"Depends() takes the function that makes the value, not {factory!r}")
        self.factory = factory

    def __repr__(self) -> str:
        return f"Depends({_name(self.factory)})"


def marker(hint: Any, default: Any) -> Depends | None:
    """The `Depends` a parameter declares, as its default or in its `Annotated` hint; None if none."""
    if isinstance(default, Depends):
        return default
    if typing.get_origin(hint) is typing.Annotated:
        for extra in typing.get_args(hint)[1:]:
            if isinstance(extra, Depends):
                return extra
    return None


def takes_context(hint: Any) -> bool:
    return split_annotated(hint)[0] is Context


@dataclass(frozen=True, eq=False)
class Factory:
    """One factory of the graph, read at registration: how to call it and what it needs."""

    fn: Callable[..., Any]
    generator: bool  # a (sync or async) generator function: its code after `yield` is the clean-up
    is_async: bool  # ... an async one (a plain factory's value is awaited if it is awaitable)
    context_param: str | None
    needs: tuple[tuple[str, Factory], ...]  # (parameter, the factory that fills it)


def factory(fn: Callable[..., Any], chain: tuple[Callable[..., Any], ...]) -> Factory:
    """`fn` read as a factory; `chain` is who needs it (the function first). A cycle, or a parameter
    that is neither the `Context`, a dependency, nor defaulted, is a ValueError naming the path."""
    path = " -> ".join(f"{_name(f)}()" for f in (*chain, fn))
    if fn in chain:
        raise ValueError(f"dependency cycle: {path}")
    is_async = inspect.isasyncgenfunction(fn)
    generator = is_async or inspect.isgeneratorfunction(fn)
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin such as `dict`: called with nothing
        parameters = []
    try:
        hints = typing.get_type_hints(fn.__init__ if isinstance(fn, type) else fn, include_extras=True)
    except Exception:  # unresolvable annotations: only the defaults say what a parameter is
        hints = {}
    context_param: str | None = None
    needs: list[tuple[str, Factory]] = []
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        hint = hints.get(parameter.name, Any)
        depends = marker(hint, parameter.default)
        if depends is not None:
            needs.append((parameter.name, factory(depends.factory, (*chain, fn))))
        elif takes_context(hint):
            context_param = parameter.name
        elif parameter.default is inspect.Parameter.empty:
            raise ValueError(
                f"dependency {path}: parameter {parameter.name!r} needs a value; a factory takes only the "
                "Context, other Depends(...) and parameters with defaults"
            )
    return Factory(fn, generator, is_async, context_param, tuple(needs))


class Resolution:
    """One call's dependencies: the values made so far, and the generators whose clean-up is owed."""

    __slots__ = ("_context", "_values", "_open", "_handed_over")

    def __init__(self, context: Context) -> None:
        self._context = context
        self._values: dict[Callable[..., Any], Any] = {}
        self._open: list[tuple[Factory, Any]] = []
        self._handed_over = False  # the clean-up waits for a sync function its cancelled call left running

    async def value(self, node: Factory) -> Any:
        """`node`'s value for this call, made (with what it needs) the first time it is asked for."""
        if node.fn in self._values:
            return self._values[node.fn]
        kwargs = {name: await self.value(need) for name, need in node.needs}
        if node.context_param is not None:
            kwargs[node.context_param] = self._context
        made = node.fn(**kwargs)
        if node.generator:
            try:
                value = (await made.__anext__()) if node.is_async else next(made)
            except (StopIteration, StopAsyncIteration):
                raise RuntimeError(f"dependency {_name(node.fn)}() ended without yielding a value") from None
            self._open.append((node, made))
        else:
            value = await made if inspect.isawaitable(made) else made
        self._values[node.fn] = value
        return value

    async def in_thread(self, threads: ThreadPool, fn: Callable[[], Any]) -> Any:
        """`fn()` on the worker threads. A call cancelled while `fn` runs abandons its thread (threads.py),
        and `fn` may still be using what was made: the clean-up is then handed to that thread, which
        schedules it on the loop when `fn` returns. One cancelled before `fn` started never starts it."""
        loop = asyncio.get_running_loop()
        lock = threading.Lock()
        state = "queued"  # then "running" and "done"; or "dropped" (never to run), or "abandoned" (running, its call gone)

        def run() -> Any:
            nonlocal state
            with lock:
                if state == "dropped":
                    return None
                state = "running"
            try:
                return fn()
            finally:
                with lock:
                    abandoned, state = state == "abandoned", "done"
                if abandoned:
                    try:
                        loop.call_soon_threadsafe(self._close_abandoned)
                    except RuntimeError:  # the loop has closed: the server is gone
                        log.warning("the event loop closed before a cancelled call's dependencies were cleaned up")

        try:
            return await threads.run(run)
        except BaseException:
            with lock:
                if state == "running":
                    state, self._handed_over = "abandoned", True
                elif state == "queued":
                    state = "dropped"
            raise

    def _close_abandoned(self) -> None:
        """On the loop, once an abandoned sync function has returned: its call's clean-up, as a task of its own."""
        task = asyncio.get_running_loop().create_task(self._close(asyncio.CancelledError()))
        _CLOSING.add(task)
        task.add_done_callback(_CLOSING.discard)

    async def close(self, error: BaseException | None) -> None:
        """The call has ended: its clean-up now, or, when a sync function its cancellation abandoned is
        still running, when that function returns (`in_thread`)."""
        if not self._handed_over:
            await self._close(error)

    async def _close(self, error: BaseException | None) -> None:
        """Resume the generators after their `yield`, the last made first: with `error` raised there if
        the call failed. A clean-up's own failure fails a call that succeeded, and is logged beside the
        error of one that failed; the clean-up is shielded from the call's cancellation, for at most
        `DEPENDENCY_CLEANUP_TIMEOUT` seconds."""
        first_failure: BaseException | None = None
        with anyio.move_on_after(DEPENDENCY_CLEANUP_TIMEOUT, shield=True) as scope:
            while self._open:
                node, generator = self._open.pop()
                try:
                    await _resume(node, generator, error)
                except BaseException as failure:
                    if failure is error:  # the generator let the call's exception through
                        continue
                    if error is None and first_failure is None:
                        first_failure = failure
                    else:
                        log.error("clean-up of dependency %s() raised", _name(node.fn), exc_info=failure)
        if scope.cancelled_caught:
            log.warning("dependency clean-up took over %ss and was cut short", DEPENDENCY_CLEANUP_TIMEOUT)
        if first_failure is not None:
            raise first_failure


async def _resume(node: Factory, generator: Any, error: BaseException | None) -> None:
    """One generator's clean-up: it must end (StopIteration), or re-raise `error`."""
    try:
        if not node.is_async:
            generator.throw(error) if error is not None else next(generator)
        elif error is not None:
            await generator.athrow(error)
        else:
            await generator.__anext__()
    except (StopIteration, StopAsyncIteration):
        return
    if node.is_async:
        await generator.aclose()
    else:
        generator.close()
    raise RuntimeError(f"dependency {_name(node.fn)}() yielded more than once")


_CLOSING: set[asyncio.Task[None]] = set()  # clean-ups left to run after their call (held, so none is collected mid-way)


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__
