"""A small JSON Schema (2020-12) validator for tool arguments.

It covers the keywords that generated schemas use and the common ones in
hand-written schemas (types, enum/const, object and array keywords, string and
number bounds, composition, if/then/else, local `$ref`, `propertyNames`,
`dependentSchemas`, `minContains`/`maxContains`; patterns with ECMA-262 `$` and
ASCII classes). Unknown keywords are annotations and are ignored, except those it
cannot honour (`unevaluated*`, dynamic refs): a schema using one is refused, as is one
whose keywords hold the wrong kind of value. Errors name the failing field, so a model can
correct its call. No dependency; `$ref` never leaves the document.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable, Iterator

_MAX_DEPTH = 64
_MAX_STEPS = 1_000_000  # a per-validation budget against composition blow-ups

_TYPE_NAMES = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
    list: "array",
    dict: "object",
}


class SchemaViolation(Exception):
    """A value does not match a schema; `path` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.detail = message


def json_type(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


EXACT_FLOATS = 2**53  # a float past this has lost the integer the client wrote (orjson reads ints past 64 bits as floats)


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer() and -EXACT_FLOATS <= value <= EXACT_FLOATS
        )
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return _TYPE_NAMES.get(type(value)) == name


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    """A JSON Schema (ECMA-262) pattern: ASCII `\\d`/`\\w`, and `$` only at the very end."""
    return re.compile(_ecma_dollars(pattern), re.ASCII)


def _ecma_dollars(pattern: str) -> str:
    """`$` outside a character class becomes `\\Z` (Python's `$` also matches before a final newline)."""
    out, in_class, index = [], False, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        out.append("\\Z" if char == "$" and not in_class else char)
        index += 1
    return "".join(out)


# Keywords this validator does not implement: a raw schema using one is refused at registration
# rather than validated silently wrong.
UNSUPPORTED = ("unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$dynamicAnchor", "$recursiveRef")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")


def subschemas(node: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The subschemas directly inside a schema object, each with its location (`properties/name`, ...)."""
    for key in _SCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            yield from ((f"{key}/{name}", sub) for name, sub in node[key].items())
    for key in _SCHEMA_LISTS:
        if isinstance(node.get(key), list):
            yield from ((f"{key}/{index}", sub) for index, sub in enumerate(node[key]))
    for key in _SCHEMA_VALUES:
        if key in node:
            yield key, node[key]


# What the keywords the validator reads must hold (besides subschemas): anything else would fail every call.
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains")
_KEYWORD_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(_COUNTS, (int,)),
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"), (int, float)),
    **dict.fromkeys(("enum", "required", *_SCHEMA_LISTS), (list,)),
    **dict.fromkeys(("dependentRequired", *_SCHEMA_MAPS), (dict,)),
    "type": (str, list), "pattern": (str,), "uniqueItems": (bool,), "$ref": (str,),
}


def check_supported(schema: Any) -> None:
    """Raise ValueError naming the first keyword this validator cannot honour, a malformed keyword
    (e.g. a draft-4 `items` array where 2020-12 wants one schema), or an invalid pattern."""
    stack = [(schema, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            hint = " (a list of item schemas is 'prefixItems' in 2020-12)" if where.endswith("/items") and isinstance(node, list) else ""
            raise ValueError(f"the schema has {node!r} at {where or 'its root'}, where a schema (an object or a boolean) belongs{hint}")
        for keyword in UNSUPPORTED:
            if keyword in node:
                raise ValueError(f"the schema uses {keyword!r} at {where or 'its root'}, which mcpcore does not validate")
        for keyword, kinds in _KEYWORD_TYPES.items():
            if keyword not in node:
                continue
            value = node[keyword]
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):  # e.g. draft-4's exclusiveMinimum: true
                wanted = " or ".join(_TYPE_NAMES[kind] for kind in kinds)
                raise ValueError(f"the schema's {keyword!r} at {where or 'its root'} must be {wanted}, not {value!r}")
        patterns = list(node.get("patternProperties", {})) + ([node["pattern"]] if "pattern" in node else [])
        for pattern in patterns:
            try:
                _regex(pattern)
            except re.error as error:
                raise ValueError(f"the schema has an invalid pattern {pattern!r} at {where or 'its root'}: {error}") from None
        stack.extend((sub, f"{where}/{location}") for location, sub in subschemas(node))


def _count(number: Any, noun: str) -> str:
    """`1 character`, `3 characters`: a bound said in words that read right."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _describe(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    if "const" in schema:
        return f"exactly {schema['const']!r}"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    return kind or "a matching value"


_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "x-mcp-header"})
_LEAF_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "boolean": (bool,), "null": (type(None),), "array": (list,),
                                            "integer": (int,), "number": (int, float)}  # JSON as orjson parses it


