"""Argument completions: the registry behind `@server.completion` and `completion/complete`.

A completion function is registered for one argument of a prompt or resource
template and reads the partial `value` (and, if it takes a second parameter,
the other arguments already resolved). It is read once, at registration, as a
tool function is: it may also take the `Context` and dependencies (`Depends`). A
sync one runs on the event loop (a completion is a small, quick hook). The reply
holds at most `MAX_COMPLETIONS` values, with the total.
"""

from __future__ import annotations

from typing import Any, Callable

from .._wire.jsonrpc import invalid_params
from .context import Context
from .signature import FunctionInfo, is_async_function

MAX_COMPLETIONS = 100  # values per reply, as the spec allows


class Completions:
    """Completion functions by (ref type, prompt name or URI template, argument)."""

    def __init__(self) -> None:
        # key → (the function read, its parameter for the partial value, and for the other arguments, if it takes them)
        self._functions: dict[tuple[str, str, str], tuple[FunctionInfo, str, str | None]] = {}

    def __bool__(self) -> bool:
        return bool(self._functions)

    def add(self, fn: Callable[..., Any], kind: str, target: str, argument: str) -> None:
        """Complete `argument` of the prompt (`kind` "ref/prompt") or template ("ref/resource") `target`."""
        info = FunctionInfo(fn, inline=not is_async_function(fn))
        if not info.params:
            raise ValueError(f"completion function {info.name}() needs a parameter for the partial value")
        others = info.params[1].name if len(info.params) > 1 else None
        self._functions[(kind, target, argument)] = (info, info.params[0].name, others)

    async def complete(self, params: dict[str, Any], known: Callable[[str, str], bool], context: Context) -> dict[str, Any]:
        """The `completion/complete` result; `known(ref type, target)` says whether the ref exists."""
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise invalid_params('completion/complete needs "ref" and "argument" objects')
        kind = ref.get("type")
        target = ref.get("name") if kind == "ref/prompt" else ref.get("uri") if kind == "ref/resource" else None
        if not isinstance(target, str):
            raise invalid_params('"ref" must be {"type": "ref/prompt", "name": ...} or {"type": "ref/resource", "uri": ...}')
        if not known(kind, target):  # type: ignore[arg-type]
            raise invalid_params(f"Unknown completion reference: {target!r}", {"ref": ref})
        name, value = argument.get("name"), argument.get("value")
        if not isinstance(name, str) or not isinstance(value, str):
            raise invalid_params('"argument" needs string "name" and "value"')
        context_field = params.get("context") or {}
        others = context_field.get("arguments") or {} if isinstance(context_field, dict) else None
        if not isinstance(others, dict) or not all(isinstance(v, str) for v in others.values()):
            raise invalid_params('"context" must be {"arguments": {name: string value}}')
        entry = self._functions.get((kind, target, name))  # type: ignore[arg-type]
        values: list[str] = []
        if entry is not None:
            info, value_param, others_param = entry
            kwargs = {value_param: value} if others_param is None else {value_param: value, others_param: others}
            produced = await info.invoke(kwargs, context)
            values = [str(v) for v in produced]
        return {
            "completion": {
                "values": values[:MAX_COMPLETIONS],
                "total": len(values),
                "hasMore": len(values) > MAX_COMPLETIONS,
            }
        }
