"""An ordered, changeable collection of tools, prompts, resources or templates.

Items list in registration order (deterministic across runs). Each list page
is serialized once and reused until the collection changes; cursors are opaque
base64 offsets. Cache hints: a page's `ttlMs` is the smallest of its items',
and the list is `public` only when every item is. A list filtered for its caller
(by OAuth scope) is built per request, and private. A `View` (a client without MCP
Apps, `apps.py`) shows some items, described its own way; its pages are cached too.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Callable, Generic, Iterator, Protocol, TypeVar

import orjson

from .._wire.jsonrpc import invalid_params


class CacheHints:
    """Per-item or per-server caching hints (`ttlMs`, `cacheScope`)."""

    __slots__ = ("ttl_ms", "cache_scope")

    def __init__(self, ttl_ms: int | None = None, cache_scope: str | None = None) -> None:
        if ttl_ms is not None and (not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool) or ttl_ms < 0):
            raise ValueError(f"ttl_ms must be an integer >= 0, not {ttl_ms!r}")
        if cache_scope not in (None, "public", "private"):
            raise ValueError(f"cache_scope must be 'public' or 'private', not {cache_scope!r}")
        self.ttl_ms = ttl_ms
        self.cache_scope = cache_scope

    def over(self, default: "CacheHints") -> "CacheHints":
        """These hints with gaps filled from `default`."""
        return CacheHints(
            default.ttl_ms if self.ttl_ms is None else self.ttl_ms,
            default.cache_scope if self.cache_scope is None else self.cache_scope,
        )


class Item(Protocol):
    key: str
    cache: CacheHints
    scopes: tuple[str, ...]

    def describe(self) -> dict[str, Any]: ...


T = TypeVar("T", bound=Item)


class View(Protocol):
    """How a list appears to one kind of caller: which items it shows, and how each is described.
    Its pages are cached under `key` until the collection changes, like the full list's."""

    key: str

    def shows(self, item: Any) -> bool: ...

    def describe(self, item: Any) -> dict[str, Any]: ...


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o{offset}".encode()).decode()


def decode_cursor(cursor: Any) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
        if text[0] == "o" and text[1:].isdigit():
            return int(text[1:])
    except (AttributeError, ValueError, IndexError, binascii.Error, UnicodeError):
        pass
    raise invalid_params("Invalid cursor: pass back a nextCursor value unchanged", {"cursor": cursor})


class Catalog(Generic[T]):
    """Items of one kind, keyed by name or URI, with cached list pages."""

    def __init__(self, field: str, page_size: int, defaults: CacheHints, on_change: Callable[[], None]) -> None:
        self.field = field
        self.page_size = page_size
        self.defaults = defaults
        self._items: dict[str, T] = {}
        self._pages: list[bytes] | None = None
        self._views: dict[str, tuple[int, list[bytes]]] = {}  # view key → (items it shows, its pages)
        self._scoped = False  # whether an item needs a scope (with _pages: both are rebuilt on a change)
        self._on_change = on_change

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items.values()))

    def get(self, key: str) -> T | None:
        return self._items.get(key)

    def add(self, item: T) -> T:
        self._items[item.key] = item
        self._changed()
        return item

    def remove(self, key: str) -> T:
        try:
            item = self._items.pop(key)
        except KeyError:
            raise KeyError(f"no {self.field[:-1]} named {key!r}") from None
        self._changed()
        return item

    def _changed(self) -> None:
        self._pages = None
        self._views = {}
        self._on_change()

    def page(
        self, cursor: Any, result_meta: dict[str, Any], shown: Callable[[T], bool] | None = None, view: View | None = None
    ) -> bytes:
        """The serialized list result for a cursor (None for the first page). `shown`, when given, says
        which items the caller may see: a list with scoped items is then built for the request, its
        cursors offsets into what the caller sees, and private (it varies by caller). `view`, when given,
        is how the list appears to this caller (`View`)."""
        if self._pages is None:
            items = list(self._items.values())
            scope = self._scope(items)
            self._scoped = any(item.scopes for item in items)
            self._pages = [self._render(items, start, scope, result_meta) for start in range(0, max(len(items), 1), self.page_size)]
        if shown is not None and self._scoped:
            visible = [item for item in self._items.values() if shown(item) and (view is None or view.shows(item))]
            return self._render(visible, self._start(cursor, len(visible)), "private", result_meta, view)
        if view is None:
            return self._pages[self._start(cursor, len(self._items)) // self.page_size]
        if view.key not in self._views:
            items = [item for item in self._items.values() if view.shows(item)]
            scope = self._scope(items)
            self._views[view.key] = (len(items), [self._render(items, start, scope, result_meta, view)
                                                   for start in range(0, max(len(items), 1), self.page_size)])
        count, pages = self._views[view.key]
        return pages[self._start(cursor, count) // self.page_size]

    def _start(self, cursor: Any, count: int) -> int:
        """The offset a cursor names in a list of `count` items (0 for no cursor)."""
        if cursor is None:
            return 0
        offset = decode_cursor(cursor)
        if offset % self.page_size or (offset and offset >= count):
            raise invalid_params("Invalid cursor: it does not point into this list", {"cursor": cursor})
        return offset

    def _scope(self, items: list[T]) -> str | None:
        """The list's `cacheScope`, the same on every page: `public` only when every item is."""
        hints = [item.cache.over(self.defaults) for item in items]
        if hints and all(h.cache_scope == "public" for h in hints):
            return "public"
        return "private" if hints else self.defaults.cache_scope

    def _render(
        self, items: list[T], start: int, scope: str | None, result_meta: dict[str, Any], view: View | None = None
    ) -> bytes:
        """The page of `items` from `start` (each described by `view`, if any); its `ttlMs` the smallest of its items'."""
        chunk = items[start : start + self.page_size]
        hints = [item.cache.over(self.defaults) for item in chunk]
        ttl = min((h.ttl_ms for h in hints if h.ttl_ms is not None), default=self.defaults.ttl_ms or 0)
        described = [view.describe(i) for i in chunk] if view else [i.describe() for i in chunk]
        result: dict[str, Any] = {"resultType": "complete", self.field: described}
        if start + self.page_size < len(items):
            result["nextCursor"] = encode_cursor(start + self.page_size)
        result.update(ttlMs=ttl, cacheScope=scope, _meta=result_meta)
        return orjson.dumps(result)
