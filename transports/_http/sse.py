"""Server-Sent Events framing: one JSON-RPC message per `message` event."""

from __future__ import annotations


def sse_event(message: bytes, event_id: str | None = None) -> bytes:
    """One SSE event; each line of the payload becomes a `data:` line; `event_id` makes it resumable."""
    if b"\n" in message or b"\r" in message:
        lines = message.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        data = b"".join(b"data: " + line + b"\n" for line in lines)
    else:
        data = b"data: " + message + b"\n"
    head = b"event: message\n" if event_id is None else b"id: " + event_id.encode() + b"\nevent: message\n"
    return head + data + b"\n"


def sse_priming(event_id: str, retry_ms: int) -> bytes:
    """The first event of a resumable stream: an id to resume from, no data, and the reconnect delay."""
    return b"id: " + event_id.encode() + b"\nretry: " + str(retry_ms).encode() + b"\ndata: \n\n"


def sse_comment(text: bytes = b"keep-alive") -> bytes:
    """A comment line; clients ignore it, proxies see traffic."""
    return b": " + text + b"\n\n"


def sse_endpoint(uri: str) -> bytes:
    """The first event of an HTTP+SSE (2024-11-05) stream: the URI the client POSTs its messages to."""
    return b"event: endpoint\ndata: " + uri.encode() + b"\n\n"
