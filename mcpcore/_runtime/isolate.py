"""`IsolatedPool`: where isolated tools run (`@server.tool(isolate=True)`), in worker processes.

Theory of operation. A worker is a plain `python -m mcpcore._app.isolated` subprocess (never a
fork of the server: a forked asyncio process with threads is unsafe) speaking JSON lines over
its stdin and stdout. A call takes an idle worker, or starts one while fewer than `size` are
alive; past that it waits its turn (FIFO), so `size` bounds both processes and concurrency.
One call at a time per worker: the parent sends `{"call": ...}` and reads lines until the
answer, forwarding the worker's `{"notice": ...}` lines (progress, log messages) as they come.

A worker is killed (SIGKILL, no grace: a sync function cannot be interrupted any other way, a
worker holds nothing that must be flushed, and user code cannot catch or ignore it, so the
bound is real) when its call's `timeout` passes, when the call is cancelled (the client's
`notifications/cancelled`, a disconnect, shut-down), and when its answer cannot be read; one
that ran out of memory exits by itself. Either way its place is free and the next call
starts a fresh worker. A worker exits when its stdin closes, even mid-call, so none outlives
a server that was SIGKILLed; `aclose` (the server's lifespan end) closes every stdin.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import anyio
import anyio.abc
import orjson
from anyio.streams.buffered import BufferedByteReceiveStream

from .._wire.jsonrpc import McpError, ToolError
from .defaults import ISOLATE_MAX_LINE_BYTES, MIB, ISOLATE_START_TIMEOUT, ISOLATE_STOP_GRACE, ISOLATE_WORKERS

__all__ = ["IsolatedPool", "Raised", "Target", "PATH_ENV", "resource_limits_missing"]

log = logging.getLogger("mcpcore.isolate")

PATH_ENV = "MCPCORE_ISOLATE_PATH"  # the server's sys.path, as JSON: where a worker finds the user's modules
WORKER_MODULE = "mcpcore._app.isolated"

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Target:
    """Where a worker finds a function: an importable module by name, or a file loaded under a
    private name (so its `if __name__ == "__main__":` block does not run), and the function's name."""

    module: str  # "" when loaded from `file`
    file: str
    name: str

    @classmethod
    def of(cls, fn: Callable[..., Any], tool: str) -> Target:
        """The target of a module-level function (ValueError for what a worker cannot find)."""
        qualname = getattr(fn, "__qualname__", "")
        module = sys.modules.get(getattr(fn, "__module__", None) or "")
        file = getattr(module, "__file__", None)
        why = None
        if "<lambda>" in qualname or getattr(fn, "__name__", "") == "<lambda>":
            why = "a lambda has no name a worker process could find it by"
        elif "." in qualname or "<" in qualname:
            why = f"{qualname}() is not defined at the top of its module (nested, or a method)"
        elif module is None or not file or not file.endswith(".py"):
            why = f"its module {getattr(fn, '__module__', None)!r} is not a Python file a worker process can import"
        if why is not None:
            raise ValueError(f"tool {tool!r}: isolate=True needs a module-level function: {why}")
        package = getattr(module, "__package__", None)
        name = module.__name__ if package else ""  # a package's module by name (its relative imports work)
        return cls(name, os.path.abspath(file), qualname)  # type: ignore[arg-type]


def resource_limits_missing() -> bool:
    """Whether this platform lacks an address-space limit for a worker (`memory=`): Windows."""
    return sys.platform == "win32"


