"""The Tasks extension (SEP-2663) end to end: task creation, polling, input, cancellation, limits and expiry,
in memory, over real HTTP (built-in server and uvicorn) and over stdio to a `mcpcore run` subprocess.

Every client here is `strict`: what the server sends is checked against the 2026-07-28 wire schema and,
for task handles, `tasks/*` results and `notifications/tasks`, against the Tasks extension's own schema.
"""

from __future__ import annotations

import contextlib
import sys
from datetime import datetime
from typing import Any, AsyncIterator, Awaitable, Callable

import anyio
import pytest

from conftest import ROOT, meta, request
from http_client import HttpClient, Reply, mcp_headers, running
from mcpcore import Context, Elicit, InputRequired, McpError, Server, ToolError, tasks
from mcpcore._runtime import subscriptions
from mcpcore.auth import AccessToken, Auth, StaticTokens
from mcpcore.testing import Client
from mcpcore._wire.jsonrpc import InvalidParams
from memory import exchange
from stdio_client import serve
from test_subscriptions import HttpSide, Side, StdioSide, Sub

pytestmark = pytest.mark.anyio

TASKS = "io.modelcontextprotocol/tasks"
DECLARING = {TASKS: {}}
TERMINAL = ("completed", "failed", "cancelled")
CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
TASK_FIELDS = {"resultType", "taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs", "_meta"}
WIRE_CAPABILITIES = {"extensions": DECLARING, "elicitation": {"form": {}}}  # what requests sent by hand declare


class Probe:
    """What the holding tools report to the test: started, stopped (their `finally`), cancelled."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.stopped = anyio.Event()
        self.cancelled = False


def tasks_server() -> tuple[Server, Probe]:
    server = Server("tasks-tests")
    probe = Probe()

    @server.tool(task="optional")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(task="optional")
    async def nap(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"slept {seconds:g}"

    @server.tool(task="required")
    def must_poll(text: str) -> str:
        return f"polled: {text}"

    @server.tool
    def plain() -> str:
        return "plain"

    @server.tool(task="optional")
    def tool_error() -> str:
        raise ToolError("nothing to process")

    @server.tool(task="optional")
    def protocol_error() -> str:
        raise McpError(4001, "quota exceeded", {"retryIn": 5})

    @server.tool(task="optional")
    def crash() -> str:
        raise RuntimeError("boom")

    @server.tool(task="optional")
    def unshapeable() -> dict:  # type: ignore[type-arg]
        return {"x": object()}  # fails outside the function, in shaping its result: an internal error

    @server.tool(task="optional")
    async def hold(ctx: Context) -> str:
        try:
            await ctx.progress(1, 4, "a quarter done")
            probe.started.set()
            await probe.release.wait()
            return "released"
        except anyio.get_cancelled_exc_class():
            probe.cancelled = True
            raise
        finally:
            probe.stopped.set()

    @server.tool(task="optional")
    async def stubborn() -> str:
        try:
            with anyio.CancelScope(shield=True):  # ignores cancellation: finishes whatever happens
                probe.started.set()
                await probe.release.wait()
            return "finished anyway"
        finally:
            probe.stopped.set()

    @server.tool(task="optional")
    def confirm_delete(filename: str, ctx: Context) -> str:
        answer = ctx.answer("confirmation")
        if answer is None:
            raise InputRequired(confirmation=Elicit(f"Delete {filename}?", CONFIRM))
        return f"deleted {filename}" if answer.accepted and answer.content.get("confirm") is True else f"kept {filename}"

    @server.tool(task="optional")
    def two_names(ctx: Context) -> str:
        first, second = ctx.answer("first"), ctx.answer("second")
        if first is None or second is None:
            raise InputRequired(first=Elicit("First name?", NAME), second=Elicit("Second name?", NAME))
        return f"{first.content['name']} and {second.content['name']}"

    @server.tool(task="optional")
    def confirm_twice(ctx: Context) -> str:
        answer, state = ctx.answer("confirm"), ctx.state
        if state is None:
            raise InputRequired(confirm=Elicit("Sure?", CONFIRM), state={"round": 1})
        if state["round"] == 1:
            raise InputRequired(confirm=Elicit("Really sure?", CONFIRM),
                                state={"round": 2, "first": answer.content["confirm"]})
        return f"first={state['first']} second={answer.content['confirm']}"

    @server.tool(task="required", task_after_input=True)
    async def greet_later(ctx: Context) -> str:
        answer = ctx.answer("user_name")
        if answer is None:
            raise InputRequired(user_name=Elicit("Your name?", NAME))
        return f"Hello, {answer.content['name']}, from a task"

    return server, probe


def stdio_server() -> Server:
    """The same server for `mcpcore run tests/test_tasks.py:stdio_server`."""
    return tasks_server()[0]


STDIO_COMMAND = [sys.executable, "-m", "mcpcore", "run", f"{ROOT / 'tests' / 'test_tasks.py'}:stdio_server"]


def unanswered(params: dict[str, Any]) -> Any:
    raise AssertionError(f"a task's input comes by tasks/update, not by a retry: {params}")


def declaring(server: Server, **options: Any) -> Client:
    """A client that declares the Tasks extension (and form elicitation, answered only by tasks/update)."""
    options.setdefault("elicit", unanswered)
    return Client(server, extensions=DECLARING, strict=True, **options)


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def outcome_of(result: dict[str, Any]) -> dict[str, Any]:
    """A result without its `_meta` (the serverInfo stamp)."""
    return {key: value for key, value in result.items() if key != "_meta"}


def assert_created(result: dict[str, Any]) -> str:
    """The flat CreateTaskResult of a new task; its taskId."""
    assert set(result) == TASK_FIELDS, result
    assert result["resultType"] == "task" and result["status"] == "working"
    assert isinstance(result["taskId"], str) and len(result["taskId"]) >= 16
    created, updated = (datetime.fromisoformat(result[key].replace("Z", "+00:00")) for key in ("createdAt", "lastUpdatedAt"))
    assert created.utcoffset() is not None and created <= updated  # ISO 8601 with a zone
    assert all(isinstance(result[key], int) and not isinstance(result[key], bool) for key in ("ttlMs", "pollIntervalMs"))
    return result["taskId"]


async def start(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> str:
    """Call a task tool as a declaring client; the new task's id."""
    return assert_created((await client.call_tool(tool, arguments)).result)


