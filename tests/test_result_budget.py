"""Results that fit the client (`result_budget=`, tests/servers/budget_server.py): an oversize result is its
first part plus a `resource_link`; `resources/read` of the link gives the rest page by page, each within the
budget, to the same caller only, in both eras, over HTTP and stdio, and through another process with Redis;
the store's bounds and expiry; a binary block linked whole; a structured result refused; a tool without one."""

from __future__ import annotations

import base64
import os
import sys
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import given, settings, strategies as st

from conftest import ROOT
from http_client import running
from servers import budget_server
from servers.budget_server import BUDGET, PIXELS, listing_text
from test_redis import RedisServer, processes, redis_server  # noqa: F401  (a fixture)
from mcpcore import McpError, ResultBudget, Server
from mcpcore._runtime.results import NEXT_META, SCHEME, LocalResultStore, ResultPages, parse_budget
from mcpcore.testing import Client

pytestmark = pytest.mark.anyio

ERAS = ("2026-07-28", "2025-11-25")


def http(port: int, **options: Any) -> Client:
    return Client.http(f"http://127.0.0.1:{port}/mcp", **options)


def size(value: Any) -> int:
    return len(orjson.dumps(value))


async def call(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    return (await client.request("tools/call", {"name": name, "arguments": arguments})).result


def rest_link(result: dict[str, Any]) -> dict[str, Any]:
    """The link to the rest: the last block, one of ours."""
    link = result["content"][-1]
    assert link["type"] == "resource_link" and link["uri"].startswith(SCHEME), result["content"]
    return link


async def read_pages(client: Client, uri: str | None, budget: int = BUDGET) -> list[dict[str, Any]]:
    """Every page from `uri` on, following each page's note; each checked to be within the budget."""
    contents = []
    for _ in range(1000):
        if uri is None:
            return contents
        result = (await client.request("resources/read", {"uri": uri})).result
        assert size(result["contents"]) <= budget
        uri = None
        for item in result["contents"]:
            if NEXT_META in item.get("_meta", {}):
                uri = item["_meta"][NEXT_META]  # the note: not part of the result
            else:
                contents.append(item)
    raise AssertionError("more than 1000 pages")


async def whole_text(client: Client, result: dict[str, Any]) -> str:
    """The first part's text and the rest's, joined."""
    first = "".join(block["text"] for block in result["content"][:-2])
    return first + "".join(item["text"] for item in await read_pages(client, rest_link(result)["uri"]))


async def check_listing(client: Client, count: int = 400) -> None:
    result = await call(client, "listing", count=count)
    assert size(result["content"]) <= BUDGET
    link, note = rest_link(result), result["content"][-2]["text"]
    assert link["mimeType"] == "text/plain" and link["name"] and link["size"] > 0
    assert "cut to fit 4096 bytes" in note and link["uri"] in note
    assert await whole_text(client, result) == listing_text(count)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.usefixtures("http_flavour")
async def test_a_large_list_is_cut_into_a_first_part_and_a_link_whose_pages_rebuild_it(era: str) -> None:
    async with running(budget_server.server) as served, http(served.port, era=era) as client:
        with anyio.fail_after(60):
            await check_listing(client)
            small = await call(client, "listing", count=3)  # under the budget: as it was
            assert small["content"] == [{"type": "text", "text": listing_text(3)}]


@pytest.mark.parametrize("era", ERAS)
async def test_stdio_cuts_by_the_command_lines_budget_and_serves_the_rest(era: str) -> None:
    """`plain` has no budget in code: `--result-budget 1024tokens` (4096 bytes; for the 2025-era client
    `MCPCORE_RESULT_BUDGET`) gives it one, and with it the resources a 2025-era client must see offered
    before it reads the link."""
    command = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "tests/servers/budget_server.py:plain")]
    env = dict(os.environ)
    if era == ERAS[0]:
        command += ["--result-budget", "1024tokens"]
    else:
        env["MCPCORE_RESULT_BUDGET"] = "1024tokens"
    with anyio.fail_after(60):
        async with Client.stdio(command, era=era, env=env) as client:
            if era == ERAS[1]:
                assert "resources" in client.server_info["capabilities"]
            await check_listing(client)