class Raised(Exception):
    """The isolated function raised `type_name`: its text, as the in-process path words it."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name


class _Worker:
    __slots__ = ("process", "lines")

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        assert process.stdout is not None
        self.lines = BufferedByteReceiveStream(process.stdout)

    @property
    def pid(self) -> int:
        return self.process.pid

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(orjson.dumps(message) + b"\n")

    async def receive(self) -> dict[str, Any]:
        """The next line, parsed (IncompleteRead or EndOfStream when the worker has gone)."""
        line = await self.lines.receive_until(b"\n", ISOLATE_MAX_LINE_BYTES)
        return orjson.loads(line)  # type: ignore[no-any-return]

    async def kill(self) -> None:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.aclose()

    async def stop(self) -> None:
        """Close its stdin (it exits), SIGKILL it if it has not after the grace."""
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(Exception):
                await self.process.stdin.aclose()  # type: ignore[union-attr]
            with anyio.move_on_after(ISOLATE_STOP_GRACE):
                await self.process.wait()
            await self.kill()

    def death(self) -> str:
        code = self.process.returncode
        # When the transport's own poll reaps the worker before asyncio's child watcher does (a close racing
        # its exit), asyncio reports 255 ("unknown child") and the transport's Popen holds the real status.
        # The other way round, the Popen says 0 and asyncio's figure is the real one.
        transport = getattr(self.process, "_transport", None)  # anyio's asyncio subprocess transport
        popen = transport.get_extra_info("subprocess") if transport is not None else None
        if code == 255 and popen is not None and popen.returncode is not None:
            code = popen.returncode
        if code is None:
            return "its worker process stopped answering"
        if code < 0:
            return f"its worker process died of signal {signal.Signals(-code).name}"
        return f"its worker process exited with code {code}"


class IsolatedPool:
    """Up to `size` worker processes running isolated tools, started on first use and reused."""

    def __init__(self, size: int | None = None) -> None:
        if size is not None and size < 1:
            raise ValueError("isolate_workers must be at least 1")
        self.size = size or min(ISOLATE_WORKERS, os.cpu_count() or 1)  # callers beyond it wait their turn
        self._idle: list[_Worker] = []
        self._alive: set[_Worker] = set()
        self._slots: anyio.Semaphore | None = None  # made on first use, in the serving event loop

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers alive now."""
        return [worker.pid for worker in self._alive]

    async def run(self, tool: str, target: Target, arguments: dict[str, Any], *, timeout: float | None,
                  memory: int | None, convert: bool, context: dict[str, Any] | None, notify: Notify) -> Any:
        """The function's answer: `{"result": value}` or `{"body": result}`; ToolError for a timeout, memory
        exhausted or a dead worker, `Raised` for what the function raised, McpError as it raised it."""
        if self._slots is None:
            self._slots = anyio.Semaphore(self.size)
        async with self._slots:  # waits while every worker is busy
            worker = self._idle.pop() if self._idle else await self._start(tool)
            answer: dict[str, Any] | None = None
            try:
                with anyio.fail_after(timeout):
                    await worker.send({"call": {"module": target.module, "file": target.file, "name": target.name,
                                                "arguments": arguments, "convert": convert, "memory": memory,
                                                "context": context}})
                    answer = await self._answer(worker, notify)
            except TimeoutError:
                raise ToolError(f"Tool {tool!r} timed out after {timeout:g} s; its worker process was killed") from None
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await worker.kill()
                raise ToolError(f"Tool {tool!r} failed: {worker.death()}; a new one takes its place") from None
            except anyio.DelimiterNotFound:
                raise ToolError(f"Tool {tool!r} failed: its worker sent a line over {ISOLATE_MAX_LINE_BYTES} bytes") from None
            finally:
                if answer is not None and answer.get("error") != "memory" and worker in self._alive:
                    self._idle.append(worker)  # (not when `aclose` stopped it meanwhile)
                else:  # timed out, cancelled, broken or out of memory: never reused
                    self._alive.discard(worker)
                    await worker.kill()
        return _outcome(tool, answer, memory)

    async def _answer(self, worker: _Worker, notify: Notify) -> dict[str, Any]:
        while True:
            message = await worker.receive()
            notice = message.get("notice")
            if notice is None:
                return message
            await notify(notice, message.get("params") or {})

    async def _start(self, tool: str) -> _Worker:
        env = {**os.environ, PATH_ENV: json.dumps(sys.path)}
        process = await anyio.open_process([sys.executable, "-m", WORKER_MODULE], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=None, env=env)
        worker = _Worker(process)
        self._alive.add(worker)
        try:
            with anyio.fail_after(ISOLATE_START_TIMEOUT):
                ready = await worker.receive()
            if "ready" not in ready:
                raise ValueError(ready)
        except BaseException as error:
            self._alive.discard(worker)
            await worker.kill()
            if isinstance(error, Exception):
                log.error("a worker process for isolated tools did not start: %r", error)
                raise ToolError(f"Tool {tool!r} failed: its worker process did not start ({worker.death()})") from None
            raise
        return worker

    async def aclose(self) -> None:
        """Stop every worker (the server's lifespan end); the pool can start new ones afterwards."""
        workers, self._idle = list(self._alive), []
        self._alive.clear()
        async with anyio.create_task_group() as group:
            for worker in workers:
                group.start_soon(worker.stop)


def _outcome(tool: str, answer: dict[str, Any], memory: int | None) -> dict[str, Any]:
    error = answer.get("error")
    if error is None:
        return answer
    text = answer.get("message", "")
    if error == "memory":
        raise ToolError(f"Tool {tool!r} ran out of memory (memory={memory / MIB:g} MiB); its worker process was replaced")
    if error == "mcp":
        raise McpError(answer["code"], text, answer.get("data"))
    if error == "tool":
        raise ToolError(text)
    if error == "raised":
        raise Raised(answer.get("type", "Exception"), text)
    raise ToolError(f"Tool {tool!r} failed in its worker process: {text}")  # arguments, result, input
