"""`x-mcp-header` annotations: find them in a tool's input schema and check them.

Run once when a tool is registered. The result tells the HTTP transport which
`Mcp-Param-{Name}` headers must mirror which arguments, so no request ever
re-reads schemas. A tool whose annotations break the specification's rules is
refused with a `ValueError` that names the rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .validation import subschemas

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_TYPES = ("string", "integer", "boolean")


@dataclass(frozen=True)
class HeaderParam:
    """One argument mirrored into the header `Mcp-Param-{header}`."""

    header: str
    path: tuple[str, ...]
    kind: str

    def value_in(self, arguments: Any) -> Any:
        """The argument at `path`, or None when absent."""
        node = arguments
        for key in self.path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node




def _count_annotations(schema: Any) -> int:
    """How many subschemas anywhere in `schema` carry `x-mcp-header`."""
    if not isinstance(schema, dict):
        return 0
    count = 1 if "x-mcp-header" in schema else 0
    return count + sum(_count_annotations(sub) for _, sub in subschemas(schema))


def header_params(tool: str, schema: dict[str, Any]) -> tuple[HeaderParam, ...]:
    """Every `x-mcp-header` of a tool's input schema, validated."""
    found: list[HeaderParam] = []
    stack: list[tuple[dict[str, Any], tuple[str, ...]]] = [(schema, ())]
    while stack:
        node, path = stack.pop()
        for name, prop in (node.get("properties") or {}).items():
            if not isinstance(prop, dict):
                continue
            if "x-mcp-header" in prop:
                found.append(_checked(tool, prop, path + (name,)))
            stack.append((prop, path + (name,)))
    if _count_annotations(schema) != len(found):
        raise ValueError(
            f"tool {tool!r}: x-mcp-header may only annotate properties reached through "
            "'properties' alone (not items, anyOf/oneOf/allOf/not, if/then/else or $ref)"
        )
    seen: dict[str, str] = {}
    for param in found:
        key = param.header.lower()
        if key in seen:
            raise ValueError(f"tool {tool!r}: x-mcp-header {param.header!r} repeats {seen[key]!r} (case-insensitive)")
        seen[key] = param.header
    return tuple(sorted(found, key=lambda p: p.path))


def _checked(tool: str, prop: dict[str, Any], path: tuple[str, ...]) -> HeaderParam:
    header = prop["x-mcp-header"]
    where = f"tool {tool!r}, property {'.'.join(path)!r}"
    if not isinstance(header, str) or not header:
        raise ValueError(f"{where}: x-mcp-header must be a non-empty string")
    if not _TOKEN.fullmatch(header):
        raise ValueError(f"{where}: x-mcp-header {header!r} must be an HTTP token (letters, digits, !#$%&'*+-.^_`|~)")
    kind = prop.get("type")
    if kind not in _HEADER_TYPES:
        raise ValueError(f"{where}: x-mcp-header needs a property of type string, integer or boolean, not {kind!r}")
    return HeaderParam(header, path, kind)
