"""A few conformance fixtures of `examples/everything_server.py`, checked in memory."""

from __future__ import annotations

import pytest

from conftest import ROOT, meta, request
from mcpcore._cli.main import load_target
from memory import error_of, exchange, result_of

pytestmark = pytest.mark.anyio

EVERYTHING = ROOT / "examples" / "everything_server.py"
ALL_CAPS = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}


@pytest.fixture(scope="module")
def server():
    return load_target(str(EVERYTHING))


def caps(capabilities: dict) -> dict:
    return meta(**{"io.modelcontextprotocol/clientCapabilities": capabilities})


async def test_tools_list_starts_with_simple_text(server) -> None:
    tools = (await result_of(server, request("tools/list")))["tools"]
    assert tools[0]["name"] == "test_simple_text"
    assert all(tool["description"] for tool in tools)
    headed = [t["name"] for t in tools if any("x-mcp-header" in p for p in t["inputSchema"]["properties"].values())]
    assert headed[0] == "test_x_mcp_header"


async def test_simple_text_without_arguments(server) -> None:
    result = await result_of(server, request("tools/call", name="test_simple_text"))
    assert result["content"] == [{"type": "text", "text": "This is a simple text response for testing."}]


async def test_error_handling_is_a_tool_error(server) -> None:
    result = await result_of(server, request("tools/call", name="test_error_handling", arguments={}))
    assert result["isError"] is True
    assert result["content"][0]["text"] == "This tool intentionally returns an error for testing"


async def test_progress_is_reported_before_the_result(server) -> None:
    message = request("tools/call", name="test_tool_with_progress", arguments={}, _meta=meta(progressToken="p-1"))
    writer = await exchange(server, message)
    progress = [n["params"] for n in writer.notifications if n["method"] == "notifications/progress"]
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [
        ("p-1", 0, 100),
        ("p-1", 50, 100),
        ("p-1", 100, 100),
    ]


async def test_template_resource_reads_id_123(server) -> None:
    result = await result_of(server, request("resources/read", uri="test://template/123/data"))
    content = result["contents"][0]
    assert content["uri"] == "test://template/123/data"
    assert "123" in content["text"]


async def test_unknown_resource_names_the_uri(server) -> None:
    uri = "test://nonexistent-resource-for-conformance-testing"
    error = await error_of(server, request("resources/read", uri=uri))
    assert (error["code"], error["data"]["uri"]) == (-32602, uri)


async def test_missing_capability_is_refused(server) -> None:
    error = await error_of(server, request("tools/call", name="test_missing_capability", arguments={}))
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"sampling": {}}
    result = await result_of(
        server, request("tools/call", name="test_missing_capability", arguments={}, _meta=caps({"sampling": {}}))
    )
    assert "isError" not in result


async def test_elicitation_round_trip(server) -> None:
    first = await result_of(
        server, request("tools/call", name="test_input_required_result_elicitation", arguments={}, _meta=caps(ALL_CAPS))
    )
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["user_name"]["method"] == "elicitation/create"
    retry = request(
        "tools/call",
        name="test_input_required_result_elicitation",
        arguments={},
        inputResponses={"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        requestState=first["requestState"],
        _meta=caps(ALL_CAPS),
    )
    done = await result_of(server, retry)
    assert done["resultType"] == "complete"
    assert done["content"][0]["text"] == "Hello, Alice!"


async def test_capabilities_tool_asks_only_what_the_client_declared(server) -> None:
    result = await result_of(
        server,
        request("tools/call", name="test_input_required_result_capabilities", arguments={}, _meta=caps({"sampling": {}})),
    )
    methods = {entry["method"] for entry in result["inputRequests"].values()}
    assert methods == {"sampling/createMessage"}


async def test_prompt_with_arguments_and_its_completion(server) -> None:
    result = await result_of(
        server, request("prompts/get", name="test_prompt_with_arguments", arguments={"arg1": "a", "arg2": "b"})
    )
    assert result["messages"][0]["content"]["text"] == "Prompt with arguments: arg1='a', arg2='b'"
    ref = {"type": "ref/prompt", "name": "test_prompt_with_arguments"}
    completion = await result_of(server, request("completion/complete", ref=ref, argument={"name": "arg1", "value": "test"}))
    assert completion["completion"]["values"] == []


async def test_trigger_tool_change_leaves_the_list_as_it_was(server) -> None:
    before = (await result_of(server, request("tools/list")))["tools"]
    await result_of(server, request("tools/call", name="test_trigger_tool_change", arguments={}))
    assert (await result_of(server, request("tools/list")))["tools"] == before
