"""Python type hints to JSON Schema (2020-12), and JSON back to Python values.

`schema_for(hint)` builds the schema a tool advertises for a parameter or a
return annotation; `converter_for(hint)` builds the function that turns the
validated JSON value into what the Python function expects (dataclasses,
enums, tuples). Both run once, at registration, never per call.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import operator
import sys
import types
import typing
from typing import Any, Callable, Literal, Union, is_typeddict

from .validation import Validator

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


def split_annotated(hint: Any) -> tuple[Any, str | None]:
    """`Annotated[T, "description"]` → (T, "description")."""
    if typing.get_origin(hint) is typing.Annotated:
        base, *extras = typing.get_args(hint)
        text = next((e for e in extras if isinstance(e, str)), None)
        return base, text
    return hint, None


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
    )


def schema_for(hint: Any) -> dict[str, Any]:
    """The JSON Schema for one type hint (raises TypeError for unsupported hints)."""
    hint, description = split_annotated(hint)
    schema = _schema(hint, frozenset())
    if description:
        schema = {**schema, "description": description}
    return schema


def _schema(hint: Any, seen: frozenset[Any]) -> dict[str, Any]:
    hint, description = split_annotated(hint)
    if description is not None:
        return {**_schema(hint, seen), "description": description}
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
    for validator, convert in members:
        if validator.accepts(value):
            return convert(value)
    return value


def to_jsonable(value: Any) -> Any:
    """Dataclasses, enums, tuples and sets to plain JSON values (for structured output)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    return value
