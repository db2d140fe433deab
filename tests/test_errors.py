"""What the model and the log see when a tool fails: `ToolError`, masked errors, protocol errors by name."""

from __future__ import annotations

import logging
import re

import pytest

from mcpcore import InvalidParams, ResourceNotFound, Server, ToolError
from mcpcore.testing import Client

pytestmark = pytest.mark.anyio


def failing(**options: bool) -> Server:
    server = Server("failing", **options)

    @server.tool
    def refuse(city: str) -> str:
        raise ToolError(f"No forecast for {city}; try a larger town nearby")

    @server.tool
    def crash() -> str:
        raise KeyError("db-password=hunter2")

    @server.tool
    def wrong(city: str) -> str:
        raise InvalidParams("unknown city", {"city": city})

    @server.resource("files://{name}")
    def file(name: str) -> str:
        raise ResourceNotFound(f"files://{name}")

    return server


async def test_a_tool_error_is_shown_to_the_model_as_written_and_logs_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "mcpcore")
    async with Client(failing(), strict=True) as client:
        outcome = await client.call_tool("refuse", {"city": "Ys"})
    assert outcome.is_error and outcome.text == "No forecast for Ys; try a larger town nearby"
    assert not [r for r in caplog.records if r.exc_info]


async def test_an_unexpected_exception_is_shown_unless_masked(caplog: pytest.LogCaptureFixture) -> None:
    async with Client(failing(), strict=True) as client:
        shown = await client.call_tool("crash")
    assert shown.is_error and "hunter2" in shown.text  # the default: the model sees what happened
    caplog.clear()
    async with Client(failing(mask_errors=True), strict=True) as client:
        masked = await client.call_tool("crash")
    assert masked.is_error and "hunter2" not in masked.text
    reference = re.fullmatch(r"Error in tool 'crash': an internal error occurred \(reference ([0-9a-f]{8})\)", masked.text)
    assert reference is not None, masked.text
    (logged,) = [r for r in caplog.records if r.exc_info]
    assert reference.group(1) in logged.getMessage() and "hunter2" in str(logged.exc_info[1])


async def test_protocol_errors_have_names() -> None:
    async with Client(failing(), strict=True) as client:
        with pytest.raises(InvalidParams) as wrong:
            await client.call_tool("wrong", {"city": "Ys"})
        with pytest.raises(InvalidParams) as missing:
            await client.read_resource("files://plan")
    assert wrong.value.code == -32602 and wrong.value.data == {"city": "Ys"}
    assert missing.value.data == {"uri": "files://plan"} and "Resource not found" in missing.value.message


async def test_an_integer_argument_the_wire_cannot_carry_back_is_an_invalid_argument_not_an_internal_error() -> None:
    """A digit string past 64 bits is not read as an integer, and a float past 2**53 is no longer the integer
    the client wrote; either way the tool is not run with a number its answer could not hold."""
    import sys

    from conftest import ROOT

    server = Server("numbers")

    @server.tool
    def point(x: int) -> dict:
        return {"x": x}

    async with Client(server) as client:
        for sent in ("99999999999999999999999", 1e30, -(2.0**60)):
            outcome = await client.call_tool("point", {"x": sent})
            assert outcome.result["isError"] and "x: expected integer" in outcome.text, (sent, outcome.text)
        for sent, read in (("18446744073709551615", 2**64 - 1), (2.0**53, 2**53), ("-42", -42)):
            assert (await client.call_tool("point", {"x": sent})).result["structuredContent"] == {"x": read}
    async with Client.stdio([sys.executable, "-m", "mcpcore", "run", str(ROOT / "tests" / "fuzz" / "fuzz_server.py")]) as remote:
        outcome = await remote.call_tool("shapes", {"point": {"x": "99999999999999999999999"}})
        assert outcome.result["isError"] and "point.x" in outcome.text
