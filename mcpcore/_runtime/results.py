"""Results that fit the client: a tool result over its budget becomes its first part plus a link to the rest.

Clients cap what they accept (one popular coding client refuses tool results over about 25,000
tokens). A tool with a budget (`Server(result_budget=...)`, `@server.tool(result_budget=...)`) has
its result measured as the JSON bytes of its `content` (a token budget is read as 4 bytes a token);
over the budget the result keeps the blocks that fit, then the text of the next one cut at a
character boundary, a short note, and a `resource_link` to the rest. The rest is cut into pages of
the same budget, kept (`ResultStore`: this process's bounded LRU, or Redis) for `ttl` seconds, and
`resources/read` of `mcpcore-result://<id>/<page>` returns a page to the principal that made it
(anyone else is told the URI is unknown). A binary block (image, audio, embedded resource) is never
cut: one too large for any page is replaced by a link to a page of its own. A structured result
cannot be cut without breaking its schema: over the budget it becomes a tool error naming the budget.
"""

from __future__ import annotations

import collections
import secrets
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import orjson

SCHEME = "mcpcore-result://"
BYTES_PER_TOKEN = 4  # a token budget's estimate: about 4 bytes of English or JSON per token (no tokenizer)
MIN_BUDGET_BYTES = 1024  # smaller leaves no room for the note and link beside the content
_ID_BYTES = 16  # 128 random bits: an id cannot be guessed (it is the whole secret of an unauthenticated caller)
_SIZE_WIDTH = 10**15  # a stand-in for the rest's size while the link's room is measured


@dataclass(frozen=True)
class ResultBudget:
    """A tool result's budget: `bytes` of JSON content, or `tokens` (estimated as 4 bytes each)."""

    bytes: int | None = None
    tokens: int | None = None

    def __post_init__(self) -> None:
        if (self.bytes is None) == (self.tokens is None):
            raise ValueError("a result budget is in bytes or in tokens: give exactly one")
        if self.limit < MIN_BUDGET_BYTES:
            raise ValueError(f"a result budget must be at least {MIN_BUDGET_BYTES} bytes "
                             f"({MIN_BUDGET_BYTES // BYTES_PER_TOKEN} tokens)")

    @property
    def limit(self) -> int:
        """The budget in bytes."""
        return self.bytes if self.bytes is not None else self.tokens * BYTES_PER_TOKEN  # type: ignore[operator]


def budget_bytes(budget: ResultBudget | int | bool | None) -> int | None | bool:
    """A `result_budget=` as bytes: an int is bytes; None stays None (the server's); False stays False (off)."""
    if budget is None or budget is False:
        return budget
    if budget is True:
        raise ValueError("result_budget is a number of bytes, a ResultBudget, None (the server's) or False (off)")
    if isinstance(budget, int):
        budget = ResultBudget(bytes=budget)
    if not isinstance(budget, ResultBudget):
        raise TypeError(f"result_budget is a number of bytes or a ResultBudget, not {budget!r}")
    return budget.limit


def parse_budget(text: str) -> ResultBudget:
    """`--result-budget`: `100000` (bytes) or `25000tokens`."""
    text = text.strip()
    if text.endswith("tokens"):
        return ResultBudget(tokens=int(text[:-6].strip()))
    return ResultBudget(bytes=int(text))


@dataclass(frozen=True)
class ResultStoreLimits:
    """How long and how much of the cut results' rests a store keeps (`Server(result_store=...)`)."""

    ttl: float = 900.0  # seconds a rest is kept after it was made
    max_entries: int = 1000  # rests kept at once (the least recently used leave first)
    max_bytes: int = 64 * 1024 * 1024  # their pages' bytes together; a rest larger than this is not kept

    def __post_init__(self) -> None:
        if self.ttl <= 0 or self.max_entries < 1 or self.max_bytes < 1:
            raise ValueError("result store limits must be positive")


