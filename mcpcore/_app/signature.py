"""Reading a user function once at registration: its parameters and how to call it.

`FunctionInfo` knows which parameter takes the `Context`, which are dependencies
(`Depends`, made per call: `depends.py`), the schema and converter of every other
parameter, and whether the function is async (run in the call's task) or sync (run
in a worker thread).
"""

from __future__ import annotations

import functools
import inspect
import logging
import typing
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from .._wire.inputs import InputRequired
from .._wire.jsonrpc import INTERNAL_ERROR, McpError
from . import docstrings
from .context import Context
from .depends import Factory, Resolution, factory, marker, takes_context
from .typeschema import Converter, converter_for, hoist_defs, jsonable_default, keeps_value, schema_for, split_annotated

log = logging.getLogger("mcpcore.signature")


@dataclass(frozen=True)
class Param:
    name: str
    hint: Any
    description: str | None
    required: bool
    default: Any
    convert: Converter


async def run_callback(fn: Callable[..., Any], *args: Any) -> Any:
    """A user callback called in this task: its value, awaited when it is awaitable (an async
    function's, or a sync one's that returned a coroutine). Unlike `FunctionInfo.invoke`, a sync
    callback runs inline: these are the small hooks of extensions, completions and the test client."""
    value = fn(*args)
    return await value if inspect.isawaitable(value) else value


def is_async_function(fn: Callable[..., Any]) -> bool:
    """Whether calling `fn` gives a coroutine to await (an async function, or an object with an async `__call__`)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


class FunctionInfo:
    """The introspected shape of a tool, resource or prompt function."""

    def __init__(self, fn: Callable[..., Any], *, inline: bool = False) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", type(fn).__name__)
        self.doc, documented = docstrings.parse(inspect.getdoc(fn) or None)  # parameter texts out of the description
        self.is_async = is_async_function(fn)
        if inline and self.is_async:
            raise ValueError(f"{self.name}(): inline=True is for sync functions; an async one already runs on the event loop")
        self.inline = inline  # a sync function called on the event loop itself: it blocks every other caller while it runs
        hints = typing.get_type_hints(fn, include_extras=True)
        self.return_hint = hints.get("return", inspect.Signature.empty)
        self.context_param: str | None = None
        self.params: list[Param] = []
        self.dependencies: list[tuple[str, Factory]] = []  # (parameter, its factory): never the client's
        self.accepts_any = False
        for parameter in inspect.signature(fn).parameters.values():
            if parameter.kind is parameter.VAR_KEYWORD:
                self.accepts_any = True
                continue
            if parameter.kind is parameter.VAR_POSITIONAL:
                continue
            hint = hints.get(parameter.name, Any)
            depends = marker(hint, parameter.default)
            if depends is not None:
                self.dependencies.append((parameter.name, factory(depends.factory, (fn,))))
                continue
            if takes_context(hint):
                self.context_param = parameter.name
                continue
            base, description = split_annotated(hint)
            description = description or documented.get(parameter.name)
            required = parameter.default is inspect.Parameter.empty
            self.params.append(
                Param(
                    parameter.name,
                    hint,
                    description,
                    required,
                    None if required else parameter.default,
                    converter_for(base),
                )
            )
        # Keyword arguments are the JSON arguments themselves (nothing to convert, nothing else taken).
        self.takes_json = not self.accepts_any and all(keeps_value(param.convert) for param in self.params)
        if self.dependencies:  # decided here, so a function without dependencies pays nothing per call
            self.start = self._start_resolving  # type: ignore[method-assign]

    def input_schema(self) -> dict[str, Any]:
        """An object schema with one property per parameter (TypeError if a hint has none)."""
        properties: dict[str, Any] = {}
        for param in self.params:
            try:
                prop = schema_for(param.hint)
            except TypeError as error:
                raise TypeError(f"{self.name}(): parameter {param.name!r}: {error}") from None
            if param.description and "description" not in prop:  # documented in the docstring
                prop["description"] = param.description
            if not param.required:
                prop["default"] = jsonable_default(param.default)
            properties[param.name] = prop
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        required = [p.name for p in self.params if p.required]
        if required:
            schema["required"] = required
        if not self.accepts_any:
            schema["additionalProperties"] = False
        return hoist_defs(schema)

    def convert(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validated JSON arguments to keyword arguments of the right Python types."""
        kwargs = dict(arguments) if self.accepts_any else {}
        for param in self.params:
            if param.name in arguments:
                try:
                    kwargs[param.name] = param.convert(arguments[param.name])
                except (TypeError, ValueError) as error:  # valid JSON the Python type cannot hold, e.g. a set of lists
                    raise ValueError(f"{param.name}: cannot be made a {_type_name(param.hint)} ({error})") from None
        return kwargs

    async def invoke_reporting(self, kwargs: dict[str, Any], context: Context, what: str, data: Any) -> Any:
        """`invoke`, with a failure of the function answered as one clear, non-leaking -32603
        naming `what` failed (its traceback goes to the log); protocol errors and questions pass."""
        try:
            return await self.invoke(kwargs, context)
        except (McpError, InputRequired):
            raise
        except Exception as error:
            log.exception("%s: %s() raised", what, self.name)
            raise McpError(INTERNAL_ERROR, f"{what} failed ({type(error).__name__})", data) from None

    async def invoke(self, kwargs: dict[str, Any], context: Context) -> Any:
        """Call the function and wait for its value (an `InputRequired` it returns is raised)."""
        value = await self.start(kwargs, context)
        if isinstance(value, InputRequired):  # returning it is the same as raising it
            raise value
        return value

    def start(self, kwargs: dict[str, Any], context: Context) -> Awaitable[Any]:
        """The call as an awaitable: in this task if async or inline, else on the server's worker
        threads. An async function's own coroutine, with no frame of ours around it (a tool call
        awaits it directly: `invoke` is the same plus the check of what it returned)."""
        if self.context_param is not None:
            kwargs[self.context_param] = context
        if self.is_async:
            return self.fn(**kwargs)  # type: ignore[no-any-return]
        if self.inline:
            return _ready(self.fn(**kwargs))
        return context.threads.submit(self.fn, (), kwargs)

    async def _start_resolving(self, kwargs: dict[str, Any], context: Context) -> Any:
        """`start` for a function with dependencies: they are made first, on the event loop (a sync
        function's too, before its thread), and cleaned up once the call has ended, however it ends."""
        resolution = Resolution(context)
        try:
            for name, node in self.dependencies:
                kwargs[name] = await resolution.value(node)
            if self.is_async or self.inline:
                value = await FunctionInfo.start(self, kwargs, context)
            else:  # in a worker thread, its clean-up waiting for it even if the call is cancelled
                if self.context_param is not None:
                    kwargs[self.context_param] = context
                value = await resolution.in_thread(context.threads, functools.partial(self.fn, **kwargs))
        except BaseException as error:
            await resolution.close(error)
            raise
        await resolution.close(None)
        return value


async def _ready(value: Any) -> Any:
    """An inline function's value, awaitable as the others are."""
    return value
