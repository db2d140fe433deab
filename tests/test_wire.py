"""JSON-RPC message shapes and encoders (mcpcore._wire.jsonrpc)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from conftest import ALL_VERSIONS
from mcpcore._wire.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOTIFICATION,
    REQUEST,
    RESPONSE,
    UNSUPPORTED_VERSION,
    McpError,
    classify,
    encode_error,
    encode_notification,
    encode_raw_result,
    invalid_params,
    missing_capability,
    readable_id,
    unsupported_version,
)


def invalid_request(message: Any) -> McpError:
    with pytest.raises(McpError) as caught:
        classify(message)
    assert caught.value.code == INVALID_REQUEST == -32600
    return caught.value


# -- classify ------------------------------------------------------------------------


@pytest.mark.parametrize("request_id", [1, 0, -5, "abc", ""])
def test_message_with_method_and_valid_id_is_a_request(request_id: Any) -> None:
    assert classify({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}) == REQUEST


def test_message_with_method_and_no_id_is_a_notification() -> None:
    assert classify({"jsonrpc": "2.0", "method": "notifications/initialized"}) == NOTIFICATION


def test_message_with_id_and_result_is_a_response() -> None:
    assert classify({"jsonrpc": "2.0", "id": 3, "result": {}}) == RESPONSE


def test_message_with_id_and_error_is_a_response() -> None:
    assert classify({"jsonrpc": "2.0", "id": "x", "error": {"code": -1, "message": "m"}}) == RESPONSE


def test_batch_is_refused_with_a_message_mentioning_batch() -> None:
    error = invalid_request([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert "Batch" in error.message


def test_empty_batch_is_refused_as_a_batch() -> None:
    assert "Batch" in invalid_request([]).message


@pytest.mark.parametrize("message", ["text", 5, None, True])
def test_non_object_message_is_refused(message: Any) -> None:
    assert invalid_request(message).message == "A JSON-RPC message must be a JSON object"


@pytest.mark.parametrize("version", ["1.0", 2.0, None, "2.0 "])
def test_wrong_jsonrpc_version_is_refused(version: Any) -> None:
    error = invalid_request({"jsonrpc": version, "id": 1, "method": "ping"})
    assert "jsonrpc" in error.message


def test_missing_jsonrpc_member_is_refused() -> None:
    assert "jsonrpc" in invalid_request({"id": 1, "method": "ping"}).message


@pytest.mark.parametrize("method", [5, None, ["ping"], {"name": "ping"}])
def test_non_string_method_is_refused(method: Any) -> None:
    error = invalid_request({"jsonrpc": "2.0", "id": 1, "method": method})
    assert error.message == 'The "method" member must be a string'


@pytest.mark.parametrize("request_id", [None, True, False, 1.0, 1.5, [1], {"a": 1}])
def test_request_with_null_bool_float_or_structured_id_is_refused(request_id: Any) -> None:
    error = invalid_request({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    assert error.message == 'The "id" member must be a string or an integer'


def test_message_with_neither_method_nor_result_is_refused() -> None:
    error = invalid_request({"jsonrpc": "2.0", "id": 1})
    assert error.message == 'A request needs a string "method" member'


def test_result_without_id_is_not_a_response() -> None:
    invalid_request({"jsonrpc": "2.0", "result": {}})


# -- readable_id ---------------------------------------------------------------------


@pytest.mark.parametrize("request_id", [7, "seven"])
def test_readable_id_returns_valid_ids(request_id: Any) -> None:
    assert readable_id({"id": request_id}) == request_id


@pytest.mark.parametrize("message", [{"id": None}, {"id": True}, {"id": 1.0}, {}, [{"id": 1}], "x", None])
def test_readable_id_returns_none_for_unreadable_ids(message: Any) -> None:
    assert readable_id(message) is None


# -- encoders ------------------------------------------------------------------------


def test_encode_error_includes_a_known_id() -> None:
    encoded = orjson.loads(encode_error(4, McpError(METHOD_NOT_FOUND, "no such method")))
    assert encoded == {"jsonrpc": "2.0", "id": 4, "error": {"code": -32601, "message": "no such method"}}


def test_encode_error_omits_id_when_none() -> None:
    encoded = orjson.loads(encode_error(None, McpError(INVALID_REQUEST, "bad")))
    assert encoded == {"jsonrpc": "2.0", "error": {"code": -32600, "message": "bad"}}


def test_encode_error_keeps_falsy_ids() -> None:
    assert orjson.loads(encode_error(0, McpError(INVALID_REQUEST, "bad")))["id"] == 0
    assert orjson.loads(encode_error("", McpError(INVALID_REQUEST, "bad")))["id"] == ""


def test_error_data_is_included_only_when_given() -> None:
    assert McpError(INVALID_PARAMS, "m", {"k": 1}).to_dict() == {"code": -32602, "message": "m", "data": {"k": 1}}
    assert "data" not in McpError(INVALID_PARAMS, "m").to_dict()


def test_falsy_error_data_is_kept() -> None:
    assert McpError(INVALID_PARAMS, "m", []).to_dict()["data"] == []


@pytest.mark.parametrize("request_id", [1, "req-1", 'quote"and\\slash'])
def test_encode_raw_result_splices_result_bytes_into_a_response(request_id: Any) -> None:
    result = orjson.dumps({"tools": [{"name": "a"}], "nextCursor": "b28y"})
    encoded = encode_raw_result(request_id, result)
    assert orjson.loads(encoded) == {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {"tools": [{"name": "a"}], "nextCursor": "b28y"},
    }


def test_encode_raw_result_embeds_the_given_bytes_verbatim() -> None:
    result = b'{"b":1,"a":2}'
    encoded = encode_raw_result(9, result)
    assert encoded == b'{"jsonrpc":"2.0","id":9,"result":{"b":1,"a":2}}'


def test_encode_notification_has_no_id() -> None:
    encoded = orjson.loads(encode_notification("notifications/progress", {"progress": 1}))
    assert encoded == {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}


# -- error constructors ------------------------------------------------------------------


def test_unsupported_version_lists_supported_and_echoes_requested() -> None:
    error = unsupported_version("1999-01-01")
    assert error.code == UNSUPPORTED_VERSION == -32022
    assert error.message == "Unsupported protocol version"
    assert error.data == {"supported": ALL_VERSIONS, "requested": "1999-01-01"}


def test_unsupported_version_keeps_a_missing_requested_version_as_null() -> None:
    encoded = orjson.loads(encode_error(1, unsupported_version(None)))
    assert encoded["error"]["data"] == {"supported": ALL_VERSIONS, "requested": None}


def test_invalid_params_has_code_32602() -> None:
    error = invalid_params("bad cursor", {"cursor": "x"})
    assert (error.code, error.message, error.data) == (-32602, "bad cursor", {"cursor": "x"})


def test_missing_capability_names_sorted_capabilities_and_keeps_them_as_objects() -> None:
    error = missing_capability({"sampling": {}, "elicitation": {}})
    assert error.code == -32021
    assert error.message.endswith("elicitation, sampling")
    assert error.data == {"requiredCapabilities": {"sampling": {}, "elicitation": {}}}


def test_mcp_error_str_is_its_message() -> None:
    assert str(McpError(INVALID_PARAMS, "unknown city")) == "unknown city"
