"""Rate limits and daily quotas held in a real `redis-server` by two `mcpcore run --redis` processes (and two
stdio ones): the count holds across both, Redis lost and back, hostile names, a quota crossed. Buckets
refill so slowly (one call in 1000 s) that every count is exact. The fixtures are test_redis.py's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import anyio
import pytest

from conftest import ROOT, free_port, tool_call
from http_client import HttpClient, Reply, mcp_headers
from process_group import stop_gracefully, wait_until_accepting
from test_redis import RedisServer, environment, processes, redis_server  # noqa: F401  (a fixture)
from mcpcore import McpError
from mcpcore._runtime.call import Call
from mcpcore._runtime.limits import DAY, Check, Limits, LocalLimiter
from mcpcore.fleetlimits import RETRY_SECONDS
from mcpcore.testing import Client

pytestmark = pytest.mark.anyio

GUARDED = "tests/servers/limits_server.py:guarded"
LEGACY = "2025-11-25"
SLOW = "0.001"  # calls a second: one call back every 1000 s, never within a test
AWAY = "Redis is unreachable"
BACK = "Redis is back"


class _Port:
    def __init__(self, port: int) -> None:
        self.port = port


async def call(port: int, principal: str, tool: str = "ping") -> Reply:
    """One 2026-07-28 `tools/call` of `tool` as `principal` (its bearer token), on a connection of its own."""
    message = tool_call(1, tool)
    async with HttpClient.connect(_Port(port)) as http:  # type: ignore[arg-type]
        with anyio.fail_after(10):
            return await http.post(message, {**mcp_headers(message), "authorization": f"Bearer {principal}"})


def passed(reply: Reply) -> bool:
    """Whether the call ran (200 and a result); a refusal must be a well-formed 429."""
    if reply.status == 200 and "result" in reply.response:
        return True
    assert reply.status == 429, (reply.status, reply.body)
    error = reply.response["error"]
    assert error["code"] == 429 and reply.headers["retry-after"] == str(error["data"]["retryAfter"])
    return False


def refusal(reply: Reply) -> dict[str, Any]:
    assert not passed(reply)
    return reply.response["error"]


def http(port: int, **options: Any) -> Client:
    return Client.http(f"http://127.0.0.1:{port}/mcp", **options)


class Seen:
    """A plain Redis client on the test's server, to see (and flush) what the processes keep there."""

    def __init__(self, url: str) -> None:
        import redis

        self.client = redis.Redis.from_url(url)

    def script_runs(self) -> int:
        return self.client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)

    def limit_keys(self) -> dict[str, int]:
        """The limits' keys, each with its TTL in seconds (-1: none)."""
        return {key.decode(): self.client.ttl(key) for key in self.client.keys("mcpcore:limit:*")}


@pytest.fixture
def seen(redis_server: RedisServer) -> Iterator[Seen]:  # noqa: F811
    redis = Seen(redis_server.url)
    try:
        yield redis
    finally:
        redis.client.close()


def log_lines(logs: Path, process: int, text: str) -> int:
    return sum(text in line for line in (logs / f"{process}.log").read_text(errors="replace").splitlines())


async def test_a_principals_rate_limit_holds_across_two_processes_and_each_principal_has_its_own(
        redis_server: RedisServer, seen: Seen) -> None:  # noqa: F811
    with processes(redis_server, target=GUARDED, extra=("--rate-limit", f"{SLOW}:3")) as (a, b):
        assert [passed(await call(port, "alice")) for port in (a, b, a)] == [True] * 3
        first = refusal(await call(b, "alice"))
        assert first["message"].startswith("Too many requests") and first["data"]["retryAfter"] > 900
        assert not passed(await call(a, "alice"))
        assert passed(await call(b, "bob"))
        seen.client.script_flush()  # as after a Redis restart that kept the data: the script is loaded again
        assert [passed(await call(port, "bob")) for port in (a, b, a)] == [True, True, False]
        assert not passed(await call(b, "alice"))
        keys = seen.limit_keys()
        assert len(keys) == 2 and all(0 < ttl <= 3001 for ttl in keys.values())  # one bucket each, expiring once full


