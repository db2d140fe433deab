"""Properties of the argument validator (mcpcore._wire.validation) and the schemas typeschema builds.

On schemas made of the keywords it supports, the validator agrees with the
`jsonschema` library's Draft 2020-12 validator on every value; a keyword it
cannot honour is refused when the schema is registered, not validated wrongly;
and its step budget turns any blow-up into a clear violation.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any, Literal, Optional, Union
from unittest import mock

import pytest
from hypothesis import given, settings, strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from mcpcore import Server
from mcpcore._wire import validation
from mcpcore._app.typeschema import converter_for, schema_for
from mcpcore._wire.validation import UNSUPPORTED, SchemaViolation, Validator, subschemas

PROPERTY = settings(max_examples=60, deadline=None, derandomize=True, database=None)

# A small world of values, so that generated schemas and values often meet.
KEYS = ["a", "b", "c", "ab"]
strings = st.sampled_from(["", "a", "b", "ab", "ba", "abc", "x1", "a\n", "é"]) | st.text("abcx1 ", max_size=4)
numbers = st.integers(-5, 5) | st.integers(-40, 40).map(lambda n: n / 4) | st.integers(-(2**63), 2**64 - 1)
scalars = st.none() | st.booleans() | numbers | strings
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS) | strings, inner, max_size=4), max_leaves=10
)
# Patterns Python's re and ECMA-262 read alike (jsonschema uses re: no `$`, `\d`, `\w`; see the ECMA properties below).
patterns = st.sampled_from(["^a", "b", "^[a-c]+", "x*1", "^.{2}", "[0-9]", "^(a|b)c?"])
TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]
counts = st.integers(0, 3)


def keywords(schema: st.SearchStrategy[Any] | None) -> dict[str, st.SearchStrategy[Any]]:
    """The supported keywords, each with a strategy for its value; with subschemas drawn from `schema` if given."""
    leaves = {
        "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True),
        "enum": st.lists(values, min_size=1, max_size=3),
        "const": values,
        "required": st.lists(st.sampled_from(KEYS), max_size=2, unique=True),
        "minProperties": counts, "maxProperties": counts,
        "dependentRequired": st.dictionaries(st.sampled_from(KEYS), st.lists(st.sampled_from(KEYS), max_size=2, unique=True), max_size=2),
        "minItems": counts, "maxItems": counts,
        "uniqueItems": st.booleans(),
        "minContains": counts, "maxContains": counts,
        "minLength": counts, "maxLength": counts,
        "pattern": patterns,
        "minimum": numbers, "maximum": numbers, "exclusiveMinimum": numbers, "exclusiveMaximum": numbers,
        "multipleOf": st.integers(1, 4),  # integers: on floats the two libraries differ by design (see below)
        "title": st.just("annotations are ignored"), "format": st.sampled_from(["email", "date"]),
    }
    if schema is None:
        return leaves
    keyed = st.dictionaries(st.sampled_from(KEYS), schema, max_size=2)
    schema_list = st.lists(schema, min_size=1, max_size=2)
    return {
        **leaves,
        "properties": keyed, "patternProperties": st.dictionaries(patterns, schema, max_size=2),
        "additionalProperties": schema, "propertyNames": schema, "dependentSchemas": keyed,
        "items": schema, "prefixItems": schema_list, "contains": schema,
        "allOf": schema_list, "anyOf": schema_list, "oneOf": schema_list, "not": schema,
        "if": schema, "then": schema, "else": schema,
    }


def schema_object(schema: st.SearchStrategy[Any] | None) -> st.SearchStrategy[dict[str, Any]]:
    """A schema object with up to three keywords (many at once rarely accept anything)."""
    strategies = keywords(schema)
    return st.lists(st.sampled_from(sorted(strategies)), max_size=3, unique=True).flatmap(
        lambda names: st.fixed_dictionaries({name: strategies[name] for name in names})
    )


def pointer(name: str) -> str:
    """A `$ref` to `$defs/name`, escaped as JSON Pointer says (`~` is `~0`, `/` is `~1`)."""
    return "#/$defs/" + name.replace("~", "~0").replace("/", "~1")


schemas = st.recursive(st.booleans() | schema_object(None), schema_object, max_leaves=6)
root_schemas = schema_object(schemas) | st.builds(
    lambda defs, body: {"$defs": defs, **body, "allOf": [{"$ref": pointer(name)} for name in defs]},
    st.dictionaries(st.sampled_from(["one", "two~", "t/3", "~1"]), schemas, min_size=1, max_size=2), schema_object(schemas),
)


def verdicts(schema: dict[str, Any], value: Any) -> tuple[bool, bool]:
    """(mcpcore, jsonschema) on one value; the schema must be a valid 2020-12 schema."""
    Draft202012Validator.check_schema(schema)
    return Validator(schema).accepts(value), Draft202012Validator(schema).is_valid(value)


# -- agreement with jsonschema ------------------------------------------------------------


@PROPERTY
@given(root_schemas, st.lists(values, min_size=1, max_size=6))
def test_verdicts_agree_with_jsonschema_on_generated_schemas(schema: dict[str, Any], batch: list[Any]) -> None:
    """Nested keywords and local $refs; one Validator is reused across values, as a tool's is."""
    Draft202012Validator.check_schema(schema)
    ours, reference = Validator(schema), Draft202012Validator(schema)
    assert [ours.accepts(v) for v in batch] == [reference.is_valid(v) for v in batch], (schema, batch)


