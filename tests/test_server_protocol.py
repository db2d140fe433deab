"""Per-request `_meta` rules, method routing, discovery, pagination and caching hints.

Every exchange goes through `Server.handle` in memory (tests/memory.py), which
also checks each message against the official 2026-07-28 wire schema.
"""

import base64

import pytest

from conftest import ALL_VERSIONS, meta, request
from memory import error_of, exchange, result_of
from mcpcore import Server
from wire_schema import validator

pytestmark = pytest.mark.anyio

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
LOG_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def echo(text: str) -> str:
    """Echo the text back."""
    return text


def tool_server(**options) -> Server:
    server = Server("proto", version="2.3.4", **options)
    server.add_tool(echo)
    return server


def raw(method: str, params, request_id=1) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def without(key: str) -> dict:
    m = meta()
    del m[key]
    return m


def strict(definition: str, result: dict) -> dict:
    """Validate a result against its exact result type (not the permissive union)."""
    validator(definition).validate(result)
    return result


# -- per-request _meta ----------------------------------------------------------


async def test_request_without_meta_is_rejected_with_invalid_params() -> None:
    error = await error_of(tool_server(), raw("tools/list", {}))
    assert error["code"] == -32602
    assert error["data"] == {"field": "_meta"}


async def test_request_without_params_at_all_is_rejected_with_invalid_params() -> None:
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    response = (await exchange(tool_server(), message)).response
    assert response["id"] == 7
    assert response["error"]["code"] == -32602
    assert response["error"]["data"] == {"field": "_meta"}


async def test_request_without_protocol_version_is_rejected_with_invalid_params() -> None:
    error = await error_of(tool_server(), request("tools/list", _meta=without(VERSION_KEY)))
    assert error["code"] == -32602
    assert error["data"] == {"field": VERSION_KEY}
    assert VERSION_KEY in error["message"]


async def test_request_with_non_string_protocol_version_is_rejected_with_invalid_params() -> None:
    error = await error_of(tool_server(), request("tools/list", _meta=meta(**{VERSION_KEY: 20260728})))
    assert error["code"] == -32602
    assert error["data"] == {"field": VERSION_KEY}


async def test_request_without_client_capabilities_is_rejected_with_invalid_params() -> None:
    error = await error_of(tool_server(), request("tools/list", _meta=without(CAPS_KEY)))
    assert error["code"] == -32602
    assert error["data"] == {"field": CAPS_KEY}


async def test_client_capabilities_that_are_not_an_object_are_rejected_with_invalid_params() -> None:
    error = await error_of(tool_server(), request("tools/list", _meta=meta(**{CAPS_KEY: ["sampling"]})))
    assert error["code"] == -32602
    assert error["data"] == {"field": CAPS_KEY}


async def test_client_info_is_optional() -> None:
    m = without("io.modelcontextprotocol/clientInfo")
    result = await result_of(tool_server(), request("tools/list", _meta=m))
    assert [t["name"] for t in result["tools"]] == ["echo"]


async def test_unsupported_version_is_rejected_with_the_supported_list_and_the_requested_version() -> None:
    response = (await exchange(tool_server(), request("tools/list", 9, _meta=meta(**{VERSION_KEY: "2025-11-25"})))).response
    assert response["id"] == 9
    error = response["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": ALL_VERSIONS, "requested": "2025-11-25"}
    assert "after an initialize handshake" in error["message"]


async def test_unsupported_version_is_rejected_even_for_server_discover() -> None:
    error = await error_of(tool_server(), request("server/discover", _meta=meta(**{VERSION_KEY: "1900-01-01"})))
    assert error["code"] == -32022
    assert error["data"]["supported"] == ALL_VERSIONS
    assert error["data"]["requested"] == "1900-01-01"


async def test_missing_capabilities_are_reported_before_an_unsupported_version() -> None:
    m = without(CAPS_KEY)
    m[VERSION_KEY] = "1900-01-01"
    error = await error_of(tool_server(), request("tools/list", _meta=m))
    assert error["code"] == -32602
    assert error["data"] == {"field": CAPS_KEY}


async def test_unknown_log_level_is_rejected_with_invalid_params() -> None:
    error = await error_of(tool_server(), request("tools/list", _meta=meta(**{LOG_KEY: "verbose"})))
    assert error["code"] == -32602
    assert "verbose" in error["message"]


async def test_non_string_log_level_is_rejected_with_invalid_params() -> None:
    error = await error_of(tool_server(), request("tools/list", _meta=meta(**{LOG_KEY: 3})))
    assert error["code"] == -32602


