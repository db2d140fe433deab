"""Python type hints to JSON Schema (2020-12), and JSON back to Python values.

`schema_for(hint)` builds the schema a tool advertises for a parameter or a
return annotation; `converter_for(hint)` builds the function that turns the
validated JSON value into what the Python function expects (dataclasses,
enums, tuples, dates, UUIDs, decimals, paths, bytes, pydantic models). Both run
once, at registration, never per call. `Annotated` metadata may be a
description string, a dict of JSON Schema keywords, a `Field`, or
annotated-types constraints (`Ge`, `MaxLen`, ..., read by their attributes,
never imported); anything else is refused at registration. Pydantic models are
recognised by their methods (`model_json_schema`, `model_validate`), so pydantic
is never imported either.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import enum
import functools
import operator
import pathlib
import sys
import types
import typing
import uuid
from typing import Any, Callable, Literal, Union, is_typeddict

from .._wire.validation import Validator

# Required/NotRequired wrappers exist from Python 3.11; on 3.10 nothing wraps.
_REQUIRED_WRAPPERS = tuple(getattr(typing, n) for n in ("Required", "NotRequired") if hasattr(typing, n))

_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    Any: {},
    object: {},
}

Converter = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


def keeps_value(converter: Converter) -> bool:
    """Whether the converter hands back a value of its JSON type unchanged: none to make (or `int`,
    which an integer already is; a checker that lets only exact types through never gives it 2.0)."""
    return converter is _identity or converter is int


def _datetime(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value)


def _time(value: str) -> datetime.time:
    return datetime.time.fromisoformat(value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value)


def _decimal(value: Any) -> Any:
    import decimal  # imported by whoever annotated a parameter with it; never at start-up (idle memory)

    try:
        return decimal.Decimal(str(value))
    except decimal.InvalidOperation:
        raise ValueError(f"{value!r} is not a decimal number") from None


def _bytes(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        raise ValueError("is not valid base64") from None


_DECIMAL_TEXT = r"^-?[0-9]+(\.[0-9]+)?$"
# Types carried as JSON strings: their schema, and the converter from the JSON value.
_TEXTUAL: dict[Any, tuple[dict[str, Any], Converter]] = {  # Decimal by name: `decimal` is imported only if used
    datetime.datetime: ({"type": "string", "format": "date-time"}, _datetime),
    datetime.date: ({"type": "string", "format": "date"}, datetime.date.fromisoformat),
    datetime.time: ({"type": "string", "format": "time"}, _time),
    uuid.UUID: ({"type": "string", "format": "uuid"}, uuid.UUID),
    "decimal.Decimal": ({"anyOf": [{"type": "number"}, {"type": "string", "pattern": _DECIMAL_TEXT}]}, _decimal),
    pathlib.Path: ({"type": "string"}, pathlib.Path),
    pathlib.PurePath: ({"type": "string"}, pathlib.PurePath),
    bytes: ({"type": "string", "contentEncoding": "base64"}, _bytes),
}


@dataclasses.dataclass(frozen=True)
class Field:
    """Constraints and a description for a parameter: `Annotated[int, Field("how many", ge=1, le=10)]`."""

    description: str | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    multiple_of: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    examples: tuple[Any, ...] | None = None


_BOUNDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum",
           "multiple_of": "multipleOf", "pattern": "pattern"}
_LENGTHS = {"string": ("minLength", "maxLength"), "array": ("minItems", "maxItems"),
            "object": ("minProperties", "maxProperties")}


def _textual(hint: Any) -> tuple[dict[str, Any], Converter] | None:
    """The schema and converter of a type carried as a JSON string, if `hint` is one."""
    if not isinstance(hint, type):
        return None
    return _TEXTUAL.get(hint) or _TEXTUAL.get(f"{hint.__module__}.{hint.__qualname__}")


def is_model(hint: Any) -> bool:
    """A pydantic (v2) model class, recognised by its methods."""
    return isinstance(hint, type) and callable(getattr(hint, "model_json_schema", None)) \
        and callable(getattr(hint, "model_validate", None))


def split_annotated(hint: Any) -> tuple[Any, str | None]:
    """`Annotated[T, "description", ...]` → (T, its description)."""
    if typing.get_origin(hint) is typing.Annotated:
        base, *extras = typing.get_args(hint)
        return base, _annotation(base, extras)[0]
    return hint, None


def _annotation(base: Any, extras: list[Any]) -> tuple[str | None, list[tuple[str, Any]]]:
    """The description and the constraints (name, value) an `Annotated` hint's metadata holds."""
    description: str | None = None
    constraints: list[tuple[str, Any]] = []
    for extra in extras:
        if isinstance(extra, str):
            description = description or extra
        elif isinstance(extra, dict):
            constraints += [("keyword", item) for item in extra.items()]
        elif isinstance(extra, Field):
            description = description or extra.description
            constraints += [(name, value) for name, value in dataclasses.asdict(extra).items()
                            if value is not None and name != "description"]
        elif isinstance(getattr(extra, "metadata", None), list):  # a pydantic FieldInfo
            text, inner = _annotation(base, [getattr(extra, "description", None) or "", *extra.metadata])
            description, constraints = description or text or None, constraints + inner
        else:
            found = [(name, getattr(extra, name)) for name in (*_BOUNDS, "min_length", "max_length")
                     if getattr(extra, name, None) is not None]
            if not found:
                raise TypeError(f"Annotated[{_type_label(base)}, {extra!r}]: mcpcore reads descriptions (str), "
                                "JSON Schema keywords (dict), mcpcore.Field and annotated-types bounds, not this")
            constraints += found
    return description, constraints


