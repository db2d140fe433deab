"""The worker process of isolated tools: `python -m mcpcore._app.isolated` (`mcpcore/_runtime/isolate.py`
starts and kills it).

It reads one `{"call": ...}` line at a time on stdin and answers one line on the stdout it was
given; `print` in a tool goes to stderr (the server's), never into the answers. A thread reads
stdin and ends the process when it closes, even mid-call: no worker outlives its server. The
function is found by its module (by name, or its file loaded under a private name so its
`if __name__ == "__main__":` block does not run) and converted arguments as any tool's are; an
async one runs on the worker's own event loop. `memory` is the address-space soft limit
(RLIMIT_AS) set before each call, the hard limit left alone so a later call may raise it again;
a `MemoryError` is answered and the worker exits, so its successor starts clean.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
import os
import queue
import sys
import threading
import traceback
from typing import Any, BinaryIO, Callable, Generator

import orjson

from .._runtime.isolate import PATH_ENV
from .._wire.inputs import InputRequired
from .._wire.jsonrpc import McpError, ToolError
from .content import ToolResult, to_content
from .context import LOG_LEVELS
from .signature import FunctionInfo
from .typeschema import to_jsonable

try:
    import resource
except ImportError:  # Windows: no address-space limit (a tool's `memory=` is refused there)
    resource = None  # type: ignore[assignment]

MEMORY_EXIT = 3  # the exit code of a worker whose call ran out of memory


class _Sent:
    """What the stand-in's methods return: the line is already sent, so `ctx.progress(1)` works from a
    sync function and `await ctx.progress(1)` from an async one."""

    def __await__(self) -> Generator[None, None, None]:
        yield from ()


_SENT = _Sent()


class WorkerContext:
    """An isolated tool's `Context`: `progress` and the logging methods send a line to the server, which
    forwards it through the call's real `Context` (and its client's progress token and log level).
    Nothing else of a `Context` reaches a worker process: using it raises AttributeError saying so."""

    __slots__ = ("request_id", "meta", "_send")

    def __init__(self, facts: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> None:
        self.request_id = facts.get("request_id")
        self.meta: dict[str, Any] = facts.get("meta") or {}
        self._send = send

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> _Sent:
        self._send({"notice": "progress", "params": {"progress": progress, "total": total, "message": message}})
        return _SENT

    def log(self, level: str, data: Any, logger: str | None = None) -> _Sent:
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        self._send({"notice": "log", "params": {"level": level, "data": data, "logger": logger}})
        return _SENT

    def debug(self, data: Any) -> _Sent:
        return self.log("debug", data)

    def info(self, data: Any) -> _Sent:
        return self.log("info", data)

    def warning(self, data: Any) -> _Sent:
        return self.log("warning", data)

    def error(self, data: Any) -> _Sent:
        return self.log("error", data)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"ctx.{name} is not available in an isolated tool (isolate=True): it runs in a worker "
                             "process, where a Context has only progress, log, debug, info, warning, error, "
                             "request_id and meta")


class _Worker:
    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._lock = threading.Lock()  # a tool's own threads may report progress too
        self._functions: dict[tuple[str, str, str], tuple[Callable[..., Any], FunctionInfo]] = {}
        self._loop = asyncio.new_event_loop()  # made before any memory limit

    def send(self, message: dict[str, Any] | bytes) -> None:
        line = message if isinstance(message, bytes) else orjson.dumps(message)
        with self._lock:
            self._out.write(line + b"\n")
            self._out.flush()

    def serve(self, call: dict[str, Any]) -> bytes:
        """One call's answer line."""
        try:
            fn, info = self._function(call["module"], call["file"], call["name"])
        except Exception as error:
            traceback.print_exc()
            return _error("import", f"cannot load {call['name']}() from {call['file']}: {type(error).__name__}: {error}")
        arguments = call["arguments"]
        try:
            kwargs = info.convert(arguments) if call.get("convert", True) else dict(arguments)
        except ValueError as error:
            return _error("arguments", str(error))
        if info.context_param is not None:
            kwargs[info.context_param] = WorkerContext(call.get("context") or {}, self.send)
        _limit(call.get("memory"))
        try:
            value = fn(**kwargs)
            if inspect.isawaitable(value):
                value = self._loop.run_until_complete(value)
            if isinstance(value, InputRequired):
                raise value
            return _encode(value)
        except MemoryError:
            value = kwargs = None
            return OUT_OF_MEMORY
        except ToolError as error:
            return _error("tool", str(error))
        except McpError as error:
            return orjson.dumps({"error": "mcp", "code": error.code, "message": error.message, "data": error.data},
                                default=str)
        except InputRequired:
            return _error("input", "an isolated tool cannot ask its client for input (InputRequired)")
        except Exception as error:
            traceback.print_exc()  # to the server's stderr: the parent logs the call's failure
            return orjson.dumps({"error": "raised", "type": type(error).__name__, "message": str(error)})

    def _function(self, module: str, file: str, name: str) -> tuple[Callable[..., Any], FunctionInfo]:
        key = (module, file, name)
        found = self._functions.get(key)
        if found is None:
            fn = getattr(_import(module, file), name)
            found = self._functions[key] = (fn, FunctionInfo(fn))
        return found


def _import(module: str, file: str) -> Any:
    if module:
        return importlib.import_module(module)
    name = "_mcpcore_isolated_" + os.path.splitext(os.path.basename(file))[0]
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == file:
        return loaded
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"{file} is not Python")
    loaded = importlib.util.module_from_spec(spec)
    if os.path.dirname(file) not in sys.path:
        sys.path.append(os.path.dirname(file))  # its neighbours import, as `mcpcore run FILE` lets them
    sys.modules[name] = loaded
    spec.loader.exec_module(loaded)
    return loaded


def _encode(value: Any) -> bytes:
    """The answer line for what the function returned; an error line when it cannot cross as JSON."""
    try:
        if isinstance(value, ToolResult):
            return orjson.dumps({"body": value.to_result()})
        if hasattr(value, "to_block") or (isinstance(value, list) and any(hasattr(item, "to_block") for item in value)):
            return orjson.dumps({"body": {"content": to_content(value)}})
        return orjson.dumps({"result": to_jsonable(value)})
    except (TypeError, ValueError) as error:
        return _error("result", f"its {type(value).__name__} result cannot cross as JSON ({error})")


def _error(kind: str, message: str) -> bytes:
    return orjson.dumps({"error": kind, "message": message})


OUT_OF_MEMORY = _error("memory", "out of memory")


def _limit(memory: int | None) -> None:
    """The address-space soft limit for this call (None: as high as the hard limit allows)."""
    if resource is None:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = hard if memory is None else memory if hard == resource.RLIM_INFINITY else min(memory, hard)
    if wanted != soft:
        resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))


def _read(calls: queue.SimpleQueue[dict[str, Any]]) -> None:
    """Hand each call line to the main thread; end the process when stdin closes (the server is gone)."""
    for line in sys.stdin.buffer:
        calls.put(orjson.loads(line)["call"])
    os._exit(0)


def main() -> None:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what a tool prints goes to stderr, never into the answers
    sys.path[:0] = [entry for entry in json.loads(os.environ.pop(PATH_ENV, "[]")) if entry not in sys.path]
    worker = _Worker(out)
    calls: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
    threading.Thread(target=_read, args=(calls,), name="mcpcore isolated stdin", daemon=True).start()
    worker.send({"ready": os.getpid()})
    while True:
        answer = worker.serve(calls.get())
        worker.send(answer)
        if answer is OUT_OF_MEMORY:
            os._exit(MEMORY_EXIT)


if __name__ == "__main__":
    main()
