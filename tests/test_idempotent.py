"""Idempotent tools (`@server.tool(idempotent=...)`, tests/servers/idempotent_server.py): a repeat within the window
gets the first run's result, whether it comes while the first runs or after; per principal, session or stdio
process; by `_meta["dev.mcpcore/idempotencyKey"]` or by arguments; expiring; bounded; across processes sharing a
real redis-server, and taken over from a killed process after the claim's lease."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import ROOT, free_port, meta, tool_call
from http_client import HttpClient, mcp_headers, running
from process_group import wait_until_accepting
from servers.idempotent_server import build
from test_redis import RedisServer, environment, mcpcore_run, redis_server  # noqa: F401  (a fixture)
from mcpcore import IdempotencyLimits, McpError, Server
from mcpcore._runtime.idempotency import IDEMPOTENCY_KEY_META, Idempotency, LocalOnceStore
from mcpcore.auth import AccessToken, Auth
from mcpcore.testing import Client

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
KEY = "7f0c1d9e-2b4a-4e55-9a1b-3c2d1e0f9a8b"
TARGET = "tests/servers/idempotent_server.py:guarded"


class AnyToken:
    async def verify(self, token: str) -> AccessToken:
        return AccessToken(token, "app")


def guarded(**options: Any) -> Server:
    return build(auth=Auth(AnyToken(), "http://127.0.0.1/mcp", ("https://auth.example.com",)), **options)


def http(port: int, **options: Any) -> Client:
    return Client.http(f"http://127.0.0.1:{port}/mcp", **options)


async def send(client: Client, tool: str = "send", key: str | None = None, **arguments: Any) -> dict[str, Any]:
    """A `tools/call` of `tool`, with an idempotency key if given; its result."""
    params: dict[str, Any] = {"name": tool, "arguments": arguments or {"to": "ann@example.com"}}
    if key is not None:
        params["_meta"] = {IDEMPOTENCY_KEY_META: key}
    with anyio.fail_after(30):
        return (await client.request("tools/call", params)).result


def text(result: dict[str, Any]) -> str:
    return result["content"][0]["text"]


@pytest.mark.usefixtures("http_flavour")  # the built-in server and the ASGI adapter
@pytest.mark.parametrize("era", ["2026-07-28", LEGACY])
async def test_the_same_key_twice_runs_the_tool_once_and_both_calls_get_its_result(era: str) -> None:
    server = guarded()
    async with running(server) as served, http(served.port, token="ann", era=era) as ann:
        first = await send(ann, key=KEY)
        again = await send(ann, key=KEY, to="someone else entirely")  # the key names the entry, not the arguments
        assert text(first) == text(again) == "run 1: sent to ann@example.com"
        assert server.runs.lines == ["send ann@example.com"]
        assert text(await send(ann, key=KEY[::-1])) == "run 2: sent to ann@example.com"  # another key, another run


async def test_a_repeat_while_the_first_runs_waits_for_it_and_the_tool_runs_once() -> None:
    server = guarded()
    server.gate = anyio.Event()
    results: list[dict[str, Any]] = []
    async with running(server) as served, http(served.port, token="ann") as ann:
        async with anyio.create_task_group() as calls:
            for _ in range(4):
                calls.start_soon(lambda: _append(results, send(ann, "slow", key=KEY)))
            with anyio.fail_after(10):
                while "slow started" not in server.runs.lines:
                    await anyio.sleep(0.01)
            await anyio.sleep(0.1)  # the repeats arrive while the first runs
            server.gate.set()
    assert [text(result) for result in results] == ["run 2: sent to ann@example.com"] * 4  # run 1 was "started"
    assert server.runs.lines == ["slow started", "slow ann@example.com"]


async def _append(results: list[dict[str, Any]], call: Any) -> None:
    results.append(await call)


async def test_a_first_call_that_ends_in_a_protocol_error_stores_nothing_and_its_waiter_runs_the_tool() -> None:
    server = guarded()
    server.gate = anyio.Event()
    outcomes: list[Any] = []

    async def call() -> None:
        try:
            outcomes.append(text(await send(ann, "refused", key=KEY)))
        except McpError as error:
            outcomes.append(error.message)

    async with running(server) as served, http(served.port, token="ann") as ann:
        async with anyio.create_task_group() as calls:
            calls.start_soon(call)
            with anyio.fail_after(10):
                while not server.runs.lines:
                    await anyio.sleep(0.01)
            calls.start_soon(call)
            await anyio.sleep(0.1)
            server.gate.set()
        assert sorted(outcomes) == ["not now", "run 2: sent to ann@example.com"]
        assert text(await send(ann, "refused", key=KEY)) == "run 2: sent to ann@example.com"  # now stored


@pytest.mark.parametrize("era", ["2026-07-28", LEGACY])
async def test_a_question_for_the_client_is_not_stored_and_the_answered_run_is(era: str) -> None:
    server = guarded()
    asked: list[dict[str, Any]] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"name": "Ann"}}

    async with running(server) as served, http(served.port, token="ann", era=era, elicit=elicit) as ann:
        first, again = await send(ann, "greet", key=KEY), await send(ann, "greet", key=KEY)
        assert text(first) == text(again) == "run 1: Ann greets ann@example.com"
        assert len(asked) == 1 and server.runs.lines == ["greet ann@example.com"]


async def test_a_first_call_cancelled_by_its_client_leaving_lets_its_waiter_run_the_tool() -> None:
    server = guarded()
    server.gate = anyio.Event()
    message = tool_call(1, "slow", to="ann@example.com")
    message["params"]["_meta"] = meta(**{IDEMPOTENCY_KEY_META: KEY})
    results: list[dict[str, Any]] = []
    async with running(server) as served, http(served.port, token="ann") as ann:
        async with anyio.create_task_group() as calls:
            async with anyio.create_task_group() as leaving:
                async def leaves() -> None:
                    async with HttpClient.connect(served) as raw:
                        await raw.post(message, {**mcp_headers(message), "authorization": "Bearer ann"})

                leaving.start_soon(leaves)
                with anyio.fail_after(10):
                    while not server.runs.lines:
                        await anyio.sleep(0.01)
                calls.start_soon(lambda: _append(results, send(ann, "slow", key=KEY)))
                await anyio.sleep(0.1)
                assert server.runs.lines == ["slow started"]  # the repeat waits
                leaving.cancel_scope.cancel()  # the first client hangs up: its call is cancelled, its claim released
            with anyio.fail_after(10):
                while len(server.runs.lines) < 2:
                    await anyio.sleep(0.01)
            server.gate.set()
    assert [text(result) for result in results] == ["run 3: sent to ann@example.com"]
    assert server.runs.lines == ["slow started", "slow started", "slow ann@example.com"]


async def test_an_error_result_is_stored_too_since_the_side_effect_may_have_happened() -> None:
    server = guarded()
    async with running(server) as served, http(served.port, token="ann") as ann:
        first, again = await send(ann, "broken", key=KEY), await send(ann, "broken", key=KEY)
        assert first == again and first["isError"] and "the mail server said no" in text(first)
        assert server.runs.lines == ["broken ann@example.com"]


async def test_another_principal_presenting_the_same_key_or_arguments_runs_the_tool_itself() -> None:
    server = guarded()
    async with running(server) as served:
        async with http(served.port, token="ann") as ann, http(served.port, token="bob") as bob:
            assert text(await send(ann, key=KEY)) == "run 1: sent to ann@example.com"
            assert text(await send(bob, key=KEY)) == "run 2: sent to ann@example.com"
            assert text(await send(bob)) == "run 3: sent to ann@example.com"  # by arguments: bob's own entry
            assert text(await send(ann)) == "run 4: sent to ann@example.com"
            assert text(await send(bob, key=KEY)) == "run 2: sent to ann@example.com"
            assert text(await send(ann)) == "run 4: sent to ann@example.com"


async def test_without_a_key_the_arguments_name_the_entry_within_the_window() -> None:
    server = guarded()
    async with running(server) as served, http(served.port, token="ann") as ann:
        assert text(await send(ann, to="a@example.com")) == "run 1: sent to a@example.com"
        assert text(await send(ann, to="b@example.com")) == "run 2: sent to b@example.com"
        assert text(await send(ann, to="a@example.com")) == "run 1: sent to a@example.com"
        assert text(await send(ann, "plain")) != text(await send(ann, "plain"))  # a tool not declared runs each time


def test_the_arguments_digest_is_of_canonical_json() -> None:
    keeper, ann = Idempotency(), ("principal", "ann")
    assert keeper.entry(ann, "t", {}, {"a": 1, "b": [2, {"c": 3, "d": 4}]}) == \
        keeper.entry(ann, "t", {}, {"b": [2, {"d": 4, "c": 3}], "a": 1})
    assert keeper.entry(ann, "t", {}, {"a": 1}) != keeper.entry(ann, "u", {}, {"a": 1})
    assert keeper.entry(ann, "t", {}, {"a": 1}) != keeper.entry(("principal", "bob"), "t", {}, {"a": 1})


async def test_a_result_expires_after_the_tools_window() -> None:
    now = [0.0]
    server = guarded()
    server.idempotency.store = LocalOnceStore(clock=lambda: now[0])
    async with running(server) as served, http(served.port, token="ann") as ann:
        assert text(await send(ann, "brief")) == text(await send(ann, "brief")) == "run 1: sent to ann@example.com"
        now[0] += 0.19
        assert text(await send(ann, "brief")) == "run 1: sent to ann@example.com"
        now[0] += 0.02  # past the tool's window of 0.2 s (the server's is 300 s)
        assert text(await send(ann, "brief")) == text(await send(ann, "brief")) == "run 2: sent to ann@example.com"


async def test_a_result_over_the_size_bound_is_returned_and_not_stored(caplog: pytest.LogCaptureFixture) -> None:
    server = guarded(idempotency=IdempotencyLimits(max_result_bytes=2000))
    caplog.set_level(logging.WARNING, "mcpcore.idempotency")
    async with running(server) as served, http(served.port, token="ann") as ann:
        large = await send(ann, "big", size=5000)
        assert text(large) == "run 1:" + "x" * 5000
        assert text(await send(ann, "big", size=5000)) == "run 2:" + "x" * 5000
        assert text(await send(ann, "big", size=10)) == text(await send(ann, "big", size=10))
    assert sum("over max_result_bytes (2000): returned, not stored" in record.message for record in caplog.records) == 2


async def test_the_store_keeps_at_most_its_count_and_bytes_dropping_the_oldest() -> None:
    limits = IdempotencyLimits(max_entries=3, max_bytes=100)
    store = LocalOnceStore()
    for number in range(5):
        claim = await store.claim(f"k{number}", limits)
        await claim.settle(b"x" * 10, 60)  # type: ignore[union-attr]
    assert len(store) == 3 and await store.claim("k4", limits) == b"x" * 10
    claim = await store.claim("k0", limits)  # the oldest was dropped: it may run again
    assert not isinstance(claim, bytes) and claim is not None
    await claim.settle(b"y" * 90, 60)
    assert store.bytes <= 100 and await store.claim("k0", limits) == b"y" * 90


@pytest.mark.usefixtures("http_flavour")
async def test_an_anonymous_caller_is_kept_apart_by_its_key_and_without_one_runs_each_time() -> None:
    server = build()
    async with running(server) as served, http(served.port) as first, http(served.port) as second:
        assert text(await send(first)) == "run 1: sent to ann@example.com"
        assert text(await send(second)) == "run 2: sent to ann@example.com"  # nothing tells them apart: no entry
        assert text(await send(first, key=KEY)) == "run 3: sent to ann@example.com"
        assert text(await send(second, key=KEY)) == "run 3: sent to ann@example.com"  # the key is their secret
        for bad in ("short", 42, "x" * 257):
            with pytest.raises(McpError) as refused:
                await send(first, key=bad)  # type: ignore[arg-type]
            assert refused.value.code == -32602 and IDEMPOTENCY_KEY_META in refused.value.message
            assert refused.value.data == {"field": IDEMPOTENCY_KEY_META}
        assert len(server.runs.lines) == 3


async def test_two_2025_sessions_are_two_callers() -> None:
    server = build()
    async with running(server) as served:
        async with http(served.port, era=LEGACY) as first, http(served.port, era=LEGACY) as second:
            assert text(await send(first)) == text(await send(first)) == "run 1: sent to ann@example.com"
            assert text(await send(second)) == text(await send(second)) == "run 2: sent to ann@example.com"


@pytest.mark.parametrize("era", ["2026-07-28", LEGACY])
async def test_a_stdio_process_is_one_caller(era: str, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "tests/servers/idempotent_server.py:server")]
    runs = tmp_path / "runs"
    with anyio.fail_after(60):
        async with Client.stdio(command, era=era, env={**os.environ, "MCPCORE_TEST_RUNS": str(runs)}) as client:
            assert text(await send(client)) == text(await send(client)) == "run 1: sent to ann@example.com"
            assert text(await send(client, key=KEY)) == text(await send(client, key=KEY)) == "run 2: sent to ann@example.com"
        async with Client.stdio(command, era=era, env={**os.environ, "MCPCORE_TEST_RUNS": str(runs)}) as client:
            assert text(await send(client)) == "run 3: sent to ann@example.com"  # another process, another client
    assert runs.read_text().splitlines() == ["send ann@example.com"] * 3


def test_the_annotation_follows_and_contradictions_are_refused() -> None:
    server = Server("annotated")

    @server.tool(idempotent=60, annotations={"destructiveHint": True})
    def charge(amount: int) -> str:
        return "charged"

    assert server.tools.get("charge").describe()["annotations"] == {"destructiveHint": True, "idempotentHint": True}
    with pytest.raises(ValueError, match="positive numbers of seconds"):
        IdempotencyLimits(window=0)
    for options, reason in (({"annotations": {"idempotentHint": False}}, "contradicts"),
                            ({"task": "optional"}, "cannot run as a task")):
        with pytest.raises(ValueError, match=reason):
            server.tool(idempotent=True, name="other", **options)(lambda: "x")
    for window in (0, -1, "10", float("nan"), float("inf")):
        with pytest.raises(ValueError, match="idempotent="):
            server.tool(idempotent=window, name="other")(lambda: "x")


# -- across processes, on a real redis-server ---------------------------------------------------------------------


def serve(redis: RedisServer, runs: Path, count: int = 2, log: Path | None = None) -> list[tuple[int, subprocess.Popen[bytes]]]:
    """`count` processes serving the guarded server over HTTP with `--redis`; their ports and processes."""
    env = {**environment(), "MCPCORE_TEST_RUNS": str(runs)}
    started = []
    for _ in range(count):
        port = free_port()
        with open(log, "ab") if log else contextlib.nullcontext(subprocess.DEVNULL) as errors:  # type: ignore[attr-defined]
            started.append((port, subprocess.Popen(mcpcore_run(port, redis.url, TARGET), cwd=ROOT, env=env,
                                                   stderr=errors)))
    for port, _ in started:
        wait_until_accepting(port)
    return started


def stop(started: list[tuple[int, subprocess.Popen[bytes]]]) -> None:
    for _, process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for _, process in started:
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def test_two_processes_sharing_redis_run_the_tool_once(redis_server: RedisServer, tmp_path: Path) -> None:  # noqa: F811
    runs = tmp_path / "runs"
    started = serve(redis_server, runs)
    try:
        (a, _), (b, _) = started
        async with http(a, token="ann") as on_a, http(b, token="ann") as on_b, http(b, token="bob") as bob:
            assert text(await send(on_a, key=KEY)) == text(await send(on_b, key=KEY)) == "run 1: sent to ann@example.com"
            assert text(await send(on_b)) == text(await send(on_a)) == "run 2: sent to ann@example.com"
            assert text(await send(bob, key=KEY)) == "run 3: sent to ann@example.com"
            assert text(await send(on_a, "big", size=5000)) != text(await send(on_b, "big", size=5000))  # not stored
    finally:
        stop(started)
    import redis

    seen = redis.Redis.from_url(redis_server.url)
    try:
        keys = [key.decode() for key in seen.keys("mcpcore:once:*")]
        assert len(keys) == 3 and all(0 < seen.pttl(key) <= 300_000 for key in keys)  # each expires with the window
        assert not any("ann" in key or "bob" in key for key in keys)
    finally:
        seen.close()


async def test_a_claim_is_renewed_while_its_tool_runs_past_the_lease(redis_server: RedisServer, tmp_path: Path) -> None:  # noqa: F811
    runs = tmp_path / "runs"
    hold = runs.with_suffix(".hold")
    hold.touch()
    started = serve(redis_server, runs)
    try:
        (a, _), (b, _) = started
        results: list[dict[str, Any]] = []
        async with http(a, token="ann") as on_a, http(b, token="ann") as on_b, anyio.create_task_group() as calls:
            calls.start_soon(lambda: _append(results, send(on_a, "hold", key=KEY)))
            with anyio.fail_after(20):
                while not runs.exists():
                    await anyio.sleep(0.02)
            calls.start_soon(lambda: _append(results, send(on_b, "hold", key=KEY)))
            await anyio.sleep(2.5)  # over twice the lease (1 s): the claimant renews it, so the repeat still waits
            hold.unlink()
        assert [text(result) for result in results] == ["run 2: sent to ann@example.com"] * 2
        assert runs.read_text().splitlines() == ["hold started", "hold ann@example.com"]
    finally:
        stop(started)


async def test_a_claim_whose_process_was_killed_is_taken_over_after_its_lease(
        redis_server: RedisServer, tmp_path: Path) -> None:  # noqa: F811
    runs = tmp_path / "runs"
    hold = runs.with_suffix(".hold")
    hold.touch()
    started = serve(redis_server, runs)
    try:
        (a, first), (b, _) = started
        async with anyio.create_task_group() as calls, http(b, token="ann") as on_b:
            async def doomed() -> None:
                with contextlib.suppress(Exception):  # its process is killed under it
                    async with http(a, token="ann") as on_a:
                        await send(on_a, "hold", key=KEY)

            calls.start_soon(doomed)
            with anyio.fail_after(20):
                while not runs.exists() or "hold started" not in runs.read_text():
                    await anyio.sleep(0.02)
            waiter: list[dict[str, Any]] = []
            calls.start_soon(lambda: _append(waiter, send(on_b, "hold", key=KEY)))
            await anyio.sleep(0.3)
            assert runs.read_text().splitlines() == ["hold started"]  # the repeat waits
            first.kill()  # the claimant dies mid-run; its claim lapses after the lease (1 s)
            first.wait(10)
            hold.unlink()
            with anyio.fail_after(20):
                while not waiter:
                    await anyio.sleep(0.05)
            calls.cancel_scope.cancel()  # the killed process's caller never hears back
        assert text(waiter[0]) == "run 3: sent to ann@example.com"
        assert runs.read_text().splitlines() == ["hold started", "hold started", "hold ann@example.com"]
    finally:
        stop(started)


async def test_while_redis_is_away_results_are_kept_per_process_with_one_warning(
        redis_server: RedisServer, tmp_path: Path) -> None:  # noqa: F811
    runs, log = tmp_path / "runs", tmp_path / "server.log"
    started = serve(redis_server, runs, count=1, log=log)
    try:
        (port, _), = started
        async with http(port, token="ann") as ann:
            assert text(await send(ann, key=KEY)) == "run 1: sent to ann@example.com"
            redis_server.stop()
            assert text(await send(ann, key=KEY)) == text(await send(ann, key=KEY)) == "run 2: sent to ann@example.com"
    finally:
        stop(started)
    lines = log.read_text(errors="replace").splitlines()
    assert sum("idempotent tools: Redis is unreachable" in line for line in lines) == 1


async def test_an_idempotent_tool_under_a_result_budget_runs_once_and_each_answer_is_cut() -> None:
    server = guarded(result_budget=1024)

    @server.tool(idempotent=True)
    def report(to: str) -> str:
        return f"run {server.runs.record('report ' + to)}: " + "x" * 3000  # type: ignore[attr-defined]

    async with running(server) as served, http(served.port, token="ann") as ann:
        first = await send(ann, "report", key=KEY)
        again = await send(ann, "report", key=KEY)
    assert server.runs.lines == ["report ann@example.com"]  # type: ignore[attr-defined]
    for answer in (first, again):
        assert text(answer).startswith("run 1: xxx") and len(text(answer)) < 1024
        assert [block["type"] for block in answer["content"]][-1] == "resource_link"
