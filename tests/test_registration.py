"""Registration mistakes raise where they are made; a prompt's typed arguments arrive converted."""

from __future__ import annotations

import enum
from typing import Any, Literal

import pytest

from mcpcore import InvalidParams, Server
from mcpcore.testing import Client

pytestmark = pytest.mark.anyio

ERAS = ["2026-07-28", "2025-11-25"]


def test_a_bare_resource_decorator_raises_naming_the_fix() -> None:
    server = Server("bare")
    with pytest.raises(TypeError) as raised:

        @server.resource  # type: ignore[arg-type]
        def readme() -> str:
            return "read me"

    assert str(raised.value) == ('server.resource needs the URI first: @server.resource("scheme://path") '
                                 '(or a template, "scheme://{name}"), not a bare @server.resource')
    assert not server.has_resources()


def registered_twice(kind: str, replace: bool) -> Server:
    """A server with two functions registered under one name (or URI) of `kind`."""
    server = Server("twice")
    options: dict[str, Any] = {"replace": True} if replace else {}
    for answer in ("first", "second"):
        def fn(name: str = "x", answer: str = answer) -> str:
            return answer

        if kind == "tool":
            server.tool(name="lookup", **options)(fn)
        elif kind == "prompt":
            server.prompt(name="lookup", **options)(fn)
        else:
            server.resource("notes://lookup" if kind == "resource" else "notes://{name}", **options)(fn)
    return server


@pytest.mark.parametrize(("kind", "message"), [
    ("tool", "a tool named 'lookup' is already registered; pass replace=True to replace it, "
             "or call server.remove_tool('lookup') first"),
    ("prompt", "a prompt named 'lookup' is already registered; pass replace=True to replace it, "
               "or call server.remove_prompt('lookup') first"),
    ("resource", "a resource at 'notes://lookup' is already registered; pass replace=True to replace it, "
                 "or call server.remove_resource('notes://lookup') first"),
    ("template", "a resource template 'notes://{name}' is already registered; pass replace=True to replace it, "
                 "or call server.remove_resource('notes://{name}') first"),
])
def test_a_second_registration_under_one_name_raises(kind: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        registered_twice(kind, replace=False)
    assert str(raised.value) == message


@pytest.mark.parametrize("kind", ["tool", "prompt", "resource", "template"])
async def test_replace_true_takes_the_place_of_the_first(kind: str) -> None:
    async with Client(registered_twice(kind, replace=True)) as client:
        if kind == "tool":
            assert [t["name"] for t in await client.list_tools()] == ["lookup"]
            assert (await client.call_tool("lookup", {})).text == "second"
        elif kind == "prompt":
            assert (await client.get_prompt("lookup"))["messages"][0]["content"]["text"] == "second"
        else:
            assert (await client.read_resource("notes://lookup"))[0]["text"] == "second"


async def test_removing_first_frees_the_name() -> None:
    server = Server("again")
    server.add_tool(lambda: "first", name="lookup")
    server.remove_tool("lookup")
    server.add_tool(lambda: "second", name="lookup")
    async with Client(server) as client:
        assert (await client.call_tool("lookup")).text == "second"


class Tone(enum.Enum):
    calm = "calm"
    loud = "loud"


class Level(enum.IntEnum):
    low = 1
    high = 2


def typed() -> Server:
    server = Server("typed")

    @server.prompt
    def story(count: int, ratio: float = 1.0, loud: bool = False, tone: Tone = Tone.calm, level: Level = Level.low,
              style: Literal["plain", "fancy"] = "plain", pages: int | None = None) -> str:
        values = (count, ratio, loud, tone, level, style, pages)
        return " ".join(f"{type(value).__name__}:{value!r}" for value in values)

    return server


@pytest.mark.parametrize("era", ERAS)
async def test_a_prompt_argument_typed_other_than_str_arrives_converted(era: str) -> None:
    arguments = {"count": "3", "ratio": "2.5", "loud": "true", "tone": "loud", "level": "2", "style": "fancy", "pages": "7"}
    async with Client(typed(), era=era, strict=True) as client:
        given = await client.get_prompt("story", arguments)
        defaults = await client.get_prompt("story", {"count": "-1"})
    assert given["messages"][0]["content"]["text"] == (
        "int:3 float:2.5 bool:True Tone:<Tone.loud: 'loud'> Level:<Level.high: 2> str:'fancy' int:7")
    assert defaults["messages"][0]["content"]["text"] == (
        "int:-1 float:1.0 bool:False Tone:<Tone.calm: 'calm'> Level:<Level.low: 1> str:'plain' NoneType:None")


@pytest.mark.parametrize(("arguments", "message"), [
    ({"count": "three"}, "count: expected integer, got string (count: the string 'three' does not read as integer)"),
    ({"count": "3.5"}, "count: expected integer, got string (count: the string '3.5' does not read as integer)"),
    ({"count": "1", "loud": "yes"}, "loud: expected boolean, got string (loud: the string 'yes' does not read as boolean)"),
    ({"count": "1", "tone": "shout"}, "tone: expected one of 'calm', 'loud', got 'shout'"),
    ({"count": "1", "level": "9"}, "level: expected one of 1, 2, got 9"),
    ({"count": "1", "style": "odd"}, "style: expected one of 'plain', 'fancy', got 'odd'"),
])
async def test_a_prompt_argument_that_does_not_read_as_its_type_is_32602(arguments: dict[str, str], message: str) -> None:
    async with Client(typed(), strict=True) as client:
        with pytest.raises(InvalidParams) as raised:
            await client.get_prompt("story", arguments)
    assert raised.value.message == f"Invalid arguments for prompt 'story': {message}"
    assert raised.value.data == {"name": "story"}
