"""The JSON Schema validator for tool arguments (mcpcore._wire.validation)."""

from __future__ import annotations

import copy
import re
import functools
from typing import Any

import pytest

from conftest import ROOT
from mcpcore._wire import validation
from mcpcore._cli.main import load_target
from mcpcore._wire.validation import SchemaViolation, Validator, matches



def violation(value: Any, schema: dict[str, Any]) -> SchemaViolation:
    """The SchemaViolation that validating `value` raises (fails the test if none)."""
    with pytest.raises(SchemaViolation) as caught:
        Validator(schema).validate(value)
    return caught.value


# -- types and paths ----------------------------------------------------------


def test_type_error_names_the_nested_path() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
        },
    }
    error = violation({"items": [{"name": "a"}, {"name": "b"}, {"name": 3}]}, schema)
    assert error.path == "items[2].name"
    assert error.detail == "expected string, got integer"
    assert str(error) == "items[2].name: expected string, got integer"


def test_top_level_error_message_has_no_path_prefix() -> None:
    error = violation("x", {"type": "integer"})
    assert error.path == ""
    assert str(error) == "expected integer, got string"


def test_type_list_accepts_any_listed_type_and_names_them_all_on_failure() -> None:
    schema = {"type": ["integer", "null"]}
    assert matches(None, schema) and matches(4, schema)
    assert violation("x", schema).detail == "expected integer or null, got string"


def test_integer_accepts_float_with_integral_value() -> None:
    assert matches(3.0, {"type": "integer"})


def test_integer_rejects_fractional_float() -> None:
    assert violation(3.5, {"type": "integer"}).detail == "expected integer, got number"


def test_integer_rejects_boolean() -> None:
    assert violation(True, {"type": "integer"}).detail == "expected integer, got boolean"


def test_number_rejects_boolean() -> None:
    assert violation(False, {"type": "number"}).detail == "expected number, got boolean"


def test_number_accepts_integers_and_floats() -> None:
    assert matches(1, {"type": "number"}) and matches(1.5, {"type": "number"})


def test_boolean_schema_true_accepts_and_false_rejects() -> None:
    assert matches({"anything": [1]}, {"properties": {"a": True}})
    assert violation({"a": 1}, {"properties": {"a": False}}).detail == "no value is allowed here"


# -- objects ---------------------------------------------------------------


def test_missing_required_field_is_named() -> None:
    error = violation({"a": 1}, {"type": "object", "required": ["a", "b"]})
    assert error.path == "b"
    assert error.detail == "is required but missing"


def test_missing_required_field_in_nested_object_has_full_path() -> None:
    schema = {"properties": {"user": {"type": "object", "required": ["id"]}}}
    assert violation({"user": {}}, schema).path == "user.id"


def test_additional_property_false_lists_accepted_fields() -> None:
    schema = {"type": "object", "properties": {"b": {}, "a": {}}, "additionalProperties": False}
    error = violation({"a": 1, "zz": 2}, schema)
    assert error.path == "zz"
    assert error.detail == "is not an accepted field (accepted: a, b)"


def test_additional_property_false_without_properties_says_none_accepted() -> None:
    assert violation({"x": 1}, {"additionalProperties": False}).detail == "is not an accepted field (accepted: none)"