async def test_a_tools_limit_and_the_daily_quotas_count_across_processes_and_a_refused_call_spends_nothing(
        redis_server: RedisServer, seen: Seen) -> None:  # noqa: F811
    extra = ("--tool-rate-limit", f"slow={SLOW}:1", "--daily-quota", "3", "--tool-daily-quota", "send=1")
    with processes(redis_server, target=GUARDED, extra=extra) as (a, b):
        assert passed(await call(a, "alice", "slow"))
        limited = refusal(await call(b, "alice", "slow"))
        assert limited["data"]["tool"] == "slow" and "'slow'" in limited["message"]
        assert passed(await call(b, "alice", "send"))
        over = refusal(await call(a, "alice", "send"))
        assert over["message"].startswith("Daily quota used up: 1 call of 'send' a day; it resets at 00:00 UTC")
        assert over["data"]["quota"] == 1 and over["data"]["tool"] == "send" and over["data"]["period"] == "day"
        assert 1 <= over["data"]["retryAfter"] <= 86_400
        assert passed(await call(b, "alice", "ping"))  # the third counted call: the refused ones spent nothing
        whole_day = refusal(await call(a, "alice", "ping"))
        assert whole_day["message"].startswith("Daily quota used up: 3 calls a day; it resets at 00:00 UTC, in ")
        assert whole_day["data"]["quota"] == 3 and "tool" not in whole_day["data"]
        assert passed(await call(b, "bob", "send"))
        async with http(a, token="erin", era=LEGACY) as first, http(b, token="erin", era=LEGACY) as second:
            assert (await first.call_tool("slow", {})).text == "done"  # a 2025-era session's calls count the same
            with pytest.raises(McpError) as refused:
                await second.call_tool("slow", {})
            assert refused.value.code == 429 and refused.value.data["tool"] == "slow"
        quota_ttls = [ttl for key, ttl in seen.limit_keys().items() if ":q:" in key]  # alice, bob, erin; 2 tools
        assert len(quota_ttls) == 5 and all(0 < ttl <= 86_400 + 60 for ttl in quota_ttls)


async def test_without_redis_the_limits_hold_per_process_said_once_and_hold_fleet_wide_again_when_it_returns(
        redis_server: RedisServer, tmp_path: Path) -> None:  # noqa: F811
    with processes(redis_server, target=GUARDED, extra=("--tool-rate-limit", f"slow={SLOW}:2"), logs=tmp_path) as (a, b):
        assert passed(await call(a, "alice", "slow"))
        redis_server.stop()
        for port in (a, b):  # each process keeps its own bucket now: two calls each, then a 429
            assert [passed(await call(port, "alice", "slow")) for _ in range(3)] == [True, True, False]
        assert [passed(await call(port, "bob", "slow")) for port in (a, a, a, b)] == [True, True, False, True]
        await anyio.sleep(RETRY_SECONDS + 0.2)  # then each tries Redis again, and fails again without a word
        for port in (a, b):
            assert not passed(await call(port, "alice", "slow"))
        assert [log_lines(tmp_path, process, AWAY) for process in (0, 1)] == [1, 1]
        assert passed(await call(b, "dan", "ping"))  # a call no limit applies to never asks Redis

        redis_server.start()  # empty: every bucket starts full again
        for _ in range(100):  # each process tries Redis again a second after its last failure
            for port in (a, b):
                await call(port, "probe", "slow")
            if all(log_lines(tmp_path, process, BACK) for process in (0, 1)):
                break
            await anyio.sleep(0.1)
        assert [log_lines(tmp_path, process, BACK) for process in (0, 1)] == [1, 1]
        assert [passed(await call(port, "carol", "slow")) for port in (a, b, a)] == [True, True, False]
        assert [log_lines(tmp_path, process, AWAY) for process in (0, 1)] == [1, 1]


async def test_huge_and_odd_principals_and_tool_names_make_keys_of_one_small_size_that_all_expire(
        redis_server: RedisServer, seen: Seen) -> None:  # noqa: F811
    hostile = ("alice:*?[]{}\\ %s\t" * 400)[:6000]  # header-safe, 6000 characters, Redis glob and separator characters
    with processes(redis_server, count=1, target=GUARDED,
                   extra=("--rate-limit", f"{SLOW}:3", "--tool-rate-limit", f"slow={SLOW}:1")) as (a,):
        unknown = await call(a, hostile, "x" * 3000 + ":*")
        assert unknown.response["error"]["code"] == -32602  # an unknown tool: a call, but no tool's
        assert passed(await call(a, hostile, "slow"))
        assert not passed(await call(a, hostile, "slow"))  # the tool's bucket refused, so the own one spent nothing
        assert passed(await call(a, hostile[:-1], "ping"))  # another principal, though the same but one character
        assert passed(await call(a, hostile, "ping"))
        assert not passed(await call(a, hostile, "ping"))  # its fourth call
        keys = seen.limit_keys()
        assert len(keys) == 3, keys  # two principals' own buckets, and one tool bucket: no key for the unknown tool
        assert all(len(key) < 64 and "alice" not in key and 0 < ttl for key, ttl in keys.items())


def stdio_server(redis_url: str) -> list[str]:
    return [sys.executable, "-m", "mcpcore", "run", "tests/servers/limits_server.py:server", "--redis", redis_url,
            "--tool-rate-limit", f"slow={SLOW}:1", "--log-level", "warning"]


