"""Per-client state shared by two processes on a real `redis-server` (`--redis URL`): a 2025-era session's
served alternately by both, gone from Redis once the session is deleted or expires; a stateless principal's,
never another's; the bounds counted across processes (the fixtures are test_redis.py's)."""

from __future__ import annotations

from typing import Any, Iterator

import anyio
import pytest

from test_client_state import ANN_KEY, bound_passed, counts, tool
from test_redis import RedisServer, processes, redis_server  # noqa: F401  (a fixture)
from mcpcore._runtime.clientstate import CLIENT_STATE_KEY_META
from mcpcore.testing import Client

pytestmark = pytest.mark.anyio

TARGET = "tests/servers/state_server.py:server"
LEGACY = "2025-11-25"


def http(port: int, **options: Any) -> Client:
    return Client.http(f"http://127.0.0.1:{port}/mcp", **options)


class Redis:
    """A plain Redis client on the test's server, to see what the processes left there."""

    def __init__(self, url: str) -> None:
        import redis

        self.client = redis.Redis.from_url(url)

    def keys(self, pattern: str) -> list[str]:
        return sorted(key.decode() for key in self.client.keys(pattern))


@pytest.fixture
def seen(redis_server: RedisServer) -> Iterator[Redis]:  # noqa: F811
    redis = Redis(redis_server.url)
    try:
        yield redis
    finally:
        redis.client.close()


async def alternating_session(a: int, b: int) -> tuple[Client, Client]:
    """One 2025-era session, opened on `a`, with a client for each process (the second adopts the id)."""
    first = http(a, era=LEGACY)
    await first.__aenter__()
    second = http(b, era=LEGACY)
    second._channel.session_id = first._channel.session_id  # the same session, through the other process
    second._entered = True
    return first, second


async def test_a_shared_sessions_state_is_served_by_both_processes_and_deleted_with_it(
        redis_server: RedisServer, seen: Redis) -> None:  # noqa: F811
    with processes(redis_server, target=TARGET) as (a, b):
        first, second = await alternating_session(a, b)
        session_id = first._channel.session_id
        with anyio.fail_after(60):
            values = []
            for n in range(30):
                values += await counts((first, second)[n % 2], 1)
            assert values == list(range(1, 31))  # never lost, never a stale copy
            await tool(second, "remember", key="profile", value={"name": "Ann"})
            assert await tool(first, "recall", key="profile") == {"value": {"name": "Ann"}}
            assert seen.keys("mcpcore:client-state:*") == [f"mcpcore:client-state:session:{session_id}"]
            async with http(b, era=LEGACY) as other:  # another session, through either process, starts empty
                assert await counts(other, 1) == [1]
            await first.__aexit__(None, None, None)  # DELETE through A
        assert seen.keys("mcpcore:client-state:*") == []  # both sessions' states left with them


async def test_a_shared_sessions_state_expires_with_the_session(redis_server: RedisServer, seen: Redis) -> None:  # noqa: F811
    with processes(redis_server, target=TARGET, extra=("--session-idle-timeout", "1")) as (a, b):
        first, second = await alternating_session(a, b)
        session_id = first._channel.session_id
        with anyio.fail_after(30):
            assert await counts(first, 1) == [1]
            for _ in range(4):  # requests that leave the state alone, for longer than the idle time: both live on
                await first.request("ping")
                await anyio.sleep(0.4)
            assert await counts(second, 1) == [2]
            assert seen.client.pttl(f"mcpcore:client-state:session:{session_id}") > 0
            while seen.keys("mcpcore:*session*"):
                await anyio.sleep(0.1)  # Redis expires the session and its state together


async def test_a_stateless_principals_state_crosses_processes_and_never_reaches_another_principal(
        redis_server: RedisServer, seen: Redis) -> None:  # noqa: F811
    with processes(redis_server, target="tests/servers/state_server.py:guarded") as (a, b):
        with anyio.fail_after(60):
            async with http(a, token="ann-token") as ann_a, http(b, token="ann-token") as ann_b, \
                    http(b, token="bob-token") as bob:
                values = []
                for n in range(20):
                    values += await counts((ann_a, ann_b)[n % 2], 1)
                assert values == list(range(1, 21))
                await tool(ann_a, "remember", {CLIENT_STATE_KEY_META: ANN_KEY}, key="secret", value="ann's")
                assert await tool(bob, "recall", {CLIENT_STATE_KEY_META: ANN_KEY}, key="secret") == {"value": None}
                assert await tool(bob, "recall", key="count") == {"value": None}
                assert await tool(ann_b, "recall", {CLIENT_STATE_KEY_META: ANN_KEY}, key="secret") == {"value": "ann's"}
        names = seen.keys("mcpcore:client-state:*")
        assert len(names) == 2 and not any("ann" in name or ANN_KEY in name for name in names)  # digests only


async def test_the_bounds_hold_across_processes_and_an_idle_client_expires(
        redis_server: RedisServer, seen: Redis) -> None:  # noqa: F811
    """tight: a value of 40 bytes of JSON, 60 in all, 2 keys, 2 stateless clients, idle for 1 s."""
    with processes(redis_server, target="tests/servers/state_server.py:tight") as (a, b):
        with anyio.fail_after(60):
            async with http(a) as through_a, http(b) as through_b:
                me = {CLIENT_STATE_KEY_META: ANN_KEY}
                assert (await bound_passed(through_a, me, key="big", value="x" * 41))["bound"] == "max_value_bytes"
                await tool(through_a, "remember", me, key="a", value="x" * 30)
                assert (await bound_passed(through_b, me, key="b", value="y" * 30))["bound"] == "max_bytes"
                await tool(through_b, "remember", me, key="b", value=1)
                assert (await bound_passed(through_a, me, key="c", value=1))["bound"] == "max_keys"
                assert await tool(through_b, "recall", me, key="a") == {"value": "x" * 30}
                await tool(through_a, "count", {CLIENT_STATE_KEY_META: "second-client-key-0123"})
                third = {CLIENT_STATE_KEY_META: "third-client-key-01234"}
                assert await bound_passed(through_b, third, key="a", value=1) == {"bound": "max_clients", "limit": 2}
                await tool(through_a, "forget", me, key="a")
                await tool(through_b, "forget", me, key="b")  # emptied: its place is free
                await tool(through_b, "count", third)
                while seen.keys("mcpcore:client-state:*"):
                    await anyio.sleep(0.1)  # idle past the ttl: Redis forgets them
                assert await tool(through_a, "recall", third, key="count") == {"value": None}
                await tool(through_a, "count", {CLIENT_STATE_KEY_META: "fourth-client-key-0123"})
                await tool(through_b, "count", {CLIENT_STATE_KEY_META: "fifth-client-key-01234"})  # expired ones left the count
