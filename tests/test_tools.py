"""tools/list and tools/call: results, structured output, errors, argument
conversion, threading, required client capabilities and the `Context`."""

import base64
import enum
import json
import threading
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Optional, TypedDict

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import meta, request
from memory import error_of, exchange, result_of
from mcpcore import (
    Audio,
    Context,
    EmbeddedResource,
    Image,
    McpError,
    ResourceLink,
    Server,
    ToolResult,
)
from mcpcore._app.tools import Tool
from mcpcore._runtime.call import Call
from mcpcore._wire.validation import matches
from wire_schema import validator

pytestmark = pytest.mark.anyio

LOG_KEY = "io.modelcontextprotocol/logLevel"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"


def strict(result: dict) -> dict:
    """Validate against CallToolResult itself: the response union also admits
    InputRequiredResult, which accepts almost anything with a resultType."""
    validator("CallToolResult").validate(result)
    return result


async def call(server: Server, name: str, arguments: Any = None, **extra: Any) -> dict:
    params: dict[str, Any] = {"name": name, **extra}
    if arguments is not None:
        params["arguments"] = arguments
    return strict(await result_of(server, request("tools/call", **params)))


async def listed(server: Server) -> dict[str, dict]:
    result = await result_of(server, request("tools/list"))
    validator("ListToolsResult").validate(result)
    return {tool["name"]: tool for tool in result["tools"]}


# -- module-level types (annotations are resolved with get_type_hints) ------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Priority(enum.Enum):
    LOW = 1
    HIGH = 2


@dataclass
class Point:
    x: int
    y: int = 0


@dataclass
class Shape:
    name: str
    corners: list[Point] = field(default_factory=list)


@dataclass
class Forecast:
    city: str
    celsius: float
    sky: Color


class Weather(TypedDict):
    city: str
    humidity: int


# -- plain results ----------------------------------------------------------------


async def test_string_result_becomes_one_text_block() -> None:
    server = Server("t")

    @server.tool
    def greet(name: str) -> str:
        """Say hello."""
        return f"hello {name}"

    result = await call(server, "greet", {"name": "ada"})
    assert result["content"] == [{"type": "text", "text": "hello ada"}]
    assert "structuredContent" not in result
    assert "isError" not in result


async def test_none_result_becomes_empty_content() -> None:
    server = Server("t")

    @server.tool
    def noop() -> None:
        return None

    assert (await call(server, "noop", {}))["content"] == []


async def test_missing_arguments_member_is_treated_as_an_empty_object() -> None:
    server = Server("t")

    @server.tool
    def constant() -> str:
        return "42"

    assert (await call(server, "constant"))["content"] == [{"type": "text", "text": "42"}]


async def test_unannotated_non_content_value_becomes_its_json_text() -> None:
    server = Server("t")

    @server.tool
    def numbers():
        return [1, 2, 3]

    result = await call(server, "numbers", {})
    assert result["content"] == [{"type": "text", "text": "[1,2,3]"}]
    assert "structuredContent" not in result
    assert "outputSchema" not in (await listed(server))["numbers"]


async def test_unannotated_dict_with_a_type_key_is_sent_as_json_text_not_as_a_content_block() -> None:
    server = Server("t")

    @server.tool
    def lookup_account():
        return {"type": "admin", "name": "root"}

    result = await result_of(server, request("tools/call", name="lookup_account", arguments={}))
    strict(result)
    assert json.loads(result["content"][0]["text"]) == {"type": "admin", "name": "root"}


# -- structured results -------------------------------------------------------------


async def test_dict_return_annotation_gives_structured_content_json_text_and_output_schema() -> None:
    server = Server("t")

    @server.tool
    def stats(values: list[int]) -> dict[str, int]:
        return {"count": len(values), "total": sum(values)}

    result = await call(server, "stats", {"values": [1, 2, 3]})
    assert result["structuredContent"] == {"count": 3, "total": 6}
    assert len(result["content"]) == 1
    assert result["content"][0]["type"] == "text"
    assert json.loads(result["content"][0]["text"]) == {"count": 3, "total": 6}
    tool = (await listed(server))["stats"]
    assert tool["outputSchema"] == {"type": "object", "additionalProperties": {"type": "integer"}}


async def test_bare_dict_return_annotation_gives_an_object_output_schema() -> None:
    server = Server("t")

    @server.tool
    def info() -> dict:
        return {"ok": True}

    assert (await call(server, "info", {}))["structuredContent"] == {"ok": True}
    assert (await listed(server))["info"]["outputSchema"] == {"type": "object"}


async def test_dataclass_return_gives_structured_content_with_enum_values_and_its_schema() -> None:
    server = Server("t")

    @server.tool
    def forecast(city: str) -> Forecast:
        return Forecast(city, 21.5, Color.GREEN)

    result = await call(server, "forecast", {"city": "Oslo"})
    expected = {"city": "Oslo", "celsius": 21.5, "sky": "green"}
    assert result["structuredContent"] == expected
    assert json.loads(result["content"][0]["text"]) == expected
    assert (await listed(server))["forecast"]["outputSchema"] == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "celsius": {"type": "number"},
            "sky": {"enum": ["red", "green"]},
        },
        "required": ["city", "celsius", "sky"],
    }