async def get_task(client: Client, task_id: str) -> dict[str, Any]:
    result = (await client.request("tasks/get", {"taskId": task_id})).result
    assert result["resultType"] == "complete" and result["taskId"] == task_id
    return result


async def poll(get: Callable[[], Awaitable[dict[str, Any]]], until: tuple[str, ...] = TERMINAL) -> dict[str, Any]:
    """`get()` the task until its status is one of `until` (bounded: about five seconds at most)."""
    task: dict[str, Any] = {}
    for _ in range(500):
        task = await get()
        if task["status"] in until:
            return task
        await anyio.sleep(0.01)
    raise AssertionError(f"the task never reached {until}; last seen {task}")


async def poll_task(client: Client, task_id: str, until: tuple[str, ...] = TERMINAL) -> dict[str, Any]:
    return await poll(lambda: get_task(client, task_id), until)


async def update(client: Client, task_id: str, responses: Any) -> dict[str, Any]:
    result = (await client.request("tasks/update", {"taskId": task_id, "inputResponses": responses})).result
    assert outcome_of(result) == {"resultType": "complete"}
    return result


async def wait_for(event: anyio.Event) -> None:
    with anyio.fail_after(5):
        await event.wait()


def detailed(task: dict[str, Any]) -> dict[str, Any]:
    """The DetailedTask in a `tasks/get` result or `notifications/tasks` params (without resultType, _meta)."""
    return {key: value for key, value in task.items() if key not in ("resultType", "_meta")}


async def heard_until(subscription: Any, until: tuple[str, ...]) -> dict[str, Any]:
    """The first `notifications/tasks` on `subscription` whose task is in one of `until`, as a DetailedTask
    (each read bounded by the subscription; a few changes in between may be heard, or coalesced)."""
    for _ in range(20):
        heard = await subscription.next()
        assert heard is not None and heard["method"] == "notifications/tasks", heard
        if heard["params"]["status"] in until:
            return detailed(heard["params"])
    raise AssertionError(f"no notification of a task in {until}")


# -- discovery and creation ------------------------------------------------------


async def test_discover_announces_the_tasks_extension() -> None:
    async with Client(tasks_server()[0], strict=True) as client:
        info = await client.discover()
    assert info["capabilities"]["extensions"] == {TASKS: {}}


async def test_a_declaring_client_gets_a_flat_create_task_result_that_is_gettable_at_once() -> None:
    server, _ = tasks_server()
    async with declaring(server) as client:
        created = (await client.call_tool("echo", {"text": "hi"})).result
        task_id = assert_created(created)
        assert created["ttlMs"] == server.tasks.ttl_ms and created["pollIntervalMs"] == server.tasks.poll_interval_ms
        task = await get_task(client, task_id)
    assert task["status"] in ("working", "completed") and task["createdAt"] == created["createdAt"]


async def test_a_task_is_polled_to_completed_with_the_result_the_call_would_have_given() -> None:
    server, _ = tasks_server()
    async with declaring(server) as client, Client(server, strict=True) as plain:
        task = await poll_task(client, await start(client, "echo", {"text": "hi"}))
        synchronous = outcome_of((await plain.call_tool("echo", {"text": "hi"})).result)
    assert task["status"] == "completed" and "error" not in task and "inputRequests" not in task
    assert task["result"] == synchronous == {"resultType": "complete", "content": [{"type": "text", "text": "echo: hi"}]}


async def test_a_client_that_does_not_declare_tasks_gets_the_synchronous_call_and_no_task() -> None:
    server, _ = tasks_server()
    async with Client(server, strict=True) as client:
        outcome = await client.call_tool("echo", {"text": "hi"})
    assert outcome.result["resultType"] == "complete" and outcome.text == "echo: hi"
    assert await server.tasks.store.count(None) == (0, 0)


async def test_a_required_task_tool_refuses_a_client_that_does_not_declare_tasks() -> None:
    async with Client(tasks_server()[0], strict=True) as client:
        with pytest.raises(McpError) as refused:
            await client.call_tool("must_poll", {"text": "hi"})
    assert refused.value.code == -32021
    assert refused.value.data["requiredCapabilities"]["extensions"] == {TASKS: {}}