# Keyword families on a tiny world of values, where almost every pair meets an edge.
atoms = st.sampled_from([0, 1, 0.0, 1.0, 2, -1.5, True, False, None, "", "a", "1"])
small_values = st.recursive(atoms, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2), max_leaves=5)
small_schemas = st.sampled_from([
    True, False, {}, {"type": "integer"}, {"type": "number"}, {"type": "string"}, {"type": ["integer", "null"]},
    {"minimum": 1}, {"maximum": 0}, {"const": 1}, {"enum": [True, "a"]}, {"minLength": 1}, {"not": {"type": "boolean"}},
])


def agree(schema: dict[str, Any], value: Any) -> None:
    ours, reference = verdicts(schema, value)
    assert ours == reference, (schema, value)


@PROPERTY
@given(small_values, small_values)
def test_enum_const_and_unique_items_compare_json_values_exactly(a: Any, b: Any) -> None:
    """1 equals 1.0, true never equals 1, at any depth."""
    agree({"const": a}, b)
    agree({"enum": [a, "other"]}, b)
    agree({"uniqueItems": True}, [a, b])


@PROPERTY
@given(st.lists(small_schemas, min_size=1, max_size=3), small_values)
def test_composition_keywords_agree_with_jsonschema(alternatives: list[Any], value: Any) -> None:
    for keyword in ("allOf", "anyOf", "oneOf"):
        agree({keyword: alternatives}, value)
    agree({"not": alternatives[0]}, value)
    agree(dict(zip(("if", "then", "else"), alternatives)), value)


@PROPERTY
@given(st.lists(small_schemas, min_size=1, max_size=3), small_schemas, small_schemas, counts, counts, st.lists(atoms, min_size=1, max_size=5))
def test_array_keywords_agree_with_jsonschema(prefix: list[Any], items: Any, contains: Any, least: int, most: int, array: list[Any]) -> None:
    agree({"prefixItems": prefix, "items": items}, array)
    agree({"prefixItems": prefix}, array)
    agree({"contains": contains, "minContains": least, "maxContains": most}, array)
    agree({"contains": contains, "minContains": least}, array)
    agree({"minItems": least, "maxItems": most, "uniqueItems": True}, array)


@PROPERTY
@given(
    st.dictionaries(st.sampled_from(KEYS), small_schemas, max_size=2), st.dictionaries(patterns, small_schemas, min_size=1, max_size=2),
    st.sampled_from([False, {"type": "integer"}]) | small_schemas, st.lists(st.sampled_from(KEYS), max_size=2, unique=True),
    st.dictionaries(st.sampled_from(KEYS), small_schemas, max_size=2), st.dictionaries(st.sampled_from(KEYS) | strings, atoms, min_size=1, max_size=3),
    counts, counts,
)
def test_object_keywords_agree_with_jsonschema(
    properties: dict[str, Any], by_pattern: dict[str, Any], extra: Any, required: list[str], dependent: dict[str, Any],
    value: dict[str, Any], least: int, most: int,
) -> None:
    agree({"properties": properties, "patternProperties": by_pattern, "additionalProperties": extra}, value)
    agree({"properties": properties, "required": required, "dependentSchemas": dependent}, value)
    agree({"propertyNames": {"pattern": "^a"}, "dependentRequired": {key: required for key in properties}}, value)
    agree({"minProperties": least, "maxProperties": most}, value)