async def test_typeddict_return_gives_structured_content_and_its_schema() -> None:
    server = Server("t")

    @server.tool
    def weather(city: str) -> Weather:
        return {"city": city, "humidity": 65}

    result = await call(server, "weather", {"city": "Rome"})
    assert result["structuredContent"] == {"city": "Rome", "humidity": 65}
    assert json.loads(result["content"][0]["text"]) == {"city": "Rome", "humidity": 65}
    assert (await listed(server))["weather"]["outputSchema"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "humidity": {"type": "integer"}},
        "required": ["city", "humidity"],
    }


async def test_explicit_output_schema_is_advertised_verbatim_and_makes_results_structured() -> None:
    server = Server("t")
    schema = {"type": "array", "items": {"type": "string"}}

    @server.tool(output_schema=schema)
    def names():
        return ["a", "b"]

    assert (await listed(server))["names"]["outputSchema"] == schema
    result = await call(server, "names", {})
    assert result["structuredContent"] == ["a", "b"]
    assert json.loads(result["content"][0]["text"]) == ["a", "b"]


# -- content helpers ------------------------------------------------------------------


async def test_image_helper_becomes_base64_image_content() -> None:
    server = Server("t")

    @server.tool
    def picture():
        return Image(b"\x89PNG\r\n", "image/png")

    result = await call(server, "picture", {})
    assert result["content"] == [
        {"type": "image", "data": base64.b64encode(b"\x89PNG\r\n").decode(), "mimeType": "image/png"}
    ]


async def test_audio_helper_keeps_already_base64_text_as_is() -> None:
    server = Server("t")

    @server.tool
    def sound():
        return Audio("UklGRg==", "audio/wav")

    assert (await call(server, "sound", {}))["content"] == [
        {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}
    ]