async def test_a_required_task_tool_runs_as_a_task_for_a_declaring_client() -> None:
    async with declaring(tasks_server()[0]) as client:
        task = await poll_task(client, await start(client, "must_poll", {"text": "hi"}))
    assert task["result"]["content"] == [{"type": "text", "text": "polled: hi"}]


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_tasks_methods_refuse_a_client_that_does_not_declare_tasks(method: str) -> None:
    server, _ = tasks_server()
    async with declaring(server) as client, Client(server, strict=True) as plain:
        task_id = await start(client, "echo", {"text": "hi"})
        with pytest.raises(McpError) as refused:
            await plain.request(method, {"taskId": task_id, "inputResponses": {}})
    assert refused.value.code == -32021
    assert refused.value.data["requiredCapabilities"] == {"extensions": {TASKS: {}}}


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_an_unknown_task_id_is_invalid_params(method: str) -> None:
    async with declaring(tasks_server()[0]) as client:
        with pytest.raises(InvalidParams) as unknown:
            await client.request(method, {"taskId": "0" * 32, "inputResponses": {}})
    assert unknown.value.code == -32602


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_a_task_of_another_principal_is_invalid_params_and_left_alone(method: str) -> None:
    server, probe = tasks_server()
    async with declaring(server, principal="alice") as alice, declaring(server, principal="mallory") as mallory:
        task_id = await start(alice, "hold")
        await wait_for(probe.started)
        with pytest.raises(InvalidParams):
            await mallory.request(method, {"taskId": task_id, "inputResponses": {}})
        assert (await get_task(alice, task_id))["status"] == "working"
        probe.release.set()
        assert (await poll_task(alice, task_id))["status"] == "completed"


# -- outcomes ---------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["tool_error", "crash"])
async def test_an_is_error_result_completes_the_task_with_that_result(tool: str) -> None:
    server, _ = tasks_server()
    async with declaring(server) as client, Client(server, strict=True) as plain:
        task = await poll_task(client, await start(client, tool))
        synchronous = outcome_of((await plain.call_tool(tool)).result)
    assert task["status"] == "completed" and "error" not in task
    assert task["result"]["isError"] is True and task["result"] == synchronous


async def test_a_protocol_error_fails_the_task_with_the_error_inlined() -> None:
    async with declaring(tasks_server()[0]) as client:
        task = await poll_task(client, await start(client, "protocol_error"))
    assert task["status"] == "failed" and "result" not in task
    assert task["error"] == {"code": 4001, "message": "quota exceeded", "data": {"retryIn": 5}}


async def test_an_internal_error_outside_the_function_fails_the_task_with_minus_32603() -> None:
    server, _ = tasks_server()
    async with declaring(server) as client, Client(server, strict=True) as plain:
        task = await poll_task(client, await start(client, "unshapeable"))
        with pytest.raises(McpError) as synchronous:
            await plain.call_tool("unshapeable")
    assert synchronous.value.code == -32603
    assert task["status"] == "failed" and "result" not in task
    assert task["error"]["code"] == -32603 and isinstance(task["error"]["message"], str)


async def test_progress_in_a_task_is_its_status_message() -> None:
    server, probe = tasks_server()
    async with declaring(server) as client:
        task_id = await start(client, "hold")
        await wait_for(probe.started)
        working = await get_task(client, task_id)
        probe.release.set()
        done = await poll_task(client, task_id)
    assert working["status"] == "working" and working["statusMessage"] == "a quarter done"
    assert done["result"]["content"] == [{"type": "text", "text": "released"}]


# -- cancellation -----------------------------------------------------------------


async def test_cancel_settles_a_running_task_as_cancelled_and_cancels_its_function() -> None:
    server, probe = tasks_server()
    async with declaring(server) as client:
        task_id = await start(client, "hold")
        await wait_for(probe.started)
        cancelled = (await client.request("tasks/cancel", {"taskId": task_id})).result
        await wait_for(probe.stopped)
        task = await get_task(client, task_id)
    assert outcome_of(cancelled) == {"resultType": "complete"}
    assert probe.cancelled
    assert task["status"] == "cancelled" and not {"result", "error", "inputRequests"} & set(task)


async def test_a_result_that_arrives_after_cancel_does_not_undo_it() -> None:
    server, probe = tasks_server()
    async with declaring(server) as client:
        task_id = await start(client, "stubborn")
        await wait_for(probe.started)
        await client.request("tasks/cancel", {"taskId": task_id})
        probe.release.set()
        await wait_for(probe.stopped)
        await anyio.sleep(0.05)  # the round stores its outcome as the function returns; a little slack
        task = await get_task(client, task_id)
    assert task["status"] == "cancelled" and "result" not in task


async def test_cancel_of_a_finished_task_changes_nothing_and_repeats_harmlessly() -> None:
    async with declaring(tasks_server()[0]) as client:
        task_id = await start(client, "echo", {"text": "hi"})
        done = await poll_task(client, task_id)
        answers = [(await client.request("tasks/cancel", {"taskId": task_id})).result for _ in range(2)]
        after = await get_task(client, task_id)
    assert [outcome_of(answer) for answer in answers] == [{"resultType": "complete"}] * 2
    assert after["status"] == "completed" and after["result"] == done["result"]


async def test_cancel_of_a_task_waiting_for_input_settles_it() -> None:
    async with declaring(tasks_server()[0]) as client:
        task_id = await start(client, "confirm_delete", {"filename": "a.txt"})
        await poll_task(client, task_id, until=("input_required",))
        await client.request("tasks/cancel", {"taskId": task_id})
        await update(client, task_id, {"confirmation": accept(confirm=True)})  # too late: ignored
        task = await get_task(client, task_id)
    assert task["status"] == "cancelled" and "inputRequests" not in task


