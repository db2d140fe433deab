"""A few plain HTTP routes beside the MCP endpoint: `@server.custom_route("/version")`.

For small needs (a version string, a webhook that announces a change), not a web
framework: one exact path, its methods, a function of an `HttpRequest` returning an
`HttpResponse` (or a dict or list, sent as JSON). Both HTTP transports serve them, the
built-in server and the ASGI adapter, after the `Host` and `Origin` checks and within
the body limit; with `Server(auth=...)` a route needs a valid token like the endpoint
does unless it is `public=True`. Anything larger belongs in an ASGI app that mounts
mcpcore (`mcpcore.asgi`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Sequence, Union

import orjson

if TYPE_CHECKING:
    from .auth import AccessToken

__all__ = ["CustomRoute", "HttpRequest", "HttpResponse"]


@dataclass(frozen=True)
class HttpRequest:
    """What a custom route's function gets: the request as it arrived."""

    method: str
    path: str
    query: str  # after the `?`, undecoded ("" without one)
    headers: Mapping[str, str]  # lower-case names
    body: bytes
    peer: tuple[Any, ...] | None = None
    auth: AccessToken | None = None  # the verified token, with `Server(auth=...)` on a non-public route

    def json(self) -> Any:
        """The body parsed as JSON (`orjson.JSONDecodeError`, a `ValueError`, when it is not)."""
        return orjson.loads(self.body)


@dataclass(frozen=True)
class HttpResponse:
    """What a custom route answers. A str body is sent as text/plain, bytes as application/octet-stream,
    anything else as JSON, unless `content_type` says otherwise."""

    body: Any = b""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.status, int) or isinstance(self.status, bool) or not 200 <= self.status <= 599:
            raise ValueError(f"a custom route answers with a status from 200 to 599, not {self.status!r}")
        if self.status in (204, 304) and self.body not in (b"", "", None):
            raise ValueError(f"a {self.status} answer has no body")

    def encoded(self) -> tuple[bytes, str]:
        """The body as bytes and its content type."""
        if self.body is None:
            return b"", self.content_type or "application/octet-stream"
        if isinstance(self.body, (bytes, bytearray)):
            return bytes(self.body), self.content_type or "application/octet-stream"
        if isinstance(self.body, str):
            return self.body.encode(), self.content_type or "text/plain; charset=utf-8"
        return orjson.dumps(self.body), self.content_type or "application/json"


RouteFunction = Callable[[HttpRequest], Union[HttpResponse, Any, Awaitable[Any]]]


@dataclass(frozen=True)
class CustomRoute:
    path: str
    fn: RouteFunction
    methods: tuple[str, ...]
    public: bool
    is_async: bool  # read once, at registration
    @staticmethod
    def answer(value: Any) -> HttpResponse:
        """What a route function returned, as a response (a dict or list is a 200 JSON body)."""
        return value if isinstance(value, HttpResponse) else HttpResponse(value)


def custom_route(path: str, fn: RouteFunction, methods: Sequence[str], public: bool, taken: Sequence[str]) -> CustomRoute:
    """A checked route: an absolute path, not one already taken, and known methods."""
    if not path.startswith("/") or "?" in path or "#" in path:
        raise ValueError(f"a custom route's path must be an absolute path without query or fragment, not {path!r}")
    if path in taken:
        raise ValueError(f"the path {path!r} is already a custom route")
    upper = tuple(dict.fromkeys(m.upper() for m in methods))
    unknown = [m for m in upper if m not in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")]
    if not upper or unknown:
        raise ValueError(f"a custom route needs HTTP methods; not {list(methods)!r}")
    if "GET" in upper and "HEAD" not in upper:
        upper += ("HEAD",)
    return CustomRoute(path, fn, upper, public, inspect.iscoroutinefunction(fn))
