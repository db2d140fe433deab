"""The Streamable HTTP validation ladder, as pure functions (no I/O, no event loop).

`check_head` runs the checks that need only the request line and headers (path,
method, Origin, Host, Content-Type, Accept, declared length), `check_route_head`
those of a custom route (Origin, Host, its methods, length), and `check_sse_head`
those of the deprecated HTTP+SSE transport's two paths; `check_body`
parses and classifies the body (`_calls.read_message` and `_calls.take_response`,
shared with stdio); and
`check_mcp_headers` compares the MCP request headers with the body, reading
the `Mcp-Name` field and `Mcp-Param-*` bindings from the request's `Route`.
Each returns a `Rejection` (status + JSON-RPC error) or None; statuses of
JSON-RPC errors come from the one table in `mcpcore._wire.protocol`.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Mapping
from urllib.parse import parse_qs, urlsplit

from mcpcore._runtime.defaults import HTTP_MAX_BODY_BYTES
from mcpcore._runtime.session import Session, Sessions
from mcpcore._wire.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_REQUEST,
    LEGACY_VERSIONS,
    META_VERSION,
    MODERN_VERSIONS,
    RESPONSE,
    McpError,
)
from mcpcore._wire.protocol import Route, claims_modern, http_status
from mcpcore.routes import CustomRoute

from .._calls import Inbound, Malformed, read_message, take_response

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

SENTINEL_PREFIX, SENTINEL_SUFFIX = "=?base64?", "?="
_INTEGER = re.compile(r"-?[0-9]+(\.0+)?")  # 42 and 42.0 compare equal; 4_2 or 4e1 never
_VISIBLE_ASCII = re.compile(r"[ -~\t]*")  # what a header value may hold without the base64 sentinel
# A Host header: `host[:port]` or `[v6][:port]`, the port in ASCII digits; nothing may follow.
_HOST_HEADER = re.compile(r"(?:\[(?P<v6>[^\]]*)\]|(?P<name>[^:\[\]]*))(?::(?P<port>[0-9]+))?")


@dataclass(frozen=True)
class Rejection:
    """An HTTP error answer: status, JSON-RPC error, extra headers."""

    status: int
    error: McpError
    request_id: Any = None
    headers: tuple[tuple[str, str], ...] = ()


def refusal(error: McpError, request_id: Any = None) -> Rejection:
    """An error answered with the HTTP status its code implies."""
    return Rejection(http_status(error.code), error, request_id)


def _reject(status: int, message: str, *headers: tuple[str, str]) -> Rejection:
    return Rejection(status, McpError(INVALID_REQUEST, message), None, headers)


@dataclass(frozen=True)
class Policy:
    """What the HTTP transport accepts; built once from its configuration."""

    path: str
    port: int
    loopback: bool
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)
    allowed_origins: frozenset[str] = field(default_factory=frozenset)
    max_body_bytes: int = HTTP_MAX_BODY_BYTES


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def public_bind_refusal(host: str, allowed_hosts: tuple[str, ...]) -> str | None:
    """Why a bind address may not be served as configured (None when it may)."""
    if is_loopback(host) or allowed_hosts:
        return None
    return (f"serving on {host} needs the host names clients use (--allow-host NAME, or "
            "HttpConfig(allowed_hosts=...)): without that list any site could reach this server through DNS rebinding")


def make_policy(
    host: str, port: int, path: str, allowed_hosts: tuple[str, ...] = (), allowed_origins: tuple[str, ...] = (),
    max_body_bytes: int = HTTP_MAX_BODY_BYTES,
) -> Policy:
    """A policy whose Host/Origin allow-lists start from the bind address."""
    loopback = is_loopback(host)
    hosts = {h.lower() for h in allowed_hosts}
    if loopback:
        hosts.update(LOOPBACK_NAMES)
    return Policy(path, port, loopback, frozenset(hosts), frozenset(o.rstrip("/").lower() for o in allowed_origins), max_body_bytes)


@lru_cache(maxsize=256)
def _host_allowed(policy: Policy, value: str) -> bool:
    found = _HOST_HEADER.fullmatch(value)
    if found is None:
        return False
    host = (found["v6"] if found["v6"] is not None else found["name"]).lower()
    if host not in policy.allowed_hosts:
        return False
    port = found["port"]
    return port is None or port == str(policy.port) or not policy.loopback


@lru_cache(maxsize=256)
def _origin_allowed(policy: Policy, origin: str, host_header: str | None) -> bool:
    normalized = origin.rstrip("/").lower()
    if normalized in policy.allowed_origins:
        return True
    try:
        parts = urlsplit(normalized)
        hostname = parts.hostname
    except ValueError:  # e.g. "http://[::1": not a URL at all
        return False
    if parts.scheme not in ("http", "https") or not hostname:
        return False
    if policy.loopback and is_loopback(hostname):
        return True
    return host_header is not None and parts.netloc == host_header.lower()


def _media_types(value: str) -> list[tuple[str, float]]:
    ranges = []
    for item in value.split(","):
        media, *params = (p.strip() for p in item.split(";"))
        quality = 1.0
        for param in params:
            key, _, number = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(number)
                except ValueError:
                    quality = 0.0
        ranges.append((media.lower(), quality))
    return ranges


def _accepts(ranges: list[tuple[str, float]], media: str) -> bool:
    kind = media.split("/")[0]
    best = None  # the most specific matching range decides
    for candidate, quality in ranges:
        rank = 3 if candidate == media else 2 if candidate == f"{kind}/*" else 1 if candidate == "*/*" else 0
        if rank and (best is None or rank > best[0]):
            best = (rank, quality)
    return best is not None and best[1] > 0


@lru_cache(maxsize=64)  # clients repeat the same few header values
def _is_json(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() == "application/json"


@lru_cache(maxsize=64)
def _accepts_both(accept: str) -> bool:
    ranges = _media_types(accept)
    return _accepts(ranges, "application/json") and _accepts(ranges, "text/event-stream")


def _declares_more(length: str, limit: int) -> bool:
    """Whether a Content-Length declares more than `limit` bytes.

    Only ASCII digits are a length (h11 refuses anything else, "²" included); any
    number of them is compared, as `int()` refuses more than 4,300.
    """
    if not (length.isascii() and length.isdigit()):
        return False
    digits = length.lstrip("0")
    return len(digits) > len(str(limit)) or int(digits or "0") > limit


def check_origin_and_host(policy: Policy, headers: Mapping[str, str]) -> Rejection | None:
    """The DNS-rebinding checks every path but the probes and the metadata gets."""
    host = headers.get("host")
    origin = headers.get("origin")
    if origin is not None and not _origin_allowed(policy, origin, host):
        return _reject(403, f"Origin {origin!r} is not allowed")
    if policy.allowed_hosts and (host is None or not _host_allowed(policy, host)):
        return _reject(421, f"Host {host!r} is not served here")
    return None


def _too_long(policy: Policy, headers: Mapping[str, str]) -> Rejection | None:
    """413 when the request declares a body over the limit."""
    length = headers.get("content-length")
    if length is not None and _declares_more(length, policy.max_body_bytes):
        return _reject(413, f"Body exceeds the limit of {policy.max_body_bytes} bytes")
    return None


def check_route_head(policy: Policy, method: str, route: CustomRoute, headers: Mapping[str, str]) -> Rejection | None:
    """A custom route's checks: Origin and Host, its methods, the declared length."""
    refused = check_origin_and_host(policy, headers)
    if refused is not None:
        return refused
    if method not in route.methods:
        return _reject(405, f"Method {method} is not allowed on {route.path}", ("allow", ", ".join(route.methods)))
    return _too_long(policy, headers)


