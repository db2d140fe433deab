"""Ordered item collections with cached, paginated list results (mcpcore._app.catalog)."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from mcpcore._app.catalog import CacheHints, Catalog, decode_cursor, encode_cursor
from mcpcore._wire.jsonrpc import INVALID_PARAMS, McpError

META = {"io.modelcontextprotocol/serverInfo": {"name": "test", "version": "0"}}


class FakeItem:
    """The smallest thing a Catalog holds: a key, cache hints, OAuth scopes and a description."""

    def __init__(self, key: str, ttl_ms: int | None = None, scope: str | None = None, scopes: tuple[str, ...] = ()) -> None:
        self.key = key
        self.cache = CacheHints(ttl_ms, scope)
        self.scopes = scopes
        self.describe_calls = 0

    def describe(self) -> dict[str, Any]:
        self.describe_calls += 1
        return {"name": self.key}


class ChangeCounter:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def make_catalog(
    *keys: str, page_size: int = 2, defaults: CacheHints | None = None
) -> tuple[Catalog[FakeItem], ChangeCounter]:
    changes = ChangeCounter()
    catalog: Catalog[FakeItem] = Catalog("tools", page_size, defaults or CacheHints(0, "private"), changes)
    for key in keys:
        catalog.add(FakeItem(key))
    return catalog, changes


def page(catalog: Catalog[FakeItem], cursor: Any = None) -> dict[str, Any]:
    return orjson.loads(catalog.page(cursor, META))


# -- pagination --------------------------------------------------------------------


def test_cursor_chain_visits_every_item_once_in_registration_order() -> None:
    catalog, _ = make_catalog("a", "b", "c", "d", "e")
    seen: list[str] = []
    sizes: list[int] = []
    cursor = None
    while True:
        result = page(catalog, cursor)
        names = [entry["name"] for entry in result["tools"]]
        seen.extend(names)
        sizes.append(len(names))
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert seen == ["a", "b", "c", "d", "e"]
    assert sizes == [2, 2, 1]


def test_a_list_by_scope_pages_through_what_the_caller_sees_privately_and_costs_nothing_without_scoped_items() -> None:
    catalog, _ = make_catalog(page_size=2, defaults=CacheHints(0, "public"))
    for key, scopes in (("a", ("x",)), ("b", ()), ("c", ("y",)), ("d", ()), ("e", ("x",)), ("f", ())):
        catalog.add(FakeItem(key, scopes=scopes))
    seen, scopes_seen, cursor = [], set(), None
    for _ in range(10):
        result = orjson.loads(catalog.page(cursor, META, lambda item: "x" not in item.scopes))
        seen += [entry["name"] for entry in result["tools"]]
        scopes_seen.add(result["cacheScope"])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert seen == ["b", "c", "d", "f"] and scopes_seen == {"private"}
    assert page(catalog)["cacheScope"] == "public"  # unfiltered: as before
    with pytest.raises(McpError, match="Invalid cursor"):
        catalog.page(encode_cursor(4), META, lambda item: not item.scopes)  # past the 3 items that are seen
    plain, _ = make_catalog("a", "b")
    assert plain.page(None, META, lambda item: False) is plain.page(None, META)  # the cached page, unfiltered


class OddOnly:
    """A view: the items whose key is odd-numbered, each described with a mark."""

    key = "odd"

    def shows(self, item: FakeItem) -> bool:
        return int(item.key[1:]) % 2 == 1

    def describe(self, item: FakeItem) -> dict[str, Any]:
        return {"name": item.key, "seen": "odd"}


def test_a_view_pages_through_what_it_shows_cached_until_a_change() -> None:
    catalog, _ = make_catalog(*(f"k{n}" for n in range(1, 8)), page_size=2, defaults=CacheHints(0, "public"))
    view = OddOnly()
    seen, cursor = [], None
    for _ in range(10):
        result = orjson.loads(catalog.page(cursor, META, None, view))
        seen += result["tools"]
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert [entry["name"] for entry in seen] == ["k1", "k3", "k5", "k7"]
    assert {entry["seen"] for entry in seen} == {"odd"} and result["cacheScope"] == "public"
    assert catalog.page(None, META, None, view) is catalog.page(None, META, None, view)  # cached
    assert [entry["name"] for entry in page(catalog)["tools"]] == ["k1", "k2"]  # the full list is its own
    with pytest.raises(McpError, match="Invalid cursor"):
        catalog.page(encode_cursor(4), META, None, view)  # past the 4 items it shows
    catalog.add(FakeItem("k9"))
    assert orjson.loads(catalog.page(encode_cursor(4), META, None, view))["tools"] == [{"name": "k9", "seen": "odd"}]


def test_a_view_of_a_list_by_scope_shows_what_both_allow() -> None:
    catalog, _ = make_catalog(page_size=10)
    for key, scopes in (("k1", ("x",)), ("k2", ()), ("k3", ()), ("k5", ())):
        catalog.add(FakeItem(key, scopes=scopes))
    result = orjson.loads(catalog.page(None, META, lambda item: "x" not in item.scopes, OddOnly()))
    assert result["tools"] == [{"name": "k3", "seen": "odd"}, {"name": "k5", "seen": "odd"}]
    assert result["cacheScope"] == "private"


def test_last_page_has_no_next_cursor() -> None:
    catalog, _ = make_catalog("a", "b", "c", "d", "e")
    last = page(catalog, encode_cursor(4))
    assert [entry["name"] for entry in last["tools"]] == ["e"]
    assert "nextCursor" not in last


def test_exactly_full_last_page_has_no_next_cursor() -> None:
    catalog, _ = make_catalog("a", "b", "c", "d")
    assert "nextCursor" not in page(catalog, page(catalog)["nextCursor"])


def test_page_carries_result_type_cache_hints_and_meta() -> None:
    catalog, _ = make_catalog("a")
    assert page(catalog) == {
        "resultType": "complete",
        "tools": [{"name": "a"}],
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": META,
    }


def test_empty_catalog_gives_one_empty_page() -> None:
    catalog, _ = make_catalog()
    result = page(catalog)
    assert result["tools"] == []
    assert "nextCursor" not in result


def test_empty_catalog_uses_default_cache_hints() -> None:
    catalog, _ = make_catalog(defaults=CacheHints(500, "public"))
    result = page(catalog)
    assert (result["ttlMs"], result["cacheScope"]) == (500, "public")


def test_cursor_round_trips_through_encode_and_decode() -> None:
    assert decode_cursor(encode_cursor(42)) == 42


@pytest.mark.parametrize(
    "cursor",
    [
        pytest.param("garbage!", id="not-base64"),
        pytest.param("", id="empty"),
        pytest.param(base64.urlsafe_b64encode(b"x2").decode(), id="wrong-prefix"),
        pytest.param(base64.urlsafe_b64encode(b"o-2").decode(), id="negative"),
        pytest.param(base64.urlsafe_b64encode(b"o").decode(), id="no-digits"),
        pytest.param(base64.urlsafe_b64encode(b"\xff\xfe").decode(), id="not-utf8"),
        pytest.param(2, id="integer"),
        pytest.param(["o2"], id="array"),
    ],
)
def test_garbage_cursor_raises_invalid_params(cursor: Any) -> None:
    catalog, _ = make_catalog("a", "b", "c")
    with pytest.raises(McpError) as caught:
        catalog.page(cursor, META)
    assert caught.value.code == INVALID_PARAMS == -32602
    assert caught.value.data == {"cursor": cursor}


def test_cursor_not_on_a_page_boundary_raises_invalid_params() -> None:
    catalog, _ = make_catalog("a", "b", "c", "d", "e")
    with pytest.raises(McpError) as caught:
        catalog.page(encode_cursor(1), META)
    assert caught.value.code == -32602
    assert "does not point into this list" in caught.value.message


def test_cursor_beyond_the_list_raises_invalid_params() -> None:
    catalog, _ = make_catalog("a", "b", "c", "d", "e")
    with pytest.raises(McpError) as caught:
        catalog.page(encode_cursor(6), META)
    assert caught.value.code == -32602


def test_cursor_from_before_a_removal_that_shortened_the_list_is_refused() -> None:
    catalog, _ = make_catalog("a", "b", "c")
    stale = page(catalog)["nextCursor"]
    catalog.remove("c")
    with pytest.raises(McpError) as caught:
        catalog.page(stale, META)
    assert caught.value.code == -32602


# -- page cache ----------------------------------------------------------------------


def test_page_bytes_are_reused_between_calls() -> None:
    catalog, _ = make_catalog("a", "b", "c")
    first = catalog.page(None, META)
    assert catalog.page(None, META) is first


def test_items_are_described_once_while_the_cache_is_valid() -> None:
    catalog, _ = make_catalog("a")
    item = catalog.get("a")
    assert item is not None
    for _ in range(3):
        catalog.page(None, META)
    assert item.describe_calls == 1


def test_add_invalidates_the_cached_pages() -> None:
    catalog, _ = make_catalog("a")
    before = catalog.page(None, META)
    catalog.add(FakeItem("b"))
    after = catalog.page(None, META)
    assert after is not before
    assert [entry["name"] for entry in orjson.loads(after)["tools"]] == ["a", "b"]


def test_remove_invalidates_the_cached_pages() -> None:
    catalog, _ = make_catalog("a", "b")
    before = catalog.page(None, META)
    catalog.remove("a")
    after = catalog.page(None, META)
    assert after is not before
    assert [entry["name"] for entry in orjson.loads(after)["tools"]] == ["b"]


def test_add_and_remove_report_a_change() -> None:
    catalog, changes = make_catalog()
    catalog.add(FakeItem("a"))
    catalog.remove("a")
    assert changes.count == 2


def test_removing_an_unknown_key_raises_key_error_without_a_change() -> None:
    catalog, changes = make_catalog("a")
    with pytest.raises(KeyError, match="no tool named 'zz'"):
        catalog.remove("zz")
    assert changes.count == 1  # only the add


def test_adding_an_existing_key_replaces_it_in_place() -> None:
    catalog, _ = make_catalog("a", "b")
    replacement = FakeItem("a")
    catalog.add(replacement)
    assert catalog.get("a") is replacement
    assert [i.key for i in catalog] == ["a", "b"]
    assert len(catalog) == 2


# -- cache hints in pages ----------------------------------------------------------


def test_ttl_is_the_smallest_ttl_of_the_page_items() -> None:
    catalog, _ = make_catalog(page_size=3)
    for key, ttl in (("a", 500), ("b", 100), ("c", 300)):
        catalog.add(FakeItem(key, ttl_ms=ttl))
    assert page(catalog)["ttlMs"] == 100


def test_ttl_is_computed_per_page() -> None:
    catalog, _ = make_catalog(page_size=2)
    for key, ttl in (("a", 500), ("b", 400), ("c", 50)):
        catalog.add(FakeItem(key, ttl_ms=ttl))
    first = page(catalog)
    assert first["ttlMs"] == 400
    assert page(catalog, first["nextCursor"])["ttlMs"] == 50


def test_item_without_ttl_takes_the_default_ttl() -> None:
    catalog, _ = make_catalog(page_size=3, defaults=CacheHints(200, "private"))
    catalog.add(FakeItem("a", ttl_ms=900))
    catalog.add(FakeItem("b"))
    assert page(catalog)["ttlMs"] == 200


def test_items_without_any_ttl_list_without_error() -> None:
    catalog, _ = make_catalog(page_size=3, defaults=CacheHints(None, "private"))
    catalog.add(FakeItem("a"))
    catalog.add(FakeItem("b", ttl_ms=100))
    assert page(catalog)["ttlMs"] == 100


def test_scope_is_public_when_every_item_is_public() -> None:
    catalog, _ = make_catalog()
    catalog.add(FakeItem("a", scope="public"))
    catalog.add(FakeItem("b", scope="public"))
    assert page(catalog)["cacheScope"] == "public"


def test_scope_is_private_when_any_item_is_private() -> None:
    catalog, _ = make_catalog(page_size=1)
    catalog.add(FakeItem("a", scope="public"))
    catalog.add(FakeItem("b", scope="private"))
    first = page(catalog)
    assert first["cacheScope"] == "private"
    assert page(catalog, first["nextCursor"])["cacheScope"] == "private"


def test_item_without_scope_inherits_the_default_scope() -> None:
    catalog, _ = make_catalog(defaults=CacheHints(0, "public"))
    catalog.add(FakeItem("a"))
    catalog.add(FakeItem("b", scope="public"))
    assert page(catalog)["cacheScope"] == "public"


def test_removing_the_only_private_item_makes_the_list_public() -> None:
    catalog, _ = make_catalog()
    catalog.add(FakeItem("a", scope="public"))
    catalog.add(FakeItem("b", scope="private"))
    assert page(catalog)["cacheScope"] == "private"
    catalog.remove("b")
    assert page(catalog)["cacheScope"] == "public"


# -- CacheHints --------------------------------------------------------------------


def test_cache_hints_reject_negative_ttl() -> None:
    with pytest.raises(ValueError, match="ttl_ms must be an integer >= 0"):
        CacheHints(-1)


def test_cache_hints_reject_non_integer_ttl() -> None:
    with pytest.raises(ValueError, match="ttl_ms must be an integer"):
        CacheHints(1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("scope", ["shared", "PUBLIC", ""])
def test_cache_hints_reject_unknown_scopes(scope: str) -> None:
    with pytest.raises(ValueError, match="cache_scope must be 'public' or 'private'"):
        CacheHints(10, scope)


def test_cache_hints_accept_zero_ttl_and_known_scopes() -> None:
    hints = CacheHints(0, "public")
    assert (hints.ttl_ms, hints.cache_scope) == (0, "public")


def test_over_fills_only_missing_hints_from_the_default() -> None:
    merged = CacheHints(None, "public").over(CacheHints(300, "private"))
    assert (merged.ttl_ms, merged.cache_scope) == (300, "public")
    kept = CacheHints(0, None).over(CacheHints(300, "private"))
    assert (kept.ttl_ms, kept.cache_scope) == (0, "private")
