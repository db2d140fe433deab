"""Prompts: definition from a function and the `prompts/get` logic.

Prompt arguments are strings on the wire; the function's parameters become
the prompt's arguments (required when they have no default). A parameter typed
otherwise (`int`, `float`, `bool`, an `Enum`, a `Literal`, ...) gets its string
read and converted as a tool's argument is, and a string that does not read as
one is -32602. The function returns a string (one user message), a `Message`,
content helpers, or a list of those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .._wire.icons import Icon, icons_to_wire
from .._wire.jsonrpc import invalid_params
from .._wire.validation import SchemaViolation, Validator
from .catalog import CacheHints
from .coercion import coerce
from .content import to_content
from .context import Context
from .signature import FunctionInfo


@dataclass(frozen=True)
class Message:
    """One prompt message: a role (`user` or `assistant`) and its content."""

    role: str
    content: Any

    def to_message(self) -> dict[str, Any]:
        if self.role not in ("user", "assistant"):
            raise ValueError(f"a prompt message role must be 'user' or 'assistant', not {self.role!r}")
        blocks = to_content(self.content)
        if len(blocks) != 1:
            raise ValueError("a prompt message holds exactly one content block; return several Messages instead")
        return {"role": self.role, "content": blocks[0]}


def _messages(value: Any) -> list[dict[str, Any]]:
    items = value if isinstance(value, (list, tuple)) else [value]
    messages = []
    for item in items:
        if isinstance(item, Message):
            messages.append(item.to_message())
        elif isinstance(item, dict) and "role" in item and "content" in item:
            messages.append(item)
        else:
            messages.extend({"role": "user", "content": block} for block in to_content(item))
    return messages


class Prompt:
    """A registered prompt."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        cache: CacheHints | None = None,
        scopes: Sequence[str] = (),
        icons: Sequence[Icon | dict[str, Any]] = (),
    ) -> None:
        self.info = FunctionInfo(fn)
        self.scopes = tuple(scopes)  # what a caller's token needs, on an authenticated transport
        self.key = self.info.name if name is None else name
        if not self.key:
            raise ValueError("a prompt name must not be empty")
        self.cache = cache or CacheHints()
        self.description = description or self.info.doc or ""
        entry: dict[str, Any] = {"name": self.key}
        if title:
            entry["title"] = title
        if self.description:  # no description is omitted, not sent empty
            entry["description"] = self.description
        arguments = []
        for param in self.info.params:
            argument: dict[str, Any] = {"name": param.name}
            if param.description:
                argument["description"] = param.description
            argument["required"] = param.required
            arguments.append(argument)
        if arguments:
            entry["arguments"] = arguments
        if wire_icons := icons_to_wire(icons, f"prompt {self.key!r}"):
            entry["icons"] = wire_icons
        self._entry = entry
        try:
            self._schema: dict[str, Any] | None = self.info.input_schema()
        except TypeError:  # a hint with no JSON form: its argument reaches the function as the string sent
            self._schema = None
        self._validator = Validator(self._schema) if self._schema is not None else None

    def describe(self) -> dict[str, Any]:
        return self._entry

    async def get(self, arguments: Any, context: Context) -> dict[str, Any]:
        """Render the prompt; a `GetPromptResult` body (without resultType/_meta)."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise invalid_params(f"Prompt {self.key!r}: arguments must be an object of strings")
        known = {p.name for p in self.info.params}
        for param in self.info.params:
            if param.required and param.name not in arguments:
                raise invalid_params(f"Prompt {self.key!r} needs the argument {param.name!r}")
        unknown = sorted(set(arguments) - known)
        if unknown and not self.info.accepts_any:
            raise invalid_params(f"Prompt {self.key!r} has no argument {unknown[0]!r}; it takes {sorted(known)}")
        value = await self.info.invoke_reporting(self._read(arguments), context, f"Prompt {self.key!r}", {"name": self.key})
        result: dict[str, Any] = {}
        if self.description:
            result["description"] = self.description
        result["messages"] = _messages(value)
        return result

    def _read(self, arguments: dict[str, str]) -> dict[str, Any]:
        """The string arguments as the function's typed keyword arguments: read, validated and
        converted as a tool's are (coercion is how a prompt's typed argument arrives, so always on)."""
        if self._validator is None:
            return dict(arguments)
        values, notes = coerce(arguments, self._schema)
        try:
            self._validator.validate(values)
            return self.info.convert(values)
        except (SchemaViolation, ValueError) as error:
            hint = f" ({notes[0]})" if notes else ""
            raise invalid_params(f"Invalid arguments for prompt {self.key!r}: {error}{hint}", {"name": self.key}) from None