@pytest.mark.parametrize("level", ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"])
async def test_every_syslog_log_level_is_accepted(level: str) -> None:
    result = await result_of(tool_server(), request("tools/list", _meta=meta(**{LOG_KEY: level})))
    assert result["tools"][0]["name"] == "echo"


@pytest.mark.parametrize("params", [["a", "b"], "text", 5, True])
async def test_params_that_are_not_an_object_are_rejected_with_invalid_params(params) -> None:
    response = (await exchange(tool_server(), raw("tools/list", params, request_id="p-1"))).response
    assert response["id"] == "p-1"
    assert response["error"]["code"] == -32602
    assert "object" in response["error"]["message"]


# -- methods --------------------------------------------------------------------


async def test_initialize_is_method_not_found_naming_the_supported_versions() -> None:
    message = raw(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "legacy", "version": "1"}},
    )
    error = await error_of(tool_server(), message)
    assert error["code"] == -32601
    assert "2026-07-28" in error["message"]
    assert error["data"] == {"supported": ALL_VERSIONS}


async def test_initialize_with_modern_meta_is_still_method_not_found() -> None:
    error = await error_of(tool_server(), request("initialize"))
    assert error["code"] == -32601
    assert error["data"] == {"supported": ALL_VERSIONS}


@pytest.mark.parametrize(
    ("method", "hint"),
    [
        ("ping", "removed"),
        ("logging/setLevel", "io.modelcontextprotocol/logLevel"),
        ("resources/subscribe", "subscriptions/listen"),
        ("resources/unsubscribe", "subscriptions/listen"),
    ],
)
async def test_removed_methods_are_method_not_found_with_a_pointer_to_the_replacement(method: str, hint: str) -> None:
    server = tool_server()
    server.add_resource(lambda: "x", "mem://x", name="x")
    error = await error_of(server, request(method, level="info", uri="mem://x"))
    assert error["code"] == -32601
    assert method in error["message"]
    assert hint in error["message"]


async def test_unknown_method_is_method_not_found() -> None:
    error = await error_of(tool_server(), request("tools/explode"))
    assert error["code"] == -32601
    assert error["message"] == "Method not found: 'tools/explode'"


async def test_prompts_list_on_a_server_without_prompts_is_method_not_found() -> None:
    error = await error_of(tool_server(), request("prompts/list"))
    assert error["code"] == -32601
    assert "prompts/list" in error["message"]


async def test_resource_and_completion_methods_on_a_server_without_them_are_method_not_found() -> None:
    server = tool_server()
    for method in ("resources/list", "resources/templates/list", "resources/read", "completion/complete"):
        error = await error_of(server, request(method, uri="mem://x"))
        assert error["code"] == -32601, method


async def test_tools_methods_on_a_server_without_tools_are_method_not_found() -> None:
    server = Server("empty")
    assert (await error_of(server, request("tools/list")))["code"] == -32601
    assert (await error_of(server, request("tools/call", name="echo", arguments={})))["code"] == -32601


async def test_response_echoes_a_string_request_id() -> None:
    response = (await exchange(tool_server(), request("tools/list", "abc-123"))).response
    assert response["id"] == "abc-123"


# -- server/discover -------------------------------------------------------------


async def test_discover_on_an_empty_server_lists_versions_and_only_logging() -> None:
    result = await result_of(Server("bare", version="9.9.9"), request("server/discover"))
    strict("DiscoverResult", result)
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == ALL_VERSIONS
    assert result["capabilities"] == {"logging": {}}
    assert "instructions" not in result
    assert result["ttlMs"] == 0
    assert result["cacheScope"] == "private"
    assert result["_meta"][SERVER_INFO] == {"name": "bare", "version": "9.9.9"}


async def test_discover_capabilities_reflect_every_registered_feature_and_instructions() -> None:
    server = Server("full", version="1.0.0", instructions="Use echo to repeat text.", ttl_ms=60000, cache_scope="public")
    server.add_tool(echo)
    server.add_prompt(lambda: "hello", name="greet")
    server.add_resource(lambda: "x", "mem://x", name="x")

    @server.completion(prompt="greet", argument="who")
    def who(value: str) -> list[str]:
        return []

    result = strict("DiscoverResult", await result_of(server, request("server/discover")))
    assert result["capabilities"] == {
        "logging": {},
        "completions": {},
        "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "tools": {"listChanged": True},
    }
    assert result["instructions"] == "Use echo to repeat text."
    assert result["ttlMs"] == 60000
    assert result["cacheScope"] == "public"
    assert result["_meta"][SERVER_INFO] == {"name": "full", "version": "1.0.0"}


