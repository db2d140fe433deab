"""Type hints to JSON Schema, JSON back to Python values (mcpcore._app.typeschema).

This module deliberately does not use `from __future__ import annotations`:
on Python 3.11 that makes `NotRequired` invisible to `TypedDict.__required_keys__`
(see the xfail below), and the ordinary tests should describe ordinary code.
"""

import enum
from dataclasses import dataclass, field
import sys
import typing
from typing import Annotated, Any, Literal, Optional, TypedDict, Union

import pytest

from mcpcore._app.typeschema import converter_for, is_structured, schema_for, to_jsonable
from mcpcore._wire.validation import matches


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclass
class Point:
    x: int
    y: int = 0


@dataclass
class Tagged:
    point: Point
    color: Color = Color.RED
    tags: list[str] = field(default_factory=list)
    computed: int = field(default=0, init=False)


@dataclass
class Shape:
    name: Annotated[str, "the shape's name"]
    corners: list[Point]
    center: Optional[Point] = None
    span: tuple[int, int] = (0, 0)


@dataclass
class Node:
    value: int
    children: list["Node"]


@dataclass
class Chain:
    next: Optional["Chain"] = None


class Movie(TypedDict):
    title: str
    year: int


class PartialMovie(TypedDict, total=False):
    title: str
    year: int


# typing.NotRequired is new in Python 3.11; on 3.10 its tests are skipped.
needs_not_required = pytest.mark.skipif(sys.version_info < (3, 11), reason="typing.NotRequired is new in Python 3.11")
if sys.version_info >= (3, 11):
    NotRequired = typing.NotRequired

    class MovieWithNotes(TypedDict):
        title: str
        notes: NotRequired[str]

    class MovieStringAnnotations(TypedDict):
        # What `from __future__ import annotations` does to every annotation.
        title: "str"
        notes: "NotRequired[str]"


class ColoredMovie(TypedDict):
    title: str
    color: Color


# -- schema_for: primitives -------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (type(None), {"type": "null"}),
    ],
)
def test_primitive_hints_map_to_json_types(hint: Any, expected: dict[str, Any]) -> None:
    assert schema_for(hint) == expected


def test_any_and_object_accept_everything_with_an_empty_schema() -> None:
    assert schema_for(Any) == {}
    assert schema_for(object) == {}


def test_schema_for_returns_a_fresh_dict_each_time() -> None:
    first = schema_for(int)
    first["description"] = "changed"
    assert schema_for(int) == {"type": "integer"}


def test_bare_none_hint_means_null() -> None:
    assert schema_for(None) == {"type": "null"}


# -- schema_for: containers -------------------------------------------------


def test_list_of_int_becomes_array_of_integers() -> None:
    assert schema_for(list[int]) == {"type": "array", "items": {"type": "integer"}}


def test_bare_list_becomes_array_without_items() -> None:
    assert schema_for(list) == {"type": "array"}


def test_set_of_str_becomes_array_with_unique_items() -> None:
    assert schema_for(set[str]) == {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    assert schema_for(frozenset[int]) == {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}


def test_fixed_tuple_becomes_prefix_items_with_exact_length() -> None:
    assert schema_for(tuple[int, str]) == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "minItems": 2,
        "maxItems": 2,
    }


def test_variadic_tuple_becomes_homogeneous_array() -> None:
    assert schema_for(tuple[int, ...]) == {"type": "array", "items": {"type": "integer"}}


def test_dict_of_str_to_float_becomes_object_with_number_values() -> None:
    assert schema_for(dict[str, float]) == {"type": "object", "additionalProperties": {"type": "number"}}


def test_bare_dict_becomes_plain_object() -> None:
    assert schema_for(dict) == {"type": "object"}


def test_dict_with_non_string_keys_is_refused() -> None:
    with pytest.raises(TypeError, match="dict keys must be str"):
        schema_for(dict[int, str])


# -- schema_for: unions, literals, enums ------------------------------------


def test_optional_int_becomes_anyof_integer_null() -> None:
    assert schema_for(Optional[int]) == {"anyOf": [{"type": "integer"}, {"type": "null"}]}


def test_pipe_none_union_matches_optional_spelling() -> None:
    assert schema_for(int | None) == {"anyOf": [{"type": "integer"}, {"type": "null"}]}


def test_union_of_several_types_lists_each_member_in_order() -> None:
    assert schema_for(Union[str, int, bool]) == {
        "anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}]
    }


def test_literal_becomes_enum_of_its_values() -> None:
    assert schema_for(Literal["a", "b", 3]) == {"enum": ["a", "b", 3]}


def test_enum_class_becomes_enum_of_member_values() -> None:
    assert schema_for(Color) == {"enum": ["red", "green"]}


def test_int_enum_becomes_enum_of_integer_values() -> None:
    assert schema_for(Level) == {"enum": [1, 2]}


# -- schema_for: TypedDict --------------------------------------------------


def test_typeddict_fields_are_all_required_by_default() -> None:
    assert schema_for(Movie) == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
        "required": ["title", "year"],
    }


