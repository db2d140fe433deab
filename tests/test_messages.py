"""Error messages that say what went wrong and what to do, through the test client (in memory)."""

from __future__ import annotations

import pytest

from mcpcore import InvalidParams, Server
from mcpcore.auth import AccessToken, Auth, StaticTokens
from mcpcore.testing import Client

pytestmark = pytest.mark.anyio

ERAS = ["2026-07-28", "2025-11-25"]
READER = AccessToken("alice", "client-a", frozenset({"files:read"}))


def catalogue(list_by_scope: bool = False) -> Server:
    auth = Auth(StaticTokens({}), "http://127.0.0.1:8000/mcp", ("https://auth.example.com",), list_by_scope=list_by_scope)
    server = Server("catalogue", auth=auth)

    @server.tool
    def search(query: str) -> str:
        return query

    @server.tool(scopes=["files:admin"])
    def purge(path: str) -> str:
        return path

    @server.prompt
    def summarize(text: str) -> str:
        return text

    return server


@pytest.mark.parametrize("era", ERAS)
async def test_an_unknown_tool_or_prompt_suggests_the_close_name(era: str) -> None:
    async with Client(catalogue(), era=era, auth=READER) as client:
        with pytest.raises(InvalidParams) as tool:
            await client.call_tool("serch", {"query": "x"})
        with pytest.raises(InvalidParams) as prompt:
            await client.get_prompt("sumarize", {"text": "x"})
    assert tool.value.message == "Unknown tool: 'serch'; did you mean 'search'?"
    assert tool.value.data == {"name": "serch"}
    assert prompt.value.message == "Unknown prompt: 'sumarize'; did you mean 'summarize'?"


async def test_no_suggestion_when_no_name_is_close() -> None:
    async with Client(catalogue(), auth=READER) as client:
        with pytest.raises(InvalidParams) as raised:
            await client.call_tool("weather", {})
        with pytest.raises(InvalidParams) as endless:
            await client.call_tool("search" * 100, {})
    assert raised.value.message == "Unknown tool: 'weather'"
    assert endless.value.message == f"Unknown tool: {'search' * 100!r}"


@pytest.mark.parametrize("list_by_scope", [True, False], ids=["by-scope", "everything"])
async def test_a_suggestion_names_only_a_tool_the_caller_may_see(list_by_scope: bool) -> None:
    async with Client(catalogue(list_by_scope), auth=READER) as client:
        with pytest.raises(InvalidParams) as raised:
            await client.call_tool("purg", {"path": "/"})
    hidden = "Unknown tool: 'purg'"
    assert raised.value.message == (hidden if list_by_scope else f"{hidden}; did you mean 'purge'?")
