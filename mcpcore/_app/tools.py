"""Tools: definition from a function (or a raw schema) and the `tools/call` logic.

Schemas, the validator, the `x-mcp-header` map and the `tools/list` entry are
built once here; a call only validates, converts, invokes and shapes the
result. Invalid arguments and exceptions become `isError` results the model
can read; `McpError` passes through as a protocol error.
"""

from __future__ import annotations

import logging
import math
import secrets
from typing import Any, Awaitable, Callable, Sequence

import orjson

from .._runtime.defaults import MIB
from .._runtime.isolate import Raised, Target, resource_limits_missing
from .._runtime.results import ResultBudget, budget_bytes
from .._wire.icons import Icon, icons_to_wire
from .._wire.inputs import InputRequired
from .._wire.jsonrpc import McpError, ToolError
from .._wire.protocol import Route
from .._wire.toolheaders import HeaderParam, header_params
from .._wire.validation import SchemaViolation, Validator
from .catalog import CacheHints
from .coercion import coerce, could_coerce
from .content import ToolResult, text_block, to_content
from .context import Context
from .signature import FunctionInfo
from .typeschema import hoist_defs, is_structured, schema_for, to_jsonable

log = logging.getLogger("mcpcore.tools")

TASK_MODES = ("forbidden", "optional", "required")  # a tool's `task=`: may it, or must it, be run as a task

_TOOL_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.")


def check_tool_name(name: str) -> None:
    if not 1 <= len(name) <= 128 or not set(name) <= _TOOL_NAME_CHARS:
        raise ValueError(f"tool name {name!r} must be 1-128 characters of A-Z a-z 0-9 _ - .")