bounds = st.integers(-3, 3) | st.sampled_from([0.5, -0.5, 2.0, 1.25])


@PROPERTY
@given(bounds, bounds | atoms, counts, strings)
def test_number_and_string_bounds_agree_with_jsonschema(bound: float, value: Any, count: int, word: str) -> None:
    """Inclusive bounds take the bound itself, exclusive ones do not; lengths count characters."""
    for keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        agree({keyword: bound}, value)
    agree({"multipleOf": abs(int(bound)) or 1}, value)
    agree({"minLength": count}, word)
    agree({"maxLength": count}, word)


class Colour(enum.Enum):
    RED = "red"
    ONE = 1


@dataclasses.dataclass
class Point:
    x: int
    label: str = "p"


leaf_hints = st.sampled_from([str, int, float, bool, type(None), Any, Colour, Point, Literal["a", 1, True]])
hints = st.recursive(
    leaf_hints,
    lambda inner: st.one_of(
        inner.map(lambda h: list[h]), inner.map(lambda h: dict[str, h]), inner.map(lambda h: Optional[h]),
        st.tuples(inner, inner).map(lambda pair: tuple[pair]), inner.map(lambda h: tuple[h, ...]),
        st.tuples(inner, inner).map(lambda pair: Union[pair]), st.sampled_from([frozenset[str], set[int]]),
    ),
    max_leaves=4,
)
typed_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.0, 2.5, "red", "a", "p", "x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["x", "label", "a"]), inner, max_size=3),
    max_leaves=8,
)


@PROPERTY
@given(hints, typed_values)
def test_schemas_built_from_type_hints_validate_as_jsonschema_does(hint: Any, value: Any) -> None:
    ours, reference = verdicts(schema_for(hint), value)
    assert ours == reference, (hint, schema_for(hint), value)


