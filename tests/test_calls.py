"""The call runner both transports share (transports/_calls.py): window, cancellation, failures, drain.

Driven in memory with a real `Server` whose tools wait on events the test sets,
so every assertion is about the order of events, never about elapsed time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import anyio
import orjson
import pytest

from conftest import request
from mcpcore import Call, Server
from mcpcore._runtime.session import Session
from mcpcore.transports._calls import CallRunner, Inbound, Malformed, read_message, take_response
from mcpcore._wire.jsonrpc import INVALID_REQUEST, PARSE_ERROR, RESPONSE
from memory import MemoryWriter

pytestmark = pytest.mark.anyio


class Gate:
    """A tool `wait(key)` that records its start and blocks until the test opens its gate."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.gates: dict[str, anyio.Event] = {}

    def open(self, key: str) -> None:
        self.gates.setdefault(key, anyio.Event()).set()


def gated_server() -> tuple[Server, Gate]:
    server = Server("runner")
    gate = Gate()

    @server.tool
    async def wait(key: str) -> str:
        gate.started.append(key)
        try:
            await gate.gates.setdefault(key, anyio.Event()).wait()
        except anyio.get_cancelled_exc_class():
            gate.cancelled.append(key)
            raise
        return key

    @server.tool
    async def instant(key: str) -> str:
        return key  # never waits: an eager call of it ends in its first step

    @server.resource("demo://a")
    async def note() -> str:
        return "a"

    return server, gate


def submit(runner: CallRunner, server: Server, key: str, ended: list[str], request_id: Any = None,
           tool: str = "wait") -> tuple[Call, MemoryWriter]:
    message = request("tools/call", request_id or key, name=tool, arguments={"key": key})
    call = Call(message, server.route(message))
    writer = MemoryWriter("tools/call")
    runner.submit(call, writer, lambda done: ended.append(done.message["id"]))
    return call, writer


def listen(runner: CallRunner, server: Server, ended: list[str]) -> MemoryWriter:
    """Open a subscription (id "sub") through the runner."""
    message = request("subscriptions/listen", "sub", notifications={"resourceSubscriptions": ["demo://a"]})
    listening = MemoryWriter("subscriptions/listen")
    runner.submit(Call(message, server.route(message)), listening, lambda done: ended.append("sub"))
    return listening


async def test_calls_beyond_the_window_are_held_and_start_in_arrival_order() -> None:
    server, gate = gated_server()
    runner = CallRunner(server, max_in_flight=2, grace_period=1)
    ended: list[str] = []
    writers = {key: submit(runner, server, key, ended)[1] for key in "abcd"}
    await anyio.wait_all_tasks_blocked()
    assert gate.started == ["a", "b"] and runner.held == 2
    gate.open("b")
    await anyio.wait_all_tasks_blocked()
    assert ended == ["b"] and gate.started == ["a", "b", "c"] and runner.held == 1
    gate.open("a")
    await anyio.wait_all_tasks_blocked()
    assert gate.started == ["a", "b", "c", "d"] and runner.held == 0
    gate.open("c"), gate.open("d")
    await anyio.wait_all_tasks_blocked()
    assert ended == ["b", "a", "c", "d"] and not runner.calls
    assert all(w.response is not None and w.response["result"]["content"][0]["text"] == k for k, w in writers.items())


async def test_an_open_subscription_runs_outside_the_window() -> None:
    server, gate = gated_server()
    runner = CallRunner(server, max_in_flight=1, grace_period=1)
    ended: list[str] = []
    listening = listen(runner, server, ended)
    submit(runner, server, "a", ended)
    await anyio.wait_all_tasks_blocked()
    assert gate.started == ["a"] and runner.held == 0
    assert listening.notifications[0]["method"] == "notifications/subscriptions/acknowledged"
    gate.open("a")
    server.close_subscriptions()
    await anyio.wait_all_tasks_blocked()
    assert sorted(ended) == ["a", "sub"] and listening.response is not None


async def test_cancelling_a_held_call_drops_it_without_running_it() -> None:
    server, gate = gated_server()
    runner = CallRunner(server, max_in_flight=1, grace_period=1)
    ended: list[str] = []
    submit(runner, server, "a", ended)
    held, held_writer = submit(runner, server, "b", ended)
    await anyio.wait_all_tasks_blocked()
    held.cancel()
    gate.open("a")
    await anyio.wait_all_tasks_blocked()
    assert gate.started == ["a"] and sorted(ended) == ["a", "b"] and held_writer.response is None


async def test_cancelling_a_running_call_cancels_its_task_and_sends_nothing() -> None:
    server, gate = gated_server()
    runner = CallRunner(server, max_in_flight=4, grace_period=1)
    ended: list[str] = []
    call, writer = submit(runner, server, "a", ended)
    await anyio.wait_all_tasks_blocked()
    call.cancel()
    await anyio.wait_all_tasks_blocked()
    assert call.cancelled and gate.cancelled == ["a"] and ended == ["a"] and writer.response is None


async def test_a_writer_that_raises_is_logged_and_the_call_ends_unanswered(caplog: pytest.LogCaptureFixture) -> None:
    server, _ = gated_server()
    runner = CallRunner(server, max_in_flight=4, grace_period=1)
    ended: list[Any] = []

    class Broken(MemoryWriter):
        async def respond(self, message: bytes, error_code: int | None = None) -> None:
            raise RuntimeError("the connection broke mid-write")

    message = request("resources/read", 9, uri="demo://a")
    with caplog.at_level(logging.ERROR, logger="mcpcore"):
        runner.submit(Call(message, server.route(message)), Broken(), lambda done: ended.append(done.message["id"]))
        await anyio.wait_all_tasks_blocked()
    assert ended == [9] and not runner.calls
    (record,) = [r for r in caplog.records if r.name == "mcpcore.transports.calls"]
    assert record.exc_info is not None and "the connection broke" in str(record.exc_info[1])


