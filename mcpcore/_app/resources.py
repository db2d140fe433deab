"""Resources (static URIs) and resource templates (RFC 6570), and `resources/read`.

A resource function returns `str` (text), `bytes` (blob), an
`EmbeddedResource`, a list of those, or any JSON value (sent as JSON text).
Template functions receive the URI's variables as keyword arguments.
"""

from __future__ import annotations

import re
import typing
from typing import Any, Callable, Sequence

import orjson

from .._wire.icons import Icon, icons_to_wire
from .._wire.jsonrpc import invalid_params
from .._wire.uritemplate import UriTemplate
from .catalog import CacheHints
from .content import EmbeddedResource, _b64
from .context import Context
from .signature import FunctionInfo
from .typeschema import split_annotated


def _metadata(
    entry: dict[str, Any], name: str, title: str | None, description: str | None, mime_type: str | None,
    size: int | None = None, icons: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    entry["name"] = name
    if title:
        entry["title"] = title
    if description:
        entry["description"] = description
    if mime_type:
        entry["mimeType"] = mime_type
    if size is not None:
        entry["size"] = size
    if icons:
        entry["icons"] = icons
    return entry


class _Readable:
    info: FunctionInfo
    mime_type: str | None

    def contents(self, uri: str, value: Any) -> list[dict[str, Any]]:
        """A function's return value as `resources/read` contents."""
        embedded = isinstance(value, list) and value and all(isinstance(v, EmbeddedResource) for v in value)
        items = value if embedded else [value]  # an empty list is JSON `[]`, not "no contents"
        contents = []
        for item in items:
            if isinstance(item, EmbeddedResource):
                contents.append(item.contents())
                continue
            entry: dict[str, Any] = {"uri": uri}
            if isinstance(item, (bytes, bytearray)):
                entry["mimeType"] = self.mime_type or "application/octet-stream"
                entry["blob"] = _b64(bytes(item))
            elif isinstance(item, str):
                entry["mimeType"] = self.mime_type or "text/plain"
                entry["text"] = item
            else:
                entry["mimeType"] = self.mime_type or "application/json"
                entry["text"] = orjson.dumps(item, default=str).decode()
            contents.append(entry)
        return contents

    async def read(self, uri: str, variables: dict[str, str], context: Context) -> list[dict[str, Any]]:
        missing = [p.name for p in self.info.params if p.required and p.name not in variables]
        if missing:  # e.g. `search://q{?term}` read as `search://q`
            raise invalid_params(f"Resource URI {uri!r} gives no value for {', '.join(missing)}", {"uri": uri})
        value = await self.info.invoke_reporting(_from_text(self.info, uri, variables), context, f"Reading {uri!r}", {"uri": uri})
        return self.contents(uri, value)


_PARSERS: dict[Any, Callable[[str], Any]] = {
    int: lambda text: int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else _bad(),
    float: lambda text: float(text) if re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", text) else _bad(),
    bool: lambda text: {"true": True, "false": False}[text],
}


def _bad() -> Any:
    raise ValueError


def _from_text(info: FunctionInfo, uri: str, variables: dict[str, str]) -> dict[str, Any]:
    """URI variables are text; parameters hinted int, float or bool (or Optional of them) are parsed."""
    kwargs: dict[str, Any] = dict(variables)
    for param in info.params:
        if param.name not in variables:
            continue
        kind = split_annotated(param.hint)[0]
        members = [a for a in typing.get_args(kind) if a is not type(None)]
        kind = members[0] if len(members) == 1 else kind
        parse = _PARSERS.get(kind)
        if parse is not None:
            try:
                kwargs[param.name] = parse(variables[param.name])
            except (ValueError, KeyError):
                raise invalid_params(
                    f"URI variable {param.name!r} must be {kind.__name__}, got {variables[param.name]!r}", {"uri": uri}
                ) from None
    return kwargs


class Resource(_Readable):
    """A resource at one fixed URI."""

    def __init__(
        self,
        fn: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        cache: CacheHints | None = None,
        scopes: Sequence[str] = (),
        icons: Sequence[Icon | dict[str, Any]] = (),
    ) -> None:
        self.info = FunctionInfo(fn)
        self.scopes = tuple(scopes)  # what a caller's token needs, on an authenticated transport
        self.key = uri
        self.mime_type = mime_type
        self.cache = cache or CacheHints()
        self._entry = _metadata(
            {"uri": uri}, name or self.info.name, title, description or self.info.doc, mime_type, size,
            icons_to_wire(icons, f"resource {uri!r}"),
        )

    def describe(self) -> dict[str, Any]:
        return self._entry


class ResourceTemplate(_Readable):
    """A family of resources whose URIs match an RFC 6570 template."""

    def __init__(
        self,
        fn: Callable[..., Any],
        uri_template: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        cache: CacheHints | None = None,
        scopes: Sequence[str] = (),
        icons: Sequence[Icon | dict[str, Any]] = (),
    ) -> None:
        self.info = FunctionInfo(fn)
        self.scopes = tuple(scopes)  # what a caller's token needs, on an authenticated transport
        self.key = uri_template
        self.template = UriTemplate(uri_template)
        accepted = {p.name for p in self.info.params}
        missing = [v for v in self.template.variables if v not in accepted and not self.info.accepts_any]
        if missing:
            raise ValueError(f"resource template {uri_template!r}: {self.info.name}() has no parameter for {missing}")
        self.mime_type = mime_type
        self.cache = cache or CacheHints()
        self._entry = _metadata(
            {"uriTemplate": uri_template}, name or self.info.name, title, description or self.info.doc, mime_type,
            icons=icons_to_wire(icons, f"resource template {uri_template!r}"),
        )

    def describe(self) -> dict[str, Any]:
        return self._entry
