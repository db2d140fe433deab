"""End to end over real pipes: `mcpcore run` as a subprocess, spoken to line by line."""

from __future__ import annotations

import array
import fcntl
import os
import subprocess
import sys
import termios
import time
from typing import Any

import anyio
import orjson
import pytest

from conftest import ALL_VERSIONS, ROOT, meta, request
from stdio_client import SERVE_ECHO, serve

pytestmark = pytest.mark.anyio

SERVE_E2E = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "tests" / "servers" / "e2e_server.py")]


async def test_discover_list_and_call_over_real_pipes() -> None:
    async with serve() as client:
        with anyio.fail_after(10):
            discover = await client.call("server/discover", 1)
            assert discover["result"]["supportedVersions"] == ALL_VERSIONS
            assert set(discover["result"]["capabilities"]) >= {"tools", "resources", "prompts"}
            tools = await client.call("tools/list", 2)
            assert [t["name"] for t in tools["result"]["tools"]] == ["echo", "progress"]
            echoed = await client.call("tools/call", 3, name="echo", arguments={"text": "héllo"})
            assert echoed["result"]["content"] == [{"type": "text", "text": "héllo"}]
            read = await client.call("resources/read", 4, uri="demo://readme")
            assert read["result"]["contents"][0]["text"].startswith("This server")
            prompt = await client.call("prompts/get", 5, name="summarize", arguments={"text": "x"})
            assert prompt["result"]["messages"][0]["role"] == "user"


async def test_progress_notifications_precede_the_result_only_with_a_token() -> None:
    async with serve() as client:
        with anyio.fail_after(10):
            await client.send(request("tools/call", 1, _meta=meta(progressToken="tok"), name="progress"))
            seen = []
            while True:
                message = await client.read()
                seen.append(message)
                if message.get("id") == 1:
                    break
            progress = [m["params"] for m in seen if m.get("method") == "notifications/progress"]
            assert [p["progress"] for p in progress] == [1, 2, 3]
            assert all(p["progressToken"] == "tok" for p in progress)
            assert seen[-1]["result"]["content"][0]["text"] == "done"
            start = len(client.received)
            await client.call("tools/call", 2, name="progress")
            assert all("method" not in m for m in client.received[start:])


@pytest.mark.parametrize(
    "line, code",
    [
        (b"{not json", -32700),
        (b"[]", -32600),
        (b'[{"jsonrpc":"2.0","id":1,"method":"server/discover"}]', -32600),
        (b'{"jsonrpc":"1.0","id":1,"method":"server/discover"}', -32600),
        (b'{"jsonrpc":"2.0","id":null,"method":"server/discover"}', -32600),
        (b'{"jsonrpc":"2.0","id":1}', -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":"server/discover"}', -32602),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}', -32601),
        (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}', -32601),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}', -32022),
    ],
)
async def test_bad_input_gets_a_specific_error_and_the_server_keeps_serving(line: bytes, code: int) -> None:
    async with serve() as client:
        with anyio.fail_after(10):
            await client.send_raw(line + b"\n")
            error = await client.read()
            assert error["error"]["code"] == code
            ok = await client.call("tools/call", 99, name="echo", arguments={"text": "still here"})
            assert ok["result"]["content"][0]["text"] == "still here"


async def test_unknown_tool_is_a_protocol_error_not_a_tool_result() -> None:
    async with serve() as client:
        with anyio.fail_after(10):
            reply = await client.call("tools/call", 1, name="nope", arguments={})
            assert reply["error"]["code"] == -32602


async def test_hundred_requests_written_without_waiting_are_all_answered_with_matching_ids() -> None:
    async with serve() as client:
        with anyio.fail_after(20):
            batch = b"".join(
                orjson.dumps(request("tools/call", f"r{i}", name="echo", arguments={"text": str(i)})) + b"\n"
                for i in range(100)
            )
            for i in range(100):
                client.methods[f"r{i}"] = "tools/call"
            await client.send_raw(batch)
            answers = {}
            while len(answers) < 100:
                message = await client.read()
                answers[message["id"]] = message["result"]["content"][0]["text"]
            assert answers == {f"r{i}": str(i) for i in range(100)}


