"""Content blocks a tool or prompt can return, and the conversion of return values.

`Image`, `Audio`, `EmbeddedResource` and `ResourceLink` are small value types;
`to_content` turns whatever a function returned into a list of MCP content
blocks; `ToolResult` gives full control over a `tools/call` result.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import orjson


def _read_file(path: str) -> tuple[bytes, str]:
    """A file's bytes and its guessed MIME type."""
    import mimetypes

    with open(path, "rb") as file:
        return file.read(), mimetypes.guess_type(str(path))[0] or "application/octet-stream"


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


@dataclass(frozen=True)
class Image:
    """Image content: raw bytes (or base64 text) and a MIME type."""

    data: bytes | str
    mime_type: str = "image/png"

    @classmethod
    def from_file(cls, path: str) -> "Image":
        return cls(*_read_file(path))

    def to_block(self) -> dict[str, Any]:
        return {"type": "image", "data": _b64(self.data), "mimeType": self.mime_type}


@dataclass(frozen=True)
class Audio:
    """Audio content: raw bytes (or base64 text) and a MIME type."""

    data: bytes | str
    mime_type: str = "audio/wav"

    @classmethod
    def from_file(cls, path: str) -> "Audio":
        return cls(*_read_file(path))

    def to_block(self) -> dict[str, Any]:
        return {"type": "audio", "data": _b64(self.data), "mimeType": self.mime_type}


@dataclass(frozen=True)
class EmbeddedResource:
    """A resource's contents embedded in a result: give `text` or `blob`."""

    uri: str
    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None

    def contents(self) -> dict[str, Any]:
        item: dict[str, Any] = {"uri": self.uri}
        if self.mime_type:
            item["mimeType"] = self.mime_type
        if self.blob is not None:
            item["blob"] = _b64(self.blob)
        else:
            item["text"] = self.text or ""
        return item

    def to_block(self) -> dict[str, Any]:
        return {"type": "resource", "resource": self.contents()}


@dataclass(frozen=True)
class ResourceLink:
    """A link to a resource the client may read later."""

    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None

    def to_block(self) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        if self.description:
            block["description"] = self.description
        if self.mime_type:
            block["mimeType"] = self.mime_type
        return block


@dataclass
class ToolResult:
    """A complete `tools/call` result, for when the defaults are not enough."""

    content: list[Any] = field(default_factory=list)
    structured: Any = None
    is_error: bool = False

    def to_result(self) -> dict[str, Any]:
        result: dict[str, Any] = {"content": to_content(self.content)}
        if self.structured is not None:
            result["structuredContent"] = self.structured
        if self.is_error:
            result["isError"] = True
        return result


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})


def _is_block(value: Any) -> bool:
    """A dict that already is an MCP content block (by its `type`)."""
    return isinstance(value, dict) and value.get("type") in CONTENT_TYPES


def to_content(value: Any) -> list[dict[str, Any]]:
    """Return values to content blocks: str → text, helpers → their block,
    dicts with a `type` pass through, lists are converted item by item,
    None → no content, anything else → its JSON as text."""
    if value is None:
        return []
    if isinstance(value, str):
        return [text_block(value)]
    if hasattr(value, "to_block"):
        return [value.to_block()]
    if _is_block(value):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(
        isinstance(v, str) or hasattr(v, "to_block") or _is_block(v) for v in value
    ):
        return [block for item in value for block in to_content(item)]
    return [text_block(orjson.dumps(value, default=str).decode())]