class ResultStore(Protocol):
    """Where rests are kept (`LocalResultStore`; `redisstate.RedisResultStore`)."""

    async def put(self, rest_id: str, owner: str, pages: list[bytes], limits: ResultStoreLimits) -> bool:
        """Keep the pages (False: too large to keep)."""

    async def page(self, rest_id: str, number: int) -> tuple[str, bytes] | None:
        """A page's owner and contents (None: unknown or expired)."""


class _Rest:
    __slots__ = ("owner", "pages", "size", "expires")

    def __init__(self, owner: str, pages: list[bytes], expires: float) -> None:
        self.owner, self.pages, self.expires = owner, pages, expires
        self.size = sum(map(len, pages))


class LocalResultStore:
    """Rests in this process: at most `max_entries` and `max_bytes`, each dropped `ttl` after it was made;
    to make room the least recently read leave first."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._rests: collections.OrderedDict[str, _Rest] = collections.OrderedDict()
        self.size = 0

    def __len__(self) -> int:
        return len(self._rests)

    def _drop(self, rest_id: str) -> None:
        self.size -= self._rests.pop(rest_id).size

    async def put(self, rest_id: str, owner: str, pages: list[bytes], limits: ResultStoreLimits) -> bool:
        rest = _Rest(owner, pages, self._clock() + limits.ttl)
        if rest.size > limits.max_bytes:
            return False
        now = self._clock()
        for old_id in [key for key, old in self._rests.items() if old.expires <= now]:
            self._drop(old_id)
        while self._rests and (len(self._rests) >= limits.max_entries or self.size + rest.size > limits.max_bytes):
            self._drop(next(iter(self._rests)))
        self._rests[rest_id] = rest
        self.size += rest.size
        return True

    async def page(self, rest_id: str, number: int) -> tuple[str, bytes] | None:
        rest = self._rests.get(rest_id)
        if rest is None:
            return None
        if rest.expires <= self._clock():
            self._drop(rest_id)
            return None
        self._rests.move_to_end(rest_id)
        return (rest.owner, rest.pages[number - 2]) if 2 <= number < len(rest.pages) + 2 else None


def page_uri(rest_id: str, number: int) -> str:
    return f"{SCHEME}{rest_id}/{number}"


def read_uri(uri: str) -> tuple[str, int] | None:
    """A page URI's id and page number (None: not one of ours, or malformed)."""
    rest_id, _, number = uri[len(SCHEME):].partition("/")
    if not uri.startswith(SCHEME) or not rest_id or not number.isdigit() or len(number) > 9:
        return None
    return rest_id, int(number)


def _size(value: Any) -> int:
    return len(orjson.dumps(value))