def test_total_false_typeddict_has_no_required_list() -> None:
    schema = schema_for(PartialMovie)
    assert schema == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
    }


@needs_not_required
def test_notrequired_typeddict_field_is_unwrapped_and_optional() -> None:
    schema = schema_for(MovieWithNotes)
    assert schema["properties"]["notes"] == {"type": "string"}
    assert schema["required"] == ["title"]


@needs_not_required
def test_notrequired_field_with_string_annotation_is_optional() -> None:
    assert schema_for(MovieStringAnnotations)["required"] == ["title"]


# -- schema_for: dataclasses ------------------------------------------------


def test_dataclass_fields_without_defaults_are_required() -> None:
    assert schema_for(Point) == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"],
    }


def test_dataclass_default_factory_field_is_optional_without_default() -> None:
    schema = schema_for(Tagged)
    assert schema["required"] == ["point"]
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}


def test_dataclass_enum_default_appears_as_its_value() -> None:
    assert schema_for(Tagged)["properties"]["color"] == {"enum": ["red", "green"], "default": "red"}


def test_dataclass_init_false_field_is_left_out() -> None:
    assert "computed" not in schema_for(Tagged)["properties"]


def test_nested_dataclass_becomes_nested_object_schema() -> None:
    assert schema_for(Tagged)["properties"]["point"] == schema_for(Point)


def test_dataclass_tuple_default_appears_as_list() -> None:
    assert schema_for(Shape)["properties"]["span"]["default"] == [0, 0]


def test_dataclass_optional_nested_field_defaults_to_null() -> None:
    center = schema_for(Shape)["properties"]["center"]
    assert center == {"anyOf": [schema_for(Point), {"type": "null"}], "default": None}


# -- schema_for: Annotated --------------------------------------------------


def test_annotated_string_becomes_description() -> None:
    assert schema_for(Annotated[int, "how many"]) == {"type": "integer", "description": "how many"}


def test_annotated_field_in_dataclass_keeps_its_description() -> None:
    assert schema_for(Shape)["properties"]["name"] == {"type": "string", "description": "the shape's name"}


def test_annotated_inside_container_describes_the_items() -> None:
    assert schema_for(list[Annotated[str, "a tag"]]) == {
        "type": "array",
        "items": {"type": "string", "description": "a tag"},
    }


def test_annotated_metadata_mcpcore_cannot_read_is_refused() -> None:
    with pytest.raises(TypeError, match=r"Annotated\[int, 42\]: mcpcore reads descriptions"):
        schema_for(Annotated[int, 42])


def test_annotated_keywords_nested_in_a_list_reach_the_item_schema() -> None:
    assert schema_for(list[Annotated[int, {"minimum": 0}]]) == {"type": "array", "items": {"type": "integer", "minimum": 0}}


# -- schema_for: refusals ---------------------------------------------------


@pytest.mark.parametrize("hint", [complex, list[complex], Optional[complex], dict[str, complex]])
def test_unsupported_hint_raises_type_error(hint: Any) -> None:
    with pytest.raises(TypeError, match="cannot build a JSON schema"):
        schema_for(hint)


def test_recursive_dataclass_through_list_raises_type_error() -> None:
    with pytest.raises(TypeError, match="recursive type"):
        schema_for(Node)


def test_recursive_dataclass_through_optional_raises_type_error() -> None:
    with pytest.raises(TypeError, match="recursive type"):
        schema_for(Chain)


def test_dataclass_used_twice_side_by_side_is_not_mistaken_for_recursion() -> None:
    @dataclass
    class Segment:
        start: Point
        end: Point

    schema = schema_for(Segment)
    assert schema["properties"]["start"] == schema["properties"]["end"] == schema_for(Point)


# -- converter_for ----------------------------------------------------------


def test_plain_json_hints_use_no_conversion() -> None:
    value = ["a", "b"]
    assert converter_for(list[str])(value) is value
    assert converter_for(str)("s") == "s"


def test_int_converter_turns_integral_json_numbers_into_ints() -> None:
    converted = converter_for(list[int])([1, 2.0])
    assert converted == [1, 2] and all(type(v) is int for v in converted)


def test_float_converter_turns_json_integers_into_floats() -> None:
    result = converter_for(float)(3)
    assert result == 3.0 and type(result) is float


def test_enum_converter_returns_the_member() -> None:
    assert converter_for(Color)("green") is Color.GREEN


def test_dataclass_converter_builds_nested_instances() -> None:
    value = converter_for(Tagged)({"point": {"x": 1, "y": 2}, "color": "green", "tags": ["a"]})
    assert value == Tagged(Point(1, 2), Color.GREEN, ["a"])
    assert isinstance(value.point, Point)
    assert value.color is Color.GREEN


def test_dataclass_converter_fills_missing_fields_from_defaults() -> None:
    assert converter_for(Point)({"x": 5}) == Point(5, 0)


def test_dataclass_converter_drops_unknown_keys() -> None:
    assert converter_for(Point)({"x": 1, "y": 2, "z": 3}) == Point(1, 2)


