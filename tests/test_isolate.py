"""Isolated tools (`@server.tool(isolate=True, timeout=..., memory=...)`): run in worker processes that
are killed and replaced on a timeout, a cancellation or memory exhaustion, through a real HTTP server
on 127.0.0.1 and a real stdio server subprocess. The tools are in tests/isolated_tools.py. Whether a
worker is gone is read in /proc (a zombie counts as gone), so these run on Linux only."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any, AsyncIterator

import anyio
import pytest

import isolated_tools
from conftest import LEGACY_VERSIONS, ROOT, meta, request
from http_client import running
from mcpcore import Depends, Server
from mcpcore.testing import Client
from stdio_client import serve

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]

SERVE_TOOLS = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "tests" / "isolated_tools.py")]


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped before, or between the open and the read
        return True


async def until_gone(*pids: int) -> None:
    with anyio.fail_after(10):
        while not all(gone(pid) for pid in pids):
            await anyio.sleep(0.05)


class Pids:
    """Worker pids a tool reported as its first progress message."""

    def __init__(self) -> None:
        self.seen: list[int] = []
        self.event = anyio.Event()

    async def __call__(self, params: dict[str, Any]) -> None:
        if params.get("message", "").isdigit():
            self.seen.append(int(params["message"]))
            self.event.set()

    async def first(self) -> int:
        with anyio.fail_after(15):
            await self.event.wait()
        return self.seen[0]


def http_client(http: Any, **options: Any) -> Client:
    return Client.http(f"http://127.0.0.1:{http.port}/mcp", strict=True, **options)


@pytest.fixture
async def served() -> AsyncIterator[tuple[Server, Any]]:
    server = isolated_tools.make_server()
    try:
        async with running(server, via="h11") as http:
            yield server, http
    finally:
        await server.isolated.aclose()  # also when the test failed before the server stopped


async def test_a_result_crosses_and_the_worker_is_reused(served: tuple[Server, Any]) -> None:
    server, http = served
    with anyio.fail_after(30):
        async with http_client(http) as client:
            first = await client.call_tool("add", {"a": 2, "b": 3})
            again = await client.call_tool("add_async", {"a": 4, "b": 5})
    assert first.structured["sum"] == 5 and again.structured["sum"] == 9
    assert first.structured["pid"] != os.getpid()
    assert again.structured["pid"] == first.structured["pid"] and server.isolated.pids == [first.structured["pid"]]


async def test_a_hanging_tool_times_out_its_worker_is_killed_and_the_next_call_works(served: tuple[Server, Any]) -> None:
    server, http = served
    pids = Pids()
    with anyio.fail_after(30):
        async with http_client(http, on_progress=pids) as client:
            hung = await client.call_tool("hang", {})
            assert hung.is_error and "timed out after 1.5 s" in hung.text, hung.text
            await until_gone(await pids.first())
            after = await client.call_tool("worker_pid", {})
    assert not after.is_error and int(after.text) != pids.seen[0] and server.isolated.pids == [int(after.text)]


async def test_a_memory_hog_gets_the_memory_error_and_the_server_lives(served: tuple[Server, Any]) -> None:
    _, http = served
    pids = Pids()
    with anyio.fail_after(30):
        async with http_client(http, on_progress=pids) as client:
            hog = await client.call_tool("hog", {})
            assert hog.is_error and "ran out of memory (memory=256 MiB)" in hog.text, hog.text
            await until_gone(await pids.first())
            after = await client.call_tool("add", {"a": 1, "b": 1})
    assert after.structured["sum"] == 2


async def test_a_worker_killed_from_outside_mid_call_is_a_clear_error_and_is_replaced(served: tuple[Server, Any]) -> None:
    server, http = served
    pids = Pids()
    with anyio.fail_after(30):
        async with http_client(http, on_progress=pids) as client:
            async with anyio.create_task_group() as group:
                outcome: list[Any] = []

                async def call() -> None:
                    outcome.append(await client.call_tool("hang_untimed", {}))

                group.start_soon(call)
                os.kill(await pids.first(), signal.SIGKILL)
            assert outcome[0].is_error and "died of signal SIGKILL" in outcome[0].text, outcome[0].text
            after = await client.call_tool("worker_pid", {})
    assert int(after.text) != pids.seen[0] and server.isolated.pids == [int(after.text)]


async def test_a_disconnect_kills_the_worker_and_the_pool_serves_the_next_call(served: tuple[Server, Any]) -> None:
    server, http = served
    pids = Pids()
    with anyio.fail_after(30):
        async with http_client(http, on_progress=pids) as client:
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "hang_untimed", {})
                pid = await pids.first()
                group.cancel_scope.cancel()  # the client closes that call's connection
            await until_gone(pid)
            after = await client.call_tool("worker_pid", {})
    assert int(after.text) != pid and server.isolated.pids == [int(after.text)]


@pytest.mark.parametrize("era", ["2026-07-28", LEGACY_VERSIONS[0]])
async def test_progress_and_log_messages_reach_the_client(served: tuple[Server, Any], era: str) -> None:
    _, http = served
    with anyio.fail_after(30):
        async with http_client(http, era=era, log_level="debug") as client:
            sync = await client.call_tool("chatty", {"steps": 3})
            asynchronous = await client.call_tool("chatty_async", {})
    assert sync.text == "done" and asynchronous.text == "done"
    assert [(p["progress"], p["total"], p["message"]) for p in sync.progress] == [(1, 3, "step 1"), (2, 3, "step 2"),
                                                                                  (3, 3, "step 3")]
    assert [log["level"] for log in sync.logs] == ["info"] and sync.logs[0]["data"]["pid"] != os.getpid()
    assert [(p["progress"], p.get("total")) for p in asynchronous.progress] == [(1, 1)]
    assert [(log["level"], log["data"]) for log in asynchronous.logs] == [("warning", "careful")]


async def test_callers_beyond_the_pool_wait_for_a_worker(served: tuple[Server, Any]) -> None:
    server = isolated_tools.make_server(isolate_workers=1)
    answers: list[dict[str, Any]] = []
    try:
        with anyio.fail_after(30):
            async with running(server, via="h11") as http, http_client(http) as client:

                async def call(a: int) -> None:
                    answers.append((await client.call_tool("add", {"a": a, "b": 0})).structured)

                async with anyio.create_task_group() as group:
                    for a in range(3):
                        group.start_soon(call, a)
    finally:
        await server.isolated.aclose()
    assert sorted(answer["sum"] for answer in answers) == [0, 1, 2]
    assert len({answer["pid"] for answer in answers}) == 1


async def test_a_result_that_is_not_json_is_a_clear_error(served: tuple[Server, Any]) -> None:
    _, http = served
    with anyio.fail_after(30):
        async with http_client(http) as client:
            outcome = await client.call_tool("unserialisable", {})
    assert outcome.is_error and "its object result cannot cross as JSON" in outcome.text, outcome.text


async def test_a_capped_call_leaves_the_next_uncapped_call_of_its_worker_free() -> None:
    server = isolated_tools.make_server(isolate_workers=1)
    try:
        with anyio.fail_after(30):
            async with running(server, via="h11") as http, http_client(http) as client:
                capped = await client.call_tool("allocate_capped", {"mib": 1})
                free = await client.call_tool("allocate", {"mib": 512})
    finally:
        await server.isolated.aclose()
    assert not free.is_error, free.text
    assert free.structured == {"bytes": 512 * isolated_tools.MIB, "pid": capped.structured["pid"]}


async def test_what_the_function_raises_is_worded_as_in_process(served: tuple[Server, Any]) -> None:
    _, http = served
    with anyio.fail_after(30):
        async with http_client(http) as client:
            explained = await client.call_tool("refuse", {"why": "tool"})
            bug = await client.call_tool("refuse", {"why": "bug"})
    assert explained.is_error and explained.text == "not today"
    assert bug.is_error and bug.text == "Error in tool 'refuse': ValueError: a bug"


async def test_no_worker_is_left_after_the_server_stops() -> None:
    server = isolated_tools.make_server(isolate_workers=2)
    pids = Pids()
    try:
        with anyio.fail_after(30):
            async with running(server, via="h11", grace_period=0.5) as http, http_client(http, on_progress=pids) as client:

                async def cut_short() -> None:
                    with pytest.raises(ConnectionError):  # the server stops before it answers
                        await client.call_tool("hang_untimed", {})

                async with anyio.create_task_group() as group:
                    group.start_soon(cut_short)
                    busy = await pids.first()
                    idle = int((await client.call_tool("worker_pid", {})).text)  # a second worker, idle after
                    assert busy != idle and sorted(server.isolated.pids) == sorted([idle, busy])
                    http.stop()  # the busy call is cancelled after the grace period
                    await until_gone(idle, busy)
    finally:
        await server.isolated.aclose()
    assert server.isolated.pids == []


async def test_over_stdio_a_cancelled_call_kills_its_worker_and_none_outlives_the_server() -> None:
    async with serve(SERVE_TOOLS) as client:
        with anyio.fail_after(30):
            first = await client.call("tools/call", 1, name="worker_pid", arguments={})
            idle = int(first["result"]["content"][0]["text"])
            await client.send(request("tools/call", 2, _meta=meta(progressToken="p"), name="hang_untimed", arguments={}))
            while not (progress := [m for m in client.received if m.get("method") == "notifications/progress"]):
                await client.read()
            busy = int(progress[0]["params"]["message"])
            await client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
            await until_gone(busy)
            after = await client.call("tools/call", 3, name="worker_pid", arguments={})
            fresh = int(after["result"]["content"][0]["text"])
            assert fresh != busy
            await client.close_stdin()
            assert await client.wait() == 0
            await until_gone(idle, fresh)


async def test_a_worker_exits_when_its_server_is_killed() -> None:
    async with serve(SERVE_TOOLS) as client:
        with anyio.fail_after(30):
            await client.send(request("tools/call", 1, _meta=meta(progressToken="p"), name="hang_untimed", arguments={}))
            while not (progress := [m for m in client.received if m.get("method") == "notifications/progress"]):
                await client.read()
            busy = int(progress[0]["params"]["message"])
            client.process.kill()  # SIGKILL: no lifespan end, the worker's stdin closes with the server
            await client.wait()
            try:
                await until_gone(busy)
            finally:  # no orphan left behind, even when this fails
                with contextlib.suppress(ProcessLookupError):
                    os.kill(busy, signal.SIGKILL)


def _nested() -> Any:
    def inner() -> str:
        return "x"

    return inner


@pytest.mark.parametrize(
    ("fn", "options", "words"),
    [
        (lambda: "x", {"name": "anonymous"}, "a lambda"),
        (_nested(), {}, "not defined at the top of its module"),
        (isolated_tools.add, {"inline": True}, "inline=True"),
        (isolated_tools.add, {"timeout": 0}, "timeout= is seconds"),
    ],
)
def test_what_a_worker_cannot_run_is_refused_at_registration(fn: Any, options: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        Server("refused").add_tool(fn, isolate=True, **options)


def test_dependencies_and_limits_without_isolation_are_refused() -> None:
    def token() -> str:
        return "t"

    def needs(value: str = Depends(token)) -> str:
        return value

    with pytest.raises(ValueError, match="Depends"):
        Server("refused").add_tool(needs, isolate=True)
    with pytest.raises(ValueError, match="isolate=True"):
        Server("refused").add_tool(isolated_tools.add, timeout=5)