def check_sse_head(policy: Policy, method: str, stream: bool, headers: Mapping[str, str]) -> Rejection | None:
    """The HTTP+SSE transport's checks: GET on its stream path (`stream`), POST on its message path; then
    Origin and Host, and for a message Content-Type and the declared length, as on the MCP endpoint. No
    Accept: the answer is the stream, or 202 with no body."""
    allowed = "GET" if stream else "POST"
    if method != allowed:
        why = "GET opens an HTTP+SSE session's stream" if stream else "POST each message of an HTTP+SSE session"
        return _reject(405, f"Method {method} is not allowed here: {why}", ("allow", allowed))
    refused = check_origin_and_host(policy, headers)
    if refused is not None or stream:
        return refused
    if not _is_json(headers.get("content-type", "")):
        return _reject(415, "Content-Type must be application/json")
    return _too_long(policy, headers)


def check_head(policy: Policy, method: str, target: str, headers: Mapping[str, str]) -> Rejection | None:
    """The checks that need no body, in the transport's order."""
    if target.split("?", 1)[0] != policy.path:
        return Rejection(404, McpError(INVALID_REQUEST, f"Not found: the MCP endpoint is {policy.path}"))
    if method not in ("POST", "GET", "DELETE"):
        message = f"Method {method} is not allowed: POST JSON-RPC messages; GET and DELETE serve 2025-era sessions"
        return _reject(405, message, ("allow", "GET, POST, DELETE"))
    refused = check_origin_and_host(policy, headers)
    if refused is not None:
        return refused
    if method == "DELETE":
        return None
    if method == "GET":
        if not _accepts(_media_types(headers.get("accept", "")), "text/event-stream"):
            return _reject(406, "Accept must include text/event-stream for the GET stream")
        return None
    if not _is_json(headers.get("content-type", "")):
        return _reject(415, "Content-Type must be application/json")
    if not _accepts_both(headers.get("accept", "")):
        return _reject(406, "Accept must include application/json and text/event-stream")
    return _too_long(policy, headers)