def _constrained(schema: dict[str, Any], constraints: list[tuple[str, Any]], base: Any) -> dict[str, Any]:
    schema = dict(schema)
    for name, value in constraints:
        if name == "keyword":
            schema[value[0]] = value[1]
        elif name == "examples":
            schema["examples"] = list(value)
        elif name in _BOUNDS:
            schema[_BOUNDS[name]] = value
        else:
            lengths = _LENGTHS.get(schema.get("type"))  # type: ignore[arg-type]
            if lengths is None:
                raise TypeError(f"{name} applies to strings, lists and dicts, not {_type_label(base)}")
            schema[lengths[name == "max_length"]] = value
    return schema


def _type_label(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _is_union(origin: Any) -> bool:
    return origin is Union or origin is types.UnionType


def is_structured(hint: Any) -> bool:
    """Whether a return annotation produces `structuredContent`."""
    hint, _ = split_annotated(hint)
    origin = typing.get_origin(hint)
    if _is_union(origin):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return len(args) == 1 and is_structured(args[0])
    return (
        hint is dict
        or origin is dict
        or is_typeddict(hint)
        or (isinstance(hint, type) and dataclasses.is_dataclass(hint))
        or is_model(hint)
    )


def schema_for(hint: Any) -> dict[str, Any]:
    """The JSON Schema for one type hint (raises TypeError for unsupported hints)."""
    return _schema(hint, frozenset())


def _schema(hint: Any, seen: frozenset[Any]) -> dict[str, Any]:
    if typing.get_origin(hint) is typing.Annotated:
        base, *extras = typing.get_args(hint)
        description, constraints = _annotation(base, extras)
        schema = _constrained(_schema(base, seen), constraints, base)
        return {**schema, "description": description} if description else schema
    if hint is None:
        hint = type(None)
    if type(hint) is type or hint is Any:  # not isinstance: on 3.10 `list[X]` passes for a type, unhashable
        primitive = _PRIMITIVES.get(hint)
        if primitive is not None:
            return dict(primitive)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if _is_union(origin):
        members = [_schema(a, seen) for a in args]
        return {"anyOf": members}
    if origin is Literal:
        return {"enum": list(args)}
    if hint in (list, set, frozenset) or origin in (list, set, frozenset):
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = _schema(args[0], seen)
        if hint in (set, frozenset) or origin in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if hint is tuple or origin is tuple:
        if not args:
            return {"type": "array"}
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _schema(args[0], seen)}
        items = [_schema(a, seen) for a in args]
        return {"type": "array", "prefixItems": items, "minItems": len(items), "maxItems": len(items)}
    if hint is dict or origin is dict:
        schema = {"type": "object"}
        if args:
            if args[0] is not str:
                raise TypeError(f"dict keys must be str in a JSON schema, not {args[0]!r}")
            schema["additionalProperties"] = _schema(args[1], seen)
        return schema
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [member.value for member in hint]}
    textual = _textual(hint)
    if textual is not None:
        return dict(textual[0])
    if is_model(hint):
        return hint.model_json_schema()  # its `$defs` are hoisted to the root by `hoist_defs`
    if isinstance(hint, type) and hint in seen:
        raise TypeError(f"recursive type {hint!r} is not supported in a generated schema")
    if is_typeddict(hint):
        return _object_schema(*_typeddict_fields(hint), seen | {hint})
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _object_schema(*_dataclass_fields(hint), seen | {hint})
    raise TypeError(f"cannot build a JSON schema for {hint!r}")