async def test_drain_ends_subscriptions_lets_calls_finish_then_cancels_the_rest() -> None:
    server, gate = gated_server()
    runner = CallRunner(server, max_in_flight=1, grace_period=0.05)
    ended: list[str] = []
    listening = listen(runner, server, ended)
    submit(runner, server, "slow", ended)
    submit(runner, server, "held", ended)
    await anyio.wait_all_tasks_blocked()
    with anyio.fail_after(10):
        await runner.drain()
    assert listening.response is not None and listening.response["result"]["resultType"] == "complete"
    assert gate.cancelled == ["slow"] and gate.started == ["slow"]
    assert sorted(ended) == ["held", "slow", "sub"] and not runner.calls and runner.held == 0


# -- read_message / take_response --------------------------------------------------------------------


def test_read_message_classifies_requests_notifications_and_responses() -> None:
    assert read_message(b'{"jsonrpc":"2.0","id":1,"method":"m"}') == Inbound(("request", {"jsonrpc": "2.0", "id": 1, "method": "m"}))
    assert read_message(b'{"jsonrpc":"2.0","method":"n"}').kind == "notification"  # type: ignore[union-attr]
    assert read_message(b'{"jsonrpc":"2.0","id":1,"result":{}}').kind == RESPONSE  # type: ignore[union-attr]


def test_read_message_says_what_is_malformed_with_the_readable_id() -> None:
    broken = read_message(b"{")
    assert isinstance(broken, Malformed) and broken.error.code == PARSE_ERROR and broken.request_id is None
    wrong = read_message(b'{"jsonrpc":"1.0","id":"x","method":"m"}')
    assert isinstance(wrong, Malformed) and wrong.error.code == INVALID_REQUEST and wrong.request_id == "x"


def test_a_response_on_the_stateless_wire_is_refused_because_no_request_of_ours_waits() -> None:
    problem = take_response({"jsonrpc": "2.0", "id": 1, "result": {}}, None)
    assert problem is not None and problem.code == INVALID_REQUEST and "accepts no responses" in problem.message


def test_a_response_to_a_session_is_delivered_only_to_a_request_waiting_for_it() -> None:
    problem = take_response({"jsonrpc": "2.0", "id": "mcpcore-unknown", "result": {}}, Session("s"))
    assert problem is not None and "no request of this server is waiting" in problem.message.lower()


@pytest.mark.parametrize("where", ["arguments", "meta", "token"])
def test_a_message_nesting_deeper_than_the_bound_is_refused_with_its_id(where: str) -> None:
    deep = "[" * 300 + '"x"' + "]" * 300  # as text: orjson itself would not write it
    arguments = f'{{"text":{deep}}}' if where == "arguments" else '{"text":"t"}'
    meta = {"meta": f',"io.modelcontextprotocol/logLevel":{deep}', "token": f',"progressToken":{deep}'}.get(where, "")
    body = (f'{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"echo","arguments":{arguments},'
            f'"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28"{meta}}}}}}}')
    verdict = read_message(body.encode())
    assert isinstance(verdict, Malformed) and verdict.error.code == INVALID_REQUEST and verdict.request_id == 7
    assert "deeper than 128 levels" in verdict.error.message


def test_nesting_at_the_bound_is_accepted() -> None:
    deep: object = 1
    for _ in range(120):
        deep = {"k": deep}
    verdict = read_message(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"v": deep}}))
    assert isinstance(verdict, Inbound)


@pytest.mark.parametrize("eager", [False, True])
async def test_held_calls_that_end_at_once_start_one_after_another(eager: bool) -> None:
    """Thousands of held calls, each done in its first step, start in a loop, not nested in each other."""
    server, gate = gated_server()
    runner = CallRunner(server, max_in_flight=1, grace_period=1, eager=eager)
    ended: list[str] = []
    submit(runner, server, "first", ended)
    keys = [f"k{n}" for n in range(3000)]
    for key in keys:
        submit(runner, server, key, ended, tool="instant")
    await anyio.wait_all_tasks_blocked()
    assert runner.held == len(keys) and ended == []
    gate.open("first")
    await anyio.wait_all_tasks_blocked()
    assert ended == ["first", *keys] and not runner.calls


async def test_an_eager_call_that_never_waits_is_answered_inside_submit() -> None:
    server, _ = gated_server()
    ended: list[str] = []
    _, writer = submit(CallRunner(server, max_in_flight=4, grace_period=1, eager=True), server, "now", ended, tool="instant")
    assert ended == ["now"] and writer.response is not None
    assert writer.response["result"]["content"][0]["text"] == "now"


async def test_an_eager_call_that_waits_goes_on_as_a_task_of_its_own() -> None:
    """Its first step ran inside `submit`, yet the call is its own task: the submitter stays the
    running task, a cancel scope in the tool belongs to the call, and cancelling the call ends it alone."""
    server = Server("eager")
    seen: dict[str, Any] = {}
    submitter = asyncio.current_task()

    @server.tool
    async def hold(key: str) -> str:
        seen["task"] = asyncio.current_task()
        with anyio.CancelScope() as scope:
            seen["scope"] = scope
            await anyio.sleep_forever()
        return "unreachable"

    runner = CallRunner(server, max_in_flight=4, grace_period=1, eager=True)
    ended: list[str] = []
    call, writer = submit(runner, server, "held", ended, tool="hold")
    assert asyncio.current_task() is submitter
    assert seen["task"] is call.task and call.task is not submitter  # the first step already ran
    call.cancel()
    await anyio.wait_all_tasks_blocked()
    assert ended == ["held"] and writer.response is None and not seen["scope"].cancelled_caught