def check_body(body: bytes | bytearray, session: Session | None = None) -> Inbound | Rejection:
    """A request or notification to serve, a response delivered to `session`, or the refusal to send."""
    inbound = read_message(body)
    if isinstance(inbound, Malformed):
        return refusal(inbound.error, inbound.request_id)
    if inbound.kind == RESPONSE:
        problem = take_response(inbound.message, session)
        if problem is not None:
            return refusal(problem)
    return inbound


def is_legacy(message: dict[str, Any], headers: Mapping[str, str]) -> bool:
    """Which wire a request or notification is on: the body decides first.

    A `_meta` version claim is modern whatever the headers; `initialize` without
    one is legacy; otherwise a 2026 `MCP-Protocol-Version` header is modern (so a
    request missing its `_meta` still gets -32602) and a legacy or missing one legacy.
    """
    if claims_modern(message):
        return False
    return message.get("method") == "initialize" or headers.get("mcp-protocol-version") not in MODERN_VERSIONS


def unsupported_legacy_version(version: str, request_id: Any) -> Rejection:
    """400 for an `MCP-Protocol-Version` no 2025-era session speaks."""
    why = f"Unsupported MCP-Protocol-Version {version!r}; use one of {', '.join(LEGACY_VERSIONS)}"
    return Rejection(400, McpError(INVALID_REQUEST, why), request_id)


def legacy_session(
    headers: Mapping[str, str], sessions: Sessions, request_id: Any = None, principal: str | None = None
) -> Session | Rejection:
    """The live session a legacy message names (400 without `Mcp-Session-Id`; 404 once it ended,
    when another principal than the one that opened it asks, or for an HTTP+SSE session's id)."""
    version = headers.get("mcp-protocol-version")
    if version in MODERN_VERSIONS:
        why = f"GET and DELETE serve 2025-era sessions; protocol {version} has none (POST each request instead)"
        return Rejection(400, McpError(INVALID_REQUEST, why), request_id)
    if version is not None and version not in LEGACY_VERSIONS:
        return unsupported_legacy_version(version, request_id)
    session_id = headers.get("mcp-session-id")
    if session_id is None:
        return Rejection(400, McpError(INVALID_REQUEST, "The Mcp-Session-Id header is required: open a session with initialize first"), request_id)
    session = sessions.get(session_id)
    if session is None or session.principal != principal or session.inbox is not None:  # inbox: an HTTP+SSE one
        return Rejection(404, McpError(INVALID_REQUEST, "Session not found: it ended or expired; send initialize to open a new one"), request_id)
    return session


def sse_session_id(target: str) -> str | Rejection:
    """The session an HTTP+SSE message URL names (`?session_id=`; 400 without one)."""
    found = parse_qs(target.partition("?")[2]).get("session_id")
    if not found:
        why = "The session_id query parameter is required: POST to the URL the stream's endpoint event named"
        return Rejection(400, McpError(INVALID_REQUEST, why))
    return found[0]


def sse_session_gone() -> Rejection:
    """404 for an HTTP+SSE session that ended or expired, never existed, or belongs to another principal."""
    why = "Session not found: it ended or expired; open a new stream with GET on the HTTP+SSE stream path"
    return Rejection(404, McpError(INVALID_REQUEST, why))