async def test_a_full_in_flight_window_pauses_reading_and_drops_nothing() -> None:
    async with serve(SERVE_E2E + ["--max-in-flight", "2"]) as client:
        with anyio.fail_after(20):
            lines = [request("tools/call", f"s{i}", name="sleep_then_reply", arguments={"seconds": 0.05}) for i in range(6)]
            lines += [request("tools/call", f"e{i}", name="echo", arguments={"text": str(i)}) for i in range(200)]
            for line in lines:
                client.methods[line["id"]] = "tools/call"
            await client.send_raw(b"".join(orjson.dumps(line) + b"\n" for line in lines))
            answered = set()
            while len(answered) < len(lines):
                message = await client.read()
                assert "result" in message, message
                answered.add(message["id"])
            assert answered == {line["id"] for line in lines}


async def test_five_mebibyte_argument_round_trips_unchanged() -> None:
    text = "abcdefghij" * (512 * 1024)
    async with serve() as client:
        with anyio.fail_after(30):
            reply = await client.call("tools/call", 1, name="echo", arguments={"text": text})
            assert reply["result"]["content"][0]["text"] == text


async def test_oversized_line_gets_an_error_and_the_server_keeps_serving() -> None:
    async with serve(SERVE_ECHO + ["--max-line-bytes", "1000"]) as client:
        with anyio.fail_after(10):
            await client.send_raw(b'{"pad":"' + b"x" * 5000 + b'"}\n')
            error = await client.read()
            assert error["error"]["code"] == -32600
            assert "1000 bytes" in error["error"]["message"]
            reply = await client.call("tools/call", 2, name="echo", arguments={"text": "after"})
            assert reply["result"]["content"][0]["text"] == "after"


async def test_tool_output_on_stdout_never_reaches_the_protocol_stream() -> None:
    async with serve(SERVE_E2E, stderr=subprocess.PIPE) as client:
        with anyio.fail_after(10):
            reply = await client.call("tools/call", 1, name="chatty", arguments={"text": "pure"})
            assert reply["result"]["content"][0]["text"] == "pure"
            await client.close_stdin()
            assert await client.wait() == 0
            assert client.process.stdout is not None and client.process.stderr is not None
            rest = b"".join([chunk async for chunk in client.process.stdout])
            assert rest == b""
            errors = b"".join([chunk async for chunk in client.process.stderr])
            for text in (b"print() output", b"sys.stdout.write", b"nor logging", b"nor a child", b"raw write"):
                assert text in errors


async def test_cancelled_notification_cancels_the_call_and_nothing_more_is_sent(tmp_path) -> None:
    marker = tmp_path / "cancelled"
    async with serve(SERVE_E2E) as client:
        with anyio.fail_after(10):
            await client.send(request("tools/call", "slow", name="wait_for_cancel", arguments={"marker": str(marker)}))
            await client.call("tools/call", 1, name="echo", arguments={"text": "started"})
            await client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}})
            while not marker.exists():
                await anyio.sleep(0.01)
            assert marker.read_text() == "cancelled"
            after = await client.call("tools/call", 2, name="echo", arguments={"text": "next"})
            assert after["result"]["content"][0]["text"] == "next"
            await client.close_stdin()
            assert await client.wait() == 0
            assert all(m.get("id") != "slow" for m in client.received)


async def test_log_messages_only_at_or_above_the_requested_level() -> None:
    async with serve(SERVE_E2E) as client:
        with anyio.fail_after(10):
            await client.send(request("tools/call", 1, _meta=meta(**{"io.modelcontextprotocol/logLevel": "info"}), name="log_levels"))
            await client.response_to(1)
            levels = [m["params"]["level"] for m in client.received if m.get("method") == "notifications/message"]
            assert levels == ["info", "error"]
            start = len(client.received)
            await client.call("tools/call", 2, name="log_levels")
            assert all("method" not in m for m in client.received[start:])


async def test_eof_lets_in_flight_calls_finish_then_exits_zero() -> None:
    async with serve(SERVE_E2E) as client:
        with anyio.fail_after(10):
            await client.send(request("tools/call", 1, name="sleep_then_reply", arguments={"seconds": 0.2}))
            await client.close_stdin()
            reply = await client.response_to(1)
            assert reply["result"]["content"][0]["text"] == "slept 0.2"
            assert await client.wait() == 0


