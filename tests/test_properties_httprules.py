"""Properties of the Streamable HTTP ladder (transports/_http/rules.py), no sockets.

Whatever the method, target, headers or body, the ladder either accepts or
answers one of its documented refusals; it never raises. A request built
from generated but conforming parts is accepted, and MCP headers that do not
mirror the body are always -32020.
"""

from __future__ import annotations

import base64
import string
from decimal import Decimal
from typing import Any

from hypothesis import given, settings, strategies as st

from conftest import VERSION, request
from mcpcore._wire.protocol import HTTP_STATUS, NAME_FIELDS, Route, http_status
from mcpcore._runtime.session import Sessions
from mcpcore._wire.toolheaders import HeaderParam, header_params
from mcpcore.transports._calls import Inbound
from mcpcore.transports._http.rules import (
    Policy,
    Rejection,
    check_body,
    check_head,
    check_mcp_headers,
    decode_header_value,
    is_legacy,
    legacy_session,
    make_policy,
)
from mcpcore._wire.jsonrpc import HEADER_MISMATCH, INVALID_REQUEST, PARSE_ERROR, META_VERSION

PROPERTY = settings(max_examples=60, deadline=None, derandomize=True, database=None)

HEAD_STATUSES = frozenset({403, 404, 405, 406, 413, 415, 421})  # what check_head may answer
VISIBLE = string.ascii_letters + string.digits + string.punctuation + " "

# -- strategies -----------------------------------------------------------------------