async def test_embedded_resource_helper_becomes_resource_content_with_text_or_blob() -> None:
    server = Server("t")

    @server.tool
    def embed():
        return [
            EmbeddedResource("file:///notes.txt", text="remember", mime_type="text/plain"),
            EmbeddedResource("file:///logo.bin", blob=b"\x00\x01"),
        ]

    assert (await call(server, "embed", {}))["content"] == [
        {"type": "resource", "resource": {"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "remember"}},
        {"type": "resource", "resource": {"uri": "file:///logo.bin", "blob": base64.b64encode(b"\x00\x01").decode()}},
    ]


async def test_resource_link_helper_becomes_resource_link_content() -> None:
    server = Server("t")

    @server.tool
    def link():
        return ResourceLink("file:///src/main.rs", "main.rs", "Entry point", "text/x-rust")

    assert (await call(server, "link", {}))["content"] == [
        {
            "type": "resource_link",
            "uri": "file:///src/main.rs",
            "name": "main.rs",
            "description": "Entry point",
            "mimeType": "text/x-rust",
        }
    ]


async def test_list_of_mixed_blocks_becomes_content_in_order() -> None:
    server = Server("t")

    @server.tool
    def mixed():
        return ["caption", Image(b"img", "image/jpeg"), {"type": "text", "text": "raw block"}, ResourceLink("a://b", "b")]

    assert (await call(server, "mixed", {}))["content"] == [
        {"type": "text", "text": "caption"},
        {"type": "image", "data": base64.b64encode(b"img").decode(), "mimeType": "image/jpeg"},
        {"type": "text", "text": "raw block"},
        {"type": "resource_link", "uri": "a://b", "name": "b"},
    ]


async def test_tool_result_gives_full_control_including_is_error() -> None:
    server = Server("t")

    @server.tool
    def custom():
        return ToolResult(content=["quota exceeded"], structured={"retryAfter": 30}, is_error=True)

    result = await call(server, "custom", {})
    assert result["content"] == [{"type": "text", "text": "quota exceeded"}]
    assert result["structuredContent"] == {"retryAfter": 30}
    assert result["isError"] is True


@pytest.mark.parametrize("helper", [Image, Audio, EmbeddedResource])
async def test_tool_annotated_to_return_a_binary_content_helper_can_be_registered(helper) -> None:
    server = Server("t")
    value = {Image: Image(b"i"), Audio: Audio(b"a"), EmbeddedResource: EmbeddedResource("mem://e", text="e")}[helper]

    def produce():
        return value

    produce.__annotations__["return"] = helper
    server.add_tool(produce)
    assert "outputSchema" not in (await listed(server))["produce"]
    assert (await call(server, "produce", {}))["content"] == [value.to_block()]


async def test_tool_annotated_to_return_a_resource_link_sends_a_resource_link_block() -> None:
    server = Server("t")

    @server.tool
    def link() -> ResourceLink:
        return ResourceLink("file:///a.txt", "a.txt")

    result = await call(server, "link", {})
    assert result["content"] == [{"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"}]
    assert "structuredContent" not in result
    assert "outputSchema" not in (await listed(server))["link"]


async def test_tool_annotated_to_return_tool_result_advertises_no_output_schema() -> None:
    server = Server("t")

    @server.tool
    def custom() -> ToolResult:
        return ToolResult(content=["plain"])

    assert (await call(server, "custom", {}))["content"] == [{"type": "text", "text": "plain"}]
    assert "outputSchema" not in (await listed(server))["custom"]


async def test_tool_result_from_a_structured_tool_is_sent_unchanged() -> None:
    server = Server("t")

    @server.tool
    def maybe() -> dict:
        return ToolResult(content=["not found"], is_error=True)

    result = await call(server, "maybe", {})
    assert result["content"] == [{"type": "text", "text": "not found"}]
    assert result["isError"] is True
    assert "structuredContent" not in result


# -- failures -------------------------------------------------------------------------


async def test_exception_in_a_tool_becomes_an_error_result_naming_it_and_the_server_keeps_serving() -> None:
    server = Server("t")

    @server.tool
    def divide(a: int, b: int) -> str:
        return str(a // b)

    failed = await call(server, "divide", {"a": 1, "b": 0})
    assert failed["isError"] is True
    assert failed["content"] == [
        {"type": "text", "text": "Error in tool 'divide': ZeroDivisionError: integer division or modulo by zero"}
    ]
    ok = await call(server, "divide", {"a": 7, "b": 2})
    assert ok["content"] == [{"type": "text", "text": "3"}]
    assert "isError" not in ok


async def test_exception_in_an_async_tool_becomes_an_error_result() -> None:
    server = Server("t")

    @server.tool
    async def fetch(url: str) -> str:
        raise ConnectionError(f"cannot reach {url}")

    result = await call(server, "fetch", {"url": "http://x"})
    assert result["isError"] is True
    assert result["content"][0]["text"] == "Error in tool 'fetch': ConnectionError: cannot reach http://x"


async def test_mcp_error_raised_in_a_tool_becomes_a_json_rpc_error_with_its_code_and_data() -> None:
    server = Server("t")

    @server.tool
    def city(name: str) -> str:
        raise McpError(-32602, "unknown city", {"city": name})

    response = (await exchange(server, request("tools/call", 5, name="city", arguments={"name": "Atlantis"}))).response
    assert "result" not in response
    assert response["id"] == 5
    assert response["error"] == {"code": -32602, "message": "unknown city", "data": {"city": "Atlantis"}}


async def test_application_error_code_from_a_tool_is_passed_through() -> None:
    server = Server("t")

    @server.tool
    async def busy() -> str:
        raise McpError(-1001, "backend busy")

    assert await error_of(server, request("tools/call", name="busy", arguments={})) == {
        "code": -1001,
        "message": "backend busy",
    }


async def test_argument_of_the_wrong_type_is_an_error_result_naming_the_field_and_type() -> None:
    server = Server("t")

    @server.tool
    def repeat(text: str, times: int) -> str:
        return text * times

    result = await call(server, "repeat", {"text": "ab", "times": "three"})
    assert result["isError"] is True
    assert result["content"] == [
        {"type": "text", "text": "Invalid arguments for tool 'repeat': times: expected integer, got string "
                                 "(times: the string 'three' does not read as integer)"}
    ]


async def test_missing_required_argument_is_an_error_result_naming_the_field() -> None:
    server = Server("t")

    @server.tool
    def repeat(text: str, times: int = 2) -> str:
        return text * times

    result = await call(server, "repeat", {"times": 3})
    assert result["isError"] is True
    assert result["content"][0]["text"] == "Invalid arguments for tool 'repeat': text: is required but missing"


async def test_unknown_argument_is_an_error_result_naming_the_field_and_accepted_ones() -> None:
    server = Server("t")

    @server.tool
    def repeat(text: str, times: int = 2) -> str:
        return text * times

    result = await call(server, "repeat", {"text": "a", "count": 3})
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "Invalid arguments for tool 'repeat': count: is not an accepted field (accepted: text, times)"
    )


async def test_boolean_is_not_accepted_as_an_integer_argument() -> None:
    server = Server("t")

    @server.tool
    def square(n: int) -> int:
        return n * n

    result = await call(server, "square", {"n": True})
    assert result["isError"] is True
    assert "n: expected integer, got boolean" in result["content"][0]["text"]


async def test_nested_invalid_argument_is_named_by_its_path() -> None:
    server = Server("t")

    @server.tool
    def area(shape: Shape) -> str:
        return shape.name

    result = await call(server, "area", {"shape": {"name": "tri", "corners": [{"x": 1}, {"x": "two"}]}})
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "Invalid arguments for tool 'area': shape.corners[1].x: expected integer, got string "
        "(shape.corners[1].x: the string 'two' does not read as integer)"
    )
    coerced = await call(server, "area", {"shape": {"name": "tri", "corners": [{"x": 1}, {"x": "2"}]}})
    assert coerced["content"][0]["text"] == "tri"  # "2" read as 2 at the same depth


@pytest.mark.parametrize("arguments", [["a"], "text", 3])
async def test_arguments_that_are_not_an_object_are_a_protocol_error(arguments) -> None:
    server = Server("t")

    @server.tool
    def anything() -> str:
        return "x"

    error = await error_of(server, request("tools/call", name="anything", arguments=arguments))
    assert error["code"] == -32602
    assert "arguments" in error["message"]


async def test_unknown_tool_is_a_protocol_error_not_a_tool_result() -> None:
    server = Server("t")
    server.add_tool(lambda: "x", name="known")
    response = (await exchange(server, request("tools/call", name="unknown_tool", arguments={}))).response
    assert "result" not in response
    assert response["error"]["code"] == -32602
    assert response["error"]["data"] == {"name": "unknown_tool"}
    assert "unknown_tool" in response["error"]["message"]


async def test_missing_tool_name_is_a_protocol_error() -> None:
    server = Server("t")
    server.add_tool(lambda: "x", name="known")
    error = await error_of(server, request("tools/call", arguments={}))
    assert error["code"] == -32602


# -- raw input schemas -----------------------------------------------------------------

RAW_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "region": {"type": "string", "enum": ["us-west1", "europe-north1"]},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
    },
    "properties": {
        "region": {"$ref": "#/$defs/region", "type": "string", "x-mcp-header": "Region", "description": "Where"},
        "query": {"type": "string", "minLength": 1},
        "limit": {"$ref": "#/$defs/limit"},
        "options": {"type": "object", "properties": {"dry_run": {"type": "boolean"}}},
    },
    "required": ["region", "query"],
    "additionalProperties": False,
    "x-vendor-note": "kept as is",
}


