"""Tools: definition from a function (or a raw schema) and the `tools/call` logic.

Schemas, the validator, the `x-mcp-header` map and the `tools/list` entry are
built once here; a call only validates, converts, invokes and shapes the
result. Invalid arguments and exceptions become `isError` results the model
can read; `McpError` passes through as a protocol error.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any, Callable, Sequence

import orjson

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
        self._quick = self.validator.quick if self.raw_schema or self.info.takes_json else None
        # And how it is called: an async function that takes no Context and no dependencies is called
        # as it is, its coroutine awaited with no frame between (anything else through `FunctionInfo.start`).
        info = self.info
        self._direct = info.fn if info.is_async and info.context_param is None and not info.dependencies else None
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
        if annotations:
            entry["annotations"] = annotations
        if wire_icons := icons_to_wire(icons, f"tool {self.key!r}"):
            entry["icons"] = wire_icons
        if meta:
            entry["_meta"] = meta
        self._entry = entry
        self.own_budget = budget_bytes(result_budget)  # None: the server's; False: none
        self.result_budget: int | None = None  # in bytes, once the server's budget is applied

    def apply_budget(self, server_budget: int | None) -> None:
        """Decide, at registration, whether this tool's results are measured: a tool without a budget
        keeps the plain `call` (nothing paid per call); one with a budget is called through `_fitted_call`."""
        own = self.own_budget
        self.result_budget = server_budget if own is None else (own or None)
        if self.result_budget is None:
            self.__dict__.pop("call", None)
        else:
            self.call = self._fitted_call  # type: ignore[method-assign]

    async def _fitted_call(self, arguments: dict[str, Any], context: Context) -> dict[str, Any]:
        """`call`, its result cut to the budget (the rest kept for the caller: `_runtime/results.py`)."""
        result = await Tool.call(self, arguments, context)
        return await context.fit_result(result, self.result_budget)  # type: ignore[arg-type]

    def describe(self) -> dict[str, Any]:
        return self._entry

    async def call(self, arguments: dict[str, Any], context: Context) -> dict[str, Any]:
        """Run the tool and return a `CallToolResult` body (without resultType/_meta)."""
        if self.requires:
            context.require_capability(**self.requires)
        if self._quick is not None and self._quick(arguments):
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
                kwargs = dict(arguments) if self.raw_schema else self.info.convert(arguments)
            except ValueError as error:
                return _error_result(f"Invalid arguments for tool {self.key!r}: {error}")
        try:
            direct = self._direct
            value = await (direct(**kwargs) if direct is not None else self.info.start(kwargs, context))
            if isinstance(value, InputRequired):  # returning it is the same as raising it
                raise value
        except (McpError, InputRequired):
            raise
        except ToolError as error:  # a failure the tool explains to the model
            return _error_result(str(error))
        except Exception as error:  # a bug in the tool: log it, tell the model, keep serving
            if not context.masks_errors:
                log.exception("tool %r raised; the client gets an isError result", self.key)
                return _error_result(f"Error in tool {self.key!r}: {type(error).__name__}: {error}")
            reference = secrets.token_hex(4)
            log.exception("tool %r raised (reference %s); the client gets a masked isError result", self.key, reference)
            return _error_result(f"Error in tool {self.key!r}: an internal error occurred (reference {reference})")
        return self.shape(value)

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


def _is_content_type(hint: Any) -> bool:
    """Content helpers and ToolResult are dataclasses, but not structured output."""
    return hasattr(hint, "to_block") or hasattr(hint, "to_result")


def _error_result(text: str) -> dict[str, Any]:
    return {"content": [text_block(text)], "isError": True}