async def test_another_principal_is_told_the_rest_is_unknown() -> None:
    async with running(budget_server.guarded) as served:
        async with http(served.port, token="ann-token") as ann, http(served.port, token="bob-token") as bob:
            with anyio.fail_after(30):
                uri = rest_link(await call(ann, "listing", count=400))["uri"]
                with pytest.raises(McpError) as theirs:
                    await bob.read_resource(uri)
                unknown = uri[:-1] + "9"
                with pytest.raises(McpError) as none:
                    await ann.read_resource(unknown)
                assert (theirs.value.code, theirs.value.message) == (none.value.code, f"Resource not found: {uri}"
                                                                     ) and none.value.message.endswith(unknown)
                assert (await ann.read_resource(uri))[0]["text"]  # its own caller reads it


async def test_the_rest_expires() -> None:
    now = [0.0]
    server = budget_server.build(result_budget=BUDGET)
    server.result_pages.store = LocalResultStore(clock=lambda: now[0])
    async with running(server) as served, http(served.port) as client:
        with anyio.fail_after(30):
            uri = rest_link(await call(client, "listing", count=400))["uri"]
            now[0] += server.result_pages.limits.ttl - 1
            assert await client.read_resource(uri)
            now[0] += 2
            with pytest.raises(McpError, match="Resource not found"):
                await client.read_resource(uri)


async def test_the_store_keeps_at_most_its_entries_and_bytes_and_says_when_a_rest_was_not_kept() -> None:
    """tight: 2 rests, 20,000 bytes of pages."""
    async with running(budget_server.tight) as served, http(served.port) as client:
        with anyio.fail_after(30):
            uris = [rest_link(await call(client, "listing", count=150))["uri"] for _ in range(3)]
            with pytest.raises(McpError, match="Resource not found"):
                await client.read_resource(uris[0])  # the least recently used left
            for uri in uris[1:]:
                assert await client.read_resource(uri)
            too_large = await call(client, "listing", count=1000)  # about 60,000 bytes
            assert size(too_large["content"]) <= BUDGET
            assert not any(block["type"] == "resource_link" for block in too_large["content"])
            assert "was too large to keep" in too_large["content"][-1]["text"]
            assert too_large["content"][0]["text"] == listing_text(1000)[:len(too_large["content"][0]["text"])]


async def test_a_binary_block_too_large_for_a_page_is_linked_whole_never_cut() -> None:
    async with running(budget_server.server) as served, http(served.port) as client:
        with anyio.fail_after(30):
            result = await call(client, "picture", count=400)
            assert size(result["content"]) <= BUDGET
            caption, image_link = result["content"][:2]
            assert caption == {"type": "text", "text": "A picture:"}
            assert image_link["type"] == "resource_link" and image_link["mimeType"] == "image/png"
            assert image_link["size"] == len(PIXELS)
            (blob,) = await client.read_resource(image_link["uri"])
            assert base64.b64decode(blob["blob"]) == PIXELS and blob["mimeType"] == "image/png"
            assert not any(block["type"] == "image" for block in result["content"])
            text = "".join(block["text"] for block in result["content"][2:-2])
            rest = await read_pages(client, rest_link(result)["uri"])
            assert text + "".join(item["text"] for item in rest) == listing_text(400)


async def test_a_structured_result_over_the_budget_is_a_tool_error_never_a_broken_structure() -> None:
    async with running(budget_server.server) as served, http(served.port) as client:
        with anyio.fail_after(30):
            small = await call(client, "table", rows=3)
            assert small["structuredContent"] == {"rows": ["row 0", "row 1", "row 2"]}
            large = await call(client, "table", rows=1000)
            assert large["isError"] is True and "structuredContent" not in large
            assert "over the result budget of 4096 bytes" in large["content"][0]["text"]


async def test_a_tool_with_its_budget_off_answers_whole_and_a_server_without_one_pays_nothing() -> None:
    async with running(budget_server.server) as served, http(served.port) as client:
        with anyio.fail_after(30):
            result = await call(client, "everything", count=400)
            assert result["content"] == [{"type": "text", "text": listing_text(400)}]
    plain = budget_server.build("none")
    assert all("call" not in vars(tool) for tool in plain.tools)  # the plain method: nothing measured
    assert "resources" not in plain.capabilities()