async def test_eof_cancels_calls_that_outlive_the_grace_period_and_exits_zero(tmp_path) -> None:
    marker = tmp_path / "cancelled"
    async with serve(SERVE_E2E) as client:
        with anyio.fail_after(10):
            await client.send(request("tools/call", 1, name="wait_for_cancel", arguments={"marker": str(marker)}))
            await client.call("tools/call", 2, name="echo", arguments={"text": "x"})
            await client.close_stdin()
            assert await client.wait() == 0
            assert marker.read_text() == "cancelled"


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
async def test_signals_exit_cleanly(signal_name: str) -> None:
    import signal

    async with serve() as client:
        with anyio.fail_after(10):
            await client.call("server/discover", 1)
            client.process.send_signal(getattr(signal, signal_name))
            assert await client.wait() == 0


async def test_version_flag_and_bad_target_message() -> None:
    version = subprocess.run([sys.executable, "-m", "mcpcore", "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("mcpcore ")
    missing = subprocess.run([sys.executable, "-m", "mcpcore", "run", "no/such/file.py"], capture_output=True, text=True)
    assert missing.returncode != 0
    assert "no/such/file.py" in missing.stderr and "no file" in missing.stderr
    assert missing.stderr.count("\n") == 1
    module = subprocess.run([sys.executable, "-m", "mcpcore", "run", "no_such_module_xyz"], capture_output=True, text=True)
    assert "no importable module" in module.stderr and module.stderr.count("\n") == 1


def test_regular_files_work_as_stdin_and_stdout(tmp_path) -> None:
    requests = tmp_path / "requests.jsonl"
    answers = tmp_path / "answers.jsonl"
    lines = [request("server/discover", 1), request("tools/call", 2, name="echo", arguments={"text": "from a file"})]
    requests.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        finished = subprocess.run(SERVE_ECHO, stdin=stdin, stdout=stdout, timeout=30)
    assert finished.returncode == 0
    replies = {m["id"]: m for m in map(orjson.loads, answers.read_bytes().splitlines())}
    assert replies[1]["result"]["supportedVersions"] == ALL_VERSIONS
    assert replies[2]["result"]["content"][0]["text"] == "from a file"


async def test_a_cancellation_naming_an_unusable_request_id_loses_no_other_request() -> None:
    async with serve(SERVE_E2E) as client:
        with anyio.fail_after(10):
            bad = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}}
            chunk = b"".join(
                orjson.dumps(m) + b"\n"
                for m in [bad, request("tools/call", 1, name="echo", arguments={"text": "one"}), bad,
                          request("tools/call", 2, name="echo", arguments={"text": "two"})]
            )
            await client.send_raw(chunk)  # one write: the four lines arrive in one read
            answers = {(await client.read())["id"] for _ in range(2)}
            assert answers == {1, 2}


async def test_a_tool_traceback_goes_to_stderr_through_logging_and_the_log_level_silences_it() -> None:
    for level, shown in (("info", True), ("critical", False)):
        async with serve([*SERVE_E2E, "--log-level", level], stderr=subprocess.PIPE) as client:
            with anyio.fail_after(10):
                reply = await client.call("tools/call", 1, name="fails", arguments={"text": "x1"})
                assert reply["result"]["isError"] is True
                await client.close_stdin()
                assert await client.wait() == 0
                assert client.process.stderr is not None and client.process.stdout is not None
                errors = b"".join([chunk async for chunk in client.process.stderr])
                assert b"".join([chunk async for chunk in client.process.stdout]) == b""
        assert (b"Traceback" in errors and b"tool failure marker x1" in errors) is shown, errors
        if shown:
            assert b"mcpcore: tool 'fails' raised" in errors


@pytest.mark.parametrize("loose", [True, 1.0, "1", [1]])
async def test_a_cancellation_matches_only_the_exact_request_id(tmp_path, loose) -> None:
    marker = tmp_path / "cancelled"
    async with serve(SERVE_E2E) as client:
        with anyio.fail_after(10):
            await client.send(request("tools/call", 1, name="sleep_then_reply", arguments={"seconds": 0.3}))
            await client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": loose}})
            reply = await client.response_to(1)
    assert reply["result"]["content"][0]["text"] == "slept 0.3" and not marker.exists()