def sse_session(session_id: str, sessions: Sessions, principal: str | None) -> Session | Rejection:
    """The live HTTP+SSE session a message names, held by this process (404 as `sse_session_gone` says)."""
    session = sessions.get(session_id)
    if session is None or session.principal != principal or session.inbox is None:
        return sse_session_gone()
    return session


def decode_header_value(value: str) -> str:
    """A header value with the `=?base64?...?=` sentinel decoded (ValueError if invalid)."""
    if value.startswith(SENTINEL_PREFIX) and value.endswith(SENTINEL_SUFFIX) and len(value) >= 11:
        encoded = value[len(SENTINEL_PREFIX) : -len(SENTINEL_SUFFIX)]
        try:
            return base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise ValueError("is not valid base64 of UTF-8 text") from None
    if not _VISIBLE_ASCII.fullmatch(value):
        raise ValueError("has characters outside visible ASCII; encode it as =?base64?...?=")
    return value


def _mismatch(message: str, request_id: Any) -> Rejection:
    return Rejection(400, McpError(HEADER_MISMATCH, message), request_id)


def _differs(problem: str) -> str:
    return f"Header mismatch: {problem}"


def _missing(header: str, why: str) -> str:
    """A required MCP header that is absent: said as missing (not as a disagreement), naming it."""
    return f"Missing header {header}: {why}"


def _same_value(kind: str, header: str, value: Any) -> bool:
    if kind == "boolean":
        return isinstance(value, bool) and header == ("true" if value else "false")
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if not _INTEGER.fullmatch(header):
            return False
        digits = header.split(".")[0]
        if len(digits.lstrip("-")) > 400:  # far beyond any JSON number; int() would refuse past 4,300 digits
            return False
        return int(digits) == value
    return isinstance(value, str) and header == value


def _disagreement(
    headers: Mapping[str, str], name: str, what: str, value: Any, same: Callable[[str, Any], bool]
) -> str | None:
    """Why header `name` does not mirror `value` (the body's `what`), or None when it does."""
    header = headers.get(name.lower())
    if value is None:
        return None if header is None else _differs(f"{name} is present but {what} is not")
    if header is None:
        return _missing(name, f"it is required when {what} is given")
    try:
        decoded = decode_header_value(header)
    except ValueError as error:
        return _differs(f"{name} {error}")
    return None if same(decoded, value) else _differs(f"{name} {decoded!r} differs from {what} {value!r}")


def check_mcp_headers(
    headers: Mapping[str, str], message: dict[str, Any], route: Route, repeated: frozenset[str] = frozenset()
) -> Rejection | None:
    """Header/body agreement for a request (-32020 when they disagree; a repeated MCP header never agrees)."""
    request_id = message["id"]
    if repeated:
        twice = sorted(name for name in repeated if name.startswith("mcp-"))
        if twice:
            return _mismatch(_differs(f"the {twice[0]} header came more than once; send each MCP header once"), request_id)
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    body_version = meta.get(META_VERSION) if isinstance(meta, dict) else None
    version = headers.get("mcp-protocol-version")
    if version is None:
        return _mismatch(_missing("MCP-Protocol-Version", "every request sends the protocol version it speaks"), request_id)
    if isinstance(body_version, str) and version != body_version:
        return _mismatch(_differs(f"MCP-Protocol-Version {version!r} differs from _meta protocolVersion {body_version!r}"),
                         request_id)
    method = headers.get("mcp-method")
    if method is None:
        return _mismatch(_missing("Mcp-Method", "every request sends its method"), request_id)
    if method != message["method"]:
        return _mismatch(_differs(f"the Mcp-Method header {method!r} differs from the body's method {message['method']!r}"),
                         request_id)
    field_name = route.name_field
    if field_name is not None:
        body_name = params.get(field_name)
        problem = _disagreement(
            headers, "Mcp-Name", f"params.{field_name}", body_name if isinstance(body_name, str) else None,
            lambda decoded, value: decoded == value,
        )
        if problem:
            return _mismatch(problem, request_id)
    arguments = params.get("arguments")
    for param in route.header_params:
        what = f"argument {'.'.join(param.path)!r}"
        problem = _disagreement(
            headers, f"Mcp-Param-{param.header}", what, param.value_in(arguments),
            lambda decoded, value, kind=param.kind: _same_value(kind, decoded, value),
        )
        if problem:
            return _mismatch(problem, request_id)
    return None
