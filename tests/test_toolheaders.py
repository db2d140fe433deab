"""`x-mcp-header` annotations in tool input schemas (mcpcore._wire.toolheaders)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpcore._wire.toolheaders import HeaderParam, header_params

PLACEMENT_RULE = "x-mcp-header may only annotate properties reached through 'properties' alone"


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def annotated(header: Any, kind: Any = "string") -> dict[str, Any]:
    prop: dict[str, Any] = {"x-mcp-header": header}
    if kind is not None:
        prop["type"] = kind
    return prop


# -- what is found -------------------------------------------------------------


def test_schema_without_annotations_has_no_header_params() -> None:
    assert header_params("t", obj(a={"type": "string"}, b={"type": "integer"})) == ()


def test_top_level_annotation_is_found_with_path_and_kind() -> None:
    assert header_params("t", obj(region=annotated("Region"))) == (HeaderParam("Region", ("region",), "string"),)


def test_nested_annotation_is_found_with_full_path() -> None:
    schema = obj(a=obj(b=annotated("Deep", "integer")))
    assert header_params("t", schema) == (HeaderParam("Deep", ("a", "b"), "integer"),)


def test_parent_and_child_annotations_are_both_found() -> None:
    parent = {**obj(b=annotated("Child", "boolean")), "x-mcp-header": "Parent", "type": "string"}
    params = header_params("t", {"type": "object", "properties": {"a": parent}})
    assert params == (
        HeaderParam("Parent", ("a",), "string"),
        HeaderParam("Child", ("a", "b"), "boolean"),
    )


def test_params_are_sorted_by_path() -> None:
    schema = obj(z=annotated("Z"), a=annotated("A"), m=obj(k=annotated("K", "integer")))
    assert [p.path for p in header_params("t", schema)] == [("a",), ("m", "k"), ("z",)]


@pytest.mark.parametrize("kind", ["string", "integer", "boolean"])
def test_string_integer_and_boolean_properties_may_be_headers(kind: str) -> None:
    assert header_params("t", obj(p=annotated("P", kind)))[0].kind == kind


@pytest.mark.parametrize("header", ["Region", "X-Trace_Id.2", "a!#$%&'*+-.^_`|~9"])
def test_any_http_token_is_a_valid_header_name(header: str) -> None:
    assert header_params("t", obj(p=annotated(header)))[0].header == header


# -- names ----------------------------------------------------------------------


def test_empty_header_name_is_refused() -> None:
    with pytest.raises(ValueError, match="x-mcp-header must be a non-empty string"):
        header_params("t", obj(p=annotated("")))


def test_non_string_header_name_is_refused() -> None:
    with pytest.raises(ValueError, match="must be a non-empty string"):
        header_params("t", obj(p=annotated(5)))


@pytest.mark.parametrize("header", ["Has Space", "Host:Port", "Région", "Tab\there", "Semi;colon", "quote\""])
def test_non_token_header_name_is_refused(header: str) -> None:
    with pytest.raises(ValueError, match="must be an HTTP token"):
        header_params("t", obj(p=annotated(header)))


def test_header_name_with_trailing_newline_is_refused() -> None:
    with pytest.raises(ValueError, match="must be an HTTP token"):
        header_params("t", obj(p=annotated("Region\n")))


def test_refusal_names_the_tool_and_the_property_path() -> None:
    with pytest.raises(ValueError, match=r"tool 'weather', property 'a\.b'"):
        header_params("weather", obj(a=obj(b=annotated("bad name"))))


def test_duplicate_names_differing_only_in_case_are_refused() -> None:
    with pytest.raises(ValueError, match=r"tool 't': x-mcp-header 'REGION' repeats 'Region' \(case-insensitive\)"):
        header_params("t", obj(a=annotated("Region"), b=annotated("REGION")))


def test_identical_names_on_nested_properties_are_refused() -> None:
    with pytest.raises(ValueError, match="case-insensitive"):
        header_params("t", obj(a=annotated("Same"), b=obj(c=annotated("same"))))


# -- kinds ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["number", "array", "object", "null", ["string", "null"], None])
def test_non_scalar_or_missing_type_is_refused(kind: Any) -> None:
    with pytest.raises(ValueError, match="needs a property of type string, integer or boolean"):
        header_params("t", obj(p=annotated("P", kind)))


# -- placement --------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param(obj(list={"type": "array", "items": annotated("I")}), id="items"),
        pytest.param(
            obj(list={"type": "array", "items": obj(x=annotated("I"))}),
            id="properties-under-items",
        ),
        pytest.param({"type": "object", "anyOf": [obj(x=annotated("A"))]}, id="anyOf"),
        pytest.param({"type": "object", "oneOf": [obj(x=annotated("O"))]}, id="oneOf"),
        pytest.param({"type": "object", "allOf": [obj(x=annotated("L"))]}, id="allOf"),
        pytest.param({"type": "object", "not": obj(x=annotated("N"))}, id="not"),
        pytest.param({"type": "object", "if": obj(x=annotated("F"))}, id="if"),
        pytest.param({"type": "object", "then": obj(x=annotated("T"))}, id="then"),
        pytest.param({"type": "object", "else": obj(x=annotated("E"))}, id="else"),
        pytest.param(
            {**obj(x={"$ref": "#/$defs/d"}), "$defs": {"d": annotated("D")}},
            id="$defs",
        ),
        pytest.param({"type": "object", "additionalProperties": annotated("X")}, id="additionalProperties"),
        pytest.param({"type": "object", "patternProperties": {"^a": annotated("P")}}, id="patternProperties"),
        pytest.param(obj(p={"anyOf": [annotated("Q")]}), id="anyOf-inside-property"),
        pytest.param({**obj(), "x-mcp-header": "Root"}, id="root"),
    ],
)
def test_annotation_outside_plain_properties_is_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=PLACEMENT_RULE):
        header_params("t", schema)


def test_placement_refusal_names_the_tool() -> None:
    with pytest.raises(ValueError, match="tool 'search'"):
        header_params("search", {"type": "object", "anyOf": [obj(x=annotated("A"))]})


def test_property_named_x_mcp_header_is_not_an_annotation() -> None:
    assert header_params("t", obj(**{"x-mcp-header": {"type": "string"}})) == ()


# -- HeaderParam.value_in -----------------------------------------------------------


def test_value_in_returns_top_level_argument() -> None:
    assert HeaderParam("Region", ("region",), "string").value_in({"region": "eu"}) == "eu"


def test_value_in_returns_nested_argument() -> None:
    assert HeaderParam("Deep", ("a", "b"), "integer").value_in({"a": {"b": 7}}) == 7


def test_value_in_returns_falsy_values_unchanged() -> None:
    assert HeaderParam("Flag", ("f",), "boolean").value_in({"f": False}) is False


def test_value_in_returns_none_when_absent() -> None:
    assert HeaderParam("Deep", ("a", "b"), "integer").value_in({"a": {}}) is None


def test_value_in_returns_none_when_an_intermediate_is_not_an_object() -> None:
    param = HeaderParam("Deep", ("a", "b"), "integer")
    assert param.value_in({"a": "text"}) is None
    assert param.value_in({"a": [1, 2]}) is None
    assert param.value_in(None) is None
