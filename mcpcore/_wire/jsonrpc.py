"""JSON-RPC on the wire: error codes, the protocol error type, message shapes.

Pure functions over dicts and bytes. The server (`_serving/server.py`) raises `McpError`
and encodes replies here; transports use `classify` and the encoders for the
replies they produce themselves (parse errors, oversized messages).
"""

from __future__ import annotations

from typing import Any

import orjson

LATEST_VERSION = "2026-07-28"
MODERN_VERSIONS = (LATEST_VERSION,)  # stateless: per-request _meta
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # negotiated by initialize, newest first
SUPPORTED_VERSIONS = MODERN_VERSIONS + LEGACY_VERSIONS

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002  # legacy (2025-era) code; the modern wire uses -32602
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022
RATE_LIMITED = 429  # mcpcore's own (outside the JSON-RPC reserved range, as MCP asks): too many requests; `data.retryAfter` in seconds

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"


class McpError(Exception):
    """An error answered as a JSON-RPC error response (not as a tool result).

    Raise it from a tool, resource or prompt function to fail the request
    itself, e.g. `raise McpError(INVALID_PARAMS, "unknown city", {"city": c})`.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ToolError(Exception):
    """A tool's failure the model should read: its message becomes the `isError` result's text as is.

    Any other exception from a tool is a bug: its traceback goes to the log and, with
    `Server(mask_errors=True)`, the model sees only a generic message and a reference.
    """


class SessionExpired(ConnectionError):
    """A 404 to a request naming a 2025-era session over Streamable HTTP: the server ended it (or never knew
    it), and a client opens a new one (raised by `mcpcore.transports.remote`, caught by `mcpcore.client`)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"the server no longer knows session {session_id}")
        self.session_id = session_id


class InvalidParams(McpError):
    """The request's parameters are wrong (-32602), e.g. `raise InvalidParams("unknown city", {"city": c})`."""

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(INVALID_PARAMS, message, data)


class ResourceNotFound(McpError):
    """No resource or template matches a URI (-32602 on the modern wire, -32002 on the legacy one)."""

    def __init__(self, uri: str) -> None:
        super().__init__(INVALID_PARAMS, f"Resource not found: {uri}", {"uri": uri})


def invalid_params(message: str, data: Any = None) -> McpError:
    return InvalidParams(message, data)


def request_params(message: dict[str, Any]) -> dict[str, Any]:
    """A request's params: an object, or {} when absent (-32602 for anything else)."""
    params = message.get("params")
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise invalid_params("params must be a JSON object")
    return params


def missing_capability(required: dict[str, Any]) -> McpError:
    names = ", ".join(sorted(required))
    return McpError(
        MISSING_CLIENT_CAPABILITY,
        f"This request needs client capabilities the request did not declare: {names}",
        {"requiredCapabilities": required},
    )


def unsupported_version(requested: Any) -> McpError:
    """A `_meta` version this server does not serve per request (-32022).

    `supported` lists every version; the legacy ones are served after `initialize`.
    """
    message = "Unsupported protocol version"
    if requested in LEGACY_VERSIONS:
        message += f"; {requested} is served after an initialize handshake, not with per-request _meta"
    return McpError(UNSUPPORTED_VERSION, message, {"supported": list(SUPPORTED_VERSIONS), "requested": requested})


def is_request_id(value: Any) -> bool:
    """JSON-RPC ids this protocol allows: strings and integers, never null or bool."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


_ID_TYPES = frozenset({str, int})  # what a parsed request id is, when it is one (bool is a type of its own)

# Verdicts of `classify`.
REQUEST = "request"
NOTIFICATION = "notification"
RESPONSE = "response"


MAX_NESTING = 128  # levels of arrays and objects a message may nest; replies can then always be encoded


def too_deep(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether `value` nests arrays and objects deeper than `limit` (iterative: no recursion limit)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def classify(message: Any) -> str:
    """Say what a parsed message is, or raise `McpError(INVALID_REQUEST)`."""
    if (message.__class__ is dict and message.get("jsonrpc") == "2.0" and message.get("method").__class__ is str
            and message.get("id").__class__ in _ID_TYPES):  # a request, the commonest message: one look (parsed: exact types)
        return REQUEST
    if isinstance(message, list):
        raise McpError(INVALID_REQUEST, "Batch requests are not supported; send one message at a time")
    if not isinstance(message, dict):
        raise McpError(INVALID_REQUEST, "A JSON-RPC message must be a JSON object")
    if message.get("jsonrpc") != "2.0":
        raise McpError(INVALID_REQUEST, 'The "jsonrpc" member must be exactly "2.0"')
    if "method" not in message:
        if "id" in message and ("result" in message or "error" in message):
            return RESPONSE
        raise McpError(INVALID_REQUEST, 'A request needs a string "method" member')
    if not isinstance(message["method"], str):
        raise McpError(INVALID_REQUEST, 'The "method" member must be a string')
    if "id" not in message:
        return NOTIFICATION
    if message["id"].__class__ not in _ID_TYPES and not is_request_id(message["id"]):  # parsed ids: exact types
        raise McpError(INVALID_REQUEST, 'The "id" member must be a string or an integer')
    return REQUEST


def readable_id(message: Any) -> Any:
    """The message's id if it is a valid request id, else None (omitted on the wire)."""
    if isinstance(message, dict):
        value = message.get("id")
        if is_request_id(value):
            return value
    return None


_RESULT_HEAD = b'{"jsonrpc":"2.0","id":'


def encode_raw_result(request_id: Any, result_json: bytes) -> bytes:
    """Splice an already-serialized result into a response (cached list pages)."""
    return b"".join((_RESULT_HEAD, orjson.dumps(request_id), b',"result":', result_json, b"}"))


_TEXT_HEAD = b',"result":{"content":[{"type":"text","text":'


def encode_text_result(request_id: Any, text: str, tail: bytes) -> bytes:
    """A response whose result is one text block, then `tail`: the rest of the result and the
    response's closing brace (`}],"resultType":...}}`), prebuilt by its caller."""
    return b"".join((_RESULT_HEAD, orjson.dumps(request_id), _TEXT_HEAD, orjson.dumps(text), tail))


def encode_error(request_id: Any, error: McpError) -> bytes:
    """An error response; the id is omitted when it could not be read.

    The 2026-07-28 schema types `id` as string | integer, so "unknown id" is an
    absent member rather than JSON null.
    """
    message: dict[str, Any] = {"jsonrpc": "2.0"}
    if request_id is not None:
        message["id"] = request_id
    message["error"] = error.to_dict()
    return orjson.dumps(message)


def encode_notification(method: str, params: dict[str, Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": method, "params": params})