@pytest.mark.parametrize("stdin", ["/dev/null", "closed"])
def test_stdin_that_cannot_be_polled_ends_the_session_cleanly(stdin: str) -> None:
    command = " ".join(SERVE_ECHO) + (" < /dev/null" if stdin == "/dev/null" else " <&-")
    result = subprocess.run(["sh", "-c", f"exec {command}"], capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert result.returncode == 0 and result.stdout == "" and "Traceback" not in result.stderr, result.stderr


async def test_the_portable_bridge_serves_pipes_when_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPCORE_PORTABLE", "1")  # the server process inherits it
    async with serve() as client:
        with anyio.fail_after(10):
            for i in range(20):
                await client.send(request("tools/call", i, name="echo", arguments={"text": f"b{i}"}))
            replies = [await client.response_to(i) for i in range(20)]
            await client.close_stdin()
            assert await client.wait() == 0
    assert [r["result"]["content"][0]["text"] for r in replies] == [f"b{i}" for i in range(20)]


async def test_a_cancellation_behind_a_held_request_is_still_read(tmp_path) -> None:
    marker = tmp_path / "cancelled"
    async with serve([*SERVE_E2E, "--max-in-flight", "1"]) as client:
        with anyio.fail_after(10):
            await client.send(request("tools/call", "blocker", name="wait_for_cancel", arguments={"marker": str(marker)}))
            await client.send(request("tools/call", "held", name="echo", arguments={"text": "after"}))
            await client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "blocker"}})
            reply = await client.response_to("held")  # the blocker never returns: only its cancellation frees the slot
            assert (await client.call("tools/call", "probe", name="echo", arguments={"text": "p"}))["id"] == "probe"
    assert reply["result"]["content"][0]["text"] == "after"
    assert not [m for m in client.received if m.get("id") == "blocker"]  # nothing is sent for a cancelled call


async def test_a_request_cancelled_in_the_same_read_as_it_arrived_frees_its_slot() -> None:
    async with serve([*SERVE_E2E, "--max-in-flight", "1"]) as client:
        with anyio.fail_after(10):
            lines = [request("tools/call", "early", name="sleep_then_reply", arguments={"seconds": 30}),
                     {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "early"}},
                     request("tools/call", "next", name="echo", arguments={"text": "served"})]
            await client.send_raw(b"".join(orjson.dumps(m) + b"\n" for m in lines))  # one write: likely one read
            reply = await client.response_to("next")
    assert reply["result"]["content"][0]["text"] == "served"


async def test_a_notification_or_response_nested_past_the_bound_gets_no_answer() -> None:
    deep = "[" * 130 + "]" * 130
    async with serve() as client:
        await client.send_raw(f'{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"x":{deep}}}}}\n'.encode())
        await client.send_raw(f'{{"jsonrpc":"2.0","id":"stray","result":{{"x":{deep}}}}}\n'.encode())
        await client.call("tools/list", 1)
    assert [m.get("id") for m in client.received] == [1]  # nothing was written for the two deep messages


def pipe_full(pipe: Any) -> bool:
    """Whether `pipe` holds as many unread bytes as it can (Linux; elsewhere, assumed so): a slow server's
    stdin stalls too, but only one whose stdout is full has stopped reading."""
    if not hasattr(fcntl, "F_GETPIPE_SZ"):
        return True
    unread = array.array("i", [0])
    fcntl.ioctl(pipe.fileno(), termios.FIONREAD, unread)
    return unread[0] >= fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ) - 4096  # less than one more answer fits


def test_closing_stdin_while_answers_wait_unread_ends_the_process_cleanly() -> None:
    """Reading pauses while stdout is full, so EOF itself cannot be read: the hang-up is seen instead."""
    line = orjson.dumps(request("tools/list", 1))
    process = subprocess.Popen(SERVE_ECHO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        assert process.stdin is not None and process.stderr is not None
        fd = process.stdin.fileno()
        os.set_blocking(fd, False)
        sent, stalled = 0, 0
        while (stalled < 20 or not pipe_full(process.stdout)) and sent < 100_000:  # until it has stopped reading
            try:
                os.write(fd, line.replace(b'"id":1', b'"id":%d' % (sent + 1)) + b"\n")
                sent, stalled = sent + 1, 0
            except BlockingIOError:
                stalled += 1
                time.sleep(0.05)
        assert sent < 100_000  # its answers fill the unread stdout, so it stopped reading
        process.stdin.close()
        assert process.wait(60) == 0
        assert "stdin closed while our answers wait unread" in process.stderr.read().decode()
    finally:
        process.kill()
        process.wait()