def test_dataclass_converter_converts_lists_of_nested_dataclasses() -> None:
    shape = converter_for(Shape)({"name": "sq", "corners": [{"x": 0}, {"x": 1, "y": 1}], "span": [2, 3]})
    assert shape == Shape("sq", [Point(0, 0), Point(1, 1)], None, (2, 3))
    assert all(isinstance(c, Point) for c in shape.corners)
    assert isinstance(shape.span, tuple)


def test_optional_dataclass_converter_builds_instance_from_object() -> None:
    assert converter_for(Optional[Point])({"x": 1}) == Point(1, 0)


def test_optional_dataclass_converter_passes_null_through() -> None:
    assert converter_for(Point | None)(None) is None


def test_union_converter_picks_the_member_whose_schema_matches() -> None:
    convert = converter_for(Union[Movie, Point])
    assert convert({"x": 7}) == Point(7, 0)


def test_optional_enum_converter_converts_value_and_passes_null() -> None:
    convert = converter_for(Optional[Color])
    assert convert("red") is Color.RED
    assert convert(None) is None


def test_optional_float_converter_turns_integer_into_float() -> None:
    result = converter_for(Optional[float])(2)
    assert result == 2.0 and type(result) is float


def test_fixed_tuple_converter_returns_tuple_with_converted_items() -> None:
    assert converter_for(tuple[Color, float])(["green", 1]) == (Color.GREEN, 1.0)


def test_variadic_tuple_converter_returns_tuple() -> None:
    assert converter_for(tuple[int, ...])([1, 2, 3]) == (1, 2, 3)


def test_bare_tuple_converter_returns_tuple() -> None:
    assert converter_for(tuple)([1, "a"]) == (1, "a")


def test_set_converter_returns_set() -> None:
    assert converter_for(set[int])([1, 2, 2]) == {1, 2}


def test_frozenset_of_enum_converter_returns_frozenset_of_members() -> None:
    result = converter_for(frozenset[Color])(["red"])
    assert result == frozenset({Color.RED}) and isinstance(result, frozenset)


def test_dict_converter_converts_each_value() -> None:
    assert converter_for(dict[str, Color])({"a": "red", "b": "green"}) == {"a": Color.RED, "b": Color.GREEN}


def test_typeddict_converter_converts_known_fields_and_keeps_others() -> None:
    assert converter_for(ColoredMovie)({"title": "t", "color": "green", "extra": 1}) == {
        "title": "t",
        "color": Color.GREEN,
        "extra": 1,
    }


def test_annotated_converter_converts_the_underlying_type() -> None:
    assert converter_for(Annotated[Color, "a color"])("green") is Color.GREEN


# -- is_structured ----------------------------------------------------------


@pytest.mark.parametrize(
    "hint",
    [dict, dict[str, int], Movie, Point, Optional[Point], Point | None, Annotated[Point, "a point"]],
)
def test_object_like_return_hints_are_structured(hint: Any) -> None:
    assert is_structured(hint) is True


@pytest.mark.parametrize("hint", [str, int, list, list[dict], Optional[int], Union[Point, Movie], Color])
def test_non_object_return_hints_are_not_structured(hint: Any) -> None:
    assert is_structured(hint) is False


# -- to_jsonable ------------------------------------------------------------


def test_to_jsonable_turns_dataclass_into_dict_with_nested_values() -> None:
    value = Tagged(Point(1, 2), Color.GREEN, ["t"])
    assert to_jsonable(value) == {
        "point": {"x": 1, "y": 2},
        "color": "green",
        "tags": ["t"],
        "computed": 0,
    }


def test_to_jsonable_turns_tuples_and_sets_into_lists() -> None:
    assert to_jsonable({"t": (1, Color.RED), "s": {3}, "f": frozenset({"x"})}) == {
        "t": [1, "red"],
        "s": [3],
        "f": ["x"],
    }


def test_to_jsonable_turns_int_enum_into_its_value() -> None:
    result = to_jsonable(Level.HIGH)
    assert result == 2 and type(result) is int


def test_to_jsonable_leaves_plain_json_and_dataclass_classes_untouched() -> None:
    assert to_jsonable("s") == "s"
    assert to_jsonable(None) is None
    assert to_jsonable(Point) is Point


def test_schema_of_dataclass_accepts_its_own_jsonable_form() -> None:
    value = Shape("tri", [Point(0, 0), Point(1, 0)], Point(0, 1), (3, 4))
    assert matches(to_jsonable(value), schema_for(Shape))


@dataclass
class Shelf:
    books: list["Book"]  # a quoted name inside a builtin generic (3.10's get_type_hints leaves it a string)
    pinned: Optional[dict[str, "Book"]] = None


@dataclass
class Book:
    title: str


def test_quoted_names_inside_builtin_generics_are_resolved() -> None:
    schema = schema_for(Shelf)
    assert schema["properties"]["books"]["items"]["properties"] == {"title": {"type": "string"}}
    assert schema["properties"]["pinned"]["anyOf"][0]["additionalProperties"]["required"] == ["title"]