def _fitting_prefix(text: str, room: int) -> int:
    """How many characters of `text` fit in `room` bytes of JSON string (escapes counted): a cut between
    code points, so never inside a UTF-8 sequence."""
    low, high = 0, min(len(text), room)  # the answer is in [low, high]: every character takes a byte at least
    probe = high
    while low < high:
        size = _size(text[:probe]) - 2
        if size <= room:
            low, high = probe, min(high, probe + room - size)
            probe = (low + high + 1) // 2
        else:  # too long: guess again from the bytes a character took so far (escapes are rarely bunched)
            high = probe - 1
            probe = max(low + 1, min(high, probe * room // size))
    return low


def _is_text(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and isinstance(block.get("text"), str)


def _as_contents(block: dict[str, Any], uri: str) -> dict[str, Any]:
    """A content block as `resources/read` contents of the page at `uri`."""
    kind = block.get("type")
    if kind == "text":
        return {"uri": uri, "mimeType": "text/plain", "text": block["text"]}
    if kind in ("image", "audio"):
        return {"uri": uri, "mimeType": block.get("mimeType", "application/octet-stream"), "blob": block.get("data", "")}
    if kind == "resource" and isinstance(block.get("resource"), dict):
        return block["resource"]
    if kind == "resource_link":
        return {"uri": uri, "mimeType": "text/uri-list", "text": block.get("uri", "")}
    return {"uri": uri, "mimeType": "application/json", "text": orjson.dumps(block).decode()}


class _Pager:
    """Fills one page of at most `room` bytes (as a JSON array) with blocks, cutting the text block that
    does not fit whole."""

    def __init__(self, render: Callable[[dict[str, Any]], dict[str, Any]], room: int) -> None:
        self.render, self.room = render, room
        self.items: list[dict[str, Any]] = []
        self.used = 2  # the array's brackets

    def fill(self, queue: collections.deque[dict[str, Any]]) -> None:
        """Take blocks from the front of `queue` while they fit; one cut leaves its rest at the front."""
        while queue:
            left = self.offer(queue[0])
            if left is not None:
                queue[0] = left
                return
            queue.popleft()

    def offer(self, block: dict[str, Any]) -> dict[str, Any] | None:
        """Add what of `block` fits; return what is left of it (None: all of it went in)."""
        item = self.render(block)
        cost = _size(item) + (1 if self.items else 0)
        if self.used + cost <= self.room:
            self.items.append(item)
            self.used += cost
            return None
        if not _is_text(block):
            return block
        empty = self.render({**block, "text": ""})
        room = self.room - self.used - _size(empty) - (1 if self.items else 0)
        cut = _fitting_prefix(block["text"], room) if room > 0 else 0
        if cut == 0:
            return block
        self.items.append(self.render({**block, "text": block["text"][:cut]}))
        self.used = self.room  # full
        return {**block, "text": block["text"][cut:]}


def _note(uri: str, limit: int, pages: int) -> dict[str, Any]:
    return {"type": "text", "text": f"[This result was cut to fit {limit} bytes. The rest is in {pages} more "
                                    f"page(s): read {uri} with resources/read; each page names the next.]"}


def _link(uri: str, name: str, mime_type: str, size: int, description: str) -> dict[str, Any]:
    return {"type": "resource_link", "uri": uri, "name": name, "mimeType": mime_type, "size": size,
            "description": description}


class Cut:
    """An oversize result, cut: the first part (`content`) and the rest's pages (`resources/read` results,
    from page 2: first the binary blocks too large for any page, one each, then the rest of the content)."""

    def __init__(self, content: list[dict[str, Any]], limit: int) -> None:
        self.rest_id = secrets.token_urlsafe(_ID_BYTES)
        widest = page_uri(self.rest_id, 10**9)
        # a page's items take at most this (a JSON array): the rest is its note and its result's wrapping
        self.page_room = limit - (_size(_next_note(widest, widest)) + 1
                                  + _size({"contents": [], "_meta": {NEXT_META: widest}}) - 2)
        self.pages: list[bytes] = []
        blocks: list[dict[str, Any]] = []
        for block in content:
            if _is_text(block) or _size(_as_contents(block, widest)) + 2 <= self.page_room:
                blocks.append(block)
                continue
            uri = page_uri(self.rest_id, len(self.pages) + 2)
            contents = _as_contents(block, uri)
            self.pages.append(orjson.dumps({"contents": [contents]}))
            blocks.append(_link(uri, f"part {len(self.pages) + 1}", contents.get("mimeType", "application/octet-stream"),
                                _raw_size(block), "A block too large for this result: read it with resources/read"))
        reserve = _size(_note(widest, limit, 10**9)) + _size(_link(widest, "rest", "text/plain", _SIZE_WIDTH, _REST)) + 2
        first = _Pager(lambda block: block, limit - reserve)
        queue = collections.deque(blocks)
        first.fill(queue)
        self.rest_size = sum(map(_raw_size, queue))
        following = len(self.pages) + 2
        rest = self._page(queue, following)
        self.pages += rest
        self.content = first.items
        self.has_rest = bool(rest)
        if rest:
            uri = page_uri(self.rest_id, following)
            self.content += [_note(uri, limit, len(rest)), _link(uri, "rest", "text/plain", self.rest_size, _REST)]

    def _page(self, queue: collections.deque[dict[str, Any]], first: int) -> list[bytes]:
        """The blocks left, as pages of `resources/read` results within the budget, numbered from `first`;
        each but the last names the next page (in its last contents, and its `_meta`)."""
        pages: list[list[dict[str, Any]]] = []
        while queue:
            uri = page_uri(self.rest_id, first + len(pages))
            pager = _Pager(lambda block, uri=uri: _as_contents(block, uri), self.page_room)
            pager.fill(queue)
            pages.append(pager.items)
        results = []
        for index, items in enumerate(pages):
            result: dict[str, Any] = {"contents": items}
            if index + 1 < len(pages):
                following = page_uri(self.rest_id, first + index + 1)
                result = {"contents": [*items, _next_note(following, page_uri(self.rest_id, first + index))],
                          "_meta": {NEXT_META: following}}
            results.append(orjson.dumps(result))
        return results


def _raw_size(block: dict[str, Any]) -> int:
    """A block's size as a resource link gives it: the bytes of its text, or of its data before base64."""
    if _is_text(block):
        return len(block["text"].encode())
    if isinstance(block.get("data"), str):
        return len(block["data"]) * 3 // 4 - block["data"][-2:].count("=")
    return _size(block)


NEXT_META = "dev.mcpcore/nextPage"  # a page's `_meta` field naming the next page
_REST = "The rest of this result: read it with resources/read (each page names the next)"


def _next_note(following: str, uri: str) -> dict[str, Any]:
    """A page's last contents when another follows: said to the model, and in `_meta` for a program (the
    result's own `_meta` does not reach a 2025-era client)."""
    return {"uri": uri, "mimeType": "text/plain", "text": f"[Continued in {following}: read it with resources/read.]",
            "_meta": {NEXT_META: following}}


def _not_kept(limit: int, size: int) -> dict[str, Any]:
    return {"type": "text", "text": f"[This result was cut to fit {limit} bytes. The rest ({size} bytes) was too "
                                    "large to keep: ask for less, e.g. a narrower query or a smaller page.]"}


class ResultPages:
    """A server's cut results: the store of their rests and its bounds."""

    def __init__(self, limits: ResultStoreLimits | None = None, store: ResultStore | None = None) -> None:
        self.limits = limits or ResultStoreLimits()
        self.store: ResultStore = store or LocalResultStore()

    async def fit(self, result: dict[str, Any], limit: int, owner: str) -> dict[str, Any]:
        """`result` if it fits `limit`; else its first part and a link to the rest (kept for `owner`)."""
        content = result.get("content")
        if not isinstance(content, list):
            return result
        size = _size(content)
        if size <= limit:
            return result
        if "structuredContent" in result:
            return {"content": [{"type": "text", "text": (
                f"This tool's structured result is {size} bytes, over the result budget of {limit} bytes, and "
                "cannot be cut without breaking its schema: ask for less (e.g. a narrower query or a smaller "
                "page).")}], "isError": True}
        cut = Cut(content, limit)
        if cut.pages and not await self.store.put(cut.rest_id, owner, cut.pages, self.limits):
            cut.content = [block for block in cut.content if block.get("type") != "resource_link"
                           or not block["uri"].startswith(SCHEME)]
            if cut.has_rest:
                cut.content[-1] = _not_kept(limit, cut.rest_size)  # the note's place
            else:
                cut.content.append(_not_kept(limit, sum(map(len, cut.pages))))
        fitted = {key: value for key, value in result.items() if key != "content"}
        fitted["content"] = cut.content
        return fitted

    async def read(self, uri: str, owner: str) -> bytes | None:
        """A page's `resources/read` result, as JSON (None: unknown, expired, or another owner's)."""
        named = read_uri(uri)
        if named is None:
            return None
        found = await self.store.page(*named)
        if found is None or not secrets.compare_digest(found[0], owner):
            return None
        return found[1]