# -- input ------------------------------------------------------------------------


async def test_a_task_asks_for_input_ignores_bad_answers_and_completes_with_the_right_one() -> None:
    async with declaring(tasks_server()[0]) as client:
        task_id = await start(client, "confirm_delete", {"filename": "a.txt"})
        waiting = await poll_task(client, task_id, until=("input_required",))
        assert waiting["inputRequests"] == {"confirmation": {"method": "elicitation/create", "params": {
            "mode": "form", "message": "Delete a.txt?", "requestedSchema": CONFIRM}}}
        for ignored in ({"confirmation": {"action": "maybe"}}, {"nope": accept(confirm=True)}):
            await update(client, task_id, ignored)
            still = await get_task(client, task_id)
            assert still["status"] == "input_required" and still["inputRequests"] == waiting["inputRequests"]
        with pytest.raises(InvalidParams):
            await client.request("tasks/update", {"taskId": task_id, "inputResponses": ["not", "an", "object"]})
        await update(client, task_id, {"confirmation": accept(confirm=True)})
        task = await poll_task(client, task_id)
    assert task["status"] == "completed"
    assert task["result"]["content"] == [{"type": "text", "text": "deleted a.txt"}]


async def test_two_requests_may_be_answered_one_at_a_time_and_an_answered_key_is_not_taken_again() -> None:
    async with declaring(tasks_server()[0]) as client:
        task_id = await start(client, "two_names")
        waiting = await poll_task(client, task_id, until=("input_required",))
        assert set(waiting["inputRequests"]) == {"first", "second"}
        await update(client, task_id, {"first": accept(name="Ada")})
        half = await get_task(client, task_id)
        assert half["status"] == "input_required" and set(half["inputRequests"]) == {"second"}
        await update(client, task_id, {"first": accept(name="Eve"), "second": accept(name="Grace")})
        task = await poll_task(client, task_id)
    assert task["result"]["content"] == [{"type": "text", "text": "Ada and Grace"}]


async def test_a_second_round_asking_the_same_name_gets_a_new_key_and_the_state_carries_over() -> None:
    async with declaring(tasks_server()[0]) as client:
        task_id = await start(client, "confirm_twice")
        first = await poll_task(client, task_id, until=("input_required",))
        assert list(first["inputRequests"]) == ["confirm"]
        await update(client, task_id, {"confirm": accept(confirm=True)})
        second = await poll_task(client, task_id, until=("input_required",))  # the update took the old key at once
        (key,) = second["inputRequests"]
        assert key != "confirm" and second["inputRequests"][key]["params"]["message"] == "Really sure?"
        await update(client, task_id, {"confirm": accept(confirm=False)})  # the old key: not outstanding, ignored
        assert (await get_task(client, task_id))["inputRequests"] == second["inputRequests"]
        await update(client, task_id, {key: accept(confirm=False)})
        task = await poll_task(client, task_id)
    assert task["result"]["content"] == [{"type": "text", "text": "first=True second=False"}]