def raw_server(seen: list) -> Server:
    server = Server("t")

    def execute_sql(**kwargs: Any) -> str:
        seen.append(kwargs)
        return "done"

    server.add_tool(execute_sql, input_schema=json.loads(json.dumps(RAW_SCHEMA)), description="Run SQL")
    return server


async def test_raw_input_schema_is_listed_verbatim() -> None:
    tool = (await listed(raw_server([])))["execute_sql"]
    assert tool["inputSchema"] == RAW_SCHEMA
    assert tool["description"] == "Run SQL"


async def test_raw_schema_arguments_are_passed_through_unchanged_as_keyword_arguments() -> None:
    seen: list = []
    arguments = {"region": "us-west1", "query": "SELECT 1", "limit": 5, "options": {"dry_run": True}}
    result = await call(raw_server(seen), "execute_sql", arguments)
    assert result["content"] == [{"type": "text", "text": "done"}]
    assert seen == [arguments]


async def test_raw_schema_refs_into_defs_are_validated() -> None:
    seen: list = []
    server = raw_server(seen)
    bad_region = await call(server, "execute_sql", {"region": "mars", "query": "q"})
    assert bad_region["isError"] is True
    assert "region: expected one of 'us-west1', 'europe-north1', got 'mars'" in bad_region["content"][0]["text"]
    bad_limit = await call(server, "execute_sql", {"region": "us-west1", "query": "q", "limit": 500})
    assert bad_limit["isError"] is True
    assert "limit: must be <= 100, got 500" in bad_limit["content"][0]["text"]
    assert seen == []


async def test_raw_schema_to_named_parameters_receives_exactly_the_named_arguments() -> None:
    server = Server("t")
    seen = []

    def move(x: int, y: int) -> str:
        seen.append((x, y))
        return f"{x},{y}"

    server.add_tool(
        move,
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                      "required": ["x", "y"]},
    )
    assert (await call(server, "move", {"x": 1, "y": -2}))["content"] == [{"type": "text", "text": "1,-2"}]
    assert seen == [(1, -2)]


def test_raw_schema_without_an_object_root_is_refused() -> None:
    with pytest.raises(ValueError, match="object"):
        Server("t").add_tool(lambda **kw: "x", name="arr", input_schema={"type": "array"})


@pytest.mark.parametrize(
    ("prop", "match"),
    [
        ({"type": "string", "x-mcp-header": ""}, "non-empty"),
        ({"type": "string", "x-mcp-header": "Has Space"}, "HTTP token"),
        ({"type": "string", "x-mcp-header": "Line\r\nBreak"}, "HTTP token"),
        ({"type": "string", "x-mcp-header": "Région"}, "HTTP token"),
        ({"type": "number", "x-mcp-header": "Ratio"}, "string, integer or boolean"),
        ({"type": "object", "x-mcp-header": "Obj"}, "string, integer or boolean"),
        ({"x-mcp-header": "Untyped"}, "string, integer or boolean"),
        ({"type": "string", "x-mcp-header": 5}, "non-empty string"),
    ],
)
def test_tool_with_an_invalid_x_mcp_header_is_refused(prop: dict, match: str) -> None:
    schema = {"type": "object", "properties": {"p": prop}}
    with pytest.raises(ValueError, match=match):
        Server("t").add_tool(lambda **kw: "x", name="bad", input_schema=schema)


def test_x_mcp_header_names_must_be_case_insensitively_unique() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "x-mcp-header": "Tenant"},
            "b": {"type": "string", "x-mcp-header": "tenant"},
        },
    }
    with pytest.raises(ValueError, match="repeats"):
        Server("t").add_tool(lambda **kw: "x", name="dup", input_schema=schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}},
        {"type": "object", "properties": {"a": {"anyOf": [{"type": "string", "x-mcp-header": "A"}]}}},
        {"type": "object", "$defs": {"d": {"type": "string", "x-mcp-header": "D"}},
         "properties": {"a": {"$ref": "#/$defs/d"}}},
    ],
)
def test_x_mcp_header_not_statically_reachable_through_properties_is_refused(schema: dict) -> None:
    with pytest.raises(ValueError, match="properties"):
        Server("t").add_tool(lambda **kw: "x", name="unreachable", input_schema=schema)


