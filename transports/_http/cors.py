"""CORS for browser-based clients: the origins listed, the preflight's answer, the headers answers carry.

A browser lets a page read an answer from another origin only when the answer names
the page's origin (`Access-Control-Allow-Origin`), and before a request with headers
of its own (every MCP request) it asks with an `OPTIONS` preflight. `Cors` holds the
listed origins, each an exact `scheme://host[:port]` checked at start, with the
headers an answer to each carries built once. Credentials are not allowed: mcpcore
reads no cookie, and the bearer token goes in `Authorization`, a request header the
preflight allows like the others (ADR 41).
"""

from __future__ import annotations

import re
from typing import Mapping

from mcpcore._wire.jsonrpc import INVALID_REQUEST, McpError

from .rules import Rejection

Headers = list[tuple[bytes, bytes]]

# The request headers mcpcore reads: the MCP ones (Mcp-Method, Mcp-Name, Mcp-Param-*, Mcp-Session-Id,
# MCP-Protocol-Version), the resumption cursor, the token, the body's type, and the trace context.
ALLOWED_HEADERS = frozenset({"authorization", "content-type", "last-event-id", "traceparent", "tracestate", "baggage"})
ALLOWED_PREFIX = "mcp-"
ALLOWED_METHODS = ("GET", "POST", "DELETE")
EXPOSED_HEADERS = b"Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate, Retry-After"
MAX_AGE = "7200"  # seconds a browser may reuse a preflight's answer (the most Chromium keeps one)
VARY = (b"vary", b"origin")
ONLY_VARY: Headers = [VARY]  # an answer to any other request: it would differ for a listed Origin

_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<host>\[[0-9a-f:.]+\]|[a-z0-9_-]+(?:\.[a-z0-9_-]+)*)(?::(?P<port>[0-9]{1,5}))?",
                     re.IGNORECASE)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")  # a header name (RFC 9110 token), lower-cased
_DEFAULT_PORTS = {"http": 80, "https": 443}


def browser_origin(text: str) -> str:
    """`text` as a browser sends it in `Origin` (lower case, no default port); ValueError when it is no origin."""
    if text.strip() == "*":
        raise ValueError("a CORS origin of '*' is refused: the answers carry session ids and tool results, and a "
                         "listed origin also passes the Origin check that stops DNS rebinding; list each origin "
                         "(https://app.example)")
    found = _ORIGIN.fullmatch(text)
    port = None if found is None or found["port"] is None else int(found["port"])
    if found is None or port is not None and not 0 < port < 65536:
        raise ValueError(f"CORS origin {text!r} is not scheme://host[:port] with http or https and no path, "
                         "not even '/' (e.g. https://app.example or http://127.0.0.1:5173)")
    scheme, host = found["scheme"].lower(), found["host"].lower()
    return f"{scheme}://{host}" if port in (None, _DEFAULT_PORTS[scheme]) else f"{scheme}://{host}:{port}"


def _refused(message: str) -> Rejection:
    return Rejection(403, McpError(INVALID_REQUEST, message))


class Cors:
    """The listed origins, and what an answer adds for each."""

    def __init__(self, origins: tuple[str, ...]) -> None:
        self.origins = tuple(dict.fromkeys(browser_origin(origin) for origin in origins))
        self._answers: dict[str, Headers] = {
            origin: [(b"access-control-allow-origin", origin.encode()),
                     (b"access-control-expose-headers", EXPOSED_HEADERS), VARY]
            for origin in self.origins
        }

    def answer_headers(self, origin: str | None) -> Headers:
        """The headers every answer to a request with this `Origin` carries (`Vary` alone when it is not listed)."""
        if origin is None:
            return ONLY_VARY
        return self._answers.get(origin, ONLY_VARY)

    def preflight(self, headers: Mapping[str, str]) -> tuple[tuple[str, str], ...] | Rejection:
        """A preflight's answer headers (beside `answer_headers`), or its refusal (403)."""
        origin = headers.get("origin")
        if origin not in self._answers:
            if origin is None:
                return _refused("OPTIONS here answers CORS preflights, which need an Origin listed with --cors-origin")
            return _refused(f"Origin {origin!r} may not call this server from a browser: it is not listed with --cors-origin")
        method = headers.get("access-control-request-method")
        if method not in ALLOWED_METHODS:
            asked = "is missing" if method is None else f"{method!r} is not one of {', '.join(ALLOWED_METHODS)}"
            return _refused(f"OPTIONS here answers CORS preflights: Access-Control-Request-Method {asked}")
        answer = (("access-control-allow-methods", "GET, POST, DELETE, OPTIONS"), ("access-control-max-age", MAX_AGE))
        requested = [name.strip().lower() for name in headers.get("access-control-request-headers", "").split(",")]
        requested = [name for name in requested if name]
        for name in requested:
            if not (_TOKEN.fullmatch(name) and (name in ALLOWED_HEADERS or name.startswith(ALLOWED_PREFIX))):
                return _refused(f"the request header {name!r} is not allowed cross-origin")
        if requested:
            answer += (("access-control-allow-headers", ", ".join(requested)),)
        return answer