async def test_stdio_processes_sharing_redis_share_one_callers_limit_and_get_the_json_rpc_error(
        redis_server: RedisServer, seen: Seen) -> None:  # noqa: F811
    env = environment()
    async with Client.stdio(stdio_server(redis_server.url), env=env, cwd=str(ROOT)) as first, \
            Client.stdio(stdio_server(redis_server.url), env=env, cwd=str(ROOT)) as second:
        assert (await first.call_tool("slow", {})).text == "done"
        with pytest.raises(McpError) as refused:
            await second.call_tool("slow", {})
        assert refused.value.code == 429 and refused.value.data["retryAfter"] > 900 and refused.value.data["tool"] == "slow"
        runs = seen.script_runs()
        assert runs > 0
        for _ in range(3):
            assert (await second.call_tool("ping", {})).text == "pong"
        assert seen.script_runs() == runs  # a call no limit applies to never reaches Redis


async def test_without_redis_the_limits_from_the_settings_file_and_environment_hold_per_process(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "mcpcore.toml").write_text(f'target = "{ROOT / GUARDED}"\ntransport = "http"\nport = {port}\n'
                                           f'tool_rate_limit = ["slow={SLOW}:2"]\n')
    process = subprocess.Popen([sys.executable, "-m", "mcpcore", "run"], cwd=tmp_path, stderr=subprocess.DEVNULL,
                               env={**os.environ, "MCPCORE_DAILY_QUOTA": "3"})
    try:
        wait_until_accepting(port)
        assert [passed(await call(port, "alice", "slow")) for _ in range(3)] == [True, True, False]
        assert passed(await call(port, "alice", "ping"))
        assert refusal(await call(port, "alice", "ping"))["data"]["quota"] == 3
    finally:
        stop_gracefully(process)


@pytest.mark.parametrize(("content", "args", "env", "message"), [
    ("", ("--rate-limit", "0"), {}, "argument --rate-limit: invalid rate_limit value: '0'"),
    ("", ("--daily-quota", "1.5"), {}, "argument --daily-quota: invalid quota value: '1.5'"),
    ('tool_rate_limit = ["slow"]\n', (), {}, "mcpcore: --tool-rate-limit takes TOOL=VALUE, not 'slow'"),
    ("", ("--tool-daily-quota", "send=0"), {}, "--tool-daily-quota 'send=0': a daily quota is a whole number of calls >= 1"),
    ("daily_quota = 0\n", (), {}, "mcpcore.toml: daily_quota: '0' is not valid (a daily quota is a whole number"),
    ("", (), {"MCPCORE_RATE_LIMIT": "fast"}, "MCPCORE_RATE_LIMIT: 'fast' is not valid"),
])
def test_a_bad_limit_is_refused_naming_its_option_or_source(tmp_path: Path, content: str, args: tuple[str, ...],
                                                             env: dict[str, str], message: str) -> None:
    (tmp_path / "mcpcore.toml").write_text(f'target = "{ROOT / GUARDED}"\n{content}')
    done = subprocess.run([sys.executable, "-m", "mcpcore", "run", *args], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and message in done.stderr, done.stderr


def test_a_local_limiter_keeps_a_bounded_number_of_buckets_and_refills_them() -> None:
    now = [0.0]
    limiter = LocalLimiter(Limits(rate=(2.0, 1), daily=2), max_callers=3, clock=lambda: now[0], wall=lambda: 10 * DAY + 5)
    rate, day = Limits(rate=(2.0, 1)).checks(Call({})), Check("day", "", 2, 0)
    assert limiter.take(("principal", "a"), rate) is None
    refused = limiter.take(("principal", "a"), rate)
    assert refused is not None and refused.wait == 0.5 and refused.error().data == {"retryAfter": 1}
    now[0] = 0.5
    assert limiter.take(("principal", "a"), rate) is None
    assert [limiter.take(("principal", "a"), [day]) for _ in range(2)] == [None, None]
    over = limiter.take(("principal", "a"), [*rate, day])
    assert over is not None and over.check == day and over.wait == DAY - 5  # the longest wait is the one said
    for name in "bcd":
        limiter.take(("principal", name), rate)
    assert len(limiter._buckets) == 3


def test_limits_refuse_what_cannot_be_a_limit() -> None:
    for bad in ({"rate": (0, 1)}, {"rate": (1, 0)}, {"tools": {"x": (1, 1.5)}}, {"daily": 0}, {"tools_daily": {"x": -1}}):
        with pytest.raises(ValueError, match="needs"):
            Limits(**bad)  # type: ignore[arg-type]