class Tool:
    """A registered tool."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        requires: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        cache: CacheHints | None = None,
        inline: bool = False,
        scopes: Sequence[str] = (),
        strict: bool | None = None,
        task: str = "forbidden",
        task_after_input: bool = False,
        icons: Sequence[Icon | dict[str, Any]] = (),
        isolate: bool = False,
        timeout: float | None = None,
        memory: int | None = None,
        idempotent: bool | float = False,
        result_budget: ResultBudget | int | bool | None = None,
    ) -> None:
        if task not in TASK_MODES:
            raise ValueError(f"task= is one of {', '.join(TASK_MODES)}; not {task!r}")
        self.info = FunctionInfo(fn, inline=inline)
        self.task = task  # whether a client that declared the Tasks extension gets a task (tasks.py)
        self.task_after_input = task_after_input  # a call gathers its MRTR input before it becomes a task
        self.scopes = tuple(scopes)  # what a caller's token needs, on an authenticated transport
        self.key = self.info.name if name is None else name
        check_tool_name(self.key)
        self.raw_schema = input_schema is not None
        if input_schema is not None and input_schema.get("type") != "object":
            raise ValueError(f"tool {self.key!r}: an input schema needs \"type\": \"object\" at its root")
        self.input_schema = input_schema if input_schema is not None else self.info.input_schema()
        self.validator = Validator(self.input_schema)
        # The call plan's one decision: where the keyword arguments are the JSON arguments themselves,
        # arguments the schema's quick check accepts go to the function as they are; anything else takes
        # the full path, which coerces, validates, explains and converts.
        self.quick = self.validator.quick if self.raw_schema or self.info.takes_json else None
        # And how it is called: an async function that takes no Context and no dependencies is called
        # as it is, its coroutine awaited with no frame between (anything else through `FunctionInfo.start`).
        info = self.info
        takes_arguments_only = info.context_param is None and not info.dependencies
        self.direct = info.fn if info.is_async and takes_arguments_only else None
        # A sync function that takes only its arguments: what a plain call runs on the worker threads.
        self.threaded = info.fn if not info.is_async and not info.inline and takes_arguments_only else None
        self._start = info.start
        self.isolated: Target | None = None  # where a worker process finds the function (isolate=True)
        self.timeout, self.memory = timeout, memory
        if isolate:
            self._isolate(inline)
        elif timeout is not None or memory is not None:
            raise ValueError(f"tool {self.key!r}: timeout= and memory= are for a tool run in a worker process (isolate=True)")
        self.strict = strict  # None: the server's choice (`Server(strict=...)`)
        self.coercible = could_coerce(self.input_schema)
        self.headers: tuple[HeaderParam, ...] = header_params(self.key, self.input_schema)
        self.route = Route("tools/call", "name", self.headers, target=self)  # what Dispatcher.route answers for it
        self.structured = output_schema is not None or (
            is_structured(self.info.return_hint) and not _is_content_type(self.info.return_hint)
        )
        if output_schema is None and self.structured:
            output_schema = hoist_defs(schema_for(self.info.return_hint))
        self.output_schema = output_schema
        self.requires = requires or {}
        self.cache = cache or CacheHints()
        entry: dict[str, Any] = {"name": self.key}
        if title:
            entry["title"] = title
        if description or self.info.doc:  # no description is omitted, not sent empty
            entry["description"] = description or self.info.doc
        entry["inputSchema"] = self.input_schema
        if output_schema is not None:
            entry["outputSchema"] = output_schema
        self._once: Callable[[dict[str, Any], Context], Awaitable[dict[str, Any]]] | None = None  # idempotent's plan
        if idempotent is not False:
            annotations = self._plan_once(idempotent, task, annotations)
        if annotations:
            entry["annotations"] = annotations
        if wire_icons := icons_to_wire(icons, f"tool {self.key!r}"):
            entry["icons"] = wire_icons
        if meta:
            entry["_meta"] = meta
        self._entry = entry
        self.own_budget = budget_bytes(result_budget)  # None: the server's; False: none
        self.result_budget: int | None = None  # in bytes, once the server's budget is applied
        self.plain = False  # decided with the budget (`apply_budget`)

    def apply_budget(self, server_budget: int | None) -> None:
        """Decide, at registration, whether this tool's results are measured: a tool without a budget
        keeps its plan's `call` (nothing paid per call); one with a budget is called through `_fitted_call`,
        around that plan (an idempotent tool's stored result is cut anew for each answer).

        Then whether its calls are `plain`: its function takes only the arguments (`direct` if async,
        `threaded` if sync), which go to it as sent once `quick` accepts them, and nothing is measured,
        kept, required of the caller or run as a task. The dispatcher may then run such a call itself
        (ADR 13 item 14)."""
        own = self.own_budget
        self.result_budget = server_budget if own is None else (own or None)
        if self.result_budget is not None:
            self.call = self._fitted_call  # type: ignore[method-assign]
        elif self._once is not None:
            self.call = self._once  # type: ignore[method-assign]
        else:
            self.__dict__.pop("call", None)
        self.plain = (self.quick is not None and (self.direct or self.threaded) is not None and not self.requires
                      and self.task == "forbidden" and self._once is None and self.result_budget is None)

    async def _fitted_call(self, arguments: dict[str, Any], context: Context) -> dict[str, Any]:
        """`call`, its result cut to the budget (the rest kept for the caller: `_runtime/results.py`)."""
        once = self._once
        result = await (Tool.call(self, arguments, context) if once is None else once(arguments, context))
        return await context.fit_result(result, self.result_budget)  # type: ignore[arg-type]

    def describe(self) -> dict[str, Any]:
        return self._entry

    def _plan_once(self, idempotent: bool | float, task: str, annotations: dict[str, Any] | None) -> dict[str, Any]:
        """An idempotent tool's call plan: `call` goes through the server's `Idempotency` (a tool that is not
        idempotent never reaches it); its annotations say `idempotentHint: true`."""
        name = self.key
        if idempotent is not True and (isinstance(idempotent, bool) or not isinstance(idempotent, (int, float))
                                       or not 0 < idempotent < math.inf):
            raise ValueError(f"tool {name!r}: idempotent= is True (the server's window) or a window in seconds > 0, "
                             f"not {idempotent!r}")
        if task != "forbidden":
            raise ValueError(f"tool {name!r}: an idempotent tool cannot run as a task (task={task!r})")
        if annotations and annotations.get("idempotentHint") is False:
            raise ValueError(f"tool {name!r}: idempotent= contradicts annotations idempotentHint=False")
        window = None if idempotent is True else float(idempotent)

        async def call_once(arguments: dict[str, Any], context: Context) -> dict[str, Any]:
            keeper = context.idempotency
            entry = keeper.entry(context.caller_scope, name, context.meta, arguments)
            return await keeper.once(name, window, entry, lambda: Tool.call(self, arguments, context))

        self.call = self._once = call_once  # type: ignore[method-assign]
        return {**(annotations or {}), "idempotentHint": True}

    async def call(self, arguments: dict[str, Any], context: Context) -> dict[str, Any]:
        """Run the tool and return a `CallToolResult` body (without resultType/_meta)."""
        if self.requires:
            context.require_capability(**self.requires)
        if self.quick is not None and self.quick(arguments):
            kwargs = dict(arguments)  # a dict of its own: start adds the Context to it
        else:
            notes: list[str] = []
            if self.coercible and not (self.strict if self.strict is not None else context.strict):
                arguments, notes = coerce(arguments, self.input_schema)
            try:
                self.validator.validate(arguments)
            except SchemaViolation as violation:
                hint = f" ({notes[0]})" if notes else ""
                return _error_result(f"Invalid arguments for tool {self.key!r}: {violation}{hint}")
            try:
                kwargs = dict(arguments) if self.raw_schema or self.isolated else self.info.convert(arguments)
            except ValueError as error:
                return _error_result(f"Invalid arguments for tool {self.key!r}: {error}")
        try:
            direct = self.direct
            value = await (direct(**kwargs) if direct is not None else self._start(kwargs, context))
            if isinstance(value, InputRequired):  # returning it is the same as raising it
                raise value
        except (McpError, InputRequired):
            raise
        except Exception as error:
            return self.failed(error, context.masks_errors)
        return self.shape(value)

    def failed(self, error: Exception, masked: bool) -> dict[str, Any]:
        """The result of a call the function raised in (anything but `McpError` and `InputRequired`)."""
        if isinstance(error, ToolError):  # a failure the tool explains to the model
            return _error_result(str(error))
        # A bug in the tool (called from its `except`): log it, tell the model, keep serving.
        if not masked:
            log.exception("tool %r raised; the client gets an isError result", self.key)
            kind = error.type_name if isinstance(error, Raised) else type(error).__name__
            return _error_result(f"Error in tool {self.key!r}: {kind}: {error}")
        reference = secrets.token_hex(4)
        log.exception("tool %r raised (reference %s); the client gets a masked isError result", self.key, reference)
        return _error_result(f"Error in tool {self.key!r}: an internal error occurred (reference {reference})")

    def _isolate(self, inline: bool) -> None:
        """Refuse at registration what a worker process cannot run, and find where it will find the function."""
        info, key = self.info, self.key
        if inline:
            raise ValueError(f"tool {key!r}: isolate=True runs it in a worker process; inline=True on the event loop")
        if info.dependencies:
            raise ValueError(f"tool {key!r}: isolate=True cannot make Depends() dependencies in a worker process")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"tool {key!r}: timeout= is seconds, more than 0")
        if self.memory is not None and (self.memory < MIB or resource_limits_missing()):
            raise ValueError(f"tool {key!r}: memory= is bytes, at least 1 MiB, on a platform with RLIMIT_AS")
        self.isolated = Target.of(info.fn, key)
        self.direct = self.threaded = None
        self._start = self._run_isolated  # type: ignore[assignment]

    async def _run_isolated(self, arguments: dict[str, Any], context: Context) -> Any:
        """The call in a worker process: JSON arguments there, its notices forwarded here, its value shaped here."""
        facts = {"request_id": context.request_id, "meta": context.meta} if self.info.context_param else None

        async def forward(notice: str, params: dict[str, Any]) -> None:
            if notice == "progress":
                await context.progress(params["progress"], params.get("total"), params.get("message"))
            elif notice == "log":
                await context.log(params["level"], params.get("data"), params.get("logger"))

        assert self.isolated is not None
        answer = await context.isolated.run(self.key, self.isolated, arguments, timeout=self.timeout, memory=self.memory,
                                            convert=not self.raw_schema, context=facts, notify=forward)
        return _Shaped(answer["body"]) if "body" in answer else answer["result"]

    def shape(self, value: Any) -> dict[str, Any]:
        if value.__class__ is str and not self.structured:  # the commonest answer, first
            return {"content": [text_block(value)]}
        if isinstance(value, ToolResult):
            return value.to_result()
        if self.structured:
            structured = to_jsonable(value)
            return {
                "content": [text_block(orjson.dumps(structured).decode())],
                "structuredContent": structured,
            }
        return {"content": to_content(value)}


class _Shaped(ToolResult):
    """A result its worker process already shaped (the function returned a ToolResult or content helpers)."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body

    def to_result(self) -> dict[str, Any]:
        return self.body


def _is_content_type(hint: Any) -> bool:
    """Content helpers and ToolResult are dataclasses, but not structured output."""
    return hasattr(hint, "to_block") or hasattr(hint, "to_result")


def _error_result(text: str) -> dict[str, Any]:
    return {"content": [text_block(text)], "isError": True}
