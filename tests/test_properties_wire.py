"""Properties of the wire classifier: bytes → one JSON-RPC message or the error to answer.

`read_message` (transports/_calls.py) parses and classifies with `jsonrpc.classify`;
the core routes with `protocol.method_route` / `Dispatcher.route` and reads
the era with `claims_modern`. Whatever the bytes, the verdict is a message or
-32700 / -32600, and an id is echoed exactly as sent: true is not 1, 5.0 is not 5.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from hypothesis import given, settings, strategies as st

from mcpcore import Server
from mcpcore._wire.protocol import LONG_LIVED_METHODS, NAME_FIELDS, claims_modern, method_route
from mcpcore._runtime.session import Session
from mcpcore.transports._calls import Inbound, Malformed, cancelled_request, read_message
from mcpcore.transports._http.rules import Rejection, check_body
from mcpcore._wire.jsonrpc import (
    INVALID_REQUEST,
    MAX_NESTING,
    META_VERSION,
    NOTIFICATION,
    PARSE_ERROR,
    REQUEST,
    RESPONSE,
    McpError,
    encode_error,
)

PROPERTY = settings(max_examples=60, deadline=None, derandomize=True, database=None)

ORJSON_DEPTH = 1024  # orjson refuses to parse deeper documents

text = st.text(st.characters(blacklist_categories=("Cs",)))  # what JSON strings can hold
integers = st.integers(-(2**63), 2**64 - 1)  # what orjson reads as int
scalars = st.none() | st.booleans() | integers | st.floats(allow_nan=False, allow_infinity=False) | text
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4), max_leaves=12)
valid_ids = integers | text
odd_ids = st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.lists(valid_ids, max_size=2) | st.dictionaries(text, valid_ids, max_size=2)
methods = st.sampled_from(["tools/list", "tools/call", "initialize", "notifications/cancelled", ""]) | text
params = st.dictionaries(text, json_values, max_size=3)
valid_messages = st.one_of(
    st.builds(lambda i, m, p: {"jsonrpc": "2.0", "id": i, "method": m, "params": p}, valid_ids, methods, params),
    st.builds(lambda m, p: {"jsonrpc": "2.0", "method": m, "params": p}, methods, params),
    st.builds(lambda i, r: {"jsonrpc": "2.0", "id": i, "result": r}, valid_ids, json_values),
    st.builds(lambda i, e: {"jsonrpc": "2.0", "id": i, "error": e}, valid_ids, json_values),
)
odd_members = {
    "jsonrpc": st.sampled_from(["1.0", "2.0 ", "2", 2.0, 2, None]) | json_values,
    "id": odd_ids | valid_ids,
    "method": json_values | methods,
    "params": json_values,
    "result": json_values,
    "error": json_values,
}


@st.composite
def near_valid(draw: st.DrawFn) -> dict[str, Any]:
    """A valid message with up to two members removed, added or given odd values: the classifier's edges."""
    message = dict(draw(valid_messages))
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(sorted(odd_members)))
        if key in message and draw(st.booleans()):
            del message[key]
        else:
            message[key] = draw(odd_members[key])
    return message


messages = near_valid()
documents = messages | json_values | st.lists(messages, max_size=2)


def is_id(value: Any) -> bool:
    """The ids the protocol allows: strings and integers (bool is not an integer here)."""
    return type(value) in (str, int)


