"""Several processes sharing state on a real `redis-server` (`--redis URL`): the change bus, tasks,
2025-era sessions, faults.

Each test starts its own `redis-server` on a loopback port (skipped without one, unless
`MCPCORE_TEST_REDIS=required`, as in CI) and `mcpcore run` processes of `shared_server` below,
and stops all of them however the test ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import anyio
import orjson
import pytest

from conftest import ROOT, free_port, legacy, request
from http_client import HttpClient, SseStream
from process_group import stop_gracefully, wait_until_accepting
from servers import legacy_server
from mcpcore import Context, Elicit, InputRequired, McpError, Server
from mcpcore.auth import AccessToken, Auth, StaticTokens
from mcpcore.testing import Client
from task_store_contract import TaskStoreContract
from test_interop_ts_sdk import expect_every_feature

pytestmark = pytest.mark.anyio

KEYS = "redis-tests-shared-key-0123456789abcdef"
TASKS = {"io.modelcontextprotocol/tasks": {}}
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

shared_server = Server("shared")


@shared_server.tool
def greet(name: str) -> str:
    return f"Hello, {name}!"


@shared_server.tool
def change_tools() -> str:
    shared_server.notify_tools_changed()
    return "announced"


@shared_server.tool(task="optional")
async def nap(seconds: float) -> str:
    await anyio.sleep(seconds)
    return f"slept {seconds:g}"


@shared_server.tool(task="optional")
async def hold(marker: str) -> str:
    """Wait; a cancelled round says so in the file `marker`."""
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        Path(marker).write_text("cancelled")
        raise
    return "held"


@shared_server.tool(task="optional")
def confirm(ctx: Context) -> str:
    answer = ctx.answer("ok")
    if answer is None:
        raise InputRequired(ok=Elicit("Go on?", CONFIRM))
    return f"confirmed: {answer.content['ok']}"


paced_server = Server("paced")  # a 2025-era call that ends its stream early, then waits for the test


@paced_server.tool
async def paced(marker: str, ctx: Context) -> str:
    await ctx.progress(1, total=2)
    await ctx.close_stream()
    while not Path(marker).exists():
        await anyio.sleep(0.02)
    await ctx.progress(2, total=2)
    return "paced"


short_lived_server = Server("short-lived")  # its tasks expire half a second after creation
short_lived_server.tasks.configure(ttl_ms=500)
short_lived_server.add_tool(hold, task="optional")
short_lived_server.add_tool(nap, task="optional")

limited_server = Server("limited")  # three tasks at most, however many processes create them
limited_server.tasks.configure(max_tasks_per_principal=3)
limited_server.add_tool(nap, task="required")


authenticated_server = Server("authenticated", auth=Auth(StaticTokens({
    "desk-token": AccessToken("bob", "desk-app"),
    "phone-token": AccessToken("bob", "phone-app"),
}), "http://127.0.0.1/mcp", ("https://auth.example.com",)))


@authenticated_server.tool(task="optional")
def audited(ctx: Context) -> str:
    """Reports the token each round ran with: the creating call's, then the answering update's."""
    seen = "no token" if ctx.auth is None else f"{ctx.auth.subject} via {ctx.auth.client_id}"
    if ctx.state is None:
        raise InputRequired(ok=Elicit("Go on?", CONFIRM), state={"first": seen})
    return f"{ctx.state['first']}; then {seen}"


class RedisServer:
    """A `redis-server` of this test, on a loopback port, without persistence (unless `persist` names
    a folder: then it logs every write there and a restart keeps the data, as a production Redis does)."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None
        self.persist: Path | None = None

    def start(self) -> None:
        durability = ["--save", "", "--appendonly", "no"] if self.persist is None else [
            "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.persist)]
        self.process = subprocess.Popen([self.executable, "--port", str(self.port), "--bind", "127.0.0.1", *durability],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until_accepting(self.port)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    executable = shutil.which("redis-server")
    if executable is None:
        if os.environ.get("MCPCORE_TEST_REDIS") == "required":
            pytest.fail("redis-server is not installed, and MCPCORE_TEST_REDIS=required")
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    server = RedisServer(executable)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def mcpcore_run(port: int, redis_url: str | None, target: str = "tests/test_redis.py:shared_server",
                extra: tuple[str, ...] = ()) -> list[str]:
    """The command serving `target` over HTTP on `port`; with `--redis` unless `redis_url` is None (the
    target names its store in code)."""
    shared = ("--redis", redis_url) if redis_url is not None else ()
    return [sys.executable, "-m", "mcpcore", "run", target, "--transport", "http", "--port", str(port), *shared,
            "--log-level", "info", *extra]


def environment(keys: str | None = KEYS) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "MCPCORE_STATE_KEYS"}
    if keys is not None:
        env["MCPCORE_STATE_KEYS"] = keys
    return env


@contextlib.contextmanager
def processes(redis: RedisServer, count: int = 2, target: str = "tests/test_redis.py:shared_server",
              extra: tuple[str, ...] = (), store_in_code: bool = False, logs: Path | None = None) -> Iterator[list[int]]:
    """`count` mcpcore processes of `target` sharing `redis`, each on a port of its own; their ports.
    `store_in_code`: no `--redis`; the target reads the URL from `MCPCORE_TEST_REDIS_URL`. `logs`: a folder
    where process i writes its stderr to `i.log`."""
    ports = [free_port() for _ in range(count)]
    env = {**environment(), "MCPCORE_TEST_REDIS_URL": redis.url} if store_in_code else environment()
    url = None if store_in_code else redis.url
    with contextlib.ExitStack() as files:
        errors = [files.enter_context(open(logs / f"{i}.log", "wb")) if logs else subprocess.DEVNULL for i in range(count)]
        started = [subprocess.Popen(mcpcore_run(port, url, target, extra), cwd=ROOT, env=env,
                                    stderr=error) for port, error in zip(ports, errors)]
    try:
        for port in ports:
            wait_until_accepting(port)
        yield ports
    finally:
        for process in started:
            process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def answered_by_tasks_update(params: dict[str, Any]) -> Any:
    raise AssertionError(f"a task's question is answered with tasks/update, not in the call: {params}")


def client(port: int, token: str | None = None) -> Client:
    """A client of the process at `port` that declares the Tasks extension and form elicitation."""
    return Client.http(f"http://127.0.0.1:{port}/mcp", token=token, extensions=TASKS, strict=True,
                       elicit=answered_by_tasks_update)


async def poll(client: Client, task_id: str, until: tuple[str, ...] = ("completed", "failed", "cancelled")) -> dict[str, Any]:
    task: dict[str, Any] = {}
    for _ in range(200):
        task = (await client.request("tasks/get", {"taskId": task_id})).result
        if task["status"] in until:
            return task
        await anyio.sleep(0.05)
    raise AssertionError(f"task {task_id} stayed {task.get('status')}")


async def answered_elsewhere(asking: Client, answering: Client, task_id: str, content: dict[str, Any]) -> dict[str, Any]:
    """Wait through `answering` until the task asks for input, accept it there with `content`, then poll
    the task to its end through `asking`."""
    waiting = await poll(answering, task_id, until=("input_required",))
    (key,) = waiting["inputRequests"]
    await answering.request("tasks/update", {"taskId": task_id,
                                             "inputResponses": {key: {"action": "accept", "content": content}}})
    return await poll(asking, task_id)


class _Port:
    def __init__(self, port: int) -> None:
        self.port = port


@contextlib.asynccontextmanager
async def listening(port: int) -> AsyncIterator[SseStream]:
    """An open `subscriptions/listen` stream on the process at `port`, for tools/list changes."""
    async with HttpClient.connect(_Port(port)) as http:  # type: ignore[arg-type]
        stream = SseStream(http)
        message = request("subscriptions/listen", "sub", notifications={"toolsListChanged": True})
        await stream.open(message)
        acknowledged = await stream.next()
        assert acknowledged is not None and acknowledged["method"] == "notifications/subscriptions/acknowledged"
        yield stream


async def next_notification(stream: SseStream, seconds: float = 10.0) -> dict[str, Any]:
    with anyio.fail_after(seconds):
        heard = await stream.next()
    assert heard is not None
    return heard


async def test_a_task_made_on_one_process_is_polled_answered_and_cancelled_on_the_other(redis_server: RedisServer) -> None:
    with processes(redis_server) as (a, b):
        async with client(a) as first, client(b) as second:
            made = (await first.call_tool("nap", {"seconds": 0.3})).result
            assert made["resultType"] == "task"
            assert (await poll(second, made["taskId"]))["result"]["content"][0]["text"] == "slept 0.3"

            held = (await first.call_tool("nap", {"seconds": 60})).result
            assert (await second.request("tasks/cancel", {"taskId": held["taskId"]})).result["resultType"] == "complete"
            assert (await poll(first, held["taskId"]))["status"] == "cancelled"

            asking = (await first.request("tools/call", {"name": "confirm", "arguments": {}})).result
            done = await answered_elsewhere(first, second, asking["taskId"], {"ok": True})
            assert done["result"]["content"][0]["text"] == "confirmed: True"


async def test_a_round_started_by_tasks_update_on_the_other_process_runs_with_that_requests_token(
        redis_server: RedisServer) -> None:
    with processes(redis_server, target="tests/test_redis.py:authenticated_server") as (a, b):
        async with client(a, "desk-token") as desk, client(b, "phone-token") as phone:
            asking = (await desk.request("tools/call", {"name": "audited", "arguments": {}})).result
            done = await answered_elsewhere(desk, phone, asking["taskId"], {"ok": True})
    assert done["result"]["content"][0]["text"] == "bob via desk-app; then bob via phone-app"


async def test_cancelling_on_one_process_cancels_the_round_running_on_the_other(redis_server: RedisServer, tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    with processes(redis_server) as (a, b):
        async with client(a) as first, client(b) as second:
            held = (await first.call_tool("hold", {"marker": str(marker)})).result
            await second.request("tasks/cancel", {"taskId": held["taskId"]})
            for _ in range(200):  # written by the function on A when its round is cancelled
                if marker.exists():
                    break
                await anyio.sleep(0.05)
            assert marker.read_text() == "cancelled"
            assert (await poll(first, held["taskId"]))["status"] == "cancelled"


async def test_a_task_that_expires_has_its_round_cancelled_in_the_process_running_it(redis_server: RedisServer,
                                                                                   tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    with processes(redis_server, target="tests/test_redis.py:short_lived_server") as (a, b):
        async with client(a) as first, client(b) as second:
            held = (await first.call_tool("hold", {"marker": str(marker)})).result
            await anyio.sleep(0.7)  # past its TTL: the next request to B sweeps it out
            await second.call_tool("nap", {"seconds": 0})
            for _ in range(200):
                if marker.exists():
                    break
                await anyio.sleep(0.05)
            assert marker.read_text() == "cancelled"
            with pytest.raises(McpError) as gone:
                await first.request("tasks/get", {"taskId": held["taskId"]})
            assert gone.value.code == -32602


async def test_concurrent_task_calls_through_two_processes_never_pass_the_limit_they_share(
        redis_server: RedisServer) -> None:
    """Forty calls at once, half through each process, with room for three tasks: counted then created in
    two steps, every call would count three free places."""
    import redis

    created: list[str] = []
    refused: list[tuple[int, str]] = []

    async def start_task(through: Client) -> None:
        try:
            created.append((await through.call_tool("nap", {"seconds": 0})).result["taskId"])
        except McpError as error:
            refused.append((error.code, error.message))

    with processes(redis_server, target="tests/test_redis.py:limited_server") as (a, b):
        async with client(a) as first, client(b) as second:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as calls:
                    for n in range(40):
                        calls.start_soon(start_task, (first, second)[n % 2])
        stored = redis.Redis.from_url(redis_server.url)
        try:
            task_ids = {task_id.decode() for task_id in stored.zrange("mcpcore:tasks", 0, -1)}
        finally:
            stored.close()
    assert len(created) == 3 and task_ids == set(created)
    assert refused == [(-32600, "Too many tasks (limit 3); let some finish and expire first")] * 37


async def test_a_listen_stream_on_one_process_hears_a_change_announced_on_the_other(redis_server: RedisServer) -> None:
    with processes(redis_server) as (a, b):
        async with listening(a) as stream, client(b) as second:
            await second.call_tool("change_tools", {})
            heard = await next_notification(stream)
            assert heard["method"] == "notifications/tools/list_changed"


async def test_a_server_naming_its_store_in_code_registers_at_import_and_shares_later_registrations(
        redis_server: RedisServer) -> None:
    """`Server(store=RedisState(url))`, then `@server.tool` at import: a change made before serving reaches
    nobody (no loop runs, nothing listens) and must not fail; one made while serving reaches every process."""
    with processes(redis_server, target="tests/servers/redis_store_server.py", store_in_code=True) as (a, b):
        async with listening(a) as stream, client(b) as second:
            assert (await second.call_tool("greet", {"name": "Ada"})).text == "Hello, Ada!"
            assert (await second.call_tool("add_tool", {"name": "fresh"})).text == "added tool fresh"
            assert (await next_notification(stream))["method"] == "notifications/tools/list_changed"


async def test_after_a_redis_restart_subscriptions_are_resynced_and_sharing_resumes(redis_server: RedisServer) -> None:
    with processes(redis_server) as (a, b):
        async with listening(a) as stream, client(b) as second:
            redis_server.stop()
            redis_server.start()  # the same port, empty: what was announced meanwhile is unknown
            resynced = await next_notification(stream)
            assert resynced["method"] == "notifications/tools/list_changed"  # "everything may have changed"
            for _ in range(100):  # B's own receiver reconnects too; then its announcements reach A again
                try:
                    made = (await second.call_tool("nap", {"seconds": 0})).result
                    break
                except McpError:
                    await anyio.sleep(0.1)
            async with client(a) as first:
                assert (await poll(first, made["taskId"]))["status"] == "completed"
            await second.call_tool("change_tools", {})
            assert (await next_notification(stream))["method"] == "notifications/tools/list_changed"


async def test_without_redis_stateless_calls_go_on_and_tasks_fail_clearly_until_it_returns(redis_server: RedisServer) -> None:
    with processes(redis_server, count=1) as (a,):
        async with client(a) as only:
            redis_server.stop()
            assert (await only.call_tool("greet", {"name": "Ada"})).text == "Hello, Ada!"
            with pytest.raises(McpError) as refused:
                await only.call_tool("nap", {"seconds": 0})
            assert refused.value.code == -32603 and "Redis" in refused.value.message and "unreachable" in refused.value.message
            redis_server.start()
            for _ in range(100):
                try:
                    made = (await only.call_tool("nap", {"seconds": 0})).result
                    break
                except McpError:
                    await anyio.sleep(0.1)
            assert (await poll(only, made["taskId"]))["status"] == "completed"


def test_an_unreachable_redis_refuses_the_start_in_one_line_with_its_url() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    done = subprocess.run(mcpcore_run(free_port(), url), cwd=ROOT, env=environment(), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and f"Redis at {url} is unreachable" in done.stderr.splitlines()[-1]


def test_a_random_state_key_is_refused_when_processes_share_redis(redis_server: RedisServer) -> None:
    done = subprocess.run(mcpcore_run(free_port(), redis_server.url), cwd=ROOT, env=environment(keys=None),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "MCPCORE_STATE_KEYS" in done.stderr.splitlines()[-1]


def test_a_process_whose_keys_cannot_open_the_others_state_is_refused(redis_server: RedisServer) -> None:
    with processes(redis_server, count=1):
        done = subprocess.run(mcpcore_run(free_port(), redis_server.url), cwd=ROOT,
                              env=environment(keys="another-key-of-at-least-16-bytes"), capture_output=True, text=True,
                              timeout=60)
    assert done.returncode == 1 and "a key this process does not hold" in done.stderr.splitlines()[-1]


# -- 2025-era sessions shared by two processes (tests/servers/legacy_server.py) ---------------------------

LEGACY_TARGET = "tests/servers/legacy_server.py"
LEGACY_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def in_session(session_id: str) -> dict[str, str]:
    return {**LEGACY_HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}


async def post(port: int, message: dict[str, Any], session_id: str | None = None) -> Any:
    """One legacy POST to the process at `port`, on a connection of its own; the reply."""
    async with HttpClient.connect(_Port(port)) as http:  # type: ignore[arg-type]
        with anyio.fail_after(10):
            return await http.post(message, in_session(session_id) if session_id else LEGACY_HEADERS, legacy=True)


async def call(port: int, session_id: str, request_id: int, tool: str, **arguments: Any) -> Any:
    return await post(port, legacy("tools/call", request_id, name=tool, arguments=arguments), session_id)


async def open_session(opens: int, confirms: int, capabilities: dict[str, Any] | None = None) -> str:
    """initialize on one process, notifications/initialized on the other; the session's id."""
    reply = await post(opens, legacy("initialize", 0, protocolVersion="2025-11-25", capabilities=capabilities or {},
                                     clientInfo={"name": "alternating", "version": "1"}))
    assert reply.status == 200, reply.body
    session_id = reply.headers["mcp-session-id"]
    accepted = await post(confirms, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session_id)
    assert accepted.status == 202, accepted.body
    return session_id


@contextlib.asynccontextmanager
async def standalone_stream(port: int, session_id: str) -> AsyncIterator[SseStream]:
    """The session's GET stream, held by the process at `port`."""
    async with HttpClient.connect(_Port(port)) as http:  # type: ignore[arg-type]
        stream = SseStream(http, legacy=True)
        with anyio.fail_after(10):
            await stream.open_get(in_session(session_id))
        yield stream


async def test_a_legacy_session_opened_on_one_process_is_served_alternately_by_both(redis_server: RedisServer) -> None:
    with processes(redis_server, target=LEGACY_TARGET) as (a, b):
        session_id = await open_session(a, b)
        for request_id, port in enumerate((b, a, b, a), start=1):
            echoed = await call(port, session_id, request_id, "echo", text=f"via {port}")
            assert echoed.status == 200 and echoed.response["result"]["content"][0]["text"] == f"via {port}"
            assert echoed.headers["mcp-session-id"] == session_id
        quiet = await call(a, session_id, 10, "steps")
        assert [m for m in quiet.messages if m.get("method") == "notifications/message"] == []  # no level set yet
        assert (await post(b, legacy("logging/setLevel", 11, level="info"), session_id)).response["result"] == {}
        logged = await call(a, session_id, 12, "steps")
        assert [m["params"]["data"] for m in logged.messages if m.get("method") == "notifications/message"] == [
            "step 1", "step 2", "step 3"]
        assert logged.messages[-1]["result"]["content"][0]["text"] == "done for alternating on 2025-11-25"


async def test_a_subscription_made_through_one_process_feeds_the_stream_held_by_the_other(redis_server: RedisServer) -> None:
    with processes(redis_server, target=LEGACY_TARGET) as (a, b):
        session_id = await open_session(a, b)
        async with standalone_stream(a, session_id) as stream:
            assert (await post(b, legacy("resources/subscribe", 1, uri="demo://note"), session_id)).status == 200
            await call(b, session_id, 2, "touch", uri="demo://note")
            heard = await next_notification(stream)
            assert heard["method"] == "notifications/resources/updated" and heard["params"]["uri"] == "demo://note"
            assert (await post(a, legacy("resources/unsubscribe", 3, uri="demo://note"), session_id)).status == 200
            await call(b, session_id, 4, "touch", uri="demo://note")
            await call(b, session_id, 5, "add_tool", name="fresh")  # the next thing the stream hears
            assert (await next_notification(stream))["method"] == "notifications/tools/list_changed"


@contextlib.asynccontextmanager
async def asking_greet(port: int, session_id: str, request_id: int) -> AsyncIterator[tuple[SseStream, dict[str, Any]]]:
    """A `greet` call of the session on `port`, open until the block ends, and the elicitation it asked."""
    async with HttpClient.connect(_Port(port)) as http:  # type: ignore[arg-type]
        stream = SseStream(http, "tools/call", legacy=True)
        with anyio.fail_after(10):
            await stream.open(legacy("tools/call", request_id, name="greet", arguments={}), in_session(session_id))
            asked = await stream.next()
        assert asked is not None and asked["method"] == "elicitation/create"
        yield stream, asked


async def test_an_elicitation_asked_on_one_process_is_answered_through_the_other(redis_server: RedisServer) -> None:
    with processes(redis_server, target=LEGACY_TARGET) as (a, b):
        session_id = await open_session(b, a, {"elicitation": {}})
        async with asking_greet(a, session_id, 7) as (stream, asked):
            answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
            assert (await post(b, answer, session_id)).status == 202
            with anyio.fail_after(10):
                final = await stream.next()
            assert final is not None and final["id"] == 7 and final["result"]["content"][0]["text"] == "Hello, Ada!"
        unasked = {"jsonrpc": "2.0", "id": "no-such-request", "result": {}}
        assert (await post(b, unasked, session_id)).status == 400  # not an id any process asked with


async def test_a_cancellation_posted_to_one_process_cancels_the_call_running_on_the_other(redis_server: RedisServer) -> None:
    with processes(redis_server, target=LEGACY_TARGET) as (a, b):
        session_id = await open_session(a, b, {"elicitation": {}})
        async with asking_greet(a, session_id, 8) as (stream, asked):
            note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8}}
            assert (await post(b, note, session_id)).status == 202
            with anyio.fail_after(10):
                told = await stream.next()  # the cancelled call withdraws its question, and sends nothing more
                assert told is not None and told["method"] == "notifications/cancelled"
                assert told["params"]["requestId"] == asked["id"]


async def test_delete_through_one_process_ends_the_session_everywhere(redis_server: RedisServer) -> None:
    with processes(redis_server, target=LEGACY_TARGET) as (a, b):
        session_id = await open_session(a, b)
        async with standalone_stream(a, session_id) as stream, HttpClient.connect(_Port(b)) as http:  # type: ignore[arg-type]
            await http.send_request("DELETE", "/mcp", in_session(session_id))
            assert (await http.read_reply()).status == 200
            with anyio.fail_after(10):
                assert await stream.next() is None  # A ended the session's GET stream
        for port in (a, b):
            gone = await post(port, legacy("ping", 1), session_id)
            assert gone.status == 404 and "Session not found" in gone.response["error"]["message"]


async def test_an_idle_shared_session_expires_in_every_process(redis_server: RedisServer) -> None:
    import redis

    with processes(redis_server, target=LEGACY_TARGET, extra=("--session-idle-timeout", "1")) as (a, b):
        session_id = await open_session(a, b)
        async with standalone_stream(b, session_id) as stream:
            with anyio.fail_after(15):
                assert await stream.next() is None  # expired in Redis: B, holding its stream, ends it
        for port in (a, b):
            assert (await post(port, legacy("ping", 1), session_id)).status == 404
        keys = redis.Redis.from_url(redis_server.url)
        try:
            assert keys.exists(f"mcpcore:session:{session_id}") == 0
        finally:
            keys.close()


async def test_a_session_fails_clearly_while_redis_is_down_and_goes_on_after_it_returns(
        redis_server: RedisServer, tmp_path: Path) -> None:
    redis_server.stop()
    redis_server.persist = tmp_path  # a Redis that keeps its data over a restart, as in production
    redis_server.start()
    with processes(redis_server, target=LEGACY_TARGET) as (a, b):
        session_id = await open_session(a, b)
        redis_server.stop()
        for port in (a, b):
            refused = await call(port, session_id, 1, "echo", text="down")
            error = refused.response["error"]
            assert refused.status == 500 and error["code"] == -32603 and "Redis" in error["message"]
        opening = await post(b, legacy("initialize", 0, protocolVersion="2025-11-25", capabilities={}))
        assert opening.status == 500 and "Redis" in opening.response["error"]["message"]
        assert "mcp-session-id" not in opening.headers  # a session Redis does not hold is never minted
        async with HttpClient.connect(_Port(a)) as http:  # type: ignore[arg-type]
            with anyio.fail_after(10):
                modern = await http.post(request("tools/call", 2, name="echo", arguments={"text": "modern"}))
            assert modern.response["result"]["content"][0]["text"] == "modern"  # the stateless wire needs no Redis
        redis_server.start()
        for port in (b, a):
            for _ in range(100):  # each process reconnects on its next command
                echoed = await call(port, session_id, 3, "echo", text="back")
                if echoed.status != 500:
                    break
                await anyio.sleep(0.1)
            assert echoed.status == 200 and echoed.response["result"]["content"][0]["text"] == "back"


@contextlib.asynccontextmanager
async def resumed(port: int, session_id: str, last_event: str) -> AsyncIterator[SseStream]:
    """A GET with Last-Event-ID to the process at `port`: the rest of the stream."""
    async with HttpClient.connect(_Port(port)) as http:  # type: ignore[arg-type]
        rest = SseStream(http, "tools/call", legacy=True)
        with anyio.fail_after(10):
            await rest.open_get({**in_session(session_id), "last-event-id": last_event})
        yield rest


async def closed_early(port: int, session_id: str, request_id: int, tool: str, **arguments: Any) -> SseStream:
    """Call a tool whose handler ends the stream after its first progress report; the stream read so far."""
    async with HttpClient.connect(_Port(port)) as http:  # type: ignore[arg-type]
        stream = SseStream(http, "tools/call", legacy=True)
        with anyio.fail_after(10):
            await stream.open(legacy("tools/call", request_id, name=tool, arguments=arguments, _meta={"progressToken": "t"}),
                              in_session(session_id))
            assert (await stream.next())["method"] == "notifications/progress"  # type: ignore[index]
            assert await stream.next() is None  # the handler ended the stream before its result
    return stream


async def test_a_stream_ended_early_on_one_process_resumes_on_either(redis_server: RedisServer) -> None:
    with processes(redis_server, target=LEGACY_TARGET) as (a, b):
        session_id = await open_session(b, a)
        last = (await closed_early(a, session_id, 5, "polled")).event_ids[-1]
        for port in (b, a):  # from the shared store on B, from memory on A
            async with resumed(port, session_id, last) as rest:
                with anyio.fail_after(10):
                    assert (await rest.next())["params"]["progress"] == 2  # type: ignore[index]
                    assert (await rest.next())["result"]["content"][0]["text"] == "polled"  # type: ignore[index]
                    assert await rest.next() is None
        async with HttpClient.connect(_Port(b)) as http:  # type: ignore[arg-type]
            await http.send_request("GET", "/mcp", {**in_session(session_id), "accept": "text/event-stream",
                                                   "last-event-id": last.rpartition(".")[0] + ".99"})
            with anyio.fail_after(10):
                assert (await http.read_reply()).status == 404  # never sent


async def test_a_stream_resumed_on_the_other_process_follows_the_call_still_running(redis_server: RedisServer,
                                                                                    tmp_path: Path) -> None:
    marker = tmp_path / "go-on"
    with processes(redis_server, target="tests/test_redis.py:paced_server") as (a, b):
        session_id = await open_session(a, b)
        last = (await closed_early(a, session_id, 6, "paced", marker=str(marker))).event_ids[-1]
        async with resumed(b, session_id, last) as rest:
            marker.write_text("go on")  # only now does the call on A report again and finish
            with anyio.fail_after(10):
                assert (await rest.next())["params"]["progress"] == 2  # type: ignore[index]
                assert (await rest.next())["result"]["content"][0]["text"] == "paced"  # type: ignore[index]


async def test_workers_sharing_redis_open_legacy_sessions_and_serve_them_on_any_connection(redis_server: RedisServer) -> None:
    port = free_port()
    command = [*mcpcore_run(port, redis_server.url, LEGACY_TARGET), "--workers", "2"]
    supervisor = subprocess.Popen(command, cwd=ROOT, env=environment(), stderr=subprocess.DEVNULL)
    try:
        wait_until_accepting(port)
        session_id = await open_session(port, port)  # refused (503) where workers keep sessions to themselves
        for request_id in range(1, 9):  # each on a new connection: the kernel hands them to either worker
            echoed = await call(port, session_id, request_id, "echo", text=str(request_id))
            assert echoed.status == 200 and echoed.response["result"]["content"][0]["text"] == str(request_id)
    finally:
        stop_gracefully(supervisor)


class TestRedisTaskStore(TaskStoreContract):
    @pytest.fixture
    async def task_store(self, redis_server: RedisServer) -> AsyncIterator[Any]:
        from mcpcore.redisstate import RedisState

        state = RedisState(redis_server.url, prefix=f"contract-{time.monotonic_ns()}")
        try:
            yield state.tasks
        finally:
            await state.client.aclose()



def session_keys(redis_server: RedisServer) -> list[bytes]:
    """The 2025-era session records in the test's Redis."""
    import redis

    keys = redis.Redis.from_url(redis_server.url)
    try:
        return keys.keys("mcpcore:session:*")
    finally:
        keys.close()


async def test_the_typescript_client_behind_a_round_robin_proxy_works_as_with_one_process(
        redis_server: RedisServer, ts_client: list[str]) -> None:
    from round_robin_proxy import RoundRobinProxy

    with processes(redis_server, target=LEGACY_TARGET) as ports:
        async with RoundRobinProxy(ports) as proxy:
            with anyio.fail_after(60):
                result = await anyio.run_process([*ts_client, "http", f"http://127.0.0.1:{proxy.port}/mcp"], cwd=ROOT,
                                                 check=False)
            assert result.returncode == 0, result.stderr.decode()
            assert expect_every_feature(result.stdout)["protocolVersion"] == "2025-11-25"
            assert set(proxy.served) == set(ports)  # both processes answered
        assert session_keys(redis_server) == []  # the client's DELETE on close ended its session


@pytest.mark.parametrize("mode", ["2026-07-28", "auto", "legacy"])
async def test_the_official_python_client_behind_a_round_robin_proxy_works_as_with_one_process(
        redis_server: RedisServer, mode: str) -> None:
    mcp = pytest.importorskip("mcp", reason="the official SDK is in the test extra")
    mcp_types = pytest.importorskip("mcp_types")
    from round_robin_proxy import RoundRobinProxy

    async def answer(context: Any, params: Any) -> Any:
        return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})

    with processes(redis_server, target="tests/servers/legacy_server.py") as ports, anyio.fail_after(60):
        async with RoundRobinProxy(ports) as proxy:
            url = f"http://127.0.0.1:{proxy.port}/mcp"
            async with mcp.Client(url, mode=mode, elicitation_callback=answer, read_timeout_seconds=30) as sdk:
                assert sdk.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
                assert {"echo", "greet", "steps"} <= {tool.name for tool in (await sdk.list_tools()).tools}
                assert (await sdk.call_tool("echo", {"text": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]
                progress: list[float] = []

                async def on_progress(done: float, total: float | None, message: str | None) -> None:
                    progress.append(done)

                stepped = await sdk.call_tool("steps", {}, progress_callback=on_progress)
                assert stepped.content[0].text.startswith("done for") and progress == [1, 2, 3]  # type: ignore[union-attr]
                # Asked by one process, answered to the other: an MRTR round trip (one key ring), or in the legacy
                # mode an elicitation/create whose response is relayed to the call waiting for it.
                assert (await sdk.call_tool("greet", {})).content[0].text == "Hello, Ada!"  # type: ignore[union-attr]
            assert set(proxy.served) == set(ports)  # both processes answered


async def test_a_change_made_again_while_its_first_publication_is_in_flight_is_sent_again() -> None:
    from mcpcore.redisstate import RedisBus
    from mcpcore._runtime.subscriptions import TOOLS, Change

    class SlowClient:
        def __init__(self) -> None:
            self.sent: list[bytes] = []
            self.in_flight = anyio.Event()
            self.go_on = anyio.Event()

        async def publish(self, channel: str, data: bytes) -> None:
            self.in_flight.set()
            await self.go_on.wait()
            self.sent.append(data)

    class State:
        client = SlowClient()

        def key(self, *parts: str) -> str:
            return ":".join(("test", *parts))

    bus = RedisBus(State(), max_pending=10)  # type: ignore[arg-type]
    bus.running = True  # as `RedisState.start` sets it
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(bus.send)
        bus.publish(Change(TOOLS))
        await State.client.in_flight.wait()
        bus.publish(Change(TOOLS))  # the same change again, while the first is on its way
        State.client.go_on.set()
        with anyio.fail_after(5):
            while len(State.client.sent) < 2:
                await anyio.sleep(0.01)
        tasks.cancel_scope.cancel()
    assert len(State.client.sent) == 2 and not bus.pending


async def test_an_initialize_whose_client_left_before_its_answer_leaves_no_record_in_redis(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from http_client import running
    from mcpcore.redisstate import RedisState
    from servers import legacy_server
    from test_legacy_http import BASE, OPEN, HeldAnswers

    held = HeldAnswers()
    held.watch_peers(monkeypatch)
    server = legacy_server.build(store=RedisState(redis_server.url), state_keys=[KEYS], middleware=[held])
    async with running(server, via="h11") as http:
        async with HttpClient.connect(http) as client:
            await client.send_request("POST", "/mcp", BASE, orjson.dumps(OPEN))
            with anyio.fail_after(10):
                await held.negotiated.wait()
        assert len(session_keys(redis_server)) == 1  # stored before the answer names it
        with anyio.fail_after(10):
            await held.lost.wait()
            held.release.set()
            while session_keys(redis_server):  # forgotten once the call has ended, in a round trip to Redis
                await anyio.sleep(0.05)
        assert len(http.sessions) == len(server.bus._local.subscribers) == 0


GUARDED_TARGET = "tests/test_redis.py:guarded_sessions"
guarded_sessions = legacy_server.build(auth=Auth(StaticTokens(
    {f"{name}-token": AccessToken(name, "client", frozenset()) for name in ("alice", "bob")}),
    "http://127.0.0.1:8000/mcp", ("https://auth.example.com",)))


async def initialize_as(port: int, person: str) -> Any:
    """An initialize by `person` (a bearer token of theirs) to the process at `port`; the reply."""
    async with HttpClient.connect(_Port(port)) as http:  # type: ignore[arg-type]
        with anyio.fail_after(10):
            message = legacy("initialize", 0, protocolVersion="2025-11-25", capabilities={},
                             clientInfo={"name": person, "version": "1"})
            return await http.post(message, {**LEGACY_HEADERS, "authorization": f"Bearer {person}-token"}, legacy=True)


async def test_a_principals_share_of_sessions_is_counted_across_processes(redis_server: RedisServer) -> None:
    with processes(redis_server, target=GUARDED_TARGET, extra=("--max-sessions-per-principal", "2")) as (a, b):
        first, second = await initialize_as(a, "alice"), await initialize_as(b, "alice")
        assert first.status == second.status == 200
        for port in (a, b):
            refused = await initialize_as(port, "alice")
            assert refused.status == 503 and refused.headers["retry-after"] == "1"
            assert "max_sessions_per_principal 2" in refused.response["error"]["message"]
        assert (await initialize_as(a, "bob")).status == 200
        async with HttpClient.connect(_Port(b)) as http:  # type: ignore[arg-type]
            ended = {**in_session(first.headers["mcp-session-id"]), "authorization": "Bearer alice-token"}
            await http.send_request("DELETE", "/mcp", ended)
            assert (await http.read_reply()).status == 200
        assert (await initialize_as(a, "alice")).status == 200  # the place the DELETE freed, on the other process
        assert (await initialize_as(b, "alice")).status == 503


async def test_a_session_in_use_keeps_its_place_in_the_share_and_an_expired_one_gives_it_back(
        redis_server: RedisServer) -> None:
    extra = ("--max-sessions-per-principal", "1", "--session-idle-timeout", "2")
    with processes(redis_server, target=GUARDED_TARGET, extra=extra) as (a, b):
        opened = await initialize_as(a, "alice")
        assert opened.status == 200
        in_use = {**in_session(opened.headers["mcp-session-id"]), "authorization": "Bearer alice-token"}
        until = time.monotonic() + 3  # past the idle timeout: only the use keeps the session, and its count
        async with HttpClient.connect(_Port(b)) as http:  # type: ignore[arg-type]
            while time.monotonic() < until:
                with anyio.fail_after(10):
                    assert (await http.post(legacy("ping", 1), in_use, legacy=True)).status == 200
                await anyio.sleep(0.4)
        assert (await initialize_as(b, "alice")).status == 503
        for _ in range(100):  # until Redis expires the idle session (two seconds without a request)
            if (reply := await initialize_as(b, "alice")).status == 200:
                break
            await anyio.sleep(0.1)
        assert reply.status == 200


async def test_a_principals_share_counts_only_sessions_that_can_still_serve(redis_server: RedisServer,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim whose initialize was never saved (its clean-up failed) frees its place after the claim
    window, not the idle time; a hash remade by a change racing a DELETE holds no place at all."""
    from mcpcore import redisstate
    from mcpcore._runtime.session import SessionRecord, SessionsFull

    monkeypatch.setattr(redisstate, "CLAIM_SECONDS", 0.3)
    state = redisstate.RedisState(redis_server.url, prefix=f"share-{time.monotonic_ns()}")
    store = state.sessions
    try:
        with anyio.fail_after(10):
            await store.claim("left-behind", "alice", 1, 30.0)  # never saved, never forgotten
            while True:  # the place comes back within the claim window
                try:
                    await store.claim("next", "alice", 1, 30.0)
                    break
                except SessionsFull:
                    await anyio.sleep(0.05)
            await store.claim("ended", "bob", 1, 30.0)
            await store.save(SessionRecord("ended", "bob", "2025-11-25", {}, {}), 30.0)
            with pytest.raises(SessionsFull):
                await store.claim("too-many", "bob", 1, 30.0)
            await store.delete("ended")
            await store.change("ended", {"level": "info"}, 30.0)  # late: remakes a hash without its record
            await store.claim("after", "bob", 1, 30.0)
    finally:
        await state.client.aclose()


async def test_concurrent_subscribes_to_a_shared_session_stay_within_its_bound(redis_server: RedisServer) -> None:
    from http_client import running
    from mcpcore.redisstate import RedisState
    from test_legacy_http import BASE, OPEN

    server = legacy_server.build(store=RedisState(redis_server.url), state_keys=[KEYS], max_subscription_uris=2)

    @server.resource("demo://notes/{name}")
    def named(name: str) -> str:
        return f"note {name}"

    async with running(server, via="h11") as http:
        async with HttpClient.connect(http) as client:
            with anyio.fail_after(10):
                session_id = (await client.post(OPEN, BASE, legacy=True)).headers["mcp-session-id"]
                note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                assert (await client.post(note, in_session(session_id), legacy=True)).status == 202
        answers: list[dict[str, Any]] = []

        async def subscribe(number: int) -> None:  # each on its own connection: they wait on Redis at once
            async with HttpClient.connect(http) as client:
                message = legacy("resources/subscribe", number, uri=f"demo://notes/{number}")
                answers.append((await client.post(message, in_session(session_id), legacy=True)).response)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                for number in range(8):
                    group.start_soon(subscribe, number)
        accepted = [answer for answer in answers if "result" in answer]
        assert len(accepted) == 2 and all(answer["error"]["code"] == -32602 for answer in answers if "error" in answer), answers
        assert http.sessions.get(session_id).followed == 2


async def test_a_shared_session_that_expires_here_lets_go_of_its_stream_store(redis_server: RedisServer) -> None:
    import gc

    from http_client import running
    from mcpcore.redisstate import RedisState
    from test_legacy_http import BASE, OPEN

    server = legacy_server.build(store=RedisState(redis_server.url), state_keys=[KEYS])
    async with running(server, via="h11", session_idle_timeout=3.0, keep_alive_timeout=0.2) as http:
        async with HttpClient.connect(http) as client:
            with anyio.fail_after(10):
                session_id = (await client.post(OPEN, BASE, legacy=True)).headers["mcp-session-id"]
                note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                assert (await client.post(note, in_session(session_id), legacy=True)).status == 202
                assert (await client.post(legacy("ping", 1), in_session(session_id), legacy=True)).status == 200
        assert len(http.stores) == 1  # its ping ran on a resumable stream
        with anyio.fail_after(10):
            while len(http.sessions):  # idle here: the copy is forgotten (the sweeper, no request needed)
                await anyio.sleep(0.05)
        gc.collect()
        assert len(http.stores) == 0


class HeldClaims:
    """Holds each claim of a principal's place in Redis (after it counted) until `release`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from mcpcore.redisstate import RedisSessionStore

        self.counted, self.release = anyio.Event(), anyio.Event()
        claim = RedisSessionStore.claim

        async def held(store: RedisSessionStore, *args: Any) -> None:
            await claim(store, *args)
            self.counted.set()
            await self.release.wait()

        monkeypatch.setattr(RedisSessionStore, "claim", held)


def guarded_shared(redis_server: RedisServer) -> Server:
    from mcpcore.redisstate import RedisState

    return legacy_server.build(auth=guarded_sessions.auth, store=RedisState(redis_server.url), state_keys=[KEYS])


async def test_a_claim_cut_short_by_the_client_leaving_is_not_counted(redis_server: RedisServer,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from http_client import running
    from test_legacy_http import BASE, OPEN, HeldAnswers

    claims, peers = HeldClaims(monkeypatch), HeldAnswers()
    peers.watch_peers(monkeypatch)
    async with running(guarded_shared(redis_server), via="h11") as http:
        async with HttpClient.connect(http) as client:
            await client.send_request("POST", "/mcp", {**BASE, "authorization": "Bearer alice-token"}, orjson.dumps(OPEN))
            with anyio.fail_after(10):
                await claims.counted.wait()
            assert len(session_keys(redis_server)) == 1  # the claim made its session's hash
        with anyio.fail_after(10):
            await peers.lost.wait()
            while session_keys(redis_server) or http.sessions._reserved:  # the claim, cut short, is taken back,
                await anyio.sleep(0.05)  # here as in Redis


async def test_a_claim_that_ends_as_the_server_begins_to_close_gives_its_place_back(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from http_client import running
    from test_legacy_http import BASE, OPEN

    claims = HeldClaims(monkeypatch)
    async with running(guarded_shared(redis_server), via="h11") as http:
        async with HttpClient.connect(http) as client:
            await client.send_request("POST", "/mcp", {**BASE, "authorization": "Bearer alice-token"}, orjson.dumps(OPEN))
            with anyio.fail_after(10):
                await claims.counted.wait()
                http.closing = True  # what stop() does first
                claims.release.set()
                reply = await client.read_reply()
            assert reply.status == 503 and "shutting down" in reply.response["error"]["message"]
        with anyio.fail_after(10):
            while session_keys(redis_server):  # no session, and no place counted for one
                await anyio.sleep(0.05)
        assert len(http.sessions) == 0 and http.sessions._reserved == 0


# -- HTTP+SSE sessions (the deprecated 2024-11-05 transport): served where the stream is held ---------------


async def test_an_http_sse_session_held_by_one_process_takes_what_is_posted_to_the_other(redis_server: RedisServer) -> None:
    from test_legacy_sse import Stream, handshake
    from test_legacy_sse import post as sse_post

    with processes(redis_server, target=LEGACY_TARGET) as (a, b):
        async with HttpClient.connect(_Port(a)) as opener, HttpClient.connect(_Port(b)) as other:  # type: ignore[arg-type]
            with anyio.fail_after(15):
                stream = Stream(opener)
                uri = await stream.open()  # A holds the stream; everything below is POSTed to B
                assert (await handshake(other, stream, uri, {"elicitation": {}}))["serverInfo"]["name"] == "legacy-tests"
                assert (await sse_post(other, uri, legacy("tools/call", 1, name="greet", arguments={}))).status == 202
                asked = await stream.message("tools/call")
                assert asked["method"] == "elicitation/create"
                again = await sse_post(other, uri, legacy("tools/call", 1, name="echo", arguments={"text": "x"}))
                assert again.status == 202  # B cannot know; A refuses it on the stream
                refused = await stream.message()
                assert refused["id"] == 1 and "already in flight" in refused["error"]["message"]
                answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
                assert (await sse_post(other, uri, answer)).status == 202
                assert (await stream.message("tools/call"))["result"]["content"][0]["text"] == "Hello, Ada!"
                unknown = await sse_post(other, "/messages?session_id=no-such-session", legacy("ping", 2))
                assert unknown.status == 404
                for port in (a, b):  # /mcp serves no HTTP+SSE session, where it is held or elsewhere
                    assert (await post(port, legacy("ping", 3), uri.rpartition("=")[2])).status == 404
                assert len(session_keys(redis_server)) == 1
        with anyio.fail_after(15):  # the client closed A's stream: the session ended everywhere
            while session_keys(redis_server):
                await anyio.sleep(0.05)
        async with HttpClient.connect(_Port(b)) as other:  # type: ignore[arg-type]
            assert (await sse_post(other, uri, legacy("ping", 4))).status == 404


async def test_an_idle_http_sse_session_expires_in_redis_and_the_process_holding_its_stream_ends_it(
        redis_server: RedisServer) -> None:
    from test_legacy_sse import Stream

    with processes(redis_server, target=LEGACY_TARGET, extra=("--session-idle-timeout", "1")) as (a, _):
        async with HttpClient.connect(_Port(a)) as opener:  # type: ignore[arg-type]
            with anyio.fail_after(15):
                stream = Stream(opener)
                await stream.open()
                assert len(session_keys(redis_server)) == 1
                assert await stream.event() is None
        assert session_keys(redis_server) == []


async def test_a_relayed_http_sse_request_runs_with_the_token_and_principal_of_the_post_that_brought_it(
        redis_server: RedisServer) -> None:
    from test_legacy_sse import Stream, handshake
    from test_legacy_sse import post as sse_post

    def as_(token: str) -> dict[str, str]:
        return {"content-type": "application/json", "authorization": f"Bearer {token}"}

    with processes(redis_server, target="tests/test_redis.py:authenticated_server") as (a, b):
        async with HttpClient.connect(_Port(a)) as opener, HttpClient.connect(_Port(b)) as other:  # type: ignore[arg-type]
            with anyio.fail_after(15):
                stream = Stream(opener)
                uri = await stream.open(as_("desk-token"))
                await handshake(other, stream, uri, {"elicitation": {}}, headers=as_("phone-token"))  # bob, both
                call = legacy("tools/call", 1, name="audited", arguments={})
                assert (await sse_post(other, uri, call, as_("phone-token"))).status == 202
                asked = await stream.message("tools/call")
                answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"ok": True}}}
                assert (await sse_post(other, uri, answer, as_("phone-token"))).status == 202
                done = await stream.message("tools/call")
                assert done["result"]["content"][0]["text"] == "bob via phone-app; then bob via phone-app"
    with processes(redis_server, target=GUARDED_TARGET, extra=("--max-sessions-per-principal", "1")) as (a, b):
        async with HttpClient.connect(_Port(a)) as opener, HttpClient.connect(_Port(b)) as other:  # type: ignore[arg-type]
            with anyio.fail_after(15):
                uri = await Stream(opener).open({"authorization": "Bearer alice-token"})
                stranger = await sse_post(other, uri, legacy("ping", 1), as_("bob-token"))
                assert stranger.status == 404  # as if there were no such session
                await other.send_request("GET", "/sse", {"authorization": "Bearer alice-token"})
                refused = await other.read_reply()  # her share, counted across processes, is taken
                assert refused.status == 503 and "max_sessions_per_principal 1" in refused.response["error"]["message"]


async def test_a_stream_whose_client_leaves_while_its_place_is_counted_leaves_nothing_behind(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from http_client import running

    claims = HeldClaims(monkeypatch)
    async with running(guarded_shared(redis_server), via="h11") as http:
        async with HttpClient.connect(http) as client:
            await client.send_request("GET", "/sse", {"authorization": "Bearer alice-token"})
            with anyio.fail_after(10):
                await claims.counted.wait()
            assert len(session_keys(redis_server)) == 1  # the claim made its session's hash
        with anyio.fail_after(10):
            while session_keys(redis_server) or http.sessions._reserved:
                await anyio.sleep(0.05)


async def test_a_stream_whose_record_cannot_be_stored_is_refused_and_gives_its_place_back(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from http_client import running
    from mcpcore.redisstate import RedisSessionStore, StateUnavailable

    async def unreachable(store: RedisSessionStore, *args: Any) -> None:
        raise StateUnavailable("opening the session", ConnectionError("Redis went away"))

    monkeypatch.setattr(RedisSessionStore, "save", unreachable)
    async with running(guarded_shared(redis_server), via="h11") as http, HttpClient.connect(http) as client:
        with anyio.fail_after(10):
            await client.send_request("GET", "/sse", {"authorization": "Bearer alice-token"})
            reply = await client.read_reply()
            assert reply.status == 500 and "(Redis) is unreachable" in reply.response["error"]["message"]
            while session_keys(redis_server):  # the place its claim counted is forgotten
                await anyio.sleep(0.05)
        assert len(http.sessions) == 0 and http.sessions._reserved == 0


async def test_a_stream_whose_place_is_counted_as_the_server_begins_to_close_gives_it_back(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from http_client import running

    claims = HeldClaims(monkeypatch)
    async with running(guarded_shared(redis_server), via="h11") as http:
        async with HttpClient.connect(http) as client:
            await client.send_request("GET", "/sse", {"authorization": "Bearer alice-token"})
            with anyio.fail_after(10):
                await claims.counted.wait()
                http.closing = True  # what stop() does first
                claims.release.set()
                reply = await client.read_reply()
            assert reply.status == 503 and "shutting down" in reply.response["error"]["message"]
        with anyio.fail_after(10):
            while session_keys(redis_server):  # no session, and no place counted for one
                await anyio.sleep(0.05)
        assert len(http.sessions) == 0 and http.sessions._reserved == 0


async def test_the_real_clients_over_http_sse_behind_a_round_robin_proxy_work_as_with_one_process(
        redis_server: RedisServer, ts_client: list[str], inspector_cli: list[str], tmp_path: Path) -> None:
    mcp = pytest.importorskip("mcp", reason="the official SDK is in the test extra")
    mcp_types = pytest.importorskip("mcp_types")
    from mcp.client.sse import sse_client
    from round_robin_proxy import RoundRobinProxy
    from test_interop_inspector import inspect

    async def answer(context: Any, params: Any) -> Any:
        return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})

    with processes(redis_server, target=LEGACY_TARGET) as ports, anyio.fail_after(90):
        async with RoundRobinProxy(ports) as proxy:
            url = f"http://127.0.0.1:{proxy.port}/sse"
            async with mcp.Client(sse_client(url), mode="legacy", elicitation_callback=answer, read_timeout_seconds=30) as sdk:
                assert {"echo", "greet", "steps"} <= {tool.name for tool in (await sdk.list_tools()).tools}
                assert (await sdk.call_tool("echo", {"text": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]
                progress: list[float] = []

                async def on_progress(done: float, total: float | None, message: str | None) -> None:
                    progress.append(done)

                stepped = await sdk.call_tool("steps", {}, progress_callback=on_progress)
                assert stepped.content[0].text.startswith("done for") and progress == [1, 2, 3]  # type: ignore[union-attr]
                assert (await sdk.call_tool("greet", {})).content[0].text == "Hello, Ada!"  # type: ignore[union-attr]
            assert set(proxy.served) == set(ports)
            result = await anyio.run_process([*ts_client, "sse", url], cwd=ROOT, check=False)
            assert result.returncode == 0, result.stderr.decode()
            assert expect_every_feature(result.stdout)["protocolVersion"] == "2025-11-25"
            for method in ("tools/list", "tools/call"):
                await inspect(inspector_cli, url, tmp_path, method)