def _leaf_types(schema: Any) -> tuple[type, ...] | None:
    """The exact Python types a `{"type": T}` leaf (annotations aside) admits; None for any other schema."""
    if not isinstance(schema, dict) or schema.keys() - _ANNOTATIONS != {"type"}:
        return None
    kind = schema["type"]
    return _LEAF_TYPES.get(kind) if isinstance(kind, str) else None


def _fast_check(schema: Any) -> Any:
    """A quick yes/no check for the common simple schemas, or None when not simple.

    Covers `{"type": T}` leaves and objects of them with `properties`, `required`
    and `additionalProperties: false`; anything else uses the full validator.
    """
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if not isinstance(kind, str):
        return None
    keys = schema.keys() - _ANNOTATIONS
    exact = _leaf_types(schema)
    if exact is not None:
        return lambda value: type(value) in exact
    if kind != "object" or not keys <= {"type", "properties", "required", "additionalProperties"}:
        return None
    extra = schema.get("additionalProperties", True)
    if extra not in (True, False):
        return None
    # A leaf's exact types are checked in place (no call per argument), anything deeper by its own check.
    checks = {name: _leaf_types(sub) or _fast_check(sub) for name, sub in schema.get("properties", {}).items()}
    if any(check is None for check in checks.values()):
        return None
    required = tuple(schema.get("required", ()))

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return False
        for name in required:
            if name not in value:
                return False
        for name, item in value.items():
            item_check = checks.get(name)
            if item_check is None:
                if extra is False:
                    return False
            elif item_check.__class__ is tuple:
                if type(item) not in item_check:
                    return False
            elif not item_check(item):
                return False
        return True

    return check


