"""Reading what models often send wrong: `"41"` for 41, `"true"` for true, an object as a JSON string.

`coerce(value, schema)` walks a tool's arguments along its input schema and, where
the schema wants a number, an integer, a boolean, an object or an array and the
value is a string that reads as one, replaces it; a string where a string is
allowed is left alone. What cannot be read is left as sent, with a note saying
why, so the validation error that follows can tell the model what to fix. It
never mutates its input. On by default; `strict=True` (per tool or server) turns it off.
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

from .._wire.validation import json_type

__all__ = ["coerce"]

_INTEGER = re.compile(r"-?[0-9]{1,400}")  # int() refuses more than 4,300 digits; no real argument has 400
_WIRE_INTEGERS = range(-(2**63), 2**64)  # what a JSON answer can carry back (orjson writes no wider integer)
_NUMBER = re.compile(r"-?[0-9]{1,400}(\.[0-9]{1,400})?([eE][-+]?[0-9]{1,4})?")
_MAX_HOPS = 32  # $ref and anyOf steps that do not descend into the value (a cyclic schema ends here)
_MAX_DEPTH = 64  # levels of the value read; deeper ones are left to the validator, which refuses them


def coerce(value: Any, schema: Any) -> tuple[Any, list[str]]:
    """The value with readable strings read; notes on those that could not be."""
    notes: list[str] = []
    root = schema if isinstance(schema, dict) else {}
    return _coerce(value, schema, root, "", notes, 0, 0), notes


def _types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a schema takes; an `enum` that names no type (an Enum's, a Literal's) takes its values' types."""
    kind = schema.get("type")
    if kind is None and isinstance(schema.get("enum"), list):
        return {json_type(member) for member in schema["enum"]}
    return {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else set()


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> Any:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else schema


def _coerce(value: Any, schema: Any, root: dict[str, Any], path: str, notes: list[str], hops: int, depth: int) -> Any:
    if not isinstance(schema, dict) or hops > _MAX_HOPS or depth > _MAX_DEPTH:
        return value
    if "$ref" in schema:
        return _coerce(value, _resolve(schema, root), root, path, notes, hops + 1, depth)
    for key in ("anyOf", "oneOf"):
        members = schema.get(key)
        if isinstance(members, list):
            return _one_of(value, [m for m in members if isinstance(m, dict)], root, path, notes, hops, depth)
    types = _types(schema)
    if isinstance(value, str) and types and "string" not in types:
        return _read(value, types, path, notes)
    if isinstance(value, dict) and "object" in types:
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        extra = schema.get("additionalProperties")
        return {key: _coerce(item, properties.get(key, extra), root, f"{path}.{key}" if path else key, notes, 0, depth + 1)
                for key, item in value.items()}
    if isinstance(value, list) and "array" in types:
        prefix = schema.get("prefixItems") if isinstance(schema.get("prefixItems"), list) else []
        items = schema.get("items")
        return [_coerce(item, prefix[i] if i < len(prefix) else items, root, f"{path}[{i}]", notes, 0, depth + 1)
                for i, item in enumerate(value)]
    return value


def _one_of(
    value: Any, members: list[dict[str, Any]], root: dict[str, Any], path: str, notes: list[str], hops: int, depth: int
) -> Any:
    """A union: a string stays one if any member takes strings; else the first member that reads it."""
    resolved = [_resolve(member, root) for member in members]
    if isinstance(value, str):
        if any("string" in _types(m) or not _types(m) for m in resolved if isinstance(m, dict)):
            return value
        tried: list[str] = []
        for member in resolved:
            attempt = _coerce(value, member, root, path, tried, hops + 1, depth)
            if attempt is not value:
                return attempt
        notes += tried[:1]
        return value
    container = "object" if isinstance(value, dict) else "array" if isinstance(value, list) else None
    for member in resolved:
        if container is not None and isinstance(member, dict) and container in _types(member):
            return _coerce(value, member, root, path, notes, hops + 1, depth)
    return value


def _read(text: str, types: set[str], path: str, notes: list[str]) -> Any:
    stripped = text.strip()
    if "integer" in types and _INTEGER.fullmatch(stripped) and int(stripped) in _WIRE_INTEGERS:
        return int(stripped)
    if "number" in types and _NUMBER.fullmatch(stripped):
        number = float(stripped)
        if math.isfinite(number):
            return int(stripped) if _INTEGER.fullmatch(stripped) and int(stripped) in _WIRE_INTEGERS else number
    if "boolean" in types and stripped.lower() in ("true", "false"):
        return stripped.lower() == "true"
    if ("object" in types and stripped.startswith("{")) or ("array" in types and stripped.startswith("[")):
        try:
            parsed = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            parsed = None
        if ("object" in types and isinstance(parsed, dict)) or ("array" in types and isinstance(parsed, list)):
            return parsed
    wanted = " or ".join(sorted(types))
    notes.append(f"{path or 'the value'}: the string {_short(text)} does not read as {wanted}")
    return text


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def could_coerce(schema: Any) -> bool:
    """Whether any argument under `schema` could be a string to read (checked once per tool): for a
    tool taking only strings, coercion costs nothing per call."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return isinstance(schema, dict) and bool(schema.get("additionalProperties"))
    stack: list[Any] = list(properties.values())
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack += node
        elif isinstance(node, dict):
            if "$ref" in node or _types(node) - {"string", "null"}:
                return True
            stack += [v for k, v in node.items() if k not in ("enum", "const", "default", "examples")]
    return False
