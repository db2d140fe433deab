"""`mcpcore proxy URL`: the upstream is a remote server, reached over Streamable HTTP or HTTP+SSE.

Which of the two it serves is asked each time it is (re)connected, unless `--upstream-transport` says:
a POST to the URL answered 404 or 405 means HTTP+SSE (the specification's backwards-compatibility
rule), and the client then opens its stream with a GET there. The headers sent with every request
upstream come from `--upstream-header 'Name: value'` and, so that a secret need not be in argv (or
in a client's configuration file beside the command), from `MCPCORE_UPSTREAM_HEADERS`, one
`Name: value` per line.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Mapping
from urllib.parse import urlsplit

from .._wire.jsonrpc import LEGACY_VERSIONS
from ..client import Client

__all__ = ["HEADERS_VARIABLE", "TRANSPORTS", "RemoteUpstream", "is_url", "upstream_headers"]

HEADERS_VARIABLE = "MCPCORE_UPSTREAM_HEADERS"
TRANSPORTS = ("auto", "streamable-http", "sse")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_OWN_HEADERS = {"host", "content-length", "content-type", "accept", "connection", "transfer-encoding"}


def is_url(text: str) -> bool:
    """Whether `text` is an http:// or https:// URL with a host (what `proxy URL` takes)."""
    parts = urlsplit(text)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def upstream_headers(given: Iterable[str], environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The headers for the upstream: `MCPCORE_UPSTREAM_HEADERS`' lines, then the command line's (which win).
    A malformed one, or one mcpcore sets itself, is a `ValueError` naming it (never its value: it may be a secret)."""
    lines = [(line, HEADERS_VARIABLE) for line in environ.get(HEADERS_VARIABLE, "").splitlines() if line.strip()]
    headers: dict[str, str] = {}
    for line, where in [*lines, *((text, "--upstream-header") for text in given)]:
        name, colon, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not colon:
            raise ValueError(f"{where}: a header is 'Name: value'; one has no ':'")
        if not _TOKEN.fullmatch(name):
            raise ValueError(f"{where}: {name[:60]!r} is not a header name")
        if not value or not value.isprintable():
            raise ValueError(f"{where}: the value of {name} is not text on one line")
        lowered = name.lower()
        if lowered in _OWN_HEADERS or lowered.startswith("mcp-"):
            raise ValueError(f"{where}: {name} is set by mcpcore itself")
        headers[lowered] = value
    return headers


class RemoteUpstream:
    """A fresh client for the upstream at `url` each time the gateway (re)connects (`Gateway(connect)`)."""

    def __init__(self, url: str, headers: Mapping[str, str], transport: str = "auto") -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f"the upstream transport is one of {', '.join(TRANSPORTS)}, not {transport!r}")
        self.url, self.headers, self.transport = url, dict(headers), transport

    async def __call__(self) -> Client:
        transport = self.transport
        if transport == "auto":
            from ..transports.remote import transport_at

            transport = await transport_at(self.url, self.headers)
        if transport == "sse":  # a 2025-era session, as the transport carries: the newest such version is asked
            return Client.sse(self.url, headers=self.headers, era=LEGACY_VERSIONS[0])
        return Client.http(self.url, headers=self.headers)