async def test_valid_nested_x_mcp_headers_are_accepted_and_listed() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tenant": {"type": "string", "x-mcp-header": "Tenant"},
            "meta": {"type": "object", "properties": {"trace": {"type": "boolean", "x-mcp-header": "Trace-On"}}},
            "shard": {"type": "integer", "x-mcp-header": "Shard"},
        },
    }
    server = Server("t")
    server.add_tool(lambda **kw: "x", name="headers", input_schema=schema)
    assert (await listed(server))["headers"]["inputSchema"] == schema


def test_a_property_named_x_mcp_header_is_not_mistaken_for_an_annotation() -> None:
    schema = {"type": "object", "properties": {"x-mcp-header": {"type": "string"}}}
    tool = Server("t").add_tool(lambda **kw: "x", name="literal", input_schema=schema)
    assert tool.describe()["inputSchema"] == schema


# -- tool names and metadata --------------------------------------------------------------


@pytest.mark.parametrize("name", ["has space", "comma,name", "slash/name", "x" * 129, "émoji"])
def test_invalid_tool_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="tool name"):
        Server("t").add_tool(lambda: "x", name=name)


def test_explicit_empty_tool_name_is_refused() -> None:
    def real_name() -> str:
        return "x"

    with pytest.raises(ValueError, match="tool name"):
        Server("t").add_tool(real_name, name="")


def test_lambda_without_an_explicit_name_is_refused() -> None:
    with pytest.raises(ValueError, match="<lambda>"):
        Server("t").add_tool(lambda: "x")


@pytest.mark.parametrize("name", ["getUser", "DATA_EXPORT_v2", "admin.tools.list", "a", "x" * 128, "a-b"])
async def test_valid_tool_names_are_accepted_and_callable(name: str) -> None:
    server = Server("t")
    server.add_tool(lambda: "ok", name=name)
    assert list(await listed(server)) == [name]
    assert (await call(server, name, {}))["content"] == [{"type": "text", "text": "ok"}]


async def test_tool_metadata_title_annotations_and_meta_are_listed() -> None:
    server = Server("t")

    @server.tool(name="get_weather", title="Weather", annotations={"readOnlyHint": True},
                 meta={"com.example/tier": "free"})
    def weather(city: str) -> str:
        """Current weather for a city."""
        return city

    assert (await listed(server))["get_weather"] == {
        "name": "get_weather",
        "title": "Weather",
        "description": "Current weather for a city.",
        "inputSchema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "annotations": {"readOnlyHint": True},
        "_meta": {"com.example/tier": "free"},
    }


# -- parameter conversion and schemas --------------------------------------------------------


async def test_enum_parameters_are_converted_and_listed_as_enums() -> None:
    server = Server("t")
    seen = []

    @server.tool
    def paint(color: Color, priority: Priority = Priority.LOW) -> str:
        seen.append((color, priority))
        return color.name

    result = await call(server, "paint", {"color": "green", "priority": 2})
    assert result["content"] == [{"type": "text", "text": "GREEN"}]
    assert seen == [(Color.GREEN, Priority.HIGH)]
    schema = (await listed(server))["paint"]["inputSchema"]
    assert schema["properties"] == {"color": {"enum": ["red", "green"]}, "priority": {"enum": [1, 2], "default": 1}}
    assert schema["required"] == ["color"]

    rejected = await call(server, "paint", {"color": "blue"})
    assert rejected["isError"] is True
    assert "color: expected one of 'red', 'green', got 'blue'" in rejected["content"][0]["text"]


async def test_dataclass_parameters_are_converted_recursively_with_defaults() -> None:
    server = Server("t")
    seen = []

    @server.tool
    def draw(shape: Shape) -> str:
        seen.append(shape)
        return shape.name

    await call(server, "draw", {"shape": {"name": "line", "corners": [{"x": 1, "y": 2}, {"x": 3}]}})
    assert seen == [Shape("line", [Point(1, 2), Point(3, 0)])]
    assert isinstance(seen[0].corners[1], Point)
    assert (await listed(server))["draw"]["inputSchema"]["properties"]["shape"] == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "corners": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
                    "required": ["x"],
                },
            },
        },
        "required": ["name"],
    }


async def test_tuple_parameters_are_converted_to_tuples_and_listed_with_prefix_items() -> None:
    server = Server("t")
    seen = []

    @server.tool
    def place(at: tuple[int, str], tags: tuple[str, ...] = ()) -> str:
        seen.append((at, tags))
        return "ok"

    await call(server, "place", {"at": [3, "north"], "tags": ["a", "b"]})
    assert seen == [((3, "north"), ("a", "b"))]
    assert type(seen[0][0]) is tuple and type(seen[0][1]) is tuple
    props = (await listed(server))["place"]["inputSchema"]["properties"]
    assert props["at"] == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "minItems": 2,
        "maxItems": 2,
    }
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "default": []}

    too_long = await call(server, "place", {"at": [1, "a", "extra"]})
    assert too_long["isError"] is True
    assert "at: allows at most 2 items, got 3" in too_long["content"][0]["text"]


