"""The extension API: announcing an extension, its methods (routed, header-checked, opt-in per request), result fields."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import meta, request
from http_client import HttpClient, mcp_headers, running
from mcpcore import Context, McpError, Server
from mcpcore.testing import Client

pytestmark = pytest.mark.anyio

ECHO = "com.example/echo"


def extended() -> Server:
    server = Server("extended")
    echo = server.extension(ECHO, {"maxLength": 10})

    @server.tool
    def plain(text: str) -> str:
        return text

    @echo.method("com.example/echo/say", name_field="word")
    async def say(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return {"said": params["word"][: echo.settings["maxLength"]], "clientSettings": echo.declared(ctx)}

    @echo.method("com.example/echo/open", declared=False)
    def open_to_all(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return {"open": True}

    @echo.result_fields("tools/call")
    def stamp(result: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return {"echoed": len(result["content"])}

    return server


async def test_discover_announces_the_extension_with_its_settings() -> None:
    async with Client(extended(), strict=True) as client:
        info = await client.discover()
    assert info["capabilities"]["extensions"] == {ECHO: {"maxLength": 10}}


async def test_a_method_answers_a_client_that_declared_the_extension_and_refuses_one_that_did_not() -> None:
    async with Client(extended(), strict=True, extensions={ECHO: {"loud": True}}) as client:
        said = (await client.request("com.example/echo/say", {"word": "a-very-long-word"})).result
        assert said == {"said": "a-very-lon", "clientSettings": {"loud": True}, "resultType": "complete",
                        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "extended", "version": "0.1.0"}}}
    async with Client(extended(), strict=True) as client:
        with pytest.raises(McpError) as refused:
            await client.request("com.example/echo/say", {"word": "x"})
        assert refused.value.code == -32021 and refused.value.data["requiredCapabilities"] == {"extensions": {ECHO: {}}}
        assert (await client.request("com.example/echo/open")).result["open"] is True  # declared=False


async def test_result_fields_reach_only_clients_that_declared_the_extension() -> None:
    async with Client(extended(), strict=True, extensions={ECHO: {}}) as client:
        assert (await client.call_tool("plain", {"text": "hi"})).result["echoed"] == 1
    async with Client(extended(), strict=True) as client:
        assert "echoed" not in (await client.call_tool("plain", {"text": "hi"})).result


@pytest.mark.usefixtures("http_flavour")
async def test_over_http_the_name_field_is_mirrored_in_mcp_name() -> None:
    message = request("com.example/echo/say", 1, word="hello",
                      _meta=meta(**{"io.modelcontextprotocol/clientCapabilities": {"extensions": {ECHO: {}}}}))
    async with running(extended()) as http, HttpClient.connect(http) as client:
        missing = await client.post(message)  # mcp_headers names no Mcp-Name for a method it does not know
        assert missing.status == 400 and missing.json["error"]["code"] == -32020
        assert "Mcp-Name header is required" in missing.json["error"]["message"]
        served = await client.post(message, mcp_headers(message, **{"mcp-name": "hello"}))
        assert served.status == 200 and served.json["result"]["said"] == "hello"


async def test_the_2025_wire_neither_announces_nor_routes_extensions() -> None:
    async with Client(extended(), era="2025-11-25", strict=True) as client:
        assert "extensions" not in client.server_info["capabilities"]
        with pytest.raises(McpError) as unknown:
            await client.request("com.example/echo/say", {"word": "x"})
    assert unknown.value.code == -32601


def test_registration_refuses_bad_identifiers_core_methods_and_repeats() -> None:
    server = Server("x")
    with pytest.raises(ValueError, match="vendor-prefix/name"):
        server.extension("echo")
    ext = server.extension(ECHO)
    with pytest.raises(ValueError, match="already declared"):
        server.extension(ECHO)
    with pytest.raises(ValueError, match="a method of the protocol"):
        ext.method("tools/call")(lambda params, ctx: {})
    ext.method("com.example/echo/x")(lambda params, ctx: {})
    with pytest.raises(ValueError, match="a method of the protocol or of another extension"):
        ext.method("com.example/echo/x")(lambda params, ctx: {})


@pytest.mark.parametrize("name", ["tasks/list", "resources/directory/read", "tools/run"])
def test_names_the_protocol_or_another_extension_reserves_are_refused(name: str) -> None:
    server = Server("reserved")
    with pytest.raises(ValueError, match="is a method of the protocol or of another extension"):
        server.extension("com.example/mine").method(name)
