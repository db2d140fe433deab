"""The Streamable HTTP validation ladder as pure functions (transports/_http/rules.py), no sockets."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import VERSION, meta, request
from mcpcore._wire.toolheaders import HeaderParam, header_params
from mcpcore._wire.jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    NOTIFICATION,
    PARSE_ERROR,
    REQUEST,
    UNSUPPORTED_VERSION,
)
from mcpcore._wire.protocol import NAME_FIELDS, Route
from mcpcore._wire.protocol import http_status as status_for
from mcpcore.transports._calls import Inbound
from mcpcore.transports._http.rules import (
    Rejection,
    check_body,
    check_head,
    check_mcp_headers,
    decode_header_value,
    make_policy,
    public_bind_refusal,
)

PORT = 8000
LOCAL = make_policy("127.0.0.1", PORT, "/mcp", max_body_bytes=1000)
PUBLIC = make_policy("0.0.0.0", PORT, "/mcp")


def head(**extra: str | None) -> dict[str, str]:
    """Conforming request headers for LOCAL; a keyword set to None removes that header."""
    headers: dict[str, Any] = {
        "host": f"127.0.0.1:{PORT}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "content-length": "10",
    }
    headers.update({k.replace("_", "-"): v for k, v in extra.items()})
    return {k: v for k, v in headers.items() if v is not None}


def rejected(result: Rejection | None, status: int) -> Rejection:
    assert isinstance(result, Rejection), f"expected {status}, got acceptance"
    assert result.status == status, (result.status, result.error.message)
    return result


# -- check_head: path and method ------------------------------------------------


def test_conforming_head_is_accepted() -> None:
    assert check_head(LOCAL, "POST", "/mcp", head()) is None


def test_query_string_on_the_endpoint_is_the_endpoint() -> None:
    assert check_head(LOCAL, "POST", "/mcp?x=1", head()) is None


@pytest.mark.parametrize("target", ["/", "/mcp/", "/MCP", "/other", "/mcpx"])
def test_wrong_path_is_404(target: str) -> None:
    rejection = rejected(check_head(LOCAL, "POST", target, head()), 404)
    assert rejection.error.code == INVALID_REQUEST and rejection.request_id is None


def test_wrong_path_wins_over_wrong_method() -> None:
    rejected(check_head(LOCAL, "GET", "/nope", head()), 404)


@pytest.mark.parametrize("method", ["PUT", "PATCH", "HEAD", "OPTIONS"])
def test_other_methods_are_405_with_allow_get_post_delete(method: str) -> None:
    rejection = rejected(check_head(LOCAL, method, "/mcp", head()), 405)
    assert rejection.headers == (("allow", "GET, POST, DELETE"),)
    assert rejection.request_id is None


def test_get_needs_to_accept_an_event_stream_and_delete_needs_nothing_more() -> None:
    assert check_head(LOCAL, "GET", "/mcp", head(accept="text/event-stream", content_type=None)) is None
    rejected(check_head(LOCAL, "GET", "/mcp", head(accept="application/json")), 406)
    assert check_head(LOCAL, "DELETE", "/mcp", head(accept=None, content_type=None)) is None


# -- check_head: Origin -----------------------------------------------------------


@pytest.mark.parametrize("origin", ["http://evil.example.com", "https://attacker.test:8000", "null", "file://", "http://localhost.evil.com", "http://127.0.0.1.nip.io", "http://[::1", "http://[abc]"])
def test_foreign_origin_is_403(origin: str) -> None:
    rejection = rejected(check_head(LOCAL, "POST", "/mcp", head(origin=origin)), 403)
    assert rejection.error.code == INVALID_REQUEST and rejection.request_id is None


@pytest.mark.parametrize(
    "origin", ["http://localhost:3000", "http://127.0.0.1:5173", "https://localhost", "http://[::1]:8080", f"HTTP://LOCALHOST:{PORT}/"]
)
def test_loopback_origins_are_allowed_on_a_loopback_bind(origin: str) -> None:
    assert check_head(LOCAL, "POST", "/mcp", head(origin=origin)) is None


def test_loopback_origins_are_not_allowed_on_a_public_bind() -> None:
    headers = head(host="mcp.example.com", origin="http://localhost:3000")
    rejected(check_head(PUBLIC, "POST", "/mcp", headers), 403)


def test_configured_allowed_origins_are_allowed() -> None:
    policy = make_policy("127.0.0.1", PORT, "/mcp", allowed_origins=("https://App.Example.com/",))
    assert check_head(policy, "POST", "/mcp", head(origin="https://app.example.com")) is None
    rejected(check_head(policy, "POST", "/mcp", head(origin="https://other.example.com")), 403)


def test_configured_allowed_origins_on_a_public_bind() -> None:
    policy = make_policy("0.0.0.0", PORT, "/mcp", allowed_origins=("https://app.example.com",))
    assert check_head(policy, "POST", "/mcp", head(host="api.example.com", origin="https://app.example.com")) is None


@pytest.mark.parametrize(
    "host, origin",
    [("mcp.example.com", "https://mcp.example.com"), ("mcp.example.com:8443", "https://MCP.example.com:8443"), ("MCP.Example.com", "http://mcp.example.com")],
)
def test_origin_equal_to_host_is_allowed_on_a_public_bind(host: str, origin: str) -> None:
    assert check_head(PUBLIC, "POST", "/mcp", head(host=host, origin=origin)) is None


def test_origin_with_another_port_than_host_is_403_on_a_public_bind() -> None:
    rejected(check_head(PUBLIC, "POST", "/mcp", head(host="mcp.example.com:8443", origin="https://mcp.example.com:9999")), 403)


def test_absent_origin_is_fine() -> None:
    assert check_head(LOCAL, "POST", "/mcp", head(origin=None)) is None
    assert check_head(PUBLIC, "POST", "/mcp", head(host="anything.example", origin=None)) is None


# -- check_head: Host (DNS rebinding) -------------------------------------------------


@pytest.mark.parametrize("host", ["evil.example.com", f"evil.example.com:{PORT}", "127.0.0.1:9999", "localhost:1", "[::1]:1", "127.0.0.2", "0.0.0.0"])
def test_foreign_host_on_a_loopback_bind_is_421(host: str) -> None:
    rejection = rejected(check_head(LOCAL, "POST", "/mcp", head(host=host)), 421)
    assert rejection.error.code == INVALID_REQUEST


def test_missing_host_on_a_loopback_bind_is_421() -> None:
    rejected(check_head(LOCAL, "POST", "/mcp", head(host=None)), 421)


@pytest.mark.parametrize("host", [f"127.0.0.1:{PORT}", "127.0.0.1", f"localhost:{PORT}", "LOCALHOST", f"[::1]:{PORT}", "[::1]"])
def test_own_host_on_a_loopback_bind_is_allowed(host: str) -> None:
    assert check_head(LOCAL, "POST", "/mcp", head(host=host)) is None


def test_foreign_host_and_matching_origin_is_still_rejected_on_loopback() -> None:
    headers = head(host="evil.example.com", origin="http://evil.example.com")
    assert check_head(LOCAL, "POST", "/mcp", headers).status in (403, 421)


def test_configured_allowed_hosts_on_a_loopback_bind_need_the_right_port() -> None:
    policy = make_policy("127.0.0.1", PORT, "/mcp", allowed_hosts=("Mcp.Example.com",))
    assert check_head(policy, "POST", "/mcp", head(host=f"mcp.example.com:{PORT}")) is None
    assert check_head(policy, "POST", "/mcp", head(host="mcp.example.com")) is None
    rejected(check_head(policy, "POST", "/mcp", head(host="mcp.example.com:1")), 421)
    rejected(check_head(policy, "POST", "/mcp", head(host="other.example.com")), 421)


def test_public_bind_without_allowed_hosts_does_not_check_host() -> None:
    assert check_head(PUBLIC, "POST", "/mcp", head(host="whatever.example")) is None


def test_public_bind_with_allowed_hosts_checks_host_but_not_port() -> None:
    policy = make_policy("0.0.0.0", PORT, "/mcp", allowed_hosts=("api.example.com",))
    assert check_head(policy, "POST", "/mcp", head(host="api.example.com:443")) is None
    rejected(check_head(policy, "POST", "/mcp", head(host="evil.example.com")), 421)


# -- check_head: Content-Type -------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON", "application/json ;charset=UTF-8"])
def test_json_content_types_are_accepted(content_type: str) -> None:
    assert check_head(LOCAL, "POST", "/mcp", head(content_type=content_type)) is None


@pytest.mark.parametrize("content_type", [None, "", "text/plain", "application/x-www-form-urlencoded", "application/json-seq", "text/event-stream", "application/jsonx"])
def test_other_content_types_are_415(content_type: str | None) -> None:
    rejection = rejected(check_head(LOCAL, "POST", "/mcp", head(content_type=content_type)), 415)
    assert rejection.error.code == INVALID_REQUEST


# -- check_head: Accept ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "accept",
    [
        "application/json, text/event-stream",
        "text/event-stream, application/json",
        "*/*",
        "application/*, text/*",
        "application/json;q=0.5, text/event-stream;q=0.1",
        "APPLICATION/JSON, TEXT/EVENT-STREAM",
        "text/*;q=0, text/event-stream, application/json",
        "*/*;q=0.1, application/json",
    ],
)
def test_accept_values_covering_json_and_sse_are_accepted(accept: str) -> None:
    assert check_head(LOCAL, "POST", "/mcp", head(accept=accept)) is None


@pytest.mark.parametrize(
    "accept",
    [
        None,
        "",
        "application/json",
        "text/event-stream",
        "text/html",
        "application/*",
        "application/json, text/event-stream;q=0",
        "application/json;q=0, text/event-stream",
        "*/*, application/json;q=0",
        "*/*;q=0",
        "application/json, text/*;q=0",
        "application/json, text/event-stream;q=zero",
    ],
)
def test_accept_values_missing_json_or_sse_are_406(accept: str | None) -> None:
    rejection = rejected(check_head(LOCAL, "POST", "/mcp", head(accept=accept)), 406)
    assert rejection.error.code == INVALID_REQUEST


# -- check_head: Content-Length ---------------------------------------------------------------


def test_declared_length_over_the_limit_is_413() -> None:
    rejected(check_head(LOCAL, "POST", "/mcp", head(content_length="1001")), 413)


@pytest.mark.parametrize("length", ["1000", "0", None])
def test_declared_length_at_or_under_the_limit_passes(length: str | None) -> None:
    assert check_head(LOCAL, "POST", "/mcp", head(content_length=length)) is None


def test_checks_run_in_order_origin_host_type_accept_length() -> None:
    everything_wrong = head(origin="http://attacker.test", host="evil.example.com", content_type="text/plain", accept="text/html", content_length="5000")
    assert check_head(LOCAL, "POST", "/mcp", everything_wrong).status == 403
    everything_wrong.pop("origin")
    assert check_head(LOCAL, "POST", "/mcp", everything_wrong).status == 421
    everything_wrong["host"] = "127.0.0.1"
    assert check_head(LOCAL, "POST", "/mcp", everything_wrong).status == 415
    everything_wrong["content-type"] = "application/json"
    assert check_head(LOCAL, "POST", "/mcp", everything_wrong).status == 406
    everything_wrong["accept"] = "*/*"
    assert check_head(LOCAL, "POST", "/mcp", everything_wrong).status == 413


# -- check_body ----------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"", b"{", b"not json", b'{"jsonrpc": "2.0",}', b"\xff\xfe"])
def test_unparseable_body_is_parse_error_without_id(body: bytes) -> None:
    rejection = rejected(check_body(body), 400)
    assert rejection.error.code == PARSE_ERROR and rejection.request_id is None


@pytest.mark.parametrize("body", [b"[]", b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]'])
def test_batches_are_invalid_request(body: bytes) -> None:
    rejection = rejected(check_body(body), 400)
    assert rejection.error.code == INVALID_REQUEST and rejection.request_id is None


@pytest.mark.parametrize(
    "body, request_id",
    [
        (b'"text"', None),
        (b"42", None),
        (b'{"id":1,"method":"x"}', 1),
        (b'{"jsonrpc":"1.0","id":"a","method":"x"}', "a"),
        (b'{"jsonrpc":"2.0","id":3}', 3),
        (b'{"jsonrpc":"2.0","id":4,"method":7}', 4),
        (b'{"jsonrpc":"2.0","id":null,"method":"x"}', None),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"x"}', None),
    ],
)
def test_malformed_messages_are_invalid_request_echoing_a_readable_id(body: bytes, request_id: Any) -> None:
    rejection = rejected(check_body(body), 400)
    assert rejection.error.code == INVALID_REQUEST
    assert rejection.request_id == request_id


@pytest.mark.parametrize("body", [b'{"jsonrpc":"2.0","id":1,"result":{}}', b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}'])
def test_responses_are_rejected(body: bytes) -> None:
    rejection = rejected(check_body(body), 400)
    assert rejection.error.code == INVALID_REQUEST


def test_requests_and_notifications_are_classified() -> None:
    inbound = check_body(b'{"jsonrpc":"2.0","id":"r","method":"tools/list"}')
    assert isinstance(inbound, Inbound) and inbound.kind == REQUEST and inbound.message["id"] == "r"
    inbound = check_body(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert isinstance(inbound, Inbound) and inbound.kind == NOTIFICATION


# -- decode_header_value -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header, value",
    [
        ("us-west1", "us-west1"),
        ("=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界"),
        ("=?base64?IHBhZGRlZCA=?=", " padded "),
        ("=?base64?bGluZTEKbGluZTI=?=", "line1\nline2"),
        ("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?="),
        ("=?base64?SGVsbG8=?=", "Hello"),
        ("SGVsbG8=", "SGVsbG8="),
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),
        ("SGVsbG8=?=", "SGVsbG8=?="),
        ("=?BASE64?SGVsbG8=?=", "=?BASE64?SGVsbG8=?="),
        ("=?base64??=", ""),
        ("=?base64?=", "=?base64?="),
        ("with inner space\tand tab", "with inner space\tand tab"),
        ("", ""),
    ],
)
def test_decode_header_value_vectors(header: str, value: str) -> None:
    assert decode_header_value(header) == value


@pytest.mark.parametrize(
    "header",
    [
        "=?base64?SGVsbG8?=",  # missing padding
        "=?base64?SGVs!!!bG8=?=",  # not base64
        "=?base64?SGVs bG8=?=",  # whitespace inside
        "=?base64?SGVsbG8-_w==?=",  # URL-safe alphabet
        "=?base64?/w==?=",  # valid base64, not UTF-8
        "Région",  # non-ASCII plain value
        "世界",
        "line1\nline2",  # control character
        "bell\x07",
        "del\x7f",
    ],
)
def test_decode_header_value_rejects(header: str) -> None:
    with pytest.raises(ValueError):
        decode_header_value(header)


# -- check_mcp_headers ------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "flag": {"type": "boolean", "x-mcp-header": "Flag"},
        "where": {"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}},
    },
}
PARAMS = header_params("headed", SCHEMA)


def mcp(message: dict[str, Any], **extra: str | None) -> dict[str, str]:
    """Lower-cased conforming MCP headers for a message; None removes one."""
    headers: dict[str, Any] = {"mcp-protocol-version": VERSION, "mcp-method": message["method"]}
    field = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(message["method"])
    if field:
        headers["mcp-name"] = message["params"][field]
    headers.update({k.replace("_", "-").lower(): v for k, v in extra.items()})
    return {k: v for k, v in headers.items() if v is not None}


def routed(message: dict[str, Any], params: tuple[HeaderParam, ...] = ()) -> Route:
    """The route the core gives a message, with the `Mcp-Param-*` bindings of its tool."""
    return Route(message["method"], NAME_FIELDS.get(message["method"]), params)


def call(request_id: Any = 1, **arguments: Any) -> dict[str, Any]:
    return request("tools/call", request_id, name="headed", arguments=arguments)


def mismatch(result: Rejection | None, request_id: Any = 1, *words: str, missing: str | None = None) -> Rejection:
    """A -32020 refusal: a header that disagrees with the body, or (`missing`: its name) one that is absent."""
    rejection = rejected(result, 400)
    assert rejection.error.code == HEADER_MISMATCH
    assert rejection.error.message.startswith(f"Missing header {missing}: " if missing else "Header mismatch: ")
    assert rejection.request_id == request_id
    for word in words:
        assert word in rejection.error.message
    return rejection


def test_conforming_headers_pass() -> None:
    message = request("tools/list")
    assert check_mcp_headers(mcp(message), message, routed(message)) is None


def test_missing_protocol_version_header_is_rejected() -> None:
    message = request("tools/list", 7)
    mismatch(check_mcp_headers(mcp(message, mcp_protocol_version=None), message, routed(message)), 7,
             missing="MCP-Protocol-Version")


def test_protocol_version_header_differing_from_meta_is_rejected() -> None:
    message = request("tools/list", "x", _meta=meta(**{"io.modelcontextprotocol/protocolVersion": "v999"}))
    mismatch(check_mcp_headers(mcp(message), message, routed(message)), "x", "v999")


def test_unsupported_version_in_both_header_and_meta_passes_header_checks() -> None:
    message = request("tools/list", _meta=meta(**{"io.modelcontextprotocol/protocolVersion": "v999.0.0"}))
    assert check_mcp_headers(mcp(message, mcp_protocol_version="v999.0.0"), message, routed(message)) is None


def test_missing_meta_is_left_to_the_server() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    assert check_mcp_headers(mcp(message), message, routed(message)) is None
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert check_mcp_headers(mcp(message), message, routed(message)) is None


def test_missing_method_header_is_rejected() -> None:
    message = request("tools/list")
    mismatch(check_mcp_headers(mcp(message, mcp_method=None), message, routed(message)), 1, missing="Mcp-Method")


@pytest.mark.parametrize("value", ["TOOLS/LIST", "Tools/List", "tools/call", " tools/list"])
def test_method_header_must_equal_the_method_exactly(value: str) -> None:
    message = request("tools/list")
    mismatch(check_mcp_headers(mcp(message, mcp_method=value), message, routed(message)), 1, "Mcp-Method")


@pytest.mark.parametrize(
    "message",
    [
        request("tools/call", 1, name="echo", arguments={}),
        request("prompts/get", 1, name="summarize"),
        request("resources/read", 1, uri="demo://readme"),
    ],
    ids=["tools/call", "prompts/get", "resources/read"],
)
def test_name_header_is_required_and_must_match(message: dict[str, Any]) -> None:
    assert check_mcp_headers(mcp(message), message, routed(message)) is None
    mismatch(check_mcp_headers(mcp(message, mcp_name=None), message, routed(message)), 1, "required", missing="Mcp-Name")
    mismatch(check_mcp_headers(mcp(message, mcp_name="other"), message, routed(message)), 1, "Mcp-Name", "other")


def test_name_header_is_case_sensitive() -> None:
    message = request("tools/call", 1, name="echo")
    mismatch(check_mcp_headers(mcp(message, mcp_name="ECHO"), message, routed(message)))


def test_resources_read_compares_the_uri_not_a_name() -> None:
    message = request("resources/read", 1, uri="demo://readme", name="readme")
    mismatch(check_mcp_headers(mcp(message, mcp_name="readme"), message, routed(message)), 1, "uri")


def test_name_header_may_be_base64_encoded() -> None:
    message = request("tools/call", 1, name="echo")
    assert check_mcp_headers(mcp(message, mcp_name="=?base64?ZWNobw==?="), message, routed(message)) is None
    uri = request("resources/read", 1, uri="file:///tmp/世界.txt")
    assert check_mcp_headers(mcp(uri, mcp_name="=?base64?ZmlsZTovLy90bXAv5LiW55WMLnR4dA==?="), uri, routed(uri)) is None


def test_invalid_base64_name_header_is_rejected() -> None:
    message = request("tools/call", 1, name="echo")
    mismatch(check_mcp_headers(mcp(message, mcp_name="=?base64?ZWNobw?="), message, routed(message)), 1, "Mcp-Name")


def test_name_header_is_not_required_for_other_methods() -> None:
    message = request("tools/list")
    assert check_mcp_headers(mcp(message), message, routed(message)) is None
    assert check_mcp_headers(mcp(message, mcp_name="anything"), message, routed(message)) is None


def test_name_header_is_not_required_when_the_body_has_no_name() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": meta()}}
    headers = {"mcp-protocol-version": VERSION, "mcp-method": "tools/call"}
    assert check_mcp_headers(headers, message, routed(message)) is None


def test_no_tool_params_means_param_headers_are_ignored() -> None:
    message = call(region="eu")
    assert check_mcp_headers(mcp(message, mcp_param_region="us"), message, routed(message)) is None


@pytest.mark.parametrize(
    "arguments, headers",
    [
        ({"region": "us-west1"}, {"Mcp-Param-Region": "us-west1"}),
        ({"region": "Hello, 世界"}, {"Mcp-Param-Region": "=?base64?SGVsbG8sIOS4lueVjA==?="}),
        ({"region": " padded "}, {"Mcp-Param-Region": "=?base64?IHBhZGRlZCA=?="}),
        ({"region": "=?base64?literal?="}, {"Mcp-Param-Region": "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="}),
        ({"region": "SGVsbG8="}, {"Mcp-Param-Region": "SGVsbG8="}),
        ({"region": "=?base64?SGVsbG8="}, {"Mcp-Param-Region": "=?base64?SGVsbG8="}),
        ({"region": "Hello"}, {"Mcp-Param-Region": "=?base64?SGVsbG8=?="}),
        ({"count": 42}, {"Mcp-Param-Count": "42"}),
        ({"count": 42}, {"Mcp-Param-Count": "42.0"}),
        ({"count": 42.0}, {"Mcp-Param-Count": "42"}),
        ({"count": -7}, {"Mcp-Param-Count": "-7"}),
        ({"count": 9007199254740991}, {"Mcp-Param-Count": "9007199254740991"}),
        ({"flag": True}, {"Mcp-Param-Flag": "true"}),
        ({"flag": False}, {"Mcp-Param-Flag": "false"}),
        ({"where": {"zone": "a1"}}, {"Mcp-Param-Zone": "a1"}),
        ({}, {}),
        ({"region": None, "count": None}, {}),
        ({"where": {}}, {}),
        ({"where": "not an object"}, {}),
        (
            {"region": "eu", "count": 1, "flag": True, "where": {"zone": "z"}},
            {"Mcp-Param-Region": "eu", "Mcp-Param-Count": "1", "Mcp-Param-Flag": "true", "Mcp-Param-Zone": "z"},
        ),
    ],
)
def test_param_headers_that_mirror_the_arguments_pass(arguments: dict[str, Any], headers: dict[str, str]) -> None:
    message = call(**arguments)
    assert check_mcp_headers(mcp(message, **{k.lower(): v for k, v in headers.items()}), message, routed(message, PARAMS)) is None


@pytest.mark.parametrize(
    "arguments, header, value",
    [
        ({"region": "us-west1"}, "Mcp-Param-Region", "us-east1"),
        ({"region": "us-west1"}, "Mcp-Param-Region", "US-WEST1"),
        ({"region": "Hello"}, "Mcp-Param-Region", "=?base64?SGVsbG8?="),
        ({"region": "Hello"}, "Mcp-Param-Region", "=?base64?SGVs!!!bG8=?="),
        ({"region": "Hello, 世界"}, "Mcp-Param-Region", "Hello, ä¸\x96ç\x95\x8c"),
        ({"count": 42}, "Mcp-Param-Count", "43"),
        ({"count": 42}, "Mcp-Param-Count", "42.5"),
        ({"count": 42}, "Mcp-Param-Count", "forty-two"),
        ({"count": 42}, "Mcp-Param-Count", ""),
        ({"count": 1}, "Mcp-Param-Count", "true"),
        ({"flag": True}, "Mcp-Param-Flag", "True"),
        ({"flag": True}, "Mcp-Param-Flag", "1"),
        ({"flag": False}, "Mcp-Param-Flag", "true"),
        ({"flag": False}, "Mcp-Param-Flag", "FALSE"),
        ({"flag": False}, "Mcp-Param-Flag", "0"),
        ({"where": {"zone": "a1"}}, "Mcp-Param-Zone", "a2"),
    ],
)
def test_param_headers_that_differ_are_rejected(arguments: dict[str, Any], header: str, value: str) -> None:
    message = call(5, **arguments)
    mismatch(check_mcp_headers(mcp(message, **{header.lower(): value}), message, routed(message, PARAMS)), 5, header)


@pytest.mark.parametrize(
    "arguments, header",
    [
        ({"region": "eu"}, "Mcp-Param-Region"),
        ({"count": 0}, "Mcp-Param-Count"),
        ({"flag": False}, "Mcp-Param-Flag"),
        ({"region": ""}, "Mcp-Param-Region"),
        ({"where": {"zone": "a1"}}, "Mcp-Param-Zone"),
    ],
)
def test_param_header_missing_while_the_argument_is_present_is_rejected(arguments: dict[str, Any], header: str) -> None:
    message = call(**arguments)
    mismatch(check_mcp_headers(mcp(message), message, routed(message, PARAMS)), 1, "required", missing=header)


def test_wrongly_typed_argument_does_not_match_its_header() -> None:
    message = call(count="42")
    mismatch(check_mcp_headers(mcp(message, mcp_param_count="42"), message, routed(message, PARAMS)))
    message = call(flag="true")
    mismatch(check_mcp_headers(mcp(message, mcp_param_flag="true"), message, routed(message, PARAMS)))
    message = call(count=True)
    mismatch(check_mcp_headers(mcp(message, mcp_param_count="1"), message, routed(message, PARAMS)))


def test_param_checks_follow_the_given_params_only() -> None:
    only_region = (HeaderParam("Region", ("region",), "string"),)
    message = call(region="eu", count=3)
    assert check_mcp_headers(mcp(message, mcp_param_region="eu"), message, routed(message, only_region)) is None


# -- status_for -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code, status",
    [
        (None, 200),
        (PARSE_ERROR, 400),
        (INVALID_REQUEST, 400),
        (INVALID_PARAMS, 400),
        (HEADER_MISMATCH, 400),
        (MISSING_CLIENT_CAPABILITY, 400),
        (UNSUPPORTED_VERSION, 400),
        (METHOD_NOT_FOUND, 404),
        (INTERNAL_ERROR, 500),
        (-32000, 200),
        (12345, 200),
    ],
)
def test_status_for(code: int | None, status: int) -> None:
    assert status_for(code) == status


def test_param_header_present_while_the_argument_is_absent_is_rejected() -> None:
    message = call(region=None)
    mismatch(check_mcp_headers(mcp(message, mcp_param_region="eu"), message, routed(message, PARAMS)), 1, "Mcp-Param-Region", "is not")


def test_a_repeated_mcp_header_is_a_mismatch_even_when_the_joined_value_matches() -> None:
    message = call(region="us, eu")
    headers = mcp(message, mcp_param_region="us, eu")
    mismatch(check_mcp_headers(headers, message, routed(message, PARAMS), frozenset({"mcp-param-region"})), 1, "more than once")
    assert check_mcp_headers(headers, message, routed(message, PARAMS), frozenset({"accept"})) is None


def test_an_integer_header_of_thousands_of_digits_is_a_mismatch_not_a_crash() -> None:
    message = call(count=7)
    mismatch(check_mcp_headers(mcp(message, mcp_param_count="9" * 5000), message, routed(message, PARAMS)), 1, "Mcp-Param-Count")


def test_a_public_bind_needs_an_allowed_host_list() -> None:
    assert public_bind_refusal("127.0.0.1", ()) is None and public_bind_refusal("::1", ()) is None
    assert public_bind_refusal("0.0.0.0", ("api.example.com",)) is None
    refusal = public_bind_refusal("0.0.0.0", ())
    assert refusal is not None and "--allow-host" in refusal