async def test_literal_parameters_are_listed_as_enums_and_checked() -> None:
    server = Server("t")

    @server.tool
    def sort(order: Literal["asc", "desc"] = "asc") -> str:
        return order

    assert (await listed(server))["sort"]["inputSchema"]["properties"]["order"] == {
        "enum": ["asc", "desc"],
        "default": "asc",
    }
    assert (await call(server, "sort", {"order": "desc"}))["content"][0]["text"] == "desc"
    assert (await call(server, "sort", {}))["content"][0]["text"] == "asc"
    bad = await call(server, "sort", {"order": "random"})
    assert bad["isError"] is True
    assert "order: expected one of 'asc', 'desc', got 'random'" in bad["content"][0]["text"]


async def test_optional_parameters_accept_null_and_convert_the_non_null_member() -> None:
    server = Server("t")
    seen = []

    @server.tool
    def locate(origin: Optional[Point] = None, color: Optional[Color] = None) -> str:
        seen.append((origin, color))
        return "ok"

    await call(server, "locate", {"origin": {"x": 5}, "color": "red"})
    await call(server, "locate", {"origin": None})
    await call(server, "locate", {})
    assert seen == [(Point(5, 0), Color.RED), (None, None), (None, None)]
    props = (await listed(server))["locate"]["inputSchema"]["properties"]
    assert props["color"] == {"anyOf": [{"enum": ["red", "green"]}, {"type": "null"}], "default": None}
    assert props["origin"]["anyOf"][1] == {"type": "null"}
    assert "required" not in (await listed(server))["locate"]["inputSchema"]


async def test_annotated_parameters_carry_their_description_into_the_schema() -> None:
    server = Server("t")

    @server.tool
    def search(
        query: Annotated[str, "What to look for"],
        limit: Annotated[int, "Maximum number of hits"] = 10,
    ) -> str:
        return f"{query}:{limit}"

    schema = (await listed(server))["search"]["inputSchema"]
    assert schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for"},
            "limit": {"type": "integer", "description": "Maximum number of hits", "default": 10},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert (await call(server, "search", {"query": "mcp"}))["content"][0]["text"] == "mcp:10"


async def test_float_parameters_receive_floats_even_for_integer_json_numbers() -> None:
    server = Server("t")
    seen = []

    @server.tool
    def scale(factor: float) -> str:
        seen.append(factor)
        return "ok"

    await call(server, "scale", {"factor": 2})
    assert seen == [2.0] and type(seen[0]) is float


async def test_int_parameters_receive_ints_even_when_the_json_number_is_written_with_a_fraction() -> None:
    server = Server("t")
    seen = []

    @server.tool
    def count(n: int) -> str:
        seen.append(n)
        return "ok"

    await call(server, "count", {"n": 2.0})
    assert seen == [2] and type(seen[0]) is int


def test_parameter_type_without_a_schema_is_refused_at_registration() -> None:
    class Opaque:
        pass

    def use(thing: Opaque) -> str:
        return "x"

    with pytest.raises(TypeError, match="thing"):
        Server("t").add_tool(use)


# -- execution threads --------------------------------------------------------------------------


async def test_sync_tools_run_in_a_worker_thread() -> None:
    server = Server("t")
    threads = []

    @server.tool
    def blocking() -> str:
        threads.append(threading.current_thread())
        return "done"

    await call(server, "blocking", {})
    assert len(threads) == 1
    assert threads[0] is not threading.main_thread()


async def test_async_tools_run_in_the_event_loop_thread() -> None:
    server = Server("t")
    threads = []

    @server.tool
    async def nonblocking() -> str:
        threads.append(threading.current_thread())
        return "done"

    await call(server, "nonblocking", {})
    assert threads == [threading.main_thread()]


async def test_a_blocked_sync_tool_does_not_block_other_calls() -> None:
    server = Server("t")
    release = threading.Event()

    @server.tool
    def wait_for_release() -> str:
        release.wait(5)
        return "released"

    @server.tool
    async def quick() -> str:
        return "quick"

    results: dict[str, dict] = {}

    async def run(name: str) -> None:
        results[name] = await call(server, name, {})

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "wait_for_release")
            await run("quick")
            assert "wait_for_release" not in results
            release.set()
    assert results["quick"]["content"][0]["text"] == "quick"
    assert results["wait_for_release"]["content"][0]["text"] == "released"


# -- required client capabilities ------------------------------------------------------------------


def sampling_server() -> Server:
    server = Server("t")

    @server.tool(requires={"sampling": {}})
    def summarize(text: str) -> str:
        return text[:3]

    return server


async def test_tool_requiring_an_undeclared_capability_fails_with_missing_capability_error() -> None:
    error = await error_of(sampling_server(), request("tools/call", name="summarize", arguments={"text": "hello"}))
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"sampling": {}}}
    assert "sampling" in error["message"]


async def test_tool_requiring_a_declared_capability_runs() -> None:
    message = request("tools/call", name="summarize", arguments={"text": "hello"},
                      _meta=meta(**{CAPS_KEY: {"sampling": {}}}))
    result = strict(await result_of(sampling_server(), message))
    assert result["content"] == [{"type": "text", "text": "hel"}]