def test_additional_properties_schema_validates_extra_values() -> None:
    schema = {"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}
    assert matches({"a": "s", "b": 1}, schema)
    assert violation({"a": "s", "b": "x"}, schema).path == "b"


def test_pattern_properties_validate_matching_keys_and_count_as_accepted() -> None:
    schema = {"patternProperties": {"^n_": {"type": "number"}}, "additionalProperties": False}
    assert matches({"n_a": 1.5}, schema)
    assert violation({"n_a": "x"}, schema).path == "n_a"
    assert violation({"other": 1}, schema).path == "other"


def test_min_and_max_properties_bound_the_field_count() -> None:
    assert violation({}, {"minProperties": 1}).detail == "needs at least 1 field"
    assert violation({"a": 1, "b": 2}, {"maxProperties": 1}).detail == "allows at most 1 field"
    assert matches({"a": 1}, {"minProperties": 1, "maxProperties": 1})


def test_dependent_required_names_the_missing_companion() -> None:
    schema = {"dependentRequired": {"card": ["cvv"]}}
    assert matches({}, schema)
    error = violation({"card": "1"}, schema)
    assert error.path == "cvv"
    assert "'card'" in error.detail


# -- enum / const ----------------------------------------------------------


def test_enum_rejects_unlisted_value_and_lists_choices() -> None:
    assert violation("x", {"enum": ["a", "b"]}).detail == "expected one of 'a', 'b', got 'x'"


def test_enum_accepts_listed_value() -> None:
    assert matches("b", {"enum": ["a", "b"]})


def test_enum_does_not_confuse_booleans_with_numbers() -> None:
    assert not matches(True, {"enum": [1]})
    assert not matches(0, {"enum": [False]})


def test_enum_treats_integral_float_as_equal_to_integer() -> None:
    assert matches(1.0, {"enum": [1]})


def test_const_rejects_other_value() -> None:
    assert violation(2, {"const": 1}).detail == "expected exactly 1, got 2"
    assert matches(1, {"const": 1})


def test_enum_does_not_confuse_booleans_with_numbers_inside_arrays() -> None:
    assert not matches([True], {"enum": [[1]]})


def test_const_object_does_not_confuse_booleans_with_numbers() -> None:
    assert not matches({"a": True}, {"const": {"a": 1}})


# -- strings -----------------------------------------------------------------


def test_string_min_length_rejects_short_string() -> None:
    assert violation("ab", {"minLength": 3}).detail == "needs at least 3 characters"


def test_string_max_length_rejects_long_string() -> None:
    assert violation("abcd", {"maxLength": 3}).detail == "allows at most 3 characters"


def test_a_bound_of_one_is_said_in_the_singular() -> None:
    assert violation("", {"minLength": 1}).detail == "needs at least 1 character"
    assert violation("ab", {"maxLength": 1}).detail == "allows at most 1 character"
    assert violation([], {"minItems": 1}).detail == "needs at least 1 item, got 0"
    assert violation([1, 2], {"maxItems": 1}).detail == "allows at most 1 item, got 2"
    assert violation([1, 1], {"contains": {"const": 1}, "maxContains": 1}).detail == (
        "allows at most 1 item of the required kind, has 2")


def test_string_length_counts_code_points() -> None:
    assert matches("héé", {"minLength": 3, "maxLength": 3})
    assert matches("😀", {"maxLength": 1})


def test_string_pattern_is_a_search_not_a_full_match() -> None:
    assert matches("xx123yy", {"pattern": "[0-9]+"})
    assert violation("abc", {"pattern": "^[0-9]+$"}).detail == "must match the pattern '^[0-9]+$'"


def test_string_keywords_ignore_non_strings() -> None:
    assert matches(12345, {"maxLength": 1, "pattern": "^a$"})


# -- numbers -----------------------------------------------------------------


def test_minimum_is_inclusive() -> None:
    assert matches(5, {"minimum": 5})
    assert violation(4, {"minimum": 5}).detail == "must be >= 5, got 4"


def test_maximum_is_inclusive() -> None:
    assert matches(5, {"maximum": 5})
    assert violation(6, {"maximum": 5}).detail == "must be <= 5, got 6"


def test_exclusive_minimum_rejects_the_bound_itself() -> None:
    assert matches(5.5, {"exclusiveMinimum": 5})
    assert violation(5, {"exclusiveMinimum": 5}).detail == "must be > 5, got 5"


def test_exclusive_maximum_rejects_the_bound_itself() -> None:
    assert matches(4.5, {"exclusiveMaximum": 5})
    assert violation(5, {"exclusiveMaximum": 5}).detail == "must be < 5, got 5"


def test_multiple_of_integer_step() -> None:
    assert matches(12, {"multipleOf": 3})
    assert violation(7, {"multipleOf": 2}).detail == "must be a multiple of 2, got 7"


def test_multiple_of_decimal_step_tolerates_float_rounding() -> None:
    assert matches(0.3, {"multipleOf": 0.1})
    assert not matches(0.35, {"multipleOf": 0.1})


def test_multiple_of_rejects_odd_integer_near_one_billion() -> None:
    assert not matches(1_000_000_001, {"multipleOf": 2})


def test_number_keywords_ignore_booleans() -> None:
    assert matches(True, {"minimum": 5, "multipleOf": 7})


# -- arrays ------------------------------------------------------------------


def test_min_items_rejects_short_array() -> None:
    assert violation([1], {"minItems": 2}).detail == "needs at least 2 items, got 1"


def test_max_items_rejects_long_array() -> None:
    assert violation([1, 2, 3], {"maxItems": 2}).detail == "allows at most 2 items, got 3"


def test_unique_items_names_the_repeated_index() -> None:
    error = violation([1, 2, 1], {"uniqueItems": True})
    assert error.path == "[2]"
    assert error.detail == "repeats an earlier item; items must be unique"


def test_unique_items_treats_true_and_one_as_different() -> None:
    assert matches([1, True], {"uniqueItems": True})


def test_unique_items_treats_nested_true_and_one_as_different() -> None:
    assert matches([[1], [True]], {"uniqueItems": True})


def test_prefix_items_check_each_position() -> None:
    schema = {"prefixItems": [{"type": "integer"}, {"type": "string"}]}
    assert matches([1, "a"], schema)
    assert matches([1], schema)
    assert violation([1, 2], schema).path == "[1]"


def test_items_apply_only_after_prefix_items() -> None:
    schema = {"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}
    assert matches(["a", 1, 2], schema)
    assert violation(["a", 1, "b"], schema).path == "[2]"


def test_items_false_forbids_items_beyond_the_prefix() -> None:
    schema = {"prefixItems": [{"type": "integer"}], "items": False}
    error = violation([1, 2], schema)
    assert error.path == "[1]"
    assert error.detail == "no value is allowed here"


def test_contains_needs_at_least_one_matching_item() -> None:
    schema = {"contains": {"type": "string"}}
    assert matches([1, "a"], schema)
    assert violation([1, 2], schema).detail == "contains no item of the required kind"


# -- composition -------------------------------------------------------------


def test_any_of_accepts_a_value_matching_one_branch() -> None:
    assert matches("x", {"anyOf": [{"type": "integer"}, {"type": "string"}]})


def test_any_of_rejects_a_value_matching_no_branch() -> None:
    error = violation(None, {"anyOf": [{"type": "integer"}, {"type": "string"}]})
    assert error.detail == "expected integer or string, got null"


def test_one_of_rejects_a_value_matching_two_branches() -> None:
    schema = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    assert violation(5, schema).detail == "must match exactly one of integer or number"
    assert matches(5.5, schema)


def test_one_of_rejects_a_value_matching_no_branch() -> None:
    assert not matches("s", {"oneOf": [{"type": "integer"}, {"type": "number"}]})


def test_all_of_needs_every_branch() -> None:
    schema = {"allOf": [{"minimum": 1}, {"maximum": 3}]}
    assert matches(2, schema)
    assert violation(4, schema).detail == "must be <= 3, got 4"


def test_not_rejects_a_value_matching_the_inner_schema() -> None:
    assert violation(5, {"not": {"type": "integer"}}).detail == "matches a schema it must not match"
    assert matches("5", {"not": {"type": "integer"}})


def test_if_then_applies_then_when_if_matches() -> None:
    schema = {"if": {"type": "integer"}, "then": {"minimum": 10}, "else": {"maxLength": 2}}
    assert matches(10, schema)
    assert violation(9, schema).detail == "must be >= 10, got 9"


def test_if_else_applies_else_when_if_fails() -> None:
    schema = {"if": {"type": "integer"}, "then": {"minimum": 10}, "else": {"maxLength": 2}}
    assert matches("ab", schema)
    assert violation("abc", schema).detail == "allows at most 2 characters"


def test_if_without_then_or_else_constrains_nothing() -> None:
    assert matches("x", {"if": {"type": "integer"}})


# -- $ref and $anchor --------------------------------------------------------


def test_ref_to_defs_validates_against_the_definition() -> None:
    schema = {
        "$defs": {"pos": {"type": "integer", "minimum": 0}},
        "properties": {"n": {"$ref": "#/$defs/pos"}},
    }
    assert matches({"n": 3}, schema)
    error = violation({"n": -1}, schema)
    assert error.path == "n"
    assert error.detail == "must be >= 0, got -1"


def test_ref_siblings_still_apply() -> None:
    schema = {"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2}
    assert matches("ab", schema)
    assert not matches("abc", schema)
    assert not matches(1, schema)


def test_ref_pointer_unescapes_tilde_and_slash() -> None:
    schema = {
        "$defs": {"a/b": {"type": "integer"}, "c~d": {"type": "string"}},
        "properties": {"x": {"$ref": "#/$defs/a~1b"}, "y": {"$ref": "#/$defs/c~0d"}},
    }
    assert matches({"x": 1, "y": "s"}, schema)
    assert not matches({"x": "s"}, schema)
    assert not matches({"y": 1}, schema)


def test_ref_to_root_allows_recursive_structures() -> None:
    schema = {"type": "object", "properties": {"child": {"$ref": "#"}, "v": {"type": "integer"}}}
    assert matches({"v": 1, "child": {"v": 2, "child": {"v": 3}}}, schema)
    assert violation({"child": {"child": {"v": "x"}}}, schema).path == "child.child.v"


def test_anchor_ref_resolves_to_the_anchored_schema() -> None:
    schema = {
        "$defs": {"addr": {"$anchor": "addressDef", "type": "object", "required": ["city"]}},
        "properties": {"home": {"$ref": "#addressDef"}},
    }
    assert matches({"home": {"city": "Oslo"}}, schema)
    assert violation({"home": {}}, schema).path == "home.city"


def test_unresolvable_pointer_ref_raises_schema_violation() -> None:
    error = violation(1, {"$ref": "#/$defs/nope"})
    assert error.detail == "the tool's schema has an unresolvable $ref '#/$defs/nope'"


def test_unknown_anchor_ref_raises_schema_violation() -> None:
    assert "unresolvable $ref '#missing'" in violation(1, {"$ref": "#missing"}).detail


def test_remote_ref_is_never_fetched_and_raises_schema_violation() -> None:
    assert "unresolvable" in violation(1, {"$ref": "https://example.com/schema.json"}).detail


def test_ref_pointing_past_the_end_of_a_list_raises_schema_violation() -> None:
    schema = {"allOf": [{"type": "object"}], "properties": {"a": {"$ref": "#/allOf/5"}}}
    with pytest.raises(SchemaViolation, match="unresolvable"):
        Validator(schema).validate({"a": 1})


def test_ref_with_non_numeric_token_into_a_list_raises_schema_violation() -> None:
    schema = {"allOf": [{"type": "object"}], "properties": {"a": {"$ref": "#/allOf/first"}}}
    with pytest.raises(SchemaViolation, match="unresolvable"):
        Validator(schema).validate({"a": 1})


def test_ref_walking_through_a_string_raises_schema_violation() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/type/x"}}}
    with pytest.raises(SchemaViolation, match="unresolvable"):
        Validator(schema).validate({"a": 1})


def test_ref_to_boolean_true_schema_accepts_anything() -> None:
    assert matches({"a": 1}, {"$defs": {"any": True}, "properties": {"a": {"$ref": "#/$defs/any"}}})


def test_ref_fragment_is_percent_decoded() -> None:
    assert matches("x", {"$defs": {"a b": {"type": "string"}}, "$ref": "#/$defs/a%20b"})


# -- depth bound -------------------------------------------------------------


def test_self_reference_without_progress_is_reported_as_a_cycle() -> None:
    error = violation(1, {"$ref": "#"})
    assert "refers back to '#' without going deeper" in error.detail


def test_self_referencing_schema_under_any_of_ends_in_schema_violation() -> None:
    with pytest.raises(SchemaViolation):
        Validator({"anyOf": [{"$ref": "#"}]}).validate(1)


def test_self_referencing_schema_with_two_branches_does_bounded_work(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    original = Validator._check

    class Budget(Exception):
        pass

    def counted(self: Validator, *args: Any) -> None:
        nonlocal calls
        calls += 1
        if calls > 100_000:
            raise Budget
        original(self, *args)

    monkeypatch.setattr(validation.Validator, "_check", counted)
    with pytest.raises(SchemaViolation):
        Validator({"anyOf": [{"$ref": "#"}, {"$ref": "#"}]}).validate(1)


def test_deep_value_under_a_recursive_schema_is_rejected_by_the_depth_bound() -> None:
    schema = {"type": "object", "properties": {"c": {"$ref": "#"}}}
    value: dict[str, Any] = {}
    for _ in range(200):
        value = {"c": value}
    assert violation(value, schema).detail == "the schema nests too deeply to validate"


# -- matches() ---------------------------------------------------------------


def test_matches_returns_true_for_valid_and_false_for_invalid_values() -> None:
    schema = {"type": "object", "required": ["a"]}
    assert matches({"a": 1}, schema) is True
    assert matches({}, schema) is False


def test_unknown_keywords_are_ignored_as_annotations() -> None:
    assert matches("x", {"type": "string", "x-mcp-header": "H", "format": "email", "title": "t"})


# -- the conformance fixture (json_schema_2020_12_tool) ----------------------


def _contract_schema() -> dict[str, Any]:
    """The schema the conformance suite's json_schema_2020_12_tool declares, as the example serves it."""
    return copy.deepcopy(_served_contract_schema())


@functools.lru_cache(maxsize=1)
def _served_contract_schema() -> dict[str, Any]:
    tool = load_target(str(ROOT / "examples" / "everything_server.py")).tools.get("json_schema_2020_12_tool")
    assert tool is not None, "the everything example serves json_schema_2020_12_tool"
    return tool.input_schema


VALID_CONTRACT_SAMPLES = [
    {"name": "Ada", "email": "ada@example.com"},
    {"contactMethod": "phone", "phone": "+47 1234"},
    {"contactMethod": "email", "email": "a@b.c", "phone": "1"},
    {"email": "a@b.c", "address": {"street": "Main St", "city": "Oslo"}},
]

INVALID_CONTRACT_SAMPLES = [
    ({}, ""),  # neither phone nor email (allOf/anyOf)
    ({"phone": "1"}, "email"),  # no contactMethod, so else: email required
    ({"contactMethod": "phone", "email": "a@b.c"}, "phone"),  # then: phone required
    ({"email": "a@b.c", "fax": "2"}, "fax"),  # additionalProperties false
    ({"email": "a@b.c", "contactMethod": "fax"}, "contactMethod"),  # enum
    ({"email": "a@b.c", "address": {"city": 5}}, "address.city"),  # via $ref
    ({"email": 7}, "email"),  # type
]


@pytest.mark.parametrize("sample", VALID_CONTRACT_SAMPLES)
def test_contract_2020_12_schema_accepts_valid_sample(sample: dict[str, Any]) -> None:
    Validator(_contract_schema()).validate(sample)


@pytest.mark.parametrize(("sample", "path"), INVALID_CONTRACT_SAMPLES)
def test_contract_2020_12_schema_rejects_invalid_sample_at_path(sample: dict[str, Any], path: str) -> None:
    assert violation(sample, _contract_schema()).path == path


def test_contract_2020_12_schema_anchor_ref_behaves_like_pointer_ref() -> None:
    schema = _contract_schema()
    schema["properties"]["address"] = {"$ref": "#addressDef"}
    assert matches({"email": "e", "address": {"city": "x"}}, schema)
    assert not matches({"email": "e", "address": {"city": 5}}, schema)


def test_contract_2020_12_verdicts_agree_with_reference_validator() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = _contract_schema()
    reference = jsonschema.Draft202012Validator(schema)
    samples = VALID_CONTRACT_SAMPLES + [s for s, _ in INVALID_CONTRACT_SAMPLES]
    assert [matches(s, schema) for s in samples] == [reference.is_valid(s) for s in samples]


FAST_SCHEMAS = [
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "null"},
    {"type": "array"},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]},
    {"type": "object", "properties": {"a": {"type": "number"}}, "additionalProperties": False},
]
FAST_VALUES = [None, True, False, 0, 1, -3, 2.0, 2.5, "", "x", [], [1], {}, {"a": 1}, {"a": True}, {"a": 1, "b": "s"},
               {"a": 1, "b": 2}, {"a": 1.5}, {"a": 1, "c": 0}, {"b": "s"}]


@pytest.mark.parametrize("schema", FAST_SCHEMAS)
def test_the_fast_check_never_accepts_what_the_full_validator_rejects(schema: dict) -> None:
    from mcpcore._wire.validation import _fast_check

    quick = _fast_check(schema)
    assert quick is not None, "these schemas are meant to take the fast path"
    for value in FAST_VALUES:
        full = Validator.__new__(Validator)
        Validator.__init__(full, schema)
        full._quick = None  # the general validator alone
        try:
            full.validate(value)
            valid = True
        except SchemaViolation:
            valid = False
        if quick(value):
            assert valid, (schema, value)


# -- uniqueItems is linear (a 4 MiB body must not freeze the server) ----------


def test_unique_items_of_many_distinct_values_validate_in_one_pass() -> None:
    Validator({"type": "array", "uniqueItems": True}).validate([f"tag-{i}" for i in range(200_000)])


@pytest.mark.parametrize(("items", "index"), [
    (["a", "b", "a"], 2),
    ([1, 2, 1.0], 2),
    ([{"x": 1, "y": [1, {"z": None}]}, {"y": [1.0, {"z": None}], "x": 1}], 1),
    ([[1, [2]], [1, [2]]], 1),
])
def test_unique_items_finds_json_equal_repeats(items: list, index: int) -> None:
    assert violation(items, {"type": "array", "uniqueItems": True}).path == f"[{index}]"


@pytest.mark.parametrize("items", [[True, 1], [False, 0], ["1", 1], [None, False], [[1], [True]], [{"a": 1}, {"a": 1, "b": 1}]])
def test_unique_items_keeps_booleans_numbers_strings_and_shapes_apart(items: list) -> None:
    assert matches(items, {"type": "array", "uniqueItems": True})


def test_unique_items_on_deeply_nested_values_needs_no_recursion() -> None:
    deep: list = []
    node = deep
    for _ in range(5000):
        node.append([])
        node = node[0]
    Validator({"type": "array", "uniqueItems": True}).validate([deep, [1]])


# -- ECMA-262 patterns, and keywords honoured or refused -------------------------


def test_a_dollar_anchor_does_not_accept_a_trailing_newline() -> None:
    assert matches("abc", {"type": "string", "pattern": "^[a-z]+$"})
    assert not matches("abc\n", {"type": "string", "pattern": "^[a-z]+$"})
    assert matches("a$", {"type": "string", "pattern": r"^a\$$"}) and matches("$", {"pattern": "^[$]$"})


def test_digit_and_word_classes_are_ascii_as_in_ecma_262() -> None:
    assert matches("123", {"type": "string", "pattern": r"^\d+$"})
    assert not matches("١٢٣", {"type": "string", "pattern": r"^\d+$"})  # Arabic-Indic digits
    assert not matches("é", {"type": "string", "pattern": r"^\w$"})


def test_property_names_are_validated() -> None:
    schema = {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}
    assert matches({"ok": 1}, schema)
    assert violation({"Not-OK": 1}, schema).path == "Not-OK"


def test_dependent_schemas_apply_when_their_property_is_present() -> None:
    schema = {"type": "object", "dependentSchemas": {"card": {"required": ["billing"]}}}
    assert matches({}, schema) and matches({"card": 1, "billing": "x"}, schema)
    assert violation({"card": 1}, schema).path == "billing"


def test_min_and_max_contains_count_the_matching_items() -> None:
    schema = {"type": "array", "contains": {"type": "integer"}, "minContains": 2, "maxContains": 3}
    assert matches(["a", 1, 2], schema) and matches([1, 2, 3], schema)
    assert "at least 2" in str(violation([1, "a"], schema)) and "at most 3" in str(violation([1, 2, 3, 4], schema))
    assert matches([], {"contains": {"type": "integer"}, "minContains": 0})


@pytest.mark.parametrize("keyword", ["unevaluatedProperties", "unevaluatedItems", "$dynamicRef"])
def test_a_schema_using_a_keyword_it_cannot_honour_is_refused_at_construction(keyword: str) -> None:
    with pytest.raises(ValueError, match=f"uses '{re.escape(keyword)}' at /properties/inner"):
        Validator({"type": "object", "properties": {"inner": {keyword: False}}})


def test_a_property_merely_named_like_a_keyword_is_fine() -> None:
    assert matches({"unevaluatedProperties": 1}, {"type": "object", "properties": {"unevaluatedProperties": {"type": "integer"}}})


def test_an_invalid_pattern_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="invalid pattern"):
        Validator({"type": "string", "pattern": "(unclosed"})