def json_for(hint: Any) -> st.SearchStrategy[Any]:
    """JSON that a client may send for a parameter typed `hint` (2.0 for an int, as JSON Schema allows)."""
    if hint is Any:
        return small_values
    if hint is Colour:
        return st.sampled_from([member.value for member in Colour])
    if hint is Point:
        return st.fixed_dictionaries({"x": json_for(int)}, optional={"label": json_for(str), "other": small_values})
    simple = {str: strings, int: st.integers(-3, 3) | st.just(2.0), float: st.integers(-3, 3) | st.just(0.5), bool: st.booleans(), type(None): st.none()}
    if hint in simple:
        return simple[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return st.sampled_from([*args, *(float(arg) for arg in args if type(arg) is int)])
    if origin in (set, frozenset):
        return st.lists(json_for(args[0]), max_size=3, unique=True)
    if origin is list or (origin is tuple and args[1:] == (Ellipsis,)):
        return st.lists(json_for(args[0]), max_size=3)
    if origin is tuple:
        return st.tuples(*map(json_for, args)).map(list)
    if origin is dict:
        return st.dictionaries(strings, json_for(args[1]), max_size=2)
    return st.one_of(*map(json_for, args))  # a union


def conforms(hint: Any, value: Any) -> bool:
    """Whether a converted argument is what a function annotated `hint` expects."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin is Literal:
        return any(type(value) is type(arg) and value == arg for arg in args)
    if origin in (Union, types.UnionType):
        return any(conforms(arg, value) for arg in args)
    if origin in (list, set, frozenset) or (origin is tuple and args[1:] == (Ellipsis,)):
        return type(value) is origin and all(conforms(args[0], item) for item in value)
    if origin is tuple:
        return type(value) is tuple and len(value) == len(args) and all(map(conforms, args, value))
    if origin is dict:
        return type(value) is dict and all(conforms(args[1], item) for item in value.values())
    if hint is Point:
        return type(value) is Point and type(value.x) is int and type(value.label) is str
    return type(value) is hint


@PROPERTY
@given(hints.flatmap(lambda hint: st.tuples(st.just(hint), json_for(hint))))
def test_json_that_fits_a_hint_is_accepted_and_converts_to_that_type(case: tuple[Any, Any]) -> None:
    """What a client may send for a typed parameter passes validation and reaches the function as the annotated type."""
    hint, value = case
    ours, reference = verdicts(schema_for(hint), value)
    assert ours and reference, (hint, schema_for(hint), value)
    converted = converter_for(hint)(value)
    assert conforms(hint, converted), (hint, value, converted)


@PROPERTY
@given(st.lists(st.integers(-3, 3) | st.booleans() | strings, min_size=1, max_size=4, unique_by=lambda v: (type(v), v)), st.data())
def test_a_literal_parameter_receives_its_own_member(members: list[Any], data: st.DataObject) -> None:
    """JSON's 1.0 is the member 1 (as an int parameter gets 2 for 2.0); true is never the member 1."""
    hint = Literal[tuple(members)]
    value = data.draw(st.sampled_from([*members, *(float(m) for m in members if type(m) is int)]), label="value")
    expected = int(value) if type(value) is float else value
    assert Validator(schema_for(hint)).accepts(value)
    converted = converter_for(hint)(value)
    assert type(converted) is type(expected) and converted == expected


@PROPERTY
@given(st.sampled_from([set[int], frozenset[str], set[Colour]]), st.data())
def test_a_repeated_item_for_a_set_parameter_is_refused(hint: Any, data: st.DataObject) -> None:
    """A set cannot hold a repeat, so the call is refused rather than silently deduplicated."""
    items = data.draw(st.lists(json_for(typing.get_args(hint)[0]), min_size=1, max_size=3, unique=True), label="items")
    assert Validator(schema_for(hint)).accepts(items)
    assert not Validator(schema_for(hint)).accepts(items + items[:1])


# -- refusal at registration ----------------------------------------------------------------


def locations(schema: Any, where: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every schema object inside `schema` (itself included), with its location."""
    if not isinstance(schema, dict):
        return []
    found = [(where, schema)]
    for location, sub in subschemas(schema):
        found.extend(locations(sub, f"{where}/{location}"))
    return found


def register(schema: dict[str, Any]) -> None:
    Server("registration").add_tool(lambda **kw: None, name="t", input_schema=schema)


@PROPERTY
@given(root_schemas, st.sampled_from(UNSUPPORTED), st.data())
def test_a_schema_using_a_keyword_it_cannot_honour_is_refused_at_registration(schema: dict[str, Any], keyword: str, data: st.DataObject) -> None:
    """unevaluated* and dynamic refs, wherever they sit, fail registration with their name."""
    schema = {"type": "object", "allOf": [schema]}
    where, node = data.draw(st.sampled_from(locations(schema)[1:]), label="location")
    node[keyword] = False if keyword.startswith("unevaluated") else "#meta"
    with pytest.raises(ValueError, match=keyword.replace("$", r"\$")):
        Validator(schema)
    with pytest.raises(ValueError, match=keyword.replace("$", r"\$")):
        register(schema)


wrong = st.sampled_from(["3", None, 1.5, True, [], {}, [{"type": "string"}]])
WRONG_KINDS = {  # keyword → the JSON types its value may have (2020-12 meta-schema)
    **dict.fromkeys(["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"], (int,)),
    **dict.fromkeys(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"], (int, float)),
    **dict.fromkeys(["enum", "required", "allOf", "anyOf", "oneOf", "prefixItems"], (list,)),
    **dict.fromkeys(["properties", "patternProperties", "dependentSchemas", "dependentRequired", "$defs"], (dict,)),
    **dict.fromkeys(["items", "not", "additionalProperties", "contains", "if", "then", "else", "propertyNames"], (dict, bool)),
    "type": (str, list), "pattern": (str,), "uniqueItems": (bool,), "$ref": (str,),
}


@PROPERTY
@given(root_schemas, st.sampled_from(sorted(WRONG_KINDS)), wrong, st.data())
def test_a_keyword_holding_the_wrong_kind_of_value_is_refused_at_registration(
    schema: dict[str, Any], keyword: str, bad: Any, data: st.DataObject
) -> None:
    """A draft-4 tuple `items` or `exclusiveMinimum: true`, a string `minLength`, an object `allOf`: refused with the keyword's name."""
    kinds = WRONG_KINDS[keyword]
    if isinstance(bad, kinds) and (bool in kinds or not isinstance(bad, bool)):  # in JSON, true is no integer
        bad = next(other for other in ("3", 3) if not isinstance(other, kinds))
    schema = {"type": "object", "allOf": [schema]}
    where, node = data.draw(st.sampled_from(locations(schema)[1:]), label="location")
    node[keyword] = bad
    with pytest.raises(SchemaError):
        Draft202012Validator.check_schema(schema)  # the mutation really is invalid
    with pytest.raises(ValueError, match=keyword.replace("$", r"\$")):
        Validator(schema)
    with pytest.raises(ValueError, match=keyword.replace("$", r"\$")):
        register(schema)


# -- the step budget --------------------------------------------------------------------------

BUDGET = 2_000  # small enough to reach with cheap values; the real one is 1,000,000


def exploding(depth: int) -> dict[str, Any]:
    """A schema linear in size whose levels each try the level below twice: 2**depth paths without a budget."""
    defs: dict[str, Any] = {"level0": {"type": "string"}}
    for level in range(1, depth + 1):
        below = {"$ref": f"#/$defs/level{level - 1}"}
        defs[f"level{level}"] = {"anyOf": [below, {"allOf": [below]}]}
    return {"$defs": defs, "$ref": f"#/$defs/level{depth}"}


@settings(PROPERTY, max_examples=15)  # each example spends the whole budget
@given(st.integers(12, 60), values.filter(lambda v: not isinstance(v, str)))
def test_a_combinatorial_schema_ends_with_the_budget_violation(depth: int, value: Any) -> None:
    with mock.patch.object(validation, "_MAX_STEPS", BUDGET):
        with pytest.raises(SchemaViolation, match="too complex"):
            Validator(exploding(depth)).validate(value)


@PROPERTY
@given(root_schemas, st.lists(values, min_size=1, max_size=4), st.integers(1, 60), st.sampled_from([1, 100, BUDGET]))
def test_under_any_budget_the_verdict_is_the_unbounded_one_or_the_budget_violation(
    schema: dict[str, Any], batch: list[Any], repeat: int, budget: int
) -> None:
    """A budget never changes an answer, it only ends the work with a clear message."""
    array = batch * repeat
    unbounded = Validator(schema).accepts(array)
    with mock.patch.object(validation, "_MAX_STEPS", budget):
        try:
            Validator(schema).validate(array)
        except SchemaViolation as violation:
            assert not unbounded or "too complex" in violation.detail or "too large" in violation.detail
        else:
            assert unbounded


@PROPERTY
@given(st.integers(0, 3 * BUDGET), st.booleans())
def test_unique_items_on_a_long_array_is_decided_or_ends_with_the_budget_violation(size: int, repeat: bool) -> None:
    """uniqueItems costs a step per item: short arrays are decided, long ones refused with the budget message."""
    array = list(range(size)) + ([0] if repeat and size else [])
    with mock.patch.object(validation, "_MAX_STEPS", BUDGET):
        try:
            Validator({"type": "array", "uniqueItems": True}).validate(array)
        except SchemaViolation as violation:
            assert ("too large" in violation.detail and len(array) >= BUDGET // 2) or "unique" in violation.detail
            assert len(array) > size or "too large" in violation.detail
        else:
            assert len(array) == size


# -- patterns as ECMA-262 --------------------------------------------------------------------


@PROPERTY
@given(st.text("ab\n\r", max_size=5))
def test_a_dollar_matches_only_at_the_very_end(value: str) -> None:
    """ECMA-262 `$` (no multiline flag) is the end of input; Python's also matches before a final newline."""
    assert Validator({"pattern": "b$"}).accepts(value) == value.endswith("b")


@PROPERTY
@given(st.text(max_size=4))
def test_digit_and_word_classes_are_ascii(value: str) -> None:
    assert Validator({"pattern": r"^\d*$"}).accepts(value) == all(c in "0123456789" for c in value)
    assert Validator({"pattern": r"^\w*$"}).accepts(value) == all(c.isascii() and (c.isalnum() or c == "_") for c in value)


@PROPERTY
@given(st.integers(-(10**6), 10**6), st.integers(1, 3))
def test_multiple_of_a_decimal_step_reads_floats_as_their_decimal(multiple: int, places: int) -> None:
    """0.3 is a multiple of 0.1 here (float division would say no): floats are read as the decimal they print as."""
    step = float(f"1e-{places}")
    value = float(f"{multiple}e-{places}")
    assert Validator({"multipleOf": step}).accepts(value)
    assert not Validator({"multipleOf": step}).accepts(value + step / 2)
