"""The server `tests/fuzz/fuzz.py` drives: one of every kind of feature, and no function that fails.

Nothing here raises for arguments its schema accepts, so a traceback on the
server's stderr during a fuzz run is a fault of the runtime, never of this app.
The fuzz script knows these names and argument shapes to build valid calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, Optional

import anyio

from mcpcore import Context, Elicit, InputRequired, ListRoots, Server

server = Server("fuzz", version="0.0.1", instructions="The target of tests/fuzz/fuzz.py.")

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
HEADED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "flag": {"type": "boolean", "x-mcp-header": "Flag"},
    },
    "additionalProperties": False,  # a raw schema is passed verbatim: it must refuse what the function cannot take
}
# Most keywords the validator honours, a recursive $ref among them: any arguments object gets a result
# (an isError one when they do not match), which is what the fuzz checks.
RICH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}, "n": {"type": "integer"}},
                       "additionalProperties": False}},
    "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]+$", "minLength": 4, "maxLength": 12},
        "count": {"type": "integer", "minimum": 0, "maximum": 100, "multipleOf": 5},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 8,
                 "contains": {"const": "x"}, "minContains": 0, "maxContains": 2},
        "choice": {"enum": ["a", "b", 1, None]},
        "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "mixed": {"anyOf": [{"type": "boolean"}, {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "maxProperties": 3}]},
        "present": {"not": {"type": "null"}},
        "tree": {"$ref": "#/$defs/node"},
        "shaped": {"if": {"type": "string"}, "then": {"minLength": 1}, "else": {"type": "array", "prefixItems": [{"type": "integer"}]}},
    },
    "dependentSchemas": {"code": {"required": ["count"]}},
    "additionalProperties": False,
}


class Colour(Enum):
    RED = "red"
    GREEN = "green"


@dataclass
class Point:
    x: int
    y: int = 0
    label: Optional[str] = None


@server.tool
def echo(text: str) -> str:
    """Return the text unchanged (sync: runs in a worker thread)."""
    return text


@server.tool
async def add(a: int, b: int = 0) -> str:
    """Add two integers (async: runs in the call's task)."""
    return str(a + b)


@server.tool
def shapes(
    point: Point, colour: Colour = Colour.RED, size: Literal["s", "m", "l"] = "m", tags: Optional[list[str]] = None
) -> dict:
    """Nested, enumerated and optional arguments; structured output."""
    return {"x": point.x, "y": point.y, "label": point.label, "colour": colour.value, "size": size, "tags": tags or []}


@server.tool(input_schema=HEADED_SCHEMA)
def headed(region: Optional[str] = None, count: Optional[int] = None, flag: Optional[bool] = None) -> str:
    """Arguments mirrored into Mcp-Param-Region, Mcp-Param-Count and Mcp-Param-Flag."""
    return f"region={region} count={count} flag={flag}"


@server.tool(input_schema=RICH_SCHEMA)
def rich(**arguments: Any) -> str:
    """Arguments checked against a rich raw schema."""
    return f"{len(arguments)} arguments"


@server.tool
async def steps(ctx: Context, count: int = 3) -> str:
    """Progress and log notifications before the result (an SSE response over HTTP)."""
    total = min(max(count, 0), 5)
    for step in range(total):
        await ctx.progress(step + 1, total=total)
        await ctx.info(f"step {step + 1}")
    return f"{total} steps"


@server.tool
async def nap(seconds: float = 0.0) -> str:
    """Sleep a little (at most 0.2 s), then answer: races with cancellation."""
    await anyio.sleep(min(max(seconds, 0.0), 0.2))
    return "rested"


@server.tool
async def hang(ctx: Context) -> str:
    """Say it runs (given a progress token), then wait 10 s; the fuzz script always cancels it long before."""
    await ctx.progress(0)
    await anyio.sleep(10)
    return "woke up"


@server.tool
async def touch(uri: str) -> str:
    """Announce that a resource changed (reaches subscriptions and 2025-era subscribers)."""
    server.notify_resource_updated(uri)
    return f"touched {uri}"


@server.tool
def ask(ctx: Context) -> str:
    """Ask the user's name (an elicitation), then greet them."""
    answer = ctx.answer("name")
    if answer is None:
        raise InputRequired(name=Elicit("What is your name?", NAME_FORM), state={"round": 1})
    return f"Hello, {answer.content.get('name')}!" if answer.accepted else f"The user chose {answer.action}."


@server.tool
async def roots(ctx: Context) -> str:
    """Ask for the client's roots and count them."""
    found = ctx.answer("roots")
    if found is None:
        raise InputRequired(roots=ListRoots())
    return f"{len(found)} roots"


@server.resource("fuzz://readme", mime_type="text/plain")
def readme() -> str:
    """A short text."""
    return "This server is fuzzed."


@server.resource("fuzz://data", mime_type="application/json")
def data() -> dict:
    """A JSON document."""
    return {"numbers": [1, 2, 3], "nested": {"ok": True}}


@server.resource("fuzz://items/{id}", mime_type="text/plain")
def item(id: str) -> str:
    """One item per id (a plain template variable: one path segment)."""
    return f"item {id}"


@server.resource("fuzz://files/{+path}", mime_type="text/plain")
def file(path: str) -> str:
    """A reserved expansion: the value may span segments."""
    return f"file {path}"


@server.resource("fuzz://search{?q,page}", mime_type="text/plain")
def search(q: str = "", page: str = "1") -> str:
    """Query variables, in any order or absent."""
    return f"search {q!r} page {page}"


@server.resource("fuzz://tree{/segments*}{?depth}", mime_type="text/plain")
def tree(segments: str = "", depth: str = "0") -> str:
    """Exploded path segments and a query."""
    return f"tree {segments!r} depth {depth}"


@server.resource("fuzz://doc{.format}{;version}{#section}", mime_type="text/plain")
def doc(format: str = "txt", version: str = "1", section: str = "") -> str:
    """Label, path-parameter and fragment expansions."""
    return f"doc {format} {version} {section!r}"


@server.prompt
def greet(name: str, style: str = "plain") -> str:
    """Greet someone."""
    return f"Greet {name} in a {style} style."


@server.completion(prompt="greet", argument="style")
def styles(value: str) -> list:
    return [style for style in ("plain", "poetic", "pirate") if style.startswith(value)]


@server.completion(resource="fuzz://items/{id}", argument="id")
def item_ids(value: str) -> list:
    return [f"{value}{n}" for n in range(3)]
