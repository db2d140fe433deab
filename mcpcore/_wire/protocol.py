"""The protocol's fixed tables, each written once and immutable, and a request's `Route`.

A `Route` is the core's answer to "what is this request?", computed once per
request by `Dispatcher.route` and read by everyone after it: the HTTP
transport takes the `Mcp-Name` field and the `Mcp-Param-*` bindings from it,
both transports take `long_lived` to keep open subscriptions out of the
in-flight window, and the dispatcher takes the tool it already resolved. So no
transport reaches into a catalog and nothing is looked up twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from .jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    META_VERSION,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    RATE_LIMITED,
    UNSUPPORTED_VERSION,
)
from .toolheaders import HeaderParam

# The request param that `Mcp-Name` mirrors, by method.
NAME_FIELDS: Mapping[str, str] = MappingProxyType({"tools/call": "name", "prompts/get": "name", "resources/read": "uri"})

# The methods whose result may be `input_required` (multi round-trip requests).
INPUT_METHODS: frozenset[str] = frozenset({"tools/call", "prompts/get", "resources/read"})

# Requests that stay open until the server ends them: bounded by their own limit
# (`max_subscriptions`), never by the in-flight window.
LONG_LIVED_METHODS: frozenset[str] = frozenset({"subscriptions/listen"})

# Methods earlier revisions had, with what replaces them.
REMOVED_METHODS: Mapping[str, str] = MappingProxyType({
    "ping": "it was removed in protocol 2026-07-28",
    "logging/setLevel": "set io.modelcontextprotocol/logLevel in each request's _meta instead",
    "resources/subscribe": "open a subscriptions/listen stream instead",
    "resources/unsubscribe": "close the subscriptions/listen stream instead",
})

# The HTTP status of an error response sent as a plain JSON body; others are 200.
HTTP_STATUS: Mapping[int, int] = MappingProxyType({
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_VERSION: 400,
    METHOD_NOT_FOUND: 404,
    RATE_LIMITED: 429,
    INTERNAL_ERROR: 500,
})


def http_status(code: int | None) -> int:
    """The HTTP status of a response: 200 for a result, else by its JSON-RPC error code."""
    return 200 if code is None else HTTP_STATUS.get(code, 200)


@dataclass(frozen=True, slots=True)
class Route:
    """What one request is, as far as transports and the dispatcher need to know."""

    method: str
    name_field: str | None = None  # the param `Mcp-Name` mirrors (None: no Mcp-Name)
    header_params: tuple[HeaderParam, ...] = ()  # `Mcp-Param-*` headers and the arguments they mirror
    long_lived: bool = False  # stays open until the server ends it (subscriptions/listen)
    target: Any = None  # the tool a tools/call names, resolved once (None: unknown)


def claims_modern(message: dict[str, Any]) -> bool:
    """Whether a request or notification says in its `_meta` which protocol version it speaks.

    Only the stateless wire carries the version per request, so such a message is
    served statelessly whatever else it says (a legacy client never sends it).
    """
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and META_VERSION in meta


def method_route(method: str) -> Route:
    """The route of a method whose requests need no lookup (every method but a known tool's call)."""
    return Route(method, NAME_FIELDS.get(method), (), method in LONG_LIVED_METHODS)
