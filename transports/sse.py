"""Server-Sent Events framing: one JSON-RPC message per `message` event."""

from __future__ import annotations


def sse_event(message: bytes) -> bytes:
    """One SSE event; each line of the payload becomes a `data:` line."""
    if b"\n" in message or b"\r" in message:
        lines = message.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        data = b"".join(b"data: " + line + b"\n" for line in lines)
    else:
        data = b"data: " + message + b"\n"
    return b"event: message\n" + data + b"\n"


def sse_comment(text: bytes = b"keep-alive") -> bytes:
    """A comment line; clients ignore it, proxies see traffic."""
    return b": " + text + b"\n\n"