async def test_input_a_client_cannot_answer_fails_the_task_with_minus_32021() -> None:
    async with Client(tasks_server()[0], extensions=DECLARING, strict=True) as client:  # no elicitation declared
        task = await poll_task(client, await start(client, "confirm_delete", {"filename": "a.txt"}))
    assert task["status"] == "failed" and task["error"]["code"] == -32021
    assert task["error"]["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}


async def test_task_after_input_asks_in_the_request_and_the_retry_becomes_the_task() -> None:
    server, _ = tasks_server()
    async with declaring(server) as client:
        caps = {"extensions": DECLARING, "elicitation": {"form": {}}}
        call = request("tools/call", 1, name="greet_later", arguments={},
                       _meta=meta(**{"io.modelcontextprotocol/clientCapabilities": caps}))
        first = (await exchange(server, call)).response
        assert first is not None
        asked = first["result"]
        assert asked["resultType"] == "input_required" and "taskId" not in asked
        assert list(asked["inputRequests"]) == ["user_name"] and isinstance(asked["requestState"], str)
        assert await server.tasks.store.count(None) == (0, 0)
        retried = (await client.request("tools/call", {
            "name": "greet_later", "arguments": {}, "inputResponses": {"user_name": accept(name="Ada")},
            "requestState": asked["requestState"]})).result
        task = await poll_task(client, assert_created(retried))
    assert task["result"]["content"] == [{"type": "text", "text": "Hello, Ada, from a task"}]


# -- notifications/tasks ------------------------------------------------------------


async def test_a_listen_following_a_task_hears_it_complete_with_the_task_as_tasks_get_shows_it() -> None:
    server, probe = tasks_server()
    async with declaring(server) as client:
        task_id = await start(client, "hold")
        await wait_for(probe.started)
        async with client.listen(task_ids=[task_id]) as subscription:
            probe.release.set()
            heard = await heard_until(subscription, TERMINAL)
            polled = detailed(await get_task(client, task_id))
    assert subscription.acknowledged["notifications"] == {"taskIds": [task_id]}
    assert heard == polled and heard["status"] == "completed"
    assert heard["result"]["content"] == [{"type": "text", "text": "released"}]


async def test_a_listen_opened_after_a_task_finished_hears_its_end_at_once() -> None:
    """A change made between the client's last poll and the listen is not lost: the listen begins with each
    followed task as it is now."""
    server, _ = tasks_server()
    async with declaring(server) as client:
        task_id = await start(client, "echo", {"text": "hi"})
        await poll_task(client, task_id)
        async with client.listen(task_ids=[task_id]) as subscription:
            with anyio.fail_after(5):
                heard = await subscription.next()
    assert heard is not None and heard["method"] == "notifications/tasks"
    assert detailed(heard["params"]) == detailed(await get_task(client, task_id))
    assert heard["params"]["status"] == "completed"


async def test_a_task_that_cannot_be_described_costs_one_notification_not_the_listen(
        caplog: pytest.LogCaptureFixture) -> None:
    server, probe = tasks_server()
    describe, failures = server.subscriptions.describers[subscriptions.TASK], [McpError(-32603, "Redis is away")]

    async def flaky(task_id: str) -> dict[str, Any] | None:
        if failures:
            raise failures.pop()
        return await describe(task_id)

    server.subscriptions.describers[subscriptions.TASK] = flaky
    async with declaring(server) as client:
        task_id = await start(client, "hold")
        await wait_for(probe.started)
        async with client.listen(task_ids=[task_id]) as subscription:  # its first notification fails
            probe.release.set()
            heard = await heard_until(subscription, TERMINAL)
    assert heard["status"] == "completed" and not failures
    assert "a task notification was not sent: Redis is away" in caplog.text


async def test_a_listen_follows_only_the_callers_own_tasks_and_acknowledges_only_those() -> None:
    server, probe = tasks_server()
    async with declaring(server, principal="alice") as alice, declaring(server, principal="mallory") as mallory:
        theirs = await start(alice, "hold")
        await wait_for(probe.started)
        mine = await start(mallory, "confirm_delete", {"filename": "m.txt"})
        await poll_task(mallory, mine, until=("input_required",))
        async with mallory.listen(task_ids=[theirs, "0" * 32, mine]) as subscription:
            probe.release.set()
            await poll_task(alice, theirs)  # alice's change comes first: were it followed, it would be heard first
            await update(mallory, mine, {"confirmation": accept(confirm=True)})
            heard = await subscription.next()
    assert subscription.acknowledged["notifications"] == {"taskIds": [mine]}
    assert heard["params"]["taskId"] == mine


async def test_a_listen_for_tasks_refuses_a_client_that_does_not_declare_tasks() -> None:
    server, _ = tasks_server()
    async with declaring(server) as client, Client(server, strict=True) as plain:
        task_id = await start(client, "echo", {"text": "hi"})
        with pytest.raises(McpError) as refused:
            async with plain.listen(task_ids=[task_id]):
                raise AssertionError("the listen was acknowledged")
    assert refused.value.code == -32021
    assert refused.value.data["requiredCapabilities"] == {"extensions": {TASKS: {}}}


# -- limits and expiry ----------------------------------------------------------------


async def test_the_per_principal_limit_refuses_a_new_task_but_not_plain_calls_or_other_principals() -> None:
    server, _ = tasks_server()
    server.tasks.configure(max_tasks_per_principal=2)
    async with declaring(server, principal="alice") as alice, declaring(server, principal="bob") as bob:
        for _ in range(2):
            await poll_task(alice, await start(alice, "echo", {"text": "hi"}))  # finished tasks count too
        with pytest.raises(McpError) as refused:
            await alice.call_tool("echo", {"text": "hi"})
        assert (await alice.call_tool("plain")).text == "plain"
        await start(bob, "echo", {"text": "hi"})
    assert refused.value.code == -32600 and "Too many tasks (limit 2)" in refused.value.message
    assert await server.tasks.store.count("alice") == (3, 2)


async def _until_gone(client: Client, task_id: str) -> InvalidParams:
    """Poll until the task is unknown (bounded); the error that said so."""
    for _ in range(500):
        try:
            await get_task(client, task_id)
        except InvalidParams as gone:
            return gone
        await anyio.sleep(0.01)
    raise AssertionError(f"task {task_id} never expired")


@pytest.mark.parametrize("setting, value", [
    ("ttl_ms", 0), ("ttl_ms", -1), ("ttl_ms", 1.5), ("ttl_ms", True), ("poll_interval_ms", -1),
    ("poll_interval_ms", None), ("max_tasks", "10"), ("max_tasks_per_principal", -1),
])
def test_configure_refuses_a_value_out_of_range_and_changes_nothing(setting: str, value: Any) -> None:
    """A TTL of 0 would make every task unknown before its handle is sent: such values are refused at once."""
    configured = tasks_server()[0].tasks
    before = {name: getattr(configured, name) for name in ("ttl_ms", "poll_interval_ms", "max_tasks", "max_tasks_per_principal")}
    valid = {name: 7 for name in ("poll_interval_ms", "max_tasks") if name != setting}  # given first: not kept either
    with pytest.raises(ValueError, match=setting):
        configured.configure(**valid, **{setting: value})
    assert {name: getattr(configured, name) for name in before} == before


async def test_a_task_past_its_ttl_is_unknown() -> None:
    server, _ = tasks_server()
    server.tasks.configure(ttl_ms=50)
    async with declaring(server) as client:
        created = (await client.call_tool("echo", {"text": "hi"})).result
        gone = await _until_gone(client, assert_created(created))
    assert created["ttlMs"] == 50 and gone.code == -32602


async def test_a_task_past_its_ttl_no_longer_counts_against_the_limit() -> None:
    server, _ = tasks_server()
    server.tasks.configure(ttl_ms=50, max_tasks_per_principal=1)
    async with declaring(server) as client:
        await _until_gone(client, await start(client, "echo", {"text": "hi"}))
        await start(client, "echo", {"text": "again"})  # the first is gone for the client: it holds no place


# -- other eras, and the server's life ------------------------------------------------


async def test_a_2025_session_gets_plain_results_or_minus_32601_and_no_tasks_methods() -> None:
    """The 2025-era wire has no extensions and no -32021: a task-only tool is refused as 2025-11-25
    refuses a call that cannot run as its tool requires."""
    async with Client(tasks_server()[0], era="2025-11-25", strict=True, extensions=DECLARING) as client:
        assert (await client.call_tool("echo", {"text": "hi"})).text == "echo: hi"
        with pytest.raises(McpError) as refused:
            await client.call_tool("must_poll", {"text": "hi"})
        with pytest.raises(McpError) as unrouted:
            await client.request("tasks/get", {"taskId": "0" * 32})
    assert refused.value.code == -32601 and "runs only as a task" in refused.value.message
    assert unrouted.value.code == -32601


async def test_the_end_of_the_lifespan_cancels_a_running_task_and_marks_it_failed() -> None:
    server, probe = tasks_server()
    async with declaring(server) as client:
        task_id = await start(client, "hold")
        await wait_for(probe.started)
    assert probe.stopped.is_set() and probe.cancelled
    record = await server.tasks.store.get(task_id)
    assert record is not None and record.status == "failed" and record.error is not None
    assert record.error["code"] == -32603 and "stopped" in record.error["message"]


# -- over HTTP --------------------------------------------------------------------


def declaring_meta() -> dict[str, Any]:
    return meta(**{"io.modelcontextprotocol/clientCapabilities": WIRE_CAPABILITIES})


def http_message(method: str, request_id: int, **params: Any) -> dict[str, Any]:
    return request(method, request_id, _meta=declaring_meta(), **params)


def bearer(headers: dict[str, str], token: str | None) -> dict[str, str]:
    """The headers, with `Authorization: Bearer <token>` when there is a token."""
    return headers if token is None else {**headers, "authorization": f"Bearer {token}"}


async def http_start(http: Any, tool: str, arguments: dict[str, Any] | None = None, token: str | None = None) -> str:
    """Create a task by a POST on a connection of its own, closed once the reply has come."""
    message = http_message("tools/call", 1, name=tool, arguments=arguments or {})
    async with HttpClient.connect(http) as creator:
        reply = await creator.post(message, bearer(mcp_headers(message), token))
    assert reply.status == 200, reply
    return assert_created(reply.response["result"])


async def http_call(client: HttpClient, method: str, task_id: str, mcp_name: str | None = "", token: str | None = None,
                    **params: Any) -> Reply:
    """A tasks/* POST; `mcp_name` "" mirrors the taskId, None sends no Mcp-Name."""
    message = http_message(method, 2, taskId=task_id, **params)
    headers = bearer(mcp_headers(message), token)
    if mcp_name is None:
        del headers["mcp-name"]
    elif mcp_name:
        headers["mcp-name"] = mcp_name
    return await client.post(message, headers)


async def http_task(client: HttpClient, task_id: str, token: str | None = None) -> dict[str, Any]:
    reply = await http_call(client, "tasks/get", task_id, token=token)
    assert reply.status == 200, reply
    return reply.response["result"]


@pytest.mark.usefixtures("http_flavour")
async def test_over_http_a_task_outlives_the_post_that_created_it() -> None:
    server, probe = tasks_server()
    async with running(server) as http:
        task_id = await http_start(http, "hold")
        await wait_for(probe.started)
        async with HttpClient.connect(http) as poller:
            working = await http_task(poller, task_id)
            probe.release.set()
            task = await poll(lambda: http_task(poller, task_id))
    assert working["status"] == "working" and not probe.cancelled
    assert task["status"] == "completed" and task["result"]["content"] == [{"type": "text", "text": "released"}]


@pytest.mark.usefixtures("http_flavour")
@pytest.mark.parametrize("mcp_name", [None, "another-task"], ids=["missing", "mismatched"])
async def test_over_http_tasks_get_needs_mcp_name_to_carry_the_task_id(mcp_name: str | None) -> None:
    server, _ = tasks_server()
    async with running(server) as http:
        task_id = await http_start(http, "echo", {"text": "hi"})
        async with HttpClient.connect(http) as client:
            refused = await http_call(client, "tasks/get", task_id, mcp_name=mcp_name)
            served = await http_call(client, "tasks/get", task_id)
    assert refused.status == 400 and refused.json["error"]["code"] == -32020
    assert served.status == 200 and served.json["result"]["taskId"] == task_id


@pytest.mark.usefixtures("http_flavour")
async def test_over_http_cancel_stops_a_running_task() -> None:
    server, probe = tasks_server()
    async with running(server) as http:
        task_id = await http_start(http, "hold")
        await wait_for(probe.started)
        async with HttpClient.connect(http) as client:
            cancelled = await http_call(client, "tasks/cancel", task_id)
            await wait_for(probe.stopped)
            task = await http_task(client, task_id)
    assert cancelled.status == 200 and outcome_of(cancelled.response["result"]) == {"resultType": "complete"}
    assert probe.cancelled and task["status"] == "cancelled"


@pytest.mark.usefixtures("http_flavour")
async def test_over_http_input_is_given_by_tasks_update() -> None:
    server, _ = tasks_server()
    async with running(server) as http:
        task_id = await http_start(http, "confirm_delete", {"filename": "b.txt"})
        async with HttpClient.connect(http) as client:
            waiting = await poll(lambda: http_task(client, task_id), until=("input_required",))
            answered = await http_call(client, "tasks/update", task_id,
                                       inputResponses={"confirmation": accept(confirm=False)})
            task = await poll(lambda: http_task(client, task_id))
    assert list(waiting["inputRequests"]) == ["confirmation"] and answered.status == 200
    assert task["result"]["content"] == [{"type": "text", "text": "kept b.txt"}]


TOKENS = {
    "bob-token": AccessToken("bob", "desk-app", frozenset({"files:read", "files:write"})),
    "bob-phone-token": AccessToken("bob", "phone-app", frozenset({"files:read"})),
}


def authenticated_tasks_server() -> Server:
    auth = Auth(StaticTokens(TOKENS), "http://127.0.0.1:8000/mcp", ("https://auth.example.com",), scopes=("files:read",))
    server = Server("tasks-with-auth", auth=auth)

    @server.tool(task="optional", scopes=["files:write"])
    def audited(ctx: Context) -> str:
        """Reports the token each round ran with: the creating call's, then the answering update's."""
        token = ctx.auth
        seen = "no token" if token is None else f"{token.subject} via {token.client_id} {' '.join(sorted(token.scopes))}"
        if ctx.state is None:
            raise InputRequired(confirm=Elicit("Go on?", CONFIRM), state={"first": seen})
        return f"{ctx.state['first']}; then {seen}"

    return server


@pytest.mark.usefixtures("http_flavour")
async def test_over_http_each_round_of_a_task_runs_with_the_token_of_the_request_that_started_it() -> None:
    async with running(authenticated_tasks_server()) as http:
        task_id = await http_start(http, "audited", token="bob-token")
        async with HttpClient.connect(http) as client:
            await poll(lambda: http_task(client, task_id, "bob-token"), until=("input_required",))
            answered = await http_call(client, "tasks/update", task_id, token="bob-phone-token",
                                       inputResponses={"confirm": accept(confirm=True)})
            task = await poll(lambda: http_task(client, task_id, "bob-token"))
    assert answered.status == 200 and task["status"] == "completed", task
    assert task["result"]["content"] == [{"type": "text", "text": (
        "bob via desk-app files:read files:write; then bob via phone-app files:read")}]


# -- over stdio -------------------------------------------------------------------


def stdio_client() -> Client:
    return Client.stdio(STDIO_COMMAND, extensions=DECLARING, elicit=unanswered, strict=True)


async def test_over_stdio_a_task_is_polled_to_completion() -> None:
    async with stdio_client() as client:
        task_id = await start(client, "nap", {"seconds": 0.2})
        task = await poll_task(client, task_id)
    assert task["status"] == "completed" and task["result"]["content"] == [{"type": "text", "text": "slept 0.2"}]


async def test_over_stdio_a_task_asks_for_input_answered_by_tasks_update() -> None:
    async with stdio_client() as client:
        task_id = await start(client, "confirm_delete", {"filename": "c.txt"})
        waiting = await poll_task(client, task_id, until=("input_required",))
        await update(client, task_id, {"confirmation": accept(confirm=True)})
        task = await poll_task(client, task_id)
    assert list(waiting["inputRequests"]) == ["confirmation"]
    assert task["result"]["content"] == [{"type": "text", "text": "deleted c.txt"}]


async def test_a_task_whose_function_asks_for_nothing_forever_is_stopped_and_fails() -> None:
    server = Server("spinning")
    rounds: list[Any] = []

    @server.tool(task="optional")
    def spin(ctx: Context) -> str:
        rounds.append(ctx.state)
        raise InputRequired(state=len(rounds))  # no requests: the next round runs at once

    async with declaring(server) as client:
        task_id = await start(client, "spin")
        failed = await poll(lambda: get_task(client, task_id))
    assert failed["status"] == "failed" and "asked for no input" in failed["error"]["message"]
    assert len(rounds) == tasks.MAX_ROUNDS and rounds[:3] == [None, 1, 2]  # each round saw the last one's state


async def test_a_status_message_the_store_cannot_take_is_lost_but_the_task_goes_on() -> None:
    from mcpcore.taskstore import MemoryTaskStore

    class RefusesStatusMessages(MemoryTaskStore):
        async def update(self, task_id: str, change: Any) -> Any:
            before = await self.get(task_id)
            after = change(before) if before is not None else None
            if after is not None and after.status == "working" and after.status_message is not None:
                raise McpError(-32603, "the store is away")
            return await super().update(task_id, change)

    server = Server("flaky-store")

    @server.tool(task="optional")
    async def report(ctx: Context) -> str:
        await ctx.progress(1, 2, "half way")
        return "reported"

    server.tasks.configure(store=RefusesStatusMessages())
    async with declaring(server) as client:
        task_id = await start(client, "report")
        finished = await poll(lambda: get_task(client, task_id))
    assert finished["status"] == "completed" and finished["result"]["content"][0]["text"] == "reported"


async def test_a_call_cancelled_while_its_task_is_written_still_starts_the_task_it_wrote() -> None:
    """A record that nothing runs would stay `working` until its TTL and count against the owner's limit."""
    from mcpcore.taskstore import MemoryTaskStore

    writing, written, created = anyio.Event(), anyio.Event(), []

    class SlowStore(MemoryTaskStore):
        async def create(self, record: Any, **limits: Any) -> None:
            writing.set()
            await written.wait()  # a shared store's round trip, while the request is cancelled
            await super().create(record, **limits)
            created.append(record.task_id)

    server, _ = tasks_server()
    store = SlowStore()
    server.tasks.configure(store=store)
    async with declaring(server) as client:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as calls:
                calls.start_soon(client.call_tool, "echo", {"text": "hi"})
                await writing.wait()
                calls.cancel_scope.cancel()
                written.set()
        with anyio.fail_after(5):
            while not created or (record := await store.get(created[0])) is None or not record.terminal:
                await anyio.sleep(0.01)
    assert record.status == "completed" and record.result is not None
    assert record.result["content"][0]["text"] == "echo: hi"


# -- on every transport: stdio to a subprocess, HTTP (built-in and ASGI) on 127.0.0.1 ----------


class TaskWire:
    """A client declaring the Tasks extension on one real transport: a side of test_subscriptions (its calls,
    and listen streams read while calls go on), with every request's `_meta` declaring the extension."""

    def __init__(self, side: Side) -> None:
        self.side = side

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        """A request (declaring the extension unless `_meta` is given); its response."""
        params.setdefault("_meta", declaring_meta())
        return await self.side.call(method, **params)

    async def result(self, method: str, **params: Any) -> dict[str, Any]:
        response = await self.call(method, **params)
        assert "result" in response, response
        return response["result"]

    async def start(self, tool: str, arguments: dict[str, Any] | None = None) -> str:
        return assert_created(await self.result("tools/call", name=tool, arguments=arguments or {}))

    async def task(self, task_id: str) -> dict[str, Any]:
        return await self.result("tasks/get", taskId=task_id)

    async def listen(self, sub_id: str, task_ids: list[str]) -> Sub:
        return await self.side.listen(sub_id, declaring_meta(), taskIds=task_ids)


@contextlib.asynccontextmanager
async def open_wire(kind: str) -> AsyncIterator[TaskWire]:
    """The tasks server on `kind`: a `mcpcore run` subprocess (reaped on exit), or served over HTTP."""
    if kind == "stdio":
        async with serve(STDIO_COMMAND) as client:
            yield TaskWire(StdioSide(client))
        return
    async with running(tasks_server()[0], via="asgi" if kind == "asgi" else "h11") as http, \
            HttpClient.connect(http) as caller, contextlib.AsyncExitStack() as streams:
        yield TaskWire(HttpSide(http, caller, streams))


@pytest.fixture(params=["stdio", "http", "asgi"])
async def wire(request: pytest.FixtureRequest) -> AsyncIterator[TaskWire]:
    async with open_wire(request.param) as opened:
        yield opened


async def test_on_every_transport_a_listen_hears_a_task_ask_for_input_and_complete(wire: TaskWire) -> None:
    task_id = await wire.start("confirm_twice")
    await poll(lambda: wire.task(task_id), until=("input_required",))
    subscription = await wire.listen("following", [task_id, "0" * 32])
    opened = await heard_until(subscription, ("input_required",))  # the task as it was when the listen opened
    assert opened == detailed(await wire.task(task_id)) and list(opened["inputRequests"]) == ["confirm"]
    await wire.result("tasks/update", taskId=task_id, inputResponses={"confirm": accept(confirm=True)})
    asking = await heard_until(subscription, ("input_required",))
    assert asking == detailed(await wire.task(task_id))
    (key,) = asking["inputRequests"]
    await wire.result("tasks/update", taskId=task_id, inputResponses={key: accept(confirm=False)})
    done = await heard_until(subscription, TERMINAL)
    assert subscription.ack["params"]["notifications"] == {"taskIds": [task_id]}
    assert key != "confirm" and asking["inputRequests"][key]["params"]["message"] == "Really sure?"
    assert done == detailed(await wire.task(task_id))
    assert done["result"]["content"] == [{"type": "text", "text": "first=True second=False"}]


async def test_on_every_transport_a_listen_for_tasks_refuses_a_client_that_does_not_declare_tasks(wire: TaskWire) -> None:
    task_id = await wire.start("echo", {"text": "hi"})
    refused = await wire.call("subscriptions/listen", _meta=meta(), notifications={"taskIds": [task_id]})
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}


async def test_on_every_transport_a_protocol_error_fails_the_task_with_the_error_inlined(wire: TaskWire) -> None:
    task_id = await wire.start("protocol_error")
    task = await poll(lambda: wire.task(task_id))
    assert task["status"] == "failed" and "result" not in task and task["statusMessage"] == "quota exceeded"
    assert task["error"] == {"code": 4001, "message": "quota exceeded", "data": {"retryIn": 5}}


async def test_on_every_transport_cancel_of_a_long_task_acks_and_settles_it_as_cancelled(wire: TaskWire) -> None:
    task_id = await wire.start("nap", {"seconds": 3600})
    acked = await wire.result("tasks/cancel", taskId=task_id)
    task = await wire.task(task_id)  # settled before the ack: no polling needed
    again = await wire.result("tasks/cancel", taskId=task_id)
    assert outcome_of(acked) == outcome_of(again) == {"resultType": "complete"}
    assert task["status"] == "cancelled" and not {"result", "error", "inputRequests"} & set(task)
    assert detailed(await wire.task(task_id)) == detailed(task)
