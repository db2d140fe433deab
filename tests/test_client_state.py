"""Per-client state (`ctx.client_state`, tests/servers/state_server.py): kept across a client's calls over
stdio, in a 2025-era HTTP session, and on the stateless wires by principal and client-held key; never seen by
another client; bounded, with -32602 naming the bound; expiring. The Redis store: test_client_state_redis.py."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest

from conftest import ROOT
from http_client import running
from servers import state_server
from mcpcore import ClientStateLimits, Context, McpError
from mcpcore._runtime.clientstate import CLIENT_STATE_KEY_META, Bucket, LocalStateStore
from mcpcore.testing import Client

pytestmark = pytest.mark.anyio

ANN_KEY = "ann-device-key-0123456789"
LEGACY = "2025-11-25"


def http(port: int, **options: Any) -> Client:
    return Client.http(f"http://127.0.0.1:{port}/mcp", **options)


async def tool(client: Client, name: str, meta: dict[str, Any] | None = None, **arguments: Any) -> Any:
    """A tool's structured result (or text), with extra `_meta` fields if given."""
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    result = (await client.request("tools/call", params)).result
    assert not result.get("isError"), result
    structured = result.get("structuredContent")
    if structured is None:
        return result["content"][0]["text"]
    return structured["result"] if list(structured) == ["result"] else structured


async def counts(client: Client, times: int, meta: dict[str, Any] | None = None) -> list[int]:
    return [int(await tool(client, "count", meta)) for _ in range(times)]


@pytest.mark.parametrize("era", ["2026-07-28", LEGACY])
async def test_a_stdio_client_keeps_its_state_over_many_calls(era: str) -> None:
    command = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "tests/servers/state_server.py:server")]
    with anyio.fail_after(60):
        async with Client.stdio(command, era=era) as client:
            assert await counts(client, 40) == list(range(1, 41))
            await tool(client, "remember", key="profile", value={"name": "Ann", "tags": ["a", "b"]})
            assert await tool(client, "recall", key="profile") == {"value": {"name": "Ann", "tags": ["a", "b"]}}
            assert (await client.read_resource("state://count"))[0]["text"] == "40"  # resources read it too
            await tool(client, "forget", key="profile")
            assert await tool(client, "recall", key="profile") == {"value": None}


@pytest.mark.usefixtures("http_flavour")
async def test_a_2025_session_keeps_its_state_over_many_calls_and_no_other_session_sees_it() -> None:
    async with running(state_server.build()) as served:
        async with http(served.port, era=LEGACY) as first, http(served.port, era=LEGACY) as second:
            assert await counts(first, 30) == list(range(1, 31))
            assert await counts(second, 2) == [1, 2]
            assert await counts(first, 1) == [31]
            sessions = list(served.sessions)
            assert len(sessions) == 2
        assert all(session.closed for session in sessions)  # each client's DELETE ended its session
        async with http(served.port, era=LEGACY) as again:
            assert await counts(again, 1) == [1]


async def test_state_ends_with_its_session() -> None:
    from mcpcore._runtime.session import Session

    session = Session("id")
    limits = ClientStateLimits()
    await session.client_place().write("count", b"3", limits)
    assert await session.client_place().read("count", limits) == b"3"
    session.close()
    assert await session.client_place().read("count", limits) is None


@pytest.mark.usefixtures("http_flavour")  # the built-in server and the ASGI adapter
async def test_a_stateless_principal_keeps_its_state_and_another_principal_never_sees_it() -> None:
    async with running(state_server.build_guarded()) as served:
        async with http(served.port, token="ann-token") as ann, http(served.port, token="bob-token") as bob:
            assert await counts(ann, 20) == list(range(1, 21))  # each request stands on its own: no session
            assert await counts(bob, 1) == [1]
            # A client-held key names another place of the same principal (a second device)...
            assert await counts(ann, 2, {CLIENT_STATE_KEY_META: ANN_KEY}) == [1, 2]
            await tool(ann, "remember", {CLIENT_STATE_KEY_META: ANN_KEY}, key="secret", value="ann's")
            # ...and the same key presented by another principal names nothing of Ann's.
            assert await tool(bob, "recall", {CLIENT_STATE_KEY_META: ANN_KEY}, key="secret") == {"value": None}
            assert await tool(bob, "recall", {CLIENT_STATE_KEY_META: ANN_KEY}, key="count") == {"value": None}
            assert await tool(ann, "recall", {CLIENT_STATE_KEY_META: ANN_KEY}, key="secret") == {"value": "ann's"}
            assert await counts(ann, 1) == [21]


async def test_an_anonymous_stateless_client_names_its_state_with_a_key_it_holds() -> None:
    async with running(state_server.build()) as served:
        async with http(served.port) as client:
            assert await counts(client, 3, {CLIENT_STATE_KEY_META: ANN_KEY}) == [1, 2, 3]
            assert await counts(client, 1, {CLIENT_STATE_KEY_META: ANN_KEY[::-1]}) == [1]  # another key, another place
            with pytest.raises(McpError) as nameless:
                await tool(client, "count")
            assert nameless.value.code == -32602 and CLIENT_STATE_KEY_META in nameless.value.message
            with pytest.raises(McpError) as short:
                await tool(client, "count", {CLIENT_STATE_KEY_META: "guessable"})
            assert short.value.code == -32602 and "16 to 256 characters" in short.value.message