async def test_a_tools_own_budget_in_tokens_overrides_the_servers() -> None:
    server = Server("own", result_budget=100_000)

    @server.tool(result_budget=ResultBudget(tokens=512))
    def listing(count: int) -> str:
        return listing_text(count)

    async with running(server) as served, http(served.port) as client:
        with anyio.fail_after(30):
            result = await call(client, "listing", count=200)
            assert size(result["content"]) <= 2048
            assert "".join(block["text"] for block in result["content"][:-2]) + "".join(
                item["text"] for item in await read_pages(client, rest_link(result)["uri"], 2048)) == listing_text(200)


async def test_a_mounted_servers_cut_result_is_read_through_the_mounting_server() -> None:
    outer = Server("outer")
    outer.mount("files", budget_server.build(result_budget=BUDGET))
    async with running(outer) as served, http(served.port, era="2025-11-25") as client:
        with anyio.fail_after(30):
            result = await call(client, "files_listing", count=400)
            assert await whole_text(client, result) == listing_text(400)


def test_budgets_are_refused_when_they_cannot_work() -> None:
    with pytest.raises(ValueError, match="at least 1024 bytes"):
        Server("small", result_budget=1000)
    with pytest.raises(ValueError, match="exactly one"):
        ResultBudget(bytes=2000, tokens=600)
    assert parse_budget("25000tokens") == ResultBudget(tokens=25000)
    assert parse_budget("100000").limit == 100_000


async def test_another_process_serves_the_rest_through_redis(redis_server: RedisServer) -> None:  # noqa: F811
    with processes(redis_server, target="tests/servers/budget_server.py:server") as (a, b):
        with anyio.fail_after(60):
            async with http(a) as through_a, http(b) as through_b:
                result = await call(through_a, "listing", count=400)
                assert await whole_text(through_b, result) == listing_text(400)
                picture = await call(through_b, "picture", count=1)
                (blob,) = await through_a.read_resource(picture["content"][1]["uri"])
                assert base64.b64decode(blob["blob"]) == PIXELS


async def test_the_bounds_hold_across_processes_on_redis(redis_server: RedisServer) -> None:  # noqa: F811
    """tight: 2 rests, 20,000 bytes: made through both processes, the oldest leaves; every key expires."""
    import redis

    with processes(redis_server, target="tests/servers/budget_server.py:tight") as (a, b):
        with anyio.fail_after(60):
            async with http(a) as through_a, http(b) as through_b:
                uris = [rest_link(await call((through_a, through_b)[n % 2], "listing", count=150))["uri"]
                        for n in range(3)]
                with pytest.raises(McpError, match="Resource not found"):
                    await through_b.read_resource(uris[0])
                for uri in uris[1:]:
                    assert await through_a.read_resource(uri)
                too_large = await call(through_b, "listing", count=1000)
                assert "was too large to keep" in too_large["content"][-1]["text"]
    seen = redis.Redis.from_url(redis_server.url)
    try:
        names = seen.keys("mcpcore:result*")
        assert len(names) == 4 and all(0 < seen.pttl(name) <= 900_000 for name in names)  # 2 rests, 2 indexes
    finally:
        seen.close()


@settings(max_examples=150, deadline=None)
@given(fragment=st.text(min_size=1, max_size=80), times=st.integers(1, 300), tail=st.text(max_size=80),
       budget=st.integers(1024, 3000))
def test_any_text_and_budget_cut_and_read_back_rebuild_the_text(fragment: str, times: int, tail: str,
                                                                budget: int) -> None:
    text = fragment * times + tail  # random characters, often far over the budget

    async def round_trip() -> None:
        pages = ResultPages()
        result = await pages.fit({"content": [{"type": "text", "text": text}]}, budget, "me")
        assert size(result["content"]) <= budget
        if result["content"] == [{"type": "text", "text": text}]:
            return  # it fitted (checked above)
        rebuilt = "".join(block["text"] for block in result["content"][:-2])
        uri: str | None = result["content"][-1]["uri"]
        while uri is not None:
            page = await pages.read(uri, "me")
            assert page is not None and len(page) <= budget and await pages.read(uri, "you") is None
            contents = orjson.loads(page)["contents"]
            uri = contents[-1].get("_meta", {}).get(NEXT_META)
            rebuilt += "".join(item["text"] for item in (contents[:-1] if uri else contents))
        assert rebuilt == text

    anyio.run(round_trip)
