"""Parameter and return types beyond the JSON ones, constraints, coercion and docstring descriptions."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import pathlib
import uuid
from typing import Annotated, Any, Literal

import annotated_types
import pydantic
import pytest

from mcpcore import Field, Server
from mcpcore.testing import Client

pytestmark = pytest.mark.anyio


class Item(pydantic.BaseModel):
    name: str
    price: decimal.Decimal
    tags: list[str] = []


class Order(pydantic.BaseModel):
    items: list[Item]
    when: datetime.date


@dataclasses.dataclass
class Slot:
    start: datetime.datetime
    room: uuid.UUID


def typed_server(**options: Any) -> Server:
    server = Server("typed", **options)

    @server.tool
    def total(order: Order) -> Item:
        """Sum an order."""
        return Item(name=f"{len(order.items)} items on {order.when}", price=sum(i.price for i in order.items))

    @server.tool
    def book(slot: Slot, where: pathlib.Path, blob: bytes, at: datetime.time) -> dict:
        return {"start": slot.start, "room": slot.room, "where": where, "size": len(blob), "at": at,
                "kinds": [type(v).__name__ for v in (slot.start, slot.room, where, blob, at)]}

    @server.tool
    def bounded(
        count: Annotated[int, annotated_types.Ge(1), annotated_types.Le(10)],
        name: Annotated[str, Field("who", min_length=2, pattern="^[a-z]+$")],
        tags: Annotated[list[str], annotated_types.MaxLen(2)] = [],
        ratio: Annotated[float, "a ratio", {"exclusiveMaximum": 1}] = 0.5,
        size: Annotated[int, pydantic.Field(gt=0, description="bytes")] = 1,
    ) -> str:
        return f"{count} {name} {tags} {ratio} {size}"

    @server.tool
    def add(a: int, b: float, flag: bool, options: dict[str, int]) -> str:
        return f"{a!r} {b!r} {flag!r} {options!r}"

    @server.tool(strict=True)
    def exact(a: int) -> int:
        return a

    @server.tool
    def documented(city: str, days: int = 1) -> str:
        """Get the forecast.

        Args:
            city: The city, in full.
            days: How many days ahead.
        """
        return city

    @server.tool
    def plain(text: str) -> str:
        return text

    return server


async def test_pydantic_models_are_parameters_and_results() -> None:
    async with Client(typed_server(), strict=True) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        schema = tools["total"]["inputSchema"]
        assert schema["properties"]["order"]["title"] == "Order" and "Item" in schema["$defs"]
        assert schema["properties"]["order"]["properties"]["items"]["items"] == {"$ref": "#/$defs/Item"}
        assert tools["total"]["outputSchema"]["title"] == "Item"
        order = {"items": [{"name": "a", "price": "1.50"}, {"name": "b", "price": 2}], "when": "2026-12-01"}
        outcome = await client.call_tool("total", {"order": order})
        assert outcome.structured == {"name": "2 items on 2026-12-01", "price": "3.50", "tags": []}
        refused = await client.call_tool("total", {"order": {"items": [{"name": "a"}], "when": "2026-12-01"}})
        assert refused.is_error and "price" in refused.text


async def test_dates_uuids_decimals_paths_and_bytes_arrive_as_python_values() -> None:
    room = uuid.uuid4()
    async with Client(typed_server(), strict=True) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        props = tools["book"]["inputSchema"]["properties"]
        assert props["blob"] == {"type": "string", "contentEncoding": "base64"}
        assert props["slot"]["properties"]["start"] == {"type": "string", "format": "date-time"}
        slot = {"start": "2026-12-01T09:30:00Z", "room": str(room)}
        outcome = await client.call_tool("book", {"slot": slot, "where": "/tmp/x", "blob": "aGVsbG8=", "at": "09:30"})
        assert outcome.structured == {"start": "2026-12-01T09:30:00+00:00", "room": str(room), "where": "/tmp/x",
                                      "size": 5, "at": "09:30:00", "kinds": ["datetime", "UUID", "PosixPath", "bytes", "time"]}
        bad = await client.call_tool("book", {"slot": {**slot, "room": "nope"}, "where": "/", "blob": "@@", "at": "9"})
        assert bad.is_error and "Invalid arguments" in bad.text


async def test_annotated_constraints_reach_the_schema_and_are_enforced() -> None:
    async with Client(typed_server(), strict=True) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        props = tools["bounded"]["inputSchema"]["properties"]
        assert props["count"] == {"type": "integer", "minimum": 1, "maximum": 10}
        assert props["name"] == {"type": "string", "minLength": 2, "pattern": "^[a-z]+$", "description": "who"}
        assert props["tags"]["maxItems"] == 2
        assert props["ratio"] == {"type": "number", "exclusiveMaximum": 1, "description": "a ratio", "default": 0.5}
        assert props["size"] == {"type": "integer", "exclusiveMinimum": 0, "description": "bytes", "default": 1}
        assert (await client.call_tool("bounded", {"count": 3, "name": "ada"})).text == "3 ada [] 0.5 1"
        for wrong in ({"count": 11, "name": "ada"}, {"count": 1, "name": "A"}, {"count": 1, "name": "ada", "tags": ["a", "b", "c"]}):
            assert (await client.call_tool("bounded", wrong)).is_error, wrong


def test_an_annotation_object_mcpcore_cannot_read_is_refused_at_registration() -> None:
    server = Server("x")
    with pytest.raises(TypeError, match="mcpcore reads descriptions"):
        @server.tool
        def odd(a: Annotated[int, object()]) -> int:
            return a
    with pytest.raises(TypeError, match="min_length applies to strings"):
        @server.tool
        def odder(a: Annotated[int, annotated_types.MinLen(1)]) -> int:
            return a


async def test_strings_that_read_as_the_wanted_type_are_coerced_unless_strict() -> None:
    async with Client(typed_server(), strict=True) as client:
        outcome = await client.call_tool("add", {"a": "41", "b": "2.5", "flag": "true", "options": '{"x": 1}'})
        assert outcome.text == "41 2.5 True {'x': 1}"
        wrong = await client.call_tool("add", {"a": "4x", "b": 1, "flag": True, "options": {}})
        assert wrong.is_error and "the string '4x' does not read as integer" in wrong.text
        assert (await client.call_tool("exact", {"a": "41"})).is_error  # strict per tool
    async with Client(typed_server(strict=True), strict=True) as client:
        assert (await client.call_tool("add", {"a": "41", "b": 1, "flag": True, "options": {}})).is_error


async def test_a_string_for_an_enum_or_literal_of_numbers_reads_as_its_values_type() -> None:
    server = Server("levels")

    @server.tool
    def pick(level: Literal[1, 2], scale: Literal[0.5, 1.5] = 0.5) -> str:
        return f"{level!r} {scale!r}"

    async with Client(server, strict=True) as client:
        assert (await client.call_tool("pick", {"level": "2", "scale": "1.5"})).text == "2 1.5"
        wrong = await client.call_tool("pick", {"level": "two"})
    assert wrong.is_error and "the string 'two' does not read as integer" in wrong.text


async def test_docstrings_describe_parameters_and_a_missing_description_is_omitted() -> None:
    async with Client(typed_server(), strict=True) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
    documented = tools["documented"]
    assert documented["description"] == "Get the forecast."
    assert documented["inputSchema"]["properties"]["city"]["description"] == "The city, in full."
    assert documented["inputSchema"]["properties"]["days"]["description"] == "How many days ahead."
    assert "description" not in tools["plain"]


class Leaf(pydantic.BaseModel):
    value: int


class Branch(pydantic.BaseModel):
    leaf: Leaf


class Chain(pydantic.BaseModel):
    child: "Chain | None" = None


async def test_found_in_review_unions_decimals_hoisting_and_depth() -> None:
    server = Server("review")

    @server.tool
    def ident(key: uuid.UUID | str) -> str:
        return f"{type(key).__name__} {key}"

    @server.tool
    def hundred() -> dict:
        return {"amount": decimal.Decimal("1E+2"), "tiny": decimal.Decimal("1E-8")}

    @server.tool
    def shaped(default: Branch) -> int:  # a parameter named like a schema keyword
        return default.leaf.value

    @server.tool
    def deep(chain: Chain) -> str:
        return "reached"

    nested: dict[str, Any] = {}
    for _ in range(400):
        nested = {"child": nested}
    async with Client(server, strict=True) as client:
        assert (await client.call_tool("ident", {"key": "hello"})).text == "str hello"
        assert (await client.call_tool("ident", {"key": str(uuid.UUID(int=1))})).text.startswith("UUID ")
        assert (await client.call_tool("hundred")).structured == {"amount": "100", "tiny": "0.00000001"}
        assert (await client.call_tool("shaped", {"default": {"leaf": {"value": "7"}}})).text == "7"
        too_deep = await client.call_tool("deep", {"chain": nested})
        assert too_deep.is_error and "Invalid arguments" in too_deep.text