def expected_kind(message: Any) -> str | None:
    """What JSON-RPC 2.0 (one message, no batches) says a parsed document is; None: invalid request."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if "method" not in message:
        return RESPONSE if "id" in message and ("result" in message or "error" in message) else None
    if not isinstance(message["method"], str):
        return None
    if "id" not in message:
        return NOTIFICATION
    return REQUEST if is_id(message["id"]) else None


def same_id(got: Any, sent: Any) -> bool:
    return type(got) is type(sent) and got == sent


# -- read_message ---------------------------------------------------------------------


@PROPERTY
@given(st.binary(max_size=200) | text.map(str.encode))
def test_any_bytes_are_a_message_or_a_parse_or_invalid_request_error(data: bytes) -> None:
    verdict = read_message(data)
    if isinstance(verdict, Inbound):
        assert verdict.kind == expected_kind(verdict.message)
    else:
        assert isinstance(verdict, Malformed) and verdict.error.code in (PARSE_ERROR, INVALID_REQUEST)
        assert verdict.request_id is None or is_id(verdict.request_id)


@PROPERTY
@given(documents)
def test_a_json_document_is_classified_as_json_rpc_says(document: Any) -> None:
    """Valid JSON is never -32700; a request, notification or response is kept exactly, the rest is -32600."""
    verdict = read_message(orjson.dumps(document))
    kind = expected_kind(document)
    if kind is None:
        assert isinstance(verdict, Malformed) and verdict.error.code == INVALID_REQUEST
        readable = document.get("id") if isinstance(document, dict) else None
        assert same_id(verdict.request_id, readable) if is_id(readable) else verdict.request_id is None
    else:
        assert isinstance(verdict, Inbound) and verdict.kind == kind
        assert orjson.dumps(verdict.message) == orjson.dumps(document)  # exactly: in Python 1 == 1.0 == True


forbidden = {
    "jsonrpc": st.sampled_from(["1.0", "2.0 ", "2", 2.0, 2, None]) | json_values.filter(lambda v: v != "2.0"),
    "id": odd_ids,
    "method": json_values.filter(lambda v: not isinstance(v, str)),
}


@PROPERTY
@given(valid_messages, st.data())
def test_a_member_with_a_value_json_rpc_forbids_is_invalid_request(message: dict[str, Any], data: st.DataObject) -> None:
    """jsonrpc is exactly "2.0", a request id a string or an integer, a method a string; else -32600."""
    key = data.draw(st.sampled_from([k for k in forbidden if k in message and (k != "id" or "method" in message)]), label="member")
    message = {**message, key: data.draw(forbidden[key], label="value")}
    verdict = read_message(orjson.dumps(message))
    assert isinstance(verdict, Malformed) and verdict.error.code == INVALID_REQUEST
    assert same_id(verdict.request_id, message["id"]) if is_id(message.get("id")) else verdict.request_id is None


@PROPERTY
@given(messages, st.data())
def test_a_truncated_or_non_utf8_message_is_a_parse_error_without_id(message: dict[str, Any], data: st.DataObject) -> None:
    """An object cut short never closes, and a 0xFF byte is never UTF-8: -32700, with no id to echo."""
    encoded = orjson.dumps(message)
    cut = data.draw(st.integers(1, len(encoded) - 1), label="cut")
    verdict = read_message(data.draw(st.sampled_from([encoded[:cut], encoded[:cut] + b"\xff" + encoded[cut:]]), label="broken"))
    assert isinstance(verdict, Malformed) and verdict.error.code == PARSE_ERROR and verdict.request_id is None


@PROPERTY
@given(valid_ids, st.sampled_from(["tools/list", "notifications/x", "initialize"]))
def test_a_valid_id_is_kept_with_its_type_and_echoed_exactly(request_id: Any, method: str) -> None:
    verdict = read_message(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method}))
    assert isinstance(verdict, Inbound) and verdict.kind == REQUEST
    assert same_id(verdict.message["id"], request_id)
    echoed = orjson.loads(encode_error(verdict.message["id"], McpError(INVALID_REQUEST, "no")))
    assert same_id(echoed["id"], request_id)


number_literal = st.builds(
    lambda sign, whole, fraction, exponent: f"{sign}{whole}{fraction}{exponent}",
    st.sampled_from(["", "-"]), st.integers(0, 10**30).map(str) | st.sampled_from(["0", "5", "18446744073709551616"]),
    st.sampled_from(["", ".0", ".5", ".000"]), st.sampled_from(["", "e0", "E2", "e-1", "e+0"]),
)


@PROPERTY
@given(number_literal | st.sampled_from(["true", "false", "null", '"5"', "[5]", "{}"]))
def test_an_id_is_an_integer_only_when_written_as_one(literal: str) -> None:
    """5.0, 5e0 and true are not 5; an integer past 64 bits (read as a float) is refused, never rounded."""
    body = b'{"jsonrpc":"2.0","id":%s,"method":"m"}' % literal.encode()
    verdict = read_message(body)
    written_as_integer = literal.lstrip("-").isdigit()
    if isinstance(verdict, Inbound):
        assert (written_as_integer and verdict.message["id"] == int(literal) and type(verdict.message["id"]) is int) or (
            literal == '"5"' and verdict.message["id"] == "5"
        )
    else:
        assert verdict.error.code == INVALID_REQUEST and verdict.request_id is None
        assert not written_as_integer or not -(2**63) <= int(literal) < 2**64


def nested(depth: int, shape: int, leaf: bytes = b"1") -> bytes:
    """`depth` arrays and objects around a leaf; bit i of `shape` makes level i an object."""
    objects = [shape >> (level % 64) & 1 for level in range(depth)]
    return b"".join(b'{"k":' if o else b"[" for o in objects) + leaf + b"".join(b"}" if o else b"]" for o in reversed(objects))


depths = st.sampled_from([MAX_NESTING - 2, MAX_NESTING - 1, MAX_NESTING, ORJSON_DEPTH - 1, ORJSON_DEPTH]) | st.integers(0, 1100)


@PROPERTY
@given(depths, st.integers(0, 2**64 - 1), valid_ids)
def test_nesting_past_the_bound_is_invalid_request_with_the_id(levels: int, shape: int, request_id: Any) -> None:
    """Up to MAX_NESTING levels (the message itself is one) are served; deeper is -32600, or -32700 past orjson's limit."""
    head = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": "m"})[:-1]
    verdict = read_message(head + b',"params":' + nested(levels, shape) + b"}")
    depth = 1 + levels
    if depth <= MAX_NESTING:
        assert isinstance(verdict, Inbound)
    elif depth <= ORJSON_DEPTH:
        assert isinstance(verdict, Malformed) and verdict.error.code == INVALID_REQUEST and same_id(verdict.request_id, request_id)
    else:
        assert isinstance(verdict, Malformed) and verdict.error.code == PARSE_ERROR