async def test_resource_templates_alone_advertise_the_resources_capability() -> None:
    server = Server("tpl")
    server.add_resource(lambda id: id, "mem://{id}", name="item")
    result = await result_of(server, request("server/discover"))
    assert result["capabilities"] == {"logging": {}, "resources": {"subscribe": True, "listChanged": True}}


async def test_every_result_carries_result_type_and_server_info() -> None:
    server = Server("all", version="3.1.4")
    server.add_tool(echo)
    server.add_prompt(lambda: "hi", name="greet")
    server.add_resource(lambda: "body", "mem://doc", name="doc")
    server.add_resource(lambda id: id, "mem://items/{id}", name="item")
    server.completion(prompt="greet", argument="x")(lambda value: ["a"])
    calls = [
        request("server/discover"),
        request("tools/list"),
        request("tools/call", name="echo", arguments={"text": "hi"}),
        request("prompts/list"),
        request("prompts/get", name="greet"),
        request("resources/list"),
        request("resources/templates/list"),
        request("resources/read", uri="mem://doc"),
        request("resources/read", uri="mem://items/7"),
        request("completion/complete", ref={"type": "ref/prompt", "name": "greet"}, argument={"name": "x", "value": ""}),
    ]
    for message in calls:
        result = await result_of(server, message)
        assert result["resultType"] == "complete", message["method"]
        assert result["_meta"] == {SERVER_INFO: {"name": "all", "version": "3.1.4"}}, message["method"]


# -- tools/list ordering and pagination ----------------------------------------------


def named(name: str):
    def fn() -> str:
        return name

    fn.__name__ = name
    return fn


async def test_tools_list_follows_registration_order_not_alphabetical_order() -> None:
    server = Server("order")
    for name in ("zeta", "alpha", "mid", "beta"):
        server.add_tool(named(name))
    first = await result_of(server, request("tools/list", 1))
    second = await result_of(server, request("tools/list", 2))
    assert [t["name"] for t in first["tools"]] == ["zeta", "alpha", "mid", "beta"]
    assert first["tools"] == second["tools"]
    assert "nextCursor" not in first


async def test_tools_list_paginates_with_opaque_cursors_until_the_last_page() -> None:
    server = Server("pages", page_size=2)
    for name in ("t1", "t2", "t3", "t4", "t5"):
        server.add_tool(named(name))
    pages, cursor = [], None
    for _ in range(5):
        params = {} if cursor is None else {"cursor": cursor}
        result = strict("ListToolsResult", await result_of(server, request("tools/list", **params)))
        pages.append([t["name"] for t in result["tools"]])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
        assert isinstance(cursor, str) and cursor != ""
    assert pages == [["t1", "t2"], ["t3", "t4"], ["t5"]]


async def test_exactly_full_pages_end_without_a_next_cursor() -> None:
    server = Server("pages", page_size=2)
    for name in ("t1", "t2", "t3", "t4"):
        server.add_tool(named(name))
    first = await result_of(server, request("tools/list"))
    second = await result_of(server, request("tools/list", cursor=first["nextCursor"]))
    assert [t["name"] for t in second["tools"]] == ["t3", "t4"]
    assert "nextCursor" not in second


@pytest.mark.parametrize("cursor", ["not-a-cursor", "", "!!!", 42, {"page": 2}])
async def test_invalid_cursor_is_rejected_with_invalid_params(cursor) -> None:
    server = Server("pages", page_size=2)
    for name in ("t1", "t2", "t3"):
        server.add_tool(named(name))
    error = await error_of(server, request("tools/list", cursor=cursor))
    assert error["code"] == -32602
    assert error["data"] == {"cursor": cursor}


async def test_cursor_that_no_longer_points_into_a_shrunken_list_is_rejected() -> None:
    server = Server("pages", page_size=2)
    for name in ("t1", "t2", "t3", "t4", "t5"):
        server.add_tool(named(name))
    first = await result_of(server, request("tools/list"))
    second = await result_of(server, request("tools/list", cursor=first["nextCursor"]))
    stale = second["nextCursor"]
    for name in ("t3", "t4", "t5"):
        server.remove_tool(name)
    error = await error_of(server, request("tools/list", cursor=stale))
    assert error["code"] == -32602
    assert error["data"] == {"cursor": stale}