async def test_missing_capability_is_reported_before_argument_validation() -> None:
    error = await error_of(sampling_server(), request("tools/call", name="summarize", arguments={"text": 5}))
    assert error["code"] == -32021


async def test_nested_required_capability_reports_only_the_missing_part() -> None:
    server = Server("t")
    server.add_tool(lambda: "x", name="ask", requires={"elicitation": {"form": {}}, "roots": {}})
    message = request("tools/call", name="ask", arguments={},
                      _meta=meta(**{CAPS_KEY: {"elicitation": {}, "roots": {"listChanged": True}}}))
    error = await error_of(server, message)
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}


# -- Context --------------------------------------------------------------------------------------


def progress_server() -> Server:
    server = Server("t")

    @server.tool
    async def work(ctx: Context, steps: int = 2) -> str:
        for step in range(1, steps + 1):
            await ctx.progress(step, steps, f"step {step}")
        return "finished"

    return server


async def test_progress_notifications_are_sent_before_the_response_when_a_token_is_given() -> None:
    message = request("tools/call", name="work", arguments={"steps": 2}, _meta=meta(progressToken="tok-1"))
    writer = await exchange(progress_server(), message)
    assert [n["method"] for n in writer.notifications] == ["notifications/progress"] * 2
    assert [n["params"] for n in writer.notifications] == [
        {"progressToken": "tok-1", "progress": 1, "total": 2, "message": "step 1"},
        {"progressToken": "tok-1", "progress": 2, "total": 2, "message": "step 2"},
    ]
    assert writer.response["result"]["content"] == [{"type": "text", "text": "finished"}]


async def test_integer_progress_token_is_echoed_as_given() -> None:
    message = request("tools/call", name="work", arguments={"steps": 1}, _meta=meta(progressToken=77))
    writer = await exchange(progress_server(), message)
    assert writer.notifications[0]["params"]["progressToken"] == 77


async def test_no_progress_notifications_without_a_progress_token() -> None:
    writer = await exchange(progress_server(), request("tools/call", name="work", arguments={"steps": 3}))
    assert writer.notifications == []
    assert writer.response["result"]["content"] == [{"type": "text", "text": "finished"}]


def logging_server() -> Server:
    server = Server("t")

    @server.tool
    async def chatty(ctx: Context) -> str:
        await ctx.debug("d")
        await ctx.info({"step": "i"})
        await ctx.log("notice", "n", logger="db")
        await ctx.warning("w")
        await ctx.error("e")
        await ctx.log("emergency", "x")
        return "ok"

    return server


async def test_no_log_notifications_without_a_log_level() -> None:
    writer = await exchange(logging_server(), request("tools/call", name="chatty", arguments={}))
    assert writer.notifications == []


async def test_log_notifications_are_sent_at_or_above_the_requested_level_only() -> None:
    message = request("tools/call", name="chatty", arguments={}, _meta=meta(**{LOG_KEY: "notice"}))
    writer = await exchange(logging_server(), message)
    assert all(n["method"] == "notifications/message" for n in writer.notifications)
    assert [n["params"] for n in writer.notifications] == [
        {"level": "notice", "data": "n", "logger": "db"},
        {"level": "warning", "data": "w"},
        {"level": "error", "data": "e"},
        {"level": "emergency", "data": "x"},
    ]


async def test_debug_log_level_receives_every_message_including_structured_data() -> None:
    message = request("tools/call", name="chatty", arguments={}, _meta=meta(**{LOG_KEY: "debug"}))
    writer = await exchange(logging_server(), message)
    assert [n["params"]["level"] for n in writer.notifications] == [
        "debug", "info", "notice", "warning", "error", "emergency"
    ]
    assert writer.notifications[1]["params"]["data"] == {"step": "i"}


async def test_logging_at_an_unknown_level_is_an_error_result() -> None:
    server = Server("t")

    @server.tool
    async def odd(ctx: Context) -> str:
        await ctx.log("loud", "x")
        return "ok"

    result = await call(server, "odd", {}, _meta=meta(**{LOG_KEY: "debug"}))
    assert result["isError"] is True
    assert "ValueError" in result["content"][0]["text"]
    assert "loud" in result["content"][0]["text"]


async def test_context_exposes_client_capabilities_info_meta_and_request_id() -> None:
    server = Server("t")
    seen = {}

    @server.tool
    def inspect_call(ctx: Context, note: str) -> str:
        seen.update(
            capabilities=ctx.client_capabilities,
            info=ctx.client_info,
            version=ctx.protocol_version,
            request_id=ctx.request_id,
            custom=ctx.meta.get("com.example/trace"),
            cancelled=ctx.cancelled,
            has_roots=ctx.has_capability(roots={}),
            has_sampling=ctx.has_capability(sampling={}),
        )
        return note

    m = meta(**{CAPS_KEY: {"roots": {"listChanged": True}}, "com.example/trace": "abc"})
    result = await call(server, "inspect_call", {"note": "n"}, _meta=m)
    assert result["content"] == [{"type": "text", "text": "n"}]
    schema = (await listed(server))["inspect_call"]["inputSchema"]
    assert list(schema["properties"]) == ["note"]
    # `call` sends request id 1 (the default of conftest.request)
    assert seen == {
        "capabilities": {"roots": {"listChanged": True}},
        "info": {"name": "mcpcore-tests", "version": "0"},
        "version": "2026-07-28",
        "request_id": 1,
        "custom": "abc",
        "cancelled": False,
        "has_roots": True,
        "has_sampling": False,
    }


