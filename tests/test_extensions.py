"""The extension API: announcing an extension, its methods (routed, header-checked, opt-in per request), result fields."""

from __future__ import annotations

import sys
from typing import Any, Awaitable, Callable

import anyio
import pytest

from conftest import ROOT, meta, request
from http_client import HttpClient, mcp_headers, running
from mcpcore import McpError, Server
from mcpcore.testing import Client
from servers.extension_server import ECHO, extended
from stdio_client import serve

pytestmark = pytest.mark.anyio


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
        assert missing.json["error"]["message"].startswith("Missing header Mcp-Name: it is required when params.word is given")
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
    ext.method("pingback/x")(lambda params, ctx: {})  # a core method's name is no namespace


@pytest.mark.parametrize("name", ["tasks/list", "resources/directory/read", "tools/run", "ping", "initialize"])
def test_names_the_protocol_or_another_extension_reserves_are_refused(name: str) -> None:
    server = Server("reserved")
    with pytest.raises(ValueError, match="is a method of the protocol or of another extension"):
        server.extension("com.example/mine").method(name)


# -- end to end: a subprocess over real pipes, and a real socket -----------------------------

Exchange = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]  # one request out, its response back
SAY_NAME_FIELD = "word"  # what Mcp-Name mirrors for com.example/echo/say


def asking(method: str, request_id: int, declared: dict[str, Any] | None, **params: Any) -> dict[str, Any]:
    """A 2026-07-28 request from a client declaring the extension with `declared` settings (None: not at all)."""
    capabilities = {} if declared is None else {"extensions": {ECHO: declared}}
    return request(method, request_id, _meta=meta(**{"io.modelcontextprotocol/clientCapabilities": capabilities}), **params)


async def converse(exchange: Exchange) -> None:
    """What clients of the extension see on the wire, whatever carries it: the announcement, the opt-in method
    (answered or refused -32021), the method open to all, and the result field for declaring clients only."""
    discovered = await exchange(request("server/discover", 1))
    assert discovered["result"]["capabilities"]["extensions"] == {ECHO: {"maxLength": 10}}
    said = await exchange(asking("com.example/echo/say", 2, {"loud": True}, word="a-very-long-word"))
    assert said["result"]["said"] == "a-very-lon" and said["result"]["clientSettings"] == {"loud": True}
    refused = await exchange(asking("com.example/echo/say", 3, None, word="x"))
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"]["requiredCapabilities"] == {"extensions": {ECHO: {}}}
    assert (await exchange(asking("com.example/echo/open", 4, None)))["result"]["open"] is True
    stamped = await exchange(asking("tools/call", 5, {}, name="plain", arguments={"text": "hi"}))
    unstamped = await exchange(asking("tools/call", 6, None, name="plain", arguments={"text": "hi"}))
    assert stamped["result"]["echoed"] == 1 and "echoed" not in unstamped["result"]


async def test_a_custom_extension_end_to_end_over_stdio() -> None:
    command = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "tests" / "servers" / "extension_server.py")]
    async with serve(command) as client:

        async def exchange(message: dict[str, Any]) -> dict[str, Any]:
            await client.send(message)
            with anyio.fail_after(20):
                return await client.response_to(message["id"])

        await converse(exchange)


@pytest.mark.usefixtures("http_flavour")
async def test_a_custom_extension_end_to_end_over_http() -> None:
    async with running(extended()) as http, HttpClient.connect(http) as client:

        async def exchange(message: dict[str, Any]) -> dict[str, Any]:
            word = message["params"].get(SAY_NAME_FIELD) if message["method"] == "com.example/echo/say" else None
            named = {"mcp-name": word} if word is not None else {}
            with anyio.fail_after(20):
                return (await client.post(message, mcp_headers(message, **named))).json

        await converse(exchange)


@pytest.mark.usefixtures("http_flavour")
async def test_the_test_client_over_http_mirrors_an_extension_methods_name_field_it_is_told_of() -> None:
    async with running(extended()) as http:
        url = f"http://127.0.0.1:{http.port}/mcp"
        async with Client.http(url, extensions={ECHO: {}}, name_fields={"com.example/echo/say": "word"}) as client:
            assert (await client.request("com.example/echo/say", {"word": "hi"})).result["said"] == "hi"
        async with Client.http(url, extensions={ECHO: {}}) as unaware:
            with pytest.raises(McpError) as refused:
                await unaware.request("com.example/echo/say", {"word": "hi"})
    assert refused.value.code == -32020  # the server requires the header it was not told to send