class Validator:
    """Validates values against one schema document (the root of its `$ref`s)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        check_supported(schema)
        self.root = schema
        self._anchors = dict(_collect_anchors(schema))
        self._steps = 0
        self._following: set[tuple[int, int]] = set()  # ($ref target, value) pairs being checked
        self._quick = _fast_check(schema)

    def accepts(self, value: Any) -> bool:
        """Whether the value is valid (no explanation)."""
        try:
            self.validate(value)
        except SchemaViolation:
            return False
        return True

    @property
    def quick(self) -> Callable[[Any], bool] | None:
        """The yes/no check of a simple schema (exact-type leaves and objects of them), or None:
        what it says yes to is valid as it stands, with nothing to coerce."""
        return self._quick

    def validate(self, value: Any) -> None:
        """Raise `SchemaViolation` for the first problem found."""
        if self._quick is not None and self._quick(value):
            return
        self._steps = 0
        self._check(value, self.root, "", 0)

    def _resolve(self, ref: str) -> Any:
        if ref.startswith("#/") or ref == "#":
            from urllib.parse import unquote

            node: Any = self.root
            try:
                for part in ref[2:].split("/") if ref != "#" else []:
                    part = unquote(part).replace("~1", "/").replace("~0", "~")
                    node = node[int(part)] if isinstance(node, list) else node[part]
            except (KeyError, IndexError, ValueError, TypeError):
                node = None
            if isinstance(node, (dict, bool)):
                return node
        elif ref.startswith("#") and ref[1:] in self._anchors:
            return self._anchors[ref[1:]]
        raise SchemaViolation("", f"the tool's schema has an unresolvable $ref {ref!r}")

    def _check(self, value: Any, schema: Any, path: str, depth: int) -> None:
        if schema is True or schema == {}:
            return
        if schema is False:
            raise SchemaViolation(path, "no value is allowed here")
        if depth > _MAX_DEPTH:
            raise SchemaViolation(path, "the schema nests too deeply to validate")
        self._steps += 1
        if self._steps > _MAX_STEPS:
            raise SchemaViolation(path, "the schema is too complex to validate")
        if "$ref" in schema:
            self._follow(value, schema["$ref"], path, depth)
        kind = schema.get("type")
        if kind is not None:
            kinds = kind if isinstance(kind, list) else [kind]
            if not any(_is_type(value, k) for k in kinds):
                raise SchemaViolation(path, f"expected {_describe(schema)}, got {json_type(value)}")
        if "enum" in schema and not any(_equal(value, v) for v in schema["enum"]):
            raise SchemaViolation(path, f"expected {_describe(schema)}, got {value!r}")
        if "const" in schema and not _equal(value, schema["const"]):
            raise SchemaViolation(path, f"expected {_describe(schema)}, got {value!r}")
        if isinstance(value, dict):
            self._check_object(value, schema, path, depth)
        elif isinstance(value, list):
            self._check_array(value, schema, path, depth)
        elif isinstance(value, str):
            _check_string(value, schema, path)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            _check_number(value, schema, path)
        self._check_composition(value, schema, path, depth)

    def _follow(self, value: Any, ref: str, path: str, depth: int) -> None:
        """Check against a `$ref` target; re-entering it for the same value is a cycle."""
        target = self._resolve(ref)
        key = (id(target), id(value))
        if key in self._following:
            raise SchemaViolation(path, f"the schema refers back to {ref!r} without going deeper into the value")
        self._following.add(key)
        try:
            self._check(value, target, path, depth + 1)
        finally:
            self._following.discard(key)

    def _check_object(self, value: dict[str, Any], schema: dict[str, Any], path: str, depth: int) -> None:
        for name in schema.get("required", ()):
            if name not in value:
                raise SchemaViolation(_join(path, name), "is required but missing")
        properties = schema.get("properties", {})
        patterns = schema.get("patternProperties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            matched = False
            if key in properties:
                matched = True
                self._check(item, properties[key], _join(path, key), depth + 1)
            for pattern, sub in patterns.items():
                if _regex(pattern).search(key):
                    matched = True
                    self._check(item, sub, _join(path, key), depth + 1)
            if not matched:
                if extra is False:
                    allowed = ", ".join(sorted(properties)) or "none"
                    raise SchemaViolation(_join(path, key), f"is not an accepted field (accepted: {allowed})")
                self._check(item, extra, _join(path, key), depth + 1)
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            raise SchemaViolation(path, f"needs at least {_count(schema['minProperties'], 'field')}")
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            raise SchemaViolation(path, f"allows at most {_count(schema['maxProperties'], 'field')}")
        for name, needed in schema.get("dependentRequired", {}).items():
            if name in value:
                for other in needed:
                    if other not in value:
                        raise SchemaViolation(_join(path, other), f"is required when {name!r} is given")
        for name, sub in schema.get("dependentSchemas", {}).items():
            if name in value:
                self._check(value, sub, path, depth + 1)
        if "propertyNames" in schema:
            for key in value:
                if not self._matches(key, schema["propertyNames"], depth):
                    raise SchemaViolation(_join(path, key), "is not an accepted field name")

    def _check_array(self, value: list[Any], schema: dict[str, Any], path: str, depth: int) -> None:
        prefix = schema.get("prefixItems", [])
        for index, sub in enumerate(prefix[: len(value)]):
            self._check(value[index], sub, _join(path, index), depth + 1)
        items = schema.get("items")
        if items is not None:
            for index in range(len(prefix), len(value)):
                self._check(value[index], items, _join(path, index), depth + 1)
        if "minItems" in schema and len(value) < schema["minItems"]:
            raise SchemaViolation(path, f"needs at least {_count(schema['minItems'], 'item')}, got {len(value)}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise SchemaViolation(path, f"allows at most {_count(schema['maxItems'], 'item')}, got {len(value)}")
        if schema.get("uniqueItems"):
            seen: set[Any] = set()  # linear: each item's canonical form is hashed once
            for index, item in enumerate(value):
                key = self._canonical(item, path)
                if key in seen:
                    raise SchemaViolation(_join(path, index), "repeats an earlier item; items must be unique")
                seen.add(key)
        if "contains" in schema:
            found = sum(1 for v in value if self._matches(v, schema["contains"], depth))
            least, most = schema.get("minContains", 1), schema.get("maxContains")
            if found < least:
                raise SchemaViolation(path, "contains no item of the required kind" if least == 1
                                      else f"needs at least {least} items of the required kind, has {found}")
            if most is not None and found > most:
                raise SchemaViolation(path, f"allows at most {_count(most, 'item')} of the required kind, has {found}")

    def _check_composition(self, value: Any, schema: dict[str, Any], path: str, depth: int) -> None:
        for sub in schema.get("allOf", ()):
            self._check(value, sub, path, depth + 1)
        if "anyOf" in schema and not any(self._matches(value, s, depth) for s in schema["anyOf"]):
            raise SchemaViolation(path, f"expected {_alternatives(schema['anyOf'])}, got {json_type(value)}")
        if "oneOf" in schema:
            hits = sum(1 for s in schema["oneOf"] if self._matches(value, s, depth))
            if hits != 1:
                raise SchemaViolation(path, f"must match exactly one of {_alternatives(schema['oneOf'])}")
        if "not" in schema and self._matches(value, schema["not"], depth):
            raise SchemaViolation(path, "matches a schema it must not match")
        if "if" in schema:
            branch = "then" if self._matches(value, schema["if"], depth) else "else"
            if branch in schema:
                self._check(value, schema[branch], path, depth + 1)

    def _canonical(self, value: Any, path: str) -> Any:
        """A hashable form equal exactly when the JSON values are equal (1 == 1.0, never True == 1),
        built without recursion and counted against the step budget."""
        out: list[Any] = []
        stack: list[Any] = [value]
        while stack:
            node = stack.pop()
            self._steps += 1
            if self._steps > _MAX_STEPS:
                raise SchemaViolation(path, "the value is too large to validate")
            if isinstance(node, _Close):
                items = out[len(out) - node.count :]
                del out[len(out) - node.count :]
                out.append(("l", tuple(items)) if node.kind == "l" else ("d", frozenset(zip(node.keys, items))))
            elif isinstance(node, list):
                stack.append(_Close("l", len(node), ()))
                stack.extend(reversed(node))
            elif isinstance(node, dict):
                stack.append(_Close("d", len(node), tuple(node)))
                stack.extend(reversed(list(node.values())))
            else:
                out.append(("b", node) if isinstance(node, bool) else ("v", node))
        return out[0]

    def _matches(self, value: Any, schema: Any, depth: int) -> bool:
        try:
            self._check(value, schema, "", depth + 1)
        except SchemaViolation:
            if self._steps > _MAX_STEPS:
                raise
            return False
        return True


def _alternatives(schemas: list[Any]) -> str:
    return " or ".join(_describe(s) if isinstance(s, dict) else str(s) for s in schemas)


def _check_string(value: str, schema: dict[str, Any], path: str) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        raise SchemaViolation(path, f"needs at least {_count(schema['minLength'], 'character')}")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        raise SchemaViolation(path, f"allows at most {_count(schema['maxLength'], 'character')}")
    if "pattern" in schema and not _regex(schema["pattern"]).search(value):
        raise SchemaViolation(path, f"must match the pattern {schema['pattern']!r}")


def _check_number(value: float, schema: dict[str, Any], path: str) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        raise SchemaViolation(path, f"must be >= {schema['minimum']}, got {value}")
    if "maximum" in schema and value > schema["maximum"]:
        raise SchemaViolation(path, f"must be <= {schema['maximum']}, got {value}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        raise SchemaViolation(path, f"must be > {schema['exclusiveMinimum']}, got {value}")
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        raise SchemaViolation(path, f"must be < {schema['exclusiveMaximum']}, got {value}")
    step = schema.get("multipleOf")
    if step and _remainder(value, step) != 0:
        raise SchemaViolation(path, f"must be a multiple of {step}, got {value}")


def _remainder(value: float, step: float) -> Any:
    """Exact remainder (floats via their shortest decimal repr)."""
    if isinstance(value, int) and isinstance(step, int):
        return value % step
    from decimal import Context, Decimal  # rare path; keeps idle memory down

    # Enough digits for any quotient of two floats (10**632 at most): the default 28 would refuse 1e300 / 0.01.
    return Context(prec=700).remainder(Decimal(repr(value)), Decimal(repr(step)))


class _Close:
    """A marker on `_canonical`'s stack: the last `count` results form one array or object."""

    __slots__ = ("kind", "count", "keys")

    def __init__(self, kind: str, count: int, keys: tuple[str, ...]) -> None:
        self.kind, self.count, self.keys = kind, count, keys


def _equal(a: Any, b: Any) -> bool:
    """JSON equality, at any depth: booleans never equal numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return a == b


def _collect_anchors(schema: Any) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("$anchor"), str):
                found.append((node["$anchor"], node))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def matches(value: Any, schema: dict[str, Any]) -> bool:
    """Whether a value matches a self-contained schema."""
    return Validator(schema).accepts(value)