async def test_context_request_id_is_the_json_rpc_id_of_the_call() -> None:
    server = Server("t")

    @server.tool
    async def which(ctx: Context) -> str:
        return repr(ctx.request_id)

    result = await result_of(server, request("tools/call", "req-9", name="which", arguments={}))
    assert result["content"] == [{"type": "text", "text": "'req-9'"}]


async def test_context_client_info_is_none_when_the_client_omits_it() -> None:
    server = Server("t")

    @server.tool
    async def who(ctx: Context) -> str:
        return repr(ctx.client_info)

    m = meta()
    del m["io.modelcontextprotocol/clientInfo"]
    assert (await call(server, "who", {}, _meta=m))["content"][0]["text"] == "None"


async def test_context_require_capability_raises_missing_capability_error() -> None:
    server = Server("t")
    reached = []

    @server.tool
    async def elicit(ctx: Context) -> str:
        ctx.require_capability(elicitation={})
        reached.append(True)
        return "ok"

    error = await error_of(server, request("tools/call", name="elicit", arguments={}))
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"elicitation": {}}}
    assert reached == []

    declared = request("tools/call", name="elicit", arguments={}, _meta=meta(**{CAPS_KEY: {"elicitation": {}}}))
    assert (strict(await result_of(server, declared)))["content"] == [{"type": "text", "text": "ok"}]
    assert reached == [True]


async def test_context_can_be_annotated_and_is_never_a_tool_argument() -> None:
    server = Server("t")

    @server.tool
    async def annotated(text: str, context: Annotated[Context, "injected"]) -> str:
        return f"{text}:{context.cancelled}"

    schema = (await listed(server))["annotated"]["inputSchema"]
    assert schema["properties"] == {"text": {"type": "string"}}
    assert (await call(server, "annotated", {"text": "t"}))["content"][0]["text"] == "t:False"
    rejected = await call(server, "annotated", {"text": "t", "context": {}})
    assert rejected["isError"] is True
    assert "context: is not an accepted field" in rejected["content"][0]["text"]


async def test_valid_json_a_python_set_cannot_hold_is_an_invalid_arguments_result() -> None:
    server = Server("sets")

    @server.tool
    def tag(tags: set) -> str:
        return ",".join(sorted(map(str, tags)))

    result = await result_of(server, request("tools/call", name="tag", arguments={"tags": [[1], [2]]}))
    assert result["isError"] is True and "Invalid arguments for tool 'tag': tags: cannot be made a set" in result["content"][0]["text"]


def test_multiple_of_a_small_step_for_a_huge_number_is_decided_not_crashed() -> None:
    assert matches(1e300, {"type": "number", "multipleOf": 0.01}) is True
    assert matches(0.015, {"type": "number", "multipleOf": 0.01}) is False


def test_a_raw_schema_the_validator_cannot_honour_is_refused_at_registration() -> None:
    server = Server("strict")
    with pytest.raises(ValueError, match="'unevaluatedProperties' at its root, which mcpcore does not validate"):
        server.add_tool(lambda **kw: "x", name="loose", input_schema={"type": "object", "unevaluatedProperties": False})


# The call plan: arguments the quick check accepts go to the function as they are.

# Values of every JSON type, among them what coercion reads ("41", "true") and what an exact-type pass must refuse
# (a bool for an integer, 2.0 for an integer, an integer past 64 bits).
_VALUES = st.sampled_from(["x", "", "41", "true", 3, 0, -1, 2**70, True, False, None, 2.0, 1.5, [1], {}])
_ARGUMENTS = st.dictionaries(st.sampled_from(["text", "count", "flag", "other"]), _VALUES, max_size=4)


def _flat(text: str, count: int = 1, flag: bool = False) -> str:
    return f"{text}|{count}|{flag}"


def _called(tool: Tool, arguments: dict[str, Any], strict: bool) -> Any:
    server = Server("plan", strict=strict)
    context = Context(Call({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}), None, meta(), server)  # type: ignore[arg-type]
    coroutine = tool.call(dict(arguments), context)
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("the tool waited")


@settings(max_examples=300, deadline=None)
@given(_ARGUMENTS, st.booleans())
@example({"text": "x", "other": True}, False)  # a property the schema does not have
@example({"text": "x", "count": True}, False)  # a bool where an integer goes
@example({"text": "x", "count": 2.0}, False)  # an integral float where an integer goes
@example({"text": "x", "count": "41"}, False)  # what coercion reads as 41 (refused when strict)
@example({"text": "x", "count": "41"}, True)
@example({"count": 3}, False)  # a required property missing
@example({"text": "x", "count": 3, "flag": True}, False)  # everything as sent
def test_the_one_pass_plan_answers_exactly_as_the_full_path_does(arguments: dict[str, Any], strict: bool) -> None:
    planned = Tool(_flat, inline=True)
    full = Tool(_flat, inline=True)
    full.quick = None  # the full path only: coerce, validate, convert
    assert planned.quick is not None
    assert _called(planned, arguments, strict) == _called(full, arguments, strict)