async def test_cursor_that_decodes_to_a_misaligned_offset_is_rejected() -> None:
    server = Server("pages", page_size=2)
    for name in ("t1", "t2", "t3"):
        server.add_tool(named(name))
    forged = base64.urlsafe_b64encode(b"o1").decode()
    error = await error_of(server, request("tools/list", cursor=forged))
    assert error["code"] == -32602


def test_page_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="page_size"):
        Server("bad", page_size=0)


# -- caching hints ------------------------------------------------------------------


async def test_list_and_read_results_carry_the_server_default_cache_hints() -> None:
    server = Server("cache")
    server.add_tool(echo)
    server.add_resource(lambda: "body", "mem://doc", name="doc")
    for method, extra in (("tools/list", {}), ("resources/list", {}), ("resources/templates/list", {}),
                          ("resources/read", {"uri": "mem://doc"})):
        result = await result_of(server, request(method, **extra))
        assert (result["ttlMs"], result["cacheScope"]) == (0, "private"), method


async def test_per_server_ttl_and_scope_apply_to_discover_lists_and_reads() -> None:
    server = Server("cache", ttl_ms=300000, cache_scope="public")
    server.add_tool(echo)
    server.add_prompt(lambda: "hi", name="greet")
    server.add_resource(lambda: "body", "mem://doc", name="doc")
    server.add_resource(lambda id: id, "mem://items/{id}", name="item")
    for method, extra in (
        ("server/discover", {}),
        ("tools/list", {}),
        ("prompts/list", {}),
        ("resources/list", {}),
        ("resources/templates/list", {}),
        ("resources/read", {"uri": "mem://doc"}),
        ("resources/read", {"uri": "mem://items/4"}),
    ):
        result = await result_of(server, request(method, **extra))
        assert (result["ttlMs"], result["cacheScope"]) == (300000, "public"), method


async def test_list_ttl_is_the_smallest_item_ttl_and_one_private_item_makes_the_list_private() -> None:
    server = Server("cache", ttl_ms=300000, cache_scope="public")
    server.add_tool(named("long_lived"), ttl_ms=600000)
    server.add_tool(named("short_lived"), ttl_ms=5000)
    result = await result_of(server, request("tools/list"))
    assert (result["ttlMs"], result["cacheScope"]) == (5000, "public")

    server.add_tool(named("personal"), cache_scope="private")
    result = await result_of(server, request("tools/list"))
    assert (result["ttlMs"], result["cacheScope"]) == (5000, "private")


async def test_items_all_public_make_a_list_public_on_a_private_server() -> None:
    server = Server("cache")
    server.add_prompt(lambda: "a", name="a", cache_scope="public", ttl_ms=1000)
    server.add_prompt(lambda: "b", name="b", cache_scope="public", ttl_ms=2000)
    result = await result_of(server, request("prompts/list"))
    assert (result["ttlMs"], result["cacheScope"]) == (1000, "public")


async def test_every_page_of_a_list_has_the_same_cache_scope_and_its_own_ttl() -> None:
    server = Server("cache", page_size=2, cache_scope="public")
    server.add_tool(named("a"), ttl_ms=100)
    server.add_tool(named("b"), ttl_ms=200)
    server.add_tool(named("c"), ttl_ms=50, cache_scope="private")
    first = await result_of(server, request("tools/list"))
    second = await result_of(server, request("tools/list", cursor=first["nextCursor"]))
    assert (first["ttlMs"], first["cacheScope"]) == (100, "private")
    assert (second["ttlMs"], second["cacheScope"]) == (50, "private")


async def test_resource_read_uses_the_resource_own_hints_over_the_server_defaults() -> None:
    server = Server("cache", ttl_ms=300000, cache_scope="private")
    server.add_resource(lambda: "public body", "mem://shared", name="shared", ttl_ms=1000, cache_scope="public")
    server.add_resource(lambda: "only ttl", "mem://partial", name="partial", ttl_ms=42)
    server.add_resource(lambda id: id, "mem://items/{id}", name="item", cache_scope="public")
    shared = strict("ReadResourceResult", await result_of(server, request("resources/read", uri="mem://shared")))
    assert (shared["ttlMs"], shared["cacheScope"]) == (1000, "public")
    partial = await result_of(server, request("resources/read", uri="mem://partial"))
    assert (partial["ttlMs"], partial["cacheScope"]) == (42, "private")
    templated = await result_of(server, request("resources/read", uri="mem://items/3"))
    assert (templated["ttlMs"], templated["cacheScope"]) == (300000, "public")