latin1 = st.text(st.characters(max_codepoint=0xFF))  # how the transport decodes header bytes
anything = latin1 | st.text()
port = st.integers(1, 65535)
domain = st.lists(st.text(string.ascii_lowercase + string.digits + "-", min_size=1, max_size=8), min_size=1, max_size=3).map(
    lambda labels: ".".join(labels) + ".example"
)
loopback_policy = st.builds(
    lambda host, port, limit: make_policy(host, port, "/mcp", max_body_bytes=limit),
    st.sampled_from(["127.0.0.1", "::1", "localhost"]), port, st.integers(0, 10**7),
)
public_policy = st.builds(
    lambda names, port, limit: make_policy("0.0.0.0", port, "/mcp", allowed_hosts=tuple(names), max_body_bytes=limit),
    st.lists(domain, min_size=1, max_size=3), port, st.integers(0, 10**7),
)
policy = loopback_policy | public_policy | st.builds(lambda p: make_policy("0.0.0.0", p, "/"), port)
header_name = st.sampled_from(
    ["host", "origin", "content-type", "accept", "content-length", "mcp-protocol-version", "mcp-method", "mcp-name",
     "mcp-session-id", "mcp-param-region", "expect", "last-event-id"]
) | st.text(string.ascii_lowercase + "-", min_size=1, max_size=12)
garbage_headers = st.dictionaries(header_name, anything, max_size=8)
method = st.sampled_from(["POST", "GET", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS", "post", ""]) | st.text(max_size=10)
target = st.sampled_from(["/mcp", "/mcp?x=1", "/", "/mcp/", "*"]) | st.text(max_size=20)
# Decimal numbers as text: leading zeros, and thousands of digits (past what int() reads)
digits = st.builds(lambda zeros, number: "0" * zeros + number, st.integers(0, 5000), st.integers(0, 10**8).map(str)) | st.builds(
    lambda size, digit: digit * size, st.integers(1, 6000), st.sampled_from("19")
)


def random_case(draw: st.DrawFn, text: str) -> str:
    mask = draw(st.integers(0, 2 ** len(text) - 1))
    return "".join(c.upper() if mask >> i & 1 else c for i, c in enumerate(text))


def host_forms(served: Policy) -> list[str]:
    """The allowed host names as a Host header writes them (IPv6 in brackets)."""
    return sorted(f"[{name}]" if ":" in name else name for name in served.allowed_hosts)


@st.composite
def conforming_head(draw: st.DrawFn) -> tuple[Policy, str, dict[str, str]]:
    """A policy and a POST head it must accept: served Host, allowed or no Origin, JSON in, JSON+SSE out."""
    served = draw(policy)
    names = host_forms(served)
    headers: dict[str, str] = {}
    if names:
        name = draw(st.sampled_from(names))
        suffix = st.just(f":{served.port}") if served.loopback else st.builds(lambda p: f":{p}", port)
        headers["host"] = random_case(draw, name + draw(st.just("") | suffix))
    else:
        headers["host"] = draw(domain)
    if draw(st.booleans()):
        scheme = draw(st.sampled_from(["http", "https"]))
        if served.loopback:
            where = draw(st.sampled_from(["localhost", "127.0.0.1", "[::1]"])) + draw(st.just("") | port.map(lambda p: f":{p}"))
        else:
            where = headers["host"]
        headers["origin"] = random_case(draw, f"{scheme}://{where}" + draw(st.sampled_from(["", "/"])))
    charset = draw(st.sampled_from(["", "; charset=utf-8", " ;charset=UTF-8"]))
    headers["content-type"] = random_case(draw, "application/json") + charset
    quality = st.sampled_from(["", ";q=1", ";q=0.5", ";q=0.001", " ; q=1.0"])
    covering = [
        draw(st.sampled_from(["application/json", "application/*", "*/*"])) + draw(quality),
        draw(st.sampled_from(["text/event-stream", "text/*", "*/*"])) + draw(quality),
    ]
    others = draw(st.lists(st.sampled_from(["text/html", "image/*", "application/xml;q=0", "video/mp4;q=0.2"]), max_size=3))
    headers["accept"] = ", ".join(draw(st.permutations(covering + others)))
    if draw(st.booleans()):
        headers["content-length"] = "0" * draw(st.integers(0, 3)) + str(draw(st.integers(0, served.max_body_bytes)))
    return served, served.path + draw(st.just("") | st.text(max_size=10).map(lambda q: "?" + q)), headers


def refused_with(result: Any, statuses: frozenset[int]) -> Rejection:
    assert isinstance(result, Rejection), result
    assert result.status in statuses, (result.status, result.error.message)
    return result


# -- check_head -----------------------------------------------------------------------


@PROPERTY
@given(policy, method, target, garbage_headers)
def test_any_head_is_accepted_or_refused_with_a_documented_4xx(served: Policy, verb: str, path: str, headers: dict[str, str]) -> None:
    """Garbage in the head is never a crash: None, or a 4xx of the ladder with -32600 and no id."""
    verdict = check_head(served, verb, path, headers)
    if verdict is not None:
        refused_with(verdict, HEAD_STATUSES)
        assert verdict.error.code == INVALID_REQUEST and verdict.request_id is None
        assert verdict.headers == ((("allow", "GET, POST, DELETE"),) if verdict.status == 405 else ())


@PROPERTY
@given(policy, method, target, garbage_headers)
def test_a_target_off_the_endpoint_is_404_before_anything_else(served: Policy, verb: str, path: str, headers: dict[str, str]) -> None:
    verdict = check_head(served, verb, path, headers)
    off_endpoint = path.split("?", 1)[0] != served.path
    assert (verdict is not None and verdict.status == 404) == off_endpoint


@PROPERTY
@given(conforming_head(), method)
def test_a_method_other_than_post_get_delete_is_405(head: tuple[Policy, str, dict[str, str]], verb: str) -> None:
    served, path, headers = head
    verdict = check_head(served, verb, path, headers)
    if verb in ("POST", "GET", "DELETE"):
        assert verdict is None
    else:
        refused_with(verdict, frozenset({405}))


@PROPERTY
@given(conforming_head())
def test_a_conforming_post_head_is_accepted(head: tuple[Policy, str, dict[str, str]]) -> None:
    served, path, headers = head
    assert check_head(served, "POST", path, headers) is None


@PROPERTY
@given(conforming_head(), st.sampled_from(["text/plain", "application/jsonx", "application/json-seq", "json", "", "application/x-json"]) | latin1)
def test_a_body_type_other_than_json_is_415(head: tuple[Policy, str, dict[str, str]], content_type: str) -> None:
    served, path, headers = head
    verdict = check_head(served, "POST", path, {**headers, "content-type": content_type})
    if content_type.split(";")[0].strip().lower() == "application/json":
        assert verdict is None
    else:
        refused_with(verdict, frozenset({415}))


@PROPERTY
@given(conforming_head(), st.sampled_from(["application/json", "text/event-stream"]), st.data())
def test_an_accept_lacking_json_or_sse_is_406(head: tuple[Policy, str, dict[str, str]], missing: str, data: st.DataObject) -> None:
    """Both kinds of answer must be acceptable: a range refusing one (q=0) or none covering it is 406."""
    served, path, headers = head
    kind = missing.split("/")[0]
    other = "text/event-stream" if kind == "application" else "application/json"
    ranges = [other, f"{missing};q=0", f"{kind}/*;q=0", "*/*;q=0", "text/html", "image/*", f"{kind}/other"]
    accept = ", ".join(data.draw(st.lists(st.sampled_from(ranges), unique=True)))
    refused_with(check_head(served, "POST", path, {**headers, "accept": accept}), frozenset({406}))


@PROPERTY
@given(conforming_head(), digits)
def test_a_declared_length_is_413_exactly_when_it_exceeds_the_limit(head: tuple[Policy, str, dict[str, str]], length: str) -> None:
    """Any number of digits (leading zeros, thousands of them) is compared as a number, never a crash."""
    served, path, headers = head
    verdict = check_head(served, "POST", path, {**headers, "content-length": length})
    if Decimal(length) > served.max_body_bytes:
        refused_with(verdict, frozenset({413}))
    else:
        assert verdict is None


@PROPERTY
@given(conforming_head(), latin1 | st.sampled_from(["²", "1²", "¹⁰", "٣", "1e9", "-1", "+5", " 5", "0x10", "1_000"]))
def test_a_content_length_that_is_no_number_is_left_to_the_http_parser(head: tuple[Policy, str, dict[str, str]], length: str) -> None:
    """Only ASCII digits declare a length (h11 refuses the rest): no crash on "²" or "1e9"."""
    served, path, headers = head
    verdict = check_head(served, "POST", path, {**headers, "content-length": length})
    if verdict is not None:
        refused_with(verdict, frozenset({413}))
        assert length.isascii() and length.isdigit() and Decimal(length) > served.max_body_bytes


@PROPERTY
@given(conforming_head(), st.data())
def test_a_host_is_served_exactly_when_it_names_an_allowed_host_and_port(head: tuple[Policy, str, dict[str, str]], data: st.DataObject) -> None:
    """DNS rebinding: the Host must be an allowed name, with this port on a loopback bind (421 otherwise)."""
    served, path, headers = head
    forms = host_forms(served)
    near_miss = st.builds(
        str.__add__, st.sampled_from(forms or ["localhost"]),
        st.sampled_from(["", ":", f":{served.port}", f":{served.port + 1}", ":0", "x", ".", " ", ":²", f":{served.port}:1", "]", "@evil.example"]),
    )
    host = data.draw(near_miss | latin1 | domain, label="host")
    headers = {**headers, "host": host}
    headers.pop("origin", None)
    verdict = check_head(served, "POST", path, headers)
    if not forms:
        assert verdict is None  # a public bind without a list does not check Host (refused at start instead)
        return
    name, colon, number = host.lower().rpartition(":") if not host.endswith("]") else ("", "", "")
    ported = colon and number.isascii() and number.isdigit() and (number == str(served.port) or not served.loopback)
    if host.lower() in forms or (ported and name in forms):
        assert verdict is None
    else:
        refused_with(verdict, frozenset({421}))


@st.composite
def foreign_origin(draw: st.DrawFn) -> tuple[str, str]:
    """An Origin whose host is not loopback, dressed up to look local; with its authority."""
    name = draw(domain)
    host = draw(st.sampled_from(["{}", "localhost.{}", "127.0.0.1.{}", "{}.localhost.example", "xn--{}"])).format(name)
    authority = draw(st.sampled_from(["", "localhost@", "127.0.0.1@", "[::1]@", "user:pw@"])) + host + draw(st.sampled_from(["", ":8000", ":1"]))
    return f"{draw(st.sampled_from(['http', 'https']))}://{authority}{draw(st.sampled_from(['', '/']))}", authority


@PROPERTY
@given(conforming_head(), foreign_origin())
def test_an_origin_naming_another_host_is_403(head: tuple[Policy, str, dict[str, str]], origin: tuple[str, str]) -> None:
    """A loopback bind takes loopback origins only; a public one the origin of its own Host."""
    served, path, headers = head
    value, authority = origin
    verdict = check_head(served, "POST", path, {**headers, "origin": value})
    if not served.loopback and authority == headers["host"].lower():
        assert verdict is None
    else:
        refused_with(verdict, frozenset({403}))


@PROPERTY
@given(conforming_head(), latin1 | st.sampled_from(["null", "http://[::1", "http://[abc]", "http://", "https://:80", "http://%6c%6fcalhost"]))
def test_any_origin_value_is_allowed_or_403(head: tuple[Policy, str, dict[str, str]], origin: str) -> None:
    served, path, headers = head
    verdict = check_head(served, "POST", path, {**headers, "origin": origin})
    if verdict is not None:
        refused_with(verdict, frozenset({403}))


# -- check_mcp_headers ----------------------------------------------------------------

KINDS = ("string", "integer", "boolean")
token = st.text(string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~", min_size=1, max_size=10)
text = st.text(st.characters(blacklist_categories=("Cs",)))  # what JSON strings can hold
integral = st.integers(-(2**63), 2**64 - 1) | st.integers(-(2**53), 2**53).map(float)  # orjson reads 42.0 as a float
request_id = st.integers(-(2**63), 2**64 - 1) | text


@st.composite
def header_tool(draw: st.DrawFn) -> tuple[HeaderParam, ...]:
    """The `Mcp-Param-*` bindings of a tool schema with a few annotated properties, some nested."""
    properties: dict[str, Any] = {}
    for index, header in enumerate(draw(st.lists(token, max_size=4, unique_by=str.lower))):
        leaf = {"type": draw(st.sampled_from(KINDS)), "x-mcp-header": header}
        if draw(st.booleans()):
            properties.setdefault("nest", {"type": "object", "properties": {}})["properties"][f"p{index}"] = leaf
        else:
            properties[f"p{index}"] = leaf
    return header_params("tool", {"type": "object", "properties": properties})


def value_of(kind: str) -> st.SearchStrategy[Any]:
    return {"string": text, "integer": integral, "boolean": st.booleans()}[kind]


def encoded(draw: st.DrawFn, value: str) -> str:
    """A string as a client sends it in a header: plain when it survives HTTP, else base64."""
    plain = value == value.strip() and all(" " <= c <= "~" for c in value)
    if plain and not (value.startswith("=?base64?") and value.endswith("?=")) and not draw(st.booleans()):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def header_text(draw: st.DrawFn, kind: str, value: Any) -> str:
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "integer":
        return str(int(value)) + draw(st.sampled_from(["", ".0", ".000"]))
    return encoded(draw, value)


def set_argument(arguments: dict[str, Any], param: HeaderParam, value: Any) -> None:
    node = arguments
    for key in param.path[:-1]:
        node = node.setdefault(key, {})
    node[param.path[-1]] = value


@st.composite
def mirrored_request(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, Any], Route]:
    """A modern request and headers that mirror it as the specification says."""
    method = draw(st.sampled_from(sorted(NAME_FIELDS) + ["tools/list", "server/discover", "x/unknown"]))
    field = NAME_FIELDS.get(method)
    params = draw(header_tool()) if method == "tools/call" else ()
    arguments: dict[str, Any] = {}
    headers = {"mcp-protocol-version": VERSION, "mcp-method": method}
    for param in params:
        if draw(st.booleans()):
            value = draw(value_of(param.kind))
            set_argument(arguments, param, value)
            headers[f"mcp-param-{param.header.lower()}"] = header_text(draw, param.kind, value)
    body: dict[str, Any] = {"arguments": arguments} if method == "tools/call" else {}
    if field is not None:
        body[field] = draw(text)
        headers["mcp-name"] = encoded(draw, body[field])
    return headers, request(method, draw(request_id), **body), Route(method, field, params)


def mismatched(verdict: Rejection | None, message: dict[str, Any], *words: str) -> None:
    rejection = refused_with(verdict, frozenset({400}))
    assert rejection.error.code == HEADER_MISMATCH and rejection.request_id == message["id"]
    assert type(rejection.request_id) is type(message["id"])
    for word in words:
        assert word in rejection.error.message, (word, rejection.error.message)


@PROPERTY
@given(mirrored_request())
def test_headers_that_mirror_the_body_are_accepted(case: tuple[dict[str, str], dict[str, Any], Route]) -> None:
    headers, message, route = case
    assert check_mcp_headers(headers, message, route) is None


@PROPERTY
@given(mirrored_request(), st.data())
def test_changing_one_mirrored_header_is_a_mismatch(case: tuple[dict[str, str], dict[str, Any], Route], data: st.DataObject) -> None:
    """Version, method, name or a param header that differs from the body (once decoded) is -32020."""
    headers, message, route = case
    name = data.draw(st.sampled_from(sorted(headers)), label="header")
    param = next((p for p in route.header_params if name == f"mcp-param-{p.header.lower()}"), None)
    if name in ("mcp-protocol-version", "mcp-method"):
        value = data.draw(text.filter(lambda t: t != headers[name]), label="value")
    elif name == "mcp-name":
        other = data.draw(text.filter(lambda t: t != message["params"][route.name_field]), label="other")
        value = encoded(data.draw, other)
    else:
        assert param is not None
        current = param.value_in(message["params"]["arguments"])
        other = data.draw(value_of(param.kind).filter(lambda v: v != current), label="other")  # 42.0 == 42: no change
        value = header_text(data.draw, param.kind, other)
    verdict = check_mcp_headers({**headers, name: value}, message, route)
    mismatched(verdict, message)
    assert name in verdict.error.message.lower()  # the message names the header to fix


@PROPERTY
@given(mirrored_request(), st.data())
def test_a_missing_or_extra_mirrored_header_is_a_mismatch(case: tuple[dict[str, str], dict[str, Any], Route], data: st.DataObject) -> None:
    headers, message, route = case
    name = data.draw(st.sampled_from(sorted(headers)), label="dropped")
    dropped = {k: v for k, v in headers.items() if k != name}
    mismatched(check_mcp_headers(dropped, message, route), message, "Missing header ")
    absent = [p for p in route.header_params if f"mcp-param-{p.header.lower()}" not in headers]
    if absent:
        extra = f"mcp-param-{data.draw(st.sampled_from(absent)).header.lower()}"
        mismatched(check_mcp_headers({**headers, extra: "1"}, message, route), message, "is present but")


@PROPERTY
@given(mirrored_request(), st.sets(header_name, min_size=1, max_size=4))
def test_a_repeated_mcp_header_is_always_a_mismatch(case: tuple[dict[str, str], dict[str, Any], Route], repeated: set[str]) -> None:
    """A header sent twice never agrees (its joined value might); other repeats change nothing."""
    headers, message, route = case
    verdict = check_mcp_headers(headers, message, route, frozenset(repeated))
    twice = sorted(name for name in repeated if name.startswith("mcp-"))
    if twice:
        mismatched(verdict, message, twice[0], "more than once")
    else:
        assert verdict is None


@PROPERTY
@given(mirrored_request(), st.data())
def test_any_mcp_header_values_are_accepted_or_a_mismatch(case: tuple[dict[str, str], dict[str, Any], Route], data: st.DataObject) -> None:
    """Garbage, huge numbers and odd encodings in any MCP header: -32020 with the request's id, never a crash."""
    headers, message, route = case
    names = sorted(headers) + [f"mcp-param-{p.header.lower()}" for p in route.header_params]
    noise = data.draw(st.dictionaries(st.sampled_from(names) | header_name, anything | digits, max_size=6), label="noise")
    verdict = check_mcp_headers({**headers, **noise}, message, route)
    if verdict is not None:
        mismatched(verdict, message)


def integer_call(header: str, value: Any) -> tuple[Rejection | None, dict[str, Any]]:
    """The verdict on a call whose integer argument `n` is mirrored by `Mcp-Param-N: header`."""
    message = request("tools/call", 1, name="tool", arguments={"n": value})
    headers = {"mcp-protocol-version": VERSION, "mcp-method": "tools/call", "mcp-name": "tool", "mcp-param-n": header}
    return check_mcp_headers(headers, message, Route("tools/call", "name", (HeaderParam("N", ("n",), "integer"),))), message


@PROPERTY
@given(integral, st.sampled_from(["", ".0", ".000"]))
def test_an_integer_header_matches_its_number(value: int | float, fraction: str) -> None:
    assert integer_call(str(int(value)) + fraction, value)[0] is None


integer_header = st.builds(
    str.__add__, st.sampled_from(["", "-", "+", " ", "0x"]),
    st.builds(str.__add__, digits, st.sampled_from(["", ".0", ".00", ".5", ".", "e0", "_0", "²"])),
)


@PROPERTY
@given(integer_header | latin1 | st.none(), integral | st.booleans() | text)
def test_an_integer_header_never_matches_another_value(header: str | None, value: Any) -> None:
    """Thousands of digits are a mismatch, not a crash; never "+42", "4e1", "42.5", or an argument true or "42"."""
    if header is None:  # the header that looks right: "1" for true, "42" for "42"
        header = value if isinstance(value, str) else str(int(value))
    verdict, message = integer_call(header, value)
    if verdict is None:
        assert type(value) in (int, float) and set(header) <= set(string.digits + "-.") and Decimal(header) == value
    else:
        mismatched(verdict, message, "Mcp-Param-N")


# -- decode_header_value --------------------------------------------------------------


@PROPERTY
@given(anything)
def test_decoding_any_header_value_gives_text_or_value_error(value: str) -> None:
    try:
        decoded = decode_header_value(value)
    except ValueError:
        return
    assert isinstance(decoded, str)


@PROPERTY
@given(text)
def test_the_base64_sentinel_round_trips_any_text(value: str) -> None:
    assert decode_header_value("=?base64?" + base64.b64encode(value.encode()).decode() + "?=") == value


@PROPERTY
@given(st.text(VISIBLE + "\t"))
def test_visible_ascii_is_its_own_value_unless_it_is_a_sentinel(value: str) -> None:
    if value.startswith("=?base64?") and value.endswith("?=") and len(value) >= 11:
        return
    assert decode_header_value(value) == value


# -- check_body, is_legacy, legacy_session ----------------------------------------------


@PROPERTY
@given(st.binary() | text.map(str.encode))
def test_any_body_is_a_message_or_a_400_refusal_with_its_json_rpc_code(body: bytes) -> None:
    verdict = check_body(body)
    if isinstance(verdict, Rejection):
        assert verdict.error.code in (PARSE_ERROR, INVALID_REQUEST)
        assert verdict.status == http_status(verdict.error.code) == HTTP_STATUS[verdict.error.code] == 400
    else:
        assert isinstance(verdict, Inbound)


@PROPERTY
@given(mirrored_request(), garbage_headers)
def test_a_protocol_version_claim_in_meta_wins_over_any_headers(case: tuple[dict[str, str], dict[str, Any], Route], headers: dict[str, str]) -> None:
    _, message, _ = case
    assert message["params"]["_meta"][META_VERSION] == VERSION
    assert not is_legacy(message, headers)
    assert is_legacy({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, headers)


@PROPERTY
@given(garbage_headers, request_id)
def test_a_legacy_message_without_a_live_session_is_400_or_404(headers: dict[str, str], message_id: Any) -> None:
    verdict = legacy_session(headers, Sessions(10, 60.0, lambda: 0.0), message_id)
    refused_with(verdict, frozenset({400, 404}))
    assert verdict.error.code == INVALID_REQUEST and verdict.request_id == message_id
    assert "mcp-session-id" in headers or verdict.status == 400
