"""The sync worker pool: results, errors, contextvars, anyio's from_thread, and its bound.

Pool tests drive `ThreadPool` directly; the end-to-end ones run sync tools
behind a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
import os
import threading
from typing import Any, Callable

import anyio
import anyio.from_thread
import orjson
import pytest

from conftest import meta, request
from http_client import HttpClient, mcp_headers, running
from mcpcore import Context, Server
from mcpcore._runtime.threads import ThreadPool

pytestmark = pytest.mark.anyio

WHO = contextvars.ContextVar("who", default="nobody")


async def until(condition: Callable[[], bool]) -> None:
    """Poll a condition another thread makes true; give up (and fail) after 10 s."""
    with anyio.fail_after(10):
        while not condition():
            await anyio.sleep(0.005)


async def run_in(scope: anyio.CancelScope, pool: ThreadPool, fn: Callable[..., Any], *args: Any) -> None:
    with scope:
        await pool.run(fn, *args)


async def test_a_result_an_error_and_the_callers_contextvars_come_back() -> None:
    pool = ThreadPool(max_threads=2)
    WHO.set("caller")
    assert await pool.run(lambda a, b: (a + b, WHO.get(), threading.current_thread().name), 2, 3) == (
        5,
        "caller",
        "mcpcore sync worker",
    )
    with pytest.raises(KeyError, match="missing"):
        await pool.run({}.__getitem__, "missing")


async def test_a_function_raising_stop_iteration_fails_its_call_alone() -> None:
    """A future refuses StopIteration: it comes back as a RuntimeError, and the other jobs of the
    same batch are still answered."""
    pool = ThreadPool(max_threads=4)
    release = threading.Event()

    def stop() -> None:
        release.wait(10)
        raise StopIteration("no more")

    def value(n: int) -> int:
        release.wait(10)
        return n

    outcomes: dict[str, Any] = {}

    async def keep(key: str, fn: Callable[..., Any], *args: Any) -> None:
        try:
            outcomes[key] = await pool.run(fn, *args)
        except RuntimeError as error:
            outcomes[key] = error

    with anyio.fail_after(10):  # before the fix, the batch's other jobs were never answered
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(keep, "stop", stop)
            for n in range(3):
                tasks.start_soon(keep, f"v{n}", value, n)
            await until(lambda: pool.threads == 4)
            release.set()
    stopped = outcomes.pop("stop")
    assert isinstance(stopped, RuntimeError) and isinstance(stopped.__cause__, StopIteration)
    assert "StopIteration: no more" in str(stopped)
    assert outcomes == {"v0": 0, "v1": 1, "v2": 2}


async def test_a_sync_tool_raising_stop_iteration_is_a_tool_error() -> None:
    server = Server("stop")

    @server.tool
    def exhausted() -> str:
        return next(iter(()))

    with anyio.fail_after(10):  # before the fix, the call was never answered
        async with running(server) as http, HttpClient.connect(http) as client:
            message = request("tools/call", 1, name="exhausted", arguments={})
            result = (await client.post(message, mcp_headers(message))).response["result"]
    assert result["isError"] is True and "StopIteration" in result["content"][0]["text"]


async def test_many_quick_jobs_share_few_threads_and_all_finish() -> None:
    pool = ThreadPool(max_threads=4)
    results: list[int] = []

    async def one(n: int) -> None:
        results.append(await pool.run(lambda: n * n))

    async with anyio.create_task_group() as tasks:
        for n in range(500):
            tasks.start_soon(one, n)
    assert sorted(results) == [n * n for n in range(500)] and pool.threads <= 4


async def test_anyio_from_thread_reaches_the_loop() -> None:
    pool = ThreadPool()
    loop_thread = threading.get_ident()

    async def on_loop(x: int) -> tuple[int, bool]:
        return x + 1, threading.get_ident() == loop_thread

    assert await pool.run(anyio.from_thread.run, on_loop, 41) == (42, True)


async def test_idle_threads_retire() -> None:
    pool = ThreadPool(max_threads=3, idle_timeout=0.05)
    release = threading.Event()
    async with anyio.create_task_group() as tasks:
        for _ in range(3):
            tasks.start_soon(pool.run, release.wait)
        await until(lambda: pool.threads == 3)
        release.set()
    await until(lambda: pool.threads == 0)
    assert await pool.run(lambda: "again") == "again"  # a retired pool starts afresh


async def test_cancelled_calls_hold_their_threads_within_the_bound(caplog: pytest.LogCaptureFixture) -> None:
    pool = ThreadPool(max_threads=2)
    release, started = threading.Event(), []

    def hold(n: int) -> None:
        started.append(n)
        release.wait()

    async with anyio.create_task_group() as tasks:
        scopes = [anyio.CancelScope() for _ in range(10)]
        for n, scope in enumerate(scopes):
            tasks.start_soon(run_in, scope, pool, hold, n)
            if n < 2:
                await until(lambda: n in started)
        await anyio.wait_all_tasks_blocked()
        for scope in scopes:
            scope.cancel()
    # Two ran and were abandoned; eight were cancelled while queued and never start.
    assert pool.threads == 2 and pool.abandoned == 2 and started == [0, 1]
    with caplog.at_level(logging.WARNING, logger="mcpcore.threads"):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: pool.run(lambda: started.append(99)))
            await anyio.wait_all_tasks_blocked()
            assert 99 not in started  # waits for a thread
            assert any("held by cancelled calls" in r.getMessage() for r in caplog.records)
            release.set()
    await until(lambda: pool.abandoned == 0)  # both abandoned functions have returned
    assert started == [0, 1, 99] and pool.threads == 2


async def test_a_sync_tool_reports_progress_through_from_thread() -> None:
    server = Server("sync-progress")

    @server.tool
    def count(n: int, ctx: Context) -> str:
        for i in range(1, n + 1):
            anyio.from_thread.run(ctx.progress, i, n)
        return "counted"

    message = request("tools/call", 1, meta(progressToken="p"), name="count", arguments={"n": 3})
    async with running(server) as http, HttpClient.connect(http) as client:
        reply = await client.post(message, mcp_headers(message))
    assert reply.is_sse
    assert [m["params"]["progress"] for m in reply.messages[:-1]] == [1, 2, 3]
    assert reply.response["result"]["content"][0]["text"] == "counted"


async def test_disconnect_cycles_on_a_blocking_sync_tool_stay_within_the_thread_bound() -> None:
    """100 calls of a blocking tool, each dropped by closing its socket: at most
    `max_threads` threads are ever held, the count is visible, other calls go on."""
    server = Server("abandon", max_threads=3)
    release, began = threading.Event(), []

    @server.tool
    def block(n: int) -> str:
        began.append(n)
        release.wait()
        return "done"

    @server.tool
    def echo(text: str) -> str:
        return text

    @server.tool
    async def ping() -> str:
        return "pong"

    def tool_call(request_id: int, name: str, **arguments: Any) -> dict[str, Any]:
        return request("tools/call", request_id, name=name, arguments=arguments)

    threads_before = threading.active_count()
    try:
        async with running(server) as http:
            for n in range(100):
                message = tool_call(n, "block", n=n)
                async with HttpClient.connect(http) as client:
                    await client.send_request(headers=mcp_headers(message), body=orjson.dumps(message))
                    await until(lambda: len(http.runner.calls) == 1 and (n >= 3 or n in began))
                await until(lambda: not http.runner.calls)  # the disconnect cancelled it
            assert began == [0, 1, 2] and server.threads.abandoned == 3 and server.threads.threads == 3
            assert threading.active_count() - threads_before <= 3
            async with HttpClient.connect(http) as client:
                ping = tool_call(100, "ping")
                assert (await client.post(ping, mcp_headers(ping))).response["result"]["content"][0]["text"] == "pong"
                release.set()
                await until(lambda: server.threads.abandoned == 0)
                echo_call = tool_call(101, "echo", text="hi")
                assert (await client.post(echo_call, mcp_headers(echo_call))).response["result"]["content"][0]["text"] == "hi"
            assert began == [0, 1, 2]  # the 97 dropped while queued never ran
    finally:
        release.set()


async def test_an_inline_sync_tool_runs_on_the_event_loop() -> None:
    server = Server("inline")
    loop_thread = threading.get_ident()

    @server.tool(inline=True)
    def where() -> bool:
        return threading.get_ident() == loop_thread

    @server.tool
    def elsewhere() -> bool:
        return threading.get_ident() == loop_thread

    async with running(server) as http, HttpClient.connect(http) as client:
        for name, on_loop in (("where", "true"), ("elsewhere", "false")):
            message = request("tools/call", name, name=name, arguments={})
            assert (await client.post(message, mcp_headers(message))).response["result"]["content"][0]["text"] == on_loop
    assert server.threads.threads == 1


def test_inline_is_refused_for_an_async_tool() -> None:
    server = Server("inline")

    async def already_on_the_loop() -> str:
        return ""

    with pytest.raises(ValueError, match="inline=True is for sync functions"):
        server.add_tool(already_on_the_loop, inline=True)


def test_a_thread_claimed_for_one_loop_serves_the_next_one() -> None:
    """A worker stays claimed for anyio from one job of a loop to the next: a job of another loop
    (a second `anyio.run` on the same pool) must reach that loop, not the first, closed one."""
    pool = ThreadPool(max_threads=1)

    async def current_loop() -> object:
        return asyncio.get_running_loop()

    async def reached_from_a_worker() -> tuple[object, object]:
        return await pool.run(anyio.from_thread.run, current_loop), asyncio.get_running_loop()

    for _ in range(2):
        reached, loop = anyio.run(reached_from_a_worker)
        assert reached is loop
    assert pool.threads == 1


async def test_a_submitted_job_takes_keyword_arguments_and_a_cancelled_one_never_runs() -> None:
    pool = ThreadPool(max_threads=1)
    release, ran = threading.Event(), []
    held = pool.submit(release.wait)
    dropped = pool.submit(ran.append, ("dropped",))
    dropped.cancel()  # while queued behind the held job
    release.set()
    assert await held is True
    assert await pool.submit(dict, (), {"text": "hi"}) == {"text": "hi"}
    assert ran == [] and pool.abandoned == 0


@pytest.mark.skipif(not hasattr(os, "eventfd"), reason="the eventfd waker is Linux's")
def test_a_loops_eventfd_is_closed_once_the_loop_is_gone() -> None:
    """Each loop a pool serves gets an eventfd of its own to be woken through; one per loop that is
    still alive, so a pool serving loop after loop holds no more descriptors than it started with."""
    pool = ThreadPool(max_threads=2)

    async def burst() -> list[int]:
        async with anyio.create_task_group() as tasks:
            for n in range(20):
                tasks.start_soon(pool.run, abs, -n)
        return [await pool.run(abs, -n) for n in range(3)]

    def descriptors() -> int:
        """The process's eventfds (other tests' leftovers may open or close other descriptors meanwhile)."""
        gc.collect()
        return sum(_readlink(f"/proc/self/fd/{fd}") == "anon_inode:[eventfd]" for fd in os.listdir("/proc/self/fd"))

    assert anyio.run(burst) == [0, 1, 2]
    before = descriptors()
    for _ in range(5):
        assert anyio.run(burst) == [0, 1, 2]
    assert descriptors() <= before


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:  # closed since it was listed
        return ""


async def test_without_an_eventfd_the_loop_is_woken_through_call_soon_threadsafe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPCORE_PORTABLE", "1")  # what the portable paths use, as on a platform without eventfd
    pool = ThreadPool(max_threads=4)
    results: list[int] = []

    async def one(n: int) -> None:
        results.append(await pool.submit(pow, (n, 2)))

    async with anyio.create_task_group() as tasks:
        for n in range(200):
            tasks.start_soon(one, n)
    assert sorted(results) == [n * n for n in range(200)]
    assert all(waker.fd is None for waker in pool._wakers.values())