def _object_schema(
    fields: dict[str, Any], required: list[str], defaults: dict[str, Any], seen: frozenset[Any]
) -> dict[str, Any]:
    properties = {}
    for name, hint in fields.items():
        prop = _schema(hint, seen)
        if name in defaults:
            prop["default"] = defaults[name]
        properties[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _field_hints(owner: Any) -> dict[str, Any]:
    """`get_type_hints`, with strings inside builtin generics (`list["Node"]`) evaluated too.

    Python 3.11+ does that itself; 3.10 leaves them as strings.
    """
    hints = typing.get_type_hints(owner, include_extras=True)
    if sys.version_info >= (3, 11):
        return hints
    namespace = {**vars(sys.modules[owner.__module__]), owner.__name__: owner}
    return {name: _evaluate_strings(hint, namespace) for name, hint in hints.items()}


def _evaluate_strings(hint: Any, namespace: dict[str, Any]) -> Any:
    if isinstance(hint, str):
        return eval(hint, namespace)  # what get_type_hints does with the same annotation text
    origin = typing.get_origin(hint)
    if origin is Literal:  # its strings are values, not annotations
        return hint
    if origin is typing.Annotated:  # its metadata is kept as written
        return typing.Annotated[(_evaluate_strings(typing.get_args(hint)[0], namespace), *hint.__metadata__)]
    args = typing.get_args(hint)
    if not args:
        return hint
    resolved = tuple(_evaluate_strings(a, namespace) for a in args)
    if isinstance(hint, types.GenericAlias):
        return types.GenericAlias(origin, resolved)
    if isinstance(hint, types.UnionType):
        return functools.reduce(operator.or_, resolved)
    return hint.copy_with(resolved) if hasattr(hint, "copy_with") else hint


def _typeddict_fields(hint: Any) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    hints = _field_hints(hint)
    fields, required = {}, []
    for name, field_hint in hints.items():
        wrapper = typing.get_origin(field_hint)
        # __required_keys__ misses NotRequired written as a string annotation (3.11).
        if wrapper in _REQUIRED_WRAPPERS:
            field_hint = typing.get_args(field_hint)[0]
            if wrapper is getattr(typing, "Required", None):
                required.append(name)
        elif name in hint.__required_keys__:
            required.append(name)
        fields[name] = field_hint
    return fields, required, {}


def _dataclass_fields(hint: Any) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    hints = _field_hints(hint)
    fields, required, defaults = {}, [], {}
    for field in dataclasses.fields(hint):
        if not field.init:
            continue
        fields[field.name] = hints[field.name]
        if field.default is not dataclasses.MISSING:
            defaults[field.name] = jsonable_default(field.default)
        elif field.default_factory is dataclasses.MISSING:
            required.append(field.name)
    return fields, required, defaults


def jsonable_default(value: Any) -> Any:
    """A default value as it appears in a schema (enum members by value)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


def converter_for(hint: Any) -> Converter:
    """A function from validated JSON to the Python value the hint asks for."""
    hint, _ = split_annotated(hint)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if _is_union(origin):
        converters = [(a, converter_for(a)) for a in args]
        if all(c is _identity for _, c in converters):
            return _identity
        checked = [(Validator(_schema(split_annotated(a)[0], frozenset())), convert) for a, convert in converters]
        return lambda value: _convert_union(value, checked)
    if origin is Literal:
        return functools.partial(_literal_member, args)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint
    textual = _textual(hint)
    if textual is not None:
        return textual[1]
    if is_model(hint):
        return hint.model_validate  # its ValidationError is a ValueError
    if hint is float:
        return float
    if hint is int:
        return int  # JSON Schema lets 2.0 pass as an integer
    if origin in (list, set, frozenset, tuple) or hint in (set, frozenset, tuple):
        return _sequence_converter(hint, origin or hint, args)
    if origin is dict and args:
        inner = converter_for(args[1])
        if inner is _identity:
            return _identity
        return lambda value: {k: inner(v) for k, v in value.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        fields, _, _ = _dataclass_fields(hint)
        converters = {name: converter_for(h) for name, h in fields.items()}
        return lambda value: hint(**{k: converters[k](v) for k, v in value.items() if k in converters})
    if is_typeddict(hint):
        fields, _, _ = _typeddict_fields(hint)
        converters = {name: converter_for(h) for name, h in fields.items()}
        return lambda value: {k: converters[k](v) if k in converters else v for k, v in value.items()}
    return _identity


def _sequence_converter(hint: Any, container: Any, args: tuple[Any, ...]) -> Converter:
    if container is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        converters = [converter_for(a) for a in args]
        return lambda value: tuple(c(v) for c, v in zip(converters, value))
    inner = converter_for(args[0]) if args else _identity
    build = container if container in (set, frozenset, tuple) else list
    if inner is _identity and build is list:
        return _identity
    return lambda value: build(inner(v) for v in value)


def _literal_member(members: tuple[Any, ...], value: Any) -> Any:
    """The Literal member a validated value equals as JSON: 1.0 is the member 1, true is never 1."""
    return next((m for m in members if m == value and isinstance(m, bool) == isinstance(value, bool)), value)


def _convert_union(value: Any, members: list[tuple[Any, Converter]]) -> Any:
    """Convert with the first union member whose schema (built once) the value matches."""
    failure: Exception | None = None
    for validator, convert in members:
        if validator.accepts(value):
            try:
                return convert(value)
            except (TypeError, ValueError) as error:  # e.g. "hello" for UUID in `UUID | str`: try the next member
                failure = failure or error
    if failure is not None:
        raise failure
    return value


def hoist_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with the `$defs` of nested subschemas (pydantic models') moved to its root, where
    their `#/$defs/...` references point (TypeError when two differ under one name)."""
    found: dict[str, Any] = {}
    maps = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")  # name → schema
    values = ("const", "enum", "default", "examples")  # JSON values, not schemas

    def lift(node: Any, root: bool) -> Any:
        if isinstance(node, list):
            return [lift(item, False) for item in node]
        if not isinstance(node, dict):
            return node
        node = dict(node)
        defs = node.pop("$defs", None) if not root else None
        for name, definition in (defs or {}).items():
            definition = lift(definition, False)
            if found.setdefault(name, definition) != definition:
                raise TypeError(f"two different schemas are both named {name!r}; rename one of the models")
        return {key: value if key in values else
                {name: lift(sub, False) for name, sub in value.items()} if key in maps and isinstance(value, dict) else
                lift(value, False) for key, value in node.items()}

    lifted = lift(schema, True)
    if found:
        lifted["$defs"] = {**found, **lifted.get("$defs", {})}
    return lifted


def to_jsonable(value: Any) -> Any:
    """Dataclasses, models, enums, dates, tuples and sets to plain JSON values (for structured output)."""
    if hasattr(value, "model_dump") and is_model(type(value)):
        return value.model_dump(mode="json")
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    decimal = sys.modules.get("decimal")  # not imported: no value can be a Decimal
    if decimal is not None and isinstance(value, decimal.Decimal):
        return format(value, "f")  # never "1E+2": the schema's pattern has no exponent
    if isinstance(value, (uuid.UUID, pathlib.PurePath)):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    return value