@PROPERTY
@given(st.text("[]{}\"\\", max_size=400), st.integers(0, MAX_NESTING - 2), st.integers(0, 2**64 - 1))
def test_brackets_inside_strings_do_not_count_as_nesting(noise: str, levels: int, shape: int) -> None:
    """The bracket count only spares the walk: a shallow message full of "[" in its strings is served."""
    verdict = read_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + nested(levels, shape, orjson.dumps(noise * 3)) + b"}")
    assert isinstance(verdict, Inbound) and verdict.kind == REQUEST


# -- responses, cancellations, routes ---------------------------------------------------


@PROPERTY
@given(valid_ids | odd_ids, st.sampled_from([{"result": {}}, {"error": {"code": 1, "message": "m"}}]))
def test_a_response_without_a_session_is_refused(response_id: Any, outcome: dict[str, Any]) -> None:
    verdict = check_body(orjson.dumps({"jsonrpc": "2.0", "id": response_id, **outcome}))
    assert isinstance(verdict, Rejection) and verdict.status == 400 and verdict.error.code == INVALID_REQUEST


class Outbox:
    """A writer that keeps what the session sends its client."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.arrived = anyio.Event()

    async def notify(self, message: bytes) -> None:
        self.sent.append(message)
        self.arrived.set()

    async def respond(self, message: bytes, error_code: int | None = None) -> None:
        raise AssertionError("a server-to-client request has no response of its own")


@pytest.mark.anyio
@PROPERTY
@given(valid_ids | odd_ids | st.just("?"))
async def test_a_response_reaches_only_the_request_with_its_exact_id(response_id: Any) -> None:
    """A legacy session's pending request takes the response with its id, not one that merely looks alike."""
    session, outbox, answers = Session("s"), Outbox(), []

    async def ask() -> None:
        answers.append(await session.request("roots/list", None, outbox, timeout=10))

    async with anyio.create_task_group() as group:
        group.start_soon(ask)
        await outbox.arrived.wait()
        sent = orjson.loads(outbox.sent[0])["id"]
        response_id = sent if response_id == "?" else response_id
        verdict = check_body(orjson.dumps({"jsonrpc": "2.0", "id": response_id, "result": {"roots": []}}), session)
        if same_id(response_id, sent):
            assert isinstance(verdict, Inbound) and verdict.kind == RESPONSE
        else:
            assert isinstance(verdict, Rejection) and verdict.error.code == INVALID_REQUEST
            assert isinstance(check_body(orjson.dumps({"jsonrpc": "2.0", "id": sent, "result": {}}), session), Inbound)
    again = check_body(orjson.dumps({"jsonrpc": "2.0", "id": sent, "result": {}}), session)
    assert isinstance(again, Rejection)  # delivered once: a second answer waits for nothing
    assert len(answers) == 1


@PROPERTY
@given(valid_ids | odd_ids | json_values)
def test_a_cancellation_names_a_request_only_by_a_valid_id_kept_exactly(request_id: Any) -> None:
    named = cancelled_request({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}})
    assert same_id(named, request_id) if is_id(request_id) else named is None


@PROPERTY
@given(text | st.sampled_from(sorted(NAME_FIELDS) + sorted(LONG_LIVED_METHODS)))
def test_every_method_has_a_route_that_names_its_mcp_name_field(method: str) -> None:
    route = method_route(method)
    assert route.method == method and route.header_params == () and route.target is None
    assert route.name_field == NAME_FIELDS.get(method)
    assert route.long_lived == (method in LONG_LIVED_METHODS)


server = Server("properties")


@server.tool
def echo(text: str) -> str:
    """Say it back."""
    return text


@PROPERTY
@given(st.sampled_from(["tools/call", "tools/list", "prompts/get", "resources/read"]) | text, st.just({"name": "echo"}) | json_values)
def test_the_core_routes_any_request_and_resolves_only_a_known_tool(method: str, params: Any) -> None:
    route = server.route({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert route.method == method and route.name_field == NAME_FIELDS.get(method)
    names_echo = method == "tools/call" and isinstance(params, dict) and params.get("name") == "echo"
    assert (route.target is not None) == names_echo
    assert route.header_params == ()


@PROPERTY
@given(st.dictionaries(text, json_values, max_size=3), st.dictionaries(text, json_values, max_size=3), json_values)
def test_a_version_in_meta_is_what_makes_a_message_modern(params: dict[str, Any], meta: dict[str, Any], version: Any) -> None:
    """Whatever else it carries, a message is modern exactly when its params._meta names a protocol version."""
    bare = {key: value for key, value in params.items() if key != "_meta"}
    assert not claims_modern({"jsonrpc": "2.0", "method": "m", "params": bare})
    assert not claims_modern({"jsonrpc": "2.0", "method": "m", "params": {**bare, "_meta": {k: v for k, v in meta.items() if k != META_VERSION}}})
    assert claims_modern({"jsonrpc": "2.0", "method": "m", "params": {**bare, "_meta": {**meta, META_VERSION: version}}})
    assert not claims_modern({"jsonrpc": "2.0", "method": "m", "params": [bare, {"_meta": {META_VERSION: version}}]})