@pytest.mark.parametrize(("ttl_ms", "cache_scope"), [(-1, None), (1.5, None), (None, "shared"), (None, "PUBLIC")])
def test_invalid_cache_hints_are_refused_at_registration(ttl_ms, cache_scope) -> None:
    server = Server("cache")
    with pytest.raises(ValueError):
        server.add_tool(echo, ttl_ms=ttl_ms, cache_scope=cache_scope)


@pytest.mark.parametrize(("ttl_ms", "cache_scope"), [(-5, "private"), (0, "everyone")])
def test_invalid_server_cache_hints_are_refused(ttl_ms, cache_scope) -> None:
    with pytest.raises(ValueError):
        Server("cache", ttl_ms=ttl_ms, cache_scope=cache_scope)


# -- runtime changes ------------------------------------------------------------------


async def test_discover_and_tools_list_refresh_after_adding_a_tool_at_runtime() -> None:
    server = Server("live")
    before = await result_of(server, request("server/discover"))
    assert "tools" not in before["capabilities"]
    server.add_tool(echo)
    after = await result_of(server, request("server/discover"))
    assert after["capabilities"]["tools"] == {"listChanged": True}
    listed = await result_of(server, request("tools/list"))
    assert [t["name"] for t in listed["tools"]] == ["echo"]

    server.add_tool(named("second"))
    listed = await result_of(server, request("tools/list"))
    assert [t["name"] for t in listed["tools"]] == ["echo", "second"]


async def test_discover_and_tools_list_refresh_after_removing_a_tool_at_runtime() -> None:
    server = Server("live")
    server.add_tool(echo)
    server.add_tool(named("other"))
    assert [t["name"] for t in (await result_of(server, request("tools/list")))["tools"]] == ["echo", "other"]
    server.remove_tool("echo")
    assert [t["name"] for t in (await result_of(server, request("tools/list")))["tools"]] == ["other"]
    assert (await error_of(server, request("tools/call", name="echo", arguments={"text": "x"})))["code"] == -32602

    server.remove_tool("other")
    discover = await result_of(server, request("server/discover"))
    assert "tools" not in discover["capabilities"]
    assert (await error_of(server, request("tools/list")))["code"] == -32601


async def test_discover_and_prompts_list_refresh_after_adding_a_prompt_at_runtime() -> None:
    server = tool_server()
    assert "prompts" not in (await result_of(server, request("server/discover")))["capabilities"]
    assert (await error_of(server, request("prompts/list")))["code"] == -32601
    server.add_prompt(lambda: "hi", name="greet")
    assert (await result_of(server, request("server/discover")))["capabilities"]["prompts"] == {"listChanged": True}
    listed = await result_of(server, request("prompts/list"))
    assert [p["name"] for p in listed["prompts"]] == ["greet"]


async def test_discover_and_resource_lists_refresh_after_removing_resources_at_runtime() -> None:
    server = tool_server()
    server.add_resource(lambda: "a", "mem://a", name="a")
    server.add_resource(lambda: "b", "mem://b", name="b")
    server.add_resource(lambda id: id, "mem://items/{id}", name="item")
    assert [r["uri"] for r in (await result_of(server, request("resources/list")))["resources"]] == ["mem://a", "mem://b"]

    server.remove_resource("mem://a")
    listed = await result_of(server, request("resources/list"))
    assert [r["uri"] for r in listed["resources"]] == ["mem://b"]
    assert (await error_of(server, request("resources/read", uri="mem://a")))["code"] == -32602

    server.remove_resource("mem://items/{id}")
    templates = await result_of(server, request("resources/templates/list"))
    assert templates["resourceTemplates"] == []
    assert (await result_of(server, request("server/discover")))["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}

    server.remove_resource("mem://b")
    assert "resources" not in (await result_of(server, request("server/discover")))["capabilities"]
    assert (await error_of(server, request("resources/list")))["code"] == -32601


async def test_discover_refreshes_after_registering_a_completion() -> None:
    server = Server("live")
    server.add_prompt(lambda x: x, name="p")
    assert "completions" not in (await result_of(server, request("server/discover")))["capabilities"]
    server.completion(prompt="p", argument="x")(lambda value: ["y"])
    assert (await result_of(server, request("server/discover")))["capabilities"]["completions"] == {}


def test_removing_an_unknown_tool_raises_key_error() -> None:
    with pytest.raises(KeyError, match="nope"):
        tool_server().remove_tool("nope")


@pytest.mark.parametrize("flag", [True, False])
def test_boolean_ttl_is_refused_like_any_other_non_integer(flag: bool) -> None:
    with pytest.raises(ValueError, match="ttl_ms"):
        Server("cache", ttl_ms=flag)