async def test_a_stateless_2025_client_names_its_state_as_a_2026_one_does() -> None:
    async with running(state_server.build_guarded(), stateless=True) as served:
        async with http(served.port, era=LEGACY, token="ann-token") as ann, \
                http(served.port, era=LEGACY, token="bob-token") as bob, http(served.port, token="ann-token") as modern:
            assert await counts(ann, 5) == [1, 2, 3, 4, 5]
            assert await counts(bob, 1) == [1]
            assert await counts(modern, 1) == [6]  # the principal's state, whichever wire it speaks
            await tool(ann, "remember", {CLIENT_STATE_KEY_META: ANN_KEY}, key="k", value=1)
            assert await tool(bob, "recall", {CLIENT_STATE_KEY_META: ANN_KEY}, key="k") == {"value": None}
            assert await tool(ann, "recall", {CLIENT_STATE_KEY_META: ANN_KEY}, key="k") == {"value": 1}


async def bound_passed(client: Client, meta: dict[str, Any] | None = None, **arguments: Any) -> dict[str, Any]:
    with pytest.raises(McpError) as refused:
        await tool(client, "remember", meta, **arguments)
    assert refused.value.code == -32602
    return refused.value.data


async def test_each_bound_is_refused_with_minus_32602_naming_it_and_nothing_changes() -> None:
    """tight: a value of 40 bytes of JSON, 60 in all, 2 keys, 2 stateless clients."""
    async with running(state_server.tight) as served:
        async with http(served.port) as client:
            me = {CLIENT_STATE_KEY_META: ANN_KEY}
            assert (await bound_passed(client, me, key="big", value="x" * 41))["bound"] == "max_value_bytes"
            await tool(client, "remember", me, key="a", value="x" * 30)  # 32 bytes of JSON
            assert (await bound_passed(client, me, key="b", value="y" * 30))["bound"] == "max_bytes"
            await tool(client, "remember", me, key="b", value=1)
            assert (await bound_passed(client, me, key="c", value=1))["bound"] == "max_keys"
            await tool(client, "remember", me, key="b", value=2)  # replacing a value is no new key
            assert await tool(client, "recall", me, key="a") == {"value": "x" * 30}
            assert await tool(client, "recall", me, key="big") == {"value": None}
            assert (await bound_passed(client, me, key="k" * 129, value=1))["bound"] == "max_key_length"
            await tool(client, "count", {CLIENT_STATE_KEY_META: "second-client-key-0123"})
            full = await bound_passed(client, {CLIENT_STATE_KEY_META: "third-client-key-01234"}, key="a", value=1)
            assert full == {"bound": "max_clients", "limit": 2}
            await tool(client, "forget", me, key="a")
            await tool(client, "forget", me, key="b")  # an emptied state takes no place
            await tool(client, "count", {CLIENT_STATE_KEY_META: "third-client-key-01234"})


async def test_a_value_json_cannot_hold_is_the_tools_error_and_keeps_nothing() -> None:
    server = state_server.build()

    @server.tool
    async def keep_a_set(ctx: Context) -> str:
        await ctx.client_state.set("set", {1, 2})
        return "kept"

    async with Client(server) as client:
        assert (await client.call_tool("keep_a_set")).result["isError"] is True
        assert await tool(client, "recall", key="set") == {"value": None}


def test_a_stateless_clients_state_expires_when_idle_and_the_store_forgets_it() -> None:
    now = [0.0]
    store = LocalStateStore(clock=lambda: now[0])
    limits = ClientStateLimits(ttl=10.0)

    async def scenario() -> None:
        await store.write("a", "k", b"1", limits)
        await store.write("b", "k", b"2", limits)
        now[0] = 8.0
        assert await store.read("a", "k", limits) == b"1"  # used: its idle clock restarts
        now[0] = 15.0
        assert await store.read("b", "k", limits) is None  # idle for 15 s: gone
        assert await store.read("a", "k", limits) == b"1"
        now[0] = 30.0
        assert await store.read("a", "k", limits) is None
        assert len(store) == 0

    anyio.run(scenario)


def test_a_bucket_counts_the_bytes_it_holds() -> None:
    bucket = Bucket()
    limits = ClientStateLimits(max_bytes=10)
    bucket.put("a", b"12345", limits)
    bucket.put("a", b"1234567890", limits)  # replaced: counted once
    bucket.put("a", None, limits)
    bucket.put("b", b"1234567890", limits)
    assert bucket.size == 10 and list(bucket.values) == ["b"]


def test_limits_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ClientStateLimits(max_keys=0)
    with pytest.raises(ValueError, match="ttl"):
        ClientStateLimits(ttl=0)
